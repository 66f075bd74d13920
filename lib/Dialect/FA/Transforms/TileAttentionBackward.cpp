//===- TileAttentionBackward.cpp - FlashAttention-2 backward tiling -------===//
//
// Rewrites `fa.attention_backward` into the FlashAttention-2 backward on
// tensors. P is never stored: it is recomputed per tile from the saved LSE,
// so no max/sum reduction is redone and nothing of size N x N is built.
//
//   Di = rowsum(dO * O)                                  once, [B, Hq, Nq]
//   for each key block (Bc keys of one kv head):
//     for each query head h of the group, each query block that sees it:
//       fa.attention_backward_step: one (query block, key block) pair
//         S  = Q K^T                                     (f32)
//         P  = exp2(S * scale * log2e - LSE * log2e)     (0 where masked)
//         dV += P^T dO          dP = dO V^T
//         dS = P * (dP - Di)    [* (1 - tanh^2) with softcap]
//         dK += dS^T Q          dQ += dS K
//   dK *= scale, dQ *= scale; cast to the element type.  (epilogues)
//
// The per-tile math is the step op's (fa-decompose-attention-backward-step
// expands it into linalg; a GPU lowering maps it to MMA fragments). The step
// is `masked` only when the op has a mask hiding keys or the keys may have
// a tail. The softmax scale is applied once to the f32 dK/dQ accumulators
// instead of to every tile product: the same sum, fewer multiplies.
//
// dQ sums over key blocks, which a parallel loop on tensors cannot express
// (its iterations may only write disjoint slices). Two structures:
//
// * fast (default): `scf.forall` over (batch, kv head) holds a sequential
//   `scf.for` over key blocks that carries the f32 dQ of the whole group
//   ([G, Nq padded to Br, D]) and the group's dK/dV slabs. The iterations
//   are independent except for the additive dQ update, which the loop marks
//   with `fa.dq_accumulation`: a GPU lowering runs them as separate thread
//   blocks and turns that update into f32 atomics, as FlashAttention-2 does.
//   One tile pass computes dK, dV and dQ.
// * deterministic: `scf.forall` over (batch, kv head, key block) computes
//   dK/dV only, and a second `scf.forall` over (batch, query head, query
//   block) computes dQ, recomputing P and dS over the visible key blocks in
//   ascending order. Every sum has a fixed order: bitwise reproducible.
//   With a warp_specialized kernel configuration (band masks, no modifiers
//   or run-time ranges) the fast structure instead, its loop marked
//   `fa.dq_accumulation = "ordered"`: the kernel adds dQ in a fixed order
//   (each query block's key blocks in turn), and the CPU loop is sequential.
//
// Each forall carries a #gpu.block mapping, the launch grid of the GPU
// conversion: batch on z, heads on y, the deterministic foralls' key or
// query blocks on x (the fast mode's key-block loop takes x).
//
// Tiles are static ([Br, D], [Bc, D], [Br, Bc]); when a sequence length is
// dynamic or not a multiple of the block, tails are read clipped and padded
// (LSE rows with +inf, so padded query rows get P = 0; keys >= Nk are hidden
// by the step's mask), and written back with dynamic-size slices.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Transforms/Passes.h"

#include "BuilderUtils.h"
#include "MaskModBlocks.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Tensor/Utils/Utils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>

namespace mlir::fa {
#define GEN_PASS_DEF_FATILEATTENTIONBACKWARD
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::detail;

/// Block sizes must map onto MMA fragments (multiples of 16 rows) and fit in
/// shared memory next to the other tiles.
constexpr int64_t kBlockMultiple = 16;
constexpr int64_t kMaxBlock = 256;

namespace {
/// What every piece of the rewrite shares: the op's semantics, the static
/// tile sizes, and index values defined once in front of the loop nests.
struct BackwardPlan {
  Location loc;
  Type elemType;
  Type f32Type;
  int64_t blockQ;
  int64_t blockKV;
  int64_t headDim;
  int64_t valueHeadDim;
  /// The softmax scale as an f32 value (for the epilogues) and the score
  /// scalars as the steps take them.
  Value scale;
  ScoreScalars scalars;
  /// The op's mask (null when it hides no key), its operands, and its
  /// parameters (built once, before the nests).
  MaskAttrInterface mask;
  ValueRange maskOperands;
  SmallVector<Value> maskParams;

  Value query, key, value, dout, lse, delta;
  /// Packed (varlen) form: [H, T, X] tensors, and, inside the forall over
  /// the sequences, the first query and key row of the sequence (seqQ and
  /// seqK are then its lengths).
  bool packed = false;
  Value qBase, kBase;

  Value batch, numQHeads, numKVHeads, groupSize, seqQ, seqK;
  Value numQBlocks, numKBlocks;
  /// The op whose score_mod / mask_mod (with score_mod_grad) and captures
  /// every step carries; null without modifiers. (Mutable: op handles have a
  /// non-const API.)
  mutable AttentionBackwardOp modifiers;
  /// Whether the last query (key) block may be partial. Only then are tiles
  /// clipped and padded, and keys hidden by the step's mask.
  bool queryTail;
  bool keyTail;
  /// The op's kernel configuration (or null), put on every loop nest made.
  KernelConfigAttr config;
  /// The op's run-time ranges (null: none) and their group sizes: the
  /// queries that see each key group (bounds the query blocks of a key
  /// block's dK / dV) and the forward's key ranges (bound the deterministic
  /// dQ's key blocks).
  Value queryRanges, keyRanges;
  int64_t queryRangeRows = 0, keyRangeRows = 0;
};
} // namespace

//===----------------------------------------------------------------------===//
// Small builders
//===----------------------------------------------------------------------===//

static Value zeroTile(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                      Type elemType) {
  return zeroTensor(b, loc, getAsIndexOpFoldResult(b.getContext(), shape),
                    elemType);
}

/// min(block, seqLen - start): the rows of a block that exist.
static Value clippedLength(OpBuilder &b, Location loc, Value start,
                           int64_t block, Value seqLen) {
  Value rest = arith::SubIOp::create(b, loc, seqLen, start);
  return arith::MinSIOp::create(b, loc, indexConst(b, loc, block), rest);
}

/// Reads rows [start, start + rows) of one head of `src` ([B, H, N, X] or
/// [B, H, N]; packed, when `batch` is null: [H, T, X] or [H, T]) as a
/// static [rows, X] (or [rows]) tile. With `len`, only `len` rows exist: the
/// read is clipped there and padded with `padValue`.
static Value extractRowTile(OpBuilder &b, Location loc, Value src, Value batch,
                            Value head, Value start, int64_t rows, Value len,
                            TypedAttr padValue) {
  auto srcType = cast<RankedTensorType>(src.getType());
  OpFoldResult one = b.getIndexAttr(1);
  SmallVector<OpFoldResult> offsets = {head, start};
  SmallVector<OpFoldResult> sizes = {
      one, len ? OpFoldResult(len) : OpFoldResult(b.getIndexAttr(rows))};
  if (batch) {
    offsets.insert(offsets.begin(), batch);
    sizes.insert(sizes.begin(), one);
  }
  SmallVector<int64_t> shape = {len ? ShapedType::kDynamic : rows};
  if (srcType.getRank() == int64_t(offsets.size()) + 1) {
    int64_t width = srcType.getDimSize(srcType.getRank() - 1);
    offsets.push_back(b.getIndexAttr(0));
    sizes.push_back(b.getIndexAttr(width));
    shape.push_back(width);
  }
  SmallVector<OpFoldResult> strides(offsets.size(), one);
  Type elemType = srcType.getElementType();
  Value tile = tensor::ExtractSliceOp::create(
      b, loc, RankedTensorType::get(shape, elemType), src, offsets, sizes,
      strides);
  if (!len)
    return tile;
  shape[0] = rows;
  Value pad = arith::ConstantOp::create(b, loc, padValue);
  return tensor::createPadHighOp(RankedTensorType::get(shape, elemType), tile,
                                 pad, /*nofold=*/false, loc, b);
}

/// Keeps the first `len` rows of `tile` (all rows when `len` is null).
static Value clipRows(OpBuilder &b, Location loc, Value tile, int64_t rowDim,
                      Value len) {
  auto type = cast<RankedTensorType>(tile.getType());
  if (!len || getConstantIntValue(len) == type.getDimSize(rowDim))
    return tile;
  SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, tile);
  sizes[rowDim] = getAsOpFoldResult(len);
  SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
  return tensor::ExtractSliceOp::create(b, loc, tile, offsets, sizes, strides);
}

