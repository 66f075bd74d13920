// RUN: fa-opt %s --split-input-file --fa-tile-attention-backward --cse --fa-convert-tiled-attention-backward-to-gpu="vector-atomics=true" | FileCheck %s

// The warp-specialized backward key-block kernel (kernel_config schedule =
// warp_specialized, docs/HOPPER.md): the host makes TMA tensor maps of q,
// k, v and dout (64-column panels, 128-byte swizzle), the launch gets a
// producer warpgroup on top of the 8 consumer warps (384 threads), the
// producer puts K and V once and each iteration's Q and dO into 2-stage
// channels, and the consumers get / release them around the five GEMMs.
// lse2 and delta come through a ring of three [2, 64] f32 stages that the
// consumers fill by cp.async two iterations ahead; -lse2 / c and -delta
// start the S^T and dP^T accumulators (the wgmma chains accumulate onto
// them), so no per-element subtraction and no registers held for them
// during the GEMMs. The consumers meet only at named barrier 1 (256
// threads) before the dQ GEMM, whose dS^T alternates between two buffers;
// the ring's next stage has landed before it.
//
// Shared memory past the 1024-byte alignment pad: K 128x128 at 0, V at
// 32 KiB, the Q ring 2 x 64x128 at 64 KiB, the dO ring at 96 KiB, dS^T
// 2 x 128x64 at 128 KiB, the lse2 / delta ring at 160 KiB, the dQ staging
// (per consumer warpgroup two 64 x 32 f32 panels) at 162 KiB: 199,680
// bytes with the pad.

!q = memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!t = tensor<?x?x?x128xbf16>
!lt = tensor<?x?x?xf32>

