//===- SplitKV.cpp - Split the key loop of a query block ------------------===//
//
// Decoding has one query block per (sequence, head): too few thread blocks
// to fill the GPU, each walking the whole cache. This pass cuts every query
// block's visible key range [lo, hi) into S chunks of whole key blocks, one
// per iteration of the (now S times larger) parallel loop, each producing a
// partial (out, lse) in f32, and merges them with
// fa.attention_merge_splits:
//
//   forall (b, h, qb) in (B, H, QB)          forall (b, h, x) in (B, H, QB*S)
//     for k in [lo, f) masked                  qb = x / S, s = x % S
//     for k in [f, g)                  ==>     for k in [clamp(lo), clamp(f))
//     for k in [g, hi) masked                  ...   (clamp to [kLo, kHi))
//     out, lse = finalize                      out (f32), lse = finalize
//   -> out[b, h, q0], lse[b, h, q0]          -> parts[b, h * S + s, q0], ...
//                                            merge_splits(expand(parts), ...)
//
// Clamping is monotone, so the loops stay back to back and every chunk runs
// exactly the key blocks it owns (none, for chunks past the range: their
// rows give lse = +inf, which the merge ignores).
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Transforms/Passes.h"

#include "fa/Dialect/FA/IR/KernelResources.h"
#include "fa/Dialect/FAGPU/IR/FAGPU.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FASPLITKV
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// The pieces of a tiled-attention forall that the split rewrites.
struct TiledQueryBlock {
  SmallVector<scf::ForOp> loops;
  OnlineAttentionFinalizeOp finalize;
  tensor::ParallelInsertSliceOp outInsert, lseInsert;
  /// The K operand of fa.attention (the source of the key tiles).
  Value keys;
  /// A paged cache's page table and page size: the key count is bounded by
  /// its pages, not by K's rows (one page).
  Value pageTable;
  int64_t pageSize = 0;
  int64_t blockKV, headDim, valueHeadDim;
};

/// The key tensor a key tile is a (padded) slice of, or the pool of a
/// paged key block.
static Value keySource(Value tile) {
  if (auto paged = tile.getDefiningOp<PagedKeyBlockOp>())
    return paged.getPages();
  if (auto pad = tile.getDefiningOp<tensor::PadOp>())
    tile = pad.getSource();
  auto slice = tile.getDefiningOp<tensor::ExtractSliceOp>();
  if (!slice || slice.getSourceType().getRank() != 4)
    return nullptr;
  return slice.getSource();
}

/// The page table and page size of a paged key block; null if the tile is
/// not paged.
static std::pair<Value, int64_t> pageTableOf(Value tile) {
  auto paged = tile.getDefiningOp<PagedKeyBlockOp>();
  if (!paged)
    return {};
  return {paged.getPageTable(), paged.getPageSize()};
}

static FailureOr<TiledQueryBlock> matchQueryBlock(scf::ForallOp forall) {
  TiledQueryBlock qb;
  if (forall.getRank() != 3 || forall.getNumResults() != 2 ||
      !forall.isNormalized())
    return failure();
  for (Operation &op : forall.getBody()->without_terminator()) {
    if (auto fin = dyn_cast<OnlineAttentionFinalizeOp>(op)) {
      qb.finalize = fin;
      continue;
    }
    auto loop = dyn_cast<scf::ForOp>(op);
    if (!loop)
      continue;
    auto steps = loop.getBody()->getOps<OnlineAttentionOp>();
    if (!llvm::hasSingleElement(steps))
      return failure();
    OnlineAttentionOp step = *steps.begin();
    Value keys = keySource(step.getKey());
    if (!keys || (qb.keys && keys != qb.keys))
      return failure();
    qb.keys = keys;
    std::tie(qb.pageTable, qb.pageSize) = pageTableOf(step.getKey());
    qb.blockKV = cast<RankedTensorType>(step.getKey().getType()).getDimSize(0);
    qb.headDim = cast<RankedTensorType>(step.getKey().getType()).getDimSize(1);
    qb.valueHeadDim =
        cast<RankedTensorType>(step.getValue().getType()).getDimSize(1);
    if (!qb.loops.empty() &&
        loop.getLowerBound() != qb.loops.back().getUpperBound())
      return failure();
    qb.loops.push_back(loop);
  }
  if (qb.loops.empty() || !qb.finalize)
    return failure();
  // The chunk's bounds are computed before the first loop: every loop bound
  // must be available there.
  for (scf::ForOp loop : qb.loops)
    for (Value bound : {loop.getLowerBound(), loop.getUpperBound()})
      if (Operation *def = bound.getDefiningOp())
        if (def->getBlock() == forall.getBody() &&
            qb.loops.front()->isBeforeInBlock(def))
          return failure();
  for (Operation &op : forall.getTerminator().getYieldingOps()) {
    auto insert = dyn_cast<tensor::ParallelInsertSliceOp>(op);
    if (!insert || insert.getMixedOffsets().size() < 3)
      return failure();
    Value src = insert.getSource();
    if (auto slice = src.getDefiningOp<tensor::ExtractSliceOp>())
      src = slice.getSource();
    if (src == qb.finalize.getOut())
      qb.outInsert = insert;
    else if (src == qb.finalize.getLse())
      qb.lseInsert = insert;
  }
  if (!qb.outInsert || !qb.lseInsert ||
      qb.outInsert.getDest() != forall.getRegionOutArgs()[0] ||
      qb.lseInsert.getDest() != forall.getRegionOutArgs()[1])
    return failure();
  return qb;
}

