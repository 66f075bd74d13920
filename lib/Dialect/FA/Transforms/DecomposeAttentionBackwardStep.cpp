//===- DecomposeAttentionBackwardStep.cpp - Backward tile into linalg -----===//
//
// Expands fa.attention_backward_step into linalg on tiles: the body of the
// FlashAttention-2 backward for one (query block, key block) pair. P is
// recomputed from the saved LSE, so no max or sum reduction is redone:
//
//   S  = Q K^T                      linalg.matmul, f32 acc  [Br, Bc]
//   P  = exp2(S * c - LSE * log2e)  c = scale * log2e; 0 where hidden or
//                                   where LSE = +inf; one generic, which
//                                   also gives P in the element type
//   dP = dO V^T                     linalg.matmul, f32 acc  [Br, Bc]
//   dS = P * (dP - Di)              [* (1 - t^2) with softcap], in the
//                                   element type
//   dK += dS^T Q, dV += P^T dO      (with dkv)
//   dQ += dS K                      (with dq)
//
// With a softcap the score is s = (softcap * log2e) * t with
// t = tanh(S * scale / softcap): log2(e) is applied after the tanh, and
// 1 - t^2 (the tanh's derivative) comes out of the same generic for dS.
//
// P is zeroed by a select, never by a product, so an overflowing exp2 on a
// hidden score or a row with LSE = +inf cannot leak a NaN. P and dS are
// rounded to the input element type as the operands of their GEMMs, as
// tensor cores consume them. Transposes are indexing maps of named
// linalg.matmul ops, so every GEMM stays a contraction that a GPU lowering
// can map to MMA fragments.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Transforms/Passes.h"

#include "BuilderUtils.h"

#include "mlir/Dialect/Tensor/Utils/Utils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FADECOMPOSEATTENTIONBACKWARDSTEP
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::detail;

using utils::IteratorType;

constexpr double kLog2e = 1.4426950408889634;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static Value f32Inf(OpBuilder &b, Location loc) {
  return arith::ConstantOp::create(
      b, loc,
      b.getFloatAttr(b.getF32Type(), APFloat::getInf(APFloat::IEEEsingle())));
}

/// Maps for a 2-D elementwise generic whose operands are either whole tiles
/// or per-row vectors.
static AffineMap tileMap(MLIRContext *ctx) {
  return AffineMap::getMultiDimIdentityMap(2, ctx);
}
static AffineMap rowMap(MLIRContext *ctx) {
  return AffineMap::get(2, 0, {getAffineDimExpr(0, ctx)}, ctx);
}

/// acc += op(lhs) * op(rhs) as a named linalg.matmul. Transposes are
/// indexing maps, so every GEMM stays a contraction a GPU lowering can map
/// to MMA fragments, and f16/bf16 operands are widened into the f32 acc.
static Value buildMatmul(OpBuilder &b, Location loc, Value lhs, Value rhs,
                         Value acc, bool transposeLhs, bool transposeRhs) {
  auto matmul = linalg::MatmulOp::create(b, loc, TypeRange{acc.getType()},
                                         ValueRange{lhs, rhs}, ValueRange{acc});
  if (transposeLhs || transposeRhs) {
    MLIRContext *ctx = b.getContext();
    AffineExpr m = getAffineDimExpr(0, ctx), n = getAffineDimExpr(1, ctx),
               k = getAffineDimExpr(2, ctx);
    auto map = [&](AffineExpr r, AffineExpr c) {
      return AffineMap::get(3, 0, {r, c}, ctx);
    };
    matmul.setIndexingMapsAttr(b.getAffineMapArrayAttr(
        {transposeLhs ? map(k, m) : map(m, k),
         transposeRhs ? map(n, k) : map(k, n), map(m, n)}));
  }
  return matmul.getResult(0);
}

//===----------------------------------------------------------------------===//
// fa.attention_backward_step
//===----------------------------------------------------------------------===//

namespace {

/// P recomputed from the saved LSE, with what the gradient also needs.
struct Probabilities {
  Value p;       // f32 [Br, Bc], for dS.
  Value pLow;    // P in the element type, for the dV GEMM (== p for f32).
  Value capGrad; // d(logit) / d(scaled score): 1 - tanh^2 with softcap,
                 // times score_mod_grad with a score_mod; else null.
};

/// The tile sizes and attributes every piece of one step shares.
struct StepInfo {
  Location loc;
  Type elemType;
  Type f32Type;
  SmallVector<OpFoldResult> tileSizes; // {Br, Bc}
  bool softcap;
  ScoreFactors factors; // of exp2: log2(e) folded in
  std::optional<fa::detail::TileVisibility> visibility; // Only with `masked`.
  /// With modifiers: the step (regions, captures, positions), the scale and
  /// the softcap value.
  mutable AttentionBackwardStepOp modified; // (op handles: non-const API)
  Value scale, cap;
};

} // namespace