// CHECK-LABEL: func.func @ws_causal_bf16_d128
// CHECK:         gpu.launch {{.*}} function(@ws_causal_bf16_d128_preprocess_kernel) {
// The split GQA group, decided at run time: G >= 2 and either fewer
// blocks than 1.5 waves or (D = 128) G >= 8 and at least 32 key blocks give
// the accumulators Nk rows (else none) and y Hq blocks.
// CHECK:         %[[SMS:.*]] = fagpu.host_multiprocessor_count
// CHECK-NEXT:    arith.muli %[[SMS]], %c3 : index
// CHECK:         %[[SHORT:.*]] = arith.maxsi %{{.*}}, %c0{{.*}} : index
// CHECK:         %[[G8:.*]] = arith.minsi %{{.*}}, %c1{{.*}} : index
// CHECK:         %[[KB32:.*]] = arith.minsi %{{.*}}, %c1{{.*}} : index
// CHECK-NEXT:    %[[WIDE:.*]] = arith.muli %[[G8]], %[[KB32]] : index
// CHECK-NEXT:    %[[EITHER:.*]] = arith.addi %[[SHORT]], %[[WIDE]] : index
// CHECK-NEXT:    %[[FEW:.*]] = arith.minsi %[[EITHER]], %c1{{.*}} : index
// CHECK-NEXT:    %[[SPLITH:.*]] = arith.muli %{{.*}}, %[[FEW]] : index
// CHECK:         %[[ACCROWS:.*]] = arith.muli %{{.*}}, %[[SPLITH]] : index
// CHECK-NEXT:    %[[DKACC:.*]] = memref.alloc(%{{.*}}, %{{.*}}, %[[ACCROWS]]) {fa.workspace = "dk_accum", fa.workspace_zeroed} : memref<?x?x?x128xf32>
// CHECK-NEXT:    memref.alloc(%{{.*}}, %{{.*}}, %[[ACCROWS]]) {fa.workspace = "dv_accum", fa.workspace_zeroed} : memref<?x?x?x128xf32>
// CHECK:         %[[QMAP:.*]] = fagpu.host_tensor_map %arg0 as !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x64xbf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
// CHECK-NEXT:    %[[KMAP:.*]] = fagpu.host_tensor_map %arg1 as !nvgpu.tensormap.descriptor<tensor = memref<1x1x128x64xbf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
// CHECK-NEXT:    %[[VMAP:.*]] = fagpu.host_tensor_map %arg2 as !nvgpu.tensormap.descriptor<tensor = memref<1x1x128x64xbf16
// CHECK-NEXT:    %[[DOMAP:.*]] = fagpu.host_tensor_map %arg4 as !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x64xbf16
// The dQ accumulator's map: 64 x 32 f32 boxes (128 bytes wide, swizzled).
// CHECK-NEXT:    %[[DQMAP:.*]] = fagpu.host_tensor_map %{{.*}} as !nvgpu.tensormap.descriptor<tensor = memref<1x1x64x32xf32, #gpu.address_space<workgroup>>, swizzle = swizzle_128b
// CHECK:         %[[SMEM:.*]] = arith.constant 199680 : i32
// CHECK:         gpu.launch {{.*}} threads({{.*}}) in (%{{.*}} = %c384, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) dynamic_shared_memory_size %[[SMEM]] module(@ws_causal_bf16_d128_kernels) function(@ws_causal_bf16_d128_kernel) {
// A split GQA group: the dK / dV accumulators have rows.
// CHECK:           %[[ROWS:.*]] = memref.dim %[[DKACC]], %c2{{.*}} : memref<?x?x?x128xf32>
// CHECK-NEXT:      %[[SPLIT:.*]] = arith.cmpi ne, %[[ROWS]], %c0{{.*}} : index
// The launch order: every (kv head, batch)'s key block 0 first, then 1,
// ... on small GQA grids (G >= 2), except for 4 <= G < 8 with at most 32
// key blocks, which keep the plain order (with query blocks outer below).
// CHECK:           %[[LKB:.*]] = arith.divui %{{.*}}, %c1{{.*}} : index
// CHECK:           %[[SMALL:.*]] = arith.cmpi uge, %{{.*}}, %c2{{.*}} : index
// CHECK-NEXT:      %[[ANYG:.*]] = arith.andi %{{.*}}, %[[SMALL]] : i1
// CHECK:           %[[LFEW:.*]] = arith.cmpi ule, %[[LKB]], %c32{{.*}} : index
// CHECK:           %[[LMID:.*]] = arith.andi %[[LFEW]], %{{.*}} : i1
// CHECK:           %[[NOTMID:.*]] = arith.xori %[[LMID]], %true : i1
// CHECK-NEXT:      %[[REORDER:.*]] = arith.andi %[[ANYG]], %[[NOTMID]] : i1
// A split group: no reorder; y counts query heads, so the kv head is y /
// G and the block's head y % G.
// CHECK:           %[[NOTSPLIT:.*]] = arith.xori %[[SPLIT]], %true{{.*}} : i1
// CHECK-NEXT:      %{{.*}} = arith.andi %[[REORDER]], %[[NOTSPLIT]] : i1
// CHECK:           %[[KVH:.*]] = arith.divui %{{.*}}, %{{.*}} : i32
// CHECK:           %[[KVHI:.*]] = arith.index_castui %[[KVH]] : i32 to index
// CHECK-NEXT:      %[[HEADI:.*]] = arith.index_castui %{{.*}} : i32 to index
// CHECK-NEXT:      %{{.*}} = arith.select %[[SPLIT]], %[[KVHI]], %{{.*}} : index
// CHECK:           %[[HEADOFF:.*]] = arith.select %[[SPLIT]], %[[HEADI]], %c0{{.*}} : index
// The lse2 / delta ring, then the dQ staging.
// CHECK:           %[[RING:.*]] = memref.view {{.*}} to memref<384xf32, #gpu.address_space<workgroup>>
// CHECK:           memref.view {{.*}} to memref<8192xf32, #gpu.address_space<workgroup>>
// The tile's loop order (the dQ warp's loop below): query blocks outer for
// G >= 8 with at most 64 key blocks, or 4 <= G < 8 with at most 32.
// CHECK:           %[[KBS:.*]] = arith.ceildivsi
// CHECK:           %[[FEWKB:.*]] = arith.cmpi ule, %[[KBS]], %c64{{.*}} : index
// CHECK:           %[[BIGG:.*]] = arith.cmpi uge, %[[GROUP:.*]], %c8{{.*}} : index
// CHECK-NEXT:      %[[BIG:.*]] = arith.andi %[[FEWKB]], %[[BIGG]] : i1
// CHECK:           %[[FEWERKB:.*]] = arith.cmpi ule, %[[KBS]], %c32{{.*}} : index
// CHECK:           %[[G4:.*]] = arith.cmpi uge, %[[GROUP]], %c4{{.*}} : index
// CHECK:           %[[G8:.*]] = arith.cmpi ult, %[[GROUP]], %c8{{.*}} : index
// CHECK-NEXT:      %[[MIDG:.*]] = arith.andi %[[G4]], %[[G8]] : i1
// CHECK-NEXT:      %[[MID:.*]] = arith.andi %[[FEWERKB]], %[[MIDG]] : i1
// CHECK-NEXT:      %[[EITHER:.*]] = arith.ori %[[BIG]], %[[MID]] : i1
// CHECK:           %[[NOTSPLIT2:.*]] = arith.xori %[[SPLIT]], %true{{.*}} : i1
// CHECK-NEXT:      %[[QOUTER:.*]] = arith.andi %[[EITHER]], %[[NOTSPLIT2]] : i1
// CHECK:           %[[QRING:.*]] = memref.view {{.*}} to memref<2x2x1x1x64x64xbf16, #gpu.address_space<workgroup>>
// CHECK-NEXT:      %[[QD:.*]] = faptx.tensormap_param %[[QMAP]]
// CHECK-NEXT:      %[[QCH:.*]] = fagpu.channel_create %[[QRING]] arrivals 256 : {{.*}} -> !fagpu.channel<2 x memref<2x1x1x64x64xbf16, #gpu.address_space<workgroup>>>
// CHECK:           %[[KRING:.*]] = memref.view {{.*}} to memref<1x2x1x1x128x64xbf16, #gpu.address_space<workgroup>>
// CHECK-NEXT:      %[[KD:.*]] = faptx.tensormap_param %[[KMAP]]
// CHECK-NEXT:      %[[KCH:.*]] = fagpu.channel_create %[[KRING]] arrivals 256
// CHECK:           %[[VD:.*]] = faptx.tensormap_param %[[VMAP]]
// CHECK-NEXT:      %[[VCH:.*]] = fagpu.channel_create
// CHECK:           %[[DOD:.*]] = faptx.tensormap_param %[[DOMAP]]
// CHECK-NEXT:      %[[DOCH:.*]] = fagpu.channel_create
// CHECK:           %[[DQD:.*]] = faptx.tensormap_param %[[DQMAP]]
// CHECK:           fagpu.warp_specialize consumer_warpgroups 2 registers(24, 240) producer {
// Producer warp 1, the dQ warp: per iteration and consumer warpgroup, wait
// at its "full" barrier (128 + 32 threads), add its staged 64 x 64 unit to
// dQ with two bulk tensor reductions, wait for their reads, arrive at its
// "empty" barrier; before exiting, wait for the reductions to complete.
// Causal, D >= 128: with G >= 8 query heads per kv head and at most 64 key
// blocks, iteration t is query block nQB - 1 - t / G and head
// (t % G + key block % G) % G, else head t / nQB and query block t % nQB;
// one i32 division either way.
// CHECK:             scf.for %{{.*}} = %{{.*}} to %[[TOTAL:.*]] step
// CHECK-NEXT:          %[[DIVISOR:.*]] = arith.select %[[QOUTER]], %[[GROUP]], %[[NQB:.*]] : index
// CHECK:               arith.divui %{{.*}}, %{{.*}} : i32
// CHECK:               %[[ROT:.*]] = arith.addi %{{.*}}, %{{.*}} : index
// CHECK-NEXT:          %[[WRAP:.*]] = arith.subi %[[ROT]], %[[GROUP]] : index
// CHECK-NEXT:          %[[PAST:.*]] = arith.cmpi uge, %[[ROT]], %[[GROUP]] : index
// CHECK-NEXT:          %[[HEADG:.*]] = arith.select %[[PAST]], %[[WRAP]], %[[ROT]] : index
// CHECK-NEXT:          arith.select %[[QOUTER]], %[[HEADG]], %{{.*}} : index
// CHECK:               %[[LASTQB:.*]] = arith.subi %[[NQB]], %c1{{.*}} : index
// CHECK-NEXT:          %[[QBG:.*]] = arith.subi %[[LASTQB]], %{{.*}} : index
// CHECK-NEXT:          arith.select %[[QOUTER]], %[[QBG]], %{{.*}} : index
// A split group's block adds its own head of the group.
// CHECK-NEXT:          arith.addi %{{.*}}, %[[HEADOFF]] : index
// CHECK:               nvvm.barrier id = %{{.*}} number_of_threads = %c160_i32
// CHECK:                 nvvm.cp.async.bulk.tensor.reduce %{{.*}}, %{{.*}}, box[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] {redKind = #nvvm.tma_redux_kind<add>}
// CHECK:                 nvvm.cp.async.bulk.tensor.reduce
// CHECK-NEXT:            nvvm.cp.async.bulk.commit.group
// CHECK-NEXT:            nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK:                 nvvm.barrier.arrive id = %{{.*}} number_of_threads = %c160_i32
// CHECK:             nvvm.cp.async.bulk.wait_group 0{{$}}
// Producer warp 0: K and V once, then Q and dO of every iteration.
// CHECK:             fagpu.channel_put_tma %[[KCH]][%[[Z:.*]]], %[[KD]][%[[Z]], %[[KROW:.*]], %[[KH:.*]], %[[B:.*]]] :
// CHECK-NEXT:        fagpu.channel_put_tma %[[VCH]][%[[Z]]], %[[VD]][%[[Z]], %[[KROW]], %[[KH]], %[[B]]] :
// CHECK:             scf.for %[[T:.*]] = %[[Z]] to %[[TOTAL]] step
// CHECK:               fagpu.channel_put_tma %[[QCH]][%[[T]]], %[[QD]][%[[Z]], %[[QROW:.*]], %[[QH:.*]], %[[B]]] :
// CHECK-NEXT:          fagpu.channel_put_tma %[[DOCH]][%[[T]]], %[[DOD]][%[[Z]], %[[QROW]], %[[QH]], %[[B]]] :
// CHECK:           } consumers {
// CHECK-NEXT:        fagpu.channel_get %[[KCH]][%[[Z]]]
// CHECK-NEXT:        fagpu.channel_get %[[VCH]][%[[Z]]]
// 1 / c for the fold (c at least 2^-100: lse2 / c stays finite).
// CHECK:             %[[C:.*]] = arith.maximumf
// CHECK:             %[[RC:.*]] = arith.divf %{{.*}}, %[[C]] : f32
// The ring's first two stages, landed and every consumer's before the loop.
// CHECK:             nvgpu.device_async_copy %{{.*}}, %[[RING]][%{{.*}}], 4 {bypassL1}
// CHECK:             nvvm.cp.async.commit.group
// CHECK:             nvvm.cp.async.commit.group
// CHECK-NEXT:        nvvm.cp.async.wait.group 1
// CHECK:             nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK:             %{{.*}}:32 = scf.for %[[CT:.*]] = %{{.*}} to %[[TOTAL]] step
// CHECK-NEXT:          fagpu.channel_get %[[QCH]][%[[CT]]]
// CHECK-NEXT:          fagpu.channel_get %[[DOCH]][%[[CT]]]
// This iteration's columns (two per lane) from the ring; the copies of the
// one two iterations on.
// CHECK:               vector.load %[[RING]][%{{.*}}] : memref<384xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK:               nvgpu.device_async_copy %{{.*}}, %[[RING]]
// CHECK:               nvvm.cp.async.commit.group
// -lse2 / c and -delta: the accumulators' initial values.
// CHECK:               arith.mulf %{{.*}}, %{{.*}} : vector<2xf32>
// CHECK-NEXT:          arith.negf
// CHECK:               nvvm.wgmma.fence.aligned
// CHECK:               nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>]
// S^T and dP^T in their own groups: P is computed while dP^T runs (exp2
// after the first wait), dS while dV runs.
// CHECK:               nvvm.wgmma.commit.group.sync.aligned
// CHECK:               nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:          nvvm.wgmma.wait.group.sync.aligned 1
// CHECK:               math.exp2
// CHECK:               faptx.wgmma_mma_rs
// CHECK:               nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:          nvvm.wgmma.wait.group.sync.aligned 1
// CHECK-NOT:           math.exp2
// The two dS^T buffers (16 KiB apart), then the consumers' barrier.
// CHECK:               nvvm.cp.async.wait.group 1
// CHECK:               %[[ODD:.*]] = arith.remui %[[CT]], %c2
// CHECK:               nvvm.fence.proxy
// CHECK:               nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// dQ's GEMM, then dK's (register A): waiting for dQ alone leaves dK
// running while dQ is staged for the dQ warp (its "empty" barrier, the
// fragment stores, its "full" barrier); no reductions in the consumers.
// CHECK:               nvvm.wgmma.mma_async
// CHECK:               nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:          faptx.wgmma_mma_rs
// CHECK:               nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:          nvvm.wgmma.wait.group.sync.aligned 1
// CHECK-NOT:           faptx.red_global_add
// CHECK:               nvvm.barrier id = %{{.*}} number_of_threads = %c160_i32
// CHECK:               vector.store
// CHECK:               nvvm.fence.proxy
// CHECK:               nvvm.barrier.arrive id = %{{.*}} number_of_threads = %c160_i32
// CHECK-NOT:           faptx.red_global_add
// CHECK:               nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:               fagpu.channel_release %[[QCH]][%[[CT]]]
// CHECK-NEXT:          fagpu.channel_release %[[DOCH]][%[[CT]]]
// CHECK:               scf.yield
// The epilogue: a split group adds dK and dV to the f32 accumulators (8
// bytes per reduction), else stores them.
// CHECK:             scf.if %[[SPLIT]] {
// CHECK:               faptx.red_global_add
// CHECK:             } else {
// CHECK:               vector.store
// CHECK:         gpu.launch {{.*}} function(@ws_causal_bf16_d128_dq_convert_kernel) {
// CHECK:         gpu.launch {{.*}} function(@ws_causal_bf16_d128_dkv_convert_kernel) {
// CHECK:           scf.if

