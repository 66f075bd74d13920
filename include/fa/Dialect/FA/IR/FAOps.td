//===- FAOps.td - FlashMLIR attention ops ------------------*- tablegen -*-===//

#ifndef FA_DIALECT_FA_IR_FAOPS_TD
#define FA_DIALECT_FA_IR_FAOPS_TD

include "fa/Dialect/FA/IR/FAAttrs.td"
include "fa/Dialect/FA/IR/FADialect.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"

def FA_ElementType : AnyTypeOf<[F16, BF16, F32], "f16, bf16 or f32">;
def FA_Rank4Tensor : TensorRankOf<[F16, BF16, F32], [4]> {
  let summary = "4D tensor of f16, bf16 or f32 values";
}
def FA_LseTensor : TensorRankOf<[F32], [3]> {
  let summary = "3D tensor of f32 values";
}

// Attributes shared by the forward and the backward op.
// The score scalars (scale, softcap) of every op: each is either a constant
// attribute or an f32 operand (a value known at run time), never both.
defvar scoreScalarsDeclaration = [{
    /// The softmax scale as an f32 value: the operand, or a constant of the
    /// attribute (of 1/sqrt(D) for an attention op without either).
    ::mlir::Value buildScale(::mlir::OpBuilder &b, ::mlir::Location loc);
    /// The softcap as an f32 value (the operand or a constant of the
    /// attribute); null without softcap.
    ::mlir::Value buildSoftcap(::mlir::OpBuilder &b, ::mlir::Location loc);
    /// Whether scores are soft-capped (by a constant or a run-time value):
    /// what changes the code, unlike the value.
    bool hasSoftcap() { return getSoftcapAttr() || getDynamicSoftcap(); }
    /// The scalars as a tile-level op takes them.
    ::mlir::fa::ScoreScalars getScoreScalars();
    /// Whether the op's mask hides some key: it has one, and not one that
    /// sees everything (`#fa.mask<none>`).
    bool hasMaskRule() { return getMaskAttr() && !getMaskAttr().isFull(); }
}];

class FA_AttentionOpBase<string mnemonic, list<Trait> traits = []>
    : FA_Op<mnemonic, !listconcat(traits, [Pure, AttrSizedOperandSegments])> {
  code attentionClassDeclaration = scoreScalarsDeclaration # [{
    /// The constant softmax scale: the `scale` attribute, or 1/sqrt(D) when
    /// the op has neither the attribute nor a `scale` operand; null when the
    /// scale is an operand.
    ::mlir::FloatAttr getStaticScale();
    /// Head dimensions of q/k and of v.
    int64_t getHeadDim() { return getQuery().getType().getDimSize(3); }
    int64_t getValueHeadDim() { return getValue().getType().getDimSize(3); }
  }];
}

