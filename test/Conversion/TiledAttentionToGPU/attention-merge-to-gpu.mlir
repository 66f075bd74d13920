// RUN: fa-opt %s --split-input-file --fa-convert-attention-merge-to-gpu | FileCheck %s

// fa-split-kv's merge over the workspace fa-convert-tiled-attention-to-gpu
// allocated: partials [B, H * S, N, Dv] and [B, H * S, N] read through
// to_tensor and expand_shape. One thread block per row (grid (N, H, B)), a
// thread per column of out; S is the workspace's head count over H.

// CHECK-LABEL: func.func @merge
// CHECK-SAME:    (%[[OUT:.*]]: memref<?x?x?x128xbf16{{.*}}>, %[[LSE:.*]]: memref<?x?x?xf32{{.*}}>, %[[PO:.*]]: memref<?x?x?x128xf32>, %[[PL:.*]]: memref<?x?x?xf32>, %{{.*}}: index)
// CHECK:         tensor.expand_shape
// CHECK:         tensor.expand_shape
// CHECK-DAG:     %[[B:.*]] = memref.dim %[[OUT]], %c0
// CHECK-DAG:     %[[H:.*]] = memref.dim %[[OUT]], %c1
// CHECK-DAG:     %[[N:.*]] = memref.dim %[[OUT]], %c2
// CHECK:         gpu.launch blocks(%[[BN:.*]], %[[BH:.*]], %[[BB:.*]]) in (%{{.*}} = %[[N]], %{{.*}} = %[[H]], %{{.*}} = %[[B]]) threads(%[[D:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c128
// CHECK:           %[[HS:.*]] = memref.dim %[[PO]], %c1
// CHECK:           %[[S:.*]] = arith.divui %[[HS]], %{{.*}}
// CHECK:           %[[H0:.*]] = arith.muli %[[BH]], %[[S]]
// The largest finite partial lse of the row.
// CHECK:           scf.for %{{.*}} = %{{.*}} to %[[S]]
// CHECK:             memref.load %[[PL]]
// CHECK:             arith.maximumf
// The weights and the weighted sum of column d.
// CHECK:           scf.for %{{.*}} = %{{.*}} to %[[S]]
// CHECK:             math.exp2
// CHECK:             memref.load %[[PO]][%[[BB]], %{{.*}}, %[[BN]], %[[D]]]
// CHECK:             math.fma
// CHECK:           arith.divf
// CHECK:           arith.truncf %{{.*}} : f32 to bf16
// CHECK:           memref.store %{{.*}}, %[[OUT]][%[[BB]], %[[BH]], %[[BN]], %[[D]]]
// CHECK:           scf.if
// CHECK:             math.log2
// CHECK:             memref.store %{{.*}}, %[[LSE]][%[[BB]], %[[BH]], %[[BN]]]
// CHECK-NOT:     fa.attention_merge_splits
// CHECK-NOT:     bufferization.materialize_in_destination
!o = memref<?x?x?x128xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
func.func @merge(%out: !o, %lse: !l, %po: memref<?x?x?x128xf32>, %pl: memref<?x?x?xf32>, %s: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %b = memref.dim %out, %c0 : !o
  %h = memref.dim %out, %c1 : !o
  %n = memref.dim %out, %c2 : !o
  %to = bufferization.to_tensor %po restrict : memref<?x?x?x128xf32> to tensor<?x?x?x128xf32>
  %tl = bufferization.to_tensor %pl restrict : memref<?x?x?xf32> to tensor<?x?x?xf32>
  %eo = tensor.expand_shape %to [[0], [1, 2], [3], [4]] output_shape [%b, %h, %s, %n, 128] : tensor<?x?x?x128xf32> into tensor<?x?x?x?x128xf32>
  %el = tensor.expand_shape %tl [[0], [1, 2], [3]] output_shape [%b, %h, %s, %n] : tensor<?x?x?xf32> into tensor<?x?x?x?xf32>
  %o, %m = fa.attention_merge_splits %eo, %el : tensor<?x?x?x?x128xf32>, tensor<?x?x?x?xf32> -> tensor<?x?x?x128xbf16>, tensor<?x?x?xf32>
  bufferization.materialize_in_destination %o in restrict writable %out : (tensor<?x?x?x128xbf16>, !o) -> ()
  bufferization.materialize_in_destination %m in restrict writable %lse : (tensor<?x?x?xf32>, !l) -> ()
  return
}