func.func @ws_causal_bf16_d128(%q: !q, %k: !q, %v: !q, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !q, %dv: !q) {
  %qt = bufferization.to_tensor %q restrict : !q to !t
  %kt = bufferization.to_tensor %k restrict : !q to !t
  %vt = bufferization.to_tensor %v restrict : !q to !t
  %ot = bufferization.to_tensor %out restrict : !q to !t
  %dot = bufferization.to_tensor %dout restrict : !q to !t
  %lt = bufferization.to_tensor %lse restrict : !l to !lt
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot mask<causal> {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized>} : (!t, !t, !t, !t, !lt, !t) -> (!t, !t, !t)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !q) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!t, !q) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!t, !q) -> ()
  return
}

// -----

// Deterministic: tiled with `fa.dq_accumulation = "ordered"`, the
// key-block kernel still adds dQ, in a fixed order. The preprocessing
// zeroes one i32 semaphore per query block (the dq_order workspace); for
// each query block the dQ warp's leader waits (acquire load) until the key
// block above has added, adds, waits for the reductions to complete (not
// only to read the staging area) and stores its own turn (release). A
// semaphore that never turns traps instead of hanging. No dQ kernel.
// Without a mask every key block adds into every query block: with at most
// 64 key blocks, and fewer than the launch device's multiprocessors (SMS, a
// host value passed in: all of a head's blocks resident at once), each
// starts at its own query block (ROT; START = j * nQB / nKB) and waits for
// its rank in that rotated order instead of for the key block above.

