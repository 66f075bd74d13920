// RUN: fa-opt %s --split-input-file --fa-tile-attention-backward="block-q=64 block-kv=64" --cse --fa-convert-tiled-attention-backward-to-gpu | FileCheck %s

// Fast mode, causal f16, D = 64: the Di generic becomes the preprocessing
// launch, the (batch, kv head) forall with its key-block loop the key-block
// launch (dK, dV in registers, dQ through atomics), and the dQ epilogue the
// conversion launch. Workspace is allocated around them.

!q = memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!t = tensor<?x?x?x64xf16>
!lt = tensor<?x?x?xf32>

// CHECK-LABEL: func.func @fast_causal
// CHECK-NOT:     scf.forall
// CHECK-NOT:     linalg.generic
// CHECK:         %[[DELTA:.*]] = memref.alloc({{.*}}) {fa.workspace = "delta"} : memref<?x?x?xf32>
// CHECK:         %[[LSE2:.*]] = memref.alloc({{.*}}) {fa.workspace = "lse2"} : memref<?x?x?xf32>
// CHECK:         %[[ACC:.*]] = memref.alloc({{.*}}) {fa.workspace = "dq_accum"} : memref<?x?x?x64xf32>
// Preprocessing: 8 lanes per row of 64 f16 read dO and O 16 bytes at a time
// (coalesced; the vector accesses of global memory state their alignment,
// else NVPTX splits them into scalar ones) and sum their dot products with
// shuffles, four rows' loads before their stores; one lane writes delta and
// lse2 (0 and +inf past Nq); then the block's accumulator rows are zeroed,
// 16 bytes per lane.
// CHECK:         gpu.launch {{.*}} threads({{.*}}) in (%{{.*}} = %c128{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) dynamic_shared_memory_size %{{.*}} module(@fast_causal_kernels) function(@fast_causal_preprocess_kernel) {
// CHECK:           arith.minui
// CHECK:           vector.load %arg4{{.*}} {alignment = 16 : i64} : {{.*}}, vector<8xf16>
// CHECK:           vector.load %arg3{{.*}} {alignment = 16 : i64} : {{.*}}, vector<8xf16>
// CHECK:           math.fma
// CHECK:           vector.reduction <add>
// CHECK:           gpu.shuffle  xor
// CHECK:           memref.store %{{.*}}, %[[DELTA]]
// CHECK:           memref.load %arg5
// CHECK:           memref.store %{{.*}}, %[[LSE2]]
// CHECK:           vector.store %{{.*}}, %[[ACC]]{{.*}} {alignment = 16 : i64} : {{.*}}, vector<4xf32>
// Key blocks: grid (key blocks, kv heads, batches), 64 KiB of shared
// memory: K, V 64x72 | Q, dO 2x64x72 | dS^T 64x72 (f16) | lse2, delta 2x64.
// CHECK:         %[[SMEM:.*]] = arith.constant 65536 : i32
// CHECK:         gpu.launch {{.*}} dynamic_shared_memory_size %[[SMEM]] module(@fast_causal_kernels) function(@fast_causal_kernel) {
// K and V once, then the first query block of the first head, lse2 and
// delta with them.
// CHECK:           nvgpu.device_async_copy
// CHECK:           nvvm.cp.async.commit.group
// CHECK:           scf.if
// CHECK:             nvgpu.device_async_copy %[[LSE2]]
// CHECK:             nvgpu.device_async_copy %[[DELTA]]
// The flattened (head, query block) loop carries dK and dV: 2 x 8 C
// fragments per warp.
// CHECK:           %[[ACCS:.*]]:16 = scf.for %{{.*}} iter_args(
// CHECK:             nvvm.cp.async.wait.group 0
// CHECK-NEXT:        gpu.barrier
// CHECK:             scf.if
// CHECK:               nvgpu.device_async_copy
// S^T = K Q^T: keys as rows.
// CHECK:             nvgpu.ldmatrix {{.*}}transpose = false
// CHECK:             nvgpu.mma.sync
// Causal mask: integer compares against per-iteration limits.
// CHECK:             arith.cmpi sle
// CHECK:             math.exp2
// CHECK:             arith.select
// dV += P^T dO and dK += dS^T Q read dO and Q transposed.
// CHECK:             nvgpu.ldmatrix {{.*}}transpose = true
// CHECK:             nvgpu.mma.sync
// dS^T to shared memory, a barrier, then each warp's rows of dQ = dS K.
// CHECK:             vector.store %{{.*}} : memref<4608xf16, #gpu.address_space<workgroup>>, vector<2xf16>
// CHECK:             gpu.barrier
// CHECK:             nvgpu.ldmatrix {{.*}}transpose = true
// CHECK:             memref.atomic_rmw addf %{{.*}}, %[[ACC]]
// CHECK:             scf.yield
// Epilogue: dK scaled by the softmax scale, rows < Nk only.
// CHECK:           arith.mulf
// CHECK:           vector.store %{{.*}}, %arg7{{.*}} {alignment = 4 : i64}
// CHECK:           vector.store %{{.*}}, %arg8{{.*}} {alignment = 4 : i64}
// CHECK:         gpu.launch {{.*}} module(@fast_causal_kernels) function(@fast_causal_dq_convert_kernel) {
// The conversion loads eight 32-byte pieces of a thread's rows before it
// stores them.
// CHECK:           vector.load %[[ACC]]{{.*}} {alignment = 16 : i64} : {{.*}}, vector<8xf32>
// CHECK:           vector.load %[[ACC]]{{.*}} {alignment = 16 : i64} : {{.*}}, vector<8xf32>
// CHECK:           arith.truncf %{{.*}} : vector<8xf32> to vector<8xf16>
// CHECK:           vector.store %{{.*}}, %arg6{{.*}} {alignment = 16 : i64}
// CHECK:         memref.dealloc %[[DELTA]]
// CHECK:         memref.dealloc %[[LSE2]]
// CHECK:         memref.dealloc %[[ACC]]
// CHECK-NEXT:    return
func.func @fast_causal(%q: !q, %k: !q, %v: !q, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !q, %dv: !q) {
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

// Deterministic mode, bf16, no mask: no accumulator and no atomics; the dQ
// nest becomes a query-block launch that walks the key blocks in order and
// keeps dQ in registers.

!q = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!t = tensor<?x?x?x64xbf16>
!lt = tensor<?x?x?xf32>

// CHECK-LABEL: func.func @deterministic
// CHECK-NOT:     dq_accum
// CHECK:         gpu.launch {{.*}} function(@deterministic_preprocess_kernel)
// CHECK:         gpu.launch {{.*}} function(@deterministic_kernel)
// CHECK-NOT:       memref.atomic_rmw
// CHECK-NOT:       arith.cmpi sle
// CHECK:           nvvm.mma.sync
// CHECK:         gpu.launch {{.*}} function(@deterministic_dq_kernel)
// CHECK:           memref.load %{{.*}} : memref<?x?x?xf32>
// CHECK:           memref.load %{{.*}} : memref<?x?x?xf32>
// CHECK:           scf.for {{.*}} -> (vector<2x2xf32>
// CHECK:             nvvm.mma.sync
// CHECK-NOT:         memref.atomic_rmw
// CHECK:             scf.yield
// CHECK:           vector.store %{{.*}}, %arg6
func.func @deterministic(%q: !q, %k: !q, %v: !q, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !q, %dv: !q) {
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

// Static shapes and GQA (4 query heads over 2 kv heads): the head loop of
// the nest (2 query heads per kv head) runs inside the key-block kernel, whose
// grid is (key blocks, kv heads, batches) = (2, 2, 1).

!q = memref<1x4x100x64xbf16>
!k = memref<1x2x128x64xbf16>
!l = memref<1x4x100xf32>
!tq = tensor<1x4x100x64xbf16>
!tk = tensor<1x2x128x64xbf16>
!lt = tensor<1x4x100xf32>

// CHECK-LABEL: func.func @static_gqa
// CHECK-NOT:     scf.forall
// CHECK:         gpu.launch {{.*}} function(@static_gqa_preprocess_kernel)
// CHECK:         gpu.launch blocks({{.*}}) in (%{{.*}} = %c2{{.*}}, %{{.*}} = %c2{{.*}}, %{{.*}} = %c1{{.*}}) {{.*}} function(@static_gqa_kernel)
// CHECK:           scf.for
// CHECK:             memref.atomic_rmw addf
// CHECK:         gpu.launch {{.*}} function(@static_gqa_dq_convert_kernel)
func.func @static_gqa(%q: !q, %k: !k, %v: !k, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !k, %dv: !k) {
  %qt = bufferization.to_tensor %q restrict : !q to !tq
  %kt = bufferization.to_tensor %k restrict : !k to !tk
  %vt = bufferization.to_tensor %v restrict : !k to !tk
  %ot = bufferization.to_tensor %out restrict : !q to !tq
  %dot = bufferization.to_tensor %dout restrict : !q to !tq
  %lt = bufferization.to_tensor %lse restrict : !l to !lt
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot mask<causal> : (!tq, !tk, !tk, !tq, !lt, !tq) -> (!tq, !tk, !tk)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!tq, !q) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!tk, !k) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!tk, !k) -> ()
  return
}

