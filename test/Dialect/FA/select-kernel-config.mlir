// RUN: fa-opt %s --split-input-file --fa-select-kernel-config="chip=sm_90a" | FileCheck %s --check-prefix=SM90A
// RUN: fa-opt %s --split-input-file --fa-select-kernel-config="chip=sm_80" | FileCheck %s --check-prefix=SM80
// RUN: fa-opt %s --split-input-file --fa-select-kernel-config="chip=sm_90a mma=mma_sync" | FileCheck %s --check-prefix=SYNC
// RUN: fa-opt %s --split-input-file --fa-select-kernel-config="chip=sm_90a block-q=64" | FileCheck %s --check-prefix=FIXQ
// RUN: fa-opt %s --split-input-file --fa-select-kernel-config="chip=sm_90a schedule=cooperative" | FileCheck %s --check-prefix=COOP
// A fixed persistent tile scheduler fails where the warp-specialized kernel
// cannot be had (D = 96, D = 256) and for a deterministic backward: the
// other cases still print.
// RUN: not fa-opt %s --split-input-file --fa-select-kernel-config="chip=sm_90a tile-scheduler=persistent" 2>/dev/null | FileCheck %s --check-prefix=PERSIST

// The table (lib/Dialect/FA/Transforms/SelectKernelConfig.cpp): on sm_90a
// the forward at D = 128 is warp-specialized, two consumer warpgroups of 64
// query rows on blocks of 128 keys (and a producer warpgroup); cooperative,
// the same tiles; sm_80 (and mma_sync on sm_90a) takes FlashAttention-2's
// 128 x 32 on 4 warps. Fixing block-q = 64 on sm_90a ties the warps to it
// (one warpgroup, which the warp-specialized schedule is not chosen for).

// SM90A-LABEL: func.func @forward_d128
// With a mask, the dynamic tile scheduler (an atomic tile counter).
// SM90A: fa.attention {{.*}} mask<causal> {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized, tile_scheduler = dynamic>}
// A persistent tile scheduler asks for the warp-specialized kernel.
// PERSIST-LABEL: func.func @forward_d128
// PERSIST: {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized, tile_scheduler = persistent>}
// COOP-LABEL: func.func @forward_d128
// COOP: fa.attention {{.*}} mask<causal> {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2>}
// SM80-LABEL: func.func @forward_d128
// SM80: {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 128, block_kv = 32, warps = 4, stages = 2>}
// SYNC-LABEL: func.func @forward_d128
// SYNC: {kernel_config = #fa.kernel_config<"sm_90a", mma_sync, block_q = 128, block_kv = 32, warps = 4, stages = 2>}
// FIXQ-LABEL: func.func @forward_d128
// FIXQ: {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 128, warps = 4, stages = 2>}
func.func @forward_d128(%q: tensor<2x8x?x128xbf16>, %k: tensor<2x2x?x128xbf16>, %v: tensor<2x2x?x128xbf16>) -> tensor<2x8x?x128xbf16> {
  %o, %l = fa.attention %q, %k, %v mask<causal> : (tensor<2x8x?x128xbf16>, tensor<2x2x?x128xbf16>, tensor<2x2x?x128xbf16>) -> (tensor<2x8x?x128xbf16>, tensor<2x8x?xf32>)
  return %o : tensor<2x8x?x128xbf16>
}

// -----

// D = 256: the table's 128 x 128 would need 328704 bytes of shared memory
// on sm_90a (227 KiB a block): the largest block of keys that fits is 80
// (230400 bytes). On sm_80 (163 KiB) one row tile per warp, 64 x 48.

// SM90A-LABEL: func.func @forward_d256
// SM90A: {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 80, warps = 8, stages = 2>}
// SM80-LABEL: func.func @forward_d256
// SM80: {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 48, warps = 4, stages = 2>}
func.func @forward_d256(%q: tensor<?x?x?x256xf16>, %k: tensor<?x?x?x256xf16>, %v: tensor<?x?x?x256xf16>) -> tensor<?x?x?x256xf16> {
  %o, %l = fa.attention %q, %k, %v : (tensor<?x?x?x256xf16>, tensor<?x?x?x256xf16>, tensor<?x?x?x256xf16>) -> (tensor<?x?x?x256xf16>, tensor<?x?x?xf32>)
  return %o : tensor<?x?x?x256xf16>
}

// -----

// D = 96: two warpgroups on blocks of 64 keys (measured faster than 128 at
// this head dim); sm_80 keeps FlashAttention-2's 128 x 32.

// SM90A-LABEL: func.func @forward_d96
// SM90A: {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 64, warps = 8, stages = 2>}
// SM80-LABEL: func.func @forward_d96
// SM80: {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 128, block_kv = 32, warps = 4, stages = 2>}
func.func @forward_d96(%q: tensor<?x?x?x96xbf16>, %k: tensor<?x?x?x96xbf16>, %v: tensor<?x?x?x96xbf16>) -> tensor<?x?x?x96xbf16> {
  %o, %l = fa.attention %q, %k, %v mask<causal> : (tensor<?x?x?x96xbf16>, tensor<?x?x?x96xbf16>, tensor<?x?x?x96xbf16>) -> (tensor<?x?x?x96xbf16>, tensor<?x?x?xf32>)
  return %o : tensor<?x?x?x96xbf16>
}

