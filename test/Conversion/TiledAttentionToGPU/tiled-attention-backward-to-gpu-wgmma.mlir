// RUN: fa-opt %s --split-input-file --fa-tile-attention-backward="block-q=64 block-kv=64" --cse --fa-convert-tiled-attention-backward-to-gpu="warps=4 vector-atomics=true wgmma=true" | FileCheck %s

// The Hopper key-block kernel: Bc = 64 = 16 * 4 warps, one warpgroup owning
// the block's 64 keys; its GEMMs are warpgroup MMAs (sm_90a) on 128-byte
// swizzled panel tiles. The preprocessing and dQ kernels are unchanged.

// Fast mode, causal bf16, D = 128. Shared memory, from the first 1024-byte
// boundary: K, V 64x128 | Q, dO 2x64x128 | dS^T 64x64 (bf16) = 104 KiB,
// then lse2, delta 2x64 and the dQ staging area 4 warps x 16 x (64 + 4)
// (f32), plus 1 KiB of slack for the alignment.

!q = memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!t = tensor<?x?x?x128xbf16>
!lt = tensor<?x?x?xf32>

// CHECK-LABEL: func.func @fast_causal_bf16_d128
// CHECK-NOT:     scf.forall
// CHECK:         %[[ACC:.*]] = memref.alloc({{.*}}) {fa.workspace = "dq_accum"} : memref<?x?x?x128xf32>
// CHECK:         gpu.launch {{.*}} function(@fast_causal_bf16_d128_preprocess_kernel) {
// CHECK:         %[[SMEM:.*]] = arith.constant 125952 : i32
// CHECK:         gpu.launch {{.*}} threads({{.*}}) in (%{{.*}} = %c128{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) dynamic_shared_memory_size %[[SMEM]] module(@fast_causal_bf16_d128_kernels) function(@fast_causal_bf16_d128_kernel) {
// The padding up to the next 1024-byte boundary: (1024 - ptr % 1024) % 1024.
// CHECK:           %[[BASE:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK-NEXT:      %[[PTR:.*]] = memref.extract_aligned_pointer_as_index %[[BASE]]
// CHECK-NEXT:      %[[C1024:.*]] = arith.constant 1024 : index
// CHECK-NEXT:      %[[MOD:.*]] = arith.remui %[[PTR]], %[[C1024]] : index
// CHECK:           %[[GAP:.*]] = arith.subi %{{.*}}, %[[MOD]] : index
// CHECK:           %[[PAD:.*]] = arith.remui %[[GAP]], %{{.*}} : index
// Panel tiles (rows x cols elements, no padding), each at a 1024-byte
// boundary past the pad.
// CHECK:           memref.view %[[BASE]]{{.*}} to memref<8192xbf16, #gpu.address_space<workgroup>>
// CHECK:           memref.view %[[BASE]]{{.*}} to memref<8192xbf16, #gpu.address_space<workgroup>>
// CHECK:           memref.view %[[BASE]]{{.*}} to memref<16384xbf16, #gpu.address_space<workgroup>>
// CHECK:           memref.view %[[BASE]]{{.*}} to memref<16384xbf16, #gpu.address_space<workgroup>>
// CHECK:           %[[DS:.*]] = memref.view %[[BASE]]{{.*}} to memref<4096xbf16, #gpu.address_space<workgroup>>
// Descriptors (128-byte swizzle, 1024-byte stride between 8-row groups):
// K and V as K-major A, Q and dO as K-major B (leading offset unused: 16);
// Q and dO as MN-major B (leading offset = the 16 KiB panel stride of their
// 128 rows); K as MN-major B and dS^T as MN-major A (8 KiB: 64 rows).
// CHECK:           arith.constant 4611686293305360384 : i64
// CHECK-NEXT:      %[[KA:.*]] = arith.ori %{{.*}}, %{{.*}} : i64
// CHECK:           arith.constant 4611686293305360384 : i64
// CHECK-NEXT:      %[[VA:.*]] = arith.ori %{{.*}}, %{{.*}} : i64
// CHECK-COUNT-2:   arith.constant 4611686293305360384 : i64
// CHECK-COUNT-2:   arith.constant 4611686293372403712 : i64
// CHECK:           arith.constant 4611686293338849280 : i64
// CHECK-NEXT:      %[[KMN:.*]] = arith.ori %{{.*}}, %{{.*}} : i64
// CHECK:           arith.constant 4611686293338849280 : i64
// CHECK-NEXT:      %[[DSA:.*]] = arith.ori %{{.*}}, %{{.*}} : i64
// CHECK:           memref.view %[[BASE]]{{.*}} to memref<128xf32, #gpu.address_space<workgroup>>
// CHECK:           memref.view %[[BASE]]{{.*}} to memref<128xf32, #gpu.address_space<workgroup>>
// CHECK:           %[[STAGE:.*]] = memref.view %[[BASE]]{{.*}} to memref<4352xf32, #gpu.address_space<workgroup>>
// The (head, query block) loop carries dK and dV: 2 x 16 C fragments.
// CHECK:           %{{.*}}:32 = scf.for
// CHECK:             nvvm.cp.async.wait.group 0
// CHECK-NEXT:        nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT:        gpu.barrier
// CHECK:             %[[KAO:.*]] = faptx.opaque %[[KA]]
// CHECK-NEXT:        %[[VAO:.*]] = faptx.opaque %[[VA]]
// S^T = K Q^T, then dP^T = V dO^T: two K-major chains of D / 16 = 8 k-steps
// (N = Br = 64 queries), each starting from a zero accumulator, under one
// commit and wait.
// CHECK-NEXT:        nvvm.wgmma.fence.aligned
// CHECK:             nvvm.wgmma.mma_async %[[KAO]], %{{.*}}, %{{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-COUNT-7:     nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK:             nvvm.wgmma.mma_async %[[VAO]], %{{.*}}, %{{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-COUNT-7:     nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-NOT:         nvvm.wgmma.mma_async
// CHECK:             nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:        nvvm.wgmma.wait.group.sync.aligned 0
// P^T and dS^T from lse2 / delta in shared memory, with the causal mask.
// CHECK:             vector.load
// CHECK:             math.exp2
// CHECK:             arith.cmpi sle
// CHECK:             arith.select
// dV += P^T dO, then dK += dS^T Q: Br / 16 = 4 register-A k-steps each
// (N = 128: 64 accumulators, A from the packed P^T / dS^T registers). Committed
// but not waited for: the dQ MMAs run behind them.
// CHECK:             nvvm.wgmma.fence.aligned
// CHECK-COUNT-8:     faptx.wgmma_mma_rs n = 128, bf16,
// CHECK-NOT:         faptx.wgmma_mma_rs
// CHECK:             nvvm.wgmma.commit.group.sync.aligned
// CHECK-NOT:         nvvm.wgmma.wait
// dS^T to shared memory straight from the packed bf16x2 A registers, then
// fence + barrier: the dQ MMAs of every warpgroup read it (async proxy).
// CHECK:             llvm.bitcast %{{.*}} : i32 to vector<2xbf16>
// CHECK-NEXT:        vector.store %{{.*}}, %[[DS]][%{{.*}}] : memref<4096xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// CHECK:             nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT:        gpu.barrier
// dQ = dS K in 64-column units (D / 64 = 2): dS^T read MN-major as A (<col>),
// K read MN-major as B (<row>), Bc / 16 = 4 k-steps.
// CHECK:             faptx.opaque %[[DSA]]
// CHECK:             faptx.opaque %[[KMN]]
// CHECK:             nvvm.wgmma.fence.aligned
// CHECK:             nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// CHECK-COUNT-3:     nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// CHECK-NOT:         nvvm.wgmma.mma_async
// CHECK:             nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:        nvvm.wgmma.wait.group.sync.aligned 0
// Each warp stages its 16 x 64 dQ rows, then adds them to the accumulator
// with 16-byte reductions (rows past Nq skipped).
// CHECK:             vector.store %{{.*}}, %[[STAGE]][%{{.*}}] : memref<4352xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK:             nvvm.bar.warp.sync
// CHECK:             memref.extract_aligned_pointer_as_index %[[ACC]]
// CHECK:             scf.if
// CHECK:               vector.load %[[STAGE]][%{{.*}}] : memref<4352xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK:               faptx.red_global_add %{{.*}}, [%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}]
// CHECK:             nvvm.bar.warp.sync
// The second column unit.
// CHECK:             faptx.opaque %[[DSA]]
// CHECK:             faptx.opaque %[[KMN]]
// CHECK:             nvvm.wgmma.mma_async {{.*}} D[<f32>, <zero>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// CHECK:             faptx.red_global_add
// dK and dV are read only after the last wait.
// CHECK:             nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NEXT:        faptx.operand_fence %{{.*}} : f32
// CHECK:             scf.yield
// CHECK:           vector.store %{{.*}}, %arg7[{{.*}}] {alignment = 4 : i64} : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, vector<2xbf16>
// CHECK:           vector.store %{{.*}}, %arg8[{{.*}}] {alignment = 4 : i64} : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, vector<2xbf16>
// CHECK:           gpu.terminator
// CHECK:         gpu.launch {{.*}} function(@fast_causal_bf16_d128_dq_convert_kernel) {
// CHECK:         memref.dealloc %[[ACC]]
// CHECK:         return
func.func @fast_causal_bf16_d128(%q: !q, %k: !q, %v: !q, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !q, %dv: !q) {
  %qt = bufferization.to_tensor %q restrict : !q to !t
  %kt = bufferization.to_tensor %k restrict : !q to !t
  %vt = bufferization.to_tensor %v restrict : !q to !t
  %ot = bufferization.to_tensor %out restrict : !q to !t
  %dot = bufferization.to_tensor %dout restrict : !q to !t
  %lt = bufferization.to_tensor %lse restrict : !l to !lt
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot mask<causal> : (!t, !t, !t, !t, !lt, !t) -> (!t, !t, !t)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !q) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!t, !q) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!t, !q) -> ()
  return
}

