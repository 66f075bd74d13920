//===- LowerToReference.cpp - fa ops to the N x N reference form ----------===//
//
// Rewrites `fa.attention` and `fa.attention_backward` into plain upstream ops
// (linalg.generic, linalg.fill, tensor, arith, math) that materialize the
// whole score matrix and compute everything in f32: the golden semantics that
// every optimized lowering is tested against. Clarity wins over speed here:
// one linalg.generic per line of the math in FADialect.td.
//
// Grouped-query attention is expressed with shapes rather than index
// arithmetic: tensors indexed by query head, `[B, Hq, ...]`, are expanded to
// `[B, Hkv, G, ...]` (G = Hq / Hkv) so that every generic reads k and v with
// plain affine maps, and the results are collapsed back at the end.
//
// The modifier regions of fa.attention are cloned into the score generic
// (fa::inlineModifier): the score_mod after the scale, the mask_mod AND-ed
// with the mask attribute's visibility, their indices from linalg.index (the
// query head is kv head * G + group member).
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Transforms/Passes.h"

#include "BuilderUtils.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <limits>

namespace mlir::fa {
#define GEN_PASS_DEF_FALOWERTOREFERENCE
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

using utils::IteratorType;

/// Returns the first static size among `sizes`, or dynamic when none is.
static int64_t firstStatic(ArrayRef<int64_t> sizes) {
  for (int64_t size : sizes)
    if (!ShapedType::isDynamic(size))
      return size;
  return ShapedType::kDynamic;
}

static int64_t staticOf(OpFoldResult ofr) {
  return getConstantIntValue(ofr).value_or(ShapedType::kDynamic);
}

/// Builds the reference form of one attention op. Holds what every step
/// needs: the problem sizes, the element type and the score attributes.
class ReferenceBuilder {
public:
  ReferenceBuilder(OpBuilder &b, Location loc, Type elementType, Value scale,
                   MaskAttrInterface mask, ValueRange maskOperands,
                   Value softcap)
      : b(b), loc(loc), elementType(elementType), scale(scale), mask(mask),
        maskOperands(maskOperands), softcap(softcap) {}

  /// Computes the problem sizes from q, k, v and the tensors shaped like q's
  /// rows (`rowTensors`: out, dout, lse), and casts all of them to types that
  /// agree on every static size any of them knows. Returns the casts in the
  /// order q, k, v, rowTensors...
  SmallVector<Value> normalize(Value q, Value k, Value v,
                               ArrayRef<Value> rowTensors);

  /// `[B, Hq, rest...]` -> `[B, Hkv, G, rest...]`.
  Value expandHeads(Value t);
  /// `[B, Hkv, G, rest...]` -> `[B, Hq, rest...]`, cast to `resultType`.
  Value collapseHeads(Value t, Type resultType);

  /// The op's modifier regions (null when absent) and the values their
  /// capture arguments stand for.
  void setModifiers(Region *score, Region *visible, ValueRange captured) {
    scoreMod = score;
    maskMod = visible;
    captures = captured;
  }

  /// S_raw[b,h,g,i,j] = sum_d q[b,h,g,i,d] * k[b,h,j,d], in f32.
  Value rawScores(Value q5, Value k);
  /// In a score generic (loops b, h, g, i, j): scale * raw, then the
  /// score_mod, then softcap * tanh(s / softcap), each when the op has it.
  Value scoreFromRaw(OpBuilder &nb, Location nl, Value raw);
  /// i1: is key `j` visible from query `i` by the mask attribute; null when
  /// every key is.
  Value isVisible(OpBuilder &nb, Location nl, Value i, Value j);

  /// In a score generic: the mask attribute's visibility of the current
  /// (i, j) = loops (3, 4), AND the mask_mod's; null when every key is
  /// visible.
  Value isVisibleHere(OpBuilder &nb, Location nl);

  /// A modifier's arguments for the current element of a score generic:
  /// (`score`, if given,) b, the query head h * G + g, i, j, the captures.
  SmallVector<Value> modifierArguments(OpBuilder &nb, Location nl, Value score);

  /// A generic writing into `init`; `body` returns the value to yield.
  Value generic(ValueRange inputs, Value init, ArrayRef<AffineMap> maps,
                ArrayRef<IteratorType> iterators,
                function_ref<Value(OpBuilder &, Location, ValueRange)> body);
  /// init[outMap] = sum over the trailing `numReductions` loops of
  /// f32(a[aMap]) * f32(c[cMap]); `init` starts at zero.
  Value contract(Value a, ArrayRef<unsigned> aDims, Value c,
                 ArrayRef<unsigned> cDims, ArrayRef<unsigned> outDims,
                 ArrayRef<OpFoldResult> outSizes, unsigned numReductions);
  /// Reduces the last dimension of `t` with `combine`, starting at `init`;
  /// `sizes` are those of the result.
  Value
  reduceRows(Value t, ArrayRef<OpFoldResult> sizes, double init,
             function_ref<Value(OpBuilder &, Location, Value, Value)> combine);
  /// Elementwise f32 -> the op's element type (a no-op for f32); `sizes`
  /// are those of `t`.
  Value toElementType(Value t, ArrayRef<OpFoldResult> sizes);

  Value emptyF32(ArrayRef<OpFoldResult> sizes) {
    return tensor::EmptyOp::create(b, loc, sizes, b.getF32Type());
  }
  Value filledF32(ArrayRef<OpFoldResult> sizes, double value);
  Value f32Const(OpBuilder &nb, Location nl, double value) {
    return arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(value));
  }
  static Value toF32(OpBuilder &nb, Location nl, Value x) {
    if (x.getType().isF32())
      return x;
    return arith::ExtFOp::create(nb, nl, nb.getF32Type(), x);
  }
  AffineMap map(unsigned numDims, ArrayRef<unsigned> dims) {
    return AffineMap::getMultiDimMapWithTargets(numDims, dims, b.getContext());
  }
  static SmallVector<IteratorType> iterators(unsigned numParallel,
                                             unsigned numReduction) {
    SmallVector<IteratorType> its(numParallel, IteratorType::parallel);
    its.append(numReduction, IteratorType::reduction);
    return its;
  }

  OpBuilder &b;
  Location loc;
  Type elementType;
  /// f32 values (constants or run-time operands); softcap null when absent.
  Value scale;
  /// The op's mask (null when it hides no key) and its operands.
  MaskAttrInterface mask;
  ValueRange maskOperands;
  Value softcap;
  /// The op's score_mod and mask_mod regions (null when absent) and the
  /// values of their captures.
  Region *scoreMod = nullptr, *maskMod = nullptr;
  ValueRange captures;

  // Problem sizes (static where known), and Nq, Nk as values for the mask.
  OpFoldResult batch, headsQ, headsKV, group, seqQ, seqK;
  int64_t headDim = 0, valueHeadDim = 0;
  Value seqQValue, seqKValue;
  /// The mask's parameters, built once outside the bodies.
  SmallVector<Value> maskParams;
};

