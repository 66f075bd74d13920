// REQUIRES: ptxas
// The default kernel set (forward and backward x D 64/128 x f16/bf16 x
// causal/not x sm_80/sm_90a): every manifest complete and consistent with its
// PTX, every kernel assembles without register spills.
// RUN: rm -rf %t && fa-compile --default-set -o %t > %t.log
// RUN: python3 %S/check-manifests.py %t --expect 32 --ptxas %ptxas | FileCheck %s --check-prefix=SET
// (The causal sm_90a backwards have a fourth kernel: a split GQA group's
// dK / dV conversion.)
// SET-COUNT-16: {{^fa_bwd_d(64|128)_(f16|bf16)(_causal)?_sm(80|90a) ok sm_(80|90a) regs=[0-9]+(/[0-9]+){2,3} spills=0$}}
// SET-COUNT-16: {{^fa_fwd_d(64|128)_(f16|bf16)(_causal)?_sm(80|90a) ok sm_(80|90a) regs=[0-9]+ spills=0$}}

// Deterministic backward on sm_90a: the warp-specialized key-block kernel
// adds dQ in a fixed order (a semaphore per query block in the dq_order
// workspace, i32); on sm_80 the dQ kernel replaces the atomics and the
// conversion kernel.
// RUN: fa-compile --kind=backward --deterministic --head-dim=128 --dtype=bf16 --causal --chip=sm_90a -o %t.det > %t.det.log
// RUN: fa-compile --kind=backward --deterministic --head-dim=128 --dtype=bf16 --causal --chip=sm_80 -o %t.det > %t.det.log
// RUN: python3 %S/check-manifests.py %t.det --expect 2 --ptxas %ptxas | FileCheck %s --check-prefix=DET
// RUN: FileCheck %s --check-prefix=DETJSON < %t.det/fa_bwd_d128_bf16_causal_det_sm90a.json
// RUN: FileCheck %s --check-prefix=DET80 < %t.det/fa_bwd_d128_bf16_causal_det_sm80.json
// DET: {{^fa_bwd_d128_bf16_causal_det_sm80 ok sm_80 regs=[0-9]+/[0-9]+/[0-9]+ spills=0$}}
// DET: {{^fa_bwd_d128_bf16_causal_det_sm90a ok sm_90a regs=[0-9]+/[0-9]+/[0-9]+ spills=0$}}
// DETJSON: "deterministic": true
// DETJSON: "entry": "fa_bwd_preprocess_kernel"
// DETJSON: "name": "dq_order"
// DETJSON: "entry": "fa_bwd_kernel"
// DETJSON: "name": "dq_order"
// DETJSON: "entry": "fa_bwd_dq_convert_kernel"
// DETJSON: "schedule": "warp_specialized"
// DETJSON: "workspace": [
// DETJSON: "name": "dq_accum"
// DETJSON: "ceildiv(Nq, 64)"
// DETJSON-NEXT: ],
// DETJSON-NEXT: "dtype": "i32",
// DETJSON-NEXT: "name": "dq_order"
// DET80: "deterministic": true
// DET80: "entry": "fa_bwd_dq_kernel"
// DET80: "grid": [
// DET80-NEXT: "ceildiv(Nq, 64)"
// DET80: "workspace": [
// DET80-NOT: dq_accum
// DET80: "name": "lse2"

// A user's IR file: the config comes from the op (window, softcap, scale);
// its constant scale and softcap are built into the kernel, not parameters.
// RUN: fa-compile %s --chip=sm_80 --name=user_kernel -o %t.user
// RUN: python3 %S/check-manifests.py %t.user --expect 1 | FileCheck %s --check-prefix=USER
// RUN: FileCheck %s --check-prefix=USERJSON < %t.user/user_kernel.json
// USER: user_kernel ok sm_80
// USERJSON-DAG: "window": [
// USERJSON-DAG: "softcap": 30
// USERJSON-DAG: "scale": 0.25
// USERJSON-DAG: "dtype": "f16"

