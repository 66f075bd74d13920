// RUN: fa-opt %s --split-input-file --fa-tile-attention="block-q=64 block-kv=32" --fa-specialize-masks --fa-use-exp2 --canonicalize --cse --fa-convert-tiled-attention-to-gpu | FileCheck %s

// Causal f16, D = 64, Br = 64 (4 warps x 16 rows), Bc = 32: the tiled
// query-block loop nest becomes one gpu.launch over (query blocks, heads,
// batches) with 128 threads and 27 KiB of dynamic shared memory
// (Q 64x72 | K 2x32x72 | V 2x32x72 f16: rows padded by 16 bytes).

// CHECK-LABEL: func.func @causal_f16
// CHECK-NOT:     scf.forall
// CHECK:         %[[NQB:.*]] = arith.ceildivui
// CHECK:         %[[SMEM:.*]] = arith.constant 27648 : i32
// CHECK:         gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[NQB]], %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) threads(%[[TID:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C128:.*]], %{{.*}} = %[[C1:.*]], %{{.*}} = %[[C1]]) dynamic_shared_memory_size %[[SMEM]] {
// CHECK:           gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// Tiles: flat views of [64, 64 + 8] (rows padded by one chunk).
// CHECK:           %[[QS:.*]] = memref.view {{.*}} to memref<4608xf16, #gpu.address_space<workgroup>>
// CHECK:           memref.view {{.*}} to memref<4608xf16, #gpu.address_space<workgroup>>
// CHECK:           memref.view {{.*}} to memref<4608xf16, #gpu.address_space<workgroup>>
// Global sources: 1-d views from each thread's first element of its head,
// built once before the key loops.
// CHECK:           %[[QG0:.*]] = memref.reinterpret_cast %arg0 to offset: [%{{.*}}], sizes: [%{{.*}}], strides: [1] : memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>> to memref<?xf16, strided<[1], offset: ?>>
// CHECK:           %[[KG:.*]] = memref.reinterpret_cast %arg1
// CHECK:           %[[VG:.*]] = memref.reinterpret_cast %arg2
// Prologue: Q with 16-byte cp.async (src-size 0 past Nq zero-fills), then
// the first K/V block in a second group; Q fragments once the Q group landed.
// CHECK:           nvgpu.device_async_copy %[[QG0]][{{.*}}], %[[QS]][{{.*}}], 8, %{{.*}} {bypassL1}
// CHECK:           nvvm.cp.async.commit.group
// CHECK:           scf.if
// CHECK:             nvgpu.device_async_copy %[[KG]]
// CHECK:             nvgpu.device_async_copy %[[VG]]
// CHECK:             nvvm.cp.async.commit.group
// CHECK:           } else {
// CHECK-NEXT:        nvvm.cp.async.commit.group
// CHECK:           nvvm.cp.async.wait.group 1
// CHECK-NEXT:      gpu.barrier
// CHECK:           nvgpu.ldmatrix %[[QS]][%{{.*}}] {numTiles = 4 : i32, transpose = false} : memref<4608xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// Fully visible key blocks: wait for block k, barrier, prefetch block k + Bc
// into the other buffer, S = Q K^T, softmax without any mask, O += P V.
// CHECK:           %[[FULL:.*]]:12 = scf.for %{{.*}} = %{{.*}} to %[[FULLHI:.*]] step %{{.*}} iter_args(
// CHECK:             nvvm.cp.async.wait.group 0
// CHECK-NEXT:        gpu.barrier
// CHECK:             scf.if
// CHECK:               nvgpu.device_async_copy %[[KG]]
// CHECK:               nvgpu.device_async_copy %[[VG]]
// CHECK:               nvvm.cp.async.commit.group
// CHECK:             nvgpu.ldmatrix {{.*}}transpose = false
// CHECK:             nvgpu.mma.sync({{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
// CHECK-NOT:         arith.cmpi sle
// CHECK:             gpu.shuffle {{ *}}xor %{{.*}} : f32
// CHECK:             gpu.shuffle {{ *}}xor %{{.*}} : f32
// CHECK:             math.exp2
// CHECK:             math.fma
// CHECK-NEXT:        math.exp2
// CHECK:             arith.truncf %{{.*}} : vector<2xf32> to vector<2xf16>
// CHECK:             nvgpu.ldmatrix {{.*}}transpose = true
// CHECK:             nvgpu.mma.sync
// CHECK:             scf.yield
// Diagonal blocks: the same step with the causal mask, one integer compare
// per fragment element against per-step scalars.
// CHECK:           %[[DIAG:.*]]:12 = scf.for %{{.*}} = %[[FULLHI]] to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[FULL]]#0
// CHECK:             nvgpu.mma.sync
// CHECK:             arith.cmpi slt
// CHECK:             arith.cmpi sle
// CHECK:             arith.select %{{.*}}, %{{.*}}, %cst{{.*}} : f32
// CHECK:             gpu.shuffle
// CHECK:             scf.yield
// Finalize: quad sum, 1/sum (0 for empty rows), lse = ln2 * (m + log2 l),
// guarded stores of O (4 bytes per lane) and of the LSE (one lane per row).
// CHECK:           nvvm.cp.async.wait.group 0
// CHECK:           gpu.shuffle {{ *}}xor
// CHECK:           arith.divf
// CHECK:           math.log2
// CHECK:           scf.if
// CHECK:             vector.store %{{.*}}, %arg3[{{.*}}] {alignment = 4 : i64} : memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>, vector<2xf16>
// CHECK:             scf.if
// CHECK:               memref.store %{{.*}}, %arg4[{{.*}}] : memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
// CHECK:           gpu.terminator
// CHECK-NOT:     bufferization.materialize_in_destination
// CHECK:         return
func.func @causal_f16(%q: memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>, %k: memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>, %v: memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>, %o: memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>, %lse: memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x64xf16>
  %out, %l = fa.attention %qt, %kt, %vt mask<causal> : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) -> (tensor<?x?x?x64xf16>, tensor<?x?x?xf32>)
  bufferization.materialize_in_destination %out in restrict writable %o : (tensor<?x?x?x64xf16>, memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<?x?x?xf32>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) -> ()
  return
}