/// P = exp2(s * log2e - LSE * log2e) with s = S * scale, or with softcap
/// s = c * tanh(S * scale / c). No max/sum reduction: the LSE already holds
/// both. P = 0 where the key is not visible and on rows with LSE = +inf
/// (selected, never multiplied, so an overflowing exp2 cannot leak a NaN).
static Probabilities recomputeProbabilities(OpBuilder &b, const StepInfo &s,
                                            Value scores, Value lseTile) {
  Location loc = s.loc;
  MLIRContext *ctx = b.getContext();
  bool lowP = !s.elemType.isF32();
  SmallVector<Value> inits = {
      tensor::EmptyOp::create(b, loc, s.tileSizes, s.f32Type)};
  if (lowP)
    inits.push_back(tensor::EmptyOp::create(b, loc, s.tileSizes, s.elemType));
  bool scoreMod = s.modified && s.modified.hasScoreMod();
  bool chain = s.softcap || scoreMod;
  if (chain)
    inits.push_back(tensor::EmptyOp::create(b, loc, s.tileSizes, s.f32Type));
  SmallVector<AffineMap> maps = {tileMap(ctx), rowMap(ctx)};
  maps.append(inits.size(), tileMap(ctx));
  SmallVector<IteratorType> iterators(2, IteratorType::parallel);

  auto generic = linalg::GenericOp::create(
      b, loc, ValueRange(inits).getTypes(), ValueRange{scores, lseTile}, inits,
      maps, iterators, [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value score = args[0], lse = args[1];
        SmallVector<Value> results;
        Value logits, capGrad;
        if (scoreMod) {
          // Natural units: the score_mod of the scaled score, then the
          // softcap; the chain factor is softcap' * score_mod'.
          Value x = arith::MulFOp::create(nb, nl, score, s.scale);
          Value y = inlineModifier(
              nb, s.modified.getScoreMod(),
              fa::detail::tileModifierArguments(nb, nl, s.modified, x));
          capGrad = inlineModifier(
              nb, s.modified.getScoreModGrad(),
              fa::detail::tileModifierArguments(nb, nl, s.modified, x));
          Value log2e = f32Const(nb, nl, kLog2e);
          if (s.softcap) {
            Value t = math::TanhOp::create(
                nb, nl, arith::DivFOp::create(nb, nl, y, s.cap));
            logits = arith::MulFOp::create(
                nb, nl, arith::MulFOp::create(nb, nl, t, s.cap), log2e);
            Value t2 = arith::MulFOp::create(nb, nl, t, t);
            capGrad = arith::MulFOp::create(
                nb, nl, capGrad,
                arith::SubFOp::create(nb, nl, f32Const(nb, nl, 1.0), t2));
          } else {
            logits = arith::MulFOp::create(nb, nl, y, log2e);
          }
        } else if (s.softcap) {
          Value t = math::TanhOp::create(
              nb, nl, arith::MulFOp::create(nb, nl, score, s.factors.capIn));
          logits = arith::MulFOp::create(nb, nl, t, s.factors.expFactor);
          Value t2 = arith::MulFOp::create(nb, nl, t, t);
          capGrad = arith::SubFOp::create(nb, nl, f32Const(nb, nl, 1.0), t2);
        } else {
          logits = arith::MulFOp::create(nb, nl, score, s.factors.expFactor);
        }
        Value lseLog2 =
            arith::MulFOp::create(nb, nl, lse, f32Const(nb, nl, kLog2e));
        Value prob = math::Exp2Op::create(
            nb, nl, arith::SubFOp::create(nb, nl, logits, lseLog2));
        Value keep = arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OLT,
                                           lse, f32Inf(nb, nl));
        if (s.visibility)
          keep = arith::AndIOp::create(nb, nl, keep,
                                       s.visibility->isVisible(nb, nl));
        if (s.modified && s.modified.hasMaskMod())
          keep = arith::AndIOp::create(
              nb, nl, keep,
              inlineModifier(nb, s.modified.getMaskMod(),
                             fa::detail::tileModifierArguments(
                                 nb, nl, s.modified, Value())));
        prob =
            arith::SelectOp::create(nb, nl, keep, prob, f32Const(nb, nl, 0.0));
        results.push_back(prob);
        if (lowP)
          results.push_back(truncateTo(nb, nl, s.elemType, prob));
        if (capGrad)
          results.push_back(capGrad);
        linalg::YieldOp::create(nb, nl, results);
      });

  Probabilities probs;
  probs.p = generic.getResult(0);
  probs.pLow = lowP ? generic.getResult(1) : probs.p;
  if (chain)
    probs.capGrad = generic.getResults().back();
  return probs;
}