// --mma=auto: warpgroup MMAs on sm_90a where the tiles allow them, else
// mma.sync (here: 2 warps are no warpgroup); sm_80 always mma.sync.
// RUN: fa-compile --head-dim=128 --chip=sm_90a -o %t.mma > /dev/null
// RUN: FileCheck %s --check-prefix=WGMMA < %t.mma/fa_fwd_d128_bf16_sm90a.json
// WGMMA-DAG: "mma": "wgmma"
// WGMMA-DAG: "warps": 8
// RUN: fa-compile --head-dim=128 --chip=sm_90a --block-q=64 --warps=2 -o %t.mma2 > /dev/null
// RUN: FileCheck %s --check-prefix=FALLBACK < %t.mma2/fa_fwd_d128_bf16_sm90a.json
// FALLBACK: "mma": "mma.sync"
// RUN: fa-compile --kind=backward --head-dim=64 --chip=sm_90a --causal -o %t.mma3 > /dev/null
// RUN: FileCheck %s --check-prefix=BWDWG < %t.mma3/fa_bwd_d64_bf16_causal_sm90a.json
// BWDWG-DAG: "mma": "wgmma"
// BWDWG-DAG: "block_q": 128
// BWDWG-DAG: "schedule": "warp_specialized"
// Head dims over 128 take a warpgroup pair per 64 keys (8 warps); at D = 256
// a 16-row dQ staging area would not fit (249,856 B), so each warp stages
// its fragments' two 8-row halves in turn (232,448 B, all of sm_90a's) and
// adds them with 16-byte red.global.add.v4.f32; at D = 192 the 16-row area
// fits.
// RUN: fa-compile --kind=backward --head-dim=256 --chip=sm_90a -o %t.pair > /dev/null
// RUN: FileCheck %s --check-prefix=PAIR256 < %t.pair/fa_bwd_d256_bf16_sm90a.json
// RUN: FileCheck %s --check-prefix=PAIR256PTX < %t.pair/fa_bwd_d256_bf16_sm90a.ptx
// PAIR256-DAG: "warps": 8
// PAIR256-DAG: "block_kv": 64
// PAIR256-DAG: "dynamic_shared_memory": 232448
// PAIR256PTX-NOT: red.global.add.v2.f32
// PAIR256PTX: red.global.add.v4.f32
// PAIR256PTX-NOT: red.global.add.v2.f32
// RUN: fa-compile --kind=backward --head-dim=192 --chip=sm_90a -o %t.pair192 > /dev/null
// RUN: FileCheck %s --check-prefix=PAIR192PTX < %t.pair192/fa_bwd_d192_bf16_sm90a.ptx
// RUN: FileCheck %s --check-prefix=PAIR192WG < %t.pair192/fa_bwd_d192_bf16_sm90a.ptx
// PAIR192PTX: red.global.add.v4.f32
// (Its dK / dV chain in roles, N = 192: backwardPairColumns.)
// PAIR192WG: wgmma.mma_async.sync.aligned.m64n192k16
// RUN: fa-compile --head-dim=64 --chip=sm_80 -o %t.mma4 > /dev/null
// RUN: FileCheck %s --check-prefix=SM80 < %t.mma4/fa_fwd_d64_bf16_sm80.json
// SM80: "mma": "mma.sync"

