// RUN: fa-opt %s --split-input-file --fa-tiled-cpu="block-q=16 block-kv=16" \
// RUN: | FileCheck %s --implicit-check-not=func.func \
// RUN:     --implicit-check-not=linalg. --implicit-check-not=tensor. \
// RUN:     --implicit-check-not=fa.
// RUN: fa-opt %s --split-input-file --fa-reference-cpu \
// RUN: | FileCheck %s --implicit-check-not=func.func \
// RUN:     --implicit-check-not=linalg. --implicit-check-not=tensor. \
// RUN:     --implicit-check-not=fa.

// The CPU pipelines lower attention in nested modules whole. They used to
// add the host lowering flat to the top-level module, whose bufferization
// and func-to-LLVM only convert that module's own functions: fa-tiled-cpu
// then crashed printing invalid IR, fa-reference-cpu exited 0 with func.func,
// linalg.generic and tensor.empty left next to llvm.func.

// CHECK-LABEL: module @outer
// CHECK:         module @inner
// CHECK:           llvm.func @attention
module @outer {
  module @inner {
    func.func @attention(%q: tensor<?x1x16x64xf32>, %k: tensor<?x1x16x64xf32>, %v: tensor<?x1x16x64xf32>) -> (tensor<?x1x16x64xf32>, tensor<?x?x?xf32>) {
      %o, %l = fa.attention %q, %k, %v : (tensor<?x1x16x64xf32>, tensor<?x1x16x64xf32>, tensor<?x1x16x64xf32>) -> (tensor<?x1x16x64xf32>, tensor<?x?x?xf32>)
      return %o, %l : tensor<?x1x16x64xf32>, tensor<?x?x?xf32>
    }
  }
}

// -----

// A forward at the top and a backward one module down.

// CHECK-LABEL: module @mixed
// CHECK-DAG:     llvm.func @forward
// CHECK-DAG:     module @grad
// CHECK-DAG:       llvm.func @backward
module @mixed {
  func.func @forward(%q: tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16xf32>) {
    %o, %l = fa.attention %q, %q, %q mask<causal> : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16xf32>)
    return %o, %l : tensor<1x2x16x32xf32>, tensor<1x2x16xf32>
  }
  module @grad {
    func.func @backward(%q: tensor<?x2x?x32xf32>, %o: tensor<?x2x?x32xf32>, %l: tensor<?x2x?xf32>) -> (tensor<?x2x?x32xf32>, tensor<?x2x?x32xf32>, tensor<?x2x?x32xf32>) {
      %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %o, %l, %o : (tensor<?x2x?x32xf32>, tensor<?x2x?x32xf32>, tensor<?x2x?x32xf32>, tensor<?x2x?x32xf32>, tensor<?x2x?xf32>, tensor<?x2x?x32xf32>) -> (tensor<?x2x?x32xf32>, tensor<?x2x?x32xf32>, tensor<?x2x?x32xf32>)
      return %dq, %dk, %dv : tensor<?x2x?x32xf32>, tensor<?x2x?x32xf32>, tensor<?x2x?x32xf32>
    }
  }
}
