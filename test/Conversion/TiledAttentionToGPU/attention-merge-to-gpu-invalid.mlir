// RUN: fa-opt %s --split-input-file --fa-convert-attention-merge-to-gpu -verify-diagnostics

// Partials that are not workspace memrefs (plain tensors) have no kernel
// form.
func.func @tensor_partials(%o: tensor<1x8x3x1x128xf32>, %l: tensor<1x8x3x1xf32>) -> (tensor<1x8x1x128xbf16>, tensor<1x8x1xf32>) {
  // expected-error @+1 {{fa-convert-attention-merge-to-gpu: expected partials read from memrefs}}
  %out, %lse = fa.attention_merge_splits %o, %l : tensor<1x8x3x1x128xf32>, tensor<1x8x3x1xf32> -> tensor<1x8x1x128xbf16>, tensor<1x8x1xf32>
  return %out, %lse : tensor<1x8x1x128xbf16>, tensor<1x8x1xf32>
}

// -----

// A thread per column of out: at most 1024 of them.
func.func @wide(%out: memref<1x8x1x2048xbf16>, %lse: memref<1x8x1xf32>, %po: memref<1x24x1x2048xf32>, %pl: memref<1x24x1xf32>) {
  %to = bufferization.to_tensor %po restrict : memref<1x24x1x2048xf32> to tensor<1x24x1x2048xf32>
  %tl = bufferization.to_tensor %pl restrict : memref<1x24x1xf32> to tensor<1x24x1xf32>
  %eo = tensor.expand_shape %to [[0], [1, 2], [3], [4]] output_shape [1, 8, 3, 1, 2048] : tensor<1x24x1x2048xf32> into tensor<1x8x3x1x2048xf32>
  %el = tensor.expand_shape %tl [[0], [1, 2], [3]] output_shape [1, 8, 3, 1] : tensor<1x24x1xf32> into tensor<1x8x3x1xf32>
  // expected-error @+1 {{the value head dim must be static and at most 1024 (a thread per column), got 2048}}
  %o, %m = fa.attention_merge_splits %eo, %el : tensor<1x8x3x1x2048xf32>, tensor<1x8x3x1xf32> -> tensor<1x8x1x2048xbf16>, tensor<1x8x1xf32>
  bufferization.materialize_in_destination %o in restrict writable %out : (tensor<1x8x1x2048xbf16>, memref<1x8x1x2048xbf16>) -> ()
  bufferization.materialize_in_destination %m in restrict writable %lse : (tensor<1x8x1xf32>, memref<1x8x1xf32>) -> ()
  return
}
