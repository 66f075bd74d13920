// RUN: fa-opt %s --fa-tile-attention-backward --verify-diagnostics

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
