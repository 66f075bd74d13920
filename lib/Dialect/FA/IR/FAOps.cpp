//===- FAOps.cpp - FlashMLIR attention ops --------------------------------===//

#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FA/IR/KernelResources.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::fa;

//===----------------------------------------------------------------------===//
// Shared verification
//===----------------------------------------------------------------------===//

namespace {
/// Dimension `dim` of the operand or result `name`, of type `type`.
struct DimRef {
  StringRef name;
  RankedTensorType type;
  int64_t dim;

  int64_t size() const { return type.getDimSize(dim); }
};
} // namespace

/// Returns the first static size among `refs`, or ShapedType::kDynamic.
static int64_t staticSize(ArrayRef<DimRef> refs) {
  for (const DimRef &ref : refs)
    if (!ShapedType::isDynamic(ref.size()))
      return ref.size();
  return ShapedType::kDynamic;
}

/// Checks that every static size among `refs` (all the places where one
/// symbolic dimension such as the batch size appears) is the same. Comparing
/// all of them, not pairs, also catches `2 vs ? vs 3`.
static LogicalResult checkSameDim(Operation *op, StringRef what,
                                  ArrayRef<DimRef> refs) {
  const DimRef *first = nullptr;
  for (const DimRef &ref : refs) {
    if (ShapedType::isDynamic(ref.size()))
      continue;
    if (!first) {
      first = &ref;
      continue;
    }
    if (ref.size() != first->size())
      return op->emitOpError()
             << what << " mismatch: " << first->name << " has " << first->size()
             << " but " << ref.name << " has " << ref.size();
  }
  return success();
}

/// Checks that the operand or result `name` has element type `elt`.
static LogicalResult checkElementType(Operation *op, StringRef name,
                                      RankedTensorType type, Type elt) {
  if (type.getElementType() == elt)
    return success();
  return op->emitOpError() << name << " must have element type " << elt
                           << ", got " << type.getElementType();
}

/// Whether `v` is a valid constant scale or softcap: positive and finite.
static bool isValidScoreScalar(double v) {
  float f = static_cast<float>(v);
  return f > 0.0f && std::isfinite(f);
}

/// Checks that each score scalar is given at most once: as an attribute or
/// as an operand.
static LogicalResult verifyScoreScalars(Operation *op,
                                        const ScoreScalars &scalars) {
  for (auto [name, attr, value] :
       {std::tuple<StringRef, FloatAttr, Value>{"scale", scalars.scale,
                                                scalars.dynamicScale},
        {"softcap", scalars.softcap, scalars.dynamicSoftcap}})
    if (attr && value)
      return op->emitOpError()
             << name << " must be an attribute or an operand, not both";
  return success();
}

/// Checks scale, softcap and the mask, shared by every op of the dialect.
static LogicalResult verifyScoreAttributes(Operation *op, FloatAttr scale,
                                           MaskAttrInterface mask,
                                           ValueRange maskOperands,
                                           FloatAttr softcap) {
  if (scale) {
    float s = scale.getValueAsDouble();
    if (!(s > 0.0f) || !std::isfinite(s))
      return op->emitOpError() << "scale must be positive and finite, got "
                               << scale.getValueAsDouble();
  }
  if (softcap) {
    float c = softcap.getValueAsDouble();
    if (!(c > 0.0f) || !std::isfinite(c))
      return op->emitOpError() << "softcap must be positive and finite, got "
                               << softcap.getValueAsDouble();
  }
  if (!mask) {
    if (!maskOperands.empty())
      return op->emitOpError() << "has " << maskOperands.size()
                               << " mask operands but no mask to take them";
    return success();
  }
  return mask.verifyOperands([op] { return op->emitOpError(); },
                             maskOperands.getTypes());
}

/// The tile-level ops (fa.online_attention, fa.attention_backward_step): the
/// optional masked(q_start, k_start, q_len, k_len) operands come all or
/// none, a mask needs them, modifiers need them and at(b, h), then the
/// score attributes.
template <typename TileOp> static LogicalResult verifyMaskedTileOp(TileOp op) {
  if (!op.getScaleAttr() && !op.getDynamicScale())
    return op.emitOpError()
           << "needs a scale: a constant or an f32 operand (scale %s)";
  int numMaskOperands = (op.getQStart() ? 1 : 0) + (op.getKStart() ? 1 : 0) +
                        (op.getQLen() ? 1 : 0) + (op.getKLen() ? 1 : 0);
  if (numMaskOperands != 0 && numMaskOperands != 4)
    return op.emitOpError() << "masked needs all four of q_start, k_start, "
                               "q_len and k_len";
  if (!op.isMasked() && (op.getMaskAttr() || !op.getMaskOperands().empty()))
    return op.emitOpError()
           << "a mask needs the "
              "masked(q_start, k_start, q_len, k_len) operands";
  // Modifiers read the tile's global positions, batch and head.
  if (op.hasModifiers() && (!op.isMasked() || !op.getBatchIndex()))
    return op.emitOpError() << "with a score_mod or mask_mod needs the tile's "
                               "positions (masked(...)) and its batch and "
                               "head (at(...))";
  if (!op.getBatchIndex() != !op.getHeadIndex())
    return op.emitOpError() << "needs both the batch and the head index, or "
                               "neither";
  if (failed(verifyScoreScalars(op, op.getScoreScalars())))
    return failure();
  return verifyScoreAttributes(op, op.getScaleAttr(), op.getMaskAttr(),
                               op.getMaskOperands(), op.getSoftcapAttr());
}

//===----------------------------------------------------------------------===//
// Score scalars: assembly, values, folding
//===----------------------------------------------------------------------===//

/// `keyword (%value | float)`, or nothing: one score scalar, a run-time f32
/// operand or a constant attribute.
static ParseResult
parseScoreScalar(OpAsmParser &parser, StringRef keyword,
                 std::optional<OpAsmParser::UnresolvedOperand> &operand,
                 FloatAttr &attr) {
  if (failed(parser.parseOptionalKeyword(keyword)))
    return success();
  OpAsmParser::UnresolvedOperand value;
  OptionalParseResult parsed = parser.parseOptionalOperand(value);
  if (parsed.has_value()) {
    if (failed(*parsed))
      return failure();
    operand = value;
    return success();
  }
  return parser.parseAttribute(attr, parser.getBuilder().getF32Type());
}

static void printScoreScalar(OpAsmPrinter &printer, StringRef keyword,
                             Value operand, FloatAttr attr) {
  if (operand)
    printer << keyword << ' ' << operand;
  else if (attr) {
    printer << keyword << ' ';
    printer.printAttributeWithoutType(attr);
  }
}

static ParseResult
parseScale(OpAsmParser &parser,
           std::optional<OpAsmParser::UnresolvedOperand> &operand,
           FloatAttr &attr) {
  return parseScoreScalar(parser, "scale", operand, attr);
}
static void printScale(OpAsmPrinter &printer, Operation *, Value operand,
                       FloatAttr attr) {
  printScoreScalar(printer, "scale", operand, attr);
}
static ParseResult
parseSoftcap(OpAsmParser &parser,
             std::optional<OpAsmParser::UnresolvedOperand> &operand,
             FloatAttr &attr) {
  return parseScoreScalar(parser, "softcap", operand, attr);
}
static void printSoftcap(OpAsmPrinter &printer, Operation *, Value operand,
                         FloatAttr attr) {
  printScoreScalar(printer, "softcap", operand, attr);
}