//===----------------------------------------------------------------------===//
// Preprocessing and epilogue
//===----------------------------------------------------------------------===//

/// Di = rowsum(dO * O) in f32, [B, Hq, Nq] ([Hq, Tq] packed): the softmax
/// Jacobian's row term, the one reduction of the backward besides the
/// GEMMs, done once up front.
static Value buildDelta(OpBuilder &b, Location loc, Value out, Value dout) {
  MLIRContext *ctx = b.getContext();
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, out);
  sizes.pop_back();
  Value init = zeroTensor(b, loc, sizes, b.getF32Type());
  unsigned rank = cast<RankedTensorType>(out.getType()).getRank();
  AffineMap full = AffineMap::getMultiDimIdentityMap(rank, ctx);
  AffineMap rows = full.getMajorSubMap(rank - 1);
  SmallVector<utils::IteratorType> iterators(rank - 1,
                                             utils::IteratorType::parallel);
  iterators.push_back(utils::IteratorType::reduction);
  return linalg::GenericOp::create(
             b, loc, TypeRange{init.getType()}, ValueRange{dout, out},
             ValueRange{init}, ArrayRef<AffineMap>{full, full, rows}, iterators,
             [](OpBuilder &nb, Location nl, ValueRange args) {
               Value prod =
                   arith::MulFOp::create(nb, nl, extendToF32(nb, nl, args[0]),
                                         extendToF32(nb, nl, args[1]));
               Value sum = arith::AddFOp::create(nb, nl, args[2], prod);
               linalg::YieldOp::create(nb, nl, sum);
             })
      .getResult(0);
}

/// acc * factor (an f32 value; none: 1), cast to the element type: the
/// single scaling and rounding of a gradient, after its last accumulation.
static Value buildEpilogue(OpBuilder &b, Location loc, Value acc, Value factor,
                           Type elemType) {
  if (!factor && elemType.isF32())
    return acc;
  auto accType = cast<RankedTensorType>(acc.getType());
  int64_t rank = accType.getRank();
  Value init = tensor::EmptyOp::create(
      b, loc, tensor::getMixedSizes(b, loc, acc), elemType);
  AffineMap id = AffineMap::getMultiDimIdentityMap(rank, b.getContext());
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, TypeRange{init.getType()}, ValueRange{acc},
             ValueRange{init}, ArrayRef<AffineMap>{id, id}, iterators,
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               Value v = args[0];
               if (factor)
                 v = arith::MulFOp::create(nb, nl, v, factor);
               linalg::YieldOp::create(nb, nl, truncateTo(nb, nl, elemType, v));
             })
      .getResult(0);
}

//===----------------------------------------------------------------------===//
// Tiles of one (query block, key block) pair
//===----------------------------------------------------------------------===//

namespace {
/// The tiles of Br query rows of one query head.
struct QueryBlock {
  Value start;
  Value len; // Null when the block is known to be full.
  Value q, dout, lse, delta;
  Value batch, head; // (The modifiers' b and h.)
};
} // namespace

namespace {
/// The tiles of Bc keys of one kv head.
struct KeyBlock {
  Value start;
  Value len; // Null when the block is known to be full.
  Value k, v;
};
} // namespace

static QueryBlock loadQueryBlock(OpBuilder &b, const BackwardPlan &p,
                                 Value batch, Value qHead, Value qBlock) {
  Location loc = p.loc;
  QueryBlock blk;
  blk.batch = batch;
  blk.head = qHead;
  blk.start =
      arith::MulIOp::create(b, loc, qBlock, indexConst(b, loc, p.blockQ));
  if (p.queryTail)
    blk.len = clippedLength(b, loc, blk.start, p.blockQ, p.seqQ);
  auto zero = cast<TypedAttr>(b.getZeroAttr(p.elemType));
  auto zeroF32 = b.getF32FloatAttr(0.0f);
  // Padded rows get LSE = +inf, hence P = 0: no separate row mask needed.
  auto inf =
      b.getFloatAttr(b.getF32Type(), APFloat::getInf(APFloat::IEEEsingle()));
  Value row =
      p.packed ? arith::AddIOp::create(b, loc, p.qBase, blk.start) : blk.start;
  auto load = [&](Value src, TypedAttr pad) {
    return extractRowTile(b, loc, src, p.packed ? Value() : batch, qHead, row,
                          p.blockQ, blk.len, pad);
  };
  blk.q = load(p.query, zero);
  blk.dout = load(p.dout, zero);
  blk.lse = load(p.lse, inf);
  blk.delta = load(p.delta, zeroF32);
  return blk;
}

static KeyBlock loadKeyBlock(OpBuilder &b, const BackwardPlan &p, Value batch,
                             Value kvHead, Value kBlock) {
  Location loc = p.loc;
  KeyBlock blk;
  blk.start =
      arith::MulIOp::create(b, loc, kBlock, indexConst(b, loc, p.blockKV));
  if (p.keyTail)
    blk.len = clippedLength(b, loc, blk.start, p.blockKV, p.seqK);
  Value row = blk.start;
  if (p.packed) {
    // The key-block loop runs to the longest sequence's end: blocks past
    // this one's have no rows.
    blk.len = arith::MaxSIOp::create(b, loc, blk.len, indexConst(b, loc, 0));
    row = arith::AddIOp::create(b, loc, p.kBase, blk.start);
    batch = Value();
  }
  auto zero = cast<TypedAttr>(b.getZeroAttr(p.elemType));
  blk.k = extractRowTile(b, loc, p.key, batch, kvHead, row, p.blockKV, blk.len,
                         zero);
  blk.v = extractRowTile(b, loc, p.value, batch, kvHead, row, p.blockKV,
                         blk.len, zero);
  return blk;
}

