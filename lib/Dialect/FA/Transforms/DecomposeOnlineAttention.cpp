//===- DecomposeOnlineAttention.cpp - Online softmax into linalg ----------===//
//
// Expands fa.online_attention into linalg on tiles, the FlashAttention-2 way,
// and fa.online_attention_finalize into the one normalization after the loop.
//
// One step over a key block, with c = scale (* log2 e with `exp2`; without
// it, exp2 below reads exp):
//
//   S     = Q K^T                    linalg.matmul, f32 accumulator  [Br, Bc]
//   S     = mask(S)                  only with `masked`: -inf where hidden
//   rmax  = rowmax(S)                                                [Br]
//   m'    = max(m, c * rmax)         valid because c > 0
//   ms    = m' == -inf ? 0 : m'      a row that saw no key gives p = 0
//   alpha = exp2(m - ms)
//   P     = exp2(fma(S, c, -ms))     one fma and one exp per score
//   sum'  = alpha * sum + rowsum(P)
//   acc'  = alpha * acc + P V        P in v's element type, f32 accumulator
//
// The scaled scores are never materialized. With a softcap they are:
// s = (softcap [* log2 e]) * tanh(S * scale / softcap), the log2 e factor
// applied after the tanh, and then c = 1.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Transforms/Passes.h"

#include "BuilderUtils.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/MathExtras.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FADECOMPOSEONLINEATTENTION
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

using utils::IteratorType;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static Value createF32Constant(OpBuilder &b, Location loc, float value) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
}

static Value createF32Inf(OpBuilder &b, Location loc, bool negative) {
  APFloat inf = APFloat::getInf(APFloat::IEEEsingle(), negative);
  return arith::ConstantOp::create(b, loc, b.getFloatAttr(b.getF32Type(), inf));
}

/// A tensor of the given (static or dynamic) sizes filled with `value`.
static Value createFilled(OpBuilder &b, Location loc,
                          ArrayRef<OpFoldResult> sizes, Value value) {
  Value empty = tensor::EmptyOp::create(b, loc, sizes, value.getType());
  return linalg::FillOp::create(b, loc, value, empty).getResult(0);
}

static Value createExp(OpBuilder &b, Location loc, Value x, bool exp2) {
  if (exp2)
    return math::Exp2Op::create(b, loc, x);
  return math::ExpOp::create(b, loc, x);
}

/// Maps of a [rows, cols] iteration space: the whole tile and its rows.
struct TileMaps {
  AffineMap tile; // (r, c) -> (r, c)
  AffineMap row;  // (r, c) -> (r)

  explicit TileMaps(MLIRContext *ctx)
      : tile(AffineMap::getMultiDimIdentityMap(2, ctx)),
        row(AffineMap::get(2, 0, getAffineDimExpr(0, ctx))) {}
};

/// A row reduction over a [rows, cols] tile into `init` ([rows]).
static Value createRowReduction(
    OpBuilder &b, Location loc, Value tile, Value init,
    function_ref<Value(OpBuilder &, Location, Value, Value)> combine) {
  TileMaps maps(b.getContext());
  return linalg::GenericOp::create(
             b, loc, init.getType(), tile, init, {maps.tile, maps.row},
             {IteratorType::parallel, IteratorType::reduction},
             [&](OpBuilder &nb, Location nloc, ValueRange args) {
               linalg::YieldOp::create(nb, nloc,
                                       combine(nb, nloc, args[0], args[1]));
             })
      .getResult(0);
}

//===----------------------------------------------------------------------===//
// fa.online_attention
//===----------------------------------------------------------------------===//

