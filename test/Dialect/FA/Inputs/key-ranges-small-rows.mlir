// (tile-attention-invalid.mlir) key_ranges of 3-row groups: a block of 64
// rows would read the ranges of 23 groups, more than fa-tile-attention
// unrolls.
func.func @f(%q: tensor<1x1x64x64xf16>, %r: tensor<1x1x22x2xi32>)
    -> (tensor<1x1x64x64xf16>, tensor<1x1x64xf32>) {
  // expected-error @below {{fa-tile-attention: key_ranges rows 3 split a block of 64 query rows into more than 16 groups}}
  %o, %l = fa.attention %q, %q, %q key_ranges(%r rows 3)
      : (tensor<1x1x64x64xf16>, tensor<1x1x64x64xf16>, tensor<1x1x64x64xf16>,
         tensor<1x1x22x2xi32>) -> (tensor<1x1x64x64xf16>, tensor<1x1x64xf32>)
  return %o, %l : tensor<1x1x64x64xf16>, tensor<1x1x64xf32>
}
