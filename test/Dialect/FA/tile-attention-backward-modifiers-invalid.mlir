// RUN: fa-opt %s --fa-tile-attention-backward --verify-diagnostics
// RUN: fa-opt %s --fa-tiled-attention --verify-diagnostics

// The backward tile step has no form of the modifier regions yet: the
// tiling refuses an op that has one instead of dropping it.

func.func @f(%q: tensor<1x2x16x32xf32>, %lse: tensor<1x2x16xf32>)
    -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>) {
  // expected-error @below {{fa-tile-attention-backward: score_mod and mask_mod are not tiled yet; fa-lower-to-reference (the fa-reference-cpu pipeline) lowers them}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q
      mask_mod(%b: index, %h: index, %i: index, %j: index) {
        %v = arith.cmpi ule, %j, %i : index
        fa.yield %v : i1
      }
      : (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16xf32>, tensor<1x2x16x32xf32>) -> (tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>)
  return %dq, %dk, %dv : tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>, tensor<1x2x16x32xf32>
}
