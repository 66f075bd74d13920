// RUN: fa-opt %s --fa-lower-to-reference --verify-diagnostics

// The reference backward needs the derivative of a score_mod as a region of
// the op: fa-differentiate-score-mod builds it.

func.func @f(%q: tensor<1x2x16x32xf32>, %lse: tensor<1x2x16xf32>) -> tensor<1x2x16x32xf32> {
  // expected-error @below {{has a score_mod but no score_mod_grad: run fa-differentiate-score-mod first (the fa-reference-cpu pipeline does)}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        %t = math.tanh %s : f32
        fa.yield %t : f32
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16xf32>, tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>)
  return %dq : tensor<1x2x16x32xf32>
}
