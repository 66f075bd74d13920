// Regression inputs for scripts/fuzz.py (cases split as in the lit tests).
// Sliding windows at the ends of the int64 range, through the key loop
// fa-specialize-masks rewrites.
func.func @window_int64_max(%q: tensor<64x64xf16>, %k: tensor<32x64xf16>,
                            %v: tensor<32x64xf16>, %acc: tensor<64x64xf32>,
                            %m: tensor<64xf32>, %l: tensor<64xf32>,
                            %q0: index, %nq: index, %nk: index)
    -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %r:3 = scf.for %k0 = %c0 to %nk step %c32
      iter_args(%a = %acc, %mm = %m, %ll = %l)
      -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) {
    %n:3 = fa.online_attention %q, %k, %v into %a, %mm, %ll
        masked(%q0, %k0, %nq, %nk) mask<window 9223372036854775807, 9223372036854775807>
        scale 0.125
        : tensor<64x64xf16>, tensor<32x64xf16>, tensor<32x64xf16>
          -> tensor<64x64xf32>, tensor<64xf32>
    scf.yield %n#0, %n#1, %n#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
  }
  return %r#0, %r#1, %r#2 : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
}

// -----

func.func @forward_window_int64_max(%q: tensor<1x4x128x64xf16>,
                                    %k: tensor<1x4x128x64xf16>,
                                    %v: tensor<1x4x128x64xf16>)
    -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>) {
  %out, %lse = fa.attention %q, %k, %v mask<window 9223372036854775807, 0>
      : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>)
      -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
  return %out, %lse : tensor<1x4x128x64xf16>, tensor<1x4x128xf32>
}
