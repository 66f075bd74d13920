// RUN: fa-opt %s --split-input-file --fa-tile-attention --verify-diagnostics
// RUN: fa-opt %s --split-input-file --fa-tiled-attention --verify-diagnostics

// The online-softmax step has no form of the modifier regions yet: the
// tiling refuses an op that has one instead of dropping it.

func.func @f(%q: tensor<1x2x32x64xf16>, %slopes: tensor<2xf32>)
    -> (tensor<1x2x32x64xf16>, tensor<1x2x32xf32>) {
  // expected-error @below {{fa-tile-attention: score_mod and mask_mod are not tiled yet; fa-lower-to-reference (the fa-reference-cpu pipeline) lowers them}}
  %o, %l = fa.attention %q, %q, %q mask<causal> captures(%slopes)
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index,
                %sl: tensor<2xf32>) {
        %slope = tensor.extract %sl[%h] : tensor<2xf32>
        %r = arith.addf %s, %slope : f32
        fa.yield %r : f32
      }
      : (tensor<1x2x32x64xf16>, tensor<1x2x32x64xf16>, tensor<1x2x32x64xf16>,
         tensor<2xf32>) -> (tensor<1x2x32x64xf16>, tensor<1x2x32xf32>)
  return %o, %l : tensor<1x2x32x64xf16>, tensor<1x2x32xf32>
}

// -----

func.func @f(%q: tensor<1x2x32x64xf16>)
    -> (tensor<1x2x32x64xf16>, tensor<1x2x32xf32>) {
  // expected-error @below {{fa-tile-attention: score_mod and mask_mod are not tiled yet}}
  %o, %l = fa.attention %q, %q, %q
      mask_mod(%b: index, %h: index, %i: index, %j: index) {
        %v = arith.cmpi ule, %j, %i : index
        fa.yield %v : i1
      }
      : (tensor<1x2x32x64xf16>, tensor<1x2x32x64xf16>, tensor<1x2x32x64xf16>)
      -> (tensor<1x2x32x64xf16>, tensor<1x2x32xf32>)
  return %o, %l : tensor<1x2x32x64xf16>, tensor<1x2x32xf32>
}