SmallVector<Value> ReferenceBuilder::normalize(Value q, Value k, Value v,
                                               ArrayRef<Value> rowTensors) {
  auto type = [](Value t) { return cast<RankedTensorType>(t.getType()); };
  auto dimsOf = [&](ArrayRef<Value> ts, unsigned dim) {
    SmallVector<int64_t> sizes;
    for (Value t : ts)
      sizes.push_back(type(t).getDimSize(dim));
    return sizes;
  };
  SmallVector<Value> qRows = {q};
  llvm::append_range(qRows, rowTensors);
  SmallVector<Value> all = {q, k, v};
  llvm::append_range(all, rowTensors);

  int64_t bS = firstStatic(dimsOf(all, 0));
  int64_t hkvS = firstStatic(dimsOf({k, v}, 1));
  int64_t hqS = firstStatic(dimsOf(qRows, 1));
  // expand_shape cannot split a static head count into dynamic factors.
  if (ShapedType::isDynamic(hkvS))
    hqS = ShapedType::kDynamic;
  int64_t nqS = firstStatic(dimsOf(qRows, 2));
  int64_t nkS = firstStatic(dimsOf({k, v}, 2));
  headDim = type(q).getDimSize(3);
  valueHeadDim = type(v).getDimSize(3);

  auto castTo = [&](Value t, ArrayRef<int64_t> shape) -> Value {
    auto target = RankedTensorType::get(shape, type(t).getElementType());
    if (t.getType() == target)
      return t;
    return tensor::CastOp::create(b, loc, target, t);
  };
  SmallVector<Value> result = {castTo(q, {bS, hqS, nqS, headDim}),
                               castTo(k, {bS, hkvS, nkS, headDim}),
                               castTo(v, {bS, hkvS, nkS, valueHeadDim})};
  for (Value t : rowTensors) {
    SmallVector<int64_t> shape = {bS, hqS, nqS};
    if (type(t).getRank() == 4)
      shape.push_back(type(t).getDimSize(3));
    result.push_back(castTo(t, shape));
  }

  batch = tensor::getMixedSize(b, loc, result[0], 0);
  headsQ = tensor::getMixedSize(b, loc, result[0], 1);
  seqQ = tensor::getMixedSize(b, loc, result[0], 2);
  headsKV = tensor::getMixedSize(b, loc, result[1], 1);
  seqK = tensor::getMixedSize(b, loc, result[1], 2);
  if (!ShapedType::isDynamic(hqS) && !ShapedType::isDynamic(hkvS)) {
    group = b.getIndexAttr(hqS / hkvS);
  } else {
    group = arith::DivUIOp::create(
                b, loc, getValueOrCreateConstantIndexOp(b, loc, headsQ),
                getValueOrCreateConstantIndexOp(b, loc, headsKV))
                .getResult();
  }
  if (mask) {
    seqQValue = getValueOrCreateConstantIndexOp(b, loc, seqQ);
    seqKValue = getValueOrCreateConstantIndexOp(b, loc, seqK);
    maskParams = mask.buildParameters(b, loc, maskOperands);
  }
  return result;
}

Value ReferenceBuilder::expandHeads(Value t) {
  auto type = cast<RankedTensorType>(t.getType());
  SmallVector<int64_t> shape = {type.getDimSize(0), staticOf(headsKV),
                                staticOf(group)};
  // Every tensor expanded here is [B, Hq, Nq(, D or Dv)].
  SmallVector<OpFoldResult> sizes = {batch, headsKV, group, seqQ};
  SmallVector<ReassociationIndices> reassociation = {{0}, {1, 2}};
  for (int64_t d = 2; d < type.getRank(); ++d) {
    shape.push_back(type.getDimSize(d));
    reassociation.push_back({d + 1});
  }
  if (type.getRank() == 4)
    sizes.push_back(b.getIndexAttr(type.getDimSize(3)));
  auto resultType = RankedTensorType::get(shape, type.getElementType());
  if (ShapedType::isDynamic(shape[1]) && ShapedType::isDynamic(shape[2])) {
    // MLIR 22's expand-strided-metadata crashes on a memref.expand_shape with
    // two dynamic sizes in one group; a reshape by a shape tensor is the same
    // view and lowers fine.
    SmallVector<Value> dims = llvm::map_to_vector(sizes, [&](OpFoldResult s) {
      return getValueOrCreateConstantIndexOp(b, loc, s);
    });
    Value shapeTensor = tensor::FromElementsOp::create(b, loc, dims);
    return tensor::ReshapeOp::create(b, loc, resultType, t, shapeTensor);
  }
  return tensor::ExpandShapeOp::create(b, loc, resultType, t, reassociation,
                                       sizes);
}

Value ReferenceBuilder::collapseHeads(Value t, Type resultType) {
  auto rank = cast<RankedTensorType>(t.getType()).getRank();
  SmallVector<ReassociationIndices> reassociation = {{0}, {1, 2}};
  for (int64_t d = 3; d < rank; ++d)
    reassociation.push_back({d});
  Value collapsed = tensor::CollapseShapeOp::create(b, loc, t, reassociation);
  if (collapsed.getType() == resultType)
    return collapsed;
  return tensor::CastOp::create(b, loc, resultType, collapsed);
}

Value ReferenceBuilder::generic(
    ValueRange inputs, Value init, ArrayRef<AffineMap> maps,
    ArrayRef<IteratorType> iterators,
    function_ref<Value(OpBuilder &, Location, ValueRange)> body) {
  auto op = linalg::GenericOp::create(
      b, loc, init.getType(), inputs, init, maps, iterators,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        linalg::YieldOp::create(nb, nl, body(nb, nl, args));
      });
  return op.getResult(0);
}

Value ReferenceBuilder::filledF32(ArrayRef<OpFoldResult> sizes, double value) {
  Value cst = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
  return linalg::FillOp::create(b, loc, cst, emptyF32(sizes)).getResult(0);
}

Value ReferenceBuilder::contract(Value a, ArrayRef<unsigned> aDims, Value c,
                                 ArrayRef<unsigned> cDims,
                                 ArrayRef<unsigned> outDims,
                                 ArrayRef<OpFoldResult> outSizes,
                                 unsigned numReductions) {
  unsigned numLoops = outDims.size() + numReductions;
  return generic(
      {a, c}, filledF32(outSizes, 0.0),
      {map(numLoops, aDims), map(numLoops, cDims), map(numLoops, outDims)},
      iterators(outDims.size(), numReductions),
      [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
        // Separate statements: the IR order must not depend on the order in
        // which the compiler evaluates call arguments.
        Value lhs = toF32(nb, nl, args[0]);
        Value rhs = toF32(nb, nl, args[1]);
        Value prod = arith::MulFOp::create(nb, nl, lhs, rhs);
        return arith::AddFOp::create(nb, nl, args[2], prod);
      });
}

Value ReferenceBuilder::reduceRows(
    Value t, ArrayRef<OpFoldResult> sizes, double init,
    function_ref<Value(OpBuilder &, Location, Value, Value)> combine) {
  auto rank = cast<RankedTensorType>(t.getType()).getRank();
  SmallVector<unsigned> rowDims =
      llvm::to_vector(llvm::seq<unsigned>(0, rank - 1));
  return generic({t}, filledF32(sizes, init),
                 {b.getMultiDimIdentityMap(rank), map(rank, rowDims)},
                 iterators(rank - 1, 1),
                 [&](OpBuilder &nb, Location nl, ValueRange args) {
                   return combine(nb, nl, args[1], args[0]);
                 });
}

