// RUN: fa-opt %s --split-input-file --fa-tile-attention="block-q=128 block-kv=64" --fa-specialize-masks --fa-use-exp2 --canonicalize --cse --fa-convert-tiled-attention-to-gpu="warps=8 wgmma=true warp-specialize=true" -verify-diagnostics

// The warp-specialized kernel's TMA boxes are tiles of a dense tensor, not
// pages.
func.func @paged_ws(%q: memref<?x8x1x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %kp: memref<?x2x64x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %out: memref<?x8x1x64xbf16, strided<[?, ?, ?, 1], offset: ?>>, %lse: memref<?x8x1xf32, strided<[?, ?, ?], offset: ?>>, %t: memref<?x?xi32>, %n: memref<?xi32>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x8x1x64xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x8x1x64xbf16>
  %kt = bufferization.to_tensor %kp restrict : memref<?x2x64x64xbf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x2x64x64xbf16>
  %tt = bufferization.to_tensor %t restrict : memref<?x?xi32> to tensor<?x?xi32>
  %nt = bufferization.to_tensor %n restrict : memref<?xi32> to tensor<?xi32>
  // expected-error @below {{fa-convert-tiled-attention-to-gpu: paged caches have cooperative kernels only (a TMA box of a page would read its unused rows)}}
  %o, %l = fa.attention_paged %qt, %kt, %kt pages(%tt) seqlens(%nt) : (tensor<?x8x1x64xbf16>, tensor<?x2x64x64xbf16>, tensor<?x2x64x64xbf16>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x8x1x64xbf16>, tensor<?x8x1xf32>)
  bufferization.materialize_in_destination %o in restrict writable %out : (tensor<?x8x1x64xbf16>, memref<?x8x1x64xbf16, strided<[?, ?, ?, 1], offset: ?>>) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<?x8x1xf32>, memref<?x8x1xf32, strided<[?, ?, ?], offset: ?>>) -> ()
  return
}
