//===- SpecializeMasks.cpp - Masks as loop structure ----------------------===//
//
// A query block of rows [r0, r1] sees, through the step's mask, only some
// key blocks, and some of them whole: the mask's key-block range
// (MaskAttrInterface::buildKeyBlockRange). This pass rewrites the key loop
// that `fa-tile-attention` emits,
//
//   scf.for %k = 0 to %Nk step Bc iter_args(state) {
//     state = fa.online_attention ... masked(%q0, %k, %Nq, %Nk) ...
//   }
//
// into
//
//   scf.for %k = lo     to fullLo step Bc { masked step }   (left boundary;
//                                                            only if the
//                                                            rule has one)
//   scf.for %k = fullLo to fullHi step Bc { unmasked step } (fully visible)
//   scf.for %k = fullHi to hi     step Bc { masked step }   (right boundary,
//                                                            sequence tail)
//
// Blocks outside [lo, hi) are seen by no row of the query block and are never
// visited; blocks in [fullLo, fullHi) are seen whole by every row and run
// with no mask arithmetic. The bounds depend on the query block, so they are
// computed at run time, from the step's own operands, in front of the loop.
// Skipping a block is sound because a fully masked step leaves the state
// unchanged, which the pass checks by requiring the loop to do nothing but
// thread its state through the step.
//
// A step with a mask_mod is left in its loop (the modifier may hide any key)
// and decided per block instead: interval arithmetic over the mask_mod's
// region (MaskModBlocks.h) says whether the block's rows and keys may be
// seen and may be hidden, and the step becomes
//
//   scf.if %maySee {              (else: the state passes through)
//     scf.if %mayHide { step } else { step without the mask_mod }
//   }
//
// (the attribute mask and the sequence tail stay on both steps).
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Transforms/Passes.h"

#include "MaskModBlocks.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FASPECIALIZEMASKS
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// Whether `v` is a constant multiple of `n`, or a product with one.
bool isMultipleOf(Value v, int64_t n) {
  APInt c;
  if (matchPattern(v, m_ConstantInt(&c)))
    return c.getSExtValue() % n == 0;
  auto mul = v.getDefiningOp<arith::MulIOp>();
  return mul &&
         (isMultipleOf(mul.getLhs(), n) || isMultipleOf(mul.getRhs(), n));
}

/// Returns the masked step of a key loop this pass can specialize, or null.
OnlineAttentionOp getSpecializableStep(scf::ForOp loop) {
  Block *body = loop.getBody();
  auto steps = body->getOps<OnlineAttentionOp>();
  if (!llvm::hasSingleElement(steps))
    return nullptr;
  OnlineAttentionOp step = *steps.begin();
  if (!step.isMasked() || step.getKStart() != loop.getInductionVar())
    return nullptr;
  // The loop advances by whole key tiles from a multiple of the tile (0,
  // or fa.attention's key_ranges rounded down: `x * Bc`).
  APInt stepSize;
  auto keyType = cast<RankedTensorType>(step.getKey().getType());
  if (!matchPattern(loop.getStep(), m_ConstantInt(&stepSize)) ||
      keyType.isDynamicDim(0) ||
      stepSize.getSExtValue() != keyType.getDimSize(0) ||
      cast<RankedTensorType>(step.getQuery().getType()).isDynamicDim(0) ||
      !isMultipleOf(loop.getLowerBound(), stepSize.getSExtValue()))
    return nullptr;
  // Bounds are computed in front of the loop from these (and, for a
  // mask_mod's range, the tile's batch and head).
  SmallVector<Value> invariants = {step.getQStart(), step.getQLen(),
                                   step.getKLen()};
  if (step.hasMaskMod())
    invariants.append({step.getBatchIndex(), step.getHeadIndex()});
  for (Value v : invariants)
    if (!v || !loop.isDefinedOutsideOfLoop(v))
      return nullptr;
  // The loop only threads (acc, max, sum) through the step, so skipping an
  // iteration whose step would be a no-op leaves the results unchanged.
  auto yield = cast<scf::YieldOp>(body->getTerminator());
  if (loop.getNumRegionIterArgs() != 3 ||
      yield.getOperands() != ValueRange(step.getResults()) ||
      ValueRange{step.getAcc(), step.getMax(), step.getSum()} !=
          ValueRange(loop.getRegionIterArgs()))
    return nullptr;
  return step;
}