def FA_AttentionOp : FA_AttentionOpBase<"attention", [IsolatedFromAbove]> {
  let summary = "Exact multi-head scaled-dot-product attention";
  let description = [{
    Computes `out = softmax(scale * q k^T [+ score_mod] [+ softcap] [+ mask])
    v` for every batch and query head, and the natural-log log-sum-exp `lse`
    of each score row (what a recompute-based backward needs).

    Shapes: `q: [B, Hq, Nq, D]`, `k: [B, Hkv, Nk, D]`, `v: [B, Hkv, Nk, Dv]`,
    `out: [B, Hq, Nq, Dv]` with q's element type, `lse: [B, Hq, Nq]` in f32.
    B, H and N may be dynamic; D and Dv are static multiples of 8 in
    [8, 256]. `Hq` must be a positive multiple of `Hkv` (grouped-query /
    multi-query attention: query head `h` reads key/value head
    `h / (Hq / Hkv)`). Every static size of one dimension must agree across
    all operands and results (a dynamic size agrees with anything). Empty
    batches and sequences (size 0) are valid: with `Nk = 0` every row has no
    visible key.

    Optional attributes:
    - `scale`: softmax scale, > 0 (default `1/sqrt(D)`): a constant
      (`scale 0.125`) or an f32 value known at run time (`scale %s`; the
      caller guarantees it is positive and finite).
    - `mask`: which keys each query sees, an attribute implementing
      `MaskAttrInterface` (default: every key). `mask<causal>`: key j is
      visible from query i iff `j <= i + Nk - Nq` (bottom-right aligned when
      Nq != Nk); `mask<window left, right>`: a sliding window, each side a
      constant in [0, 2147483647] (the GPU kernels compute the mask in i32),
      `inf`, or `?`: a value known at run time, an i64 mask operand
      (`mask<window ?, ?>(%left, %right)`, one per `?`) where a negative
      value is unbounded (as FlashAttention's -1). See `#fa.mask`. The
      sizes do not change the code, only which sides are bounded.
    - `softcap`: scores become `softcap * tanh(s / softcap)` (after `scale`,
      before the mask and the softmax); a constant or an f32 value, as
      `scale`. Whether there is a softcap changes the code, its value does
      not.

    A constant operand folds into the attribute (canonicalization).

    Optional modifier regions (user-defined scores and masks, as
    FlexAttention's `score_mod` and `mask_mod`), each of one block ending in
    `fa.yield`:
    - `score_mod(%s: f32, %b: index, %h: index, %q_idx: index,
      %kv_idx: index, captures...)` yields the f32 score that replaces `%s`.
      `%s` is the scaled score `scale * q k^T` in natural units; the softcap
      (if any) applies to the modified score, then the mask. The built-in
      softcap is the modifier `softcap * tanh(s / softcap)`.
    - `mask_mod(%b: index, %h: index, %q_idx: index, %kv_idx: index,
      captures...)` yields an i1: key `kv_idx` is visible from query `q_idx`
      iff the `mask` attribute AND the `mask_mod` say so.

    `b` is the batch, `h` the query head, `q_idx` and `kv_idx` the 0-based
    positions in the query and key sequences (not aligned to any corner:
    a bottom-right causal mask with `Nq != Nk` is
    `kv_idx <= q_idx + (Nk - Nq)`). The op is isolated from above: what the
    regions read from outside comes in through `captures(%t, ...)`, ranked
    tensors that each region receives as its trailing block arguments (of the
    captures' types, in their order) and reads with `tensor.extract`. Region
    ops must be free of side effects (reads are allowed). Whole per element:

    ```
    s = scale * q k^T
    s = score_mod(s, b, h, i, j, captures...)    (if score_mod)
    s = softcap * tanh(s / softcap)              (if softcap)
    s = -inf unless mask(i, j) and mask_mod(b, h, i, j, captures...)
    ```

    A row with no visible key gives `out = 0` and `lse = +inf`.

    Optional `key_ranges(%r rows G)`: where the visible keys lie, computed
    at run time for a mask that no pass can analyze (a document mask over
    per-token ids; FlexAttention's BlockMask plays this part). `%r` is an
    i32 tensor [B, Hq, ceil(Nq / G), 2 or 4]: for batch b, query head h and
    the query rows [g G, (g + 1) G), every key that the mask and the
    mask_mod show lies in [r[b, h, g, 0], r[b, h, g, 1]) (empty when the
    first is not below the second), and with 4 columns the mask_mod shows
    every key of [r[b, h, g, 2], r[b, h, g, 3]) to every row of the group
    (the built-in mask still applies). It is a promise about the mask, not
    a mask: the tiled lowerings visit only the key blocks of the first
    range and run the blocks inside the second without the mask_mod, the
    reference ignores it; ranges that break the promise give unspecified
    results.

    Example:

    ```mlir
    %out, %lse = fa.attention %q, %k, %v mask<causal> scale 0.125
        : (tensor<2x8x?x64xbf16>, tensor<2x2x?x64xbf16>, tensor<2x2x?x64xbf16>)
        -> (tensor<2x8x?x64xbf16>, tensor<2x8x?xf32>)
    // The scale as a run-time value (a kernel argument on the GPU).
    %out, %lse = fa.attention %q, %k, %v mask<causal> scale %s
        : (tensor<2x8x?x64xbf16>, tensor<2x2x?x64xbf16>, tensor<2x2x?x64xbf16>,
           f32) -> (tensor<2x8x?x64xbf16>, tensor<2x8x?xf32>)
    // ALiBi: a bias of slope[h] * (kv_idx - q_idx), the slopes a capture;
    // and a document mask from per-token document ids.
    %out, %lse = fa.attention %q, %k, %v mask<causal> captures(%slopes, %doc)
        score_mod(%s: f32, %b: index, %h: index, %i: index, %j: index,
                  %sl: tensor<8xf32>, %d: tensor<128xi32>) {
          %slope = tensor.extract %sl[%h] : tensor<8xf32>
          %dist = arith.subi %j, %i : index
          %di = arith.index_cast %dist : index to i64
          %df = arith.sitofp %di : i64 to f32
          %bias = arith.mulf %slope, %df : f32
          %r = arith.addf %s, %bias : f32
          fa.yield %r : f32
        }
        mask_mod(%b: index, %h: index, %i: index, %j: index,
                 %sl: tensor<8xf32>, %d: tensor<128xi32>) {
          %di = tensor.extract %d[%i] : tensor<128xi32>
          %dj = tensor.extract %d[%j] : tensor<128xi32>
          %same = arith.cmpi eq, %di, %dj : i32
          fa.yield %same : i1
        }
        : (tensor<1x8x128x64xbf16>, tensor<1x8x128x64xbf16>,
           tensor<1x8x128x64xbf16>, tensor<8xf32>, tensor<128xi32>)
        -> (tensor<1x8x128x64xbf16>, tensor<1x8x128xf32>)
    ```

    The modifiers lower on the CPU: fa-lower-to-reference, and the tiled
    pipeline (fa-tile-attention / fa-tile-attention-backward carry them into
    each `fa.online_attention` / `fa.attention_backward_step`, whose
    decompositions inline them; no block is specialized or skipped for a
    modifier). fa-select-kernel-config (so every GPU pipeline), fa-split-kv,
    the GPU conversions and fa-compile refuse an op that has one.
  }];

  let arguments = (ins
    FA_Rank4Tensor:$query,
    FA_Rank4Tensor:$key,
    FA_Rank4Tensor:$value,
    Optional<F32>:$dynamic_softcap,
    Optional<F32>:$dynamic_scale,
    Variadic<I64>:$mask_operands,
    Optional<RankedTensorOf<[I32]>>:$key_ranges,
    Variadic<AnyRankedTensor>:$captures,
    OptionalAttr<F32Attr>:$scale,
    OptionalAttr<FA_MaskAttrInterface>:$mask,
    OptionalAttr<F32Attr>:$softcap,
    OptionalAttr<FA_KernelConfigAttr>:$kernel_config,
    OptionalAttr<I64Attr>:$key_range_rows
  );
  let results = (outs FA_Rank4Tensor:$out, FA_LseTensor:$lse);
  let regions = (region MaxSizedRegion<1>:$score_mod,
                        MaxSizedRegion<1>:$mask_mod);

  let assemblyFormat = [{
    $query `,` $key `,` $value
    custom<Mask>($mask_operands, $mask)
    custom<Softcap>($dynamic_softcap, $softcap)
    custom<Scale>($dynamic_scale, $scale)
    (`key_ranges` `(` $key_ranges^ `rows` $key_range_rows `)`)?
    custom<Modifiers>($captures, $score_mod, $mask_mod)
    attr-dict `:` functional-type(operands, results)
  }];

  let builders = [
    // Infers the result types from q and v. The modifier regions are left
    // empty (no modifier); a caller that gives `captures` fills them.
    // `keyRanges` (with `keyRangeRows`) is the optional key_ranges operand.
    OpBuilder<(ins "::mlir::Value":$query, "::mlir::Value":$key,
                   "::mlir::Value":$value,
                   CArg<"::mlir::FloatAttr", "{}">:$scale,
                   CArg<"::mlir::fa::MaskAttrInterface", "{}">:$mask,
                   CArg<"::mlir::FloatAttr", "{}">:$softcap,
                   CArg<"::mlir::Value", "{}">:$dynamicScale,
                   CArg<"::mlir::Value", "{}">:$dynamicSoftcap,
                   CArg<"::mlir::ValueRange", "{}">:$maskOperands,
                   CArg<"::mlir::ValueRange", "{}">:$captures,
                   CArg<"::mlir::Value", "{}">:$keyRanges,
                   CArg<"int64_t", "0">:$keyRangeRows)>
  ];

  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = attentionClassDeclaration # [{
    bool hasScoreMod() { return !getScoreMod().empty(); }
    bool hasMaskMod() { return !getMaskMod().empty(); }
    /// Whether the op has a score or mask modifier: what a lowering that
    /// does not implement them must refuse.
    bool hasModifiers() { return hasScoreMod() || hasMaskMod(); }
  }];
}

def FA_YieldOp : FA_Op<"yield", [Pure, Terminator,
    ParentOneOf<["AttentionOp", "AttentionBackwardOp", "OnlineAttentionOp",
                 "AttentionBackwardStepOp"]>]> {
  let summary = "Terminates a modifier region of an attention op";
  let description = [{
    Yields the result of a `score_mod` (the f32 score), `mask_mod` (the i1
    visibility) or `score_mod_grad` (the f32 derivative) region; the
    parent's verifier checks the type.

    ```mlir
    fa.yield %score : f32
    ```
  }];
  let arguments = (ins AnyType:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

def FA_AttentionBackwardOp
    : FA_AttentionOpBase<"attention_backward", [IsolatedFromAbove]> {
  let summary = "Gradients of `fa.attention` by recomputation";
  let description = [{
    Given the forward's inputs `q, k, v`, its results `out` and `lse`, and the
    incoming gradient `dout`, computes `dq, dk, dv`, of exactly the types of
    `q, k, v` (not merely agreeing ones: a size static in one and dynamic in
    the other is an error). The attributes and the shape rules of the other
    operands are those of `fa.attention` and must match
    the forward that produced `out` and `lse`. For grouped-query attention,
    `dk` and `dv` sum the contributions of all query heads of a group.

    `deterministic` asks for a fixed accumulation order of `dq` (results are
    bitwise reproducible run to run), at some cost in speed: a second pass
    for dQ, or, with the warp_specialized kernel configuration, dQ added
    in turn by the key blocks (FlashAttention-3's semaphores).

    The modifier regions and `captures` are those of the forward (the same
    signatures and meaning) and must match it. The backward also needs
    `d score_mod / d s`: the optional `score_mod_grad` region has the
    score_mod's signature and yields that derivative at the score `%s`
    (`fa-differentiate-score-mod` builds it from the score_mod by the chain
    rule). The captures are constants of the backward: no gradient flows to
    them.

    Optional run-time ranges, promises about the mask as on `fa.attention`
    (ranges that break them give unspecified results; the reference ignores
    them):
    - `query_ranges(%r rows G)`: an i32 tensor [B, Hkv, ceil(Nk / G), 2]:
      for batch b, key/value head j and the keys [g G, (g + 1) G), every
      query that the mask and the mask_mod let some query head of j's group
      see one of those keys lies in [r[b, j, g, 0], r[b, j, g, 1]) (empty
      when the first is not below the second). The lowerings visit only
      the query blocks of that range when they accumulate dK and dV of a
      key block.
    - `key_ranges(%r rows G)`: the forward's (fa.attention's) key ranges;
      the deterministic dQ pass visits only their key blocks.

    ```mlir
    %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %o, %l, %do
        query_ranges(%qr rows 128) key_ranges(%kr rows 128)
        captures(%doc : tensor<4096xi32>)
        mask_mod(%b: index, %h: index, %i: index, %j: index,
                 %d: tensor<4096xi32>) { ... }
        : (...) -> (...)
    ```

    Example:

    ```mlir
    %dq, %dk, %dv = fa.attention_backward %q, %k, %v, %out, %lse, %dout
        mask<causal>
        : (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
           tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
           tensor<1x4x128xf32>, tensor<1x4x128x64xf16>)
        -> (tensor<1x4x128x64xf16>, tensor<1x4x128x64xf16>,
            tensor<1x4x128x64xf16>)
    ```
  }];

  let arguments = (ins
    FA_Rank4Tensor:$query,
    FA_Rank4Tensor:$key,
    FA_Rank4Tensor:$value,
    FA_Rank4Tensor:$out,
    FA_LseTensor:$lse,
    FA_Rank4Tensor:$dout,
    Optional<F32>:$dynamic_softcap,
    Optional<F32>:$dynamic_scale,
    Variadic<I64>:$mask_operands,
    Optional<RankedTensorOf<[I32]>>:$query_ranges,
    Optional<RankedTensorOf<[I32]>>:$key_ranges,
    Variadic<AnyRankedTensor>:$captures,
    OptionalAttr<F32Attr>:$scale,
    OptionalAttr<FA_MaskAttrInterface>:$mask,
    OptionalAttr<F32Attr>:$softcap,
    UnitAttr:$deterministic,
    OptionalAttr<FA_KernelConfigAttr>:$kernel_config,
    OptionalAttr<I64Attr>:$query_range_rows,
    OptionalAttr<I64Attr>:$key_range_rows
  );
  let results = (outs FA_Rank4Tensor:$dq, FA_Rank4Tensor:$dk,
                      FA_Rank4Tensor:$dv);
  let regions = (region MaxSizedRegion<1>:$score_mod,
                        MaxSizedRegion<1>:$mask_mod,
                        MaxSizedRegion<1>:$score_mod_grad);

  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $out `,` $lse `,` $dout
    custom<Mask>($mask_operands, $mask)
    custom<Softcap>($dynamic_softcap, $softcap)
    custom<Scale>($dynamic_scale, $scale)
    (`deterministic` $deterministic^)?
    (`query_ranges` `(` $query_ranges^ `rows` $query_range_rows `)`)?
    (`key_ranges` `(` $key_ranges^ `rows` $key_range_rows `)`)?
    custom<BackwardModifiers>($captures, $score_mod, $mask_mod,
                              $score_mod_grad)
    attr-dict `:` functional-type(operands, results)
  }];

  let builders = [
    OpBuilder<(ins "::mlir::Value":$query, "::mlir::Value":$key,
                   "::mlir::Value":$value, "::mlir::Value":$out,
                   "::mlir::Value":$lse, "::mlir::Value":$dout,
                   CArg<"::mlir::FloatAttr", "{}">:$scale,
                   CArg<"::mlir::fa::MaskAttrInterface", "{}">:$mask,
                   CArg<"::mlir::FloatAttr", "{}">:$softcap,
                   CArg<"bool", "false">:$deterministic,
                   CArg<"::mlir::Value", "{}">:$dynamicScale,
                   CArg<"::mlir::Value", "{}">:$dynamicSoftcap,
                   CArg<"::mlir::ValueRange", "{}">:$maskOperands,
                   CArg<"::mlir::ValueRange", "{}">:$captures,
                   CArg<"::mlir::Value", "{}">:$queryRanges,
                   CArg<"int64_t", "0">:$queryRangeRows,
                   CArg<"::mlir::Value", "{}">:$keyRanges,
                   CArg<"int64_t", "0">:$keyRangeRows)>
  ];

  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = attentionClassDeclaration # [{
    bool hasScoreMod() { return !getScoreMod().empty(); }
    bool hasMaskMod() { return !getMaskMod().empty(); }
    bool hasScoreModGrad() { return !getScoreModGrad().empty(); }
    /// See fa.attention.
    bool hasModifiers() { return hasScoreMod() || hasMaskMod(); }
  }];
}