struct SplitOptions {
  int64_t splits, multiprocessors, blocksPerMultiprocessor, maxSplits;
};

/// `v` as a type-level size: static when it folds to a constant.
static int64_t staticSize(OpFoldResult v) {
  std::optional<int64_t> c = getConstantIntValue(v);
  return c ? *c : ShapedType::kDynamic;
}

static LogicalResult splitForall(RewriterBase &rw, scf::ForallOp forall,
                                 TiledQueryBlock &qb,
                                 const SplitOptions &opts) {
  Location loc = forall.getLoc();
  rw.setInsertionPoint(forall);
  auto idx = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(rw, loc, v);
  };
  SmallVector<OpFoldResult> ubs = forall.getMixedUpperBound();
  // The most keys a query block can see (the split count's bound).
  Value nk =
      qb.pageTable
          ? rw.createOrFold<arith::MulIOp>(
                loc, rw.createOrFold<tensor::DimOp>(loc, qb.pageTable, 1),
                idx(qb.pageSize))
          : rw.createOrFold<tensor::DimOp>(loc, qb.keys, 2);

  // The split count.
  Value splits;
  if (opts.splits > 0) {
    splits = idx(opts.splits);
  } else {
    Value tiles = getValueOrCreateConstantIndexOp(rw, loc, ubs[0]);
    for (int i = 1; i < 3; ++i)
      tiles = rw.createOrFold<arith::MulIOp>(
          loc, tiles, getValueOrCreateConstantIndexOp(rw, loc, ubs[i]));
    Value sms =
        opts.multiprocessors > 0
            ? idx(opts.multiprocessors)
            : fagpu::HostMultiprocessorCountOp::create(rw, loc).getResult();
    // Blocks resident per SM: the option, or what the kernel configuration
    // the forall carries leaves room for (2 without one).
    int64_t perSM = opts.blocksPerMultiprocessor;
    if (perSM == 0) {
      auto config =
          forall->getAttrOfType<KernelConfigAttr>(kKernelConfigAttrName);
      perSM = config ? residentBlocks(config, {KernelKind::Forward, qb.headDim,
                                               qb.valueHeadDim})
                     : 2;
    }
    Value slots = rw.createOrFold<arith::MulIOp>(loc, sms, idx(perSM));
    Value byTiles = rw.createOrFold<arith::DivUIOp>(loc, slots, tiles);
    Value keyBlocks =
        rw.createOrFold<arith::CeilDivUIOp>(loc, nk, idx(qb.blockKV));
    splits = rw.createOrFold<arith::MinUIOp>(
        loc, rw.createOrFold<arith::MinUIOp>(loc, byTiles, keyBlocks),
        idx(opts.maxSplits));
    splits = rw.createOrFold<arith::MaxUIOp>(loc, splits, idx(1));
  }

  // Partials [B, H * S, Nq, Dv] and [B, H * S, Nq], f32.
  auto outInit = forall.getOutputs()[0];
  SmallVector<OpFoldResult> outSizes = tensor::getMixedSizes(rw, loc, outInit);
  OpFoldResult heads = outSizes[1];
  OpFoldResult splitHeads = getAsOpFoldResult(rw.createOrFold<arith::MulIOp>(
      loc, getValueOrCreateConstantIndexOp(rw, loc, heads), splits));
  SmallVector<OpFoldResult> partSizes = {outSizes[0], splitHeads, outSizes[2],
                                         outSizes[3]};
  Type f32 = rw.getF32Type();
  Value parts = tensor::EmptyOp::create(rw, loc, partSizes, f32);
  Value partLses =
      tensor::EmptyOp::create(rw, loc, ArrayRef(partSizes).take_front(3), f32);
  SmallVector<OpFoldResult> newUbs = {
      ubs[0], ubs[1],
      getAsOpFoldResult(rw.createOrFold<arith::MulIOp>(
          loc, getValueOrCreateConstantIndexOp(rw, loc, ubs[2]), splits))};
  auto split = scf::ForallOp::create(
      rw, loc, newUbs, ValueRange{parts, partLses}, forall.getMapping());
  for (NamedAttribute attr : forall->getDiscardableAttrs())
    split->setAttr(attr.getName(), attr.getValue());

  // The body: (b, h, x) -> (b, h, x / S) and the chunk s = x % S.
  Block *body = split.getBody();
  rw.eraseOp(split.getTerminator());
  rw.setInsertionPointToStart(body);
  Value x = body->getArgument(2);
  Value qBlock = arith::DivUIOp::create(rw, loc, x, splits);
  Value chunk = arith::RemUIOp::create(rw, loc, x, splits);
  rw.mergeBlocks(forall.getBody(), body,
                 {body->getArgument(0), body->getArgument(1), qBlock,
                  body->getArgument(3), body->getArgument(4)});

  // The chunk's key range [kLo, kHi) of whole key blocks within [lo, hi).
  rw.setInsertionPoint(qb.loops.front());
  Value lo = qb.loops.front().getLowerBound();
  Value hi =
      arith::MaxSIOp::create(rw, loc, lo, qb.loops.back().getUpperBound());
  Value bc = idx(qb.blockKV);
  Value blocks = arith::CeilDivUIOp::create(
      rw, loc, arith::SubIOp::create(rw, loc, hi, lo), bc);
  Value per = arith::MulIOp::create(
      rw, loc, arith::CeilDivUIOp::create(rw, loc, blocks, splits), bc);
  Value kLo = arith::MinSIOp::create(
      rw, loc,
      arith::AddIOp::create(rw, loc, lo,
                            arith::MulIOp::create(rw, loc, chunk, per)),
      hi);
  Value kHi = arith::MinSIOp::create(
      rw, loc, arith::AddIOp::create(rw, loc, kLo, per), hi);
  DenseMap<Value, Value> clamped;
  auto clamp = [&](Value v) {
    Value &c = clamped[v];
    if (!c)
      c = arith::MinSIOp::create(rw, loc,
                                 arith::MaxSIOp::create(rw, loc, v, kLo), kHi);
    return c;
  };
  for (scf::ForOp loop : qb.loops) {
    Value newLb = clamp(loop.getLowerBound()),
          newUb = clamp(loop.getUpperBound());
    rw.modifyOpInPlace(loop, [&] {
      loop.setLowerBound(newLb);
      loop.setUpperBound(newUb);
    });
  }

  // The finalized tile in f32, written at head h * S + s of the partials.
  rw.setInsertionPoint(qb.finalize);
  auto tileType = cast<RankedTensorType>(qb.finalize.getOut().getType());
  auto finalize = OnlineAttentionFinalizeOp::create(
      rw, loc, tileType.clone(f32), qb.finalize.getLse().getType(),
      qb.finalize.getAcc(), qb.finalize.getMax(), qb.finalize.getSum(),
      qb.finalize.getExp2Attr());
  for (OpOperand &use :
       llvm::make_early_inc_range(qb.finalize.getOut().getUses())) {
    auto slice = dyn_cast<tensor::ExtractSliceOp>(use.getOwner());
    if (!slice)
      return forall.emitError("fa-split-kv: the finalized tile may only be "
                              "sliced before it is stored");
    rw.setInsertionPoint(slice);
    auto sliceType = slice.getType().clone(f32);
    rw.replaceOpWithNewOp<tensor::ExtractSliceOp>(
        slice, sliceType, finalize.getOut(), slice.getMixedOffsets(),
        slice.getMixedSizes(), slice.getMixedStrides());
  }
  rw.replaceAllUsesWith(qb.finalize.getLse(), finalize.getLse());
  rw.eraseOp(qb.finalize);

  rw.setInsertionPoint(body->getTerminator());
  OpFoldResult headOffset = qb.outInsert.getMixedOffsets()[1];
  Value head = getValueOrCreateConstantIndexOp(rw, loc, headOffset);
  Value partHead = arith::AddIOp::create(
      rw, loc, arith::MulIOp::create(rw, loc, head, splits), chunk);
  for (tensor::ParallelInsertSliceOp insert : {qb.outInsert, qb.lseInsert}) {
    SmallVector<OpFoldResult> offsets = insert.getMixedOffsets();
    if (offsets[1] != headOffset)
      return forall.emitError("fa-split-kv: out and lse must be stored at "
                              "the same head");
    offsets[1] = partHead;
    rw.setInsertionPoint(insert);
    rw.replaceOpWithNewOp<tensor::ParallelInsertSliceOp>(
        insert, insert.getSource(), insert.getDest(), offsets,
        insert.getMixedSizes(), insert.getMixedStrides());
  }

  // [B, H * S, ...] -> [B, H, S, ...], merged.
  rw.setInsertionPointAfter(split);
  auto expand = [&](Value v, ArrayRef<OpFoldResult> sizes) -> Value {
    SmallVector<OpFoldResult> shape = {sizes[0], heads,
                                       getAsOpFoldResult(splits)};
    SmallVector<ReassociationIndices> reassoc = {{0}, {1, 2}};
    for (size_t d = 2; d < sizes.size(); ++d) {
      shape.push_back(sizes[d]);
      reassoc.push_back({static_cast<int64_t>(d + 1)});
    }
    auto type =
        RankedTensorType::get(llvm::map_to_vector(shape, staticSize), f32);
    return tensor::ExpandShapeOp::create(rw, loc, type, v, reassoc, shape);
  };
  Value stacked = expand(split.getResult(0), partSizes);
  Value stackedLses =
      expand(split.getResult(1), ArrayRef(partSizes).take_front(3));
  auto merge = AttentionMergeSplitsOp::create(
      rw, loc, forall.getResult(0).getType(), forall.getResult(1).getType(),
      stacked, stackedLses);
  rw.replaceOp(forall, merge.getResults());
  return success();
}

