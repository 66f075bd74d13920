// UNSUPPORTED: system-windows
// RUN: mlir-opt %s --load-dialect-plugin=%fa_libs/FAPlugin%shlibext \
// RUN:   --load-pass-plugin=%fa_libs/FAPlugin%shlibext \
// RUN:   --pass-pipeline="builtin.module(func.func(fa-use-exp2))" | FileCheck %s
// RUN: mlir-opt %s --load-dialect-plugin=%fa_libs/FAPlugin%shlibext \
// RUN:   --load-pass-plugin=%fa_libs/FAPlugin%shlibext \
// RUN:   --pass-pipeline="builtin.module(fa-lower-to-reference)" \
// RUN:   | FileCheck %s --check-prefix=REF

// The stock mlir-opt runs fa passes from FAPlugin loaded as a pass plugin.
// The same library is also loaded as a dialect plugin: a pass plugin only
// registers passes, and parsing the input needs the fa dialect.

// fa-use-exp2 switches a step and its finalize to base 2 together.
// CHECK-LABEL: func.func @one_step
// CHECK: fa.online_attention {{.*}} exp2 :
// CHECK: fa.online_attention_finalize {{.*}} exp2 :
func.func @one_step(%q: tensor<64x64xf16>, %k: tensor<64x64xf16>,
                    %v: tensor<64x64xf16>, %acc: tensor<64x64xf32>,
                    %sum: tensor<64xf32>)
    -> (tensor<64x64xf16>, tensor<64xf32>) {
  %max = arith.constant dense<0xFF800000> : tensor<64xf32>
  %acc1, %max1, %sum1 = fa.online_attention %q, %k, %v into %acc, %max, %sum
      scale 0.125
      : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>
      -> tensor<64x64xf32>, tensor<64xf32>
  %out, %lse = fa.online_attention_finalize %acc1, %max1, %sum1
      : tensor<64x64xf32>, tensor<64xf32> -> tensor<64x64xf16>
  return %out, %lse : tensor<64x64xf16>, tensor<64xf32>
}

// fa-lower-to-reference rewrites the forward op into upstream ops.
// REF-LABEL: func.func @attention
// REF-NOT: fa.attention
// REF: linalg.generic
// REF: return
func.func @attention(%q: tensor<1x2x16x32xf32>, %k: tensor<1x1x16x32xf32>,
                     %v: tensor<1x1x16x32xf32>)
    -> (tensor<1x2x16x32xf32>, tensor<1x2x16xf32>) {
  %out, %lse = fa.attention %q, %k, %v mask<causal>
      : (tensor<1x2x16x32xf32>, tensor<1x1x16x32xf32>, tensor<1x1x16x32xf32>)
      -> (tensor<1x2x16x32xf32>, tensor<1x2x16xf32>)
  return %out, %lse : tensor<1x2x16x32xf32>, tensor<1x2x16xf32>
}