namespace {
/// The updated accumulators of a step (null where it has none).
struct StepResults {
  Value dk, dv, dq;
};
} // namespace

/// The one fa.attention_backward_step of a (query block, key block) pair,
/// updating the accumulators given (dK/dV, dQ, or all three). It is masked
/// when the op has a mask hiding keys or the keys may have a tail; padded
/// query rows need no mask (their LSE is +inf, hence P = 0). A mask_mod is
/// decided per block as in fa-specialize-masks: a block it hides leaves the
/// accumulators as they are, one it shows whole runs without it.
static StepResults buildStep(OpBuilder &b, const BackwardPlan &p,
                             const QueryBlock &qBlk, const KeyBlock &kBlk,
                             Value dkAcc, Value dvAcc, Value dqAcc) {
  SmallVector<Value> position;
  if (p.mask || p.keyTail || p.modifiers)
    position = {qBlk.start, kBlk.start, p.seqQ, p.seqK};
  auto results = [](AttentionBackwardStepOp step) {
    return StepResults{step.getNewDk(), step.getNewDv(), step.getNewDq()};
  };
  if (!p.modifiers)
    return results(AttentionBackwardStepOp::create(
        b, p.loc, qBlk.q, kBlk.k, kBlk.v, qBlk.dout, qBlk.lse, qBlk.delta,
        dkAcc, dvAcc, dqAcc, position, p.scalars, p.mask,
        p.mask ? p.maskOperands : ValueRange()));
  // The modifiers at the tile's batch and query head (the regions cloned).
  auto makeStep = [&](OpBuilder &sb, bool withMaskMod) {
    bool regions = withMaskMod || p.modifiers.hasScoreMod();
    auto step = AttentionBackwardStepOp::create(
        sb, p.loc, qBlk.q, kBlk.k, kBlk.v, qBlk.dout, qBlk.lse, qBlk.delta,
        dkAcc, dvAcc, dqAcc, position, p.scalars, p.mask,
        p.mask ? p.maskOperands : ValueRange(), regions ? qBlk.batch : Value(),
        regions ? qBlk.head : Value(),
        regions ? ValueRange(p.modifiers.getCaptures()) : ValueRange());
    IRMapping none;
    p.modifiers.getScoreMod().cloneInto(&step.getScoreMod(), none);
    if (withMaskMod)
      p.modifiers.getMaskMod().cloneInto(&step.getMaskMod(), none);
    p.modifiers.getScoreModGrad().cloneInto(&step.getScoreModGrad(), none);
    return step;
  };
  if (!p.modifiers.hasMaskMod())
    return results(makeStep(b, /*withMaskMod=*/false));

  Location loc = p.loc;
  using fa::detail::lastPosition;
  fa::detail::BlockVerdict verdict = fa::detail::buildMaskModBlockVerdict(
      b, loc, p.modifiers.getMaskMod(), qBlk.batch, qBlk.head, qBlk.start,
      lastPosition(b, loc, qBlk.start, p.blockQ, p.seqQ), kBlk.start,
      lastPosition(b, loc, kBlk.start, p.blockKV, p.seqK));
  SmallVector<Value> accs;
  for (Value acc : {dkAcc, dvAcc, dqAcc})
    if (acc)
      accs.push_back(acc);
  auto seen = scf::IfOp::create(
      b, loc, verdict.maySee,
      [&](OpBuilder &tb, Location tl) {
        auto partial = scf::IfOp::create(
            tb, tl, verdict.mayHide,
            [&](OpBuilder &mb, Location ml) {
              scf::YieldOp::create(mb, ml, makeStep(mb, true).getResults());
            },
            [&](OpBuilder &fb, Location fl) {
              scf::YieldOp::create(fb, fl, makeStep(fb, false).getResults());
            });
        scf::YieldOp::create(tb, tl, partial.getResults());
      },
      [&](OpBuilder &eb, Location el) { scf::YieldOp::create(eb, el, accs); });
  StepResults r;
  unsigned next = 0;
  if (dkAcc)
    r.dk = seen.getResult(next++);
  if (dvAcc)
    r.dv = seen.getResult(next++);
  if (dqAcc)
    r.dq = seen.getResult(next++);
  return r;
}

//===----------------------------------------------------------------------===//
// Visible block ranges
//===----------------------------------------------------------------------===//

/// The visible blocks [begin, end) of a mask's range (element offsets) as
/// block numbers: begin is a block's first element, end at most the sequence
/// length.
static std::pair<Value, Value> blockNumbers(OpBuilder &b, Location loc,
                                            const MaskBlockRange &r,
                                            int64_t block) {
  Value size = indexConst(b, loc, block);
  return {b.createOrFold<arith::DivUIOp>(loc, r.begin, size),
          b.createOrFold<arith::CeilDivUIOp>(loc, r.end, size)};
}

/// Query blocks [lo, hi) that hold a row seeing a key of [kStart, kStart +
/// Bc): the mask's query-block range (all blocks without a mask).
static std::pair<Value, Value>
visibleQueryBlocks(OpBuilder &b, const BackwardPlan &p, Value kStart) {
  if (!p.mask)
    return {indexConst(b, p.loc, 0), p.numQBlocks};
  MaskBlockRange r = p.mask.buildQueryBlockRange(
      b, p.loc, p.maskParams, kStart, p.blockKV, p.blockQ, p.seqQ, p.seqK);
  return blockNumbers(b, p.loc, r, p.blockQ);
}

