// (fa-compile-modifiers.mlir) A document mask over per-token ids with
// run-time key ranges in groups of 128 query rows (the Python default), with the fully
// visible keys (4 columns).
func.func @m(%q: tensor<1x1x1x128xbf16>, %r: tensor<1x1x1x4xi32>, %doc: tensor<1x16384xi32>)
    -> (tensor<1x1x1x128xbf16>, tensor<1x1x1xf32>) {
  %o, %l = fa.attention %q, %q, %q key_ranges(%r rows 128) captures(%doc)
      mask_mod(%b: index, %h: index, %i: index, %j: index, %d: tensor<1x16384xi32>) {
        %di = tensor.extract %d[%b, %i] : tensor<1x16384xi32>
        %dj = tensor.extract %d[%b, %j] : tensor<1x16384xi32>
        %same = arith.cmpi eq, %di, %dj : i32
        fa.yield %same : i1
      }
      : (tensor<1x1x1x128xbf16>, tensor<1x1x1x128xbf16>, tensor<1x1x1x128xbf16>,
         tensor<1x1x1x4xi32>, tensor<1x16384xi32>) -> (tensor<1x1x1x128xbf16>, tensor<1x1x1xf32>)
  return %o, %l : tensor<1x1x1x128xbf16>, tensor<1x1x1xf32>
}
