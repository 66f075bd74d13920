// RUN: fa-opt %s --split-input-file --fa-tile-attention="block-q=24" --verify-diagnostics
// RUN: not fa-opt %s --fa-tile-attention="block-kv=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not fa-opt %s --fa-tile-attention="block-q=512" 2>&1 | FileCheck %s --check-prefix=LARGE
// RUN: fa-opt %S/Inputs/key-ranges-small-rows.mlir --fa-tile-attention="block-q=64" --verify-diagnostics

// Block sizes must fill whole 16-row tensor-core fragments.

// expected-error @below {{fa-tile-attention: block-q must be a multiple of 16 in [16, 256], got 24}}
module {
  func.func @f(%q: tensor<1x1x32x64xf16>) -> (tensor<1x1x32x64xf16>, tensor<1x1x32xf32>) {
    %o, %l = fa.attention %q, %q, %q : (tensor<1x1x32x64xf16>, tensor<1x1x32x64xf16>, tensor<1x1x32x64xf16>) -> (tensor<1x1x32x64xf16>, tensor<1x1x32xf32>)
    return %o, %l : tensor<1x1x32x64xf16>, tensor<1x1x32xf32>
  }
}

// ZERO: block-kv must be a multiple of 16 in [16, 256], got 0
// LARGE: block-q must be a multiple of 16 in [16, 256], got 512

