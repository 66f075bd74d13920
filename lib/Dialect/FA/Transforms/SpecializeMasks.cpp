//===- SpecializeMasks.cpp - Masks as loop structure ----------------------===//
//
// A query block of rows [r0, r1] sees, through the causal / sliding-window
// mask, only a band of keys. This pass rewrites the key loop that
// `fa-tile-attention` emits,
//
//   scf.for %k = 0 to %Nk step Bc iter_args(state) {
//     state = fa.online_attention ... masked(%q0, %k, %Nq, %Nk) ...
//   }
//
// into
//
//   scf.for %k = lo     to fullLo step Bc { masked step }   (left boundary)
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
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Transforms/Passes.h"

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

/// Returns the masked step of a key loop this pass can specialize, or null.
OnlineAttentionOp getSpecializableStep(scf::ForOp loop) {
  Block *body = loop.getBody();
  auto steps = body->getOps<OnlineAttentionOp>();
  if (!llvm::hasSingleElement(steps))
    return nullptr;
  OnlineAttentionOp step = *steps.begin();
  if (!step.isMasked() || step.getKStart() != loop.getInductionVar())
    return nullptr;
  // The loop starts at key 0 and advances by whole key tiles.
  APInt stepSize;
  auto keyType = cast<RankedTensorType>(step.getKey().getType());
  if (!matchPattern(loop.getLowerBound(), m_Zero()) ||
      !matchPattern(loop.getStep(), m_ConstantInt(&stepSize)) ||
      keyType.isDynamicDim(0) ||
      stepSize.getSExtValue() != keyType.getDimSize(0) ||
      cast<RankedTensorType>(step.getQuery().getType()).isDynamicDim(0))
    return nullptr;
  // Bounds are computed in front of the loop from these.
  for (Value v : {step.getQStart(), step.getQLen(), step.getKLen()})
    if (!loop.isDefinedOutsideOfLoop(v))
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

/// Index arithmetic helpers (signed: key offsets can be negative).
struct IndexMath {
  IndexMath(OpBuilder &b, Location loc) : b(b), loc(loc) {}
  OpBuilder &b;
  Location loc;
  /// One constant op per value. Keyed by the attribute, not the int64_t:
  /// DenseMap reserves two int64_t keys (INT64_MAX and INT64_MIN) as its
  /// empty and tombstone markers.
  llvm::DenseMap<Attribute, Value> constants;

  Value cst(int64_t v) {
    Value &c = constants[b.getIndexAttr(v)];
    if (!c)
      c = arith::ConstantIndexOp::create(b, loc, v);
    return c;
  }
  Value add(Value x, Value y) {
    return b.createOrFold<arith::AddIOp>(loc, x, y);
  }
  Value sub(Value x, Value y) {
    return b.createOrFold<arith::SubIOp>(loc, x, y);
  }
  Value min(Value x, Value y) {
    return b.createOrFold<arith::MinSIOp>(loc, x, y);
  }
  Value max(Value x, Value y) {
    return b.createOrFold<arith::MaxSIOp>(loc, x, y);
  }
  Value mul(Value x, Value y) {
    return b.createOrFold<arith::MulIOp>(loc, x, y);
  }
  /// Largest multiple of `blk` <= max(x, 0).
  Value alignDown(Value x, Value blk) {
    Value nonNeg = max(x, cst(0));
    return mul(arith::DivUIOp::create(b, loc, nonNeg, blk), blk);
  }
  /// Smallest multiple of `blk` >= max(x, 0).
  Value alignUp(Value x, Value blk) {
    Value nonNeg = max(x, cst(0));
    return mul(arith::CeilDivUIOp::create(b, loc, nonNeg, blk), blk);
  }
  /// clamp(x, lo, hi) with lo <= hi.
  Value clamp(Value x, Value lo, Value hi) { return min(max(x, lo), hi); }
};

/// Replaces `step` (masked) with the same step without any mask.
void dropMask(RewriterBase &rewriter, OnlineAttentionOp step) {
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(step);
  auto unmasked = OnlineAttentionOp::create(
      rewriter, step.getLoc(), step.getNewAcc().getType(),
      step.getNewMax().getType(), step.getNewSum().getType(), step.getQuery(),
      step.getKey(), step.getValue(), step.getAcc(), step.getMax(),
      step.getSum(), /*q_start=*/Value(), /*k_start=*/Value(),
      /*q_len=*/Value(), /*k_len=*/Value(), step.getDynamicSoftcap(),
      step.getDynamicScale(), /*dynamic_window=*/ValueRange(),
      step.getScaleAttr(), /*causal=*/nullptr,
      /*window=*/nullptr, step.getSoftcapAttr(), step.getExp2Attr());
  rewriter.replaceOp(step, unmasked.getResults());
}

/// Splits `loop` into boundary / full / boundary loops (see file header).
void specializeKeyLoop(RewriterBase &rewriter, scf::ForOp loop,
                       OnlineAttentionOp step) {
  AttentionMask mask = step.getMask();
  rewriter.setInsertionPoint(loop);
  IndexMath m{rewriter, loop.getLoc()};

  int64_t br = cast<RankedTensorType>(step.getQuery().getType()).getDimSize(0);
  Value bc = loop.getStep();
  Value qLen = step.getQLen(), kLen = step.getKLen();
  // First and last real query row of the block (padding rows past Nq are
  // discarded by the caller, so they need not be exact), and the diagonal's
  // offset: key j is visible from row i iff i + off - left <= j <= i + off +
  // right. Only built when the mask has a band.
  Value rowFirst = step.getQStart(), rowLast, off;
  // The bounds where first used: constants through the uniqued ones, a
  // run-time bound built once.
  Value dynamicLeft, dynamicRightPlusOne;
  auto left = [&]() -> Value {
    if (mask.left)
      return m.cst(*mask.left);
    if (!dynamicLeft)
      dynamicLeft = mask.buildLeft(rewriter, loop.getLoc());
    return dynamicLeft;
  };
  auto rightPlusOne = [&]() -> Value {
    if (mask.right)
      return m.cst(*mask.right + 1);
    if (!dynamicRightPlusOne)
      dynamicRightPlusOne =
          m.add(mask.buildRight(rewriter, loop.getLoc()), m.cst(1));
    return dynamicRightPlusOne;
  };
  if (!mask.isFull()) {
    rowLast = m.max(m.sub(m.min(m.add(rowFirst, m.cst(br)), qLen), m.cst(1)),
                    rowFirst);
    off = m.sub(kLen, qLen);
  }

  // [lo, hi): blocks that hold a key visible from some row of the block.
  Value ub = loop.getUpperBound();
  Value lo = m.cst(0);
  if (mask.hasLeft())
    lo = m.alignDown(m.sub(m.add(rowFirst, off), left()), bc);
  Value lastKey = kLen;
  if (mask.hasRight())
    lastKey = m.min(kLen, m.add(m.add(rowLast, off), rightPlusOne()));
  Value hi = m.alignUp(lastKey, bc);
  if (mask.hasLeft())
    hi = m.max(hi, lo);
  hi = m.min(hi, ub);
  if (mask.hasLeft())
    lo = m.min(lo, hi);

  // [fullLo, fullHi): blocks whose every key is visible from every row.
  Value fullLo = lo;
  if (mask.hasLeft())
    fullLo = m.clamp(m.alignUp(m.sub(m.add(rowLast, off), left()), bc), lo, hi);
  Value fullEnd = kLen;
  if (mask.hasRight())
    fullEnd = m.min(kLen, m.add(m.add(rowFirst, off), rightPlusOne()));
  Value fullHi = m.clamp(m.alignDown(fullEnd, bc), fullLo, hi);

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
  // With no left bound every block from 0 on may be fully visible: no left
  // boundary loop.
  if (mask.hasLeft())
    state = cloneWithBounds(lo, fullLo, state).getResults();
  scf::ForOp full = cloneWithBounds(fullLo, fullHi, state);
  dropMask(rewriter, *full.getBody()->getOps<OnlineAttentionOp>().begin());
  scf::ForOp tail = cloneWithBounds(fullHi, hi, full.getResults());
  rewriter.replaceOp(loop, tail.getResults());
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
  }
};

} // namespace