/// Replaces `step` (masked) with the same step without any mask. A step
/// with modifiers keeps its positions (the modifiers read them) and
/// mask_mod, and drops only the mask attribute.
void dropMask(RewriterBase &rewriter, OnlineAttentionOp step) {
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(step);
  if (step.hasModifiers()) {
    rewriter.modifyOpInPlace(step, [&] {
      step.removeMaskAttr();
      step.getMaskOperandsMutable().clear();
    });
    return;
  }
  auto unmasked = OnlineAttentionOp::create(
      rewriter, step.getLoc(), step.getNewAcc().getType(),
      step.getNewMax().getType(), step.getNewSum().getType(), step.getQuery(),
      step.getKey(), step.getValue(), step.getAcc(), step.getMax(),
      step.getSum(), /*q_start=*/Value(), /*k_start=*/Value(),
      /*q_len=*/Value(), /*k_len=*/Value(), /*batch_index=*/Value(),
      /*head_index=*/Value(), /*full_keys_begin=*/Value(),
      /*full_keys_end=*/Value(), step.getDynamicSoftcap(),
      step.getDynamicScale(),
      /*mask_operands=*/ValueRange(), /*captures=*/ValueRange(),
      step.getScaleAttr(), /*mask=*/nullptr, step.getSoftcapAttr(),
      step.getExp2Attr());
  rewriter.replaceOp(step, unmasked.getResults());
}

using fa::detail::lastPosition;

/// The key blocks of [lo, hi) that `step`'s mask_mod may see (see
/// buildMaskModVisibleRange), for this step's query block.
std::optional<std::pair<Value, Value>>
buildMaskModKeyRange(RewriterBase &rewriter, OnlineAttentionOp step, Value lo,
                     Value hi, int64_t br, int64_t bc) {
  Location loc = step.getLoc();
  fa::detail::MaskModScan scan;
  scan.maskMod = &step.getMaskMod();
  scan.batch = step.getBatchIndex();
  scan.head = step.getHeadIndex();
  scan.scanKeys = true;
  scan.fixedLo = step.getQStart();
  scan.fixedLast =
      lastPosition(rewriter, loc, step.getQStart(), br, step.getQLen());
  scan.block = bc;
  scan.len = step.getKLen();
  return fa::detail::buildMaskModVisibleRange(rewriter, loc, scan, lo, hi);
}

