// RUN: fa-opt %s --split-input-file --verify-diagnostics

// The attribute's own checks.

// expected-error @below {{unknown chip 'sm_70' (supported: sm_80, sm_90, sm_90a)}}
#c = #fa.kernel_config<"sm_70", mma_sync, block_q = 64, block_kv = 64, warps = 4, stages = 2>
func.func private @f() attributes {c = #c}

// -----

// expected-error @below {{wgmma needs sm_90a, not sm_80}}
#c = #fa.kernel_config<"sm_80", wgmma, block_q = 64, block_kv = 64, warps = 4, stages = 2>
func.func private @f() attributes {c = #c}

// -----

// expected-error @below {{block_q and block_kv must be positive, got 0 and 64}}
#c = #fa.kernel_config<"sm_80", mma_sync, block_q = 0, block_kv = 64, warps = 4, stages = 2>
func.func private @f() attributes {c = #c}

// -----

// expected-error @below {{warps must be in [1, 32], got 33}}
#c = #fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 64, warps = 33, stages = 2>
func.func private @f() attributes {c = #c}

// -----

// expected-error @below {{stages must be 1 or 2, got 3}}
#c = #fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 64, warps = 4, stages = 3>
func.func private @f() attributes {c = #c}

// -----

// The op checks the configuration against itself and the chip.

func.func @f32(%q: tensor<?x?x?x64xf32>) {
  // expected-error @below {{a kernel_config needs f16 or bf16 inputs (the GPU kernels), got 'f32'}}
  %o, %l = fa.attention %q, %q, %q {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 64, warps = 4, stages = 2>} : (tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>) -> (tensor<?x?x?x64xf32>, tensor<?x?x?xf32>)
  return
}

// -----

func.func @head_dim(%q: tensor<?x?x?x40xf16>) {
  // expected-error-re @below {{kernel configuration {{.*}}: the GPU kernels need head dims that are multiples of 16, got 40 and 40}}
  %o, %l = fa.attention %q, %q, %q {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 64, warps = 4, stages = 2>} : (tensor<?x?x?x40xf16>, tensor<?x?x?x40xf16>, tensor<?x?x?x40xf16>) -> (tensor<?x?x?x40xf16>, tensor<?x?x?xf32>)
  return
}

// -----

func.func @blocks(%q: tensor<?x?x?x64xf16>) {
  // expected-error-re @below {{kernel configuration {{.*}}: block_q and block_kv must be multiples of 16}}
  %o, %l = fa.attention %q, %q, %q {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 40, warps = 4, stages = 2>} : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) -> (tensor<?x?x?x64xf16>, tensor<?x?x?xf32>)
  return
}

// -----

func.func @rows_per_warp(%q: tensor<?x?x?x64xf16>) {
  // expected-error-re @below {{kernel configuration {{.*}}: block_q must be a multiple of 16 * warps = 128}}
  %o, %l = fa.attention %q, %q, %q {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 64, warps = 8, stages = 2>} : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) -> (tensor<?x?x?x64xf16>, tensor<?x?x?xf32>)
  return
}

// -----

func.func @warpgroups(%q: tensor<?x?x?x64xf16>) {
  // expected-error-re @below {{kernel configuration {{.*}}: wgmma needs whole warpgroups: warps must be a multiple of 4}}
  %o, %l = fa.attention %q, %q, %q {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 32, block_kv = 64, warps = 2, stages = 2>} : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) -> (tensor<?x?x?x64xf16>, tensor<?x?x?xf32>)
  return
}

// -----

func.func @wgmma_rows(%q: tensor<?x?x?x64xf16>) {
  // expected-error-re @below {{kernel configuration {{.*}}: with wgmma each warp owns 16 query rows: block_q must be 16 * warps = 64}}
  %o, %l = fa.attention %q, %q, %q {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 64, warps = 4, stages = 2>} : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) -> (tensor<?x?x?x64xf16>, tensor<?x?x?xf32>)
  return
}

// -----

func.func @wgmma_n(%q: tensor<?x?x?x64xf16>) {
  // expected-error-re @below {{kernel configuration {{.*}}: wgmma's N is at most 256: block_kv must be at most 256}}
  %o, %l = fa.attention %q, %q, %q {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 272, warps = 4, stages = 1>} : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) -> (tensor<?x?x?x64xf16>, tensor<?x?x?xf32>)
  return
}