struct FASplitKVPass final : fa::impl::FASplitKVBase<FASplitKVPass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto [name, value, min] :
         {std::tuple<StringRef, int64_t, int64_t>{"splits", splits, 0},
          {"multiprocessors", multiprocessors, 0},
          {"blocks-per-multiprocessor", blocksPerMultiprocessor, 0},
          {"max-splits", maxSplits, 1}}) {
      if (value < min) {
        getOperation()->emitError()
            << "fa-split-kv: " << name << " must be at least " << min
            << ", got " << value;
        return signalPassFailure();
      }
    }
    SplitOptions opts{splits, multiprocessors, blocksPerMultiprocessor,
                      maxSplits};
    SmallVector<scf::ForallOp> foralls;
    getOperation()->walk([&](scf::ForallOp forall) {
      if (!forall.getBody()->getOps<OnlineAttentionFinalizeOp>().empty())
        foralls.push_back(forall);
    });
    IRRewriter rw(&getContext());
    for (scf::ForallOp forall : foralls) {
      bool modifiers = false;
      forall.walk([&](OnlineAttentionOp step) {
        modifiers |= step.hasModifiers();
      });
      if (modifiers) {
        forall.emitError("fa-split-kv: a query block with score_mod or "
                         "mask_mod is not split (no kernel runs the "
                         "modifiers yet; the tiled CPU pipeline runs them "
                         "unsplit)");
        return signalPassFailure();
      }
      FailureOr<TiledQueryBlock> qb = matchQueryBlock(forall);
      if (failed(qb)) {
        forall.emitError("fa-split-kv: expected the loop nest of "
                         "fa-tile-attention (key loops back to back over "
                         "one key tensor, then fa.online_attention_finalize, "
                         "out and lse stored per query block)");
        return signalPassFailure();
      }
      if (failed(splitForall(rw, forall, *qb, opts)))
        return signalPassFailure();
    }
  }
};

} // namespace
