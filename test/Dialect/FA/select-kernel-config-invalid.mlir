// RUN: fa-opt %s --split-input-file --fa-select-kernel-config="chip=sm_90a" --verify-diagnostics
// RUN: not fa-opt %s --split-input-file --fa-select-kernel-config="chip=sm_70" 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not fa-opt %s --split-input-file --fa-select-kernel-config="chip=sm_80 mma=wgmma" 2>&1 | FileCheck %s --check-prefix=WGMMA
// RUN: not fa-opt %s --split-input-file --fa-select-kernel-config="chip=sm_90a mma=tensor" 2>&1 | FileCheck %s --check-prefix=MMA
// RUN: not fa-opt %s --split-input-file --fa-select-kernel-config="chip=sm_90a block-q=-64" 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not fa-opt %s --split-input-file --fa-select-kernel-config="chip=sm_90a schedule=warp_specialized" 2>&1 | FileCheck %s --check-prefix=WS
// RUN: not fa-opt %s --split-input-file --fa-select-kernel-config="chip=sm_90a tile-scheduler=persistent" 2>&1 | FileCheck %s --check-prefix=PERSIST
// RUN: not fa-opt %s --split-input-file --fa-select-kernel-config="chip=sm_80 block-q=128 block-kv=128 warps=4 stages=2" 2>&1 | FileCheck %s --check-prefix=FIXED
// RUN: not fa-opt %s --split-input-file --fa-select-kernel-config="chip=sm_90a schedule=pingpong" 2>&1 | FileCheck %s --check-prefix=SCHED
// RUN: not fa-opt %s --split-input-file --fa-select-kernel-config="chip=sm_80 schedule=warp_specialized" 2>&1 | FileCheck %s --check-prefix=WSSYNC
// RUN: not fa-opt %s --split-input-file --fa-select-kernel-config="chip=sm_90a tile-scheduler=atomic" 2>&1 | FileCheck %s --check-prefix=TILES
// RUN: not fa-opt %s --split-input-file --fa-select-kernel-config="chip=sm_90a schedule=cooperative tile-scheduler=persistent" 2>&1 | FileCheck %s --check-prefix=PERCOOP

// CHIP: error: fa-select-kernel-config: unknown chip 'sm_70' (supported: sm_80, sm_90, sm_90a)
// WGMMA: error: fa-select-kernel-config: wgmma needs sm_90a, not sm_80
// MMA: error: fa-select-kernel-config: mma must be auto, mma_sync or wgmma, got 'tensor'
// NEG: error: fa-select-kernel-config: block-q must be in [0, 1024] (0 = choose), got -64
// SCHED: error: fa-select-kernel-config: schedule must be auto, cooperative or warp_specialized, got 'pingpong'
// The warp-specialized schedule is wgmma's: mma.sync has no candidate.
// TILES: error: fa-select-kernel-config: tile-scheduler must be auto, grid, persistent or dynamic, got 'atomic'
// PERCOOP: error: fa-select-kernel-config: no kernel configuration works for this op on sm_90a with the fixed fields
// WSSYNC: error: fa-select-kernel-config: no kernel configuration works for this op on sm_80 with the fixed fields (the first candidate of each MMA kind: mma_sync: no candidate with the fixed fields)
// Every field fixed, and the tiles do not fit sm_80's 163 KiB: the reason
// names the limit and the numbers.
// FIXED: error: fa-select-kernel-config: no kernel configuration works for this op on sm_80 with the fixed fields (the first candidate of each MMA kind: #fa.kernel_config<"sm_80", mma_sync, block_q = 128, block_kv = 128, warps = 4, stages = 2> fails: the forward kernel needs 174080 bytes of shared memory, more than the 166912 a thread block may have on sm_80; use smaller block_q/block_kv (or stages = 1))

func.func @valid(%q: tensor<?x?x?x128xf16>) -> tensor<?x?x?x128xf16> {
  %o, %l = fa.attention %q, %q, %q : (tensor<?x?x?x128xf16>, tensor<?x?x?x128xf16>, tensor<?x?x?x128xf16>) -> (tensor<?x?x?x128xf16>, tensor<?x?x?xf32>)
  return %o : tensor<?x?x?x128xf16>
}

// -----

// The GPU kernels read f16 or bf16.
func.func @f32(%q: tensor<?x?x?x64xf32>) -> tensor<?x?x?x64xf32> {
  // expected-error @below {{fa-select-kernel-config: the GPU kernels take f16 or bf16 inputs, not 'f32'}}
  %o, %l = fa.attention %q, %q, %q : (tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>) -> (tensor<?x?x?x64xf32>, tensor<?x?x?xf32>)
  return %o : tensor<?x?x?x64xf32>
}

// -----

// The dialect takes head dims that are multiples of 8; the kernels' MMAs
// need multiples of 16.
func.func @head_dim_40(%q: tensor<?x?x?x40xf16>) -> tensor<?x?x?x40xf16> {
  // expected-error-re @below {{fa-select-kernel-config: no kernel configuration works for this op on sm_90a (the first candidate of each MMA kind: {{.*}} fails: the GPU kernels need head dims that are multiples of 16, got 40 and 40; {{.*}})}}
  %o, %l = fa.attention %q, %q, %q : (tensor<?x?x?x40xf16>, tensor<?x?x?x40xf16>, tensor<?x?x?x40xf16>) -> (tensor<?x?x?x40xf16>, tensor<?x?x?xf32>)
  return %o : tensor<?x?x?x40xf16>
}

// -----

// The packed backward has no deterministic GPU kernel yet: said at the start
// of every GPU pipeline.
func.func @f(%q: tensor<4x?x64xf16>, %l: tensor<4x?xf32>, %cu: tensor<?xi32>, %m: index) -> tensor<4x?x64xf16> {
  // expected-error @below {{'fa.attention_varlen_backward' op has no deterministic GPU kernel yet (the fast mode, dQ by atomics, has one): the CPU pipelines (fa-reference-cpu, fa-tiled-cpu) lower this op}}
  %dq, %dk, %dv = fa.attention_varlen_backward %q, %q, %q, %q, %l, %q seqlens(%cu, %cu) max_seqlen_q(%m) max_seqlen_k(%m) deterministic : (tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<4x?xf32>, tensor<4x?x64xf16>, tensor<?xi32>, tensor<?xi32>, index, index) -> (tensor<4x?x64xf16>, tensor<4x?x64xf16>, tensor<4x?x64xf16>)
  return %dq : tensor<4x?x64xf16>
}

// -----

// Paged caches have cooperative grid kernels only (a TMA box of a page
// would read its unused rows).
// WS: 'fa.attention_paged' op has cooperative grid kernels only: a TMA box of a page would read its unused rows
// PERSIST: 'fa.attention_paged' op has cooperative grid kernels only: a TMA box of a page would read its unused rows
func.func @f(%q: tensor<1x1x1x64xf16>, %kp: tensor<?x1x64x64xf16>, %t: tensor<1x?xi32>, %n: tensor<1xi32>) -> (tensor<1x1x1x64xf16>, tensor<1x1x1xf32>) {
  %o, %l = fa.attention_paged %q, %kp, %kp pages(%t) seqlens(%n) : (tensor<1x1x1x64xf16>, tensor<?x1x64x64xf16>, tensor<?x1x64x64xf16>, tensor<1x?xi32>, tensor<1xi32>) -> (tensor<1x1x1x64xf16>, tensor<1x1x1xf32>)
  return %o, %l : tensor<1x1x1x64xf16>, tensor<1x1x1xf32>
}