// -----

func.func @shared_memory(%q: tensor<?x?x?x256xbf16>) {
  // expected-error-re @below {{kernel configuration {{.*}}: the forward kernel needs 328704 bytes of shared memory, more than the 232448 a thread block may have on sm_90a; use smaller block_q/block_kv (or stages = 1)}}
  %o, %l = fa.attention %q, %q, %q {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2>} : (tensor<?x?x?x256xbf16>, tensor<?x?x?x256xbf16>, tensor<?x?x?x256xbf16>) -> (tensor<?x?x?x256xbf16>, tensor<?x?x?xf32>)
  return
}

// -----

func.func @registers(%q: tensor<?x?x?x128xbf16>) {
  // expected-error-re @below {{kernel configuration {{.*}}: the forward kernel would keep 320 accumulator values per thread in registers, more than the 192 that leave room for the rest of the kernel; use smaller tiles or more warps}}
  %o, %l = fa.attention %q, %q, %q {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 128, block_kv = 64, warps = 2, stages = 1>} : (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>) -> (tensor<?x?x?x128xbf16>, tensor<?x?x?xf32>)
  return
}

// -----

func.func @backward_stages(%q: tensor<?x?x?x64xf16>, %lse: tensor<?x?x?xf32>) {
  // expected-error-re @below {{kernel configuration {{.*}}: the backward double-buffers its query tiles: stages must be 2}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 64, warps = 4, stages = 1>} : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?xf32>, tensor<?x?x?x64xf16>) -> (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>)
  return
}

// -----

func.func @backward_block_q(%q: tensor<?x?x?x64xf16>, %lse: tensor<?x?x?xf32>) {
  // expected-error-re @below {{kernel configuration {{.*}}: block_q must divide 128}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 48, block_kv = 64, warps = 4, stages = 2>} : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?xf32>, tensor<?x?x?x64xf16>) -> (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>)
  return
}

// -----

func.func @backward_keys(%q: tensor<?x?x?x64xf16>, %lse: tensor<?x?x?xf32>) {
  // expected-error-re @below {{kernel configuration {{.*}}: block_kv must be a multiple of 16 * warps = 128}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 64, warps = 8, stages = 2>} : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?xf32>, tensor<?x?x?x64xf16>) -> (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>)
  return
}

// -----

func.func @backward_dq_units(%q: tensor<?x?x?x96xf16>, %lse: tensor<?x?x?xf32>) {
  // expected-error-re @below {{kernel configuration {{.*}}: the dQ tiles of block_q x head dim do not split evenly over the warps}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 16, block_kv = 128, warps = 8, stages = 2>} : (tensor<?x?x?x96xf16>, tensor<?x?x?x96xf16>, tensor<?x?x?x96xf16>, tensor<?x?x?x96xf16>, tensor<?x?x?xf32>, tensor<?x?x?x96xf16>) -> (tensor<?x?x?x96xf16>, tensor<?x?x?x96xf16>, tensor<?x?x?x96xf16>)
  return
}

// -----

func.func @backward_wgmma(%q: tensor<?x?x?x64xf16>, %lse: tensor<?x?x?xf32>) {
  // expected-error-re @below {{kernel configuration {{.*}}: wgmma needs whole warpgroups of 16 keys per warp: warps a multiple of 4 and block_kv = 16 * warps}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 128, warps = 4, stages = 2>} : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?xf32>, tensor<?x?x?x64xf16>) -> (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>)
  return
}

// -----

func.func @backward_smem(%q: tensor<?x?x?x256xf16>, %lse: tensor<?x?x?xf32>) {
  // expected-error-re @below {{kernel configuration {{.*}}: the key-block kernel needs 212992 bytes of shared memory, more than the 166912 a thread block may have on sm_80; use smaller block_q/block_kv}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 64, warps = 4, stages = 2>} : (tensor<?x?x?x256xf16>, tensor<?x?x?x256xf16>, tensor<?x?x?x256xf16>, tensor<?x?x?x256xf16>, tensor<?x?x?xf32>, tensor<?x?x?x256xf16>) -> (tensor<?x?x?x256xf16>, tensor<?x?x?x256xf16>, tensor<?x?x?x256xf16>)
  return
}

// -----