// -----

// D = 64: warp-specialized with three consumer warpgroups; cooperative, one
// warpgroup of 64 rows (three blocks per SM). Without a mask the
// warp-specialized kernel takes the persistent tile scheduler (masked ones
// the dynamic one: see @forward_d128 above).

// SM90A-LABEL: func.func @forward_d64
// SM90A: {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 192, block_kv = 128, warps = 12, stages = 2, schedule = warp_specialized, tile_scheduler = persistent>}
// PERSIST-LABEL: func.func @forward_d64
// PERSIST: {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 192, block_kv = 128, warps = 12, stages = 2, schedule = warp_specialized, tile_scheduler = persistent>}
// COOP-LABEL: func.func @forward_d64
// COOP: {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 128, warps = 4, stages = 2>}
// SM80-LABEL: func.func @forward_d64
// SM80: {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 128, block_kv = 64, warps = 4, stages = 2>}
func.func @forward_d64(%q: tensor<?x?x?x64xbf16>, %k: tensor<?x?x?x64xbf16>, %v: tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16> {
  %o, %l = fa.attention %q, %k, %v : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>) -> (tensor<?x?x?x64xbf16>, tensor<?x?x?xf32>)
  return %o : tensor<?x?x?x64xbf16>
}

// -----

// Dv != D without a mask: the persistent kernel, as at Dv = D (measured
// on the H200 in the eighth session); with a mask the grid one (the dynamic
// scheduler has not run at Dv != D).

// SM90A-LABEL: func.func @forward_d128_dv64
// SM90A: {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized, tile_scheduler = persistent>}
func.func @forward_d128_dv64(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>, %v: tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16> {
  %o, %l = fa.attention %q, %k, %v : (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x64xbf16>) -> (tensor<?x?x?x64xbf16>, tensor<?x?x?xf32>)
  return %o : tensor<?x?x?x64xbf16>
}

// -----

// SM90A-LABEL: func.func @forward_d128_dv64_causal
// SM90A: {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized>}
func.func @forward_d128_dv64_causal(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>, %v: tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16> {
  %o, %l = fa.attention %q, %k, %v mask<causal> : (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x64xbf16>) -> (tensor<?x?x?x64xbf16>, tensor<?x?x?xf32>)
  return %o : tensor<?x?x?x64xbf16>
}

// -----

// The backward: 128 keys on two warpgroups (sm_90a) against 64-query
// blocks, 128 at D <= 64 without mask or softcap; sm_80 64 x 64 on 4 warps.
// At D = Dv = 128 the warp-specialized kernel on those tiles (1.06-1.13x
// the cooperative one, H100 2026-12-06); at D = Dv = 64 on 128 x 128 tiles
// (@backward_d64); `schedule=cooperative` keeps the cooperative kernel.

// SM90A-LABEL: func.func @backward
// SM90A: fa.attention_backward {{.*}} mask<causal> {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized>}
// SM90A: fa.attention_backward {{.*}} {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized>}
// COOP-LABEL: func.func @backward
// COOP: fa.attention_backward {{.*}} mask<causal> {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 128, warps = 8, stages = 2>}
// A persistent backward on request: the warp-specialized kernel's tiles.
// PERSIST-LABEL: func.func @backward
// PERSIST: fa.attention_backward {{.*}} mask<causal> {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized, tile_scheduler = persistent>}
// PERSIST: fa.attention_backward {{.*}} {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized, tile_scheduler = persistent>}
// SM80-LABEL: func.func @backward
// SM80: {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 64, warps = 4, stages = 2>}
// SM80: {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 64, warps = 4, stages = 2>}
func.func @backward(%q: tensor<?x?x?x128xbf16>, %o: tensor<?x?x?x128xbf16>, %lse: tensor<?x?x?xf32>,
                    %q64: tensor<?x?x?x64xbf16>, %o64: tensor<?x?x?x64xbf16>) -> (tensor<?x?x?x128xbf16>, tensor<?x?x?x64xbf16>) {
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %o, %lse, %o mask<causal> : (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?xf32>, tensor<?x?x?x128xbf16>) -> (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>)
  %dq2, %dk2, %dv2 = fa.attention_backward %q64, %q64, %q64, %o64, %lse, %o64 : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?xf32>, tensor<?x?x?x64xbf16>) -> (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>)
  return %dq, %dq2 : tensor<?x?x?x128xbf16>, tensor<?x?x?x64xbf16>
}

// -----

// D = Dv = 64: the warp-specialized kernel on 128 x 128 tiles of 8 warps
// for every dense op without modifiers (with lse2 / delta through the ring
// 0.77-0.82x the previous defaults' time, H100).

// SM90A-LABEL: func.func @backward_d64
// SM90A: mask<causal> {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized>}
// SM90A: deterministic {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized>}
// SM90A: %{{.*}} {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized>}
// COOP-LABEL: func.func @backward_d64
// COOP: mask<causal> {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 128, warps = 8, stages = 2>}
// FIXQ-LABEL: func.func @backward_d64
// FIXQ: mask<causal> {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 128, warps = 8, stages = 2>}
func.func @backward_d64(%q: tensor<?x?x?x64xbf16>, %lse: tensor<?x?x?xf32>) -> (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>) {
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q mask<causal> : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?xf32>, tensor<?x?x?x64xbf16>) -> (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>)
  %dq2, %dk2, %dv2 = fa.attention_backward %q, %q, %q, %q, %lse, %q deterministic : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?xf32>, tensor<?x?x?x64xbf16>) -> (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>)
  %dq3, %dk3, %dv3 = fa.attention_backward %q, %q, %q, %q, %lse, %q : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?xf32>, tensor<?x?x?x64xbf16>) -> (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>)
  return %dq, %dq2, %dq3 : tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>
}