/// Splits `loop` into boundary / full / boundary loops (see file header).
void specializeKeyLoop(RewriterBase &rewriter, scf::ForOp loop,
                       OnlineAttentionOp step) {
  rewriter.setInsertionPoint(loop);
  Location loc = loop.getLoc();
  int64_t br = cast<RankedTensorType>(step.getQuery().getType()).getDimSize(0);
  int64_t bc = cast<RankedTensorType>(step.getKey().getType()).getDimSize(0);
  // The mask's key blocks for this query block; a step masked only for the
  // key tail sees every block of [0, Nk), the last one partially.
  MaskAttrInterface mask = step.getMaskAttr();
  if (!mask)
    mask = MaskAttr::get(rewriter.getContext(), MaskAttr::kUnbounded,
                         MaskAttr::kUnbounded);
  SmallVector<Value> params =
      mask.buildParameters(rewriter, loc, step.getMaskOperands());
  MaskBlockRange blocks =
      mask.buildKeyBlockRange(rewriter, loc, params, step.getQStart(), br, bc,
                              step.getQLen(), step.getKLen());
  // The bounds are key offsets, at most Nk: no farther than the loop's own
  // bound when that is the step's k_len (fa-tile-attention's), else clamped
  // to it too.
  Value lo = blocks.begin, fullLo = blocks.fullBegin, fullHi = blocks.fullEnd,
        hi = blocks.end;
  // A rule that leaves no partial block before the full ones (no left
  // bound): no left boundary loop.
  bool leftBoundary = blocks.fullBegin != blocks.begin;
  Value ub = loop.getUpperBound();
  if (ub != step.getKLen()) {
    auto clip = [&](Value &v) {
      v = rewriter.createOrFold<arith::MinSIOp>(loc, v, ub);
    };
    for (Value *v : {&lo, &fullLo, &fullHi, &hi})
      clip(*v);
  }
  // A loop that starts past 0 (fa.attention's key_ranges): nothing before
  // its start (a multiple of Bc, as the mask's bounds).
  Value lb = loop.getLowerBound();
  if (!matchPattern(lb, m_Zero())) {
    for (Value *v : {&lo, &fullLo, &fullHi, &hi})
      *v = rewriter.createOrFold<arith::MaxSIOp>(loc, *v, lb);
  }
  // A mask_mod narrows the range to the key blocks it may see; not with
  // fully visible ranges (fa.attention's 4-column key_ranges): the loop's
  // bounds hold the keys some row of the block sees, at least as tight as
  // the scan, which would add code (and registers) for nothing.
  if (step.hasMaskMod() && !step.getFullKeysBegin()) {
    if (std::optional<std::pair<Value, Value>> seen =
            buildMaskModKeyRange(rewriter, step, lo, hi, br, bc)) {
      auto clamp = [&](Value &v) {
        v = rewriter.createOrFold<arith::MaxSIOp>(loc, v, seen->first);
        v = rewriter.createOrFold<arith::MinSIOp>(loc, v, seen->second);
      };
      for (Value *v : {&lo, &fullLo, &fullHi, &hi})
        clamp(*v);
    }
  }

  auto cloneWithBounds = [&](Value from, Value to, ValueRange inits) {
    auto clone = cast<scf::ForOp>(rewriter.clone(*loop));
    rewriter.modifyOpInPlace(clone, [&] {
      clone.getLowerBoundMutable().assign(from);
      clone.getUpperBoundMutable().assign(to);
      clone.getInitArgsMutable().assign(inits);
    });
    return clone;
  };

  ValueRange state = loop.getInitArgs();
  if (leftBoundary)
    state = cloneWithBounds(lo, fullLo, state).getResults();
  scf::ForOp full = cloneWithBounds(fullLo, fullHi, state);
  dropMask(rewriter, *full.getBody()->getOps<OnlineAttentionOp>().begin());
  scf::ForOp tail = cloneWithBounds(fullHi, hi, full.getResults());
  rewriter.replaceOp(loop, tail.getResults());
}

/// `step` without its mask_mod (the captures and at(b, h) go too when no
/// score_mod is left to read them).
OnlineAttentionOp withoutMaskMod(RewriterBase &rewriter,
                                 OnlineAttentionOp step) {
  bool keepScoreMod = step.hasScoreMod();
  auto op = OnlineAttentionOp::create(
      rewriter, step.getLoc(), step.getNewAcc().getType(),
      step.getNewMax().getType(), step.getNewSum().getType(), step.getQuery(),
      step.getKey(), step.getValue(), step.getAcc(), step.getMax(),
      step.getSum(), step.getQStart(), step.getKStart(), step.getQLen(),
      step.getKLen(), keepScoreMod ? step.getBatchIndex() : Value(),
      keepScoreMod ? step.getHeadIndex() : Value(), /*full_keys_begin=*/Value(),
      /*full_keys_end=*/Value(), step.getDynamicSoftcap(),
      step.getDynamicScale(), step.getMaskOperands(),
      keepScoreMod ? step.getCaptures() : ValueRange(), step.getScaleAttr(),
      step.getMaskAttr(), step.getSoftcapAttr(), step.getExp2Attr());
  if (keepScoreMod) {
    IRMapping none;
    step.getScoreMod().cloneInto(&op.getScoreMod(), none);
  }
  return op;
}

