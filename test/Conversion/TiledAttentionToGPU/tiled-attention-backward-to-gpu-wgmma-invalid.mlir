// RUN: fa-opt %s --split-input-file --fa-tile-attention-backward="block-q=64 block-kv=64" --cse --fa-convert-tiled-attention-backward-to-gpu="warps=4 wgmma=true" --verify-diagnostics
//
// The tile shape and warps are fixed per RUN line, so the errors they cause
// get RUN lines of their own, each checked on @deterministic (the last case):
// RUN: not fa-opt %s --split-input-file --fa-tile-attention-backward="block-q=64 block-kv=32" --cse --fa-convert-tiled-attention-backward-to-gpu="warps=2 wgmma=true" 2>&1 | FileCheck %s --check-prefix=WARPS
// RUN: not fa-opt %s --split-input-file --fa-tile-attention-backward="block-q=64 block-kv=128" --cse --fa-convert-tiled-attention-backward-to-gpu="warps=4 wgmma=true" 2>&1 | FileCheck %s --check-prefix=BLOCKKV
// RUN: not fa-opt %s --split-input-file --fa-tile-attention-backward="block-q=32 block-kv=64" --cse --fa-convert-tiled-attention-backward-to-gpu="warps=4 wgmma=true" 2>&1 | FileCheck %s --check-prefix=BLOCKQ

// Fast mode: the wgmma kernel adds dQ to the accumulator with 16-byte
// red.global.add.v4.f32 only (no scalar-atomic fallback).
!q = memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!t = tensor<?x?x?x64xf16>
!lt = tensor<?x?x?xf32>
func.func @fast_without_vector_atomics(%q: !q, %k: !q, %v: !q, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !q, %dv: !q) {
  %qt = bufferization.to_tensor %q restrict : !q to !t
  %kt = bufferization.to_tensor %k restrict : !q to !t
  %vt = bufferization.to_tensor %v restrict : !q to !t
  %ot = bufferization.to_tensor %out restrict : !q to !t
  %dot = bufferization.to_tensor %dout restrict : !q to !t
  %lt = bufferization.to_tensor %lse restrict : !l to !lt
  // expected-error @below {{fa-convert-tiled-attention-backward-to-gpu: wgmma adds dQ with vector reductions: set vector-atomics}}
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot mask<causal> : (!t, !t, !t, !t, !lt, !t) -> (!t, !t, !t)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !q) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!t, !q) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!t, !q) -> ()
  return
}

// -----

// Valid under the first RUN line: deterministic mode adds no dQ in the
// key-block kernel, so it needs no vector-atomics. The other RUN lines break
// one requirement each:
// - warps=2 (block-kv=32): wgmma is issued by whole warpgroups of 4 warps;
// - block-kv=128 on 4 warps: each warp would own 32 keys, one warpgroup
//   wgmma covers 64;
// - block-q=32: the queries are the N of S^T and dP^T and the K of dV and
//   dK, read through 64-column panels.
!q = memref<?x?x?x64xbf16, strided<[?, ?, ?, 1], offset: ?>>
!l = memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>
!t = tensor<?x?x?x64xbf16>
!lt = tensor<?x?x?xf32>
func.func @deterministic(%q: !q, %k: !q, %v: !q, %out: !q, %dout: !q, %lse: !l, %dq: !q, %dk: !q, %dv: !q) {
  %qt = bufferization.to_tensor %q restrict : !q to !t
  %kt = bufferization.to_tensor %k restrict : !q to !t
  %vt = bufferization.to_tensor %v restrict : !q to !t
  %ot = bufferization.to_tensor %out restrict : !q to !t
  %dot = bufferization.to_tensor %dout restrict : !q to !t
  %lt = bufferization.to_tensor %lse restrict : !l to !lt
  // WARPS: :[[@LINE+3]]:{{[0-9]+}}: error: fa-convert-tiled-attention-backward-to-gpu: wgmma needs whole warpgroups of 16 keys per warp: warps a multiple of 4 and block-kv == 16 * warps
  // BLOCKKV: :[[@LINE+2]]:{{[0-9]+}}: error: fa-convert-tiled-attention-backward-to-gpu: wgmma needs whole warpgroups of 16 keys per warp: warps a multiple of 4 and block-kv == 16 * warps
  // BLOCKQ: :[[@LINE+1]]:{{[0-9]+}}: error: fa-convert-tiled-attention-backward-to-gpu: wgmma reads dS^T in 64-query panels: block-q must be a multiple of 64, at most 256
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot mask<causal> deterministic : (!t, !t, !t, !t, !lt, !t) -> (!t, !t, !t)
  bufferization.materialize_in_destination %gq in restrict writable %dq : (!t, !q) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : (!t, !q) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : (!t, !q) -> ()
  return
}