/// `mask<...>(%operands)`, `mask(#dialect.attr)(%operands)`, or nothing:
/// `#fa.mask` is written without its dialect prefix, any other mask in full
/// and in parentheses; the operands only when the mask takes some.
static ParseResult
parseMask(OpAsmParser &parser,
          SmallVectorImpl<OpAsmParser::UnresolvedOperand> &operands,
          MaskAttrInterface &mask) {
  if (failed(parser.parseOptionalKeyword("mask")))
    return success();
  SMLoc loc = parser.getCurrentLocation();
  Attribute attr;
  // Another mask in parentheses: a dialect attribute would read the op's
  // `: type` as its own.
  if (succeeded(parser.parseOptionalLParen())) {
    if (parser.parseAttribute(attr) || parser.parseRParen())
      return failure();
  } else if (!(attr = MaskAttr::parse(parser, Type()))) {
    return failure();
  }
  mask = dyn_cast<MaskAttrInterface>(attr);
  if (!mask)
    return parser.emitError(loc)
           << "expected a mask attribute (implementing MaskAttrInterface), "
              "got "
           << attr;
  if (succeeded(parser.parseOptionalLParen()))
    return failure(parser.parseOperandList(operands) || parser.parseRParen());
  return success();
}

static void printMask(OpAsmPrinter &printer, Operation *, OperandRange operands,
                      MaskAttrInterface mask) {
  if (!mask)
    return;
  printer << "mask";
  if (auto m = dyn_cast<MaskAttr>(mask))
    m.print(printer);
  else
    printer << '(' << mask << ')';
  if (!operands.empty())
    printer << '(' << operands << ')';
}

/// The value of a score scalar: its operand, or a constant of `attr`.
static Value buildScoreScalar(OpBuilder &b, Location loc, Value operand,
                              FloatAttr attr) {
  if (operand)
    return operand;
  if (!attr)
    return Value();
  return arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(static_cast<float>(attr.getValueAsDouble())));
}

Value ScoreScalars::buildScale(OpBuilder &b, Location loc) const {
  return buildScoreScalar(b, loc, dynamicScale, scale);
}
Value ScoreScalars::buildSoftcap(OpBuilder &b, Location loc) const {
  return buildScoreScalar(b, loc, dynamicSoftcap, softcap);
}

ScoreFactors ScoreFactors::build(OpBuilder &b, Location loc, Value scale,
                                 Value softcap, double log2Base) {
  Value base = arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(static_cast<float>(log2Base)));
  ScoreFactors f;
  if (softcap)
    f.capIn = b.createOrFold<arith::DivFOp>(loc, scale, softcap);
  f.expFactor =
      b.createOrFold<arith::MulFOp>(loc, softcap ? softcap : scale, base);
  return f;
}

/// The mask with its constant operands built in (MaskAttrInterface::
/// foldOperands), and the operands it keeps; a null mask when none folds.
static MaskAttrInterface foldMaskOperands(MaskAttrInterface mask,
                                          ValueRange operands,
                                          SmallVectorImpl<Value> &kept) {
  if (!mask || operands.empty())
    return MaskAttrInterface();
  SmallVector<Attribute> constants;
  for (Value v : operands) {
    Attribute c;
    constants.push_back(matchPattern(v, m_Constant(&c)) ? c : Attribute());
  }
  SmallVector<unsigned> keptIndices;
  auto folded = dyn_cast_or_null<MaskAttrInterface>(
      mask.foldOperands(constants, keptIndices));
  if (!folded)
    return MaskAttrInterface();
  for (unsigned i : keptIndices)
    kept.push_back(operands[i]);
  return folded;
}

namespace {
/// Folds a constant (valid) scale or softcap operand into its attribute, and
/// constant mask operands into the mask, so that the constant form reaches
/// the lowerings as before.
template <typename OpT>
struct FoldConstantScoreScalars final : OpRewritePattern<OpT> {
  using OpRewritePattern<OpT>::OpRewritePattern;

  LogicalResult matchAndRewrite(OpT op,
                                PatternRewriter &rewriter) const override {
    auto constantOf = [](Value v) -> FloatAttr {
      FloatAttr c;
      if (v && matchPattern(v, m_Constant(&c)) &&
          isValidScoreScalar(c.getValueAsDouble()))
        return c;
      return FloatAttr();
    };
    FloatAttr scale = constantOf(op.getDynamicScale());
    FloatAttr softcap = constantOf(op.getDynamicSoftcap());
    Builder b(op.getContext());
    SmallVector<Value> keptMaskOperands;
    MaskAttrInterface mask = foldMaskOperands(
        op.getMaskAttr(), op.getMaskOperands(), keptMaskOperands);
    if (!scale && !softcap && !mask)
      return failure();
    rewriter.modifyOpInPlace(op, [&] {
      if (mask) {
        op.setMaskAttr(mask);
        op.getMaskOperandsMutable().assign(keptMaskOperands);
      }
      if (scale) {
        op.setScaleAttr(b.getF32FloatAttr(scale.getValueAsDouble()));
        op.getDynamicScaleMutable().clear();
      }
      if (softcap) {
        op.setSoftcapAttr(b.getF32FloatAttr(softcap.getValueAsDouble()));
        op.getDynamicSoftcapMutable().clear();
      }
    });
    return success();
  }
};
} // namespace

#define FA_SCORE_SCALAR_METHODS(OpT)                                           \
  Value OpT::buildSoftcap(OpBuilder &b, Location loc) {                        \
    return buildScoreScalar(b, loc, getDynamicSoftcap(), getSoftcapAttr());    \
  }                                                                            \
  void OpT::getCanonicalizationPatterns(RewritePatternSet &patterns,           \
                                        MLIRContext *context) {                \
    patterns.add<FoldConstantScoreScalars<OpT>>(context);                      \
  }                                                                            \
  ScoreScalars OpT::getScoreScalars() {                                        \
    return {getScaleAttr(), getDynamicScale(), getSoftcapAttr(),               \
            getDynamicSoftcap()};                                              \
  }
FA_SCORE_SCALAR_METHODS(AttentionOp)
FA_SCORE_SCALAR_METHODS(AttentionBackwardOp)
FA_SCORE_SCALAR_METHODS(AttentionVarlenOp)
FA_SCORE_SCALAR_METHODS(AttentionPagedOp)
FA_SCORE_SCALAR_METHODS(AttentionVarlenBackwardOp)
FA_SCORE_SCALAR_METHODS(OnlineAttentionOp)
FA_SCORE_SCALAR_METHODS(AttentionBackwardStepOp)
#undef FA_SCORE_SCALAR_METHODS

Value OnlineAttentionOp::buildScale(OpBuilder &b, Location loc) {
  return buildScoreScalar(b, loc, getDynamicScale(), getScaleAttr());
}
Value AttentionBackwardStepOp::buildScale(OpBuilder &b, Location loc) {
  return buildScoreScalar(b, loc, getDynamicScale(), getScaleAttr());
}

//===----------------------------------------------------------------------===//
// Modifier regions: assembly, verification, inlining
//===----------------------------------------------------------------------===//

/// `captures(%t, ...)`, then each of the keyword-led regions, e.g.
/// `score_mod(%s: f32, ...) {...}` and `mask_mod(...) {...}`, each optional:
/// the block arguments are written with their types, as a function's.
static ParseResult
parseModifierRegions(OpAsmParser &parser,
                     SmallVectorImpl<OpAsmParser::UnresolvedOperand> &captures,
                     ArrayRef<std::pair<StringRef, Region *>> regions) {
  if (succeeded(parser.parseOptionalKeyword("captures")) &&
      (parser.parseLParen() || parser.parseOperandList(captures) ||
       parser.parseRParen()))
    return failure();
  for (auto [keyword, region] : regions) {
    if (failed(parser.parseOptionalKeyword(keyword)))
      continue;
    SmallVector<OpAsmParser::Argument> arguments;
    // The op is isolated from above: its regions may reuse outer names.
    if (parser.parseArgumentList(arguments, OpAsmParser::Delimiter::Paren,
                                 /*allowType=*/true) ||
        parser.parseRegion(*region, arguments, /*enableNameShadowing=*/true))
      return failure();
  }
  return success();
}