// -----

// Deterministic mode, f16, D = 64: no dQ in the key-block kernel (no dS^T
// tile, staging area or reductions: K, V 64x64 | Q, dO 2x64x64 f16 + lse2,
// delta + 1 KiB = 50 KiB), so dV, dK are waited for right after their
// commit. The separate dQ kernel keeps mma.sync.

!q = memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!t = tensor<?x?x?x64xf16>
!lt = tensor<?x?x?xf32>

// CHECK-LABEL: func.func @deterministic_f16_d64
// CHECK:         %[[SMEM:.*]] = arith.constant 51200 : i32
// CHECK:         gpu.launch {{.*}} dynamic_shared_memory_size %[[SMEM]] module(@deterministic_f16_d64_kernels) function(@deterministic_f16_d64_kernel) {
// CHECK:           memref.extract_aligned_pointer_as_index
// CHECK:           scf.for
// CHECK:             nvvm.fence.proxy
// CHECK-NEXT:        gpu.barrier
// CHECK:             nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK-COUNT-3:     nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK:             nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK-COUNT-3:     nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK:             nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:        nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:             nvvm.wgmma.fence.aligned
// CHECK-COUNT-8:     faptx.wgmma_mma_rs n = 64, f16,
// CHECK-NOT:         nvvm.wgmma.mma_async
// CHECK:             nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:        nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:             scf.yield
// CHECK:           gpu.terminator
// CHECK:         gpu.launch {{.*}} function(@deterministic_f16_d64_dq_kernel) {
// CHECK-NOT:       nvvm.wgmma
// CHECK:           nvgpu.mma.sync
// CHECK:           gpu.terminator
func.func @deterministic_f16_d64(%q: !q, %k: !q, %v: !q, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !q, %dv: !q) {
  %qt = bufferization.to_tensor %q restrict : !q to !t
  %kt = bufferization.to_tensor %k restrict : !q to !t
  %vt = bufferization.to_tensor %v restrict : !q to !t
  %ot = bufferization.to_tensor %out restrict : !q to !t
  %dot = bufferization.to_tensor %dout restrict : !q to !t
  %lt = bufferization.to_tensor %lse restrict : !l to !lt
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot deterministic : (!t, !t, !t, !t, !lt, !t) -> (!t, !t, !t)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !q) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!t, !q) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!t, !q) -> ()
  return
}

