// A score_mod that states the softcap 30 * tanh(s / 30): fa-compile builds
// the built-in softcap in (fa-recognize-builtin-modifiers).
func.func @attention(%q: tensor<1x2x64x64xf16>, %k: tensor<1x2x64x64xf16>,
                     %v: tensor<1x2x64x64xf16>)
    -> (tensor<1x2x64x64xf16>, tensor<1x2x64xf32>) {
  %o, %l = fa.attention %q, %k, %v
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
        %c = arith.constant 30.0 : f32
        %d = arith.divf %s, %c : f32
        %t = math.tanh %d : f32
        %r = arith.mulf %c, %t : f32
        fa.yield %r : f32
      }
      : (tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>) -> (tensor<1x2x64x64xf16>, tensor<1x2x64xf32>)
  return %o, %l : tensor<1x2x64x64xf16>, tensor<1x2x64xf32>
}