static void
printModifierRegions(OpAsmPrinter &printer, OperandRange captures,
                     ArrayRef<std::pair<StringRef, Region *>> regions) {
  StringRef sep = "";
  if (!captures.empty()) {
    printer << "captures(" << captures << ')';
    sep = " ";
  }
  for (auto [keyword, region] : regions) {
    if (region->empty())
      continue;
    printer << sep << keyword << '(';
    sep = " ";
    llvm::interleaveComma(
        region->getArguments(), printer,
        [&](BlockArgument arg) { printer.printRegionArgument(arg); });
    printer << ") ";
    printer.printRegion(*region, /*printEntryBlockArgs=*/false);
  }
}

static ParseResult
parseModifiers(OpAsmParser &parser,
               SmallVectorImpl<OpAsmParser::UnresolvedOperand> &captures,
               Region &scoreMod, Region &maskMod) {
  return parseModifierRegions(
      parser, captures, {{"score_mod", &scoreMod}, {"mask_mod", &maskMod}});
}

static void printModifiers(OpAsmPrinter &printer, Operation *,
                           OperandRange captures, Region &scoreMod,
                           Region &maskMod) {
  printModifierRegions(printer, captures,
                       {{"score_mod", &scoreMod}, {"mask_mod", &maskMod}});
}

/// A tile op's modifiers, with the captures' types (its type list names
/// only the tiles): `captures(%c : type, ...) score_mod(...) {...}
/// mask_mod(...) {...}`.
static ParseResult
parseTypedModifiers(OpAsmParser &parser,
                    SmallVectorImpl<OpAsmParser::UnresolvedOperand> &captures,
                    SmallVectorImpl<Type> &captureTypes, Region &scoreMod,
                    Region &maskMod) {
  if (succeeded(parser.parseOptionalKeyword("captures")) &&
      (parser.parseLParen() || parser.parseOperandList(captures) ||
       parser.parseColonTypeList(captureTypes) || parser.parseRParen()))
    return failure();
  return parseModifierRegions(
      parser, captures, {{"score_mod", &scoreMod}, {"mask_mod", &maskMod}});
}

static void printTypedModifiers(OpAsmPrinter &printer, Operation *,
                                OperandRange captures, TypeRange captureTypes,
                                Region &scoreMod, Region &maskMod) {
  if (!captures.empty())
    printer << "captures(" << captures << " : " << captureTypes << ") ";
  printModifierRegions(printer, OperandRange(captures.end(), captures.end()),
                       {{"score_mod", &scoreMod}, {"mask_mod", &maskMod}});
}

/// The backward tile op's: the typed captures, then the backward's regions.
static ParseResult parseTypedBackwardModifiers(
    OpAsmParser &parser,
    SmallVectorImpl<OpAsmParser::UnresolvedOperand> &captures,
    SmallVectorImpl<Type> &captureTypes, Region &scoreMod, Region &maskMod,
    Region &scoreModGrad) {
  if (succeeded(parser.parseOptionalKeyword("captures")) &&
      (parser.parseLParen() || parser.parseOperandList(captures) ||
       parser.parseColonTypeList(captureTypes) || parser.parseRParen()))
    return failure();
  return parseModifierRegions(parser, captures,
                              {{"score_mod", &scoreMod},
                               {"mask_mod", &maskMod},
                               {"score_mod_grad", &scoreModGrad}});
}

static void printTypedBackwardModifiers(OpAsmPrinter &printer, Operation *,
                                        OperandRange captures,
                                        TypeRange captureTypes,
                                        Region &scoreMod, Region &maskMod,
                                        Region &scoreModGrad) {
  if (!captures.empty())
    printer << "captures(" << captures << " : " << captureTypes << ") ";
  printModifierRegions(printer, OperandRange(captures.end(), captures.end()),
                       {{"score_mod", &scoreMod},
                        {"mask_mod", &maskMod},
                        {"score_mod_grad", &scoreModGrad}});
}

/// The backward's: the forward's regions, then `score_mod_grad(...) {...}`.
static ParseResult parseBackwardModifiers(
    OpAsmParser &parser,
    SmallVectorImpl<OpAsmParser::UnresolvedOperand> &captures, Region &scoreMod,
    Region &maskMod, Region &scoreModGrad) {
  return parseModifierRegions(parser, captures,
                              {{"score_mod", &scoreMod},
                               {"mask_mod", &maskMod},
                               {"score_mod_grad", &scoreModGrad}});
}

static void printBackwardModifiers(OpAsmPrinter &printer, Operation *,
                                   OperandRange captures, Region &scoreMod,
                                   Region &maskMod, Region &scoreModGrad) {
  printModifierRegions(printer, captures,
                       {{"score_mod", &scoreMod},
                        {"mask_mod", &maskMod},
                        {"score_mod_grad", &scoreModGrad}});
}

