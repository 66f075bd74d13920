//===- UseExp2.cpp - Switch the online softmax to base 2 ------------------===//
//
// Sets `exp2` on every fa.online_attention and fa.online_attention_finalize.
// The attribute changes the units of the running max (log2 instead of
// natural log), so the producers and the consumers of a max must switch
// together. The running sum and accumulator are unit-free (exp2(x log2 e) =
// exp(x)), so the max is the only value to worry about.
//
// The pass is a walk rather than a pattern set: it is all or nothing (check
// every op, then switch every op), which a greedy driver that may stop half
// way cannot promise, and the rewrite itself is one attribute.
//
// Contract: the `max` operand of every op switched must be unit-free, i.e.
// come (through scf loops and scf.if) from the `new_max` of an
// fa.online_attention, which the pass switches too, or from a splat of -inf
// (the initial state). A max that comes from anywhere else (a function
// argument, a call, a finite constant) has units the pass cannot change, so
// it reports an error instead of silently changing the meaning of the IR.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Transforms/Passes.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FAUSEEXP2
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

/// True when `v` is a tensor of -inf: an arith.constant splat or a linalg.fill
/// of a constant -inf.
static bool isNegInfSplat(Value v) {
  auto isNegInf = [](Attribute attr) {
    auto f = dyn_cast_or_null<FloatAttr>(attr);
    return f && f.getValue().isInfinity() && f.getValue().isNegative();
  };
  Attribute attr;
  if (matchPattern(v, m_Constant(&attr))) {
    if (auto splat = dyn_cast<SplatElementsAttr>(attr))
      return isNegInf(splat.getSplatValue<Attribute>());
    return isNegInf(attr);
  }
  if (auto fill = v.getDefiningOp<linalg::FillOp>()) {
    Attribute scalar;
    return matchPattern(fill.getInputs()[0], m_Constant(&scalar)) &&
           isNegInf(scalar);
  }
  return false;
}

/// Returns the first value a running max `root` may come from whose units
/// this pass does not control, or null if there is none. Follows loop-carried
/// values and scf.if results back to their sources.
static Value findForeignMaxSource(Value root) {
  SmallVector<Value> worklist = {root};
  llvm::DenseSet<Value> visited;
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    if (!visited.insert(v).second)
      continue;
    if (isNegInfSplat(v))
      continue;

    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto loop = dyn_cast<LoopLikeOpInterface>(arg.getOwner()->getParentOp());
      OpOperand *init = loop ? loop.getTiedLoopInit(arg) : nullptr;
      if (!init)
        return v;
      worklist.push_back(init->get());
      if (OpOperand *yielded = loop.getTiedLoopYieldedValue(arg))
        worklist.push_back(yielded->get());
      continue;
    }

    auto result = cast<OpResult>(v);
    Operation *def = result.getOwner();
    if (auto online = dyn_cast<OnlineAttentionOp>(def)) {
      if (result == online.getNewMax())
        continue;
      return v;
    }
    if (auto loop = dyn_cast<LoopLikeOpInterface>(def)) {
      // A loop result is its init (zero trips) or its yielded value.
      // (scf.forall yields nothing: its results are not running maxima.)
      unsigned idx = result.getResultNumber();
      ValueRange yielded = loop.getYieldedValues();
      if (idx >= yielded.size() || idx >= loop.getInits().size())
        return v;
      worklist.push_back(loop.getInits()[idx]);
      worklist.push_back(yielded[idx]);
      continue;
    }
    if (auto ifOp = dyn_cast<scf::IfOp>(def)) {
      unsigned idx = result.getResultNumber();
      worklist.push_back(ifOp.thenYield().getOperand(idx));
      worklist.push_back(ifOp.elseYield().getOperand(idx));
      continue;
    }
    return v;
  }
  return nullptr;
}

namespace {
struct FAUseExp2Pass final : fa::impl::FAUseExp2Base<FAUseExp2Pass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Operation *> ops;
    bool foreign = false;
    getOperation()->walk([&](Operation *op) {
      Value max;
      if (auto online = dyn_cast<OnlineAttentionOp>(op))
        max = online.getMax();
      else if (auto finalize = dyn_cast<OnlineAttentionFinalizeOp>(op))
        max = finalize.getMax();
      else
        return;
      ops.push_back(op);
      if (Value source = findForeignMaxSource(max)) {
        InFlightDiagnostic diag =
            op->emitOpError()
            << "cannot switch to exp2: its running max may come from a "
               "value whose units fa-use-exp2 does not control (only "
               "fa.online_attention results and -inf splats are)";
        diag.attachNote(source.getLoc()) << "the running max comes from here";
        foreign = true;
      }
    });
    if (foreign)
      return signalPassFailure();

    for (Operation *op : ops) {
      if (auto online = dyn_cast<OnlineAttentionOp>(op))
        online.setExp2(true);
      else
        cast<OnlineAttentionFinalizeOp>(op).setExp2(true);
    }
  }
};
} // namespace
