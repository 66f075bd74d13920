// Packed sequences and paged caches: fa-compile builds their forward
// kernels (and the packed backward's; ptxas runs on each, 0 spills) and
// describes their launches in the tensors' own terms.

// RUN: rm -rf %t && fa-compile --form=varlen --causal --head-dim=128 --chip=sm_90a -o %t > /dev/null
// RUN: FileCheck %s --check-prefix=VARLEN < %t/fa_fwd_varlen_d128_bf16_causal_sm90a.json
// VARLEN:      "form": "varlen"
// The dynamic tile scheduler: at most SMS blocks over the tiles of
// (query block, head, sequence).
// VARLEN:      "grid": [
// VARLEN-NEXT:   "min(ceildiv(max_seqlen_q, 128) * Hq * (B1 - 1), SMS)",
// VARLEN:      "name": "q"
// VARLEN:      "dtype": "i32",
// VARLEN-NEXT: "name": "cu_seqlens_q",
// VARLEN:      "schedule": "warp_specialized"
// VARLEN:      "tile_scheduler": "dynamic"

// The packed backward: preprocess and dQ conversion over all Tq rows, the
// key-block kernel over (ceil(max_seqlen_k / Bc), Hkv, B), and the zeroing
// of the dK / dV rows of no sequence.
// RUN: fa-compile --form=varlen --kind=backward --causal --head-dim=128 --chip=sm_90a -o %t > /dev/null
// RUN: FileCheck %s --check-prefix=VBWD < %t/fa_bwd_varlen_d128_bf16_causal_sm90a.json
// VBWD:      "form": "varlen"
// VBWD:      "entry": "fa_bwd_varlen_preprocess_kernel",
// VBWD-NEXT: "grid": [
// VBWD-NEXT:   "ceildiv(Tq, 128)",
// VBWD-NEXT:   "Hq",
// VBWD-NEXT:   "1"
// VBWD:      "entry": "fa_bwd_varlen_kernel",
// VBWD-NEXT: "grid": [
// VBWD-NEXT:   "ceildiv(max_seqlen_k, {{[0-9]+}})",
// VBWD-NEXT:   "Hkv",
// VBWD-NEXT:   "B1 - 1"
// VBWD:      "name": "cu_seqlens_k",
// VBWD:      "entry": "fa_bwd_varlen_dq_convert_kernel",
// VBWD:      "entry": "fa_bwd_varlen_zero_rows_kernel",
// VBWD-NEXT: "grid": [
// VBWD-NEXT:   "ceildiv(Tk, 128)",
// VBWD:      "mma": "wgmma"
// VBWD:      "name": "dq_accum"
// RUN: fa-compile --form=varlen --kind=backward --head-dim=64 --window=16,16 --chip=sm_80 -o %t > /dev/null
// RUN: FileCheck %s --check-prefix=VBWD80 < %t/fa_bwd_varlen_d64_bf16_window_sm80.json
// VBWD80: "mma": "mma.sync"

// RUN: fa-compile --form=varlen --head-dim=64 --dtype=f16 --chip=sm_80 -o %t > /dev/null
// RUN: FileCheck %s --check-prefix=VARLEN80 < %t/fa_fwd_varlen_d64_f16_sm80.json
// VARLEN80: "mma": "mma.sync"

// The page size is static; key blocks may span pages (128 keys over two
// pages of 64).
// RUN: fa-compile --form=paged --page-size=64 --head-dim=128 --chip=sm_90a -o %t > /dev/null
// RUN: FileCheck %s --check-prefix=PAGED < %t/fa_fwd_paged64_d128_bf16_sm90a.json
// PAGED:      "block_kv": 128
// PAGED:      "form": "paged"
// PAGED:      "page_size": 64
// PAGED:        "P",
// PAGED-NEXT:   "Hkv",
// PAGED-NEXT:   "S",
// PAGED-NEXT:   "D"
// PAGED-NEXT: ],
// PAGED-NEXT: "dtype": "bf16",
// PAGED-NEXT: "name": "k_cache",
// PAGED:      "name": "page_table",

// Split-KV decoding from a paged cache: the split count is bounded by the
// page table's keys.
// RUN: fa-compile --form=paged --page-size=256 --kv-splits=auto --head-dim=128 --chip=sm_90a -o %t > /dev/null
// RUN: FileCheck %s --check-prefix=SPLIT < %t/fa_fwd_paged256_d128_bf16_splitkv_sm90a.json
// SPLIT: "ceildiv(Nq, 64) * max(min(min(SMS * 2 // (B * Hq * ceildiv(Nq, 64)), ceildiv(MaxPages * 256, 64)), 64), 1)"
// SPLIT: "entry": "fa_fwd_paged_merge_kernel"