/// Blocks [lo, hi) (block numbers) narrowed to those the op's mask_mod may
/// see (a scan of its block verdicts in front of the loop,
/// fa::detail::buildMaskModVisibleRange): key blocks against the query block
/// at `fixedStart` (`scanKeys`), else query blocks against the key block
/// there, at (batch, head) or every head of [head, head + heads). As they are
/// without a mask_mod or when its verdicts cannot rule a block out.
static std::pair<Value, Value>
narrowToMaskMod(OpBuilder &b, const BackwardPlan &p, Value lo, Value hi,
                bool scanKeys, Value fixedStart, Value batch, Value head,
                Value heads = Value()) {
  if (!p.modifiers || !p.modifiers.hasMaskMod())
    return {lo, hi};
  Location loc = p.loc;
  fa::detail::MaskModScan scan;
  scan.maskMod = &p.modifiers.getMaskMod();
  scan.batch = batch;
  scan.head = head;
  if (heads)
    scan.headLast = b.createOrFold<arith::SubIOp>(
        loc, b.createOrFold<arith::AddIOp>(loc, head, heads),
        indexConst(b, loc, 1));
  scan.scanKeys = scanKeys;
  scan.fixedLo = fixedStart;
  scan.fixedLast = fa::detail::lastPosition(b, loc, fixedStart,
                                            scanKeys ? p.blockQ : p.blockKV,
                                            scanKeys ? p.seqQ : p.seqK);
  scan.block = scanKeys ? p.blockKV : p.blockQ;
  scan.len = scanKeys ? p.seqK : p.seqQ;
  Value size = indexConst(b, loc, scan.block);
  IRRewriter rewriter(b);
  Value loEl = b.createOrFold<arith::MulIOp>(loc, lo, size);
  Value hiEl = b.createOrFold<arith::MinSIOp>(
      loc, b.createOrFold<arith::MulIOp>(loc, hi, size), scan.len);
  std::optional<std::pair<Value, Value>> seen =
      fa::detail::buildMaskModVisibleRange(rewriter, loc, scan, loEl, hiEl);
  if (!seen)
    return {lo, hi};
  // [begin, end): a block's first element (or hiEl) and at most hiEl.
  return {b.createOrFold<arith::DivUIOp>(loc, seen->first, size),
          b.createOrFold<arith::CeilDivUIOp>(loc, seen->second, size)};
}

/// Key blocks [lo, hi) holding a key visible from some row of [qStart,
/// qStart + Br): the mask's key-block range.
static std::pair<Value, Value>
visibleKeyBlocks(OpBuilder &b, const BackwardPlan &p, Value qStart) {
  if (!p.mask)
    return {indexConst(b, p.loc, 0), p.numKBlocks};
  MaskBlockRange r = p.mask.buildKeyBlockRange(
      b, p.loc, p.maskParams, qStart, p.blockQ, p.blockKV, p.seqQ, p.seqK);
  return blockNumbers(b, p.loc, r, p.blockKV);
}

/// Blocks [lo, hi) (block numbers of `block` positions) narrowed to what
/// run-time `ranges` say of the other axis's block [start, start + width)
/// at (batch, head): the blocks of their union.
static std::pair<Value, Value>
narrowToRanges(OpBuilder &b, Location loc, Value lo, Value hi, Value ranges,
               int64_t rows, Value batch, Value head, Value start,
               int64_t width, Value otherLen, int64_t block, Value len) {
  if (!ranges)
    return {lo, hi};
  Value span = clippedLength(b, loc, start, width, otherLen);
  fa::detail::BlockRange r = fa::detail::buildBlockRange(
      b, loc, ranges, rows, batch, head, start, span, width, block, len);
  MaskBlockRange range;
  range.begin = r.begin;
  range.end = r.end;
  auto [first, end] = blockNumbers(b, loc, range, block);
  lo = arith::MaxSIOp::create(b, loc, lo, first);
  hi = arith::MinSIOp::create(b, loc, hi, end);
  return {lo, arith::MaxSIOp::create(b, loc, hi, lo)};
}

//===----------------------------------------------------------------------===//
// Loop nests
//===----------------------------------------------------------------------===//

static Value numBlocks(OpBuilder &b, Location loc, Value len, int64_t block);

namespace {
struct KeyBlockGradients {
  KeyBlock block;
  Value dK, dV;  // f32 accumulators, unscaled.
  Value dqGroup; // Updated group dQ, or null.
};
} // namespace

/// dK, dV of one key block: a sequential loop over the G query heads of the
/// kv head's group and, inside, over the query blocks that see the block.
/// With `dqGroup` ([G, Nq padded, D] f32) the loop also adds dS K to it.
static KeyBlockGradients buildKeyBlockGradients(OpBuilder &b,
                                                const BackwardPlan &p,
                                                Value batch, Value kvHead,
                                                Value kBlock, Value dqGroup) {
  Location loc = p.loc;
  KeyBlock kBlk = loadKeyBlock(b, p, batch, kvHead, kBlock);
  Value one = indexConst(b, loc, 1);
  Value firstHead = arith::MulIOp::create(b, loc, kvHead, p.groupSize);
  auto [qbLo, qbHi] = visibleQueryBlocks(b, p, kBlk.start);
  // The query blocks that some head of the group may see.
  std::tie(qbLo, qbHi) =
      narrowToMaskMod(b, p, qbLo, qbHi, /*scanKeys=*/false, kBlk.start, batch,
                      firstHead, p.groupSize);
  // The queries the op's query_ranges give the key block.
  std::tie(qbLo, qbHi) =
      narrowToRanges(b, loc, qbLo, qbHi, p.queryRanges, p.queryRangeRows, batch,
                     kvHead, kBlk.start, p.blockKV, p.seqK, p.blockQ, p.seqQ);
  if (p.packed) {
    // A block without keys is seen by no query.
    Value hasKeys = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt,
                                          kBlk.len, indexConst(b, loc, 0));
    qbHi = arith::SelectOp::create(b, loc, hasKeys, qbHi, qbLo);
  }
  SmallVector<Value> init = {
      zeroTile(b, loc, {p.blockKV, p.headDim}, p.f32Type),
      zeroTile(b, loc, {p.blockKV, p.valueHeadDim}, p.f32Type)};
  if (dqGroup)
    init.push_back(dqGroup);
  Value zero = indexConst(b, loc, 0);

  auto headLoop = scf::ForOp::create(
      b, loc, zero, p.groupSize, one, init,
      [&](OpBuilder &hb, Location hl, Value h, ValueRange headAcc) {
        Value qHead = arith::AddIOp::create(hb, hl, firstHead, h);
        auto blockLoop = scf::ForOp::create(
            hb, hl, qbLo, qbHi, one, headAcc,
            [&](OpBuilder &nb, Location nl, Value qb, ValueRange acc) {
              QueryBlock qBlk = loadQueryBlock(nb, p, batch, qHead, qb);
              // The [Br, D] rows of this head's padded dQ; always in bounds.
              SmallVector<OpFoldResult> offsets = {h, qBlk.start,
                                                   nb.getIndexAttr(0)};
              SmallVector<OpFoldResult> sizes = getAsIndexOpFoldResult(
                  nb.getContext(), {1, p.blockQ, p.headDim});
              SmallVector<OpFoldResult> strides(3, nb.getIndexAttr(1));
              Value dq;
              if (dqGroup) {
                auto tileType =
                    RankedTensorType::get({p.blockQ, p.headDim}, p.f32Type);
                dq = tensor::ExtractSliceOp::create(nb, nl, tileType, acc[2],
                                                    offsets, sizes, strides);
              }
              StepResults step =
                  buildStep(nb, p, qBlk, kBlk, acc[0], acc[1], dq);
              SmallVector<Value> next = {step.dk, step.dv};
              if (dqGroup)
                next.push_back(tensor::InsertSliceOp::create(
                    nb, nl, step.dq, acc[2], offsets, sizes, strides));
              scf::YieldOp::create(nb, nl, next);
            });
        scf::YieldOp::create(hb, hl, blockLoop.getResults());
      });

  KeyBlockGradients grads;
  grads.block = kBlk;
  grads.dK = headLoop.getResult(0);
  grads.dV = headLoop.getResult(1);
  if (dqGroup)
    grads.dqGroup = headLoop.getResult(2);
  return grads;
}

