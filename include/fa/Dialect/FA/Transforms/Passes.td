//===- Passes.td - FlashMLIR transformation passes ---------*- tablegen -*-===//

#ifndef FA_DIALECT_FA_TRANSFORMS_PASSES_TD
#define FA_DIALECT_FA_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def FALowerToReference : Pass<"fa-lower-to-reference"> {
  let summary = "Lower fa ops to the golden reference: full N x N scores";
  let description = [{
    Rewrites `fa.attention` and `fa.attention_backward` into plain upstream
    ops (linalg, tensor, arith, math) that materialize the whole score matrix
    `[B, Hq, Nq, Nk]`, exactly as the dialect documents the semantics
    (`fa.attention_varlen` and `fa.attention_paged` first become a loop over
    their sequences of `fa.attention` on slices, resp. gathered pages), and
    `fa.attention_merge` into two elementwise generics. Every
    optimized lowering is tested against this one. Scores and reductions are
    computed in f32 whatever the input element type.

    Before:
    ```mlir
    %o, %lse = fa.attention %q, %k, %v mask<causal> : ...
    ```
    After: `linalg.generic` ops for `S = scale * Q K^T`, the mask, the row
    max, `exp`, the row sum, `P V`, and `lse = max + log(sum)`.

    With `merge-only`, only `fa.attention_merge` is rewritten: its reference
    form (elementwise over the partial outputs) is also its efficient one,
    so the tiled pipeline uses it.
  }];
  let options = [
    Option<"mergeOnly", "merge-only", "bool", /*default=*/"false",
           "Rewrite only fa.attention_merge (no N x N scores anywhere)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def FADifferentiateScoreMod : Pass<"fa-differentiate-score-mod"> {
  let summary = "Derive d(score_mod)/d(score) of each backward by the chain rule";
  let description = [{
    Gives every `fa.attention_backward` that has a `score_mod` and no
    `score_mod_grad` one: a region of the score_mod's signature that
    recomputes the score_mod's ops and yields the derivative of its result
    with respect to the score `%s` (forward-mode differentiation: each value
    that depends on `%s` gets a tangent, `%s` itself 1). Ops that do not
    depend on `%s` (index arithmetic, reads of the captures, constants) are
    copied; comparisons of `%s` are locally constant (derivative 0 almost
    everywhere) and selects, maximumf and minimumf pick the tangent of the
    operand they pick. Differentiated: arith addf, subf, mulf, divf, negf,
    extf, truncf, select, maximumf, minimumf, maxnumf, minnumf; math exp,
    exp2, log, log2, log1p, tanh, sqrt, rsqrt, absf, sin, cos, fma. Any other
    op that depends on `%s` is an error naming it. The captures get no
    gradient (they are constants of the backward).

    Before:
    ```mlir
    %dq, %dk, %dv = fa.attention_backward ... score_mod(%s: f32, ...) {
      %t = math.tanh %s : f32
      fa.yield %t : f32
    } : ...
    ```
    After: the same op with
    ```mlir
    score_mod_grad(%s: f32, ...) {
      %t = math.tanh %s : f32
      %t2 = arith.mulf %t, %t : f32
      %d = arith.subf %one, %t2 : f32
      ...
      fa.yield %d : f32
    }
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect"
  ];
}

def FASelectKernelConfig : Pass<"fa-select-kernel-config"> {
  let summary = "Choose the GPU kernel configuration of each attention op";
  let description = [{
    Gives every `fa.attention` and `fa.attention_backward` without a
    `kernel_config` one: MMA kind, tiles, warps and stages for the chip,
    from one table per chip and head dim (measured on the H200, see
    docs/PERFORMANCE.md). Each option left at 0 (`auto` for `mma`) is
    chosen; the others are the user's. When the table's tiles do not fit
    the chip's shared memory or register budget, smaller ones that do are
    taken; when no configuration with the user's fixed fields fits, the pass
    fails with the reason (the limit and the numbers). Ops that already
    carry a `kernel_config` keep it (the op verifier checks it).

    The tiling passes take `block_q` / `block_kv` from the configuration
    and hand it to the GPU conversions on the loop nests they make, so that
    every later pass reads the same decisions.

    Before:
    ```mlir
    %o, %l = fa.attention %q, %k, %v mask<causal> : (tensor<?x?x?x128xbf16>, ...)
    ```
    After (`chip=sm_90a`):
    ```mlir
    %o, %l = fa.attention %q, %k, %v mask<causal> {kernel_config =
        #fa.kernel_config<"sm_90a", wgmma, block_q = 128, block_kv = 128,
                          warps = 8, stages = 2>} : ...
    ```
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90a\"",
           "Target chip: sm_80, sm_90 or sm_90a">,
    Option<"mma", "mma", "std::string", /*default=*/"\"auto\"",
           "auto (wgmma where the chip and the op allow it), mma_sync or "
           "wgmma">,
    Option<"blockQ", "block-q", "int64_t", /*default=*/"0",
           "Query rows per block (0 = choose)">,
    Option<"blockKV", "block-kv", "int64_t", /*default=*/"0",
           "Keys per block (0 = choose)">,
    Option<"warps", "warps", "int64_t", /*default=*/"0",
           "Warps per thread block (0 = choose)">,
    Option<"stages", "stages", "int64_t", /*default=*/"0",
           "Shared-memory buffers per streamed tile (0 = choose)">,
    Option<"dkvSplit", "dkv-split", "int64_t", /*default=*/"0",
           "Backward: thread blocks per key block sharing dK/dV's columns "
           "(0 = choose)">,
    Option<"skip", "skip", "int64_t", /*default=*/"0",
           "Pass over this many configurations that work before taking one "
           "(fa-compile's next choice when ptxas reports register spills)">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"auto\"",
           "Forward: auto (warp_specialized for wgmma at head dims 64 and "
           "128, else cooperative), cooperative or warp_specialized">,
    Option<"tileScheduler", "tile-scheduler", "std::string",
           /*default=*/"\"auto\"",
           "Forward: auto (the table's choice), grid, persistent or "
           "dynamic (both warp_specialized only)">
  ];
}

def FATileAttention : Pass<"fa-tile-attention"> {
  let summary = "Tile fa.attention into query blocks and a loop over key blocks";
  let description = [{
    Rewrites `fa.attention` into an `scf.forall` over (batch, query head,
    block of `block-q` query rows) that holds an `scf.for` over blocks of
    `block-kv` keys/values. The loop carries the online-softmax state (f32
    accumulator, running max, running sum) through `fa.online_attention`, and
    `fa.online_attention_finalize` normalizes once after the loop. Tiles are
    static (`block-q x D`, `block-kv x D`): sequence tails are padded with
    zeros and hidden by the step's mask, so B, H and N may be dynamic.
    `fa.attention_varlen` and `fa.attention_paged` get the same nest over
    their sequences; a paged key block is a `fa.paged_key_block` of the
    pools (any page size: a block may span pages).

    Every step is `masked` here (it hides keys past Nk and applies the op's
    mask); `fa-specialize-masks` then splits the loop so only
    boundary blocks pay for the mask.

    The forall carries `mapping = [#gpu.block<z>, #gpu.block<y>,
    #gpu.block<x>]`: batch on z, heads on y, query blocks on x, the grid of
    `fa-convert-tiled-attention-to-gpu`. Canonicalization does not fold the
    unit dimensions of a mapped forall (batch 1, one head, one query block),
    so the loop nest keeps that form; the CPU lowering ignores the mapping.
  }];
  let options = [
    Option<"blockQ", "block-q", "int64_t", /*default=*/"64",
           "Query rows per block (Br)">,
    Option<"blockKV", "block-kv", "int64_t", /*default=*/"64",
           "Keys/values per block (Bc)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect", "::mlir::affine::AffineDialect",
    "::mlir::gpu::GPUDialect"
  ];
}

def FASpecializeMasks : Pass<"fa-specialize-masks"> {
  let summary = "Skip fully masked key blocks and drop the mask from full ones";
  let description = [{
    Turns the masked key-block loop of a query block into up to three loops:
    `[lo, fullLo)` masked, `[fullLo, fullHi)` without any mask arithmetic, and
    `[fullHi, hi)` masked, where `lo`/`hi` exclude every block that no query
    row of the block can see (causal, sliding window, sequence end). Bounds are
    computed per query block at run time from `q_start`, `q_len`, `k_len` and
    the op's mask.

    A step with modifiers is split the same way (its positions kept in the
    fully visible loop, which the modifiers read). A `mask_mod` narrows the
    range to the key blocks it may see (a scan of its block verdicts, by
    chunks of 8 blocks then block by block) and is decided per block:
    interval arithmetic over the region on the block's rows and keys says
    whether the block may be seen (else the state passes through) and may be
    hidden (else the step runs without the mask_mod), as nested `scf.if`.
    Index arithmetic with constants, comparisons and boolean logic are
    decided exactly; anything else (a capture's element) keeps the block
    masked.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
}

def FARecognizeBuiltinModifiers : Pass<"fa-recognize-builtin-modifiers"> {
  let summary = "Turn score_mods that state the softcap into the attribute";
  let description = [{
    A `score_mod` that is exactly the softcap, `c * tanh(s / c)` (or
    `tanh(s * (1 / c)) * c`) with a constant `c > 0` and nothing else,
    becomes the op's `softcap c` (when it has none): the kernels' built-in
    softcap computes the same function with the exponent factors folded
    (`tanh(x * scale / c)`, then `c * log2 e`), about twice as fast as the
    modifier's `scale x`, division and product per score. Captures no
    region reads any more are dropped. `fa.attention` and
    `fa.attention_backward`.

    ```mlir
    %o, %l = fa.attention %q, %k, %v
        score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index) {
          %c = arith.constant 3.0e+01 : f32
          %x = arith.divf %s, %c : f32
          %t = math.tanh %x : f32
          %r = arith.mulf %c, %t : f32
          fa.yield %r : f32
        } : ...
    // becomes
    %o, %l = fa.attention %q, %k, %v softcap 3.0e+01 : ...
    ```
  }];
}

def FASplitKV : Pass<"fa-split-kv"> {
  let summary = "Split each query block's key loop into chunks run in parallel";
  let description = [{
    Split-KV (FlashDecoding): when there are too few query blocks to fill
    the GPU (decoding: one query block per sequence and head), each query
    block's visible key range `[lo, hi)` is cut into `S` chunks of whole key
    blocks, each computed by its own iteration of the parallel loop into a
    partial `(out, lse)` in f32, and `fa.attention_merge_splits` combines
    the partials. Runs on the loop nest of `fa-tile-attention` after
    `fa-specialize-masks`: every key loop of a query block is clamped to the
    chunk (`[max(lb, kLo), min(ub, kHi))`), so the masked / unmasked loops
    stay back to back and each chunk runs only the blocks it owns.

    The forall's query-block dimension becomes `query blocks x S` (split
    fastest); partials are `[B, H * S, Nq, Dv]` and `[B, H * S, Nq]`,
    expanded to `[B, H, S, ...]` for the merge.

    `S` is `splits`, or with `splits=0` the run-time count
    `max(1, min(blocks-per-multiprocessor * SMS / tiles, key blocks,
    max-splits))`: enough thread blocks for one full wave (FlashAttention's
    heuristic in closed form), where `tiles` is batch x heads x query
    blocks and `SMS` is `multiprocessors`, or when that is 0 the launch
    device's count (`fagpu.host_multiprocessor_count`, bound by the
    runtime). The blocks per SM default to what the nest's `kernel_config`
    leaves room for (shared memory, threads; `fa::residentBlocks`).

    Before:
    ```mlir
    %r:2 = scf.forall (%b, %h, %qb) in (%B, %H, %QB) shared_outs(...) {
      scf.for %k = %lo to %hi step %c128 ... { fa.online_attention ... }
      ... fa.online_attention_finalize ... -> tensor<64x128xbf16>
    }
    ```
    After:
    ```mlir
    %r:2 = scf.forall (%b, %h, %x) in (%B, %H, %QBxS) shared_outs(...) {
      %qb = arith.divui %x, %S
      %s = arith.remui %x, %S
      scf.for %k = %kLo to %kHi step %c128 ... { fa.online_attention ... }
      ... fa.online_attention_finalize ... -> tensor<64x128xf32>
    }
    %out, %lse = fa.attention_merge_splits %parts, %lses : ...
    ```
  }];
  let options = [
    Option<"splits", "splits", "int64_t", /*default=*/"0",
           "Chunks per query block (0: chosen at run time, see above)">,
    Option<"multiprocessors", "multiprocessors", "int64_t", /*default=*/"0",
           "SM count of the heuristic (0: the launch device's)">,
    Option<"blocksPerMultiprocessor", "blocks-per-multiprocessor", "int64_t",
           /*default=*/"0",
           "Thread blocks resident per SM (heuristic; 0: what the nest's "
           "kernel_config leaves room for, 2 without one)">,
    Option<"maxSplits", "max-splits", "int64_t", /*default=*/"64",
           "Largest split count of the heuristic">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect", "::mlir::fagpu::FAGPUDialect"
  ];
}

def FAUseExp2 : Pass<"fa-use-exp2"> {
  let summary = "Compute the online softmax with exp2, log2(e) folded in";
  let description = [{
    Switches `fa.online_attention` and `fa.online_attention_finalize` to the
    base-2 form: scores are pre-multiplied by log2(e) (folded into the softmax
    scale, or into the softcap factor, after the tanh), the running max is
    kept in log2 units, and every exponential becomes `math.exp2`. The LSE
    stays in natural-log units at the op boundary.
  }];
}

def FADecomposePagedKeyBlocks : Pass<"fa-decompose-paged-key-blocks"> {
  let summary = "Expand fa.paged_key_block into an element-wise gather";
  let description = [{
    Rewrites each `fa.paged_key_block` into a `tensor.generate` whose
    element `(r, d)` reads the page table and the pool for the rows before
    the limit and is zero past it: the CPU form of a key block of a paged
    cache. The GPU conversions read the op itself (they copy whole rows).
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def FADecomposeOnlineAttention : Pass<"fa-decompose-online-attention"> {
  let summary = "Expand the online-softmax tile ops into linalg on tiles";
  let description = [{
    Rewrites `fa.online_attention` into linalg ops on `Br x Bc` tiles (the
    largest intermediate): `S = Q K^T`, scaling/softcap/mask, row max, the
    rescale factor `alpha`, `P = exp(S - m)`, row sum and `acc = alpha * acc
    + P V`; and `fa.online_attention_finalize` into the one normalization
    `out = acc / sum`, `lse = max + log(sum)`.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::tensor::TensorDialect"
  ];
}

def FATileAttentionBackward : Pass<"fa-tile-attention-backward"> {
  let summary = "Tile fa.attention_backward: recompute P from the saved LSE";
  let description = [{
    Rewrites `fa.attention_backward` the FlashAttention-2 way: a
    preprocessing step `D = rowsum(dO * O)`, then a loop parallel over
    (batch, key/value head, block of `block-kv` keys) and sequential over the
    query heads of the group and their blocks of `block-q` rows, that
    recomputes `P = exp2(S * scale * log2(e) - LSE * log2(e))` from the saved
    LSE and accumulates `dV += P^T dO`, `dK += dS^T Q * scale` with
    `dS = P * (dO V^T - D)`. `dQ = dS K * scale` is accumulated across key
    blocks; with `deterministic` on the op it is computed by a separate loop
    parallel over query blocks, in a fixed order, unless the op's kernel
    configuration is warp_specialized (and it has no modifiers or run-time
    ranges): then the one-pass nest is kept and its key-block loop is marked
    `fa.dq_accumulation = "ordered"`, a fixed order the kernel keeps.

    The innermost body is one `fa.attention_backward_step` per (query
    block, key block) pair, `masked` when the op has a mask or
    the keys may have a tail; `fa-decompose-attention-backward-step` expands
    it into linalg. The scale is applied once, by the epilogues, to the
    finished f32 dK and dQ.

    Each forall carries a `#gpu.block` mapping, the grid of
    `fa-convert-tiled-attention-backward-to-gpu`: batch on z, heads on y,
    and key blocks (the fast mode's `fa.dq_accumulation` loop, or the
    deterministic dK/dV forall's third dimension) or the deterministic dQ
    forall's query blocks on x. Canonicalization keeps mapped unit
    dimensions; the CPU lowering ignores the mapping.

    Before:
    ```mlir
    %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %o, %lse, %do mask<causal>
        : ...
    ```
    After (fast mode, innermost loop body):
    ```mlir
    %dk1, %dv1, %dq1 = fa.attention_backward_step %qt, %kt, %vt, %dot,
        %lset, %dit dkv(%dk, %dv) dq(%dqt)
        masked(%q_start, %k_start, %nq, %nk) mask<causal> scale 0.125 : ...
    ```
  }];
  let options = [
    Option<"blockQ", "block-q", "int64_t", /*default=*/"64",
           "Query rows per block (Br)">,
    Option<"blockKV", "block-kv", "int64_t", /*default=*/"64",
           "Keys/values per block (Bc)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::scf::SCFDialect", "::mlir::tensor::TensorDialect",
    "::mlir::affine::AffineDialect", "::mlir::gpu::GPUDialect"
  ];
}

def FADecomposeAttentionBackwardStep
    : Pass<"fa-decompose-attention-backward-step"> {
  let summary = "Expand the backward tile op into linalg on tiles";
  let description = [{
    Rewrites `fa.attention_backward_step` into linalg ops on `Br x Bc` tiles
    (the largest intermediate): `S = Q K^T`, `P = exp2(S * scale * log2(e) -
    LSE * log2(e))` (softcap applied before, `P = 0` where the step's mask
    hides the key or the row's LSE is `+inf`) in one elementwise generic,
    `dP = dO V^T`, `dS = P * (dP - delta)` in a second one, and the
    accumulator GEMMs `dK += dS^T Q`, `dV += P^T dO`, `dQ += dS K`. Every
    GEMM is a `linalg.matmul` whose transposes are indexing maps, with f32
    accumulators; P and dS are rounded to the input element type first.

    Before:
    ```mlir
    %dk1, %dv1 = fa.attention_backward_step %q, %k, %v, %do, %lse, %delta
        dkv(%dk, %dv) scale 0.125
        : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>,
          tensor<64x64xf16>, tensor<64xf32>
        -> tensor<64x64xf32>, tensor<64x64xf32>
    ```
    After: `linalg.matmul` for S and dP, `linalg.generic` for P (with
    `math.exp2` and the `arith.select` that zeroes hidden scores) and for dS,
    then `linalg.matmul` into `%dk` and `%dv`.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::tensor::TensorDialect"
  ];
}

#endif // FA_DIALECT_FA_TRANSFORMS_PASSES_TD
