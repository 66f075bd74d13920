//===- Passes.td - FlashMLIR conversion passes -------------*- tablegen -*-===//

#ifndef FA_CONVERSION_PASSES_TD
#define FA_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def FAConvertTiledAttentionToGPU : Pass<"fa-convert-tiled-attention-to-gpu"> {
  let summary = "Map tiled attention onto one gpu.launch: FlashAttention-2 "
                "forward with mma.sync, or wgmma on sm_90a";
  let description = [{
    Rewrites the `scf.forall` over (batch, query head, query block) that
    `fa-tile-attention` (and `fa-specialize-masks`, `fa-use-exp2`) produce,
    whose q/k/v come from memrefs through `bufferization.to_tensor` and whose
    out/lse results go to memrefs through
    `bufferization.materialize_in_destination`, into a `gpu.launch` with grid
    `(ceil(Nq / Br), Hq, B)` and `32 * warps` threads: each induction
    variable becomes the block id its `#gpu.block` mapping names (an
    unmapped forall must be 3-d and is read as `[z, y, x]`). Each warp owns
    `Br / warps` query rows. The body is the FlashAttention-2 forward for one
    query block:

    - Q and double-buffered K/V tiles are staged in dynamic shared memory
      with `nvgpu.device_async_copy` (cp.async, 16 bytes per thread,
      zero-filled past the sequence ends), on rows padded by 16 bytes so
      that `nvgpu.ldmatrix` is bank-conflict free;
    - `S = Q K^T` and `O += P V` use mma.sync m16n8k16 (f16/bf16 in, f32
      accumulation); P stays in registers;
    - the online softmax runs on the accumulator fragments (quad shuffles
      for the row max, `math.exp2` with the scale and log2(e) folded into one
      multiply-add);
    - the key loops of the input (masked boundary / unmasked interior /
      masked boundary) are kept, with their run-time bounds cloned into the
      kernel; only the masked ones carry mask arithmetic;
    - the finalization normalizes once and writes O and the natural-log LSE.

    The forall's `fa.kernel_config` (put there by the tiling from the op's
    `kernel_config`) gives the warps, stages and MMA kind, and its chip the
    shared-memory limit the kernel is checked against; the pass options
    serve loop nests without one.

    Before:
    ```mlir
    %r:2 = scf.forall (%b, %h, %qb) in (%B, %H, %nqb) shared_outs(...) {
      ... scf.for ... { fa.online_attention ... }
      ... fa.online_attention_finalize ...
    }
    bufferization.materialize_in_destination %r#0 in restrict writable %o
    ```
    After:
    ```mlir
    gpu.launch blocks(...) in (%nqb, %H, %B) threads(...) in (128, 1, 1)
        dynamic_shared_memory_size %bytes {
      nvgpu.device_async_copy ... nvgpu.ldmatrix ... nvgpu.mma.sync ...
    }
    ```
  }];
  let options = [
    Option<"warps", "warps", "int64_t", /*default=*/"4",
           "Warps per thread block; each owns block-q / warps query rows">,
    Option<"stages", "stages", "int64_t", /*default=*/"2",
           "Shared-memory buffers per K/V tile (1 or 2; 2 = double-buffered)">,
    Option<"wgmma", "wgmma", "bool", /*default=*/"false",
           "Hopper (sm_90a): both GEMMs as warpgroup MMAs (wgmma.mma_async; "
           "Q, K, V read through shared-memory descriptors on 128-byte "
           "swizzled tiles, P from registers) instead of mma.sync; needs "
           "warps % 4 == 0 and block-q == 16 * warps">,
    Option<"warpSpecialize", "warp-specialize", "bool", /*default=*/"false",
           "IR without a kernel configuration (whose schedule decides "
           "otherwise), wgmma only (docs/HOPPER.md): a producer warpgroup "
           "streams K and V with TMA through fagpu channels (tensor maps "
           "encoded by the runtime) to the consumer warpgroups, which sync "
           "on named barriers; lowered by fa-lower-channels and "
           "fa-lower-warp-specialize">,
    Option<"intraWarpgroupOverlap", "intra-warpgroup-overlap", "bool",
           /*default=*/"true",
           "warp-specialize: issue S(j) = Q K(j)^T and O += P(j-1) V(j-1) "
           "back to back and run the softmax of S(j) while P V runs "
           "(FlashAttention-3's intra-warpgroup overlap)">,
    Option<"pingPong", "ping-pong", "bool", /*default=*/"true",
           "warp-specialize with overlap and 2 or 3 consumer warpgroups: "
           "named barriers give the warpgroups turns at issuing their GEMMs, "
           "so one's softmax runs under another's GEMMs">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::bufferization::BufferizationDialect",
    "::mlir::gpu::GPUDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::math::MathDialect", "::mlir::memref::MemRefDialect",
    "::mlir::nvgpu::NVGPUDialect", "::mlir::NVVM::NVVMDialect",
    "::mlir::scf::SCFDialect", "::mlir::vector::VectorDialect",
    "::mlir::faptx::FAPTXDialect", "::mlir::fagpu::FAGPUDialect"
  ];
}