Value ReferenceBuilder::toElementType(Value t, ArrayRef<OpFoldResult> sizes) {
  if (elementType.isF32())
    return t;
  auto type = cast<RankedTensorType>(t.getType());
  Value init = tensor::EmptyOp::create(b, loc, sizes, elementType);
  AffineMap id = b.getMultiDimIdentityMap(type.getRank());
  return generic({t}, init, {id, id}, iterators(type.getRank(), 0),
                 [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
                   return arith::TruncFOp::create(nb, nl, elementType, args[0]);
                 });
}

Value ReferenceBuilder::rawScores(Value q5, Value k) {
  // Loops (b, h, g, i, j, d); d is reduced.
  return contract(q5, {0, 1, 2, 3, 5}, k, {0, 1, 4, 5}, {0, 1, 2, 3, 4},
                  {batch, headsKV, group, seqQ, seqK}, /*numReductions=*/1);
}

SmallVector<Value>
ReferenceBuilder::modifierArguments(OpBuilder &nb, Location nl, Value score) {
  SmallVector<Value> args;
  if (score)
    args.push_back(score);
  Value kvHead = linalg::IndexOp::create(nb, nl, 1);
  Value member = linalg::IndexOp::create(nb, nl, 2);
  Value groupSize = getValueOrCreateConstantIndexOp(nb, nl, group);
  Value head = arith::AddIOp::create(
      nb, nl, arith::MulIOp::create(nb, nl, kvHead, groupSize), member);
  args.push_back(linalg::IndexOp::create(nb, nl, 0));
  args.push_back(head);
  args.push_back(linalg::IndexOp::create(nb, nl, 3));
  args.push_back(linalg::IndexOp::create(nb, nl, 4));
  llvm::append_range(args, captures);
  return args;
}

Value ReferenceBuilder::scoreFromRaw(OpBuilder &nb, Location nl, Value raw) {
  Value s = arith::MulFOp::create(nb, nl, raw, scale);
  if (scoreMod)
    s = inlineModifier(nb, *scoreMod, modifierArguments(nb, nl, s));
  if (!softcap)
    return s;
  Value t =
      math::TanhOp::create(nb, nl, arith::DivFOp::create(nb, nl, s, softcap));
  return arith::MulFOp::create(nb, nl, softcap, t);
}

Value ReferenceBuilder::isVisible(OpBuilder &nb, Location nl, Value i,
                                  Value j) {
  if (!mask)
    return nullptr;
  return mask.buildVisible(nb, nl, maskParams, i, j, seqQValue, seqKValue);
}

Value ReferenceBuilder::isVisibleHere(OpBuilder &nb, Location nl) {
  Value visible;
  if (mask) {
    Value i = linalg::IndexOp::create(nb, nl, 3);
    Value j = linalg::IndexOp::create(nb, nl, 4);
    visible = isVisible(nb, nl, i, j);
  }
  if (!maskMod)
    return visible;
  Value modified =
      inlineModifier(nb, *maskMod, modifierArguments(nb, nl, Value()));
  return visible ? arith::AndIOp::create(nb, nl, visible, modified).getResult()
                 : modified;
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

struct LowerAttention final : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    Type elementType = op.getQuery().getType().getElementType();
    ReferenceBuilder rb(
        rewriter, op.getLoc(), elementType,
        op.buildScale(rewriter, op.getLoc()),
        op.hasMaskRule() ? op.getMaskAttr() : MaskAttrInterface(),
        op.getMaskOperands(), op.buildSoftcap(rewriter, op.getLoc()));
    rb.setModifiers(op.hasScoreMod() ? &op.getScoreMod() : nullptr,
                    op.hasMaskMod() ? &op.getMaskMod() : nullptr,
                    op.getCaptures());
    SmallVector<Value> operands =
        rb.normalize(op.getQuery(), op.getKey(), op.getValue(), {});
    Value q = rb.expandHeads(operands[0]), k = operands[1], v = operands[2];
    // Loops over scores are (b, h, g, i, j): kv head h, query head h * G + g,
    // query row i, key j.
    SmallVector<OpFoldResult> scoreSizes = {rb.batch, rb.headsKV, rb.group,
                                            rb.seqQ, rb.seqK};
    SmallVector<OpFoldResult> outSizes = {
        rb.batch, rb.headsKV, rb.group, rb.seqQ,
        rewriter.getIndexAttr(rb.valueHeadDim)};
    AffineMap id5 = rewriter.getMultiDimIdentityMap(5);
    AffineMap rows5 = rb.map(5, {0, 1, 2, 3});
    AffineMap id4 = rewriter.getMultiDimIdentityMap(4);
    const double inf = std::numeric_limits<double>::infinity();

    // S = q k^T, then scale, the score_mod, softcap, and -inf on keys the
    // mask or the mask_mod hides.
    Value raw = rb.rawScores(q, k);
    Value scores = rb.generic(
        {raw}, rb.emptyF32(scoreSizes), {id5, id5}, rb.iterators(5, 0),
        [&](OpBuilder &nb, Location nl, ValueRange args) {
          Value s = rb.scoreFromRaw(nb, nl, args[0]);
          Value visible = rb.isVisibleHere(nb, nl);
          if (!visible)
            return s;
          return arith::SelectOp::create(nb, nl, visible, s,
                                         rb.f32Const(nb, nl, -inf))
              .getResult();
        });

    // m = rowmax(S); -inf for a row that sees no key.
    ArrayRef<OpFoldResult> rowSizes = ArrayRef(scoreSizes).drop_back();
    Value rowMax = rb.reduceRows(
        scores, rowSizes, -inf,
        [](OpBuilder &nb, Location nl, Value acc, Value x) -> Value {
          return arith::MaximumFOp::create(nb, nl, acc, x);
        });

    // P = exp(S - m), subtracting 0 instead of -inf on rows without a
    // visible key so that their P is exp(-inf) = 0 rather than NaN.
    Value probs = rb.generic(
        {scores, rowMax}, rb.emptyF32(scoreSizes), {id5, rows5, id5},
        rb.iterators(5, 0),
        [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          Value negInf = rb.f32Const(nb, nl, -inf);
          Value empty = arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OEQ,
                                              args[1], negInf);
          Value m = arith::SelectOp::create(nb, nl, empty,
                                            rb.f32Const(nb, nl, 0.0), args[1]);
          return math::ExpOp::create(nb, nl,
                                     arith::SubFOp::create(nb, nl, args[0], m));
        });

    // l = rowsum(P); 0 exactly for a row that sees no key.
    Value rowSum = rb.reduceRows(
        probs, rowSizes, 0.0,
        [](OpBuilder &nb, Location nl, Value acc, Value x) -> Value {
          return arith::AddFOp::create(nb, nl, acc, x);
        });

    // O = P v, loops (b, h, g, i, e, j).
    Value unnormalized = rb.contract(probs, {0, 1, 2, 3, 5}, v, {0, 1, 5, 4},
                                     {0, 1, 2, 3, 4}, outSizes, 1);

    // out = O / l, 0 where l = 0; in the element type of q.
    Value outInit =
        tensor::EmptyOp::create(rewriter, op.getLoc(), outSizes, elementType);
    Value out = rb.generic(
        {unnormalized, rowSum}, outInit, {id5, rows5, id5}, rb.iterators(5, 0),
        [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          Value zero = rb.f32Const(nb, nl, 0.0);
          Value seen = arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OGT,
                                             args[1], zero);
          Value o = arith::SelectOp::create(
              nb, nl, seen, arith::DivFOp::create(nb, nl, args[0], args[1]),
              zero);
          if (elementType.isF32())
            return o;
          return arith::TruncFOp::create(nb, nl, elementType, o);
        });

    // lse = m + log(l), +inf where l = 0.
    Value lse = rb.generic(
        {rowMax, rowSum}, rb.emptyF32(rowSizes), {id4, id4, id4},
        rb.iterators(4, 0),
        [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          Value seen = arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OGT,
                                             args[1], rb.f32Const(nb, nl, 0.0));
          Value logSum = math::LogOp::create(nb, nl, args[1]);
          Value lse = arith::AddFOp::create(nb, nl, args[0], logSum);
          return arith::SelectOp::create(nb, nl, seen, lse,
                                         rb.f32Const(nb, nl, inf));
        });

    rewriter.replaceOp(op, {rb.collapseHeads(out, op.getOut().getType()),
                            rb.collapseHeads(lse, op.getLse().getType())});
    return success();
  }
};

