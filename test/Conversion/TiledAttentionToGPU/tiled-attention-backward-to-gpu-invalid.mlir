// RUN: fa-opt %s --split-input-file --fa-tile-attention-backward="block-q=64 block-kv=64" --cse --fa-convert-tiled-attention-backward-to-gpu --verify-diagnostics
// RUN: not fa-opt %s --split-input-file --fa-tile-attention-backward="block-q=64 block-kv=64" --cse --fa-convert-tiled-attention-backward-to-gpu="warps=3" 2>&1 | FileCheck %s --check-prefix=WARPS
// WARPS: error: fa-convert-tiled-attention-backward-to-gpu: block-kv must be a multiple of 16 * warps

// The tensor cores take f16 or bf16.
!q = memref<?x?x?x64xf32, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!t = tensor<?x?x?x64xf32>
!lt = tensor<?x?x?xf32>
func.func @f32(%q: !q, %k: !q, %v: !q, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !q, %dv: !q) {
  %qt = bufferization.to_tensor %q restrict : !q to !t
  %kt = bufferization.to_tensor %k restrict : !q to !t
  %vt = bufferization.to_tensor %v restrict : !q to !t
  %ot = bufferization.to_tensor %out restrict : !q to !t
  %dot = bufferization.to_tensor %dout restrict : !q to !t
  %lt = bufferization.to_tensor %lse restrict : !l to !lt
  // expected-error @below {{fa-convert-tiled-attention-backward-to-gpu: mma.sync needs f16 or bf16 inputs}}
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot : (!t, !t, !t, !t, !lt, !t) -> (!t, !t, !t)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !q) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!t, !q) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!t, !q) -> ()
  return
}

// -----

// Tiles must come from memrefs: a tensor argument has no buffer to read.
!t = tensor<2x2x128x64xf16>
!lt = tensor<2x2x128xf32>
func.func @tensors(%q: !t, %k: !t, %v: !t, %o: !t, %lse: !lt, %do: !t) -> (!t, !t, !t) {
  // expected-error @below {{fa-convert-tiled-attention-backward-to-gpu: the step's tiles must be row slices of memrefs (through bufferization.to_tensor) or of the delta generic}}
  %gq, %gk, %gv = fa.attention_backward %q, %k, %v, %o, %lse, %do : (!t, !t, !t, !t, !lt, !t) -> (!t, !t, !t)
  return %gq, %gk, %gv : !t, !t, !t
}

// -----

// Valid with the default 4 warps; with warps=3 (second RUN line) the 64-key
// block does not split into 16-row warp tiles.
!q = memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!t = tensor<?x?x?x64xf16>
!lt = tensor<?x?x?xf32>
func.func @warps(%q: !q, %k: !q, %v: !q, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !q, %dv: !q) {
  %qt = bufferization.to_tensor %q restrict : !q to !t
  %kt = bufferization.to_tensor %k restrict : !q to !t
  %vt = bufferization.to_tensor %v restrict : !q to !t
  %ot = bufferization.to_tensor %out restrict : !q to !t
  %dot = bufferization.to_tensor %dout restrict : !q to !t
  %lt = bufferization.to_tensor %lse restrict : !l to !lt
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot : (!t, !t, !t, !t, !lt, !t) -> (!t, !t, !t)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !q) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!t, !q) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!t, !q) -> ()
  return
}
