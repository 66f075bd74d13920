// RUN: fa-opt %s --split-input-file --fa-split-kv="splits=2" -verify-diagnostics

// A loop nest that is not fa-tile-attention's (here: a 2-d forall) is
// refused, not skipped: the partials would be missing.

func.func @not_tiled(%acc: tensor<16x64xf32>, %m: tensor<16xf32>, %s: tensor<16xf32>) -> tensor<4x16x64xf16> {
  %o0 = tensor.empty() : tensor<4x16x64xf16>
  // expected-error @+1 {{fa-split-kv: expected the loop nest of fa-tile-attention}}
  %r = scf.forall (%i, %j) in (4, 1) shared_outs(%o = %o0) -> (tensor<4x16x64xf16>) {
    %out, %lse = fa.online_attention_finalize %acc, %m, %s : tensor<16x64xf32>, tensor<16xf32> -> tensor<16x64xf16>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %out into %o[%i, 0, 0] [1, 16, 64] [1, 1, 1] : tensor<16x64xf16> into tensor<4x16x64xf16>
    }
  }
  return %r : tensor<4x16x64xf16>
}