def FA_Rank3Tensor : TensorRankOf<[F16, BF16, F32], [3]> {
  let summary = "3D tensor of f16, bf16 or f32 values";
}
def FA_Rank2F32LseTensor : TensorRankOf<[F32], [2]> {
  let summary = "2D tensor of f32 values";
}
def FA_SeqlensTensor : TensorRankOf<[I32], [1]> {
  let summary = "1D tensor of i32 values";
}
def FA_PageTableTensor : TensorRankOf<[I32], [2]> {
  let summary = "2D tensor of i32 values";
}

def FA_AttentionVarlenOp : FA_AttentionOpBase<"attention_varlen"> {
  let summary = "Attention over a batch of variable-length sequences, packed";
  let description = [{
    `fa.attention` for a batch whose sequences have different lengths,
    stored back to back without padding (FlashAttention's
    `flash_attn_varlen_func`): `q: [Hq, Tq, D]`, `k: [Hkv, Tk, D]`,
    `v: [Hkv, Tk, Dv]`, `out: [Hq, Tq, Dv]` with q's element type and
    `lse: [Hq, Tq]` in f32, where `Tq` and `Tk` are the total token counts.
    Heads come before tokens, as in `fa.attention` (a `[T, H, D]` tensor is
    a strided view of this order; the GPU kernels take any strides).

    Sequence `b` of the `B` sequences holds the queries
    `[cu_seqlens_q[b], cu_seqlens_q[b + 1])` and the keys/values
    `[cu_seqlens_k[b], cu_seqlens_k[b + 1])`; both offset tensors are i32
    `[B + 1]`. Each sequence is attention of its own queries over its own
    keys with `fa.attention`'s semantics, masks aligned to the bottom-right
    corner of that sequence's score matrix (FlashAttention's varlen
    convention). `max_seqlen_q` bounds the query count of every sequence
    (it sizes the loop nests and the GPU grid).

    The caller guarantees, as FlashAttention's callers do: the offsets are
    non-decreasing, start at 0 or more and end at most at `Tq` (`Tk`); every
    sequence has at most `max_seqlen_q` queries. Sequences may be empty.
    Rows of `out` and `lse` that belong to no sequence are unspecified.
    The other attributes and operands (`scale`, `mask`, `softcap`) are
    those of `fa.attention`.

    ```mlir
    %out, %lse = fa.attention_varlen %q, %k, %v
        seqlens(%cu_q, %cu_k) max_seqlen_q(%max_q) mask<causal>
        : (tensor<8x?x128xbf16>, tensor<2x?x128xbf16>, tensor<2x?x128xbf16>,
           tensor<?xi32>, tensor<?xi32>, index)
        -> (tensor<8x?x128xbf16>, tensor<8x?xf32>)
    ```
  }];

  let arguments = (ins
    FA_Rank3Tensor:$query,
    FA_Rank3Tensor:$key,
    FA_Rank3Tensor:$value,
    FA_SeqlensTensor:$cu_seqlens_q,
    FA_SeqlensTensor:$cu_seqlens_k,
    Index:$max_seqlen_q,
    Optional<F32>:$dynamic_softcap,
    Optional<F32>:$dynamic_scale,
    Variadic<I64>:$mask_operands,
    OptionalAttr<F32Attr>:$scale,
    OptionalAttr<FA_MaskAttrInterface>:$mask,
    OptionalAttr<F32Attr>:$softcap,
    OptionalAttr<FA_KernelConfigAttr>:$kernel_config
  );
  let results = (outs FA_Rank3Tensor:$out, FA_Rank2F32LseTensor:$lse);

  let assemblyFormat = [{
    $query `,` $key `,` $value
    `seqlens` `(` $cu_seqlens_q `,` $cu_seqlens_k `)`
    `max_seqlen_q` `(` $max_seqlen_q `)`
    custom<Mask>($mask_operands, $mask)
    custom<Softcap>($dynamic_softcap, $softcap)
    custom<Scale>($dynamic_scale, $scale)
    attr-dict `:` functional-type(operands, results)
  }];

  let hasVerifier = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = scoreScalarsDeclaration # [{
    /// See fa.attention.
    ::mlir::FloatAttr getStaticScale();
    int64_t getHeadDim() { return getQuery().getType().getDimSize(2); }
    int64_t getValueHeadDim() { return getValue().getType().getDimSize(2); }
  }];
}