/// Creates `scf.forall` over [0, ubs) with `outputs` as shared_outs, mapped
/// to the thread-block ids `blockIds` (one per bound: the launch grid of the
/// GPU conversion) and carrying the op's kernel configuration, builder
/// positioned in its body. The caller adds the parallel_insert_slice ops.
static scf::ForallOp createForall(OpBuilder &b, Location loc,
                                  const BackwardPlan &p, ValueRange ubs,
                                  ArrayRef<gpu::MappingId> blockIds,
                                  ValueRange outputs) {
  assert(ubs.size() == blockIds.size() && "one block id per bound");
  SmallVector<OpFoldResult> bounds = getAsOpFoldResult(ubs);
  auto forall =
      scf::ForallOp::create(b, loc, bounds, outputs, blockMapping(b, blockIds));
  if (p.config)
    forall->setAttr(kKernelConfigAttrName, p.config);
  b.setInsertionPoint(forall.getTerminator());
  return forall;
}

/// Writes `tile` ([rows, X], or [1, rows, X] etc. after rank reduction) at
/// `offsets` of the shared output `dest` from the forall's terminator.
static void parallelInsert(OpBuilder &b, Location loc, scf::ForallOp forall,
                           Value tile, Value dest,
                           ArrayRef<OpFoldResult> offsets,
                           ArrayRef<OpFoldResult> sizes) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(forall.getTerminator().getBody());
  SmallVector<OpFoldResult> strides(offsets.size(), b.getIndexAttr(1));
  tensor::ParallelInsertSliceOp::create(b, loc, tile, dest, offsets, sizes,
                                        strides);
}

/// Sizes [1, 1, len, width] of a row slice of a [B, H, N, width] tensor.
static SmallVector<OpFoldResult> rowSliceSizes(OpBuilder &b, OpFoldResult len,
                                               int64_t width) {
  return {b.getIndexAttr(1), b.getIndexAttr(1), len, b.getIndexAttr(width)};
}

static OpFoldResult blockRows(OpBuilder &b, Value len, int64_t block) {
  return len ? OpFoldResult(len) : OpFoldResult(b.getIndexAttr(block));
}

/// The body of the fast mode's key-block loop (acc: the group's dQ, the dK
/// and dV slabs): the block's gradients, its dK / dV rows written into the
/// slabs, all three yielded.
static void yieldKeyBlock(OpBuilder &b, Location loc, const BackwardPlan &p,
                          Value batch, Value kvHead, Value kb, ValueRange acc) {
  KeyBlockGradients g = buildKeyBlockGradients(b, p, batch, kvHead, kb, acc[0]);
  OpFoldResult rows = blockRows(b, g.block.len, p.blockKV);
  auto store = [&](Value accTile, Value factor, Value slabAcc) {
    Value tile = buildEpilogue(b, loc, accTile, factor, p.elemType);
    tile = clipRows(b, loc, tile, 0, g.block.len);
    int64_t width = cast<RankedTensorType>(tile.getType()).getDimSize(1);
    return tensor::InsertSliceOp::create(
               b, loc, tile, slabAcc,
               {OpFoldResult(g.block.start), b.getIndexAttr(0)},
               {rows, b.getIndexAttr(width)},
               {b.getIndexAttr(1), b.getIndexAttr(1)})
        .getResult();
  };
  scf::YieldOp::create(b, loc,
                       ValueRange{g.dqGroup, store(g.dK, p.scale, acc[1]),
                                  store(g.dV, Value(), acc[2])});
}

/// Fast mode: forall over (batch, kv head); inside, a key-block loop carrying
/// the group's f32 dQ and its dK/dV slabs. Returns {dq, dk, dv}. `ordered`:
/// the op is deterministic and its kernel adds dQ in a fixed order.
static SmallVector<Value> buildFastBackward(OpBuilder &b, const BackwardPlan &p,
                                            bool ordered = false) {
  OpBuilder::InsertionGuard guard(b);
  Location loc = p.loc;
  Value zero = indexConst(b, loc, 0), one = indexConst(b, loc, 1);
  SmallVector<Value> outputs = {
      tensor::EmptyOp::create(b, loc, tensor::getMixedSizes(b, loc, p.query),
                              p.elemType),
      tensor::EmptyOp::create(b, loc, tensor::getMixedSizes(b, loc, p.key),
                              p.elemType),
      tensor::EmptyOp::create(b, loc, tensor::getMixedSizes(b, loc, p.value),
                              p.elemType)};
  OpFoldResult paddedSeqQ = b.getIndexAttr(0);
  if (std::optional<int64_t> n = getConstantIntValue(p.numQBlocks))
    paddedSeqQ = b.getIndexAttr(*n * p.blockQ);
  else
    paddedSeqQ = arith::MulIOp::create(b, loc, p.numQBlocks,
                                       indexConst(b, loc, p.blockQ))
                     .getResult();

  // Batch on z, kv heads on y; the key-block loop inside takes x.
  scf::ForallOp forall =
      createForall(b, loc, p, {p.batch, p.numKVHeads},
                   {gpu::MappingId::DimZ, gpu::MappingId::DimY}, outputs);
  Value batch = forall.getInductionVar(0), kvHead = forall.getInductionVar(1);
  ValueRange shared = forall.getRegionIterArgs();
  OpFoldResult zeroAttr = b.getIndexAttr(0);

  // The group's dQ, padded to whole query blocks so every tile is static.
  Value dqGroup = zeroTensor(
      b, loc,
      {getAsOpFoldResult(p.groupSize), paddedSeqQ, b.getIndexAttr(p.headDim)},
      p.f32Type);
  auto slab = [&](Value dest, int64_t width) -> Value {
    SmallVector<OpFoldResult> offsets = {batch, kvHead, zeroAttr, zeroAttr};
    auto type = RankedTensorType::get(
        {cast<RankedTensorType>(dest.getType()).getDimSize(2), width},
        p.elemType);
    return tensor::ExtractSliceOp::create(
        b, loc, type, dest, offsets,
        rowSliceSizes(b, getAsOpFoldResult(p.seqK), width),
        SmallVector<OpFoldResult>(4, b.getIndexAttr(1)));
  };
  SmallVector<Value> init = {dqGroup, slab(shared[1], p.headDim),
                             slab(shared[2], p.valueHeadDim)};

  auto keyLoop = scf::ForOp::create(
      b, loc, zero, p.numKBlocks, one, init,
      [&](OpBuilder &nb, Location nl, Value kb, ValueRange acc) {
        yieldKeyBlock(nb, nl, p, batch, kvHead, kb, acc);
      });
  keyLoop->setAttr(kDqAccumulationAttrName,
                   ordered ? Attribute(b.getStringAttr(kDqAccumulationOrdered))
                           : Attribute(b.getUnitAttr()));

  Value dq = buildEpilogue(b, loc, keyLoop.getResult(0), p.scale, p.elemType);
  dq = clipRows(b, loc, dq, 1, p.seqQ);
  Value firstHead = arith::MulIOp::create(b, loc, kvHead, p.groupSize);
  parallelInsert(b, loc, forall, dq, shared[0],
                 {batch, firstHead, zeroAttr, zeroAttr},
                 {b.getIndexAttr(1), getAsOpFoldResult(p.groupSize),
                  getAsOpFoldResult(p.seqQ), b.getIndexAttr(p.headDim)});
  SmallVector<OpFoldResult> slabOffsets = {batch, kvHead, zeroAttr, zeroAttr};
  parallelInsert(b, loc, forall, keyLoop.getResult(1), shared[1], slabOffsets,
                 rowSliceSizes(b, getAsOpFoldResult(p.seqK), p.headDim));
  parallelInsert(b, loc, forall, keyLoop.getResult(2), shared[2], slabOffsets,
                 rowSliceSizes(b, getAsOpFoldResult(p.seqK), p.valueHeadDim));
  return forall.getResults();
}