// -----

// Softcap: the recomputed scores pass through tanh.approx.f32 (faptx.tanh),
// as in the forward, before the exponent; dS takes 1 - tanh^2.

!q = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!t = tensor<?x?x?x64xbf16>
!lt = tensor<?x?x?xf32>

// CHECK-LABEL: func.func @softcap
// CHECK:         gpu.launch {{.*}} function(@softcap_kernel)
// CHECK-NOT:       math.tanh
// CHECK:           faptx.tanh
// CHECK-NOT:       math.tanh
// CHECK:         gpu.launch {{.*}} function(@softcap_dq_convert_kernel)
func.func @softcap(%q: !q, %k: !q, %v: !q, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !q, %dv: !q) {
  %qt = bufferization.to_tensor %q restrict : !q to !t
  %kt = bufferization.to_tensor %k restrict : !q to !t
  %vt = bufferization.to_tensor %v restrict : !q to !t
  %ot = bufferization.to_tensor %out restrict : !q to !t
  %dot = bufferization.to_tensor %dout restrict : !q to !t
  %lt = bufferization.to_tensor %lse restrict : !l to !lt
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot softcap 30.0 : (!t, !t, !t, !t, !lt, !t) -> (!t, !t, !t)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !q) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!t, !q) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!t, !q) -> ()
  return
}
