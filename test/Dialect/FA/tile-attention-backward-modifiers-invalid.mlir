// RUN: fa-opt %s --split-input-file --fa-tile-attention-backward --verify-diagnostics

// A score_mod's tile steps multiply dS by its derivative: the tiling needs
// the op's score_mod_grad (fa-differentiate-score-mod builds it; the
// fa-tiled-cpu pipeline runs it first).
func.func @score_mod(%q: tensor<1x2x16x32xf32>, %lse: tensor<1x2x16xf32>)
    -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>) {
  // expected-error @below {{fa-tile-attention-backward: the score_mod has no score_mod_grad (run fa-differentiate-score-mod first, as the fa-tiled-cpu pipeline does)}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        %t = math.tanh %s : f32
        fa.yield %t : f32
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16xf32>, tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>)
  return %dq, %dk, %dv : tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>
}

// -----

// Ranges are read per block, unrolled over the groups it spans: at most 16
// (the default 64-key blocks in groups of 2 keys would need 32).
func.func @query_ranges_groups(%q: tensor<1x2x64x32xf32>, %lse: tensor<1x2x64xf32>,
                               %r: tensor<1x2x32x2xi32>)
    -> (tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>) {
  // expected-error @below {{fa-tile-attention-backward: query_ranges rows 2 split a block of 64 keys into more than 16 groups}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q query_ranges(%r rows 2)
      : (tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64xf32>, tensor<1x2x64x32xf32>, tensor<1x2x32x2xi32>) -> (tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>)
  return %dq, %dk, %dv : tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>
}

// -----

func.func @key_ranges_groups(%q: tensor<1x2x64x32xf32>, %lse: tensor<1x2x64xf32>,
                             %r: tensor<1x2x64x4xi32>)
    -> (tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>) {
  // expected-error @below {{fa-tile-attention-backward: key_ranges rows 1 split a block of 64 query rows into more than 16 groups}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q deterministic key_ranges(%r rows 1)
      : (tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x4xi32>) -> (tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>)
  return %dq, %dk, %dv : tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>
}
