// Input of scripts/test-install.sh: fa-downstream-opt parses this and runs
// fa-lower-to-reference on it (the CHECK lines are for FileCheck).

// CHECK-LABEL: func.func @attention
// CHECK-NOT: fa.attention
// CHECK: linalg.generic
// CHECK: return
func.func @attention(%q: tensor<1x4x?x64xf16>, %k: tensor<1x2x?x64xf16>,
                     %v: tensor<1x2x?x64xf16>)
    -> (tensor<1x4x?x64xf16>, tensor<1x4x?xf32>) {
  %out, %lse = fa.attention %q, %k, %v mask<causal>
      : (tensor<1x4x?x64xf16>, tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>)
      -> (tensor<1x4x?x64xf16>, tensor<1x4x?xf32>)
  return %out, %lse : tensor<1x4x?x64xf16>, tensor<1x4x?xf32>
}
