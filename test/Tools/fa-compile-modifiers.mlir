// REQUIRES: ptxas
// fa-compile --modifiers gives the forward kernel the score_mod / mask_mod of
// another file's fa.attention (Inputs/alibi-prefix-lm.mlir: ALiBi slopes as
// a capture, prefix-LM): the captures become the host function's last
// memref arguments, `capture<n>` with dims `capture<n>_<d>` in the manifest,
// which lists them (dtype, static shape) under "modifiers" with the
// runtime's key. Both chips' kernels assemble without spills.
// RUN: rm -rf %t && mkdir -p %t
// RUN: fa-compile --modifiers=%S/Inputs/alibi-prefix-lm.mlir --modifiers-key=k1 --head-dim=128 --dtype=bf16 --chip=sm_90a -o %t | FileCheck %s --check-prefix=WROTE
// RUN: FileCheck %s < %t/fa_fwd_d128_bf16_sm90a_mod.json
// RUN: FileCheck %s --check-prefix=PTX < %t/fa_fwd_d128_bf16_sm90a_mod.ptx
// RUN: %ptxas -arch=sm_90a -v %t/fa_fwd_d128_bf16_sm90a_mod.ptx -o /dev/null 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: fa-compile --modifiers=%S/Inputs/alibi-prefix-lm.mlir --head-dim=64 --dtype=f16 --chip=sm_80 -o %t > /dev/null
// RUN: FileCheck %s --check-prefix=SM80 < %t/fa_fwd_d64_f16_sm80_mod.json
// RUN: %ptxas -arch=sm_80 -v %t/fa_fwd_d64_f16_sm80_mod.ptx -o /dev/null 2>&1 | FileCheck %s --check-prefix=PTXAS

// WROTE: fa_fwd_d128_bf16_sm90a_mod.ptx
// (The first candidate, the dynamic tile scheduler's kernel, fits without
// spills: its launch is listed in "kernels", with its counter.)
// CHECK:      "params": [
// CHECK:        "name": "capture0",
// CHECK-NEXT:   "rank": 1,
// CHECK-NEXT:   "type": "memref"
// CHECK: "modifiers": {
// CHECK-NEXT:   "captures": [
// CHECK-NEXT:     {
// CHECK-NEXT:       "dtype": "f32",
// CHECK-NEXT:       "name": "capture0",
// CHECK-NEXT:       "shape": [
// CHECK-NEXT:         8
// CHECK-NEXT:       ]
// CHECK-NEXT:     }
// CHECK-NEXT:   ],
// CHECK-NEXT:   "key": "k1"
// CHECK: "tile_scheduler": "dynamic"
// The kernel reads the capture (the slope of its head) and computes the
// modifiers' index arithmetic in 32 bits.
// PTX: .entry fa_fwd_kernel(
// PTX: ld.global.b32
// PTX: setp.lt.u32
// PTXAS-NOT: {{ [1-9][0-9]* bytes spill stores}}
// PTXAS: 0 bytes spill stores
// PTXAS-NOT: {{ [1-9][0-9]* bytes spill stores}}

// SM80: "mma": "mma.sync"
// SM80: "name": "capture0"
// SM80: "key": null

// The backward: its dK/dV kernel (and a separate dQ kernel, if any) takes
// the captures; fa-differentiate-score-mod gives the step the
// score_mod's derivative.
// RUN: fa-compile --kind=backward --modifiers=%S/Inputs/alibi-prefix-lm.mlir --head-dim=128 --dtype=bf16 --chip=sm_90a -o %t > /dev/null
// RUN: FileCheck %s --check-prefix=BWD < %t/fa_bwd_d128_bf16_sm90a_mod.json
// RUN: %ptxas -arch=sm_90a -v %t/fa_bwd_d128_bf16_sm90a_mod.ptx -o /dev/null 2>&1 | FileCheck %s --check-prefix=PTXAS
// BWD: "kernels": [
// BWD:   "entry": "fa_bwd_kernel",
// BWD:   "name": "capture0",
// BWD: "modifiers": {