// Bad flags get a precise error and a non-zero exit.
// RUN: not fa-compile --mma=wgmma --chip=sm_80 -o %t.bad 2>&1 | FileCheck %s --check-prefix=MMACHIP
// MMACHIP: error: fa-select-kernel-config: wgmma needs sm_90a, not sm_80
// RUN: not fa-compile --mma=tensor --chip=sm_90a -o %t.bad 2>&1 | FileCheck %s --check-prefix=MMA
// MMA: fa-compile: --mma must be auto, mma.sync or wgmma, got 'tensor'
// RUN: not fa-compile --mma=wgmma --chip=sm_90a --head-dim=128 --block-q=32 -o %t.bad 2>&1 | FileCheck %s --check-prefix=MMATILE
// MMATILE: wgmma needs whole warpgroups: warps must be a multiple of 4
// RUN: not fa-compile --dtype=f64 -o %t.bad 2>&1 | FileCheck %s --check-prefix=DTYPE
// DTYPE: fa-compile: --dtype must be f16 or bf16, got 'f64'
// RUN: not fa-compile --chip=sm_70 -o %t.bad 2>&1 | FileCheck %s --check-prefix=CHIP
// CHIP: fa-compile: --chip must be sm_80 or sm_90a, got 'sm_70'
// RUN: not fa-compile --window=3 -o %t.bad 2>&1 | FileCheck %s --check-prefix=WINDOW
// WINDOW: fa-compile: --window must be 'left,right', got '3'
// RUN: not fa-compile --head-dim=100 -o %t.bad 2>&1 | FileCheck %s --check-prefix=HEADDIM
// HEADDIM: fa-compile: --head-dim must be a multiple of 8 in [8, 256], got 100
// RUN: not fa-compile --scale=nan -o %t.bad 2>&1 | FileCheck %s --check-prefix=SCALE
// SCALE: fa-compile: --scale must be a positive, finite f32 value, got nan
// RUN: not fa-compile --scale=inf -o %t.bad 2>&1 | FileCheck %s --check-prefix=SCALEINF
// SCALEINF: fa-compile: --scale must be a positive, finite f32 value, got INF
// RUN: not fa-compile --scale=1e39 -o %t.bad 2>&1 | FileCheck %s --check-prefix=SCALEBIG
// SCALEBIG: fa-compile: --scale must be a positive, finite f32 value, got 1.000000e+39
// RUN: not fa-compile --softcap=nan -o %t.bad 2>&1 | FileCheck %s --check-prefix=SOFTCAP
// SOFTCAP: fa-compile: --softcap must be a positive, finite f32 value, got nan
// RUN: not fa-compile --block-kv=-16 -o %t.bad 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: fa-compile: --block-kv must be >= 0 (0 = choose), got -16
// A head dim the kernels cannot take (the dialect allows multiples of 8).
// RUN: not fa-compile --head-dim=40 -o %t.bad 2>&1 | FileCheck %s --check-prefix=HD40
// HD40: the GPU kernels need head dims that are multiples of 16, got 40 and 40
// Explicit tiles that do not fit the chip are refused, naming the limit (a
// field left free is chosen to fit: --block-kv=128 alone gets smaller query
// blocks).
// RUN: not fa-compile --kind=forward --head-dim=128 --chip=sm_80 --block-q=128 --block-kv=128 --warps=4 --stages=2 -o %t.bad 2>&1 | FileCheck %s --check-prefix=SMEM
// SMEM: the forward kernel needs 174080 bytes of shared memory, more than the 166912 a thread block may have on sm_80
// RUN: not fa-compile --kind=forward --head-dim=128 --chip=sm_80 --block-q=128 --warps=1 -o %t.bad 2>&1 | FileCheck %s --check-prefix=REGS
// REGS: the forward kernel would keep {{[0-9]+}} accumulator values per thread in registers, more than the 192
// RUN: not fa-compile --kind=backward --head-dim=256 --chip=sm_80 --block-q=64 --block-kv=64 --warps=4 --dkv-split=1 --mma=mma.sync -o %t.bad 2>&1 | FileCheck %s --check-prefix=BWDSMEM
// BWDSMEM: the key-block kernel needs 212992 bytes of shared memory, more than the 166912 a thread block may have on sm_80; use smaller block_q/block_kv){{$}}
// RUN: not fa-compile --kind=sideways -o %t.bad 2>&1 | FileCheck %s --check-prefix=KIND
// KIND: fa-compile: unsupported --kind 'sideways' (supported: forward, backward)
// RUN: not fa-compile --deterministic -o %t.bad 2>&1 | FileCheck %s --check-prefix=DETFWD
// DETFWD: fa-compile: --deterministic applies to --kind backward only

func.func @fa_fwd(%q: memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>, %k: memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>, %v: memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>, %out: memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>, %lse: memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) {
  %qt = bufferization.to_tensor %q restrict : memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>> to tensor<?x?x?x64xf16>
  %o, %l = fa.attention %qt, %kt, %vt mask<window 64, 16> softcap 30.0 scale 0.25 : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) -> (tensor<?x?x?x64xf16>, tensor<?x?x?xf32>)
  bufferization.materialize_in_destination %o in restrict writable %out : (tensor<?x?x?x64xf16>, memref<?x?x?x64xf16, strided<[?, ?, ?, 1], offset: ?>>) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<?x?x?xf32>, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>) -> ()
  return
}
