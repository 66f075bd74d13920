// RUN: fa-opt %s --split-input-file --fa-decompose-paged-key-blocks | FileCheck %s

// Element (r, d) of a block spanning pages: key k0 + r, when before the
// limit, is row key mod 16 of page table[b, key / 16]; past the limit the
// element is zero and neither the table nor the pool is read.

// CHECK-LABEL: func.func @span
// CHECK-SAME:    %[[P:[a-zA-Z0-9]+]]: tensor<?x8x16x128xbf16>, %[[T:[a-zA-Z0-9]+]]: tensor<?x?xi32>, %[[B:[a-zA-Z0-9]+]]: index, %[[H:[a-zA-Z0-9]+]]: index, %[[K0:[a-zA-Z0-9]+]]: index, %[[N:[a-zA-Z0-9]+]]: index
// CHECK:         %[[S:.*]] = arith.constant 16 : index
// CHECK:         tensor.generate {
// CHECK:         ^bb0(%[[R:.*]]: index, %[[D:.*]]: index):
// CHECK:           %[[KEY:.*]] = arith.addi %[[K0]], %[[R]] : index
// CHECK:           %[[IN:.*]] = arith.cmpi slt, %[[KEY]], %[[N]] : index
// CHECK:           %[[X:.*]] = scf.if %[[IN]] -> (bf16) {
// CHECK:             %[[PI:.*]] = arith.divui %[[KEY]], %[[S]] : index
// CHECK:             %[[PAGE32:.*]] = tensor.extract %[[T]][%[[B]], %[[PI]]] : tensor<?x?xi32>
// CHECK:             %[[PAGE:.*]] = arith.index_cast %[[PAGE32]] : i32 to index
// CHECK:             %[[ROW:.*]] = arith.remui %[[KEY]], %[[S]] : index
// CHECK:             %[[E:.*]] = tensor.extract %[[P]][%[[PAGE]], %[[H]], %[[ROW]], %[[D]]] : tensor<?x8x16x128xbf16>
// CHECK:             scf.yield %[[E]] : bf16
// CHECK:           } else {
// CHECK:             %[[Z:.*]] = arith.constant 0.000000e+00 : bf16
// CHECK:             scf.yield %[[Z]] : bf16
// CHECK:           tensor.yield %[[X]] : bf16
// CHECK:         } : tensor<64x128xbf16>
// CHECK-NOT:     fa.paged_key_block
func.func @span(%pages: tensor<?x8x16x128xbf16>, %t: tensor<?x?xi32>, %b: index, %h: index, %k0: index, %n: index) -> tensor<64x128xbf16> {
  %k = fa.paged_key_block %pages[%b, %h, %k0] table(%t) limit(%n) : tensor<?x8x16x128xbf16>, tensor<?x?xi32> -> tensor<64x128xbf16>
  return %k : tensor<64x128xbf16>
}
