//===- RecognizeBuiltinModifiers.cpp - Modifiers that are built-ins -------===//
//
// A score_mod that states the softcap, `c * tanh(s / c)`, becomes the op's
// `softcap c`: the kernels' built-in softcap folds the scale and log2(e) into
// its factors, where the modifier costs a product, a division and a product
// more per score. The function is the same; the rounding of its steps is
// not (the built-in computes tanh(x * (scale / c)) * (c * log2 e)).
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Transforms/Passes.h"

#include "fa/Dialect/FA/IR/FAOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"

#include <cmath>
#include <optional>

namespace mlir::fa {
#define GEN_PASS_DEF_FARECOGNIZEBUILTINMODIFIERS
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

/// `v`'s value if it is a float constant.
static std::optional<double> constantOf(Value v) {
  FloatAttr attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  return attr.getValueAsDouble();
}

/// c when the score_mod `region` yields c * tanh(s / c) (or tanh(s * (1 /
/// c)) * c; the product's operands in either order) of its score s, with a
/// finite constant c > 0.
static std::optional<double> softcapOf(Region &region) {
  Block &body = region.front();
  Value score = body.getArgument(0);
  auto product =
      body.getTerminator()->getOperand(0).getDefiningOp<arith::MulFOp>();
  if (!product)
    return std::nullopt;
  for (auto [t, c] : {std::pair(product.getLhs(), product.getRhs()),
                      std::pair(product.getRhs(), product.getLhs())}) {
    std::optional<double> cap = constantOf(c);
    auto tanh = t.getDefiningOp<math::TanhOp>();
    if (!cap || !tanh || !(*cap > 0) || !std::isfinite(*cap))
      continue;
    Value in = tanh.getOperand();
    if (auto div = in.getDefiningOp<arith::DivFOp>())
      if (div.getLhs() == score && constantOf(div.getRhs()) == cap)
        return cap;
    if (auto scaled = in.getDefiningOp<arith::MulFOp>())
      for (auto [x, k] : {std::pair(scaled.getLhs(), scaled.getRhs()),
                          std::pair(scaled.getRhs(), scaled.getLhs())})
        if (x == score && constantOf(k) ==
                              static_cast<double>(static_cast<float>(1.0 / *cap)))
          return cap;
  }
  return std::nullopt;
}

/// Replaces `op`'s score_mod (and its derivative `grad`, a backward's) by
/// the softcap attribute when the score_mod is the softcap and the op has
/// none. (Such a score_mod reads no capture, so the captures, if any, are
/// the mask_mod's.)
template <typename OpT>
static void recognizeSoftcap(OpT op, Region *grad) {
  if (!op.hasScoreMod() || op.getSoftcapAttr() || op.getDynamicSoftcap())
    return;
  std::optional<double> cap = softcapOf(op.getScoreMod());
  if (!cap)
    return;
  Builder b(op.getContext());
  op.setSoftcapAttr(b.getF32FloatAttr(static_cast<float>(*cap)));
  op.getScoreMod().getBlocks().clear();
  if (grad)
    grad->getBlocks().clear();
  if (!op.hasMaskMod())
    op.getCapturesMutable().clear();
}

namespace {

struct FARecognizeBuiltinModifiersPass final
    : fa::impl::FARecognizeBuiltinModifiersBase<
          FARecognizeBuiltinModifiersPass> {
  using Base::Base;

  void runOnOperation() override {
    getOperation()->walk([](Operation *op) {
      if (auto fwd = dyn_cast<AttentionOp>(op))
        recognizeSoftcap(fwd, nullptr);
      else if (auto bwd = dyn_cast<AttentionBackwardOp>(op))
        recognizeSoftcap(bwd, &bwd.getScoreModGrad());
    });
  }
};

} // namespace