!q = memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!t = tensor<?x?x?x64xf16>
!lt = tensor<?x?x?xf32>

// CHECK-LABEL: func.func @ws_deterministic_f16_d64
// CHECK:         %[[ORDER:.*]] = memref.alloc({{.*}}) {fa.workspace = "dq_order"} : memref<?x?x?xi32>
// CHECK:         gpu.launch {{.*}} function(@ws_deterministic_f16_d64_preprocess_kernel) {
// CHECK:           memref.store %{{.*}}, %[[ORDER]][{{.*}}] : memref<?x?x?xi32>
// CHECK:         %[[SMS:.*]] = fagpu.host_multiprocessor_count
// CHECK:         gpu.launch {{.*}} function(@ws_deterministic_f16_d64_kernel) {
// CHECK:           %[[FEWER:.*]] = arith.subi %[[SMS]], %{{.*}} : index
// CHECK:           %[[LIMIT:.*]] = arith.minui %[[FEWER]], %{{.*}} : index
// CHECK-NEXT:      %[[ROT:.*]] = arith.cmpi ule, %[[NKB:.*]], %[[LIMIT]] : index
// CHECK-NEXT:      arith.muli
// CHECK-NEXT:      %[[START:.*]] = arith.divui %{{.*}}, %[[NKB]] : index
// CHECK-NEXT:      arith.select %[[ROT]], %[[START]], %{{.*}} : index
// CHECK:           fagpu.warp_specialize consumer_warpgroups 1 registers(24, 240) producer {
// CHECK:             %[[WAITS:.*]] = arith.ori %{{.*}}, %[[ROT]] : i1
// CHECK:             %[[WANT:.*]] = arith.select %[[ROT]], %{{.*}}, %{{.*}} : index
// CHECK:             arith.index_cast %[[WANT]] : index to i32
// CHECK:             scf.if %[[WAITS]]
// CHECK:             scf.while
// CHECK:               llvm.load %{{.*}} atomic syncscope("device") acquire
// CHECK:             llvm.intr.trap
// CHECK:             nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.global>}
// CHECK:             nvvm.cp.async.bulk.tensor.reduce
// CHECK:             nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK:             nvvm.cp.async.bulk.wait_group 0{{$}}
// CHECK-NEXT:        nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.global>}
// CHECK-NEXT:        llvm.store %{{.*}} atomic syncscope("device") release
// CHECK:           } consumers {
// CHECK:         gpu.launch {{.*}} function(@ws_deterministic_f16_d64_dq_convert_kernel) {
// CHECK-NOT:     function(@ws_deterministic_f16_d64_dq_kernel)
// (A fixed dQ order keeps its groups whole: no split, no dK / dV conversion.)
// CHECK-NOT:     function(@ws_deterministic_f16_d64_dkv_convert_kernel)