/// Packed sequences, fast mode: as buildFastBackward with the forall over
/// (sequence, kv head) and each sequence's rows at its offsets. The
/// key-block loop runs to ceil(max_seqlen_k / Bc) (the GPU grid's x); blocks
/// past a sequence's end have no keys and are seen by no query. The results
/// start as zeros: rows of no sequence keep them. Returns {dq, dk, dv}.
static SmallVector<Value>
buildPackedFastBackward(OpBuilder &b, const BackwardPlan &base,
                        AttentionVarlenBackwardOp op) {
  using fa::detail::extractIndex;
  OpBuilder::InsertionGuard guard(b);
  Location loc = base.loc;
  Value zero = indexConst(b, loc, 0), one = indexConst(b, loc, 1);
  auto zerosLike = [&](Value t) {
    return zeroTensor(b, loc, tensor::getMixedSizes(b, loc, t), base.elemType);
  };
  SmallVector<Value> outputs = {zerosLike(base.query), zerosLike(base.key),
                                zerosLike(base.value)};
  Value cuQ = op.getCuSeqlensQ(), cuK = op.getCuSeqlensK();
  Value numSeqs =
      arith::SubIOp::create(b, loc, tensor::DimOp::create(b, loc, cuQ, 0), one);
  Value numKBlocks = arith::CeilDivUIOp::create(
      b, loc, op.getMaxSeqlenK(), indexConst(b, loc, base.blockKV));
  Value paddedSeqQ = arith::MulIOp::create(
      b, loc,
      arith::CeilDivUIOp::create(b, loc, op.getMaxSeqlenQ(),
                                 indexConst(b, loc, base.blockQ)),
      indexConst(b, loc, base.blockQ));

  // Sequences on z, kv heads on y; the key-block loop inside takes x.
  scf::ForallOp forall =
      createForall(b, loc, base, {numSeqs, base.numKVHeads},
                   {gpu::MappingId::DimZ, gpu::MappingId::DimY}, outputs);
  Value seq = forall.getInductionVar(0), kvHead = forall.getInductionVar(1);
  ValueRange shared = forall.getRegionIterArgs();
  OpFoldResult zeroAttr = b.getIndexAttr(0);

  // This sequence's rows and lengths.
  BackwardPlan p = base;
  Value next = arith::AddIOp::create(b, loc, seq, one);
  p.qBase = extractIndex(b, loc, cuQ, seq);
  p.kBase = extractIndex(b, loc, cuK, seq);
  p.seqQ =
      arith::SubIOp::create(b, loc, extractIndex(b, loc, cuQ, next), p.qBase);
  p.seqK =
      arith::SubIOp::create(b, loc, extractIndex(b, loc, cuK, next), p.kBase);
  p.numQBlocks = numBlocks(b, loc, p.seqQ, p.blockQ);
  p.numKBlocks = numKBlocks;

  Value dqGroup = zeroTensor(
      b, loc,
      {getAsOpFoldResult(p.groupSize), paddedSeqQ, b.getIndexAttr(p.headDim)},
      p.f32Type);
  // The sequence's rows of dK / dV of this kv head.
  auto slab = [&](Value dest, int64_t width) -> Value {
    SmallVector<OpFoldResult> offsets = {kvHead, p.kBase, zeroAttr};
    auto type =
        RankedTensorType::get({ShapedType::kDynamic, width}, p.elemType);
    return tensor::ExtractSliceOp::create(
        b, loc, type, dest, offsets,
        {b.getIndexAttr(1), p.seqK, b.getIndexAttr(width)},
        SmallVector<OpFoldResult>(3, b.getIndexAttr(1)));
  };
  SmallVector<Value> init = {dqGroup, slab(shared[1], p.headDim),
                             slab(shared[2], p.valueHeadDim)};

  auto keyLoop = scf::ForOp::create(
      b, loc, zero, numKBlocks, one, init,
      [&](OpBuilder &nb, Location nl, Value kb, ValueRange acc) {
        yieldKeyBlock(nb, nl, p, seq, kvHead, kb, acc);
      });
  keyLoop->setAttr(kDqAccumulationAttrName, b.getUnitAttr());

  Value dq = buildEpilogue(b, loc, keyLoop.getResult(0), p.scale, p.elemType);
  dq = clipRows(b, loc, dq, 1, p.seqQ);
  Value firstHead = arith::MulIOp::create(b, loc, kvHead, p.groupSize);
  parallelInsert(b, loc, forall, dq, shared[0], {firstHead, p.qBase, zeroAttr},
                 {getAsOpFoldResult(p.groupSize), getAsOpFoldResult(p.seqQ),
                  b.getIndexAttr(p.headDim)});
  for (auto [i, width] :
       {std::pair<int, int64_t>{1, p.headDim}, {2, p.valueHeadDim}})
    parallelInsert(
        b, loc, forall, keyLoop.getResult(i), shared[i],
        {kvHead, p.kBase, zeroAttr},
        {b.getIndexAttr(1), getAsOpFoldResult(p.seqK), b.getIndexAttr(width)});
  return forall.getResults();
}

