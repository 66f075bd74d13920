// Regression inputs for scripts/fuzz.py (cases split as in the lit tests).
// A forward in a module nested in the top-level one: the CPU pipelines
// must lower it or refuse it.
module {
  module {
    func.func @nested(%q: tensor<1x4x128x64xf16>, %k: tensor<1x4x128x64xf16>,
                      %v: tensor<1x4x128x64xf16>)
        -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>) {
      %out, %lse = fa.attention %q, %k, %v mask<causal>
          : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
             tensor<1x4x128x64xf16>)
          -> (tensor<1x4x128x64xf16>, tensor<1x4x128xf32>)
      return %out, %lse : tensor<1x4x128x64xf16>, tensor<1x4x128xf32>
    }
  }
}