/// Casts `v` to `type` when they differ (results more or less static than
/// the loop's).
static Value castTo(OpBuilder &b, Location loc, Value v, Type type) {
  return v.getType() == type ? v : tensor::CastOp::create(b, loc, type, v);
}

/// `t[offsets...][sizes...]` with unit strides, keeping the rank.
static Value slice(OpBuilder &b, Location loc, Value t,
                   ArrayRef<OpFoldResult> offsets,
                   ArrayRef<OpFoldResult> sizes) {
  SmallVector<OpFoldResult> strides(offsets.size(), b.getIndexAttr(1));
  return tensor::ExtractSliceOp::create(b, loc, t, offsets, sizes, strides);
}

static Value insert(OpBuilder &b, Location loc, Value src, Value dest,
                    ArrayRef<OpFoldResult> offsets) {
  SmallVector<OpFoldResult> strides(offsets.size(), b.getIndexAttr(1));
  return tensor::InsertSliceOp::create(
      b, loc, src, dest, offsets, tensor::getMixedSizes(b, loc, src), strides);
}

/// The fa.attention of one sequence, with the attributes of `op`.
template <typename OpT>
static AttentionOp attentionLike(OpBuilder &b, Location loc, OpT op, Value q,
                                 Value k, Value v) {
  return AttentionOp::create(
      b, loc, q, k, v, op.getScaleAttr(), op.getMaskAttr(), op.getSoftcapAttr(),
      op.getDynamicScale(), op.getDynamicSoftcap(), op.getMaskOperands());
}

/// One packed sequence inside the loop of forEachSequence.
struct PackedSequence {
  OpBuilder &b;
  Location loc;
  /// Where its query and key rows start, and how many there are.
  OpFoldResult qStart, qLen, kStart, kLen;

  /// Its rows of a packed tensor seen as a batch of one, [1, H, T, X]
  /// (query rows of `t` when `queries`, else key rows).
  Value rows(Value t, bool queries) {
    OpFoldResult c0 = b.getIndexAttr(0), c1 = b.getIndexAttr(1);
    SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, t);
    OpFoldResult start = queries ? qStart : kStart, len = queries ? qLen : kLen;
    SmallVector<OpFoldResult> offsets = {c0, c0, start};
    SmallVector<OpFoldResult> rowSizes = {c1, sizes[1], len};
    if (sizes.size() == 4) {
      offsets.push_back(c0);
      rowSizes.push_back(sizes[3]);
    }
    return slice(b, loc, t, offsets, rowSizes);
  }
  /// Writes `src` ([1, H, len, ...]) into its rows of `dest`.
  Value insertRows(Value src, Value dest, bool queries) {
    OpFoldResult c0 = b.getIndexAttr(0);
    SmallVector<OpFoldResult> offsets = {c0, c0, queries ? qStart : kStart};
    if (cast<RankedTensorType>(src.getType()).getRank() == 4)
      offsets.push_back(c0);
    return insert(b, loc, src, dest, offsets);
  }
};

/// Loops over the sequences of the offsets `cuQ`, `cuK` ([B + 1]), threading
/// `inits` through `body`, which returns the new values.
static scf::ForOp forEachSequence(
    OpBuilder &rewriter, Location loc, Value cuQ, Value cuK, ValueRange inits,
    function_ref<SmallVector<Value>(PackedSequence &, ValueRange)> body) {
  using fa::detail::extractIndex;
  Value zero = fa::detail::indexConst(rewriter, loc, 0);
  Value one = fa::detail::indexConst(rewriter, loc, 1);
  Value numSeqs = arith::SubIOp::create(
      rewriter, loc, tensor::DimOp::create(rewriter, loc, cuQ, 0), one);
  return scf::ForOp::create(
      rewriter, loc, zero, numSeqs, one, inits,
      [&](OpBuilder &b, Location l, Value seq, ValueRange state) {
        Value next = arith::AddIOp::create(b, l, seq, one);
        auto range = [&](Value offsets) {
          Value start = extractIndex(b, l, offsets, seq);
          Value end = extractIndex(b, l, offsets, next);
          return std::pair<OpFoldResult, OpFoldResult>(
              start, arith::SubIOp::create(b, l, end, start).getResult());
        };
        auto [qStart, qLen] = range(cuQ);
        auto [kStart, kLen] = range(cuK);
        PackedSequence packed{b, l, qStart, qLen, kStart, kLen};
        scf::YieldOp::create(b, l, body(packed, state));
      });
}

/// A tensor of the sizes of `like` (element type `elt`) filled with `value`.
static Value filledLike(OpBuilder &b, Location loc, Value like, Type elt,
                        double value) {
  Value empty =
      tensor::EmptyOp::create(b, loc, tensor::getMixedSizes(b, loc, like), elt);
  Value cst =
      arith::ConstantOp::create(b, loc, elt, b.getFloatAttr(elt, value));
  return linalg::FillOp::create(b, loc, cst, empty).getResult(0);
}

/// fa.attention_varlen: a loop over the sequences of fa.attention on their
/// slices (batches of one), which LowerAttention then rewrites. Rows that
/// belong to no sequence are left at out = 0, lse = +inf.
struct LowerAttentionVarlen final : OpRewritePattern<AttentionVarlenOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionVarlenOp op,
                                PatternRewriter &rewriter) const override {
    using fa::detail::addUnitBatch, fa::detail::dropUnitBatch;
    Location loc = op.getLoc();
    Value q = addUnitBatch(rewriter, loc, op.getQuery());
    Value k = addUnitBatch(rewriter, loc, op.getKey());
    Value v = addUnitBatch(rewriter, loc, op.getValue());
    SmallVector<OpFoldResult> outSizes =
        tensor::getMixedSizes(rewriter, loc, q);
    outSizes.back() = rewriter.getIndexAttr(op.getValueHeadDim());
    Value outInit = fa::detail::zeroTensor(
        rewriter, loc, outSizes, op.getOut().getType().getElementType());
    // lse: q's sizes without the head dim.
    Value lseInit =
        linalg::FillOp::create(
            rewriter, loc,
            ValueRange{fa::detail::f32Const(
                rewriter, loc, std::numeric_limits<double>::infinity())},
            ValueRange{tensor::EmptyOp::create(rewriter, loc,
                                               ArrayRef(outSizes).drop_back(),
                                               rewriter.getF32Type())})
            .getResult(0);
    scf::ForOp loop = forEachSequence(
        rewriter, loc, op.getCuSeqlensQ(), op.getCuSeqlensK(),
        {outInit, lseInit}, [&](PackedSequence &seq, ValueRange state) {
          AttentionOp att =
              attentionLike(seq.b, seq.loc, op, seq.rows(q, true),
                            seq.rows(k, false), seq.rows(v, false));
          return SmallVector<Value>{
              seq.insertRows(att.getOut(), state[0], true),
              seq.insertRows(att.getLse(), state[1], true)};
        });
    rewriter.replaceOp(
        op,
        {castTo(rewriter, loc, dropUnitBatch(rewriter, loc, loop.getResult(0)),
                op.getOut().getType()),
         castTo(rewriter, loc, dropUnitBatch(rewriter, loc, loop.getResult(1)),
                op.getLse().getType())});
    return success();
  }
};