// -----

// D = 256 with the kernel configuration's warpgroup pair (8 warps per 64
// keys): a 16-row dQ staging area would not fit beside the pair's P^T and
// dS^T tiles (249,856 B), so each warp's area has 8 rows (8 x 8 x (64 + 4)
// f32) and takes the fragments' rows g, then g + 8, in turn: 232,448 B,
// all of sm_90a's shared memory per block.

!q = memref<?x?x?x256xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!t = tensor<?x?x?x256xbf16>
!lt = tensor<?x?x?xf32>

// CHECK-LABEL: func.func @pair_bf16_d256
// CHECK:         %[[SMEM:.*]] = arith.constant 232448 : i32
// CHECK:         gpu.launch {{.*}} threads({{.*}}) in (%{{.*}} = %c256{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) dynamic_shared_memory_size %[[SMEM]] module(@pair_bf16_d256_kernels) function(@pair_bf16_d256_kernel) {
// A pair tests its tile whole (here: its 64 keys end by Nk, the only mask
// of an unmasked op with run-time lengths) and selects P per element only
// when the test fails.
// CHECK:             %[[KEND:.*]] = arith.addi %{{.*}}, %c64_i32{{.*}} : i32
// CHECK-NEXT:        %[[FULL:.*]] = arith.cmpi sle, %[[KEND]], %{{.*}} : i32
// CHECK:             math.exp2
// CHECK:             %{{.*}}:16 = scf.if %[[FULL]] -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
// CHECK-NEXT:          scf.yield
// CHECK-NEXT:        } else {
// CHECK-NOT:           math.exp2
// CHECK-COUNT-16:      arith.select
// CHECK:               scf.yield
// CHECK-NEXT:        }
// The first 8-row pass of a 64-column unit: rows g of the fragments, four
// 16-byte reductions per lane, the area free again.
// CHECK:             vector.store %{{.*}}, %[[STAGE:.*]][%{{.*}}] : memref<4352xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK:             nvvm.bar.warp.sync
// CHECK-COUNT-4:     faptx.red_global_add %{{.*}}, [%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}]
// CHECK-NEXT:      }
// CHECK-NEXT:      nvvm.bar.warp.sync
// The second pass: rows g + 8.
// CHECK:             vector.store %{{.*}}, %[[STAGE]][%{{.*}}] : memref<4352xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK:             nvvm.bar.warp.sync
// CHECK-COUNT-4:     faptx.red_global_add %{{.*}}, [%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}]
// CHECK-NEXT:      }
// CHECK-NEXT:      nvvm.bar.warp.sync
func.func @pair_bf16_d256(%q: !q, %k: !q, %v: !q, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !q, %dv: !q) {
  %qt = bufferization.to_tensor %q restrict : !q to !t
  %kt = bufferization.to_tensor %k restrict : !q to !t
  %vt = bufferization.to_tensor %v restrict : !q to !t
  %ot = bufferization.to_tensor %out restrict : !q to !t
  %dot = bufferization.to_tensor %dout restrict : !q to !t
  %lt = bufferization.to_tensor %lse restrict : !l to !lt
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 64, warps = 8, stages = 2>} : (!t, !t, !t, !t, !lt, !t) -> (!t, !t, !t)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !q) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!t, !q) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!t, !q) -> ()
  return
}

