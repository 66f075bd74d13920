// RUN: fa-opt %s --split-input-file | fa-opt --split-input-file | FileCheck %s
// RUN: fa-opt %s --split-input-file --verify-diagnostics --mlir-print-op-generic > /dev/null

// #fa.kernel_config round-trips on both ops.

// CHECK-LABEL: func.func @forward
// CHECK: fa.attention %{{.*}}, %{{.*}}, %{{.*}} mask<causal> {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2>}
func.func @forward(%q: tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16> {
  %o, %l = fa.attention %q, %q, %q mask<causal> {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2>} : (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>) -> (tensor<?x?x?x128xbf16>, tensor<?x?x?xf32>)
  return %o : tensor<?x?x?x128xbf16>
}

// -----

// The warp-specialized schedule prints after the tiles; the default
// (cooperative) is not printed.
// CHECK-LABEL: func.func @forward_ws
// CHECK: {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized>}
// CHECK-LABEL: func.func @forward_persistent
// CHECK: {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized, tile_scheduler = persistent>}
// CHECK-LABEL: func.func @forward_dynamic
// CHECK: {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized, tile_scheduler = dynamic>}
// CHECK-LABEL: func.func @forward_coop
// CHECK: {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2>}
func.func @forward_ws(%q: tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16> {
  %o, %l = fa.attention %q, %q, %q {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized>} : (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>) -> (tensor<?x?x?x128xbf16>, tensor<?x?x?xf32>)
  return %o : tensor<?x?x?x128xbf16>
}
func.func @forward_persistent(%q: tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16> {
  %o, %l = fa.attention %q, %q, %q {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, tile_scheduler = persistent, schedule = warp_specialized>} : (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>) -> (tensor<?x?x?x128xbf16>, tensor<?x?x?xf32>)
  return %o : tensor<?x?x?x128xbf16>
}
func.func @forward_dynamic(%q: tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16> {
  %o, %l = fa.attention %q, %q, %q mask<causal> {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized, tile_scheduler = dynamic>} : (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>) -> (tensor<?x?x?x128xbf16>, tensor<?x?x?xf32>)
  return %o : tensor<?x?x?x128xbf16>
}
func.func @forward_coop(%q: tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16> {
  %o, %l = fa.attention %q, %q, %q {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = cooperative>} : (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>) -> (tensor<?x?x?x128xbf16>, tensor<?x?x?xf32>)
  return %o : tensor<?x?x?x128xbf16>
}

// -----

// CHECK-LABEL: func.func @backward
// CHECK: fa.attention_backward {{.*}} deterministic {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 64, warps = 4, stages = 2>}
func.func @backward(%q: tensor<?x?x?x64xf16>, %lse: tensor<?x?x?xf32>) -> tensor<?x?x?x64xf16> {
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q deterministic {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 64, warps = 4, stages = 2>} : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?xf32>, tensor<?x?x?x64xf16>) -> (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>)
  return %dq : tensor<?x?x?x64xf16>
}