func.func @ws_deterministic_f16_d64(%q: !q, %k: !q, %v: !q, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !q, %dv: !q) {
  %qt = bufferization.to_tensor %q restrict : !q to !t
  %kt = bufferization.to_tensor %k restrict : !q to !t
  %vt = bufferization.to_tensor %v restrict : !q to !t
  %ot = bufferization.to_tensor %out restrict : !q to !t
  %dot = bufferization.to_tensor %dout restrict : !q to !t
  %lt = bufferization.to_tensor %lse restrict : !l to !lt
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot deterministic {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 64, warps = 4, stages = 2, schedule = warp_specialized>} : (!t, !t, !t, !t, !lt, !t) -> (!t, !t, !t)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !q) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!t, !q) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!t, !q) -> ()
  return
}

// -----

// 128-query blocks (the D = 64 WS tiles): the ring holds 3 x 2 x 128
// columns; delta starts the dP^T accumulators, but lse2 is read from the
// ring where it is used (S^T starts at zero): folding it spills there. The
// iteration is divided out in i32 and P is ex2.approx.ftz (tight
// registers).

!q = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!t = tensor<?x?x?x64xbf16>
!lt = tensor<?x?x?xf32>

// CHECK-LABEL: func.func @ws_causal_bf16_d64_q128
// CHECK:         gpu.launch {{.*}} function(@ws_causal_bf16_d64_q128_kernel) {
// CHECK:           %[[RING:.*]] = memref.view {{.*}} to memref<768xf32, #gpu.address_space<workgroup>>
// CHECK:           } consumers {
// CHECK:             nvgpu.device_async_copy %{{.*}}, %[[RING]][%{{.*}}], 4 {bypassL1}
// CHECK:             scf.for
// CHECK-NOT:           vector.load %{{.*}} : memref<?x?x?xf32>
// CHECK:               vector.load %[[RING]]
// CHECK:               arith.divui %{{.*}}, %{{.*}} : i32
// CHECK:               nvgpu.device_async_copy %{{.*}}, %[[RING]]
// CHECK:               nvvm.wgmma.fence.aligned
// CHECK:               nvvm.wgmma.mma_async {{.*}} D[<f32>, <zero>]
// CHECK-NOT:           D[<f32>, <zero>]
// CHECK:               nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:               vector.load %[[RING]]
// CHECK:               faptx.ex2
// CHECK:         gpu.launch {{.*}} function(@ws_causal_bf16_d64_q128_dq_convert_kernel) {