/// Whether `op` itself may sit in a modifier region: no memory effect, or
/// only reads (tensor.extract of a capture). An op whose effects are those
/// of its body (scf.if) is judged by the ops of its body.
static bool isAllowedInModifier(Operation *op) {
  if (op->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
    return true;
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return false;
  SmallVector<MemoryEffects::EffectInstance> instances;
  effects.getEffects(instances);
  return llvm::all_of(instances, [](const MemoryEffects::EffectInstance &e) {
    return isa<MemoryEffects::Read>(e.getEffect());
  });
}

/// Checks one modifier region: its block arguments (`leading`, named by
/// `names`, then one per capture of its type), its terminator and the type
/// it yields, and that its ops have no side effect.
static LogicalResult verifyModifier(Operation *op, StringRef regionName,
                                    Region &region, ArrayRef<Type> leading,
                                    ArrayRef<StringRef> names,
                                    ValueRange captures, Type yielded) {
  if (region.empty())
    return success();
  Block &block = region.front();
  size_t expected = leading.size() + captures.size();
  if (block.getNumArguments() != expected) {
    std::string signature;
    llvm::raw_string_ostream os(signature);
    llvm::interleaveComma(
        llvm::zip_equal(leading, names), os, [&](auto typeAndName) {
          os << std::get<0>(typeAndName) << ' ' << std::get<1>(typeAndName);
        });
    return op->emitOpError()
           << regionName << " must take (" << signature << ") and then the "
           << captures.size() << " captures, got " << block.getNumArguments()
           << " arguments";
  }
  for (auto [i, arg] : llvm::enumerate(block.getArguments())) {
    if (i < leading.size()) {
      if (arg.getType() != leading[i])
        return op->emitOpError()
               << regionName << " argument #" << i << " (" << names[i]
               << ") must be " << leading[i] << ", got " << arg.getType();
      continue;
    }
    unsigned c = i - leading.size();
    if (arg.getType() != captures[c].getType())
      return op->emitOpError()
             << regionName << " argument #" << i << " must have the type of "
             << "capture #" << c << ", " << captures[c].getType() << ", got "
             << arg.getType();
  }
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return op->emitOpError() << regionName << " must end with fa.yield";
  if (yield.getValue().getType() != yielded)
    return op->emitOpError() << regionName << " must yield " << yielded
                             << ", got " << yield.getValue().getType();
  WalkResult impure = region.walk([&](Operation *inner) {
    if (isAllowedInModifier(inner))
      return WalkResult::advance();
    op->emitOpError() << regionName
                      << " must be free of side effects (reads allowed), "
                         "got '"
                      << inner->getName() << "'";
    return WalkResult::interrupt();
  });
  return failure(impure.wasInterrupted());
}

LogicalResult mlir::fa::verifyModifiers(Operation *op, Region &scoreMod,
                                        Region &maskMod, ValueRange captures,
                                        Region *scoreModGrad) {
  Builder b(op->getContext());
  Type f32 = b.getF32Type(), index = b.getIndexType();
  StringRef indexNames[] = {"b", "h", "q_idx", "kv_idx"};
  Type indexTypes[] = {index, index, index, index};
  StringRef scoreNames[] = {"score", "b", "h", "q_idx", "kv_idx"};
  Type scoreTypes[] = {f32, index, index, index, index};
  if (!captures.empty() && scoreMod.empty() && maskMod.empty())
    return op->emitOpError() << "has " << captures.size()
                             << " captures but no score_mod or mask_mod to "
                                "read them";
  if (failed(verifyModifier(op, "score_mod", scoreMod, scoreTypes, scoreNames,
                            captures, f32)) ||
      failed(verifyModifier(op, "mask_mod", maskMod, indexTypes, indexNames,
                            captures, b.getI1Type())))
    return failure();
  if (!scoreModGrad || scoreModGrad->empty())
    return success();
  if (scoreMod.empty())
    return op->emitOpError()
           << "has a score_mod_grad but no score_mod to differentiate";
  return verifyModifier(op, "score_mod_grad", *scoreModGrad, scoreTypes,
                        scoreNames, captures, f32);
}

Value mlir::fa::inlineModifier(OpBuilder &b, Region &region,
                               ValueRange arguments) {
  assert(!region.empty() && "no modifier to inline");
  Block &block = region.front();
  assert(block.getNumArguments() == arguments.size() &&
         "one value per block argument");
  IRMapping mapping;
  mapping.map(block.getArguments(), arguments);
  for (Operation &op : block.without_terminator())
    b.clone(op, mapping);
  return mapping.lookup(cast<YieldOp>(block.getTerminator()).getValue());
}

namespace {
/// The tensors of a forward or backward attention op by role: the inputs
/// q, k, v, and the other operands and results named by whose shape they
/// share (q: [B, Hq, Nq, D], k: [B, Hkv, Nk, D], v: [B, Hkv, Nk, Dv],
/// out: [B, Hq, Nq, Dv], lse: [B, Hq, Nq]).
struct AttentionTensors {
  using Named = std::pair<StringRef, RankedTensorType>;
  RankedTensorType q, k, v;
  SmallVector<Named> likeQ, likeK, likeV, likeOut, likeLse;
};
} // namespace

/// Checks that q, k and v share one element type.
static LogicalResult verifyInputElementTypes(Operation *op, RankedTensorType q,
                                             RankedTensorType k,
                                             RankedTensorType v) {
  Type elt = q.getElementType();
  if (k.getElementType() != elt || v.getElementType() != elt)
    return op->emitOpError() << "query, key and value must have the same "
                                "element type, got "
                             << elt << ", " << k.getElementType() << " and "
                             << v.getElementType();
  return success();
}

/// Checks the head dims (the last dimension of q, k and v): static, what the
/// kernels are specialized for.
static LogicalResult verifyHeadDims(Operation *op, RankedTensorType q,
                                    RankedTensorType k, RankedTensorType v) {
  using Named = std::pair<StringRef, RankedTensorType>;
  for (auto [name, type] :
       {Named{"query", q}, Named{"key", k}, Named{"value", v}})
    if (type.isDynamicDim(type.getRank() - 1))
      return op->emitOpError() << name << " head dim must be static";
  for (auto [name, size] :
       {std::pair<StringRef, int64_t>{"query/key", q.getShape().back()},
        std::pair<StringRef, int64_t>{"value", v.getShape().back()}}) {
    if (size <= 0 || size % 8 != 0 || size > kMaxHeadDim)
      return op->emitOpError()
             << "unsupported " << name << " head dim " << size
             << ": expected a multiple of 8 in [8, " << kMaxHeadDim << "]";
  }
  return success();
}

/// Query head h reads key/value head h / (Hq / Hkv): both counts must be
/// positive (Hq = 0 would make the group size 0) and Hkv must divide Hq.
static LogicalResult verifyHeadCounts(Operation *op, ArrayRef<DimRef> hq,
                                      ArrayRef<DimRef> hkv) {
  int64_t numQHeads = staticSize(hq), numKVHeads = staticSize(hkv);
  if (numQHeads == 0)
    return op->emitOpError() << "query head count must be positive";
  if (numKVHeads == 0)
    return op->emitOpError() << "key/value head count must be positive";
  if (!ShapedType::isDynamic(numQHeads) && !ShapedType::isDynamic(numKVHeads) &&
      numQHeads % numKVHeads != 0)
    return op->emitOpError()
           << "query head count (" << numQHeads
           << ") must be a multiple of the key/value head count (" << numKVHeads
           << ")";
  return success();
}

/// `dims` names, per dimension of a tensor, the list of places of one
/// symbolic size it joins.
using DimLists = ArrayRef<SmallVectorImpl<DimRef> *>;
static void addDims(DimLists dims, StringRef name, RankedTensorType type) {
  for (auto [i, refs] : llvm::enumerate(dims))
    refs->push_back({name, type, static_cast<int64_t>(i)});
}

/// Verifies the shapes and element types of a forward or backward attention
/// op, and its attributes.
static LogicalResult verifyAttention(Operation *op, const AttentionTensors &t,
                                     FloatAttr scale, MaskAttrInterface mask,
                                     ValueRange maskOperands,
                                     FloatAttr softcap) {
  if (failed(verifyInputElementTypes(op, t.q, t.k, t.v)))
    return failure();
  Type elt = t.q.getElementType();

  // Every place where one symbolic dimension appears, inputs first.
  SmallVector<DimRef> batch, hq, hkv, nq, nk, d, dv;
  SmallVectorImpl<DimRef> *qDims[] = {&batch, &hq, &nq, &d},
                          *kDims[] = {&batch, &hkv, &nk, &d},
                          *vDims[] = {&batch, &hkv, &nk, &dv},
                          *outDims[] = {&batch, &hq, &nq, &dv};
  addDims(qDims, "query", t.q);
  addDims(kDims, "key", t.k);
  addDims(vDims, "value", t.v);
  for (auto [dims, list] :
       {std::pair<DimLists, ArrayRef<AttentionTensors::Named>>{qDims, t.likeQ},
        {kDims, t.likeK},
        {vDims, t.likeV},
        {outDims, t.likeOut},
        {DimLists(outDims).take_front(3), t.likeLse}})
    for (auto [name, type] : list)
      addDims(dims, name, type);
  if (failed(checkSameDim(op, "batch size", batch)) ||
      failed(checkSameDim(op, "query head count", hq)) ||
      failed(checkSameDim(op, "key/value head count", hkv)) ||
      failed(checkSameDim(op, "query sequence length", nq)) ||
      failed(checkSameDim(op, "key/value sequence length", nk)) ||
      failed(checkSameDim(op, "head dim", d)) ||
      failed(checkSameDim(op, "value head dim", dv)))
    return failure();
  if (failed(verifyHeadDims(op, t.q, t.k, t.v)) ||
      failed(verifyHeadCounts(op, hq, hkv)))
    return failure();

  for (ArrayRef<AttentionTensors::Named> group :
       {ArrayRef(t.likeQ), ArrayRef(t.likeK), ArrayRef(t.likeV),
        ArrayRef(t.likeOut)})
    for (auto [name, type] : group)
      if (failed(checkElementType(op, name, type, elt)))
        return failure();

  return verifyScoreAttributes(op, scale, mask, maskOperands, softcap);
}

static float defaultScale(int64_t headDim) {
  return 1.0f / std::sqrt(static_cast<float>(headDim));
}

/// The constant scale of a forward or backward attention op (see
/// getStaticScale).
template <typename OpT> static FloatAttr staticScaleOf(OpT op) {
  if (op.getDynamicScale())
    return FloatAttr();
  if (FloatAttr s = op.getScaleAttr())
    return s;
  return Builder(op.getContext())
      .getF32FloatAttr(defaultScale(op.getHeadDim()));
}

/// Checks an op's `kernel_config` (if any) against its head dims, element
/// type and the chip.
template <typename OpT>
static LogicalResult verifyConfigOf(OpT op, bool backward, bool deterministic) {
  KernelConfigAttr config = op.getKernelConfigAttr();
  if (!config)
    return success();
  Type elt = op.getQuery().getType().getElementType();
  if (!elt.isF16() && !elt.isBF16())
    return op.emitOpError() << "a kernel_config needs f16 or bf16 inputs "
                               "(the GPU kernels), got "
                            << elt;
  return verifyKernelConfig([&] { return op.emitOpError(); }, config, backward,
                            deterministic, op.getHeadDim(),
                            op.getValueHeadDim());
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

void AttentionOp::build(OpBuilder &b, OperationState &state, Value query,
                        Value key, Value value, FloatAttr scale,
                        MaskAttrInterface mask, FloatAttr softcap,
                        Value dynamicScale, Value dynamicSoftcap,
                        ValueRange maskOperands, ValueRange captures,
                        Value keyRanges, int64_t keyRangeRows) {
  auto q = cast<RankedTensorType>(query.getType());
  auto v = cast<RankedTensorType>(value.getType());
  auto out = RankedTensorType::get(
      {q.getDimSize(0), q.getDimSize(1), q.getDimSize(2), v.getDimSize(3)},
      q.getElementType());
  auto lse = RankedTensorType::get(q.getShape().take_front(3), b.getF32Type());
  build(b, state, out, lse, query, key, value, dynamicSoftcap, dynamicScale,
        maskOperands, keyRanges, captures, scale, mask, softcap,
        KernelConfigAttr(),
        keyRanges ? b.getI64IntegerAttr(keyRangeRows) : IntegerAttr());
}

/// Run-time ranges `name` ([d0, d1, ceil(len / rows), columns] i32 with
/// rows > 0, the operand and its rows both or none): fa.attention's and
/// fa.attention_backward's key_ranges (d0, d1 = B, Hq and len = Nq, 2 or 4
/// columns) and the backward's query_ranges (B, Hkv, Nk, 2 columns).
static LogicalResult verifyRanges(Operation *op, StringRef name, Value ranges,
                                  IntegerAttr rowsAttr, int64_t d0, int64_t d1,
                                  int64_t len, StringRef h, StringRef n,
                                  bool fourColumns) {
  if (!ranges && !rowsAttr)
    return success();
  if (!ranges || !rowsAttr)
    return op->emitOpError()
           << name << " and " << name.drop_back() << "_rows go together";
  int64_t rows = rowsAttr.getInt();
  if (rows <= 0)
    return op->emitOpError() << name << " rows must be > 0, got " << rows;
  std::string shape = ("[B, " + h + ", ceil(" + n + " / rows), " +
                       (fourColumns ? "2 or 4" : "2") + "]")
                          .str();
  auto type = cast<RankedTensorType>(ranges.getType());
  if (type.getRank() != 4)
    return op->emitOpError()
           << name << " must be " << shape << ", got rank " << type.getRank();
  auto mismatch = [&](int64_t got, int64_t want) {
    return !ShapedType::isDynamic(got) && !ShapedType::isDynamic(want) &&
           got != want;
  };
  int64_t groups = ShapedType::isDynamic(len) ? ShapedType::kDynamic
                                              : llvm::divideCeil(len, rows);
  const int64_t want[] = {d0, d1, groups};
  std::string groupsName = ("ceil(" + n + " / rows)").str();
  const std::string names[] = {"B", h.str(), groupsName};
  for (int i = 0; i < 3; ++i)
    if (mismatch(type.getDimSize(i), want[i]))
      return op->emitOpError()
             << name << " dimension " << i << " must be " << names[i] << " = "
             << want[i] << ", got " << type.getDimSize(i);
  // (Static: the lowerings read the full ranges only when they are there.)
  int64_t columns = type.getDimSize(3);
  if (columns == 2 || (fourColumns && columns == 4))
    return success();
  return op->emitOpError()
         << name << " dimension 3 must be 2 (the "
         << (name.starts_with("key") ? "key" : "query") << " range)"
         << (fourColumns ? " or 4 (and the fully visible range)" : "")
         << ", got "
         << (ShapedType::isDynamic(columns) ? std::string("?")
                                            : std::to_string(columns));
}

/// fa.attention's key_ranges (also the backward's).
static LogicalResult verifyKeyRanges(Operation *op, RankedTensorType q,
                                     Value ranges, IntegerAttr rowsAttr) {
  return verifyRanges(op, "key_ranges", ranges, rowsAttr, q.getDimSize(0),
                      q.getDimSize(1), q.getDimSize(2), "Hq", "Nq",
                      /*fourColumns=*/true);
}

FloatAttr AttentionOp::getStaticScale() { return staticScaleOf(*this); }

Value AttentionOp::buildScale(OpBuilder &b, Location loc) {
  return buildScoreScalar(b, loc, getDynamicScale(), getStaticScale());
}

LogicalResult AttentionOp::verify() {
  AttentionTensors t;
  t.q = getQuery().getType();
  t.k = getKey().getType();
  t.v = getValue().getType();
  t.likeOut.push_back({"out", getOut().getType()});
  t.likeLse.push_back({"lse", getLse().getType()});
  if (failed(verifyScoreScalars(*this, getScoreScalars())) ||
      failed(verifyAttention(*this, t, getScaleAttr(), getMaskAttr(),
                             getMaskOperands(), getSoftcapAttr())) ||
      failed(
          verifyKeyRanges(*this, t.q, getKeyRanges(), getKeyRangeRowsAttr())))
    return failure();
  return verifyConfigOf(*this, /*backward=*/false, /*deterministic=*/false);
}

LogicalResult AttentionOp::verifyRegions() {
  return verifyModifiers(*this, getScoreMod(), getMaskMod(), getCaptures());
}

//===----------------------------------------------------------------------===//
// AttentionBackwardOp
//===----------------------------------------------------------------------===//

void AttentionBackwardOp::build(OpBuilder &b, OperationState &state,
                                Value query, Value key, Value value, Value out,
                                Value lse, Value dout, FloatAttr scale,
                                MaskAttrInterface mask, FloatAttr softcap,
                                bool deterministic, Value dynamicScale,
                                Value dynamicSoftcap, ValueRange maskOperands,
                                ValueRange captures, Value queryRanges,
                                int64_t queryRangeRows, Value keyRanges,
                                int64_t keyRangeRows) {
  build(b, state, query.getType(), key.getType(), value.getType(), query, key,
        value, out, lse, dout, dynamicSoftcap, dynamicScale, maskOperands,
        queryRanges, keyRanges, captures, scale, mask, softcap, deterministic,
        KernelConfigAttr(),
        queryRanges ? b.getI64IntegerAttr(queryRangeRows) : IntegerAttr(),
        keyRanges ? b.getI64IntegerAttr(keyRangeRows) : IntegerAttr());
}

FloatAttr AttentionBackwardOp::getStaticScale() { return staticScaleOf(*this); }

Value AttentionBackwardOp::buildScale(OpBuilder &b, Location loc) {
  return buildScoreScalar(b, loc, getDynamicScale(), getStaticScale());
}

LogicalResult AttentionBackwardOp::verify() {
  AttentionTensors t;
  t.q = getQuery().getType();
  t.k = getKey().getType();
  t.v = getValue().getType();
  t.likeQ.push_back({"dq", getDq().getType()});
  t.likeK.push_back({"dk", getDk().getType()});
  t.likeV.push_back({"dv", getDv().getType()});
  t.likeOut.push_back({"out", getOut().getType()});
  t.likeOut.push_back({"dout", getDout().getType()});
  t.likeLse.push_back({"lse", getLse().getType()});
  if (failed(verifyScoreScalars(*this, getScoreScalars())) ||
      failed(verifyAttention(*this, t, getScaleAttr(), getMaskAttr(),
                             getMaskOperands(), getSoftcapAttr())) ||
      failed(verifyRanges(*this, "query_ranges", getQueryRanges(),
                          getQueryRangeRowsAttr(), t.k.getDimSize(0),
                          t.k.getDimSize(1), t.k.getDimSize(2), "Hkv", "Nk",
                          /*fourColumns=*/false)) ||
      failed(
          verifyKeyRanges(*this, t.q, getKeyRanges(), getKeyRangeRowsAttr())))
    return failure();
  // The gradients have exactly the types of the inputs, not merely agreeing
  // ones: a size that is static in one and dynamic in the other is an error
  // too (the lowerings build dq, dk, dv in the types of q, k, v).
  for (auto [gradName, grad, inputName, input] :
       {std::tuple<StringRef, Type, StringRef, Type>{"dq", getDq().getType(),
                                                     "query", t.q},
        {"dk", getDk().getType(), "key", t.k},
        {"dv", getDv().getType(), "value", t.v}})
    if (grad != input)
      return emitOpError() << gradName << " must have the type of " << inputName
                           << ", " << input << ", got " << grad;
  return verifyConfigOf(*this, /*backward=*/true, getDeterministic());
}

LogicalResult AttentionBackwardOp::verifyRegions() {
  return verifyModifiers(*this, getScoreMod(), getMaskMod(), getCaptures(),
                         &getScoreModGrad());
}

/// Checks that a static offsets or lengths tensor `name` has at least `min`
/// elements.
static LogicalResult checkMinSize(Operation *op, StringRef name,
                                  RankedTensorType type, int64_t min,
                                  StringRef why) {
  if (type.isDynamicDim(0) || type.getDimSize(0) >= min)
    return success();
  return op->emitOpError() << name << " must have at least " << min
                           << " element" << (min == 1 ? "" : "s") << " (" << why
                           << "), got " << type.getDimSize(0);
}

//===----------------------------------------------------------------------===//
// AttentionVarlenOp
//===----------------------------------------------------------------------===//

FloatAttr AttentionVarlenOp::getStaticScale() { return staticScaleOf(*this); }

Value AttentionVarlenOp::buildScale(OpBuilder &b, Location loc) {
  return buildScoreScalar(b, loc, getDynamicScale(), getStaticScale());
}

/// The shapes of the packed forms: q-like [Hq, Tq, D], k [Hkv, Tk, D],
/// v [Hkv, Tk, Dv], out-like [Hq, Tq, Dv], lse [Hq, Tq]; offsets [B + 1].
template <typename OpT>
static LogicalResult
verifyVarlen(OpT op, ArrayRef<AttentionTensors::Named> likeQ,
             ArrayRef<AttentionTensors::Named> likeK,
             ArrayRef<AttentionTensors::Named> likeV,
             ArrayRef<AttentionTensors::Named> likeOut, RankedTensorType lse) {
  RankedTensorType q = op.getQuery().getType(), k = op.getKey().getType(),
                   v = op.getValue().getType(),
                   cuQ = op.getCuSeqlensQ().getType(),
                   cuK = op.getCuSeqlensK().getType();
  if (failed(verifyScoreScalars(op, op.getScoreScalars())) ||
      failed(verifyInputElementTypes(op, q, k, v)))
    return failure();
  SmallVector<DimRef> hq, hkv, tq, tk, d, dv, offsets;
  SmallVectorImpl<DimRef> *qDims[] = {&hq, &tq, &d}, *kDims[] = {&hkv, &tk, &d},
                          *vDims[] = {&hkv, &tk, &dv},
                          *outDims[] = {&hq, &tq, &dv},
                          *offsetDims[] = {&offsets};
  addDims(qDims, "query", q);
  addDims(kDims, "key", k);
  addDims(vDims, "value", v);
  for (auto [dims, list] :
       {std::pair<DimLists, ArrayRef<AttentionTensors::Named>>{qDims, likeQ},
        {kDims, likeK},
        {vDims, likeV},
        {outDims, likeOut}})
    for (auto [name, type] : list)
      addDims(dims, name, type);
  addDims(DimLists(outDims).take_front(2), "lse", lse);
  addDims(offsetDims, "cu_seqlens_q", cuQ);
  addDims(offsetDims, "cu_seqlens_k", cuK);
  if (failed(checkSameDim(op, "query head count", hq)) ||
      failed(checkSameDim(op, "key/value head count", hkv)) ||
      failed(checkSameDim(op, "query token count", tq)) ||
      failed(checkSameDim(op, "key/value token count", tk)) ||
      failed(checkSameDim(op, "head dim", d)) ||
      failed(checkSameDim(op, "value head dim", dv)) ||
      failed(checkSameDim(op, "sequence offset count", offsets)) ||
      failed(checkMinSize(op, "cu_seqlens_q", cuQ, 1,
                          "B + 1 offsets for B sequences")) ||
      failed(checkMinSize(op, "cu_seqlens_k", cuK, 1,
                          "B + 1 offsets for B sequences")) ||
      failed(verifyHeadDims(op, q, k, v)) ||
      failed(verifyHeadCounts(op, hq, hkv)))
    return failure();
  for (ArrayRef<AttentionTensors::Named> group : {likeQ, likeK, likeV, likeOut})
    for (auto [name, type] : group)
      if (failed(checkElementType(op, name, type, q.getElementType())))
        return failure();
  return verifyScoreAttributes(op, op.getScaleAttr(), op.getMaskAttr(),
                               op.getMaskOperands(), op.getSoftcapAttr());
}

LogicalResult AttentionVarlenOp::verify() {
  AttentionTensors::Named out[] = {{"out", getOut().getType()}};
  if (failed(verifyVarlen(*this, {}, {}, {}, out, getLse().getType())))
    return failure();
  return verifyConfigOf(*this, /*backward=*/false, /*deterministic=*/false);
}

//===----------------------------------------------------------------------===//
// AttentionVarlenBackwardOp
//===----------------------------------------------------------------------===//

FloatAttr AttentionVarlenBackwardOp::getStaticScale() {
  return staticScaleOf(*this);
}

Value AttentionVarlenBackwardOp::buildScale(OpBuilder &b, Location loc) {
  return buildScoreScalar(b, loc, getDynamicScale(), getStaticScale());
}

LogicalResult AttentionVarlenBackwardOp::verify() {
  AttentionTensors::Named likeOut[] = {{"out", getOut().getType()},
                                       {"dout", getDout().getType()}};
  if (failed(verifyVarlen(
          *this, {{"dq", getDq().getType()}}, {{"dk", getDk().getType()}},
          {{"dv", getDv().getType()}}, likeOut, getLse().getType())))
    return failure();
  // As fa.attention_backward: the gradients have exactly the inputs' types.
  for (auto [gradName, grad, inputName, input] :
       {std::tuple<StringRef, Type, StringRef, Type>{
            "dq", getDq().getType(), "query", getQuery().getType()},
        {"dk", getDk().getType(), "key", getKey().getType()},
        {"dv", getDv().getType(), "value", getValue().getType()}})
    if (grad != input)
      return emitOpError() << gradName << " must have the type of " << inputName
                           << ", " << input << ", got " << grad;
  return verifyConfigOf(*this, /*backward=*/true, getDeterministic());
}

//===----------------------------------------------------------------------===//
// AttentionPagedOp
//===----------------------------------------------------------------------===//

FloatAttr AttentionPagedOp::getStaticScale() { return staticScaleOf(*this); }

Value AttentionPagedOp::buildScale(OpBuilder &b, Location loc) {
  return buildScoreScalar(b, loc, getDynamicScale(), getStaticScale());
}

LogicalResult AttentionPagedOp::verify() {
  RankedTensorType q = getQuery().getType(), k = getKeyPages().getType(),
                   v = getValuePages().getType(), out = getOut().getType(),
                   lse = getLse().getType(), table = getPageTable().getType(),
                   lens = getCacheSeqlens().getType();
  if (failed(verifyScoreScalars(*this, getScoreScalars())) ||
      failed(verifyInputElementTypes(*this, q, k, v)))
    return failure();
  // q: [B, Hq, Nq, D]; pools: [P, Hkv, S, D]; table: [B, maxPages].
  SmallVector<DimRef> batch, hq, nq, d, pages, hkv, pageSize, dv;
  SmallVectorImpl<DimRef> *qDims[] = {&batch, &hq, &nq, &d},
                          *kDims[] = {&pages, &hkv, &pageSize, &d},
                          *vDims[] = {&pages, &hkv, &pageSize, &dv},
                          *outDims[] = {&batch, &hq, &nq, &dv},
                          *batchDims[] = {&batch};
  addDims(qDims, "query", q);
  addDims(kDims, "key_pages", k);
  addDims(vDims, "value_pages", v);
  addDims(outDims, "out", out);
  addDims(DimLists(outDims).take_front(3), "lse", lse);
  addDims(batchDims, "page_table", table);
  addDims(batchDims, "cache_seqlens", lens);
  if (failed(checkSameDim(*this, "batch size", batch)) ||
      failed(checkSameDim(*this, "query head count", hq)) ||
      failed(checkSameDim(*this, "key/value head count", hkv)) ||
      failed(checkSameDim(*this, "query sequence length", nq)) ||
      failed(checkSameDim(*this, "page count", pages)) ||
      failed(checkSameDim(*this, "page size", pageSize)) ||
      failed(checkSameDim(*this, "head dim", d)) ||
      failed(checkSameDim(*this, "value head dim", dv)))
    return failure();
  if (k.isDynamicDim(2))
    return emitOpError()
           << "page size (dimension 2 of key_pages) must be static";
  if (staticSize(pageSize) <= 0)
    return emitOpError() << "page size must be positive, got "
                         << staticSize(pageSize);
  if (failed(verifyHeadDims(*this, q, k, v)) ||
      failed(verifyHeadCounts(*this, hq, hkv)) ||
      failed(checkElementType(*this, "out", out, q.getElementType())) ||
      failed(verifyScoreAttributes(*this, getScaleAttr(), getMaskAttr(),
                                   getMaskOperands(), getSoftcapAttr())))
    return failure();
  return verifyConfigOf(*this, /*backward=*/false, /*deterministic=*/false);
}

//===----------------------------------------------------------------------===//
// OnlineAttentionOp
//===----------------------------------------------------------------------===//

LogicalResult OnlineAttentionOp::verify() {
  RankedTensorType q = getQuery().getType(), k = getKey().getType(),
                   v = getValue().getType(), acc = getAcc().getType(),
                   max = getMax().getType();
  Type elt = q.getElementType();
  if (k.getElementType() != elt || v.getElementType() != elt)
    return emitOpError() << "query, key and value must have the same element "
                            "type, got "
                         << elt << ", " << k.getElementType() << " and "
                         << v.getElementType();
  // sum, new_max and new_sum have the type of max, new_acc that of acc.
  if (failed(
          checkSameDim(*this, "query block size",
                       {{"query", q, 0}, {"acc", acc, 0}, {"max", max, 0}})) ||
      failed(
          checkSameDim(*this, "head dim", {{"query", q, 1}, {"key", k, 1}})) ||
      failed(checkSameDim(*this, "key block size",
                          {{"key", k, 0}, {"value", v, 0}})) ||
      failed(checkSameDim(*this, "value head dim",
                          {{"value", v, 1}, {"acc", acc, 1}})))
    return failure();

  if (!getFullKeysBegin() != !getFullKeysEnd())
    return emitOpError("full_keys takes a begin and an end");
  if (getFullKeysBegin() && !hasMaskMod())
    return emitOpError("full_keys says where a mask_mod hides nothing; the "
                       "step has no mask_mod");
  return verifyMaskedTileOp(*this);
}

LogicalResult OnlineAttentionOp::verifyRegions() {
  return verifyModifiers(*this, getScoreMod(), getMaskMod(), getCaptures());
}

//===----------------------------------------------------------------------===//
// OnlineAttentionFinalizeOp
//===----------------------------------------------------------------------===//

LogicalResult OnlineAttentionFinalizeOp::verify() {
  // sum and lse have the type of max.
  RankedTensorType acc = getAcc().getType(), max = getMax().getType(),
                   out = getOut().getType();
  if (failed(
          checkSameDim(*this, "query block size",
                       {{"acc", acc, 0}, {"max", max, 0}, {"out", out, 0}})) ||
      failed(checkSameDim(*this, "value head dim",
                          {{"acc", acc, 1}, {"out", out, 1}})))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// PagedKeyBlockOp
//===----------------------------------------------------------------------===//

LogicalResult PagedKeyBlockOp::verify() {
  RankedTensorType pages = getPages().getType(), result = getResult().getType();
  if (pages.isDynamicDim(2) || pages.getDimSize(2) <= 0)
    return emitOpError("needs a static, positive page size (dim 2 of the "
                       "pages), got ")
           << pages;
  if (result.isDynamicDim(0) || result.isDynamicDim(1))
    return emitOpError("needs a static block shape, got ") << result;
  if (!pages.isDynamicDim(3) && pages.getDimSize(3) != result.getDimSize(1))
    return emitOpError("block row length (")
           << result.getDimSize(1) << ") must be the pages' head dim ("
           << pages.getDimSize(3) << ")";
  if (pages.getElementType() != result.getElementType())
    return emitOpError("block element type ")
           << result.getElementType() << " must be the pages' "
           << pages.getElementType();
  return success();
}

//===----------------------------------------------------------------------===//
// AttentionMergeOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionMergeOp::verify() {
  if (getOuts().empty())
    return emitOpError("merges at least one partial result");
  RankedTensorType out = getOut().getType(), lse = getLse().getType();
  SmallVector<DimRef> batch = {{"out", out, 0}, {"lse", lse, 0}},
                      heads = {{"out", out, 1}, {"lse", lse, 1}},
                      rows = {{"out", out, 2}, {"lse", lse, 2}},
                      dv = {{"out", out, 3}};
  SmallVector<std::string> names;
  for (size_t i = 0; i < getOuts().size(); ++i) {
    names.push_back("outs[" + std::to_string(i) + "]");
    names.push_back("lses[" + std::to_string(i) + "]");
  }
  for (auto [i, o] : llvm::enumerate(getOuts())) {
    auto t = cast<RankedTensorType>(o.getType());
    auto l = cast<RankedTensorType>(getLses()[i].getType());
    StringRef on = names[2 * i], ln = names[2 * i + 1];
    batch.append({{on, t, 0}, {ln, l, 0}});
    heads.append({{on, t, 1}, {ln, l, 1}});
    rows.append({{on, t, 2}, {ln, l, 2}});
    dv.push_back({on, t, 3});
  }
  if (failed(checkSameDim(*this, "batch size", batch)) ||
      failed(checkSameDim(*this, "head count", heads)) ||
      failed(checkSameDim(*this, "query count", rows)) ||
      failed(checkSameDim(*this, "value head dim", dv)))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// AttentionMergeSplitsOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionMergeSplitsOp::verify() {
  RankedTensorType out = getOut().getType(), lse = getLse().getType();
  RankedTensorType outs = getOuts().getType(), lses = getLses().getType();
  if (failed(checkSameDim(*this, "batch size",
                          {{"outs", outs, 0},
                           {"lses", lses, 0},
                           {"out", out, 0},
                           {"lse", lse, 0}})) ||
      failed(checkSameDim(*this, "head count",
                          {{"outs", outs, 1},
                           {"lses", lses, 1},
                           {"out", out, 1},
                           {"lse", lse, 1}})) ||
      failed(checkSameDim(*this, "split count",
                          {{"outs", outs, 2}, {"lses", lses, 2}})) ||
      failed(checkSameDim(*this, "query count",
                          {{"outs", outs, 3},
                           {"lses", lses, 3},
                           {"out", out, 2},
                           {"lse", lse, 2}})) ||
      failed(checkSameDim(*this, "value head dim",
                          {{"outs", outs, 4}, {"out", out, 3}})))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// AttentionBackwardStepOp
//===----------------------------------------------------------------------===//

/// Parses `-> type, ...`: one type per accumulator present (dk, dv, dq in
/// that order), which is also the type of its result. Nothing when no
/// accumulator is present (an op the verifier rejects).
static ParseResult
parseGradientTypes(OpAsmParser &parser,
                   std::optional<OpAsmParser::UnresolvedOperand> dkAcc,
                   std::optional<OpAsmParser::UnresolvedOperand> dvAcc,
                   std::optional<OpAsmParser::UnresolvedOperand> dqAcc,
                   Type &dkAccType, Type &dvAccType, Type &dqAccType,
                   Type &newDkType, Type &newDvType, Type &newDqType) {
  struct Slot {
    bool present;
    Type &acc;
    Type &result;
  };
  Slot slots[] = {{dkAcc.has_value(), dkAccType, newDkType},
                  {dvAcc.has_value(), dvAccType, newDvType},
                  {dqAcc.has_value(), dqAccType, newDqType}};
  bool first = true;
  for (Slot &slot : slots) {
    if (!slot.present)
      continue;
    if (failed(first ? parser.parseArrow() : parser.parseComma()) ||
        parser.parseType(slot.acc))
      return failure();
    slot.result = slot.acc;
    first = false;
  }
  return success();
}

static void printGradientTypes(OpAsmPrinter &printer, Operation *, Value dkAcc,
                               Value dvAcc, Value dqAcc, Type, Type, Type, Type,
                               Type, Type) {
  bool first = true;
  for (Value acc : {dkAcc, dvAcc, dqAcc}) {
    if (!acc)
      continue;
    printer << (first ? "-> " : ", ") << acc.getType();
    first = false;
  }
}

void AttentionBackwardStepOp::build(
    OpBuilder &b, OperationState &state, Value query, Value key, Value value,
    Value dout, Value lse, Value delta, Value dkAcc, Value dvAcc, Value dqAcc,
    ValueRange tilePosition, const ScoreScalars &scalars,
    MaskAttrInterface mask, ValueRange maskOperands, Value batchIndex,
    Value headIndex, ValueRange captures) {
  assert((tilePosition.empty() || tilePosition.size() == 4) &&
         "expected no tile position, or q_start, k_start, q_len and k_len");
  auto typeOf = [](Value v) { return v ? v.getType() : Type(); };
  auto position = [&](unsigned i) {
    return tilePosition.empty() ? Value() : tilePosition[i];
  };
  build(b, state, typeOf(dkAcc), typeOf(dvAcc), typeOf(dqAcc), query, key,
        value, dout, lse, delta, dkAcc, dvAcc, dqAcc, position(0), position(1),
        position(2), position(3), batchIndex, headIndex, scalars.dynamicSoftcap,
        scalars.dynamicScale, maskOperands, captures, scalars.scale, mask,
        scalars.softcap);
}

LogicalResult AttentionBackwardStepOp::verify() {
  RankedTensorType q = getQuery().getType(), k = getKey().getType(),
                   v = getValue().getType(), dout = getDout().getType(),
                   lse = getLse().getType();
  Type elt = q.getElementType();
  if (k.getElementType() != elt || v.getElementType() != elt ||
      dout.getElementType() != elt)
    return emitOpError() << "query, key, value and dout must have the same "
                            "element type, got "
                         << elt << ", " << k.getElementType() << ", "
                         << v.getElementType() << " and "
                         << dout.getElementType();

  // Which gradients the step updates: dK and dV together (the key block's
  // nest), dQ (the query block's), or all three.
  if (!getDkAcc() != !getDvAcc())
    return emitOpError() << "dk_acc and dv_acc must be given together, as "
                            "dkv(dk_acc, dv_acc)";
  if (!getDkAcc() && !getDqAcc())
    return emitOpError() << "needs an accumulator: dkv(dk_acc, dv_acc), "
                            "dq(dq_acc) or both";
  // Each result is its accumulator, updated.
  for (auto [accName, acc, resultName, result] :
       {std::tuple<StringRef, Value, StringRef, Value>{"dk_acc", getDkAcc(),
                                                       "new_dk", getNewDk()},
        {"dv_acc", getDvAcc(), "new_dv", getNewDv()},
        {"dq_acc", getDqAcc(), "new_dq", getNewDq()}}) {
    if (!acc != !result)
      return emitOpError() << "result " << resultName << " must be present "
                           << "exactly when " << accName << " is";
    if (acc && acc.getType() != result.getType())
      return emitOpError() << "result " << resultName << " must have the type "
                           << "of " << accName << ", " << acc.getType()
                           << ", got " << result.getType();
  }

  // Every place where one tile dimension appears; delta has lse's type and
  // each result its accumulator's.
  SmallVector<DimRef> rows = {
      {"query", q, 0}, {"dout", dout, 0}, {"lse", lse, 0}};
  SmallVector<DimRef> keys = {{"key", k, 0}, {"value", v, 0}};
  SmallVector<DimRef> headDim = {{"query", q, 1}, {"key", k, 1}};
  SmallVector<DimRef> valueHeadDim = {{"value", v, 1}, {"dout", dout, 1}};
  if (Value dkAcc = getDkAcc()) {
    auto dk = cast<RankedTensorType>(dkAcc.getType());
    auto dv = cast<RankedTensorType>(getDvAcc().getType());
    keys.append({{"dk_acc", dk, 0}, {"dv_acc", dv, 0}});
    headDim.push_back({"dk_acc", dk, 1});
    valueHeadDim.push_back({"dv_acc", dv, 1});
  }
  if (Value dqAcc = getDqAcc()) {
    auto dq = cast<RankedTensorType>(dqAcc.getType());
    rows.push_back({"dq_acc", dq, 0});
    headDim.push_back({"dq_acc", dq, 1});
  }
  if (failed(checkSameDim(*this, "query block size", rows)) ||
      failed(checkSameDim(*this, "key block size", keys)) ||
      failed(checkSameDim(*this, "head dim", headDim)) ||
      failed(checkSameDim(*this, "value head dim", valueHeadDim)))
    return failure();

  if (hasScoreMod() && getScoreModGrad().empty())
    return emitOpError() << "has a score_mod but no score_mod_grad (its "
                            "derivative: run fa-differentiate-score-mod "
                            "before tiling)";
  return verifyMaskedTileOp(*this);
}

LogicalResult AttentionBackwardStepOp::verifyRegions() {
  return verifyModifiers(*this, getScoreMod(), getMaskMod(), getCaptures(),
                         &getScoreModGrad());
}

#define GET_OP_CLASSES
#include "fa/Dialect/FA/IR/FAOps.cpp.inc"