/// dS = P * (dP - Di), times the softcap's tanh' when present; produced in
/// the element type, the operand type of the dK and dQ GEMMs.
static Value computeScoreGradient(OpBuilder &b, const StepInfo &s,
                                  const Probabilities &probs, Value dP,
                                  Value deltaTile) {
  Location loc = s.loc;
  MLIRContext *ctx = b.getContext();
  SmallVector<Value> inputs = {probs.p, dP, deltaTile};
  SmallVector<AffineMap> maps = {tileMap(ctx), tileMap(ctx), rowMap(ctx)};
  if (probs.capGrad) {
    inputs.push_back(probs.capGrad);
    maps.push_back(tileMap(ctx));
  }
  maps.push_back(tileMap(ctx));
  Value init = tensor::EmptyOp::create(b, loc, s.tileSizes, s.elemType);
  SmallVector<IteratorType> iterators(2, IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, TypeRange{init.getType()}, inputs, ValueRange{init}, maps,
             iterators,
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               Value diff = arith::SubFOp::create(nb, nl, args[1], args[2]);
               Value ds = arith::MulFOp::create(nb, nl, args[0], diff);
               if (probs.capGrad)
                 ds = arith::MulFOp::create(nb, nl, ds, args[3]);
               linalg::YieldOp::create(nb, nl,
                                       truncateTo(nb, nl, s.elemType, ds));
             })
      .getResult(0);
}

namespace {

struct DecomposeAttentionBackwardStep final
    : OpRewritePattern<AttentionBackwardStepOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionBackwardStepOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    StepInfo s{loc, op.getQuery().getType().getElementType(),
               rewriter.getF32Type()};
    s.tileSizes = {tensor::getMixedSize(rewriter, loc, op.getQuery(), 0),
                   tensor::getMixedSize(rewriter, loc, op.getKey(), 0)};
    s.softcap = op.hasSoftcap();
    s.factors = ScoreFactors::build(rewriter, loc, op.buildScale(rewriter, loc),
                                    op.buildSoftcap(rewriter, loc), kLog2e);
    if (op.isMasked())
      s.visibility = fa::detail::TileVisibility::build(rewriter, loc, op);
    if (op.hasModifiers()) {
      s.modified = op;
      s.scale = op.buildScale(rewriter, loc);
      if (s.softcap)
        s.cap = op.buildSoftcap(rewriter, loc);
    }

    // S = Q K^T, P from the LSE, dP = dO V^T, dS = P (dP - Di).
    Value scores =
        buildMatmul(rewriter, loc, op.getQuery(), op.getKey(),
                    zeroTensor(rewriter, loc, s.tileSizes, s.f32Type),
                    /*transposeLhs=*/false, /*transposeRhs=*/true);
    Probabilities probs =
        recomputeProbabilities(rewriter, s, scores, op.getLse());
    Value dP = buildMatmul(rewriter, loc, op.getDout(), op.getValue(),
                           zeroTensor(rewriter, loc, s.tileSizes, s.f32Type),
                           /*transposeLhs=*/false, /*transposeRhs=*/true);
    Value dS = computeScoreGradient(rewriter, s, probs, dP, op.getDelta());

    // dK += dS^T Q, dV += P^T dO, dQ += dS K: the results in their order.
    SmallVector<Value> results;
    if (Value dkAcc = op.getDkAcc()) {
      results.push_back(buildMatmul(rewriter, loc, dS, op.getQuery(), dkAcc,
                                    /*transposeLhs=*/true,
                                    /*transposeRhs=*/false));
      results.push_back(buildMatmul(rewriter, loc, probs.pLow, op.getDout(),
                                    op.getDvAcc(), /*transposeLhs=*/true,
                                    /*transposeRhs=*/false));
    }
    if (Value dqAcc = op.getDqAcc())
      results.push_back(buildMatmul(rewriter, loc, dS, op.getKey(), dqAcc,
                                    /*transposeLhs=*/false,
                                    /*transposeRhs=*/false));
    rewriter.replaceOp(op, results);
    return success();
  }
};

} // namespace

void mlir::fa::populateDecomposeAttentionBackwardStepPatterns(
    RewritePatternSet &patterns) {
  patterns.add<DecomposeAttentionBackwardStep>(patterns.getContext());
}

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

namespace {
struct FADecomposeAttentionBackwardStepPass final
    : fa::impl::FADecomposeAttentionBackwardStepBase<
          FADecomposeAttentionBackwardStepPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateDecomposeAttentionBackwardStepPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
