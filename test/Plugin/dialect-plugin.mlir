// UNSUPPORTED: system-windows
// RUN: mlir-opt %s --load-dialect-plugin=%fa_libs/FAPlugin%shlibext | FileCheck %s
// RUN: mlir-opt %s --load-dialect-plugin=%fa_libs/FAPlugin%shlibext \
// RUN:   --pass-pipeline="builtin.module(func.func(canonicalize,cse))" | FileCheck %s
// RUN: not mlir-opt %s 2>&1 | FileCheck %s --check-prefix=NO-PLUGIN

// The stock mlir-opt of the LLVM 22 packages parses, verifies and prints the
// fa dialect once FAPlugin is loaded as a dialect plugin, and runs upstream
// passes over it. Without the plugin the dialect is unknown.

// CHECK-LABEL: func.func @attention
// CHECK: %{{.*}}, %{{.*}} = fa.attention %{{.*}}, %{{.*}}, %{{.*}} mask<causal> scale 1.250000e-01 :
// CHECK-SAME: (tensor<2x8x?x64xbf16>, tensor<2x2x?x64xbf16>, tensor<2x2x?x64xbf16>)
// CHECK-SAME: -> (tensor<2x8x?x64xbf16>, tensor<2x8x?xf32>)
// NO-PLUGIN: Dialect `fa' not found for custom op 'fa.attention'
func.func @attention(%q: tensor<2x8x?x64xbf16>, %k: tensor<2x2x?x64xbf16>,
                     %v: tensor<2x2x?x64xbf16>)
    -> (tensor<2x8x?x64xbf16>, tensor<2x8x?xf32>) {
  %out, %lse = fa.attention %q, %k, %v mask<causal> scale 0.125
      : (tensor<2x8x?x64xbf16>, tensor<2x2x?x64xbf16>, tensor<2x2x?x64xbf16>)
      -> (tensor<2x8x?x64xbf16>, tensor<2x8x?xf32>)
  return %out, %lse : tensor<2x8x?x64xbf16>, tensor<2x8x?xf32>
}
