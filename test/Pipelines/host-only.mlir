// RUN: fa-opt %s --split-input-file --fa-host-only --verify-diagnostics
// RUN: fa-opt %s --split-input-file --fa-tiled-cpu --verify-diagnostics
// RUN: fa-opt %s --split-input-file --fa-reference-cpu --verify-diagnostics
// RUN: fa-opt %s --split-input-file --fa-cpu-to-llvm --verify-diagnostics
// RUN: not fa-opt %s --fa-tiled-cpu -o /dev/null 2>&1 | FileCheck %s

// fa ops in a gpu.module are device code, which the CPU pipelines do not
// lower: an error before any fa pass expands them (they used to be tiled and
// then left half converted), and a non-zero exit.

// CHECK: error: holds fa.attention, device code that the CPU pipelines do not lower

module attributes {gpu.container_module} {
  // expected-error @below {{holds fa.attention, device code that the CPU pipelines do not lower (they lower host code; the GPU pipelines take fa ops on the host)}}
  gpu.module @kernels {
    func.func @f(%q: tensor<?x1x16x64xf32>) -> (tensor<?x1x16x64xf32>, tensor<?x?x?xf32>) {
      // expected-note @below {{fa op in device code here}}
      %o, %l = fa.attention %q, %q, %q : (tensor<?x1x16x64xf32>, tensor<?x1x16x64xf32>, tensor<?x1x16x64xf32>) -> (tensor<?x1x16x64xf32>, tensor<?x?x?xf32>)
      return %o, %l : tensor<?x1x16x64xf32>, tensor<?x?x?xf32>
    }
  }
}

// -----

// Inside a nested builtin module too; the tile-level ops count as well.

module @outer {
  module @inner attributes {gpu.container_module} {
    // expected-error @below {{holds fa.online_attention_finalize}}
    gpu.module @device {
      func.func @g(%acc: tensor<16x64xf32>, %m: tensor<16xf32>, %s: tensor<16xf32>) -> (tensor<16x64xf32>, tensor<16xf32>) {
        // expected-note @below {{fa op in device code here}}
        %o, %l = fa.online_attention_finalize %acc, %m, %s : tensor<16x64xf32>, tensor<16xf32> -> tensor<16x64xf32>
        return %o, %l : tensor<16x64xf32>, tensor<16xf32>
      }
    }
  }
}
