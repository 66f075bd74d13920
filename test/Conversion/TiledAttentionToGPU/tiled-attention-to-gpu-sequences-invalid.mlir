// RUN: fa-opt %s --split-input-file --fa-tile-attention="block-q=128 block-kv=64" --fa-specialize-masks --fa-use-exp2 --canonicalize --cse --fa-convert-tiled-attention-to-gpu="warps=8 wgmma=true warp-specialize=true" -verify-diagnostics

// The warp-specialized kernel's TMA boxes are tiles of a dense tensor: a
// packed sequence's rows start anywhere.
func.func @varlen_ws(%q: memref<4x?x64xf16, strided<[?, ?, 1], offset: ?>>, %out: memref<4x?x64xf16, strided<[?, ?, 1], offset: ?>>, %lse: memref<4x?xf32, strided<[?, ?], offset: ?>>, %cu: memref<?xi32>, %max_q: index) {
  %qt = bufferization.to_tensor %q restrict : memref<4x?x64xf16, strided<[?, ?, 1], offset: ?>> to tensor<4x?x64xf16>
  %ct = bufferization.to_tensor %cu restrict : memref<?xi32> to tensor<?xi32>
  // expected-error @below {{fa-convert-tiled-attention-to-gpu: packed sequences and paged caches have cooperative kernels only (the warp-specialized kernel's TMA tiles are a dense tensor's)}}
  %o, %l = fa.attention_varlen %qt, %qt, %qt seqlens(%ct, %ct) max_seqlen_q(%max_q) : (tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<?xi32>, tensor<?xi32>, index) -> (tensor<4x?x64xf16>, tensor<4x?xf32>)
  bufferization.materialize_in_destination %o in restrict writable %out : (tensor<4x?x64xf16>, memref<4x?x64xf16, strided<[?, ?, 1], offset: ?>>) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<4x?xf32>, memref<4x?xf32, strided<[?, ?], offset: ?>>) -> ()
  return
}