namespace {

struct DecomposeOnlineAttention final : OpRewritePattern<OnlineAttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(OnlineAttentionOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    Type f32 = rewriter.getF32Type();
    Type valueElt = op.getValue().getType().getElementType();
    bool exp2 = op.getExp2();
    double log2e = exp2 ? llvm::numbers::log2e : 1.0;
    bool softcap = op.hasSoftcap();
    TileMaps maps(ctx);

    OpFoldResult br = tensor::getMixedSize(rewriter, loc, op.getQuery(), 0);
    OpFoldResult bc = tensor::getMixedSize(rewriter, loc, op.getKey(), 0);
    SmallVector<OpFoldResult> scoreSizes = {br, bc};

    // S = Q K^T, accumulated in f32 from the input element type.
    Value zero = createF32Constant(rewriter, loc, 0.0f);
    Value negInf = createF32Inf(rewriter, loc, /*negative=*/true);
    Value scoreInit = createFilled(rewriter, loc, scoreSizes, zero);
    Value scores = linalg::MatmulTransposeBOp::create(
                       rewriter, loc, TypeRange{scoreInit.getType()},
                       ValueRange{op.getQuery(), op.getKey()}, scoreInit)
                       .getResult(0);
    auto scoreType = cast<RankedTensorType>(scores.getType());

    // Softcap and/or mask, in place on S, in one elementwise generic. After
    // it, the scores to exponentiate are c * S.
    ScoreFactors factors =
        ScoreFactors::build(rewriter, loc, op.buildScale(rewriter, loc),
                            op.buildSoftcap(rewriter, loc), log2e);
    Value cValue = factors.expFactor;
    std::optional<fa::detail::TileVisibility> mask;
    if (op.isMasked())
      mask = fa::detail::TileVisibility::build(rewriter, loc, op);
    bool scoreMod = op.hasScoreMod(), maskMod = op.hasMaskMod();
    if (softcap || mask || scoreMod) {
      Value inScale, outScale, scale, capValue, log2eValue;
      if (scoreMod) {
        // The score_mod reads natural-unit scores: scale first, then the
        // modifier, the softcap and log2(e) on its result.
        scale = op.buildScale(rewriter, loc);
        capValue = softcap ? op.buildSoftcap(rewriter, loc) : Value();
        log2eValue = createF32Constant(rewriter, loc, log2e);
        cValue = createF32Constant(rewriter, loc, 1.0f);
      } else if (softcap) {
        inScale = factors.capIn;
        // log2(e) goes outside the tanh: it scales the capped score.
        outScale = factors.expFactor;
        cValue = createF32Constant(rewriter, loc, 1.0f);
      }
      scores = linalg::GenericOp::create(
                   rewriter, loc, scoreType, ValueRange{}, scores, {maps.tile},
                   {IteratorType::parallel, IteratorType::parallel},
                   [&](OpBuilder &b, Location l, ValueRange args) {
                     Value s = args[0];
                     if (scoreMod) {
                       s = arith::MulFOp::create(b, l, s, scale);
                       s = inlineModifier(b, op.getScoreMod(),
                                          fa::detail::tileModifierArguments(b, l, op, s));
                       if (softcap) {
                         s = math::TanhOp::create(
                             b, l, arith::DivFOp::create(b, l, s, capValue));
                         s = arith::MulFOp::create(b, l, s, capValue);
                       }
                       if (log2e != 1.0)
                         s = arith::MulFOp::create(b, l, s, log2eValue);
                     } else if (softcap) {
                       s = arith::MulFOp::create(b, l, s, inScale);
                       s = math::TanhOp::create(b, l, s);
                       s = arith::MulFOp::create(b, l, s, outScale);
                     }
                     if (mask) {
                       Value visible = mask->isVisible(b, l);
                       if (maskMod)
                         visible = arith::AndIOp::create(
                             b, l, visible,
                             inlineModifier(b, op.getMaskMod(),
                                            fa::detail::tileModifierArguments(b, l, op, Value())));
                       s = arith::SelectOp::create(b, l, visible, s, negInf);
                     }
                     linalg::YieldOp::create(b, l, s);
                   })
                   .getResult(0);
    }
    bool unitC = matchPattern(cValue, m_OneFloat());

    // rmax = rowmax(S).
    Value rowMax = createRowReduction(
        rewriter, loc, scores, createFilled(rewriter, loc, {br}, negInf),
        [](OpBuilder &b, Location l, Value s, Value m) -> Value {
          return arith::MaximumFOp::create(b, l, s, m);
        });

    // Per row: m' = max(m, c * rmax), ms = (m' == -inf ? 0 : m'),
    // alpha = exp(m - ms), and alpha * sum, which rowsum(P) accumulates into.
    // -ms is kept so that P is one fma per score. The state is updated in
    // place (outs = max, sum) so that a loop carrying it stays in place.
    Type rowType = op.getMax().getType();
    AffineMap rowId = AffineMap::getMultiDimIdentityMap(1, ctx);
    // Shaped like the state (which may be more static than the query tile).
    auto rowEmpty = [&]() -> Value {
      return tensor::EmptyOp::create(
          rewriter, loc, tensor::getMixedSizes(rewriter, loc, op.getMax()),
          f32);
    };
    auto rowUpdate = linalg::GenericOp::create(
        rewriter, loc, TypeRange{rowType, rowType, rowType, rowType}, rowMax,
        ValueRange{op.getMax(), rowEmpty(), rowEmpty(), op.getSum()},
        SmallVector<AffineMap>(5, rowId), {IteratorType::parallel},
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value blockMax = args[0], oldMax = args[1], oldSum = args[4];
          if (!unitC)
            blockMax = arith::MulFOp::create(b, l, blockMax, cValue);
          Value newMax = arith::MaximumFOp::create(b, l, oldMax, blockMax);
          Value noKey = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ,
                                              newMax, negInf);
          Value safeMax = arith::SelectOp::create(b, l, noKey, zero, newMax);
          Value alpha = createExp(
              b, l, arith::SubFOp::create(b, l, oldMax, safeMax), exp2);
          linalg::YieldOp::create(
              b, l,
              ValueRange{newMax, arith::NegFOp::create(b, l, safeMax), alpha,
                         arith::MulFOp::create(b, l, alpha, oldSum)});
        });
    Value newMax = rowUpdate.getResult(0);
    Value negSafeMax = rowUpdate.getResult(1);
    Value alpha = rowUpdate.getResult(2);
    Value scaledSum = rowUpdate.getResult(3);

    // P = exp(c * S - ms), in f32 over S for the row sum, and in v's element
    // type for the P V matmul (what tensor cores consume).
    SmallVector<Type> pTypes = {scoreType};
    SmallVector<Value> pInits = {scores};
    if (valueElt != f32) {
      pTypes.push_back(scoreType.clone(valueElt));
      pInits.push_back(
          tensor::EmptyOp::create(rewriter, loc, scoreSizes, valueElt));
    }
    SmallVector<AffineMap> pMaps = {maps.row};
    pMaps.append(pInits.size(), maps.tile);
    auto pOp = linalg::GenericOp::create(
        rewriter, loc, pTypes, negSafeMax, pInits, pMaps,
        {IteratorType::parallel, IteratorType::parallel},
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value negMax = args[0], s = args[1];
          Value x =
              unitC ? arith::AddFOp::create(b, l, s, negMax)
                    : math::FmaOp::create(b, l, s, cValue, negMax).getResult();
          Value p = createExp(b, l, x, exp2);
          SmallVector<Value> results = {p};
          if (valueElt != f32)
            results.push_back(arith::TruncFOp::create(b, l, valueElt, p));
          linalg::YieldOp::create(b, l, results);
        });
    Value probs = pOp.getResult(0);
    Value probsForMatmul = pOp.getResults().back();

    // sum' = alpha * sum + rowsum(P).
    Value newSum = createRowReduction(
        rewriter, loc, probs, scaledSum,
        [](OpBuilder &b, Location l, Value p, Value s) -> Value {
          return arith::AddFOp::create(b, l, p, s);
        });

    // acc' = alpha * acc + P V.
    Value acc = op.getAcc();
    Value scaledAcc =
        linalg::GenericOp::create(
            rewriter, loc, acc.getType(), alpha, acc, {maps.row, maps.tile},
            {IteratorType::parallel, IteratorType::parallel},
            [&](OpBuilder &b, Location l, ValueRange args) {
              Value x = arith::MulFOp::create(b, l, args[0], args[1]);
              linalg::YieldOp::create(b, l, x);
            })
            .getResult(0);
    Value newAcc =
        linalg::MatmulOp::create(rewriter, loc, TypeRange{acc.getType()},
                                 ValueRange{probsForMatmul, op.getValue()},
                                 ValueRange{scaledAcc})
            .getResult(0);

    rewriter.replaceOp(op, {newAcc, newMax, newSum});
    return success();
  }
};

