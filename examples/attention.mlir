// The built-in example of scripts/demo.sh: one causal grouped-query attention
// layer in bf16, forward and backward, as an ML compiler would emit it.
// 8 query heads share 2 key/value heads (GQA, group of 4); the head dim is
// 128; the sequence length is only known at run time. The scale defaults to
// 1/sqrt(128).
func.func @attention_layer(%q: tensor<2x8x?x128xbf16>,
                           %k: tensor<2x2x?x128xbf16>,
                           %v: tensor<2x2x?x128xbf16>,
                           %dout: tensor<2x8x?x128xbf16>)
    -> (tensor<2x8x?x128xbf16>, tensor<2x8x?x128xbf16>,
        tensor<2x2x?x128xbf16>, tensor<2x2x?x128xbf16>) {
  // Forward: out = softmax(q k^T / sqrt(128) + causal mask) v, and the
  // log-sum-exp of each score row for the backward.
  %out, %lse = fa.attention %q, %k, %v mask<causal>
      : (tensor<2x8x?x128xbf16>, tensor<2x2x?x128xbf16>,
         tensor<2x2x?x128xbf16>)
      -> (tensor<2x8x?x128xbf16>, tensor<2x8x?xf32>)
  // Backward: recomputes the probabilities from lse; dk and dv sum over the
  // 4 query heads of each group.
  %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %out, %lse, %dout mask<causal>
      : (tensor<2x8x?x128xbf16>, tensor<2x2x?x128xbf16>,
         tensor<2x2x?x128xbf16>, tensor<2x8x?x128xbf16>,
         tensor<2x8x?xf32>, tensor<2x8x?x128xbf16>)
      -> (tensor<2x8x?x128xbf16>, tensor<2x2x?x128xbf16>,
          tensor<2x2x?x128xbf16>)
  return %out, %dq, %dk, %dv
      : tensor<2x8x?x128xbf16>, tensor<2x8x?x128xbf16>,
        tensor<2x2x?x128xbf16>, tensor<2x2x?x128xbf16>
}
