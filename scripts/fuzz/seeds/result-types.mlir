// Regression inputs for scripts/fuzz.py (cases split as in the lit tests).
// Results whose types are only compatible with the operands': dynamic where
// the operands are static, and the other way round.
func.func @backward_dynamic_results(
    %q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>,
    %v: tensor<1x4x128x64xf16>, %o: tensor<1x4x128x64xf16>,
    %lse: tensor<1x4x128xf32>, %do: tensor<1x4x128x64xf16>)
    -> (tensor<?x?x?x64xf16>, tensor<1x4x?x64xf16>, tensor<?x4x128x64xf16>) {
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %o, %lse, %do mask<causal>
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
         tensor<1x4x128x64xf16>, tensor<1x4x128xf32>, tensor<1x4x128x64xf16>)
      -> (tensor<?x?x?x64xf16>, tensor<1x4x?x64xf16>, tensor<?x4x128x64xf16>)
  return %dq, %dk, %dv
      : tensor<?x?x?x64xf16>, tensor<1x4x?x64xf16>, tensor<?x4x128x64xf16>
}

// -----

// out and lse have their dynamic dims in different places.
func.func @forward_lse_dims(%q: tensor<?x4x?x64xf32>, %k: tensor<2x4x?x64xf32>,
                            %v: tensor<2x4x?x64xf32>)
    -> (tensor<2x?x32x64xf32>, tensor<?x4x?xf32>) {
  %out, %lse = fa.attention %q, %k, %v
      : (tensor<?x4x?x64xf32>, tensor<2x4x?x64xf32>, tensor<2x4x?x64xf32>)
      -> (tensor<2x?x32x64xf32>, tensor<?x4x?xf32>)
  return %out, %lse : tensor<2x?x32x64xf32>, tensor<?x4x?xf32>
}