/// fa.attention_varlen_backward: see decomposeVarlenBackward.
struct LowerAttentionVarlenBackward final
    : OpRewritePattern<AttentionVarlenBackwardOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionVarlenBackwardOp op,
                                PatternRewriter &rewriter) const override {
    decomposeVarlenBackward(rewriter, op);
    return success();
  }
};

/// fa.attention_paged: a loop over the batch of fa.attention on the batch's
/// keys and values gathered from the pages.
struct LowerAttentionPaged final : OpRewritePattern<AttentionPagedOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionPagedOp op,
                                PatternRewriter &rewriter) const override {
    using fa::detail::extractIndex;
    Location loc = op.getLoc();
    Value q = op.getQuery();
    SmallVector<OpFoldResult> qSizes = tensor::getMixedSizes(rewriter, loc, q);
    int64_t dv = op.getValueHeadDim();
    SmallVector<OpFoldResult> outSizes = qSizes;
    outSizes.back() = rewriter.getIndexAttr(dv);
    Value outInit = tensor::EmptyOp::create(
        rewriter, loc, outSizes, op.getOut().getType().getElementType());
    Value lseInit = tensor::EmptyOp::create(
        rewriter, loc, ArrayRef(qSizes).take_front(3), rewriter.getF32Type());
    Value zero = fa::detail::indexConst(rewriter, loc, 0);
    Value one = fa::detail::indexConst(rewriter, loc, 1);
    Value pageSize = fa::detail::indexConst(rewriter, loc, op.getPageSize());
    Value batch = tensor::DimOp::create(rewriter, loc, q, 0);
    OpFoldResult c0 = rewriter.getIndexAttr(0), c1 = rewriter.getIndexAttr(1);
    auto loop = scf::ForOp::create(
        rewriter, loc, zero, batch, one, ValueRange{outInit, lseInit},
        [&](OpBuilder &b, Location l, Value bi, ValueRange state) {
          Value kLen = extractIndex(b, l, op.getCacheSeqlens(), bi);
          // [1, Hkv, kLen, D]: key j is row j mod S of page table[b, j / S].
          auto gather = [&](Value pool) -> Value {
            auto poolType = cast<RankedTensorType>(pool.getType());
            SmallVector<Value> dynamic;
            if (poolType.isDynamicDim(1))
              dynamic.push_back(tensor::DimOp::create(b, l, pool, 1));
            dynamic.push_back(kLen);
            auto type = RankedTensorType::get({1, poolType.getDimSize(1),
                                               ShapedType::kDynamic,
                                               poolType.getDimSize(3)},
                                              poolType.getElementType());
            return tensor::GenerateOp::create(
                b, l, type, dynamic,
                [&](OpBuilder &nb, Location nl, ValueRange idx) {
                  Value page = extractIndex(
                      nb, nl, op.getPageTable(),
                      {bi, arith::DivUIOp::create(nb, nl, idx[2], pageSize)});
                  Value row = arith::RemUIOp::create(nb, nl, idx[2], pageSize);
                  Value x = tensor::ExtractOp::create(
                      nb, nl, pool, ValueRange{page, idx[1], row, idx[3]});
                  tensor::YieldOp::create(nb, nl, x);
                });
          };
          Value qb = slice(b, l, q, {bi, c0, c0, c0},
                           {c1, qSizes[1], qSizes[2], qSizes[3]});
          AttentionOp att =
              attentionLike(b, l, op, qb, gather(op.getKeyPages()),
                            gather(op.getValuePages()));
          Value out = insert(b, l, att.getOut(), state[0], {bi, c0, c0, c0});
          Value lse = insert(b, l, att.getLse(), state[1], {bi, c0, c0});
          scf::YieldOp::create(b, l, ValueRange{out, lse});
        });
    rewriter.replaceOp(
        op, {castTo(rewriter, loc, loop.getResult(0), op.getOut().getType()),
             castTo(rewriter, loc, loop.getResult(1), op.getLse().getType())});
    return success();
  }
};

