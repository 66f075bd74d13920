// Modifiers for fa-compile --modifiers (the form flashmlir.trace_modifiers
// writes): ALiBi (a slope per head, a capture) and prefix-LM (the first 16
// keys, then causal). The q/k/v types here do not matter: fa-compile's flags
// describe the kernel.
func.func @attention(%q: tensor<1x2x64x64xf16>, %k: tensor<1x2x64x64xf16>,
                     %v: tensor<1x2x64x64xf16>, %cap0: tensor<8xf32>)
    -> (tensor<1x2x64x64xf16>, tensor<1x2x64xf32>) {
  %o, %l = fa.attention %q, %k, %v captures(%cap0)
      score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index,
                %c0: tensor<8xf32>) {
        %m = tensor.extract %c0[%h] : tensor<8xf32>
        %d = arith.subi %j, %i : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %bias = arith.mulf %m, %df : f32
        %r = arith.addf %s, %bias : f32
        fa.yield %r : f32
      }
      mask_mod(%b: index, %h: index, %i: index, %j: index,
               %c0: tensor<8xf32>) {
        %c16 = arith.constant 16 : index
        %p = arith.cmpi ult, %j, %c16 : index
        %c = arith.cmpi ule, %j, %i : index
        %v2 = arith.ori %p, %c : i1
        fa.yield %v2 : i1
      }
      : (tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>,
         tensor<8xf32>) -> (tensor<1x2x64x64xf16>, tensor<1x2x64xf32>)
  return %o, %l : tensor<1x2x64x64xf16>, tensor<1x2x64xf32>
}
