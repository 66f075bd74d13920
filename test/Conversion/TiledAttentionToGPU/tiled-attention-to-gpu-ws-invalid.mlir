// RUN: fa-opt %s --fa-tile-attention="block-q=64 block-kv=64" --fa-convert-tiled-attention-to-gpu="warps=4 warp-specialize=true" -verify-diagnostics

// The warp roles exist only for the wgmma kernels (one TMA box per
// 64-column panel of their swizzled tiles).
!m = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
!t = tensor<?x?x?x64xbf16>
!lt = tensor<?x?x?xf32>

func.func @no_wgmma(%q: !m, %k: !m, %v: !m, %o: !m, %lse: !l) {
  %qt = bufferization.to_tensor %q restrict : !m to !t
  %kt = bufferization.to_tensor %k restrict : !m to !t
  %vt = bufferization.to_tensor %v restrict : !m to !t
  // expected-error @+1 {{fa-convert-tiled-attention-to-gpu: warp-specialize needs wgmma, head dims that are multiples of 64 and block-kv <= 256 (one TMA box per 64-column panel)}}
  %out, %l = fa.attention %qt, %kt, %vt : (!t, !t, !t) -> (!t, !lt)
  bufferization.materialize_in_destination %out in restrict writable %o : (!t, !m) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (!lt, !l) -> ()
  return
}
