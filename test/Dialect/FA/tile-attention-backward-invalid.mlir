// RUN: fa-opt %s --split-input-file --fa-tile-attention-backward="block-q=24" --verify-diagnostics
// RUN: fa-opt %s --split-input-file --fa-tile-attention-backward="block-kv=0" --verify-diagnostics
// RUN: fa-opt %s --split-input-file --fa-tile-attention-backward="block-q=-32" --verify-diagnostics
// RUN: fa-opt %s --split-input-file --fa-tile-attention-backward="block-kv=512" --verify-diagnostics
// RUN: not fa-opt %s --fa-tile-attention-backward="block-q=24" 2>&1 | FileCheck %s --check-prefix=ODD
// RUN: not fa-opt %s --fa-tile-attention-backward="block-kv=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not fa-opt %s --fa-tile-attention-backward="block-q=-32" 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not fa-opt %s --fa-tile-attention-backward="block-kv=512" 2>&1 | FileCheck %s --check-prefix=LARGE
// RUN: not fa-opt %s --fa-tile-attention-backward="block-q=8 block-kv=300" 2>&1 | FileCheck %s --check-prefix=BOTH

// Block sizes must fill whole 16-row tensor-core fragments and fit next to
// the other tiles: each RUN line above gets one bad size, reported on every
// fa.attention_backward op (nothing is rewritten, the pass fails).

func.func @bwd(%q: tensor<1x1x32x64xf16>, %lse: tensor<1x1x32xf32>)
    -> (tensor<1x1x32x64xf16>, tensor<1x1x32x64xf16>, tensor<1x1x32x64xf16>) {
  // expected-error-re @below {{fa-tile-attention-backward: block-{{q|kv}} must be a multiple of 16 in [16, 256], got {{-?[0-9]+}}}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q
      : (tensor<1x1x32x64xf16>, tensor<1x1x32x64xf16>, tensor<1x1x32x64xf16>,
         tensor<1x1x32x64xf16>, tensor<1x1x32xf32>, tensor<1x1x32x64xf16>)
      -> (tensor<1x1x32x64xf16>, tensor<1x1x32x64xf16>, tensor<1x1x32x64xf16>)
  return %dq, %dk, %dv : tensor<1x1x32x64xf16>, tensor<1x1x32x64xf16>, tensor<1x1x32x64xf16>
}

// -----

// The deterministic form is checked the same way.

func.func @deterministic(%q: tensor<1x1x32x64xf16>, %lse: tensor<1x1x32xf32>)
    -> (tensor<1x1x32x64xf16>, tensor<1x1x32x64xf16>, tensor<1x1x32x64xf16>) {
  // expected-error-re @below {{fa-tile-attention-backward: block-{{q|kv}} must be a multiple of 16 in [16, 256], got {{-?[0-9]+}}}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q mask<causal> deterministic
      : (tensor<1x1x32x64xf16>, tensor<1x1x32x64xf16>, tensor<1x1x32x64xf16>,
         tensor<1x1x32x64xf16>, tensor<1x1x32xf32>, tensor<1x1x32x64xf16>)
      -> (tensor<1x1x32x64xf16>, tensor<1x1x32x64xf16>, tensor<1x1x32x64xf16>)
  return %dq, %dk, %dv : tensor<1x1x32x64xf16>, tensor<1x1x32x64xf16>, tensor<1x1x32x64xf16>
}

// ODD: error: fa-tile-attention-backward: block-q must be a multiple of 16 in [16, 256], got 24
// ZERO: error: fa-tile-attention-backward: block-kv must be a multiple of 16 in [16, 256], got 0
// NEG: error: fa-tile-attention-backward: block-q must be a multiple of 16 in [16, 256], got -32
// LARGE: error: fa-tile-attention-backward: block-kv must be a multiple of 16 in [16, 256], got 512
// Both bad sizes are reported, not just the first.
// BOTH: error: fa-tile-attention-backward: block-q must be a multiple of 16 in [16, 256], got 8
// BOTH: error: fa-tile-attention-backward: block-kv must be a multiple of 16 in [16, 256], got 300