// A softcap score_mod is the built-in softcap, built in: the manifest has
// its value and the forward takes scale / softcap as the built-in does.
// RUN: fa-compile --modifiers=%S/Inputs/softcap-score-mod.mlir --modifiers-key=k2 --head-dim=64 --dtype=bf16 --chip=sm_90a -o %t > /dev/null
// RUN: FileCheck %s --check-prefix=SOFTCAP < %t/fa_fwd_d64_bf16_softcap_sm90a_mod.json
// SOFTCAP: "role": "scale_over_softcap"
// SOFTCAP: "softcap": 30
// Run-time key ranges (a document mask): the host function's last memref
// argument `key_ranges`, a kernel parameter the manifest describes under
// "modifiers" with its row groups; both chips, no spills. The backward
// kernels take the transposed ranges `query_ranges` [B, Hkv, ceil(Nk /
// rows), 2] (the queries that see each group of keys), and the deterministic
// one the key ranges too, for its dQ pass.
// RUN: fa-compile --modifiers=%S/Inputs/document-key-ranges.mlir --head-dim=128 --dtype=bf16 --chip=sm_90a -o %t/ranges > /dev/null
// RUN: FileCheck %s --check-prefix=RANGES < %t/ranges/fa_fwd_d128_bf16_sm90a_mod.json
// RUN: %ptxas -arch=sm_90a -v %t/ranges/fa_fwd_d128_bf16_sm90a_mod.ptx -o /dev/null 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: fa-compile --modifiers=%S/Inputs/document-key-ranges.mlir --head-dim=64 --dtype=f16 --chip=sm_80 -o %t/ranges > /dev/null
// RUN: %ptxas -arch=sm_80 -v %t/ranges/fa_fwd_d64_f16_sm80_mod.ptx -o /dev/null 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: fa-compile --kind=backward --modifiers=%S/Inputs/document-key-ranges.mlir --head-dim=128 --dtype=bf16 --chip=sm_90a -o %t/ranges > /dev/null
// RUN: FileCheck %s --check-prefix=RANGES-BWD < %t/ranges/fa_bwd_d128_bf16_sm90a_mod.json
// RUN: %ptxas -arch=sm_90a -v %t/ranges/fa_bwd_d128_bf16_sm90a_mod.ptx -o /dev/null 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: fa-compile --kind=backward --deterministic --modifiers=%S/Inputs/document-key-ranges.mlir --head-dim=64 --dtype=f16 --chip=sm_80 -o %t/ranges > /dev/null
// RUN: FileCheck %s --check-prefix=RANGES-DET < %t/ranges/fa_bwd_d64_f16_det_sm80_mod.json
// RUN: %ptxas -arch=sm_80 -v %t/ranges/fa_bwd_d64_f16_det_sm80_mod.ptx -o /dev/null 2>&1 | FileCheck %s --check-prefix=PTXAS
// RANGES: "key_ranges": {
// RANGES-NEXT: "name": "key_ranges",
// RANGES-NEXT: "rows": 64
// RANGES: "params": [
// RANGES:   "ceildiv(Nq, 64)",
// RANGES: "dtype": "i32",
// RANGES-NEXT: "name": "key_ranges",
// RANGES-BWD-NOT: "key_ranges"
// RANGES-BWD: "ceildiv(Nk, 64)",
// RANGES-BWD-NEXT: "2"
// RANGES-BWD: "name": "query_ranges",
// RANGES-BWD: "query_ranges": {
// RANGES-BWD-NEXT: "name": "query_ranges",
// RANGES-BWD-NEXT: "rows": 64
// RANGES-DET: "ceildiv(Nk, 64)",
// RANGES-DET: "name": "query_ranges",
// RANGES-DET: "ceildiv(Nq, 64)",
// RANGES-DET: "name": "key_ranges",
// RANGES-DET: "key_ranges": {
// RANGES-DET: "query_ranges": {
// With the fully visible ranges (4 columns, groups of 128 rows): the
// parameter's dims say so; the warp-specialized kernel without spills.
// RUN: fa-compile --modifiers=%S/Inputs/document-full-key-ranges.mlir --head-dim=128 --dtype=bf16 --chip=sm_90a --causal -o %t/full > /dev/null
// RUN: FileCheck %s --check-prefix=FULL < %t/full/fa_fwd_d128_bf16_causal_sm90a_mod.json
// RUN: %ptxas -arch=sm_90a -v %t/full/fa_fwd_d128_bf16_causal_sm90a_mod.ptx -o /dev/null 2>&1 | FileCheck %s --check-prefix=PTXAS
// FULL: "rows": 128
// FULL: "ceildiv(Nq, 128)",
// FULL-NEXT: "4"
// FULL: "schedule": "warp_specialized"
// RUN: not fa-compile --modifiers-key=k1 -o %t 2>&1 | FileCheck %s --check-prefix=KEY
// KEY: fa-compile: --modifiers-key needs --modifiers
// This file's op is a backward: not a modifiers file.
// RUN: not fa-compile --modifiers=%s -o %t 2>&1 | FileCheck %s --check-prefix=NOMOD
// NOMOD: has no fa.attention with score_mod or mask_mod

func.func @fa_bwd(%q: memref<1x2x128x64xf16>, %k: memref<1x2x128x64xf16>,
                  %v: memref<1x2x128x64xf16>, %out: memref<1x2x128x64xf16>,
                  %dout: memref<1x2x128x64xf16>, %lse: memref<1x2x128xf32>,
                  %dq: memref<1x2x128x64xf16>, %dk: memref<1x2x128x64xf16>,
                  %dv: memref<1x2x128x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x2x128x64xf16> to tensor<1x2x128x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x2x128x64xf16> to tensor<1x2x128x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<1x2x128x64xf16> to tensor<1x2x128x64xf16>
  %ot = bufferization.to_tensor %out restrict : memref<1x2x128x64xf16> to tensor<1x2x128x64xf16>
  %lt = bufferization.to_tensor %lse restrict : memref<1x2x128xf32> to tensor<1x2x128xf32>
  %dot = bufferization.to_tensor %dout restrict : memref<1x2x128x64xf16> to tensor<1x2x128x64xf16>
  %a, %b, %c = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot
      mask_mod(%bb: index, %h: index, %i: index, %j: index) {
        %vis = arith.cmpi ule, %j, %i : index
        fa.yield %vis : i1
      }
      : (tensor<1x2x128x64xf16>, tensor<1x2x128x64xf16>, tensor<1x2x128x64xf16>, tensor<1x2x128x64xf16>, tensor<1x2x128xf32>, tensor<1x2x128x64xf16>) -> (tensor<1x2x128x64xf16>, tensor<1x2x128x64xf16>, tensor<1x2x128x64xf16>)
  bufferization.materialize_in_destination %a in restrict writable %dq : (tensor<1x2x128x64xf16>, memref<1x2x128x64xf16>) -> ()
  bufferization.materialize_in_destination %b in restrict writable %dk : (tensor<1x2x128x64xf16>, memref<1x2x128x64xf16>) -> ()
  bufferization.materialize_in_destination %c in restrict writable %dv : (tensor<1x2x128x64xf16>, memref<1x2x128x64xf16>) -> ()
  return
}