func.func @ws_causal_bf16_d64_q128(%q: !q, %k: !q, %v: !q, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !q, %dv: !q) {
  %qt = bufferization.to_tensor %q restrict : !q to !t
  %kt = bufferization.to_tensor %k restrict : !q to !t
  %vt = bufferization.to_tensor %v restrict : !q to !t
  %ot = bufferization.to_tensor %out restrict : !q to !t
  %dot = bufferization.to_tensor %dout restrict : !q to !t
  %lt = bufferization.to_tensor %lse restrict : !l to !lt
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot mask<causal> {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized>} : (!t, !t, !t, !t, !lt, !t) -> (!t, !t, !t)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !q) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!t, !q) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!t, !q) -> ()
  return
}

// -----

// tile_scheduler = persistent: min(key blocks x heads x batches, SMS)
// blocks, each walking its tiles (fagpu.host_multiprocessor_count is the
// launch device's count). Every role has its own tile loop carrying the
// Q / dO items of the earlier tiles and the tile count: K and V are item
// `tile count` of their one-stage channels, which the consumers release
// after a tile's last GEMM and before its dK / dV stores; the dQ warp
// waits for its reductions once, after the last tile.

!q = memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!t = tensor<?x?x?x128xbf16>
!lt = tensor<?x?x?xf32>