// Page size 16: the split kernel's 64-key blocks span four pages.
// RUN: fa-compile --form=paged --page-size=16 --kv-splits=auto --head-dim=64 --chip=sm_80 -o %t > /dev/null
// RUN: FileCheck %s --check-prefix=PAGE16 < %t/fa_fwd_paged16_d64_bf16_splitkv_sm80.json
// PAGE16: "block_kv": 64

// An IR file's op: the same ABI.
// RUN: fa-compile %s --chip=sm_90a --name=user_varlen -o %t > /dev/null
// RUN: FileCheck %s --check-prefix=USER < %t/user_varlen.json
// USER: "form": "varlen"
// USER: "softcap": "runtime"

// RUN: not fa-compile --form=ragged -o %t.bad 2>&1 | FileCheck %s --check-prefix=FORM
// FORM: fa-compile: --form must be dense, varlen or paged, got 'ragged'
// RUN: not fa-compile --form=paged --kind=backward -o %t.bad 2>&1 | FileCheck %s --check-prefix=BWD
// BWD: fa-compile: --form=paged is a forward form (a paged cache has no backward)
// RUN: not fa-compile --form=varlen --kind=backward --deterministic -o %t.bad 2>&1 | FileCheck %s --check-prefix=DET
// DET: fa-compile: --deterministic has no kernel for packed sequences yet
// RUN: not fa-compile --page-size=64 -o %t.bad 2>&1 | FileCheck %s --check-prefix=PAGEFLAG
// PAGEFLAG: fa-compile: --page-size applies to --form=paged only
// RUN: not fa-compile --form=paged --page-size=24 -o %t.bad 2>&1 | FileCheck %s --check-prefix=PAGESIZE
// PAGESIZE: fa-compile: --page-size must be a multiple of 16 in [16, 4096], got 24
// RUN: not fa-compile --form=varlen --kv-splits=auto -o %t.bad 2>&1 | FileCheck %s --check-prefix=SPLITVARLEN
// SPLITVARLEN: fa-compile: --kv-splits takes dense tensors or a paged cache, not packed sequences
// RUN: not fa-compile --form=paged --schedule=warp_specialized --chip=sm_90a -o %t.bad 2>&1 | FileCheck %s --check-prefix=WS
// WS: has cooperative grid kernels only
// RUN: not fa-compile --form=paged --tile-scheduler=dynamic --chip=sm_90a -o %t.bad 2>&1 | FileCheck %s --check-prefix=PERSIST
// PERSIST: has cooperative grid kernels only

func.func @fa_fwd_varlen(%q: memref<?x?x64xbf16, strided<[?, ?, 1], offset: ?>>, %k: memref<?x?x64xbf16, strided<[?, ?, 1], offset: ?>>, %v: memref<?x?x64xbf16, strided<[?, ?, 1], offset: ?>>, %out: memref<?x?x64xbf16, strided<[?, ?, 1], offset: ?>>, %lse: memref<?x?xf32, strided<[?, ?], offset: ?>>, %cu_q: memref<?xi32>, %cu_k: memref<?xi32>, %max_q: index, %softcap: f32, %scale: f32) {
  %qt = bufferization.to_tensor %q restrict : memref<?x?x64xbf16, strided<[?, ?, 1], offset: ?>> to tensor<?x?x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x?x64xbf16, strided<[?, ?, 1], offset: ?>> to tensor<?x?x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x?x64xbf16, strided<[?, ?, 1], offset: ?>> to tensor<?x?x64xbf16>
  %cq = bufferization.to_tensor %cu_q restrict : memref<?xi32> to tensor<?xi32>
  %ck = bufferization.to_tensor %cu_k restrict : memref<?xi32> to tensor<?xi32>
  %o, %l = fa.attention_varlen %qt, %kt, %vt seqlens(%cq, %ck) max_seqlen_q(%max_q) mask<causal> softcap %softcap scale %scale : (tensor<?x?x64xbf16>, tensor<?x?x64xbf16>, tensor<?x?x64xbf16>, tensor<?xi32>, tensor<?xi32>, index, f32, f32) -> (tensor<?x?x64xbf16>, tensor<?x?xf32>)
  bufferization.materialize_in_destination %o in restrict writable %out : (tensor<?x?x64xbf16>, memref<?x?x64xbf16, strided<[?, ?, 1], offset: ?>>) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<?x?xf32>, memref<?x?xf32, strided<[?, ?], offset: ?>>) -> ()
  return
}