/// `deterministic` needs no handling: it only constrains the order of the
/// dQ accumulation, and the reference's loops run in one fixed order anyway.
struct LowerAttentionBackward final : OpRewritePattern<AttentionBackwardOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionBackwardOp op,
                                PatternRewriter &rewriter) const override {
    // A score_mod needs its derivative (the pass reports a missing one).
    if (op.hasScoreMod() && !op.hasScoreModGrad())
      return rewriter.notifyMatchFailure(op, "score_mod without its grad");
    Type elementType = op.getQuery().getType().getElementType();
    ReferenceBuilder rb(
        rewriter, op.getLoc(), elementType,
        op.buildScale(rewriter, op.getLoc()),
        op.hasMaskRule() ? op.getMaskAttr() : MaskAttrInterface(),
        op.getMaskOperands(), op.buildSoftcap(rewriter, op.getLoc()));
    Region *scoreModGrad = op.hasScoreMod() ? &op.getScoreModGrad() : nullptr;
    rb.setModifiers(op.hasScoreMod() ? &op.getScoreMod() : nullptr,
                    op.hasMaskMod() ? &op.getMaskMod() : nullptr,
                    op.getCaptures());
    SmallVector<Value> operands =
        rb.normalize(op.getQuery(), op.getKey(), op.getValue(),
                     {op.getOut(), op.getLse(), op.getDout()});
    Value q = rb.expandHeads(operands[0]), k = operands[1], v = operands[2];
    Value out = rb.expandHeads(operands[3]);
    Value lse = rb.expandHeads(operands[4]);
    Value dout = rb.expandHeads(operands[5]);
    OpFoldResult d = rewriter.getIndexAttr(rb.headDim);
    OpFoldResult dv = rewriter.getIndexAttr(rb.valueHeadDim);
    SmallVector<OpFoldResult> scoreSizes = {rb.batch, rb.headsKV, rb.group,
                                            rb.seqQ, rb.seqK};
    AffineMap id5 = rewriter.getMultiDimIdentityMap(5);
    AffineMap rows5 = rb.map(5, {0, 1, 2, 3});
    Value scale = rb.scale, softcap = rb.softcap;

    // P = exp(S - lse) on visible keys, 0 on hidden ones; a row that saw no
    // key has lse = +inf and gets P = exp(-inf) = 0.
    Value raw = rb.rawScores(q, k);
    Value probs =
        rb.generic({raw, lse}, rb.emptyF32(scoreSizes), {id5, rows5, id5},
                   rb.iterators(5, 0),
                   [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
                     Value s = rb.scoreFromRaw(nb, nl, args[0]);
                     Value p = math::ExpOp::create(
                         nb, nl, arith::SubFOp::create(nb, nl, s, args[1]));
                     Value visible = rb.isVisibleHere(nb, nl);
                     if (!visible)
                       return p;
                     return arith::SelectOp::create(nb, nl, visible, p,
                                                    rb.f32Const(nb, nl, 0.0));
                   });

    // dV[b,h,j,e] = sum over (g, i) of P * dO: loops (b, h, j, e, g, i), so
    // the query heads of a group add up into their kv head.
    SmallVector<OpFoldResult> dvSizes = {rb.batch, rb.headsKV, rb.seqK, dv};
    Value dValue = rb.contract(probs, {0, 1, 4, 5, 2}, dout, {0, 1, 4, 5, 3},
                               {0, 1, 2, 3}, dvSizes, 2);

    // dP = dO v^T, loops (b, h, g, i, j, e).
    Value dProbs = rb.contract(dout, {0, 1, 2, 3, 5}, v, {0, 1, 4, 5},
                               {0, 1, 2, 3, 4}, scoreSizes, 1);

    // Di = rowsum(dO * O), loops (b, h, g, i, e).
    Value rowDot =
        rb.contract(dout, {0, 1, 2, 3, 4}, out, {0, 1, 2, 3, 4}, {0, 1, 2, 3},
                    ArrayRef(scoreSizes).drop_back(), 1);

    // dS = P * (dP - Di), times the softcap's derivative 1 - tanh^2 (at the
    // modified score), the score_mod's (score_mod_grad at the scaled score)
    // and the scale: the gradient with respect to the raw scores q k^T.
    SmallVector<Value> dsInputs = {probs, dProbs, rowDot};
    SmallVector<AffineMap> dsMaps = {id5, id5, rows5};
    if (softcap || scoreModGrad) {
      dsInputs.push_back(raw);
      dsMaps.push_back(id5);
    }
    dsMaps.push_back(id5);
    Value dScores = rb.generic(
        dsInputs, rb.emptyF32(scoreSizes), dsMaps, rb.iterators(5, 0),
        [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
          Value centered = arith::SubFOp::create(nb, nl, args[1], args[2]);
          Value ds = arith::MulFOp::create(nb, nl, args[0], centered);
          Value s;
          if (softcap || scoreModGrad)
            s = arith::MulFOp::create(nb, nl, args[3], scale);
          if (scoreModGrad) {
            SmallVector<Value> modArgs = rb.modifierArguments(nb, nl, s);
            Value slope = inlineModifier(nb, *scoreModGrad, modArgs);
            ds = arith::MulFOp::create(nb, nl, ds, slope);
            s = inlineModifier(nb, *rb.scoreMod, modArgs);
          }
          if (softcap) {
            Value t = math::TanhOp::create(
                nb, nl, arith::DivFOp::create(nb, nl, s, softcap));
            Value tanhSquared = arith::MulFOp::create(nb, nl, t, t);
            Value slope = arith::SubFOp::create(
                nb, nl, rb.f32Const(nb, nl, 1.0), tanhSquared);
            ds = arith::MulFOp::create(nb, nl, ds, slope);
          }
          return arith::MulFOp::create(nb, nl, ds, scale);
        });

    // dQ = dS k, loops (b, h, g, i, d, j).
    SmallVector<OpFoldResult> dqSizes = {rb.batch, rb.headsKV, rb.group,
                                         rb.seqQ, d};
    Value dQuery = rb.contract(dScores, {0, 1, 2, 3, 5}, k, {0, 1, 5, 4},
                               {0, 1, 2, 3, 4}, dqSizes, 1);
    // dK[b,h,j,d] = sum over (g, i) of dS * q: loops (b, h, j, d, g, i).
    SmallVector<OpFoldResult> dkSizes = {rb.batch, rb.headsKV, rb.seqK, d};
    Value dKey = rb.contract(dScores, {0, 1, 4, 5, 2}, q, {0, 1, 4, 5, 3},
                             {0, 1, 2, 3}, dkSizes, 2);

    auto castTo = [&](Value t, Type type) -> Value {
      if (t.getType() == type)
        return t;
      return tensor::CastOp::create(rewriter, op.getLoc(), type, t);
    };
    rewriter.replaceOp(
        op, {rb.collapseHeads(rb.toElementType(dQuery, dqSizes),
                              op.getDq().getType()),
             castTo(rb.toElementType(dKey, dkSizes), op.getDk().getType()),
             castTo(rb.toElementType(dValue, dvSizes), op.getDv().getType())});
    return success();
  }
};