// -----

// The same pair with a causal mask: the tile is whole when its keys end by
// Nk and its last key sees its first query (last key - first query <= Nk -
// Nq + 0, the band's right edge).

!q = memref<?x?x?x256xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!t = tensor<?x?x?x256xbf16>
!lt = tensor<?x?x?xf32>

// CHECK-LABEL: func.func @pair_causal_bf16_d256
// CHECK:         function(@pair_causal_bf16_d256_kernel) {
// CHECK:             %[[KEND:.*]] = arith.addi %[[K0:.*]], %c64_i32{{.*}} : i32
// CHECK-NEXT:        %[[TAIL:.*]] = arith.cmpi sle, %[[KEND]], %[[NK:.*]] : i32
// CHECK-NEXT:        %[[OFF:.*]] = arith.subi %[[NK]], %{{.*}} : i32
// CHECK:             %[[LAST:.*]] = arith.subi %[[KEND]], %c1_i32{{.*}} : i32
// CHECK-NEXT:        %[[MOST:.*]] = arith.subi %[[LAST]], %{{.*}} : i32
// CHECK:             %[[LIMIT:.*]] = arith.addi %[[OFF]], %{{.*}} : i32
// CHECK-NEXT:        %[[BAND:.*]] = arith.cmpi sle, %[[MOST]], %[[LIMIT]] : i32
// CHECK-NEXT:        %[[FULL:.*]] = arith.andi %[[TAIL]], %[[BAND]] : i1
// CHECK:             %{{.*}}:16 = scf.if %[[FULL]] -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
func.func @pair_causal_bf16_d256(%q: !q, %k: !q, %v: !q, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !q, %dv: !q) {
  %qt = bufferization.to_tensor %q restrict : !q to !t
  %kt = bufferization.to_tensor %k restrict : !q to !t
  %vt = bufferization.to_tensor %v restrict : !q to !t
  %ot = bufferization.to_tensor %out restrict : !q to !t
  %dot = bufferization.to_tensor %dout restrict : !q to !t
  %lt = bufferization.to_tensor %lse restrict : !l to !lt
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot mask<causal> {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 64, warps = 8, stages = 2>} : (!t, !t, !t, !t, !lt, !t) -> (!t, !t, !t)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !q) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!t, !q) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!t, !q) -> ()
  return
}

