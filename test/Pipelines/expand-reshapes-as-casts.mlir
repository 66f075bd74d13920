// RUN: fa-opt %s --split-input-file --fa-expand-reshapes-as-casts | FileCheck %s
// RUN: fa-opt %s --split-input-file --fa-expand-reshapes-as-casts --expand-strided-metadata | FileCheck %s --check-prefix=LOWERED

// A dimension split into two dynamic sizes (fa-split-kv's partials on the
// CPU, heads and splits known at run time): the reinterpret_cast it means,
// strides from the source's. Upstream's expand-strided-metadata crashes on
// the reshape itself (docs/FUZZING.md, N), not on the cast.

// CHECK-LABEL: func.func @two_dynamic
// CHECK-SAME:    %[[M:[a-zA-Z0-9]+]]: memref<?x?x128xf32>, %[[B:[a-zA-Z0-9]+]]: index, %[[H:[a-zA-Z0-9]+]]: index, %[[S:[a-zA-Z0-9]+]]: index
// CHECK:         %[[BASE:.*]], %{{.*}}, %{{.*}}:3, %[[STRIDES:.*]]:3 = memref.extract_strided_metadata %[[M]]
// CHECK:         %[[HS:.*]] = arith.muli %[[STRIDES]]#1, %[[S]]
// The identity layout knows the offset (0) and the trailing strides.
// CHECK-NOT:     arith.muli
// CHECK:         memref.reinterpret_cast %[[BASE]] to offset: [0], sizes: [%[[B]], %[[H]], %[[S]], 128], strides: [%[[STRIDES]]#0, %[[HS]], 128, 1]
// CHECK-NOT:     memref.expand_shape
// LOWERED-LABEL: func.func @two_dynamic
// LOWERED-NOT:   memref.expand_shape
// LOWERED:       memref.reinterpret_cast
func.func @two_dynamic(%m: memref<?x?x128xf32>, %b: index, %h: index, %s: index) -> f32 {
  %c0 = arith.constant 0 : index
  %e = memref.expand_shape %m [[0], [1, 2], [3]] output_shape [%b, %h, %s, 128] : memref<?x?x128xf32> into memref<?x?x?x128xf32>
  %v = memref.load %e[%c0, %c0, %c0, %c0] : memref<?x?x?x128xf32>
  return %v : f32
}

// -----

// One dynamic size per group: upstream lowers it, left alone.

// CHECK-LABEL: func.func @one_dynamic
// CHECK:         memref.expand_shape
// CHECK-NOT:     memref.reinterpret_cast
func.func @one_dynamic(%m: memref<?x?x128xf32>, %b: index, %s: index) -> memref<?x4x?x128xf32> {
  %e = memref.expand_shape %m [[0], [1, 2], [3]] output_shape [%b, 4, %s, 128] : memref<?x?x128xf32> into memref<?x4x?x128xf32>
  return %e : memref<?x4x?x128xf32>
}