/// lse = log sum_i exp(lse_i) and out = sum_i exp(lse_i - lse) out_i, with
/// +inf partial rows (no key seen) weighing 0: two elementwise generics,
/// the weights recomputed per element of out.
struct LowerAttentionMerge final : OpRewritePattern<AttentionMergeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionMergeOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    const double inf = std::numeric_limits<double>::infinity();
    int64_t parts = op.getOuts().size();
    Value first = op.getOuts().front();
    SmallVector<OpFoldResult> outSizes =
        tensor::getMixedSizes(rewriter, loc, first);
    auto outType = op.getOut().getType();
    // The result's static sizes where a partial's are dynamic.
    for (int64_t d = 0; d < 4; ++d)
      if (!outType.isDynamicDim(d))
        outSizes[d] = rewriter.getIndexAttr(outType.getDimSize(d));
    ArrayRef<OpFoldResult> rowSizes = ArrayRef(outSizes).take_front(3);
    auto f32 = rewriter.getF32Type();
    auto cst = [&](OpBuilder &b, Location l, double v) -> Value {
      return arith::ConstantOp::create(b, l, b.getF32FloatAttr(v));
    };
    // Per row: the largest finite lse (-inf if none), and each partial's
    // weight exp(lse_i - max) (0 for +inf), from the row's lses.
    auto weights = [&](OpBuilder &b, Location l, ValueRange lses, Value &max) {
      Value posInf = cst(b, l, inf), negInf = cst(b, l, -inf);
      SmallVector<Value> finite;
      max = negInf;
      for (Value x : lses) {
        Value seen =
            arith::CmpFOp::create(b, l, arith::CmpFPredicate::ONE, x, posInf);
        finite.push_back(arith::SelectOp::create(b, l, seen, x, negInf));
        max = arith::MaximumFOp::create(b, l, max, finite.back());
      }
      Value none =
          arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ, max, negInf);
      Value safe = arith::SelectOp::create(b, l, none, cst(b, l, 0.0), max);
      SmallVector<Value> w;
      for (Value x : finite)
        w.push_back(
            math::ExpOp::create(b, l, arith::SubFOp::create(b, l, x, safe)));
      max = safe;
      return std::make_pair(w, none);
    };
    auto sumOf = [&](OpBuilder &b, Location l, ArrayRef<Value> w) {
      Value sum = cst(b, l, 0.0);
      for (Value x : w)
        sum = arith::AddFOp::create(b, l, sum, x);
      return sum;
    };

    AffineMap id3 = rewriter.getMultiDimIdentityMap(3);
    SmallVector<AffineMap> lseMaps(parts + 1, id3);
    SmallVector<utils::IteratorType> par3(3, utils::IteratorType::parallel);
    Value lseInit = tensor::EmptyOp::create(rewriter, loc, rowSizes, f32);
    auto lse = linalg::GenericOp::create(
        rewriter, loc, lseInit.getType(), op.getLses(), lseInit, lseMaps, par3,
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value max;
          auto [w, none] = weights(b, l, args.take_front(parts), max);
          Value v = arith::AddFOp::create(
              b, l, max, math::LogOp::create(b, l, sumOf(b, l, w)));
          linalg::YieldOp::create(
              b, l,
              arith::SelectOp::create(b, l, none, cst(b, l, inf), v)
                  .getResult());
        });

    AffineMap id4 = rewriter.getMultiDimIdentityMap(4);
    AffineMap rows4 = AffineMap::get(4, 0,
                                     {rewriter.getAffineDimExpr(0),
                                      rewriter.getAffineDimExpr(1),
                                      rewriter.getAffineDimExpr(2)},
                                     rewriter.getContext());
    SmallVector<Value> inputs(op.getOuts());
    llvm::append_range(inputs, op.getLses());
    SmallVector<AffineMap> outMaps(parts, id4);
    outMaps.append(parts, rows4);
    outMaps.push_back(id4);
    SmallVector<utils::IteratorType> par4(4, utils::IteratorType::parallel);
    Type elt = outType.getElementType();
    Value outInit = tensor::EmptyOp::create(rewriter, loc, outSizes, elt);
    auto out = linalg::GenericOp::create(
        rewriter, loc, outInit.getType(), inputs, outInit, outMaps, par4,
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value max;
          auto [w, none] = weights(b, l, args.slice(parts, parts), max);
          Value acc = cst(b, l, 0.0);
          for (int64_t i = 0; i < parts; ++i) {
            Value o = args[i];
            if (!o.getType().isF32())
              o = arith::ExtFOp::create(b, l, f32, o);
            acc = math::FmaOp::create(b, l, w[i], o, acc);
          }
          Value sum = sumOf(b, l, w);
          Value v =
              arith::SelectOp::create(b, l, none, cst(b, l, 0.0),
                                      arith::DivFOp::create(b, l, acc, sum));
          if (!elt.isF32())
            v = arith::TruncFOp::create(b, l, elt, v);
          linalg::YieldOp::create(b, l, v);
        });

    Value outV = out.getResult(0), lseV = lse.getResult(0);
    if (outV.getType() != op.getOut().getType())
      outV = tensor::CastOp::create(rewriter, loc, op.getOut().getType(), outV);
    if (lseV.getType() != op.getLse().getType())
      lseV = tensor::CastOp::create(rewriter, loc, op.getLse().getType(), lseV);
    rewriter.replaceOp(op, {outV, lseV});
    return success();
  }
};

/// The stacked form: reductions over the split dimension (2) of the partials.
/// max of the finite lses -> sum of their weights -> lse, then
/// out = sum_s exp(lse_s - lse) out_s (0 where lse_s or lse is +inf).
struct LowerAttentionMergeSplits final
    : OpRewritePattern<AttentionMergeSplitsOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionMergeSplitsOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    const double inf = std::numeric_limits<double>::infinity();
    auto f32 = rewriter.getF32Type();
    auto cst = [&](OpBuilder &b, Location l, double v) -> Value {
      return arith::ConstantOp::create(b, l, b.getF32FloatAttr(v));
    };
    SmallVector<OpFoldResult> partSizes =
        tensor::getMixedSizes(rewriter, loc, op.getOuts());
    auto outType = op.getOut().getType();
    SmallVector<OpFoldResult> outSizes = {partSizes[0], partSizes[1],
                                          partSizes[3], partSizes[4]};
    for (int64_t d = 0; d < 4; ++d)
      if (!outType.isDynamicDim(d))
        outSizes[d] = rewriter.getIndexAttr(outType.getDimSize(d));
    ArrayRef<OpFoldResult> rowSizes = ArrayRef(outSizes).take_front(3);
    auto dims = [&](int64_t n, ArrayRef<unsigned> ids) {
      SmallVector<AffineExpr> exprs;
      for (unsigned i : ids)
        exprs.push_back(getAffineDimExpr(i, ctx));
      return AffineMap::get(n, 0, exprs, ctx);
    };
    using utils::IteratorType;
    // Row loops (b, h, n, s): s reduced.
    SmallVector<IteratorType> rowIters = {
        IteratorType::parallel, IteratorType::parallel, IteratorType::parallel,
        IteratorType::reduction};
    AffineMap lseIn = dims(4, {0, 1, 3, 2}), row = dims(4, {0, 1, 2});
    auto fill = [&](double v) {
      Value init = tensor::EmptyOp::create(rewriter, loc, rowSizes, f32);
      return linalg::FillOp::create(rewriter, loc, cst(rewriter, loc, v), init)
          .getResult(0);
    };
    // A partial lse, -inf when it saw no key (+inf).
    auto finite = [&](OpBuilder &b, Location l, Value x) -> Value {
      Value seen = arith::CmpFOp::create(b, l, arith::CmpFPredicate::ONE, x,
                                         cst(b, l, inf));
      return arith::SelectOp::create(b, l, seen, x, cst(b, l, -inf));
    };
    Value max =
        linalg::GenericOp::create(
            rewriter, loc, TypeRange{fill(-inf).getType()}, op.getLses(),
            fill(-inf), ArrayRef<AffineMap>{lseIn, row}, rowIters,
            [&](OpBuilder &b, Location l, ValueRange args) {
              linalg::YieldOp::create(b, l,
                                      arith::MaximumFOp::create(
                                          b, l, args[1], finite(b, l, args[0]))
                                          .getResult());
            })
            .getResult(0);
    // Rows no split saw keep max = -inf; their weights use 0 instead.
    auto safe = [&](OpBuilder &b, Location l, Value m) -> Value {
      Value none = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ, m,
                                         cst(b, l, -inf));
      return arith::SelectOp::create(b, l, none, cst(b, l, 0.0), m);
    };
    Value sum =
        linalg::GenericOp::create(
            rewriter, loc, TypeRange{max.getType()},
            ValueRange{op.getLses(), max}, fill(0.0),
            ArrayRef<AffineMap>{lseIn, row, row}, rowIters,
            [&](OpBuilder &b, Location l, ValueRange args) {
              Value w = math::ExpOp::create(
                  b, l,
                  arith::SubFOp::create(b, l, finite(b, l, args[0]),
                                        safe(b, l, args[1])));
              linalg::YieldOp::create(
                  b, l, arith::AddFOp::create(b, l, args[2], w).getResult());
            })
            .getResult(0);
    AffineMap id3 = rewriter.getMultiDimIdentityMap(3);
    SmallVector<IteratorType> par3(3, IteratorType::parallel);
    Value lse =
        linalg::GenericOp::create(
            rewriter, loc, TypeRange{max.getType()}, ValueRange{max, sum},
            tensor::EmptyOp::create(rewriter, loc, rowSizes, f32).getResult(),
            ArrayRef<AffineMap>{id3, id3, id3}, par3,
            [&](OpBuilder &b, Location l, ValueRange args) {
              Value none = arith::CmpFOp::create(
                  b, l, arith::CmpFPredicate::OEQ, args[0], cst(b, l, -inf));
              Value v = arith::AddFOp::create(
                  b, l, args[0], math::LogOp::create(b, l, args[1]));
              linalg::YieldOp::create(
                  b, l,
                  arith::SelectOp::create(b, l, none, cst(b, l, inf), v)
                      .getResult());
            })
            .getResult(0);

    // Element loops (b, h, n, d, s): s reduced.
    SmallVector<IteratorType> eltIters(4, IteratorType::parallel);
    eltIters.push_back(IteratorType::reduction);
    Value accInit = tensor::EmptyOp::create(rewriter, loc, outSizes, f32);
    Value acc0 =
        linalg::FillOp::create(rewriter, loc, cst(rewriter, loc, 0.0), accInit)
            .getResult(0);
    AffineMap outIn = dims(5, {0, 1, 4, 2, 3}), lseOf = dims(5, {0, 1, 4, 2}),
              rowOf = dims(5, {0, 1, 2}), elt5 = dims(5, {0, 1, 2, 3});
    Value acc =
        linalg::GenericOp::create(
            rewriter, loc, TypeRange{acc0.getType()},
            ValueRange{op.getOuts(), op.getLses(), lse}, acc0,
            ArrayRef<AffineMap>{outIn, lseOf, rowOf, elt5}, eltIters,
            [&](OpBuilder &b, Location l, ValueRange args) {
              Value posInf = cst(b, l, inf);
              Value use = arith::AndIOp::create(
                  b, l,
                  arith::CmpFOp::create(b, l, arith::CmpFPredicate::ONE,
                                        args[1], posInf),
                  arith::CmpFOp::create(b, l, arith::CmpFPredicate::ONE,
                                        args[2], posInf));
              Value w = math::ExpOp::create(
                  b, l, arith::SubFOp::create(b, l, args[1], args[2]));
              Value term = arith::SelectOp::create(
                  b, l, use, arith::MulFOp::create(b, l, w, args[0]),
                  cst(b, l, 0.0));
              linalg::YieldOp::create(
                  b, l, arith::AddFOp::create(b, l, args[3], term).getResult());
            })
            .getResult(0);
    Type elt = outType.getElementType();
    Value out = acc;
    if (!elt.isF32()) {
      AffineMap id4 = rewriter.getMultiDimIdentityMap(4);
      SmallVector<IteratorType> par4(4, IteratorType::parallel);
      out =
          linalg::GenericOp::create(
              rewriter, loc,
              TypeRange{RankedTensorType::get(
                  cast<RankedTensorType>(acc.getType()).getShape(), elt)},
              acc,
              tensor::EmptyOp::create(rewriter, loc, outSizes, elt).getResult(),
              ArrayRef<AffineMap>{id4, id4}, par4,
              [&](OpBuilder &b, Location l, ValueRange args) {
                linalg::YieldOp::create(
                    b, l,
                    arith::TruncFOp::create(b, l, elt, args[0]).getResult());
              })
              .getResult(0);
    }
    if (out.getType() != op.getOut().getType())
      out = tensor::CastOp::create(rewriter, loc, op.getOut().getType(), out);
    if (lse.getType() != op.getLse().getType())
      lse = tensor::CastOp::create(rewriter, loc, op.getLse().getType(), lse);
    rewriter.replaceOp(op, {out, lse});
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

