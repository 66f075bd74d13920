// RUN: fa-opt %s --split-input-file --fa-tile-attention-backward="block-q=64 block-kv=64" --cse --fa-convert-tiled-attention-backward-to-gpu | FileCheck %s

// Packed sequences ([H, T, D] memrefs, i32 cu_seqlens), fast mode, causal:
// the row kernels run over all Tq rows of a workspace of a static batch of
// one; the key-block kernel over (ceil(max_seqlen_k / 64), kv heads,
// sequences) (reordered longest first on small causal GQA grids) reads
// each sequence's offsets, sees the packed memrefs as
// [1, H, T, D] views, copies lse2 / delta one f32 per thread (rows start
// anywhere) and bounds rows by the sequence's end; a last launch zeroes the
// dK / dV rows of no sequence.

// CHECK-LABEL: func.func @varlen_causal
// CHECK-SAME:    %[[Q:[a-zA-Z0-9]+]]: memref<4x?x64xf16, {{.*}}>, %[[K:[a-zA-Z0-9]+]]: memref<2x?x64xf16, {{.*}}>, %{{.*}}: memref<2x?x64xf16, {{.*}}>, %{{.*}}: memref<4x?x64xf16, {{.*}}>, %{{.*}}: memref<4x?x64xf16, {{.*}}>, %{{.*}}: memref<4x?xf32, {{.*}}>, %{{.*}}: memref<4x?x64xf16, {{.*}}>, %[[DK:[a-zA-Z0-9]+]]: memref<2x?x64xf16, {{.*}}>, %{{.*}}: memref<2x?x64xf16, {{.*}}>, %[[CUQ:[a-zA-Z0-9]+]]: memref<?xi32>, %[[CUK:[a-zA-Z0-9]+]]: memref<?xi32>, %[[MAXQ:[a-zA-Z0-9]+]]: index, %[[MAXK:[a-zA-Z0-9]+]]: index
// CHECK:         %[[NKB:.*]] = arith.ceildivui %[[MAXK]], %{{.*}} : index
// CHECK:         %[[DELTA:.*]] = memref.alloc(%{{.*}}) {fa.workspace = "delta"} : memref<1x?x?xf32>
// CHECK:         %[[LSE2:.*]] = memref.alloc(%{{.*}}) {fa.workspace = "lse2"} : memref<1x?x?xf32>
// CHECK:         %[[ACC:.*]] = memref.alloc(%{{.*}}) {fa.workspace = "dq_accum"} : memref<1x?x?x64xf32>
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}}, %{{.*}} = %c1{{.*}}) {{.*}} function(@varlen_causal_preprocess_kernel)
// CHECK:           memref.expand_shape {{.*}} into memref<1x4x?x64xf16
// CHECK:         gpu.launch blocks(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %[[SEQ:[a-z0-9_]+]]) in (%{{.*}} = %[[NKB]], {{.*}} function(@varlen_causal_kernel)
// CHECK:           %[[Q4:.*]] = memref.expand_shape %[[Q]] {{.*}} into memref<1x4x?x64xf16
// Causal with GQA (4:2): a small grid (at most 64 key blocks and 1024
// blocks) takes the launch order as every (kv head, sequence)'s key block
// 0 first, then block 1, ... (the longest blocks first).
// CHECK:           %[[SMALL:.*]] = arith.andi %{{.*}}, %{{.*}} : i1
// CHECK:           %[[GQA:.*]] = arith.cmpi uge, %{{.*}}, %c2{{.*}} : index
// CHECK:           %[[REORDER:.*]] = arith.andi %[[SMALL]], %[[GQA]] : i1
// CHECK:           %[[SEQSEL:.*]] = arith.select %[[REORDER]], %{{.*}}, %[[SEQ]] : index
// CHECK:           memref.load %[[CUK]][%[[SEQSEL]]] : memref<?xi32>
// lse2 and delta: 4-byte copies, zero-filled past the sequence's rows.
// CHECK:           nvgpu.device_async_copy %[[LSE2]][%{{.*}}, %{{.*}}, %{{.*}}], %{{.*}}[%{{.*}}], 1, %{{.*}} : memref<1x?x?xf32> to memref<128xf32, #gpu.address_space<workgroup>>
// CHECK:           nvgpu.device_async_copy %[[DELTA]]
// dQ: f32 atomics into the accumulator.
// CHECK:           memref.atomic_rmw addf %{{.*}}, %[[ACC]]
// CHECK:         function(@varlen_causal_dq_convert_kernel)
// CHECK:         function(@varlen_causal_zero_rows_kernel)
// CHECK:           %[[DK4:.*]] = memref.expand_shape %[[DK]]
// The rows of no sequence: before cu_seqlens_k[0], from cu_seqlens_k[B] on.
// CHECK:           memref.load %[[CUK]]
// CHECK:           scf.if
// CHECK:             vector.store %{{.*}}, %[[DK4]]
// CHECK:         memref.dealloc %[[DELTA]]

!q = memref<4x?x64xf16, strided<[?, ?, 1], offset: ?>>
!k = memref<2x?x64xf16, strided<[?, ?, 1], offset: ?>>
!l = memref<4x?xf32, strided<[?, 1], offset: ?>>
!t = tensor<4x?x64xf16>
!kt = tensor<2x?x64xf16>
!lt = tensor<4x?xf32>
func.func @varlen_causal(%q: !q, %k: !k, %v: !k, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !k, %dv: !k, %cu_q: memref<?xi32>, %cu_k: memref<?xi32>, %max_q: index, %max_k: index) {
  %qt = bufferization.to_tensor %q restrict : !q to !t
  %kt = bufferization.to_tensor %k restrict : !k to !kt
  %vt = bufferization.to_tensor %v restrict : !k to !kt
  %ot = bufferization.to_tensor %out restrict : !q to !t
  %dot = bufferization.to_tensor %dout restrict : !q to !t
  %lt = bufferization.to_tensor %lse restrict : !l to !lt
  %cq = bufferization.to_tensor %cu_q restrict : memref<?xi32> to tensor<?xi32>
  %ck = bufferization.to_tensor %cu_k restrict : memref<?xi32> to tensor<?xi32>
  %gq, %gk, %gv = fa.attention_varlen_backward %qt, %kt, %vt, %ot, %lt, %dot seqlens(%cq, %ck) max_seqlen_q(%max_q) max_seqlen_k(%max_k) mask<causal> : (!t, !kt, !kt, !t, !lt, !t, tensor<?xi32>, tensor<?xi32>, index, index) -> (!t, !kt, !kt)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !q) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!kt, !k) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!kt, !k) -> ()
  return
}