// -----

// D = 192 on the pair: three 64-column panels do not halve, so the
// warpgroups take roles. Both issue the same dK / dV chain, N = 192: the
// first on dS^T and Q (dK), the second on P^T and dO (dV), the descriptors
// picked by the warpgroup; each stores its accumulators whole.

!q = memref<?x?x?x192xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!t = tensor<?x?x?x192xbf16>
!lt = tensor<?x?x?xf32>

// CHECK-LABEL: func.func @pair_roles_bf16_d192
// CHECK:         function(@pair_roles_bf16_d192_kernel) {
// CHECK:             %[[FIRST:.*]] = arith.cmpi eq, %{{.*}}, %c0{{.*}} : index
// CHECK-NEXT:        %[[DSA:.*]] = faptx.opaque
// CHECK-NEXT:        %[[PA:.*]] = faptx.opaque
// CHECK-NEXT:        arith.select %[[FIRST]], %[[DSA]], %[[PA]] : i64
// CHECK-NEXT:        %[[QMN:.*]] = faptx.opaque
// CHECK-NEXT:        %[[DOMN:.*]] = faptx.opaque
// CHECK-NEXT:        arith.select %[[FIRST]], %[[QMN]], %[[DOMN]] : i64
// CHECK-COUNT-4:     nvvm.wgmma.mma_async {{.*}} <m = 64, n = 192, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
// CHECK-NOT:         nvvm.wgmma.mma_async {{.*}} n = 128
// CHECK:             nvvm.wgmma.commit.group.sync.aligned
// The epilogue: the first warpgroup stores dK (scaled), the second dV.
// CHECK:           scf.if %{{.*}} {
// CHECK:             vector.store %{{.*}}, %arg7[
// CHECK-NOT:         vector.store %{{.*}}, %arg8[
// CHECK:           } else {
// CHECK:             vector.store %{{.*}}, %arg8[
func.func @pair_roles_bf16_d192(%q: !q, %k: !q, %v: !q, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !q, %dv: !q) {
  %qt = bufferization.to_tensor %q restrict : !q to !t
  %kt = bufferization.to_tensor %k restrict : !q to !t
  %vt = bufferization.to_tensor %v restrict : !q to !t
  %ot = bufferization.to_tensor %out restrict : !q to !t
  %dot = bufferization.to_tensor %dout restrict : !q to !t
  %lt = bufferization.to_tensor %lse restrict : !l to !lt
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 64, warps = 8, stages = 2>} : (!t, !t, !t, !t, !lt, !t) -> (!t, !t, !t)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !q) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!t, !q) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!t, !q) -> ()
  return
}