def FA_AttentionVarlenBackwardOp
    : FA_AttentionOpBase<"attention_varlen_backward"> {
  let summary = "Gradients of `fa.attention_varlen` by recomputation";
  let description = [{
    `fa.attention_backward` for packed sequences: given the inputs of
    `fa.attention_varlen` (`q, k, v`, the offsets, `max_seqlen_q`), its
    results `out: [Hq, Tq, Dv]` and `lse: [Hq, Tq]`, and the gradient
    `dout` of `out`, computes `dq, dk, dv` of exactly the types of
    `q, k, v`. Each sequence's gradients are those of its own attention
    (for GQA, `dk` and `dv` sum over the query heads of a group); rows that
    belong to no sequence get zero gradients. The attributes, and the
    caller's guarantees about the offsets, are those of the forward;
    `max_seqlen_k` bounds every sequence's key count as `max_seqlen_q`
    bounds its query count (the key-block loop nest and the GPU grid of the
    dK/dV kernel are sized by it).

    ```mlir
    %dq, %dk, %dv = fa.attention_varlen_backward %q, %k, %v, %out, %lse,
        %dout seqlens(%cu_q, %cu_k) max_seqlen_q(%max_q)
        max_seqlen_k(%max_k) mask<causal>
        : (tensor<8x?x128xbf16>, tensor<2x?x128xbf16>, tensor<2x?x128xbf16>,
           tensor<8x?x128xbf16>, tensor<8x?xf32>, tensor<8x?x128xbf16>,
           tensor<?xi32>, tensor<?xi32>, index, index)
        -> (tensor<8x?x128xbf16>, tensor<2x?x128xbf16>, tensor<2x?x128xbf16>)
    ```
  }];

  let arguments = (ins
    FA_Rank3Tensor:$query,
    FA_Rank3Tensor:$key,
    FA_Rank3Tensor:$value,
    FA_Rank3Tensor:$out,
    FA_Rank2F32LseTensor:$lse,
    FA_Rank3Tensor:$dout,
    FA_SeqlensTensor:$cu_seqlens_q,
    FA_SeqlensTensor:$cu_seqlens_k,
    Index:$max_seqlen_q,
    Index:$max_seqlen_k,
    Optional<F32>:$dynamic_softcap,
    Optional<F32>:$dynamic_scale,
    Variadic<I64>:$mask_operands,
    OptionalAttr<F32Attr>:$scale,
    OptionalAttr<FA_MaskAttrInterface>:$mask,
    OptionalAttr<F32Attr>:$softcap,
    UnitAttr:$deterministic,
    OptionalAttr<FA_KernelConfigAttr>:$kernel_config
  );
  let results = (outs FA_Rank3Tensor:$dq, FA_Rank3Tensor:$dk,
                      FA_Rank3Tensor:$dv);

  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $out `,` $lse `,` $dout
    `seqlens` `(` $cu_seqlens_q `,` $cu_seqlens_k `)`
    `max_seqlen_q` `(` $max_seqlen_q `)`
    `max_seqlen_k` `(` $max_seqlen_k `)`
    custom<Mask>($mask_operands, $mask)
    custom<Softcap>($dynamic_softcap, $softcap)
    custom<Scale>($dynamic_scale, $scale)
    (`deterministic` $deterministic^)?
    attr-dict `:` functional-type(operands, results)
  }];

  let hasVerifier = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = scoreScalarsDeclaration # [{
    /// See fa.attention.
    ::mlir::FloatAttr getStaticScale();
    int64_t getHeadDim() { return getQuery().getType().getDimSize(2); }
    int64_t getValueHeadDim() { return getValue().getType().getDimSize(2); }
  }];
}

