// RUN: fa-opt %s --split-input-file --fa-tile-attention="block-q=64 block-kv=64" --fa-specialize-masks --fa-use-exp2 --canonicalize --cse --fa-convert-tiled-attention-to-gpu="warps=4 wgmma=true" | FileCheck %s --implicit-check-not=nvgpu.ldmatrix --implicit-check-not=mma.sync

// The Hopper forward: both GEMMs are warpgroup MMAs (sm_90a), so neither
// ldmatrix nor mma.sync may appear anywhere (implicit-check-not above).
// Br = 64 = 16 * 4 warps: one warpgroup owning all 64 query rows.

// Causal bf16, D = 64, Bc = 64. The tiles are 128-byte swizzled panels of
// 64 columns (no padding) from the first 1024-byte boundary of the dynamic
// shared memory: Q 64x64 | K 2x64x64 | V 2x64x64 bf16 = 40 KiB, plus 1 KiB
// of slack for the alignment.

!m = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
!t = tensor<?x?x?x64xbf16>
!lt = tensor<?x?x?xf32>

// CHECK-LABEL: func.func @causal_bf16_d64
// CHECK-NOT:     scf.forall
// CHECK:         %[[SMEM:.*]] = arith.constant 41984 : i32
// CHECK:         gpu.launch {{.*}} threads({{.*}}) in (%{{.*}} = %c128{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) dynamic_shared_memory_size %[[SMEM]] {
// The padding up to the next 1024-byte boundary: (1024 - ptr % 1024) % 1024.
// CHECK:           %[[BASE:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK-NEXT:      %[[PTR:.*]] = memref.extract_aligned_pointer_as_index %[[BASE]]
// CHECK-NEXT:      %[[C1024:.*]] = arith.constant 1024 : index
// CHECK-NEXT:      %[[MOD:.*]] = arith.remui %[[PTR]], %[[C1024]] : index
// CHECK:           %[[GAP:.*]] = arith.subi %{{.*}}, %[[MOD]] : index
// CHECK:           %[[PAD:.*]] = arith.remui %[[GAP]], %{{.*}} : index
// Panel tiles: flat views of rows x 64 elements, every offset past the pad.
// CHECK:           %[[QOFF:.*]] = arith.addi %[[PAD]], %{{.*}} : index
// CHECK-NEXT:      memref.view %[[BASE]][%[[QOFF]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<4096xbf16, #gpu.address_space<workgroup>>
// CHECK-NEXT:      arith.constant 8192 : index
// CHECK-NEXT:      %[[KOFF:.*]] = arith.addi %[[PAD]], %{{.*}} : index
// CHECK-NEXT:      memref.view %[[BASE]][%[[KOFF]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<8192xbf16, #gpu.address_space<workgroup>>
// CHECK-NEXT:      arith.constant 24576 : index
// CHECK-NEXT:      %[[VOFF:.*]] = arith.addi %[[PAD]], %{{.*}} : index
// CHECK-NEXT:      memref.view %[[BASE]][%[[VOFF]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<8192xbf16, #gpu.address_space<workgroup>>
// Matrix descriptors: (address >> 4) | 128-byte swizzle (bit 62) | stride
// byte offset 1024 (8-row groups) | leading byte offset 16 for the K-major
// Q and K, 16 KiB (the V panel stride) for the MN-major V.
// CHECK:           arith.constant 4611686293305360384 : i64
// CHECK-NEXT:      %[[QDESC:.*]] = arith.ori %{{.*}}, %{{.*}} : i64
// CHECK:           arith.constant 4611686293305360384 : i64
// CHECK-NEXT:      %[[KDESC:.*]] = arith.ori %{{.*}}, %{{.*}} : i64
// CHECK:           arith.constant 4611686293372403712 : i64
// CHECK-NEXT:      %[[VDESC:.*]] = arith.ori %{{.*}}, %{{.*}} : i64
// Prologue: cp.async of Q, then of the first K/V block.
// CHECK:           nvgpu.device_async_copy
// CHECK:           nvvm.cp.async.commit.group
// Fully visible key blocks. The K and V descriptors move to this block's
// buffer; cp.async writes through the generic proxy, so a proxy fence
// precedes the barrier that publishes the block to the wgmma (async proxy).
// CHECK:           %[[FULL:.*]]:12 = scf.for %{{.*}} = %{{.*}} to %[[FULLHI:.*]] step %{{.*}} iter_args(
// CHECK:             %[[KBLK:.*]] = arith.addi %[[KDESC]], %[[ROWS:.*]] : i64
// CHECK-NEXT:        %[[VBLK:.*]] = arith.addi %[[VDESC]], %[[ROWS]] : i64
// CHECK:             nvvm.cp.async.wait.group 0
// CHECK-NEXT:        nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT:        gpu.barrier
// Prefetch of the next block into the other buffer.
// CHECK:             scf.if
// CHECK:               nvgpu.device_async_copy
// CHECK:               nvvm.cp.async.commit.group
// S = Q K^T: one chain of D / 16 = 4 k-steps, both operands from shared
// memory; the first step overwrites the accumulator (<zero>), the others
// add to it (<one>). One commit, then wait for it.
// CHECK:             nvvm.wgmma.fence.aligned
// CHECK:             nvvm.wgmma.mma_async %[[QDESC]], %[[KBLK]], %{{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-COUNT-3:     nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-NOT:         nvvm.wgmma.mma_async
// CHECK:             nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:        nvvm.wgmma.wait.group.sync.aligned 0
// The results go through operand fences so that no read moves above the wait.
// CHECK-NEXT:        faptx.operand_fence %{{.*}} : f32
// No mask on these blocks.
// CHECK-NOT:         arith.cmpi sle
// CHECK:             faptx.ex2
// P stays in registers: packed bf16x2 words in the A-fragment layout.
// CHECK:             llvm.bitcast %{{.*}} : vector<2xbf16> to i32
// O += P V: Bc / 16 = 4 register-A wgmma (faptx: MLIR's op takes A only
// from shared memory) of 16 keys each, accumulating into the 32 O registers
// with P's four packed registers and the V descriptor.
// CHECK:             nvvm.wgmma.fence.aligned
// CHECK:             faptx.wgmma_mma_rs n = 64, bf16, a[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}], b %[[VBLK]], acc[
// CHECK-COUNT-3:     faptx.wgmma_mma_rs n = 64, bf16,
// CHECK:             nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:        nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:             scf.yield
// Diagonal blocks: the same step, with the causal compares between the S
// chain and the softmax.
// CHECK:           scf.for %{{.*}} = %[[FULLHI]] to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[FULL]]#0
// CHECK:             nvvm.fence.proxy
// CHECK-NEXT:        gpu.barrier
// CHECK:             nvvm.wgmma.mma_async {{.*}} D[<f32>, <zero>]
// CHECK:             nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:             arith.cmpi sle
// CHECK:             faptx.ex2
// CHECK:             faptx.wgmma_mma_rs n = 64, bf16,
// CHECK:             scf.yield
// The epilogue is the mma.sync one: the O accumulators are laid out as C
// fragments.
// CHECK:           vector.store %{{.*}}, %arg3[{{.*}}] {alignment = 4 : i64} : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, vector<2xbf16>
// CHECK:           memref.store %{{.*}}, %arg4[{{.*}}] : memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
// CHECK:           gpu.terminator
// CHECK-NOT:     bufferization.materialize_in_destination
// CHECK:         return
func.func @causal_bf16_d64(%q: !m, %k: !m, %v: !m, %o: !m, %lse: !l) {
  %qt = bufferization.to_tensor %q restrict : !m to !t
  %kt = bufferization.to_tensor %k restrict : !m to !t
  %vt = bufferization.to_tensor %v restrict : !m to !t
  %out, %l = fa.attention %qt, %kt, %vt mask<causal> : (!t, !t, !t) -> (!t, !lt)
  bufferization.materialize_in_destination %out in restrict writable %o : (!t, !m) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (!lt, !l) -> ()
  return
}

