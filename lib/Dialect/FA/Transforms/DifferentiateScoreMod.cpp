//===- DifferentiateScoreMod.cpp - d(score_mod)/d(score) ------------------===//
//
// Gives each fa.attention_backward with a score_mod its score_mod_grad: the
// derivative of the score_mod's result with respect to its score argument,
// built by forward-mode differentiation. The score_mod's ops are copied into
// the new region; every copied value that depends on the score gets a
// tangent (d value / d score) next to it, from the tangents of its operands
// by the op's rule; the region yields the tangent of the yielded value.
// Values that do not depend on the score (indices, reads of the captures,
// constants) have no tangent, which the rules read as 0.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/TypeSwitch.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FADIFFERENTIATESCOREMOD
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

constexpr double kLn2 = 0.69314718055994530942;

/// Builds tangents with null standing for 0 (a value that does not depend
/// on the score), so that independent operands cost no ops.
struct TangentBuilder {
  OpBuilder &b;
  Location loc;

  Value constant(Type type, double v) {
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, v));
  }
  Value orZero(Value t, Type type) { return t ? t : constant(type, 0.0); }
  Value add(Value x, Value y) {
    if (!x || !y)
      return x ? x : y;
    return arith::AddFOp::create(b, loc, x, y);
  }
  Value sub(Value x, Value y) {
    if (!y)
      return x;
    if (!x)
      return arith::NegFOp::create(b, loc, y);
    return arith::SubFOp::create(b, loc, x, y);
  }
  /// `t * x` for a tangent t (null: 0) and a primal x.
  Value mul(Value t, Value x) {
    if (!t)
      return Value();
    return arith::MulFOp::create(b, loc, t, x);
  }
  Value div(Value t, Value x) {
    if (!t)
      return Value();
    return arith::DivFOp::create(b, loc, t, x);
  }
  Value scaled(Value t, double c) {
    if (!t)
      return Value();
    return arith::MulFOp::create(b, loc, t, constant(t.getType(), c));
  }
};

/// The tangent of the one result `y` of `op` (a copy, its operands `x` the
/// copies' primal values, `t` their tangents, null for 0); failure when
/// there is no rule for the op.
FailureOr<Value> tangentOf(TangentBuilder &tb, Operation *op, ValueRange x,
                           ArrayRef<Value> t, Value y) {
  OpBuilder &b = tb.b;
  Location loc = tb.loc;
  Type type = y.getType();
  return llvm::TypeSwitch<Operation *, FailureOr<Value>>(op)
      .Case([&](arith::AddFOp) { return tb.add(t[0], t[1]); })
      .Case([&](arith::SubFOp) { return tb.sub(t[0], t[1]); })
      .Case([&](arith::MulFOp) {
        // Separate statements: the IR order must not depend on the order in
        // which the compiler evaluates call arguments.
        Value left = tb.mul(t[0], x[1]);
        Value right = tb.mul(t[1], x[0]);
        return tb.add(left, right);
      })
      // d(a / b) = (da - (a / b) db) / b.
      .Case([&](arith::DivFOp) {
        return tb.div(tb.sub(t[0], tb.mul(t[1], y)), x[1]);
      })
      .Case([&](arith::NegFOp) { return tb.sub(Value(), t[0]); })
      .Case([&](arith::ExtFOp) -> Value {
        return arith::ExtFOp::create(b, loc, type, t[0]);
      })
      .Case([&](arith::TruncFOp) -> Value {
        return arith::TruncFOp::create(b, loc, type, t[0]);
      })
      // The condition is an i1: no tangent; the tangent of what is picked.
      .Case([&](arith::SelectOp sel) -> Value {
        if (!t[1] && !t[2])
          return Value();
        Value whenTrue = tb.orZero(t[1], type);
        Value whenFalse = tb.orZero(t[2], type);
        return arith::SelectOp::create(b, loc, x[0], whenTrue, whenFalse);
      })
      .Case<arith::MaximumFOp, arith::MaxNumFOp, arith::MinimumFOp,
            arith::MinNumFOp>([&](Operation *m) -> Value {
        bool isMax = isa<arith::MaximumFOp, arith::MaxNumFOp>(m);
        Value first = arith::CmpFOp::create(b, loc,
                                            isMax ? arith::CmpFPredicate::OGE
                                                  : arith::CmpFPredicate::OLE,
                                            x[0], x[1]);
        Value whenFirst = tb.orZero(t[0], type);
        Value whenSecond = tb.orZero(t[1], type);
        return arith::SelectOp::create(b, loc, first, whenFirst, whenSecond);
      })
      .Case([&](math::ExpOp) { return tb.mul(t[0], y); })
      .Case([&](math::Exp2Op) { return tb.scaled(tb.mul(t[0], y), kLn2); })
      .Case([&](math::LogOp) { return tb.div(t[0], x[0]); })
      .Case([&](math::Log2Op) {
        return tb.scaled(tb.div(t[0], x[0]), 1.0 / kLn2);
      })
      .Case([&](math::Log1pOp) -> Value {
        Value onePlus =
            arith::AddFOp::create(b, loc, tb.constant(type, 1.0), x[0]);
        return tb.div(t[0], onePlus);
      })
      // d tanh(a) = (1 - tanh(a)^2) da.
      .Case([&](math::TanhOp) -> Value {
        Value square = arith::MulFOp::create(b, loc, y, y);
        Value slope =
            arith::SubFOp::create(b, loc, tb.constant(type, 1.0), square);
        return tb.mul(t[0], slope);
      })
      .Case([&](math::SqrtOp) { return tb.scaled(tb.div(t[0], y), 0.5); })
      // d a^(-1/2) = -1/2 a^(-3/2) da = -1/2 y^3 da.
      .Case([&](math::RsqrtOp) -> Value {
        Value cube = arith::MulFOp::create(
            b, loc, arith::MulFOp::create(b, loc, y, y), y);
        return tb.scaled(tb.mul(t[0], cube), -0.5);
      })
      .Case([&](math::AbsFOp) -> Value {
        Value sign =
            math::CopySignOp::create(b, loc, tb.constant(type, 1.0), x[0]);
        return tb.mul(t[0], sign);
      })
      .Case([&](math::SinOp) -> Value {
        return tb.mul(t[0], math::CosOp::create(b, loc, x[0]));
      })
      .Case([&](math::CosOp) -> Value {
        return tb.sub(Value(), tb.mul(t[0], math::SinOp::create(b, loc, x[0])));
      })
      .Case([&](math::FmaOp) {
        Value left = tb.mul(t[0], x[1]);
        Value right = tb.mul(t[1], x[0]);
        return tb.add(tb.add(left, right), t[2]);
      })
      .Default([](Operation *) { return failure(); });
}

} // namespace