def FAConvertAttentionMergeToGPU
    : Pass<"fa-convert-attention-merge-to-gpu"> {
  let summary = "Map fa.attention_merge_splits onto a gpu.launch";
  let description = [{
    Rewrites each `fa.attention_merge_splits` whose partials are memrefs
    (the workspace `fa-convert-tiled-attention-to-gpu` gives fa-split-kv's
    partials, `[B, H * S, N, Dv]` and `[B, H * S, N]`, read through
    `bufferization.to_tensor` and expanded to `[B, H, S, ...]`) and whose
    results are materialized into memrefs, into one `gpu.launch`: a thread
    block per row `(n, h, b)` (grid `(N, H, B)`), a thread per column of
    out. Each thread finds the row's largest finite partial lse, then sums
    `exp(lse_s - max)` and the weighted partial outputs over the `S` splits
    (`S` read from the workspace's size), and stores `out = acc / sum`; the
    first thread stores `lse = max + log(sum)`. Rows no split saw get
    `out = 0`, `lse = +inf`.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::math::MathDialect", "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect"
  ];
}

def FAConvertTiledAttentionBackwardToGPU
    : Pass<"fa-convert-tiled-attention-backward-to-gpu"> {
  let summary = "Map the tiled backward onto gpu.launch ops: FlashAttention-2 "
                "backward with mma.sync, or wgmma on sm_90a";
  let description = [{
    Rewrites the loop nests `fa-tile-attention-backward` produces for one
    `fa.attention_backward` (tiles read from memrefs through
    `bufferization.to_tensor`, results materialized into memrefs) into
    `gpu.launch` ops, in order:

    - `<func>_preprocess_kernel`, one thread per query row: `delta =
      rowsum(dO * O)` (the nest's Di `linalg.generic`) and `lse2 = LSE *
      log2(e)` into workspace padded to whole blocks of 128 rows (delta 0,
      lse2 +inf past Nq: padded rows get P = 0 with no mask); in fast mode it
      also zeroes the f32 dQ accumulator.
    - `<func>_kernel`, grid `(ceil(Nk / Bc), Hkv, B)`: dK and dV of one key
      block in registers while looping over the query heads of the group and
      the query blocks the nest visits (its bounds cloned into the kernel);
      Q, dO, lse2 and delta double-buffered in shared memory by cp.async;
      S^T, dP^T, dV += P^T dO and dK += dS^T Q with mma.sync m16n8k16 (keys
      as rows, so P^T and dS^T stay in registers); in fast mode (the key loop
      marked `fa.dq_accumulation`) dS^T also goes through shared memory and
      dQ = dS K is added to the f32 accumulator with atomics.
    - fast mode: `<func>_dq_convert_kernel`, dq = scale * accumulator.
    - deterministic mode: `<func>_dq_kernel`, grid `(ceil(Nq / Br), Hq, B)`,
      dQ of one query block over the key blocks in ascending order, in
      registers: bitwise reproducible.
    - deterministic mode with the warp_specialized kernel (the key loop
      marked `fa.dq_accumulation = "ordered"`): no dQ kernel; the key-block
      kernel adds dQ as in fast mode, in a fixed order: key blocks
      launched from the last, each query block's additions in descending
      key-block order, the dQ warp waiting on an i32 semaphore per query
      block (the `dq_order` workspace, zeroed by the preprocessing) for the
      key block above. Then `<func>_dq_convert_kernel`.

    The foralls' induction variables become the block ids their
    `#gpu.block` mappings name (the fast mode's key-block loop takes x); an
    unmapped forall is read as (batch, head[, block]) on `[z, y[, x]]`.
    All launches share the gpu.module `<func>_kernels`. delta, lse2 and the
    accumulator are `memref.alloc`ed before the launches and freed after.
  }];
  let options = [
    Option<"warps", "warps", "int64_t", /*default=*/"4",
           "Warps per thread block of the two GEMM kernels">,
    Option<"vectorAtomics", "vector-atomics", "bool", /*default=*/"false",
           "Add dQ with sm_90's 8-byte red.global.add.v2.f32 (PTX 8.1) "
           "instead of one f32 atomic per element">,
    Option<"wgmma", "wgmma", "bool", /*default=*/"false",
           "Hopper (sm_90a): the key-block kernel's five GEMMs as warpgroup "
           "MMAs (wgmma.mma_async) on 128-byte swizzled shared-memory tiles; "
           "needs vector-atomics, block-kv == 16 * warps, warps % 4 == 0, "
           "block-q a multiple of 64 and head dims multiples of 64">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::nvgpu::NVGPUDialect",
    "::mlir::NVVM::NVVMDialect", "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect", "::mlir::faptx::FAPTXDialect",
    "::mlir::fagpu::FAGPUDialect"
  ];
}

def FAConvertFAPTXToLLVM : Pass<"fa-convert-faptx-to-llvm"> {
  let summary = "Lower the faptx ops to llvm.inline_asm, one pattern per op";
  let description = [{
    Rewrites each `faptx` op into the inline PTX it stands for (see the
    dialect's documentation), leaving every other op alone. The GPU
    pipelines run it on the kernel modules before `convert-nvvm-to-llvm`;
    `populateFAPTXToLLVMPatterns` gives the patterns to a larger
    conversion.

    Before:
    ```mlir
    faptx.red_global_add %addr, [%x, %y]
    ```
    After:
    ```mlir
    llvm.inline_asm has_side_effects "red.global.add.v2.f32 [$0], {$1, $2};",
        "l,f,f" %addr, %x, %y : (i64, f32, f32) -> ()
    ```
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def FAExternDynamicSharedMemory : Pass<"fa-extern-dynamic-shared-memory"> {
  let summary = "Declare the kernels' dynamic shared memory as extern";
  let description = [{
    `convert-gpu-to-nvvm` gives `gpu.dynamic_shared_memory` an internal
    zero-length shared global, which the NVPTX back end demotes to a
    one-byte *static* variable (`.shared .align 16 .b8 __dynamic_shmem__0;`):
    the dynamic region then starts wherever ptxas places that byte among the
    other static shared variables (the warp-specialized kernels' mbarriers),
    and may overlap them. This pass makes such globals external, which
    prints the real dynamic declaration (`.extern .shared .align 16 .b8
    __dynamic_shmem__0[];`), placed after all static shared memory.

    Before:
    ```mlir
    llvm.mlir.global internal @__dynamic_shmem__0() {addr_space = 3 : i32,
        alignment = 16 : i64} : !llvm.array<0 x i8>
    ```
    After:
    ```mlir
    llvm.mlir.global external @__dynamic_shmem__0() {addr_space = 3 : i32,
        alignment = 16 : i64} : !llvm.array<0 x i8>
    ```
  }];
}

def FALowerChannels : Pass<"fa-lower-channels"> {
  let summary = "Lower fagpu channels to TMA loads and mbarrier phases";
  let description = [{
    Writes the producer / consumer protocol of each `!fagpu.channel`: two
    groups of `stages` mbarriers ("full": one arrival plus the TMA's
    transaction bytes; "empty": the channel's `arrivals`), initialized by
    thread 0 and published with `fence.mbarrier_init` and a block-wide
    barrier where the channel is created. Item `i` uses buffer `s = i %
    stages` in round `r = i / stages`:

    - `channel_put_tma`: one thread per warpgroup (thread 0 of it) waits
      for phase `(r - 1) & 1` of empty[s] (from the second round on),
      arms full[s] with the box's bytes and issues the TMA load;
    - `channel_get`: waits for phase `r & 1` of full[s] and returns the
      buffer;
    - `channel_release`: arrives at empty[s];
    - `channel_acquire`: the put's wait alone (thread 0 of the warpgroup);
    - `channel_signal`: thread 0 of the warpgroup arrives at full[s]
      without a transaction count (an item without data).

    Before:
    ```mlir
    %ch = fagpu.channel_create %ring arrivals 256 : ... -> !fagpu.channel<3 x ...>
    fagpu.channel_put_tma %ch[%i], %map[%c0, %row, %h, %b] : ...
    %buf = fagpu.channel_get %ch[%i] : ... -> memref<...>
    fagpu.channel_release %ch[%i] : ...
    ```
    After: `nvgpu.mbarrier.create` / `init` / `arrive.expect_tx` /
    `try_wait.parity` / `arrive` and `nvgpu.tma.async.load` on
    `memref.subview`s of the ring.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::memref::MemRefDialect", "::mlir::nvgpu::NVGPUDialect",
    "::mlir::NVVM::NVVMDialect", "::mlir::scf::SCFDialect"
  ];
}

def FALowerWarpSpecialize : Pass<"fa-lower-warp-specialize"> {
  let summary = "Lower fagpu.warp_specialize to a role branch with setmaxnreg";
  let description = [{
    Replaces each `fagpu.warp_specialize` by a branch on the warpgroup
    index (`thread_id.x / 128`): warpgroup 0 lowers its register budget
    (`setmaxnreg.dec`) and runs the producer region, the others raise
    theirs (`setmaxnreg.inc`) and run the consumer region.

    Before:
    ```mlir
    fagpu.warp_specialize consumer_warpgroups 2 registers(40, 232)
    producer { A } consumers { B }
    ```
    After:
    ```mlir
    %wg = arith.divui %tid, %c128 : index
    scf.if (%wg == 0) { nvvm.setmaxregister decrease 40  A }
    else { nvvm.setmaxregister increase 232  B }
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::NVVM::NVVMDialect", "::mlir::scf::SCFDialect"
  ];
}

#endif // FA_CONVERSION_PASSES_TD