/// Decides the mask_mod of `step` per block (see file header).
void specializeMaskMod(RewriterBase &rewriter, OnlineAttentionOp step) {
  Location loc = step.getLoc();
  rewriter.setInsertionPoint(step);
  int64_t br = cast<RankedTensorType>(step.getQuery().getType()).getDimSize(0);
  int64_t bc = cast<RankedTensorType>(step.getKey().getType()).getDimSize(0);
  // Rows and keys past the sequence are padding: the decomposition gives
  // them the last valid position, inside these ranges.
  Value kLast =
      lastPosition(rewriter, loc, step.getKStart(), bc, step.getKLen());
  fa::detail::BlockVerdict verdict = fa::detail::buildMaskModBlockVerdict(
      rewriter, loc, step.getMaskMod(), step.getBatchIndex(),
      step.getHeadIndex(), step.getQStart(),
      lastPosition(rewriter, loc, step.getQStart(), br, step.getQLen()),
      step.getKStart(), kLast);
  if (step.getFullKeysBegin()) {
    // A block inside the run-time fully visible keys hides nothing.
    Value fromBegin =
        arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::sge,
                              step.getKStart(), step.getFullKeysBegin());
    // (A whole block: the key tail's is never inside, the ranges end by Nk.)
    Value blockEnd = arith::AddIOp::create(
        rewriter, loc, step.getKStart(),
        arith::ConstantIndexOp::create(rewriter, loc, bc));
    Value beforeEnd =
        arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::sle,
                              blockEnd, step.getFullKeysEnd());
    Value inside = arith::AndIOp::create(rewriter, loc, fromBegin, beforeEnd);
    Value outside = arith::XOrIOp::create(
        rewriter, loc, inside,
        arith::ConstantIntOp::create(rewriter, loc, 1, 1));
    verdict.mayHide =
        arith::AndIOp::create(rewriter, loc, verdict.mayHide, outside);
  }
  auto seen = scf::IfOp::create(
      rewriter, loc, verdict.maySee,
      [&](OpBuilder &b, Location l) {
        auto partial = scf::IfOp::create(
            b, l, verdict.mayHide,
            [&](OpBuilder &tb, Location tl) {
              auto masked = cast<OnlineAttentionOp>(tb.clone(*step));
              // (Decided: the full keys have served.)
              masked.getFullKeysBeginMutable().clear();
              masked.getFullKeysEndMutable().clear();
              scf::YieldOp::create(tb, tl, masked->getResults());
            },
            [&](OpBuilder &eb, Location el) {
              OpBuilder::InsertionGuard guard(rewriter);
              rewriter.setInsertionPoint(eb.getInsertionBlock(),
                                         eb.getInsertionPoint());
              OnlineAttentionOp full = withoutMaskMod(rewriter, step);
              scf::YieldOp::create(eb, el, full.getResults());
            });
        scf::YieldOp::create(b, l, partial.getResults());
      },
      [&](OpBuilder &b, Location l) {
        scf::YieldOp::create(
            b, l, ValueRange{step.getAcc(), step.getMax(), step.getSum()});
      });
  rewriter.replaceOp(step, seen.getResults());
}

struct FASpecializeMasksPass final
    : fa::impl::FASpecializeMasksBase<FASpecializeMasksPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<std::pair<scf::ForOp, OnlineAttentionOp>> loops;
    getOperation()->walk([&](scf::ForOp loop) {
      if (OnlineAttentionOp step = getSpecializableStep(loop))
        loops.emplace_back(loop, step);
    });
    IRRewriter rewriter(&getContext());
    for (auto [loop, step] : loops)
      specializeKeyLoop(rewriter, loop, step);
    // (After the split: each of a loop's steps is decided per block.)
    SmallVector<OnlineAttentionOp> maskMods;
    getOperation()->walk([&](OnlineAttentionOp step) {
      if (step.hasMaskMod() && step.isMasked() && step.getBatchIndex())
        maskMods.push_back(step);
    });
    for (OnlineAttentionOp step : maskMods)
      specializeMaskMod(rewriter, step);
  }
};

} // namespace