// -----

// f16, D = 128, no mask: two 64-column panels per tile (Q 64x128 |
// K 2x64x128 | V 2x64x128 f16 = 80 KiB + 1 KiB). The S chain has 8 k-steps;
// from the fifth on, both descriptors step to the second panel (Q: 64 rows
// x 128 bytes = 8 KiB = 512 units of 16 bytes; K: 128 rows = 16 KiB = 1024).
// O += P V has N = 128.

!m = memref<?x?x?x128xf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
!t = tensor<?x?x?x128xf16>
!lt = tensor<?x?x?xf32>

// CHECK-LABEL: func.func @f16_d128
// CHECK:         %[[SMEM:.*]] = arith.constant 82944 : i32
// CHECK:         gpu.launch {{.*}} dynamic_shared_memory_size %[[SMEM]] {
// CHECK:           memref.extract_aligned_pointer_as_index
// CHECK:           memref.view {{.*}} to memref<8192xf16, #gpu.address_space<workgroup>>
// CHECK:           memref.view {{.*}} to memref<16384xf16, #gpu.address_space<workgroup>>
// CHECK:           memref.view {{.*}} to memref<16384xf16, #gpu.address_space<workgroup>>
// CHECK:           %[[QDESC:.*]] = arith.ori %{{.*}}, %{{.*}} : i64
// CHECK:           %[[KDESC:.*]] = arith.ori %{{.*}}, %{{.*}} : i64
// Interior key blocks (16 O fragments + 2 max + 2 sum).
// CHECK:           %[[MAIN:.*]]:20 = scf.for %{{.*}} = %{{.*}} to %[[MAINHI:.*]] step %{{.*}} iter_args(
// CHECK:             %[[KBLK:.*]] = arith.addi %[[KDESC]], %{{.*}} : i64
// CHECK:             nvvm.fence.proxy
// CHECK-NEXT:        gpu.barrier
// CHECK:             nvvm.wgmma.fence.aligned
// CHECK:             nvvm.wgmma.mma_async %[[QDESC]], %[[KBLK]], %{{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK-COUNT-3:     nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK:             arith.constant 1024 : i64
// CHECK-NEXT:        %[[K4:.*]] = arith.addi %[[KBLK]], %{{.*}} : i64
// CHECK-NEXT:        arith.constant 512 : i64
// CHECK-NEXT:        %[[Q4:.*]] = arith.addi %[[QDESC]], %{{.*}} : i64
// CHECK:             nvvm.wgmma.mma_async %[[Q4]], %[[K4]], %{{.*}}, <m = 64, n = 64, k = 16>, D[<f32>, <one>]
// CHECK-COUNT-3:     nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK-NOT:         nvvm.wgmma.mma_async
// CHECK:             nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:        nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NOT:         arith.cmpi
// CHECK:             faptx.ex2
// CHECK:             llvm.bitcast %{{.*}} : vector<2xf16> to i32
// 64 O registers (n = 128).
// CHECK:             nvvm.wgmma.fence.aligned
// CHECK-COUNT-4:     faptx.wgmma_mma_rs n = 128, f16,
// CHECK:             nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT:        nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:             scf.yield
// The last, partial key block: only the key-length compare.
// CHECK:           scf.for %{{.*}} = %[[MAINHI]] to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[MAIN]]#0
// CHECK:             nvvm.wgmma.mma_async {{.*}} D[<f32>, <zero>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK:             nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NOT:         arith.cmpi sle
// CHECK:             arith.cmpi slt, %{{.*}}, %{{.*}} : i32
// CHECK-NOT:         arith.cmpi sle
// CHECK:             faptx.ex2
// CHECK:             faptx.wgmma_mma_rs n = 128, f16,
// CHECK:             scf.yield
// CHECK:           vector.store %{{.*}}, %arg3[{{.*}}] {alignment = 4 : i64} : memref<?x?x?x128xf16, strided<[?, ?, ?, 1], offset: ?>>, vector<2xf16>
// CHECK:           gpu.terminator
func.func @f16_d128(%q: !m, %k: !m, %v: !m, %o: !m, %lse: !l) {
  %qt = bufferization.to_tensor %q restrict : !m to !t
  %kt = bufferization.to_tensor %k restrict : !m to !t
  %vt = bufferization.to_tensor %v restrict : !m to !t
  %out, %l = fa.attention %qt, %kt, %vt : (!t, !t, !t) -> (!t, !lt)
  bufferization.materialize_in_destination %out in restrict writable %o : (!t, !m) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (!lt, !l) -> ()
  return
}