// -----

// bf16 has no nvgpu.mma.sync lowering in MLIR 22: the MMA is nvvm.mma.sync on
// packed bf16x2 registers. Softcap: tanh.approx.f32 (faptx.tanh) before the
// mask, log2(e) folded into the exp2 multiply-add. No mask: the fully visible
// blocks, then the tail block with only the key bound (no diagonal compare).

// CHECK-LABEL: func.func @softcap_bf16
// CHECK:         gpu.launch
// CHECK:           scf.for
// CHECK:             llvm.bitcast %{{.*}} : vector<2xbf16> to i32
// CHECK:             nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>}
// CHECK-NOT:         arith.cmpi
// CHECK:             faptx.tanh
// CHECK:             math.fma
// CHECK:             scf.yield
// CHECK:           scf.for
// CHECK:             faptx.tanh
// CHECK:             arith.cmpi slt
// CHECK-NOT:         arith.cmpi sle
// CHECK:             math.exp2
// CHECK:             scf.yield
func.func @softcap_bf16(%q: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, %k: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, %v: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, %o: memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>, %lse: memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x128xbf16>
  %out, %l = fa.attention %qt, %kt, %vt softcap 30.0 : (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>) -> (tensor<?x?x?x128xbf16>, tensor<?x?x?xf32>)
  bufferization.materialize_in_destination %out in restrict writable %o : (tensor<?x?x?x128xbf16>, memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<?x?x?xf32>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) -> ()
  return
}

// -----

// Run-time scale and softcap: the exponent factors (scale / softcap and
// softcap * log2(e)) are computed by the host before the launch, so the
// kernel takes them as parameters and its score arithmetic reads them
// directly; the kernel itself divides nothing.

// CHECK-LABEL: func.func @runtime_scalars
// CHECK-SAME:    %[[S:[a-z0-9]+]]: f32, %[[C:[a-z0-9]+]]: f32)
// CHECK:         %[[IN:.*]] = arith.divf %[[S]], %[[C]] : f32
// CHECK:         %[[EXP:.*]] = arith.mulf %[[C]], %{{.*}} : f32
// CHECK:         gpu.launch
// CHECK-NOT:       arith.divf
// CHECK:           arith.mulf %{{.*}}, %[[IN]] : f32
// CHECK:           faptx.tanh
// CHECK:           math.fma %{{.*}}, %[[EXP]]
// CHECK:         gpu.terminator
func.func @runtime_scalars(%q: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %k: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %v: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %o: memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %lse: memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, %scale: f32, %softcap: f32) {
  %qt = bufferization.to_tensor %q restrict : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x64xbf16>
  %out, %l = fa.attention %qt, %kt, %vt softcap %softcap scale %scale : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, f32, f32) -> (tensor<?x?x?x64xbf16>, tensor<?x?x?xf32>)
  bufferization.materialize_in_destination %out in restrict writable %o : (tensor<?x?x?x64xbf16>, memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<?x?x?xf32>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) -> ()
  return
}