LogicalResult mlir::fa::buildScoreModGradient(Operation *owner,
                                              Region &scoreMod, Region &grad) {
  assert(!scoreMod.empty() && grad.empty() && "expected a score_mod");
  Block &source = scoreMod.front();
  Block *target = new Block();
  grad.push_back(target);
  for (BlockArgument arg : source.getArguments())
    target->addArgument(arg.getType(), arg.getLoc());
  OpBuilder b = OpBuilder::atBlockEnd(target);
  Location loc = owner->getLoc();
  TangentBuilder tb{b, loc};
  IRMapping primal;
  primal.map(source.getArguments(), target->getArguments());
  // Source values that depend on the score -> their tangents in `grad`.
  DenseMap<Value, Value> tangents;
  Value score = source.getArgument(0);
  tangents[score] = tb.constant(score.getType(), 1.0);

  auto fail = [&](Operation &op) {
    grad.dropAllReferences();
    grad.getBlocks().clear();
    return owner->emitOpError()
           << "fa-differentiate-score-mod: cannot differentiate '"
           << op.getName() << "' (an op of the score_mod that depends on the "
           << "score); differentiable: arith addf, subf, mulf, divf, negf, "
              "extf, truncf, select, maximumf, minimumf, maxnumf, minnumf, "
              "cmpf; math exp, exp2, log, log2, log1p, tanh, sqrt, rsqrt, "
              "absf, sin, cos, fma";
  };
  for (Operation &op : source.without_terminator()) {
    // Whether the op reads a value that depends on the score, in its
    // operands or (for an op with regions) in its body.
    bool depends = false;
    op.walk([&](Operation *inner) {
      for (Value v : inner->getOperands())
        depends |= tangents.contains(v);
    });
    Operation *copy = b.clone(op, primal);
    if (!depends)
      continue;
    // A comparison is locally constant in the score: derivative 0.
    if (isa<arith::CmpFOp>(op))
      continue;
    if (op.getNumRegions() != 0 || op.getNumResults() != 1)
      return fail(op);
    SmallVector<Value> operandTangents = llvm::map_to_vector(
        op.getOperands(), [&](Value v) { return tangents.lookup(v); });
    FailureOr<Value> tangent = tangentOf(tb, &op, copy->getOperands(),
                                         operandTangents, copy->getResult(0));
    if (failed(tangent))
      return fail(op);
    if (*tangent)
      tangents[op.getResult(0)] = *tangent;
  }
  Value yielded = cast<YieldOp>(source.getTerminator()).getValue();
  YieldOp::create(b, loc, tb.orZero(tangents.lookup(yielded), score.getType()));
  return success();
}

namespace {

struct FADifferentiateScoreModPass final
    : fa::impl::FADifferentiateScoreModBase<FADifferentiateScoreModPass> {
  using Base::Base;

  void runOnOperation() override {
    WalkResult result = getOperation()->walk([](AttentionBackwardOp op) {
      if (!op.hasScoreMod() || op.hasScoreModGrad())
        return WalkResult::advance();
      if (failed(buildScoreModGradient(op, op.getScoreMod(),
                                       op.getScoreModGrad())))
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