// CHECK-LABEL: func.func @persistent_causal_bf16_d128
// CHECK:         %[[SMS:.*]] = fagpu.host_multiprocessor_count
// CHECK-NEXT:    %[[GRID:.*]] = arith.minui %{{.*}}, %[[SMS]] : index
// CHECK:         gpu.launch blocks({{.*}}) in (%{{.*}} = %[[GRID]], %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads({{.*}}) in (%{{.*}} = %c384, {{.*}} function(@persistent_causal_bf16_d128_kernel) {
// CHECK:           %[[KCH:.*]] = fagpu.channel_create {{.*}} -> !fagpu.channel<1 x memref<2x1x1x128x64xbf16
// CHECK:           %[[VCH:.*]] = fagpu.channel_create {{.*}} -> !fagpu.channel<1 x memref<2x1x1x128x64xbf16
// CHECK:           fagpu.warp_specialize consumer_warpgroups 2 registers(24, 240) producer {
// The dQ warp. (The tile loops count in i32.)
// CHECK:             scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (i32, i32) : i32 {
// CHECK:               nvvm.cp.async.bulk.tensor.reduce
// CHECK:               nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK:             nvvm.cp.async.bulk.wait_group 0{{$}}
// The load warp.
// CHECK:             scf.for {{.*}} iter_args(%[[PITEMS:.*]] = %{{.*}}, %[[PTILE:.*]] = %{{.*}}) -> (i32, i32) : i32 {
// CHECK:               %[[PKV:.*]] = arith.index_castui %[[PTILE]] : i32 to index
// CHECK-NEXT:          fagpu.channel_put_tma %[[KCH]][%[[PKV]]]
// CHECK-NEXT:          fagpu.channel_put_tma %[[VCH]][%[[PKV]]]
// CHECK:               scf.for %{{.*}} = {{.*}} {
// CHECK:                 %[[PSUM:.*]] = arith.addi %[[PITEMS]], %{{.*}} : i32
// CHECK-NEXT:            %[[PITEM:.*]] = arith.index_castui %[[PSUM]] : i32 to index
// CHECK-NEXT:            fagpu.channel_put_tma %{{.*}}[%[[PITEM]]]
// CHECK:           } consumers {
// CHECK:             scf.for {{.*}} iter_args(%[[CITEMS:.*]] = %{{.*}}, %[[CTILE:.*]] = %{{.*}}) -> (i32, i32) : i32 {
// CHECK:               %[[CKV:.*]] = arith.index_castui %[[CTILE]] : i32 to index
// CHECK-NEXT:          fagpu.channel_get %[[KCH]][%[[CKV]]]
// CHECK:               fagpu.channel_get %[[VCH]]
// CHECK:               scf.for %{{.*}} = {{.*}} iter_args(
// CHECK:                 %[[CSUM:.*]] = arith.addi %[[CITEMS]], %{{.*}} : i32
// CHECK-NEXT:            %[[CITEM:.*]] = arith.index_castui %[[CSUM]] : i32 to index
// CHECK-NEXT:            fagpu.channel_get %{{.*}}[%[[CITEM]]]
// CHECK:               fagpu.channel_release %[[KCH]]
// CHECK:               fagpu.channel_release %[[VCH]]
// CHECK:               vector.store
// CHECK:               nvvm.cp.async.wait.group 0
// CHECK:               scf.yield
// (Persistent blocks walk tiles of whole groups: no split.)
// CHECK-NOT:     function(@persistent_causal_bf16_d128_dkv_convert_kernel)

