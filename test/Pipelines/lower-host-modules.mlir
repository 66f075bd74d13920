// RUN: fa-opt %s --split-input-file --fa-lower-host-modules \
// RUN: | FileCheck %s --implicit-check-not=func.func \
// RUN:     --implicit-check-not=linalg. --implicit-check-not=tensor.

// The host lowering runs on every builtin.module that holds functions,
// innermost first: a function nested two modules deep is lowered whole, like
// one at the top.

// CHECK-LABEL: module @outer
// CHECK:         module @inner
// CHECK:           llvm.func @add
// CHECK:             llvm.fadd
module @outer {
  module @inner {
    func.func @add(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
      %e = tensor.empty() : tensor<4xf32>
      %r = linalg.add ins(%a, %b : tensor<4xf32>, tensor<4xf32>)
                      outs(%e : tensor<4xf32>) -> tensor<4xf32>
      return %r : tensor<4xf32>
    }
  }
}

// -----

// Functions at several levels: each module's own run lowers them; the outer
// run finds its inner module already in the LLVM dialect.

// CHECK-LABEL: module @top
// CHECK-DAG:     llvm.func @top_fn
// CHECK-DAG:     module @mid
// CHECK-DAG:       llvm.func @mid_fn
// CHECK-DAG:       module @leaf
// CHECK-DAG:         llvm.func @leaf_fn
module @top {
  func.func @top_fn(%x: f32) -> f32 {
    %y = arith.mulf %x, %x : f32
    return %y : f32
  }
  module @mid {
    func.func @mid_fn(%a: tensor<8xf32>) -> tensor<8xf32> {
      %e = tensor.empty() : tensor<8xf32>
      %r = linalg.exp ins(%a : tensor<8xf32>) outs(%e : tensor<8xf32>)
          -> tensor<8xf32>
      return %r : tensor<8xf32>
    }
    module @leaf {
      func.func @leaf_fn(%m: memref<?xf32>, %i: index) -> f32 {
        %v = memref.load %m[%i] : memref<?xf32>
        return %v : f32
      }
    }
  }
}

// -----

// A function that returns its argument: the deallocation pipeline returns a
// bufferization.clone of it (the caller owns results), which becomes an
// allocation and a copy; nothing of bufferization is left.

// CHECK-LABEL: llvm.func @return_argument
// CHECK-NOT:     bufferization
// CHECK:         llvm.call @malloc
// CHECK-NOT:     bufferization
// CHECK:         llvm.return
func.func @return_argument(%a: tensor<16x64xf32>) -> tensor<16x64xf32> {
  return %a : tensor<16x64xf32>
}