struct FALowerToReferencePass final
    : fa::impl::FALowerToReferenceBase<FALowerToReferencePass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    if (mergeOnly)
      patterns.add<LowerAttentionMerge, LowerAttentionMergeSplits>(
          &getContext());
    else
      populateLowerToReferencePatterns(patterns);
    // A backward's score_mod needs its derivative, a region of the op (what
    // fa-differentiate-score-mod builds).
    WalkResult missing = getOperation()->walk([&](AttentionBackwardOp op) {
      if (mergeOnly || !op.hasScoreMod() || op.hasScoreModGrad())
        return WalkResult::advance();
      op.emitOpError("has a score_mod but no score_mod_grad: run "
                     "fa-differentiate-score-mod first (the fa-reference-cpu "
                     "pipeline does)");
      return WalkResult::interrupt();
    });
    if (missing.wasInterrupted())
      return signalPassFailure();
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      getOperation()->emitError(
          "fa-lower-to-reference: rewriting did not converge");
      return signalPassFailure();
    }
    // The patterns handle every op the verifier accepts; anything left is a
    // bug, reported rather than passed on to a later pass.
    WalkResult result = getOperation()->walk([&](Operation *op) {
      if (mergeOnly ? !isa<AttentionMergeOp, AttentionMergeSplitsOp>(op)
                    : !isa<AttentionOp, AttentionBackwardOp, AttentionVarlenOp,
                           AttentionVarlenBackwardOp, AttentionPagedOp,
                           AttentionMergeOp, AttentionMergeSplitsOp>(op))
        return WalkResult::advance();
      op->emitOpError("could not be lowered to the reference form");
      return WalkResult::interrupt();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

void mlir::fa::populateLowerToReferencePatterns(RewritePatternSet &patterns) {
  patterns.add<LowerAttention, LowerAttentionBackward, LowerAttentionVarlen,
               LowerAttentionVarlenBackward, LowerAttentionPaged,
               LowerAttentionMerge, LowerAttentionMergeSplits>(
      patterns.getContext());
}

AttentionBackwardOp
mlir::fa::decomposeVarlenBackward(RewriterBase &rewriter,
                                  AttentionVarlenBackwardOp op) {
  using fa::detail::addUnitBatch, fa::detail::dropUnitBatch;
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  Location loc = op.getLoc();
  auto batchOfOne = [&](Value t) { return addUnitBatch(rewriter, loc, t); };
  Value q = batchOfOne(op.getQuery()), k = batchOfOne(op.getKey()),
        v = batchOfOne(op.getValue()), out = batchOfOne(op.getOut()),
        lse = batchOfOne(op.getLse()), dout = batchOfOne(op.getDout());
  Type elt = op.getQuery().getType().getElementType();
  SmallVector<Value> inits = {filledLike(rewriter, loc, q, elt, 0.0),
                              filledLike(rewriter, loc, k, elt, 0.0),
                              filledLike(rewriter, loc, v, elt, 0.0)};
  AttentionBackwardOp step;
  scf::ForOp loop = forEachSequence(
      rewriter, loc, op.getCuSeqlensQ(), op.getCuSeqlensK(), inits,
      [&](PackedSequence &seq, ValueRange state) {
        step = AttentionBackwardOp::create(
            seq.b, seq.loc, seq.rows(q, true), seq.rows(k, false),
            seq.rows(v, false), seq.rows(out, true), seq.rows(lse, true),
            seq.rows(dout, true), op.getScaleAttr(), op.getMaskAttr(),
            op.getSoftcapAttr(), op.getDeterministic(), op.getDynamicScale(),
            op.getDynamicSoftcap(), op.getMaskOperands());
        return SmallVector<Value>{
            seq.insertRows(step.getDq(), state[0], true),
            seq.insertRows(step.getDk(), state[1], false),
            seq.insertRows(step.getDv(), state[2], false)};
      });
  SmallVector<Value> results;
  for (auto [result, type] :
       llvm::zip_equal(loop.getResults(), op->getResultTypes()))
    results.push_back(
        castTo(rewriter, loc, dropUnitBatch(rewriter, loc, result), type));
  rewriter.replaceOp(op, results);
  return step;
}
