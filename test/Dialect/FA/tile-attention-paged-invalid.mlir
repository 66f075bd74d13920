// RUN: fa-opt %s --split-input-file --fa-tile-attention="block-kv=64" --verify-diagnostics

// A key block must lie within one page.
func.func @f(%q: tensor<1x1x1x64xf16>, %kp: tensor<?x1x48x64xf16>, %t: tensor<1x?xi32>, %n: tensor<1xi32>) -> (tensor<1x1x1x64xf16>, tensor<1x1x1xf32>) {
  // expected-error @below {{fa-tile-attention: the page size (48) must be a multiple of the key block (64)}}
  %o, %l = fa.attention_paged %q, %kp, %kp pages(%t) seqlens(%n) : (tensor<1x1x1x64xf16>, tensor<?x1x48x64xf16>, tensor<?x1x48x64xf16>, tensor<1x?xi32>, tensor<1xi32>) -> (tensor<1x1x1x64xf16>, tensor<1x1x1xf32>)
  return %o, %l : tensor<1x1x1x64xf16>, tensor<1x1x1xf32>
}