func.func @deterministic_dq_kernel(%q: tensor<?x?x?x256xf16>, %v: tensor<?x?x?x32xf16>, %lse: tensor<?x?x?xf32>) {
  // The key-block kernel fits; the deterministic dQ kernel (one warp for 16
  // query rows) would hold dQ and the scores of 128 keys.
  // expected-error-re @below {{kernel configuration {{.*}}: the dQ kernel would keep 256 accumulator values per thread in registers}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %v, %v, %lse, %v deterministic {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 16, block_kv = 128, warps = 8, stages = 2>} : (tensor<?x?x?x256xf16>, tensor<?x?x?x256xf16>, tensor<?x?x?x32xf16>, tensor<?x?x?x32xf16>, tensor<?x?x?xf32>, tensor<?x?x?x32xf16>) -> (tensor<?x?x?x256xf16>, tensor<?x?x?x256xf16>, tensor<?x?x?x32xf16>)
  return
}

// -----

func.func @split_forward(%q: tensor<?x?x?x64xf16>) {
  // expected-error-re @below {{kernel configuration {{.*}}: dkv_split applies to the backward only}}
  %o, %l = fa.attention %q, %q, %q {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 64, warps = 4, stages = 2, dkv_split = 2>} : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) -> (tensor<?x?x?x64xf16>, tensor<?x?x?xf32>)
  return
}

// -----