/// Deterministic mode, first nest: forall over (batch, kv head, key block)
/// producing dK and dV, no dQ. Returns {dk, dv}.
static SmallVector<Value> buildKeyValueGradients(OpBuilder &b,
                                                 const BackwardPlan &p) {
  OpBuilder::InsertionGuard guard(b);
  Location loc = p.loc;
  SmallVector<Value> outputs = {
      tensor::EmptyOp::create(b, loc, tensor::getMixedSizes(b, loc, p.key),
                              p.elemType),
      tensor::EmptyOp::create(b, loc, tensor::getMixedSizes(b, loc, p.value),
                              p.elemType)};
  scf::ForallOp forall = createForall(
      b, loc, p, {p.batch, p.numKVHeads, p.numKBlocks},
      {gpu::MappingId::DimZ, gpu::MappingId::DimY, gpu::MappingId::DimX},
      outputs);
  Value batch = forall.getInductionVar(0), kvHead = forall.getInductionVar(1);
  ValueRange shared = forall.getRegionIterArgs();
  KeyBlockGradients g = buildKeyBlockGradients(
      b, p, batch, kvHead, forall.getInductionVar(2), /*dqGroup=*/nullptr);
  OpFoldResult rows = blockRows(b, g.block.len, p.blockKV);
  SmallVector<OpFoldResult> offsets = {batch, kvHead, g.block.start,
                                       b.getIndexAttr(0)};
  Value dk = clipRows(b, loc, buildEpilogue(b, loc, g.dK, p.scale, p.elemType),
                      0, g.block.len);
  Value dv = clipRows(b, loc, buildEpilogue(b, loc, g.dV, Value(), p.elemType),
                      0, g.block.len);
  parallelInsert(b, loc, forall, dk, shared[0], offsets,
                 rowSliceSizes(b, rows, p.headDim));
  parallelInsert(b, loc, forall, dv, shared[1], offsets,
                 rowSliceSizes(b, rows, p.valueHeadDim));
  return forall.getResults();
}

/// Deterministic mode, second nest: forall over (batch, query head, query
/// block); a sequential loop over the visible key blocks in ascending order
/// recomputes P and dS and accumulates dQ in a [Br, D] f32 tile.
static Value buildDeterministicQueryGradient(OpBuilder &b,
                                             const BackwardPlan &p) {
  OpBuilder::InsertionGuard guard(b);
  Location loc = p.loc;
  Value output = tensor::EmptyOp::create(
      b, loc, tensor::getMixedSizes(b, loc, p.query), p.elemType);
  scf::ForallOp forall = createForall(
      b, loc, p, {p.batch, p.numQHeads, p.numQBlocks},
      {gpu::MappingId::DimZ, gpu::MappingId::DimY, gpu::MappingId::DimX},
      ValueRange{output});
  Value batch = forall.getInductionVar(0), qHead = forall.getInductionVar(1);
  Value kvHead = arith::DivUIOp::create(b, loc, qHead, p.groupSize);
  QueryBlock qBlk =
      loadQueryBlock(b, p, batch, qHead, forall.getInductionVar(2));
  auto [kbLo, kbHi] = visibleKeyBlocks(b, p, qBlk.start);
  std::tie(kbLo, kbHi) = narrowToMaskMod(b, p, kbLo, kbHi, /*scanKeys=*/true,
                                         qBlk.start, batch, qHead);
  // The keys the op's key_ranges give the query block.
  std::tie(kbLo, kbHi) =
      narrowToRanges(b, loc, kbLo, kbHi, p.keyRanges, p.keyRangeRows, batch,
                     qHead, qBlk.start, p.blockQ, p.seqQ, p.blockKV, p.seqK);
  Value init = zeroTile(b, loc, {p.blockQ, p.headDim}, p.f32Type);
  auto keyLoop = scf::ForOp::create(
      b, loc, kbLo, kbHi, indexConst(b, loc, 1), ValueRange{init},
      [&](OpBuilder &nb, Location nl, Value kb, ValueRange acc) {
        KeyBlock kBlk = loadKeyBlock(nb, p, batch, kvHead, kb);
        StepResults step = buildStep(nb, p, qBlk, kBlk, /*dkAcc=*/nullptr,
                                     /*dvAcc=*/nullptr, acc[0]);
        scf::YieldOp::create(nb, nl, step.dq);
      });
  Value dq = buildEpilogue(b, loc, keyLoop.getResult(0), p.scale, p.elemType);
  dq = clipRows(b, loc, dq, 0, qBlk.len);
  parallelInsert(b, loc, forall, dq, forall.getRegionIterArgs()[0],
                 {batch, qHead, qBlk.start, b.getIndexAttr(0)},
                 rowSliceSizes(b, blockRows(b, qBlk.len, p.blockQ), p.headDim));
  return forall.getResult(0);
}

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

static Value dimValue(OpBuilder &b, Location loc, Value tensor, int64_t dim) {
  return getValueOrCreateConstantIndexOp(
      b, loc, tensor::getMixedSize(b, loc, tensor, dim));
}

/// ceil(len / block), folded when `len` is a constant.
static Value numBlocks(OpBuilder &b, Location loc, Value len, int64_t block) {
  if (std::optional<int64_t> n = getConstantIntValue(len))
    return indexConst(b, loc, llvm::divideCeil(*n, block));
  return arith::CeilDivSIOp::create(b, loc, len, indexConst(b, loc, block));
}

static bool mayHaveTail(Value tensor, int64_t dim, int64_t block) {
  int64_t n = cast<RankedTensorType>(tensor.getType()).getDimSize(dim);
  return ShapedType::isDynamic(n) || n % block != 0;
}

/// What the dense and packed plans share: tiles, scalars, mask, tensors, head
/// counts (their dim `headDim`: 1 dense, 0 packed). The caller builds delta
/// last (after its own sizes).
template <typename OpT>
static BackwardPlan makeCommonPlan(OpBuilder &b, OpT op, int64_t blockQ,
                                   int64_t blockKV, int64_t headDim) {
  Location loc = op.getLoc();
  BackwardPlan p{loc, op.getQuery().getType().getElementType(), b.getF32Type()};
  // The op's kernel configuration, when it has one, decides the tiles.
  p.config = op.getKernelConfigAttr();
  p.blockQ = p.config ? p.config.getBlockQ() : blockQ;
  p.blockKV = p.config ? p.config.getBlockKV() : blockKV;
  p.headDim = op.getHeadDim();
  p.valueHeadDim = op.getValueHeadDim();
  p.scale = op.buildScale(b, loc);
  p.scalars = {op.getStaticScale(), op.getDynamicScale(), op.getSoftcapAttr(),
               op.getDynamicSoftcap()};
  if (op.hasMaskRule()) {
    p.mask = op.getMaskAttr();
    p.maskOperands = op.getMaskOperands();
    p.maskParams = p.mask.buildParameters(b, loc, p.maskOperands);
  }
  p.query = op.getQuery();
  p.key = op.getKey();
  p.value = op.getValue();
  p.dout = op.getDout();
  p.lse = op.getLse();
  p.numQHeads = dimValue(b, loc, p.query, headDim);
  p.numKVHeads = dimValue(b, loc, p.key, headDim);
  int64_t hq = op.getQuery().getType().getDimSize(headDim);
  int64_t hkv = op.getKey().getType().getDimSize(headDim);
  p.groupSize = !ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv)
                    ? indexConst(b, loc, hq / hkv)
                    : arith::DivUIOp::create(b, loc, p.numQHeads, p.numKVHeads)
                          .getResult();
  return p;
}