def FA_AttentionPagedOp : FA_AttentionOpBase<"attention_paged"> {
  let summary = "Attention over a paged key/value cache";
  let description = [{
    `fa.attention` whose keys and values live in a paged cache, as serving
    engines keep them (vLLM's PagedAttention, FlashAttention's
    `flash_attn_with_kvcache` with a `block_table`): `q: [B, Hq, Nq, D]`,
    the page pools `k_pages: [P, Hkv, S, D]` and `v_pages: [P, Hkv, S, Dv]`
    (P pages of S keys; heads before keys as everywhere in the dialect, a
    `[P, S, Hkv, D]` pool is a strided view of it), the i32 page table
    `[B, maxPages]` and the i32 key counts `cache_seqlens: [B]`; `out` and
    `lse` as for `fa.attention`.

    Batch `b` attends over its `cache_seqlens[b]` keys; key `j` of it is row
    `j mod S` of page `page_table[b, j / S]`. The mask is aligned to the
    bottom-right corner of each batch's `[Nq, cache_seqlens[b]]` score
    matrix (the queries are the newest tokens). The page size S must be
    static (the kernels are specialized for it).

    The caller guarantees: `0 <= cache_seqlens[b] <= maxPages * S`, and
    the first `ceil(cache_seqlens[b] / S)` entries of row `b` of the page
    table are pages in `[0, P)`; the other entries are never read.

    ```mlir
    %out, %lse = fa.attention_paged %q, %kp, %vp
        pages(%page_table) seqlens(%cache_seqlens) mask<causal>
        : (tensor<?x32x1x128xbf16>, tensor<?x8x256x128xbf16>,
           tensor<?x8x256x128xbf16>, tensor<?x?xi32>, tensor<?xi32>)
        -> (tensor<?x32x1x128xbf16>, tensor<?x32x1xf32>)
    ```
  }];

  let arguments = (ins
    FA_Rank4Tensor:$query,
    FA_Rank4Tensor:$key_pages,
    FA_Rank4Tensor:$value_pages,
    FA_PageTableTensor:$page_table,
    FA_SeqlensTensor:$cache_seqlens,
    Optional<F32>:$dynamic_softcap,
    Optional<F32>:$dynamic_scale,
    Variadic<I64>:$mask_operands,
    OptionalAttr<F32Attr>:$scale,
    OptionalAttr<FA_MaskAttrInterface>:$mask,
    OptionalAttr<F32Attr>:$softcap,
    OptionalAttr<FA_KernelConfigAttr>:$kernel_config
  );
  let results = (outs FA_Rank4Tensor:$out, FA_LseTensor:$lse);

  let assemblyFormat = [{
    $query `,` $key_pages `,` $value_pages
    `pages` `(` $page_table `)` `seqlens` `(` $cache_seqlens `)`
    custom<Mask>($mask_operands, $mask)
    custom<Softcap>($dynamic_softcap, $softcap)
    custom<Scale>($dynamic_scale, $scale)
    attr-dict `:` functional-type(operands, results)
  }];

  let hasVerifier = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = scoreScalarsDeclaration # [{
    /// See fa.attention.
    ::mlir::FloatAttr getStaticScale();
    int64_t getHeadDim() { return getQuery().getType().getDimSize(3); }
    int64_t getValueHeadDim() {
      return getValuePages().getType().getDimSize(3);
    }
    /// Keys per page (static).
    int64_t getPageSize() { return getKeyPages().getType().getDimSize(2); }
  }];
}