// -----

// bf16, D = 96 (not a multiple of 64): the second panel of every tile is half
// used (columns 64..95), so the tiles take two whole panels: Q 64x128 |
// K 2x64x128 | V 2x64x128 bf16 = 80 KiB + 1 KiB, as for D = 128. The S
// chain has 96 / 16 = 6 k-steps, the fifth and sixth in the second panel;
// O += P V has N = 96 (48 O registers).

!m = memref<?x?x?x96xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
!t = tensor<?x?x?x96xbf16>
!lt = tensor<?x?x?xf32>

// CHECK-LABEL: func.func @bf16_d96
// CHECK:         %[[SMEM:.*]] = arith.constant 82944 : i32
// CHECK:         gpu.launch {{.*}} dynamic_shared_memory_size %[[SMEM]] {
// CHECK:           memref.view {{.*}} to memref<8192xbf16, #gpu.address_space<workgroup>>
// CHECK:           memref.view {{.*}} to memref<16384xbf16, #gpu.address_space<workgroup>>
// CHECK:           memref.view {{.*}} to memref<16384xbf16, #gpu.address_space<workgroup>>
// CHECK:           scf.for
// CHECK:             nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <zero>]
// CHECK-COUNT-5:     nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <one>]
// CHECK-NOT:         nvvm.wgmma.mma_async
// CHECK:             nvvm.wgmma.commit.group.sync.aligned
// CHECK-COUNT-4:     faptx.wgmma_mma_rs n = 96, bf16,
// CHECK:             scf.yield
// CHECK:           vector.store %{{.*}}, %arg3[{{.*}}] {alignment = 4 : i64} : memref<?x?x?x96xbf16, strided<[?, ?, ?, 1], offset: ?>>, vector<2xbf16>
func.func @bf16_d96(%q: !m, %k: !m, %v: !m, %o: !m, %lse: !l) {
  %qt = bufferization.to_tensor %q restrict : !m to !t
  %kt = bufferization.to_tensor %k restrict : !m to !t
  %vt = bufferization.to_tensor %v restrict : !m to !t
  %out, %l = fa.attention %qt, %kt, %vt : (!t, !t, !t) -> (!t, !lt)
  bufferization.materialize_in_destination %out in restrict writable %o : (!t, !m) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (!lt, !l) -> ()
  return
}