static BackwardPlan makePlan(OpBuilder &b, AttentionBackwardOp op,
                             int64_t blockQ, int64_t blockKV) {
  BackwardPlan p = makeCommonPlan(b, op, blockQ, blockKV, /*headDim=*/1);
  Location loc = p.loc;
  p.batch = dimValue(b, loc, p.query, 0);
  p.seqQ = dimValue(b, loc, p.query, 2);
  p.seqK = dimValue(b, loc, p.key, 2);
  p.numQBlocks = numBlocks(b, loc, p.seqQ, p.blockQ);
  p.numKBlocks = numBlocks(b, loc, p.seqK, p.blockKV);
  p.queryTail = mayHaveTail(p.query, 2, p.blockQ);
  p.keyTail = mayHaveTail(p.key, 2, p.blockKV);
  p.delta = buildDelta(b, loc, op.getOut(), op.getDout());
  if (op.hasModifiers())
    p.modifiers = op;
  if ((p.queryRanges = op.getQueryRanges()))
    p.queryRangeRows = *op.getQueryRangeRows();
  if ((p.keyRanges = op.getKeyRanges()))
    p.keyRangeRows = *op.getKeyRangeRows();
  return p;
}

/// The plan of a packed backward: [H, T, X] tensors; the per-sequence values
/// (offsets, lengths, query-block count) are set inside its forall.
static BackwardPlan makePackedPlan(OpBuilder &b, AttentionVarlenBackwardOp op,
                                   int64_t blockQ, int64_t blockKV) {
  BackwardPlan p = makeCommonPlan(b, op, blockQ, blockKV, /*headDim=*/0);
  p.packed = true;
  // Sequence lengths are run-time values: every block may be partial.
  p.queryTail = p.keyTail = true;
  p.delta = buildDelta(b, p.loc, op.getOut(), op.getDout());
  return p;
}

/// Builds the tiled backward in front of `op` and returns {dq, dk, dv}.
static SmallVector<Value> buildTiledBackward(OpBuilder &b,
                                             AttentionBackwardOp op,
                                             int64_t blockQ, int64_t blockKV) {
  BackwardPlan plan = makePlan(b, op, blockQ, blockKV);
  if (!op.getDeterministic())
    return buildFastBackward(b, plan);
  // The warp-specialized kernel keeps the one-pass structure and orders its
  // dQ additions instead (FlashAttention-3's way). Its order needs the key
  // blocks that see a query block to be consecutive: band masks only, no
  // modifiers or run-time ranges.
  if (plan.config &&
      plan.config.getSchedule() == KernelSchedule::WarpSpecialized &&
      !plan.modifiers && !plan.queryRanges && !plan.keyRanges)
    return buildFastBackward(b, plan, /*ordered=*/true);
  SmallVector<Value> dkdv = buildKeyValueGradients(b, plan);
  Value dq = buildDeterministicQueryGradient(b, plan);
  return {dq, dkdv[0], dkdv[1]};
}

static LogicalResult checkBlockSize(Operation *op, StringRef name,
                                    int64_t size) {
  if (size > 0 && size % kBlockMultiple == 0 && size <= kMaxBlock)
    return success();
  return op->emitError() << "fa-tile-attention-backward: " << name
                         << " must be a multiple of " << kBlockMultiple
                         << " in [" << kBlockMultiple << ", " << kMaxBlock
                         << "], got " << size;
}

namespace {
struct FATileAttentionBackwardPass final
    : fa::impl::FATileAttentionBackwardBase<FATileAttentionBackwardPass> {
  using Base::Base;

  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    // Packed sequences: the fast mode has a nest of its own; the
    // deterministic one is a loop over the sequences of the dense backward,
    // tiled below.
    SmallVector<AttentionVarlenBackwardOp> packed;
    getOperation()->walk(
        [&](AttentionVarlenBackwardOp op) { packed.push_back(op); });
    for (AttentionVarlenBackwardOp op : packed) {
      if (op.getDeterministic()) {
        (void)decomposeVarlenBackward(rewriter, op);
        continue;
      }
      KernelConfigAttr config = op.getKernelConfigAttr();
      if (!config && (failed(checkBlockSize(op, "block-q", blockQ)) ||
                      failed(checkBlockSize(op, "block-kv", blockKV))))
        return signalPassFailure();
      rewriter.setInsertionPoint(op);
      BackwardPlan plan = makePackedPlan(rewriter, op, blockQ, blockKV);
      rewriter.replaceOp(op, buildPackedFastBackward(rewriter, plan, op));
    }
    SmallVector<AttentionBackwardOp> ops;
    getOperation()->walk([&](AttentionBackwardOp op) { ops.push_back(op); });

    bool valid = true;
    for (AttentionBackwardOp op : ops) {
      // The steps multiply dS by the score_mod's derivative.
      if (op.hasScoreMod() && op.getScoreModGrad().empty()) {
        op.emitOpError() << "fa-tile-attention-backward: the score_mod has no "
                            "score_mod_grad (run fa-differentiate-score-mod "
                            "first, as the fa-tiled-cpu pipeline does)";
        valid = false;
        continue;
      }
      valid &= succeeded(checkBlockSize(op, "block-q", blockQ));
      valid &= succeeded(checkBlockSize(op, "block-kv", blockKV));
      // Ranges are read per block, unrolled over the groups it spans.
      KernelConfigAttr config = op.getKernelConfigAttr();
      int64_t bq = config ? config.getBlockQ() : blockQ;
      int64_t bkv = config ? config.getBlockKV() : blockKV;
      for (auto [name, rows, width, what] :
           {std::tuple<StringRef, std::optional<uint64_t>, int64_t, StringRef>{
                "query_ranges", op.getQueryRangeRows(), bkv, "keys"},
            {"key_ranges", op.getKeyRangeRows(), bq, "query rows"}}) {
        if (!rows || fa::detail::rangeGroupsPerBlock(width, *rows) <=
                         fa::detail::kMaxRangeGroups)
          continue;
        op.emitError() << "fa-tile-attention-backward: " << name << " rows "
                       << *rows << " split a block of " << width << " " << what
                       << " into more than " << fa::detail::kMaxRangeGroups
                       << " groups";
        valid = false;
      }
    }
    if (!valid)
      return signalPassFailure();

    for (AttentionBackwardOp op : ops) {
      rewriter.setInsertionPoint(op);
      rewriter.replaceOp(op, buildTiledBackward(rewriter, op, blockQ, blockKV));
    }
  }
};
} // namespace