// -----

// A run-time window or softcap is mask / softcap code as much as a constant
// one: the warp-specialized kernel on 128 x 128 tiles first, then the
// cooperative one on 64-query blocks (128 spill there); fa-compile takes
// the first that does not spill (the softcap: cooperative).

// SM90A-LABEL: func.func @backward_runtime_scalars
// SM90A: mask<window ?, ?>(%{{.*}}, %{{.*}}) scale %{{.*}} {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized>}
// SM90A: softcap %{{.*}} scale %{{.*}} {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized>}
func.func @backward_runtime_scalars(%q: tensor<?x?x?x64xbf16>, %lse: tensor<?x?x?xf32>, %s: f32, %l: i64, %r: i64) -> (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>) {
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q mask<window ?, ?>(%l, %r) scale %s : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?xf32>, tensor<?x?x?x64xbf16>, f32, i64, i64) -> (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>)
  %dq2, %dk2, %dv2 = fa.attention_backward %q, %q, %q, %q, %lse, %q softcap %s scale %s : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?xf32>, tensor<?x?x?x64xbf16>, f32, f32) -> (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>)
  return %dq, %dq2 : tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>
}

// -----

// An op that already has a configuration keeps it.

// SM90A-LABEL: func.func @kept
// SM90A: {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 64, warps = 4, stages = 1>}
// SM80-LABEL: func.func @kept
// SM80: {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 64, warps = 4, stages = 1>}
func.func @kept(%q: tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16> {
  %o, %l = fa.attention %q, %q, %q {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 64, warps = 4, stages = 1>} : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) -> (tensor<?x?x?x64xf16>, tensor<?x?x?xf32>)
  return %o : tensor<?x?x?x64xf16>
}

// -----

// Packed sequences: the warp-specialized kernel with the dynamic tile
// scheduler (TMA loads from each sequence's first row, guarded stores of
// O; tiles as uneven as the sequences). A paged cache: the cooperative
// kernel.
// SM90A-LABEL: func.func @varlen
// SM90A: fa.attention_varlen {{.*}} {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized, tile_scheduler = dynamic>}
// COOP-LABEL: func.func @varlen
// COOP: fa.attention_varlen {{.*}} {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2>}
// SM80-LABEL: func.func @varlen
// SM80: {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 128, block_kv = 32, warps = 4, stages = 2>}
func.func @varlen(%q: tensor<8x?x128xbf16>, %k: tensor<2x?x128xbf16>, %cu: tensor<?xi32>, %m: index) -> (tensor<8x?x128xbf16>, tensor<8x?xf32>) {
  %o, %l = fa.attention_varlen %q, %k, %k seqlens(%cu, %cu) max_seqlen_q(%m) mask<causal> : (tensor<8x?x128xbf16>, tensor<2x?x128xbf16>, tensor<2x?x128xbf16>, tensor<?xi32>, tensor<?xi32>, index) -> (tensor<8x?x128xbf16>, tensor<8x?xf32>)
  return %o, %l : tensor<8x?x128xbf16>, tensor<8x?xf32>
}

// -----

// A paged cache: the cooperative kernel's tiles, whatever the page size (a
// key block of 128 keys spans two pages of 64).
// SM90A-LABEL: func.func @paged
// SM90A: fa.attention_paged {{.*}} {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 128, warps = 4, stages = 2>}
// SM80-LABEL: func.func @paged
// SM80: {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 128, block_kv = 64, warps = 4, stages = 2>}
func.func @paged(%q: tensor<?x8x1x64xbf16>, %kp: tensor<?x2x64x64xbf16>, %t: tensor<?x?xi32>, %n: tensor<?xi32>) -> (tensor<?x8x1x64xbf16>, tensor<?x8x1xf32>) {
  %o, %l = fa.attention_paged %q, %kp, %kp pages(%t) seqlens(%n) : (tensor<?x8x1x64xbf16>, tensor<?x2x64x64xbf16>, tensor<?x2x64x64xbf16>, tensor<?x?xi32>, tensor<?xi32>) -> (tensor<?x8x1x64xbf16>, tensor<?x8x1xf32>)
  return %o, %l : tensor<?x8x1x64xbf16>, tensor<?x8x1xf32>
}