// -----

// D = 192 (3 panels), Dv = 128 (2 panels), the DeepSeek-style shape. A row
// of 24 chunks is not a power of two, yet the panels are swizzled: cp.async
// writes chunk c of row r to panel c / 8 at chunk (c % 8) ^ (r % 8), with no
// per-thread padded-row offset on top (adding one wrote Q and K outside
// their panels and gave NaN on the H200).

!mq = memref<?x?x?x192xbf16, strided<[?, ?, ?, 1], offset: ?>>
!mv = memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
!tq = tensor<?x?x?x192xbf16>
!tv = tensor<?x?x?x128xbf16>
!lt = tensor<?x?x?xf32>

// CHECK-LABEL: func.func @d192_dv128
// Q 64x192 | K 2x64x192 | V 2x64x128 = 24 + 48 + 32 KiB + 1 KiB.
// CHECK:         %[[SMEM:.*]] = arith.constant 107520 : i32
// CHECK:         gpu.launch {{.*}} dynamic_shared_memory_size %[[SMEM]] {
// CHECK:           memref.view {{.*}} to memref<12288xbf16, #gpu.address_space<workgroup>>
// CHECK:           memref.view {{.*}} to memref<24576xbf16, #gpu.address_space<workgroup>>
// CHECK:           memref.view {{.*}} to memref<16384xbf16, #gpu.address_space<workgroup>>
// The Q copy: the destination rows' base (row 0 x 64 elements), then per
// chunk (chunk % 8) ^ (row % 8), row * 64 and panel * 4096 added to that base
// alone.
// CHECK:           %[[ROW0:.*]] = arith.index_cast %{{.*}} : index to i32
// CHECK-NEXT:      %[[BASE:.*]] = arith.muli %[[ROW0]], %{{.*}} overflow<nsw> : i32
// CHECK:           %[[CHUNK:.*]] = arith.xori %{{.*}}, %{{.*}} : index
// CHECK-NEXT:      arith.constant 8 : index
// CHECK-NEXT:      %[[CH8:.*]] = arith.muli %[[CHUNK]], %{{.*}} : index
// CHECK-NEXT:      arith.constant 64 : index
// CHECK-NEXT:      %[[ROW:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// CHECK-NEXT:      arith.constant 4096 : index
// CHECK-NEXT:      arith.constant 8 : index
// CHECK-NEXT:      %[[P:.*]] = arith.divui %{{.*}}, %{{.*}} : index
// CHECK-NEXT:      %[[PO:.*]] = arith.muli %[[P]], %{{.*}} : index
// CHECK-NEXT:      %[[PR:.*]] = arith.addi %[[PO]], %[[ROW]] : index
// CHECK-NEXT:      %[[IN:.*]] = arith.addi %[[PR]], %[[CH8]] : index
// CHECK-NEXT:      %[[IN32:.*]] = arith.index_cast %[[IN]] : index to i32
// CHECK-NEXT:      %[[DST:.*]] = arith.addi %[[BASE]], %[[IN32]] overflow<nsw> : i32
// CHECK-NEXT:      %[[DSTI:.*]] = arith.index_cast %[[DST]] : i32 to index
// CHECK-NEXT:      nvgpu.device_async_copy %{{.*}}, %{{.*}}[%[[DSTI]]], 8
// CHECK:           scf.for
// CHECK-COUNT-12:    nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>
// CHECK-NOT:         nvvm.wgmma.mma_async
// CHECK:             faptx.wgmma_mma_rs n = 128, bf16,
func.func @d192_dv128(%q: !mq, %k: !mq, %v: !mv, %o: !mv, %lse: !l) {
  %qt = bufferization.to_tensor %q restrict : !mq to !tq
  %kt = bufferization.to_tensor %k restrict : !mq to !tq
  %vt = bufferization.to_tensor %v restrict : !mv to !tv
  %out, %l = fa.attention %qt, %kt, %vt : (!tq, !tq, !tv) -> (!tv, !lt)
  bufferization.materialize_in_destination %out in restrict writable %o : (!tv, !mv) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (!lt, !l) -> ()
  return
}