func.func @persistent_causal_bf16_d128(%q: !q, %k: !q, %v: !q, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !q, %dv: !q) {
  %qt = bufferization.to_tensor %q restrict : !q to !t
  %kt = bufferization.to_tensor %k restrict : !q to !t
  %vt = bufferization.to_tensor %v restrict : !q to !t
  %ot = bufferization.to_tensor %out restrict : !q to !t
  %dot = bufferization.to_tensor %dout restrict : !q to !t
  %lt = bufferization.to_tensor %lse restrict : !l to !lt
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot mask<causal> {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized, tile_scheduler = persistent>} : (!t, !t, !t, !t, !lt, !t) -> (!t, !t, !t)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !q) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!t, !q) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!t, !q) -> ()
  return
}

// -----

// A sliding window (bounded on both sides) does not split its GQA groups:
// its key blocks see few, similar query ranges. No dK / dV accumulators.

!q = memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!t = tensor<?x?x?x128xbf16>
!lt = tensor<?x?x?xf32>

// CHECK-LABEL: func.func @ws_window_bf16_d128
// CHECK-NOT:     fa.workspace = "dk_accum"
// CHECK:         function(@ws_window_bf16_d128_kernel)
// CHECK:         function(@ws_window_bf16_d128_dq_convert_kernel)
// CHECK-NOT:     function(@ws_window_bf16_d128_dkv_convert_kernel)

func.func @ws_window_bf16_d128(%q: !q, %k: !q, %v: !q, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !q, %dv: !q) {
  %qt = bufferization.to_tensor %q restrict : !q to !t
  %kt = bufferization.to_tensor %k restrict : !q to !t
  %vt = bufferization.to_tensor %v restrict : !q to !t
  %ot = bufferization.to_tensor %out restrict : !q to !t
  %dot = bufferization.to_tensor %dout restrict : !q to !t
  %lt = bufferization.to_tensor %lse restrict : !l to !lt
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot mask<window 255, 0> {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized>} : (!t, !t, !t, !t, !lt, !t) -> (!t, !t, !t)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !q) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!t, !q) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!t, !q) -> ()
  return
}