def FA_AttentionMergeOp : FA_Op<"attention_merge", [Pure,
    SameVariadicOperandSize]> {
  let summary = "Attention over disjoint key sets, combined from their LSEs";
  let description = [{
    Given the results `(out_i, lse_i)` of attention of the same queries over
    disjoint sets of keys (chunks of one sequence for split-KV decoding,
    other devices' shards for ring attention), returns the attention over
    their union:

    ```
    lse = log sum_i exp(lse_i)        out = sum_i exp(lse_i - lse) out_i
    ```

    A partial row with `lse_i = +inf` (it saw no key: FlashAttention's
    convention, as `fa.attention` returns it) contributes nothing; a row
    that no partial saw gives `out = 0`, `lse = +inf`. Partials are
    `[B, H, N, Dv]` and `[B, H, N]` (any float type; f32 keeps the sum
    exact); the result `out` may have another element type.

    ```mlir
    %out, %lse = fa.attention_merge out(%o0, %o1) lse(%l0, %l1)
        : (tensor<1x8x1x128xf32>, tensor<1x8x1x128xf32>),
          (tensor<1x8x1xf32>, tensor<1x8x1xf32>)
        -> tensor<1x8x1x128xbf16>, tensor<1x8x1xf32>
    ```
  }];
  let arguments = (ins Variadic<FA_Rank4Tensor>:$outs,
                       Variadic<FA_LseTensor>:$lses);
  let results = (outs FA_Rank4Tensor:$out, FA_LseTensor:$lse);
  let assemblyFormat = [{
    `out` `(` $outs `)` `lse` `(` $lses `)` attr-dict `:` `(` type($outs) `)`
    `,` `(` type($lses) `)` `->` type($out) `,` type($lse)
  }];
  let hasVerifier = 1;
}

def FA_Rank5F32Tensor : TensorRankOf<[F32], [5]> {
  let summary = "5D tensor of f32 values";
}
def FA_Rank4F32Tensor : TensorRankOf<[F32], [4]> {
  let summary = "4D tensor of f32 values";
}

def FA_AttentionMergeSplitsOp : FA_Op<"attention_merge_splits", [Pure]> {
  let summary = "Split-KV partials stacked along a split dimension, merged";
  let description = [{
    `fa.attention_merge` for partials stacked along dimension 2 (the split
    dimension, whose size may be known only at run time): `outs` is
    `[B, H, S, N, Dv]` and `lses` is `[B, H, S, N]`, both f32, split `s`
    holding attention over the `s`-th chunk of the keys. The result is the
    attention over all chunks,

    ```
    lse = log sum_s exp(lse_s)        out = sum_s exp(lse_s - lse) out_s
    ```

    with the same conventions: a partial row with `lse_s = +inf` (its chunk
    had no visible key) contributes nothing, and a row no split saw gives
    `out = 0`, `lse = +inf`. `fa-split-kv` produces it; its GPU lowering is
    `fa-convert-attention-merge-to-gpu`.

    ```mlir
    %out, %lse = fa.attention_merge_splits %outs, %lses
        : tensor<8x8x?x4x128xf32>, tensor<8x8x?x4xf32>
        -> tensor<8x8x4x128xbf16>, tensor<8x8x4xf32>
    ```
  }];
  let arguments = (ins FA_Rank5F32Tensor:$outs, FA_Rank4F32Tensor:$lses);
  let results = (outs FA_Rank4Tensor:$out, FA_LseTensor:$lse);
  let assemblyFormat = [{
    $outs `,` $lses attr-dict `:` type($outs) `,` type($lses) `->` type($out)
    `,` type($lse)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Tile-level ops of the online-softmax form
//===----------------------------------------------------------------------===//

def FA_Rank1F32Tensor : TensorRankOf<[F32], [1]> {
  let summary = "1D tensor of f32 values";
}
def FA_Rank2Tensor : TensorRankOf<[F16, BF16, F32], [2]> {
  let summary = "2D tensor of f16, bf16 or f32 values";
}
def FA_Rank2F32Tensor : TensorRankOf<[F32], [2]> {
  let summary = "2D tensor of f32 values";
}

def FA_OnlineAttentionOp : FA_Op<"online_attention", [Pure, IsolatedFromAbove,
    AttrSizedOperandSegments, AllTypesMatch<["acc", "new_acc"]>,
    AllTypesMatch<["max", "sum", "new_max", "new_sum"]>]> {
  let summary = "One streaming step of attention over a block of keys";
  let description = [{
    The tile-level form that `fa-tile-attention` produces inside its loop over
    key/value blocks: folds one block of `Bc` keys/values into the running
    state of `Br` query rows, as in FlashAttention's online softmax.

    Operands: `q: [Br, D]`, `k: [Bc, D]`, `v: [Bc, Dv]` (the input element
    type), and the running state, all f32: the unnormalized accumulator
    `acc: [Br, Dv]`, the running row max `max: [Br]` and the running row sum
    `sum: [Br]` (relative to `max`). Results are the updated state:

    ```
    s     = scale * q k^T                         [Br, Bc]
    s     = softcap * tanh(s / softcap)           (if softcap)
    s     = s * log2(e)                           (if exp2)
    s     = -inf where key kStart+c is not visible from query qStart+r
            (only with `masked`; also hides keys >= nk)
    m'    = max(max, rowmax(s))
    alpha = exp(max - m')                         (exp2 if exp2)
    p     = exp(s - m')
    sum'  = alpha * sum + rowsum(p)
    acc'  = alpha * acc + p v
    ```

    A row whose every score so far is -inf keeps `max = -inf`, `sum = 0`,
    `acc = 0` (the exponentials are taken against 0 instead of -inf).
    With `exp2`, `max` is kept in log2 units and the exponentials are base 2:
    the scores are pre-multiplied by log2(e), after the softcap.

    Without `masked` the op applies no mask at all: it is the form of a block
    that is fully visible from every row of the query block.

    `scale` (required) and `softcap` are each a constant attribute or an f32
    operand (`scale %s`), as on `fa.attention`.

    Score and mask modifiers (`fa.attention`'s `score_mod` / `mask_mod`
    regions, cloned by `fa-tile-attention`) apply to the tile's scores with
    the global indices: `score_mod(s, b, h, q_start + r, k_start + c,
    captures...)` right after the scale (in natural units, before the
    softcap and the log2(e) factor), `mask_mod(b, h, q_start + r,
    k_start + c, captures...)` AND-ed with the visibility. They need the
    positions (`masked (...)`) and the batch and query head (`at(%b, %h)`).
    Optional `full_keys(%begin, %end)` (with a mask_mod): the mask_mod shows
    every key of [begin, end) to every row of the step's query block (from
    fa.attention's key_ranges); `fa-specialize-masks` runs a key block
    inside it without the mask_mod.

    ```mlir
    %a, %m, %s = fa.online_attention %q, %k, %v into %acc, %max, %sum
        masked(%q0, %k0, %nq, %nk) at(%b, %h) scale 0.125
        captures(%slopes : tensor<8xf32>)
        score_mod(%x: f32, %b: index, %h: index, %i: index, %j: index,
                  %sl: tensor<8xf32>) { ... fa.yield %y : f32 }
        : tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf16>
        -> tensor<64x64xf32>, tensor<64xf32>
    ```
  }];

  let arguments = (ins
    FA_Rank2Tensor:$query,
    FA_Rank2Tensor:$key,
    FA_Rank2Tensor:$value,
    FA_Rank2F32Tensor:$acc,
    FA_Rank1F32Tensor:$max,
    FA_Rank1F32Tensor:$sum,
    Optional<Index>:$q_start,
    Optional<Index>:$k_start,
    Optional<Index>:$q_len,
    Optional<Index>:$k_len,
    Optional<Index>:$batch_index,
    Optional<Index>:$head_index,
    Optional<Index>:$full_keys_begin,
    Optional<Index>:$full_keys_end,
    Optional<F32>:$dynamic_softcap,
    Optional<F32>:$dynamic_scale,
    Variadic<I64>:$mask_operands,
    Variadic<AnyRankedTensor>:$captures,
    OptionalAttr<F32Attr>:$scale,
    OptionalAttr<FA_MaskAttrInterface>:$mask,
    OptionalAttr<F32Attr>:$softcap,
    UnitAttr:$exp2
  );
  let results = (outs FA_Rank2F32Tensor:$new_acc, FA_Rank1F32Tensor:$new_max,
                      FA_Rank1F32Tensor:$new_sum);
  let regions = (region MaxSizedRegion<1>:$score_mod,
                        MaxSizedRegion<1>:$mask_mod);

  let assemblyFormat = [{
    $query `,` $key `,` $value `into` $acc `,` $max `,` $sum
    (`masked` `(` $q_start^ `,` $k_start `,` $q_len `,` $k_len `)`)?
    (`at` `(` $batch_index^ `,` $head_index `)`)?
    (`full_keys` `(` $full_keys_begin^ `,` $full_keys_end `)`)?
    custom<Mask>($mask_operands, $mask)
    custom<Softcap>($dynamic_softcap, $softcap)
    custom<Scale>($dynamic_scale, $scale)
    (`exp2` $exp2^)?
    custom<TypedModifiers>($captures, type($captures), $score_mod, $mask_mod)
    attr-dict `:` type($query) `,` type($key) `,` type($value) `->`
    type($new_acc) `,` type($new_max)
  }];

  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = scoreScalarsDeclaration # [{
    bool isMasked() { return getQStart() != nullptr; }
    bool hasScoreMod() { return !getScoreMod().empty(); }
    bool hasMaskMod() { return !getMaskMod().empty(); }
    bool hasModifiers() { return hasScoreMod() || hasMaskMod(); }
  }];
}

def FA_OnlineAttentionFinalizeOp : FA_Op<"online_attention_finalize", [Pure,
    AllTypesMatch<["max", "sum", "lse"]>]> {
  let summary = "Normalizes the online-softmax state once, after the loop";
  let description = [{
    Turns the state left by the last `fa.online_attention` of a query block
    into its results: `out = acc / sum` (in the element type of `out`) and
    `lse = max + log(sum)` in natural-log units (with `exp2`, `max` is in
    log2 units: `lse = ln(2) * (max + log2(sum))`). A row with `sum = 0`
    (no visible key) gives `out = 0`, `lse = +inf`.
  }];

  let arguments = (ins FA_Rank2F32Tensor:$acc, FA_Rank1F32Tensor:$max,
                       FA_Rank1F32Tensor:$sum, UnitAttr:$exp2);
  let results = (outs FA_Rank2Tensor:$out, FA_Rank1F32Tensor:$lse);

  let assemblyFormat = [{
    $acc `,` $max `,` $sum (`exp2` $exp2^)? attr-dict `:`
    type($acc) `,` type($max) `->` type($out)
  }];
  let hasVerifier = 1;
}

def FA_PagedKeyBlockOp : FA_Op<"paged_key_block", [Pure]> {
  let summary = "A block of a sequence's keys (or values) in a paged cache";
  let description = [{
    The `[R, D]` tile of rows `[start, start + R)` of sequence `batch`'s
    keys (or values), key/value head `head`, in a paged pool `pages: [P,
    Hkv, S, D]` with the i32 `page_table: [B, maxPages]` of
    `fa.attention_paged`: row `r` is `pages[page_table[batch, (start + r) /
    S], head, (start + r) mod S, :]` when `start + r < limit` (the
    sequence's key count), and zeros otherwise (the table is not read for
    such rows). R need not divide S nor S divide R: a block may span pages.

    fa-tile-attention builds it for the key blocks of a paged nest; the
    GPU conversion copies it row by row from the pages, and
    fa-decompose-paged-key-blocks lowers it to a `tensor.generate` for the
    CPU.

    ```mlir
    %k = fa.paged_key_block %pages[%b, %kvh, %k0] table(%page_table)
        limit(%len) : tensor<?x8x16x128xbf16>, tensor<?x?xi32>
        -> tensor<64x128xbf16>
    ```
  }];

  let arguments = (ins FA_Rank4Tensor:$pages, FA_PageTableTensor:$page_table,
                       Index:$batch, Index:$head, Index:$start,
                       Index:$limit);
  let results = (outs FA_Rank2Tensor:$result);

  let assemblyFormat = [{
    $pages `[` $batch `,` $head `,` $start `]` `table` `(` $page_table `)`
    `limit` `(` $limit `)` attr-dict `:` type($pages) `,` type($page_table)
    `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Keys per page (static).
    int64_t getPageSize() { return getPages().getType().getDimSize(2); }
    /// Rows of the block (static).
    int64_t getRows() { return getResult().getType().getDimSize(0); }
  }];
}

//===----------------------------------------------------------------------===//
// Tile-level op of the recomputation backward
//===----------------------------------------------------------------------===//

def FA_AttentionBackwardStepOp : FA_Op<"attention_backward_step", [Pure,
    IsolatedFromAbove, AttrSizedOperandSegments, AttrSizedResultSegments,
    AllTypesMatch<["lse", "delta"]>]> {
  let summary = "The gradients of one (query block, key block) tile pair";
  let description = [{
    The tile-level form that `fa-tile-attention-backward` produces in the
    innermost loop of its nests: recomputes the probabilities of `Br` query
    rows against `Bc` keys from the saved log-sum-exp (FlashAttention-2's
    backward: no max or sum is redone) and adds the tile pair's contribution
    to the f32 gradient accumulators it is given.

    Operands: `q: [Br, D]`, `k: [Bc, D]`, `v: [Bc, Dv]`, `dout: [Br, Dv]`
    (the input element type), the forward's natural-log `lse: [Br]` and
    `delta = rowsum(dout * out): [Br]` (both f32), and the accumulators, all
    f32: `dkv(dk_acc: [Bc, D], dv_acc: [Bc, Dv])` and/or `dq(dq_acc: [Br,
    D])`. Each result is the updated accumulator, present exactly when its
    accumulator is:

    ```
    s      = scale * q k^T                        [Br, Bc], f32
    s      = softcap * tanh(s / softcap)          (if softcap)
    p      = exp(s - lse)                         computed as exp2, log2(e)
                                                  folded into the factors
    p      = 0 where key k_start+c is not visible from query q_start+r
             (only with `masked`; also hides keys >= k_len),
             and on rows with lse = +inf
    dp     = dout v^T                             [Br, Bc], f32
    ds     = p * (dp - delta)                     [* (1 - tanh^2) if softcap]
    new_dk = dk_acc + ds^T q                      not multiplied by scale
    new_dv = dv_acc + p^T dout
    new_dq = dq_acc + ds k                        not multiplied by scale
    ```

    `p` and `ds` are rounded to the input element type before the GEMMs that
    consume them (as tensor cores do); every product accumulates in f32. The
    softmax scale is left out of `new_dk` and `new_dq`: the caller multiplies
    the finished dK and dQ by `scale` once.

    With `masked`, the four index operands place the tile in the sequences
    (`q_start`, `k_start`) and give their lengths (`q_len`, `k_len`): key
    `j = k_start + c` is visible from query `i = q_start + r` by the rule of
    `fa.attention` (`off = k_len - q_len`, the `mask`) and only when
    `j < k_len`. Without `masked` the op applies no mask at all: the tile pair
    is fully visible. Padded query rows need no mask: an `lse` of `+inf`
    gives them `p = 0`, hence no contribution.

    Modifiers (`fa.attention_backward`'s regions, cloned by
    `fa-tile-attention-backward`): with the tile's batch and query head
    `at(%b, %h)` and its positions, `s = score_mod(scale * q k^T, b, h, i,
    j, captures...)` before the softcap, `ds` multiplied by
    `score_mod_grad(scale * q k^T, ...)` (the derivative, which
    `fa-differentiate-score-mod` builds), and `mask_mod(b, h, i, j, ...)`
    AND-ed with the visibility.

    Example (the fast mode of `fa-tile-attention-backward`: all three
    gradients of a diagonal tile):

    ```mlir
    %dk, %dv, %dq = fa.attention_backward_step %q, %k, %v, %do, %lse, %delta
        dkv(%dk0, %dv0) dq(%dq0) masked(%q_start, %k_start, %nq, %nk)
        mask<causal> scale 0.125
        : tensor<64x128xbf16>, tensor<64x128xbf16>, tensor<64x128xbf16>,
          tensor<64x128xbf16>, tensor<64xf32>
        -> tensor<64x128xf32>, tensor<64x128xf32>, tensor<64x128xf32>
    ```
  }];

  let arguments = (ins
    FA_Rank2Tensor:$query,
    FA_Rank2Tensor:$key,
    FA_Rank2Tensor:$value,
    FA_Rank2Tensor:$dout,
    FA_Rank1F32Tensor:$lse,
    FA_Rank1F32Tensor:$delta,
    Optional<FA_Rank2F32Tensor>:$dk_acc,
    Optional<FA_Rank2F32Tensor>:$dv_acc,
    Optional<FA_Rank2F32Tensor>:$dq_acc,
    Optional<Index>:$q_start,
    Optional<Index>:$k_start,
    Optional<Index>:$q_len,
    Optional<Index>:$k_len,
    Optional<Index>:$batch_index,
    Optional<Index>:$head_index,
    Optional<F32>:$dynamic_softcap,
    Optional<F32>:$dynamic_scale,
    Variadic<I64>:$mask_operands,
    Variadic<AnyRankedTensor>:$captures,
    OptionalAttr<F32Attr>:$scale,
    OptionalAttr<FA_MaskAttrInterface>:$mask,
    OptionalAttr<F32Attr>:$softcap
  );
  let results = (outs Optional<FA_Rank2F32Tensor>:$new_dk,
                      Optional<FA_Rank2F32Tensor>:$new_dv,
                      Optional<FA_Rank2F32Tensor>:$new_dq);
  let regions = (region MaxSizedRegion<1>:$score_mod,
                        MaxSizedRegion<1>:$mask_mod,
                        MaxSizedRegion<1>:$score_mod_grad);

  // The result types are those of the accumulators, listed once after `->`
  // in the order dk, dv, dq of the accumulators present.
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $dout `,` $lse `,` $delta
    (`dkv` `(` $dk_acc^ `,` $dv_acc `)`)?
    (`dq` `(` $dq_acc^ `)`)?
    (`masked` `(` $q_start^ `,` $k_start `,` $q_len `,` $k_len `)`)?
    (`at` `(` $batch_index^ `,` $head_index `)`)?
    custom<Mask>($mask_operands, $mask)
    custom<Softcap>($dynamic_softcap, $softcap)
    custom<Scale>($dynamic_scale, $scale)
    custom<TypedBackwardModifiers>($captures, type($captures), $score_mod,
                                   $mask_mod, $score_mod_grad)
    attr-dict `:` type($query) `,` type($key) `,` type($value) `,`
    type($dout) `,` type($lse)
    custom<GradientTypes>(ref($dk_acc), ref($dv_acc), ref($dq_acc),
                          type($dk_acc), type($dv_acc), type($dq_acc),
                          type($new_dk), type($new_dv), type($new_dq))
  }];

  let builders = [
    // Infers the result types from the accumulators (null when absent).
    // `tilePosition` is empty, or q_start, k_start, q_len and k_len;
    // `scalars` gives the scale and softcap, as attributes or values;
    // `maskOperands` are the run-time values of the mask.
    OpBuilder<(ins "::mlir::Value":$query, "::mlir::Value":$key,
                   "::mlir::Value":$value, "::mlir::Value":$dout,
                   "::mlir::Value":$lse, "::mlir::Value":$delta,
                   "::mlir::Value":$dkAcc, "::mlir::Value":$dvAcc,
                   "::mlir::Value":$dqAcc, "::mlir::ValueRange":$tilePosition,
                   "const ::mlir::fa::ScoreScalars &":$scalars,
                   CArg<"::mlir::fa::MaskAttrInterface", "{}">:$mask,
                   CArg<"::mlir::ValueRange", "{}">:$maskOperands,
                   CArg<"::mlir::Value", "{}">:$batchIndex,
                   CArg<"::mlir::Value", "{}">:$headIndex,
                   CArg<"::mlir::ValueRange", "{}">:$captures)>
  ];

  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = scoreScalarsDeclaration # [{
    bool isMasked() { return getQStart() != nullptr; }
    bool hasScoreMod() { return !getScoreMod().empty(); }
    bool hasMaskMod() { return !getMaskMod().empty(); }
    bool hasModifiers() { return hasScoreMod() || hasMaskMod(); }
  }];
}

#endif // FA_DIALECT_FA_IR_FAOPS_TD