// expected-error @below {{dkv_split must be in [1, 4], got 5}}
#c = #fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 64, warps = 4, stages = 2, dkv_split = 5>
func.func private @f() attributes {c = #c}

// -----

func.func @split_tiles(%q: tensor<?x?x?x96xf16>, %lse: tensor<?x?x?xf32>) {
  // expected-error-re @below {{kernel configuration {{.*}}: dkv_split = 4 must cut both head dims into slices of whole 16-column tiles, got 96 and 96}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q {kernel_config = #fa.kernel_config<"sm_80", mma_sync, block_q = 64, block_kv = 64, warps = 4, stages = 2, dkv_split = 4>} : (tensor<?x?x?x96xf16>, tensor<?x?x?x96xf16>, tensor<?x?x?x96xf16>, tensor<?x?x?x96xf16>, tensor<?x?x?xf32>, tensor<?x?x?x96xf16>) -> (tensor<?x?x?x96xf16>, tensor<?x?x?x96xf16>, tensor<?x?x?x96xf16>)
  return
}

// -----

func.func @split_panels(%q: tensor<?x?x?x192xbf16>, %lse: tensor<?x?x?xf32>) {
  // expected-error-re @below {{kernel configuration {{.*}}: with wgmma each dkv_split slice must be whole 64-column panels, got 96 and 96 columns}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 64, warps = 4, stages = 2, dkv_split = 2>} : (tensor<?x?x?x192xbf16>, tensor<?x?x?x192xbf16>, tensor<?x?x?x192xbf16>, tensor<?x?x?x192xbf16>, tensor<?x?x?xf32>, tensor<?x?x?x192xbf16>) -> (tensor<?x?x?x192xbf16>, tensor<?x?x?x192xbf16>, tensor<?x?x?x192xbf16>)
  return
}

// -----

func.func @wgmma_backward_block_q(%q: tensor<?x?x?x64xbf16>, %lse: tensor<?x?x?xf32>) {
  // expected-error-re @below {{kernel configuration {{.*}}: the wgmma backward's dQ and dS^T tiles are 64 queries: block_q must be a multiple of 64}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 32, block_kv = 128, warps = 8, stages = 2>} : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?xf32>, tensor<?x?x?x64xbf16>) -> (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>)
  return
}

// -----

// expected-error @below {{the warp_specialized schedule needs wgmma}}
#c = #fa.kernel_config<"sm_90a", mma_sync, block_q = 128, block_kv = 64, warps = 4, stages = 2, schedule = warp_specialized>
func.func private @f() attributes {c = #c}

// -----

// The producer warpgroup's 128 threads come on top of the 32 x 29 consumers.
// expected-error @below {{warp_specialized: 29 consumer warps and the producer warpgroup are more than 1024 threads}}
#c = #fa.kernel_config<"sm_90a", wgmma, block_q = 464, block_kv = 64, warps = 29, stages = 2, schedule = warp_specialized>
func.func private @f() attributes {c = #c}

// -----

func.func @ws_head_dim(%q: tensor<?x?x?x96xbf16>) {
  // expected-error-re @below {{kernel configuration {{.*}}: the warp_specialized schedule loads K and V as 64-column TMA panels: head dims must be multiples of 64, got 96 and 96}}
  %o, %l = fa.attention %q, %q, %q {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 64, warps = 8, stages = 2, schedule = warp_specialized>} : (tensor<?x?x?x96xbf16>, tensor<?x?x?x96xbf16>, tensor<?x?x?x96xbf16>) -> (tensor<?x?x?x96xbf16>, tensor<?x?x?xf32>)
  return
}

// -----

func.func @ws_backward_keys(%q: tensor<?x?x?x64xbf16>, %lse: tensor<?x?x?xf32>) {
  // expected-error-re @below {{kernel configuration {{.*}}: the warp_specialized backward keeps 16 keys per consumer warp and all head-dim columns: block_kv must be 16 * warps = 64 and dkv_split 1}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 128, warps = 4, stages = 2, schedule = warp_specialized>} : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?xf32>, tensor<?x?x?x64xbf16>) -> (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>)
  return
}

// -----

func.func @ws_backward_head_dim(%q: tensor<?x?x?x96xbf16>, %lse: tensor<?x?x?xf32>) {
  // expected-error-re @below {{kernel configuration {{.*}}: the warp_specialized backward loads Q, dO, K and V as 64-column TMA panels: head dims must be multiples of 64, got 96 and 96}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized>} : (tensor<?x?x?x96xbf16>, tensor<?x?x?x96xbf16>, tensor<?x?x?x96xbf16>, tensor<?x?x?x96xbf16>, tensor<?x?x?xf32>, tensor<?x?x?x96xbf16>) -> (tensor<?x?x?x96xbf16>, tensor<?x?x?x96xbf16>, tensor<?x?x?x96xbf16>)
  return
}

// -----

func.func @backward_dynamic(%q: tensor<?x?x?x64xbf16>, %lse: tensor<?x?x?xf32>) {
  // expected-error-re @below {{kernel configuration {{.*}}: the backward's tile schedulers are grid and persistent, not dynamic}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized, tile_scheduler = dynamic>} : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?xf32>, tensor<?x?x?x64xbf16>) -> (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>)
  return
}

// -----

func.func @backward_persistent_deterministic(%q: tensor<?x?x?x64xbf16>, %lse: tensor<?x?x?xf32>) {
  // expected-error-re @below {{kernel configuration {{.*}}: the persistent backward keeps no fixed dQ order (a key block waits for the one above, which a persistent block may not have started): the deterministic backward is grid only}}
  %dq, %dk, %dv = fa.attention_backward %q, %q, %q, %q, %lse, %q deterministic {kernel_config = #fa.kernel_config<"sm_90a", wgmma, block_q = 64, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized, tile_scheduler = persistent>} : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?xf32>, tensor<?x?x?x64xbf16>) -> (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>)
  return
}

// -----

// expected-error @below {{'schedule' is given twice}}
#c = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized, schedule = cooperative>
func.func private @f() attributes {c = #c}

// -----

// expected-error @below {{schedule must be cooperative or warp_specialized, got 'pingpong'}}
#c = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = pingpong>
func.func private @f() attributes {c = #c}

// -----

// expected-error @below {{expected 'dkv_split', 'schedule' or 'tile_scheduler', got 'stage'}}
#c = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, stage = 2>
func.func private @f() attributes {c = #c}

// -----

// expected-error @below {{tile_scheduler must be grid, persistent or dynamic, got 'atomic'}}
#c = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = warp_specialized, tile_scheduler = atomic>
func.func private @f() attributes {c = #c}

// -----

// expected-error @below {{'tile_scheduler' is given twice}}
#c = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, tile_scheduler = grid, tile_scheduler = persistent>
func.func private @f() attributes {c = #c}

// -----

// Only the warp-specialized kernel loops over tiles.
// expected-error @below {{the persistent tile scheduler needs the warp_specialized schedule}}
#c = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, tile_scheduler = persistent>
func.func private @f() attributes {c = #c}

// -----

// expected-error @below {{the dynamic tile scheduler needs the warp_specialized schedule}}
#c = #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128, warps = 8, stages = 2, schedule = cooperative, tile_scheduler = dynamic>
func.func private @f() attributes {c = #c}