//===----------------------------------------------------------------------===//
// fa.online_attention_finalize
//===----------------------------------------------------------------------===//

struct DecomposeOnlineAttentionFinalize final
    : OpRewritePattern<OnlineAttentionFinalizeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(OnlineAttentionFinalizeOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    Type f32 = rewriter.getF32Type();
    bool exp2 = op.getExp2();
    TileMaps maps(ctx);

    Value zero = createF32Constant(rewriter, loc, 0.0f);
    Value one = createF32Constant(rewriter, loc, 1.0f);
    Value posInf = createF32Inf(rewriter, loc, /*negative=*/false);
    Value ln2 = createF32Constant(rewriter, loc, llvm::numbers::ln2);

    // Per row: inv = 1 / sum and the natural-log LSE; a row with sum = 0 saw
    // no key and gives out = 0 (acc is 0 too), lse = +inf.
    // The generics are shaped like the state, which may be more static than
    // the op's results (the verifier lets them differ in static-ness); the
    // results are cast to the op's types at the end.
    SmallVector<OpFoldResult> accSizes =
        tensor::getMixedSizes(rewriter, loc, op.getAcc());
    Type rowType = op.getMax().getType();
    AffineMap rowId = AffineMap::getMultiDimIdentityMap(1, ctx);
    auto rowEmpty = [&]() -> Value {
      return tensor::EmptyOp::create(
          rewriter, loc, tensor::getMixedSizes(rewriter, loc, op.getMax()),
          f32);
    };
    auto rows = linalg::GenericOp::create(
        rewriter, loc, TypeRange{rowType, rowType},
        ValueRange{op.getMax(), op.getSum()},
        ValueRange{rowEmpty(), rowEmpty()}, SmallVector<AffineMap>(4, rowId),
        {IteratorType::parallel},
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value max = args[0], sum = args[1];
          Value noKey =
              arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ, sum, zero);
          Value inv = arith::SelectOp::create(
              b, l, noKey, zero, arith::DivFOp::create(b, l, one, sum));
          Value lse;
          if (exp2) {
            lse = arith::AddFOp::create(b, l, max,
                                        math::Log2Op::create(b, l, sum));
            lse = arith::MulFOp::create(b, l, lse, ln2);
          } else {
            lse = arith::AddFOp::create(b, l, max,
                                        math::LogOp::create(b, l, sum));
          }
          lse = arith::SelectOp::create(b, l, noKey, posInf, lse);
          linalg::YieldOp::create(b, l, ValueRange{inv, lse});
        });

    // out = acc * inv, in out's element type.
    Type outElt = op.getOut().getType().getElementType();
    Value outInit = tensor::EmptyOp::create(rewriter, loc, accSizes, outElt);
    Value out = linalg::GenericOp::create(
                    rewriter, loc, outInit.getType(),
                    ValueRange{op.getAcc(), rows.getResult(0)},
                    ValueRange{outInit}, {maps.tile, maps.row, maps.tile},
                    {IteratorType::parallel, IteratorType::parallel},
                    [&](OpBuilder &b, Location l, ValueRange args) {
                      Value x = arith::MulFOp::create(b, l, args[0], args[1]);
                      if (outElt != f32)
                        x = arith::TruncFOp::create(b, l, outElt, x);
                      linalg::YieldOp::create(b, l, x);
                    })
                    .getResult(0);

    auto castTo = [&](Value v, Type type) -> Value {
      if (v.getType() == type)
        return v;
      return tensor::CastOp::create(rewriter, loc, type, v);
    };
    rewriter.replaceOp(op, {castTo(out, op.getOut().getType()),
                            castTo(rows.getResult(1), op.getLse().getType())});
    return success();
  }
};

} // namespace

void mlir::fa::populateDecomposeOnlineAttentionPatterns(
    RewritePatternSet &patterns) {
  patterns.add<DecomposeOnlineAttention, DecomposeOnlineAttentionFinalize>(
      patterns.getContext());
}

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

namespace {
struct FADecomposeOnlineAttentionPass final
    : fa::impl::FADecomposeOnlineAttentionBase<FADecomposeOnlineAttentionPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateDecomposeOnlineAttentionPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};
} // namespace
