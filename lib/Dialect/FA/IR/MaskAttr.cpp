//===- MaskAttr.cpp - The attention mask and its interface ----------------===//
//
// `#fa.mask` (causal and sliding-window masks) implementing
// MaskAttrInterface: the one place that turns the visibility rule into IR,
// for elements and for block ranges.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FAOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace mlir::fa;

#include "fa/Dialect/FA/IR/FAAttrInterfaces.cpp.inc"

Value MaskWidth::build(OpBuilder &b, Location loc) const {
  if (constant)
    return arith::ConstantIndexOp::create(b, loc, *constant);
  return value;
}

//===----------------------------------------------------------------------===//
// Assembly and verification
//===----------------------------------------------------------------------===//

/// `?` (a run-time size), `inf` (unbounded) or an integer.
static ParseResult parseSide(AsmParser &parser, int64_t &side) {
  if (succeeded(parser.parseOptionalQuestion())) {
    side = MaskAttr::kDynamic;
    return success();
  }
  if (succeeded(parser.parseOptionalKeyword("inf"))) {
    side = MaskAttr::kUnbounded;
    return success();
  }
  // Negative sizes would read as the parameter's sentinels.
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseInteger(side))
    return failure();
  if (side < 0)
    return parser.emitError(loc) << "window bounds must be >= 0, or 'inf' for "
                                    "unbounded, got "
                                 << side;
  return success();
}

static void printSide(AsmPrinter &printer, int64_t side) {
  if (side == MaskAttr::kDynamic)
    printer << '?';
  else if (side == MaskAttr::kUnbounded)
    printer << "inf";
  else
    printer << side;
}

Attribute MaskAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess())
    return {};
  int64_t left = kUnbounded, right = kUnbounded;
  if (succeeded(parser.parseOptionalKeyword("causal"))) {
    right = 0;
  } else if (succeeded(parser.parseOptionalKeyword("window"))) {
    if (parseSide(parser, left) || parser.parseComma() ||
        parseSide(parser, right))
      return {};
  } else if (failed(parser.parseOptionalKeyword("none"))) {
    parser.emitError(parser.getCurrentLocation(),
                     "expected 'none', 'causal' or 'window'");
    return {};
  }
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); }, parser.getContext(),
                    left, right);
}

void MaskAttr::print(AsmPrinter &printer) const {
  printer << '<';
  if (getLeft() == kUnbounded && getRight() == kUnbounded) {
    printer << "none";
  } else if (isCausal()) {
    printer << "causal";
  } else {
    printer << "window ";
    printSide(printer, getLeft());
    printer << ", ";
    printSide(printer, getRight());
  }
  printer << '>';
}

LogicalResult MaskAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t left, int64_t right) {
  for (int64_t side : {left, right}) {
    if (side == kDynamic || side == kUnbounded)
      continue;
    if (side < 0)
      return emitError() << "window bounds must be >= 0, or 'inf' for "
                            "unbounded, got "
                         << side;
    if (side > kMaxWindowBound)
      return emitError() << "window bounds must be at most " << kMaxWindowBound
                         << " (the GPU kernels compute the mask in i32), got "
                         << side;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// MaskAttrInterface
//===----------------------------------------------------------------------===//

bool MaskAttr::isFull() const {
  return getLeft() == kUnbounded && getRight() == kUnbounded;
}

LogicalResult
MaskAttr::verifyOperands(function_ref<InFlightDiagnostic()> emitError,
                         TypeRange types) const {
  if (types.size() != getNumDynamicSides())
    return emitError() << "mask " << *this << " takes " << getNumDynamicSides()
                       << " run-time window sizes (one i64 per '?'), got "
                       << types.size() << " mask operands";
  for (auto [i, type] : llvm::enumerate(types))
    if (!type.isInteger(64))
      return emitError() << "mask operand #" << i
                         << " (a window size) must be i64, got " << type;
  return success();
}

Attribute MaskAttr::foldOperands(ArrayRef<Attribute> constants,
                                 SmallVectorImpl<unsigned> &kept) const {
  int64_t sides[] = {getLeft(), getRight()};
  unsigned operand = 0;
  bool folded = false;
  for (int64_t &side : sides) {
    if (side != kDynamic)
      continue;
    unsigned i = operand++;
    auto c = dyn_cast_or_null<IntegerAttr>(i < constants.size() ? constants[i]
                                                                : Attribute());
    // A size past kMaxWindowBound has no constant form: it stays a value.
    if (!c || c.getValue().getSExtValue() > kMaxWindowBound) {
      kept.push_back(i);
      continue;
    }
    int64_t w = c.getValue().getSExtValue();
    side = w < 0 ? kUnbounded : w;
    folded = true;
  }
  if (!folded) {
    kept.clear();
    return {};
  }
  return get(getContext(), sides[0], sides[1]);
}

/// A run-time size as an index value, a negative one (unbounded) made
/// kMaxWindowBound: farther than any key of a sequence the kernels index in
/// i32.
static Value buildRuntimeWidth(OpBuilder &b, Location loc, Value size) {
  Value zero = arith::ConstantIntOp::create(b, loc, size.getType(), 0);
  Value unbounded =
      arith::ConstantIntOp::create(b, loc, size.getType(), kMaxWindowBound);
  Value negative =
      b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, size, zero);
  Value w = b.createOrFold<arith::MinSIOp>(
      loc, b.createOrFold<arith::SelectOp>(loc, negative, unbounded, size),
      unbounded);
  return b.createOrFold<arith::IndexCastOp>(loc, b.getIndexType(), w);
}

SmallVector<Value> MaskAttr::buildParameters(OpBuilder &b, Location loc,
                                             ValueRange operands) const {
  assert(operands.size() == getNumDynamicSides() && "verified mask operands");
  SmallVector<Value> params;
  for (Value size : operands)
    params.push_back(buildRuntimeWidth(b, loc, size));
  return params;
}

bool MaskAttr::isBand() const { return true; }

std::optional<MaskBand> MaskAttr::getBand(ValueRange params) const {
  MaskBand band;
  unsigned next = 0;
  for (auto [side, width] :
       {std::pair<int64_t, MaskWidth *>{getLeft(), &band.left},
        {getRight(), &band.right}}) {
    if (side == kDynamic) {
      assert(next < params.size() && "missing mask parameter");
      width->value = params[next++];
    } else if (side != kUnbounded) {
      width->constant = side;
    }
  }
  return band;
}

namespace {
/// Index arithmetic that folds constants (signed: offsets can be negative),
/// with one constant op per value.
struct IndexMath {
  IndexMath(OpBuilder &b, Location loc) : b(b), loc(loc) {}
  OpBuilder &b;
  Location loc;
  /// Keyed by the attribute, not the int64_t: DenseMap reserves two int64_t
  /// keys (INT64_MAX and INT64_MIN) as its empty and tombstone markers.
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
  /// The largest multiple of `blk` <= max(x, 0), and the smallest >= it.
  Value alignDown(Value x, Value blk) {
    return mul(b.createOrFold<arith::DivUIOp>(loc, max(x, cst(0)), blk), blk);
  }
  Value alignUp(Value x, Value blk) {
    return mul(b.createOrFold<arith::CeilDivUIOp>(loc, max(x, cst(0)), blk),
               blk);
  }
  Value clamp(Value x, Value lo, Value hi) { return min(max(x, lo), hi); }
  /// A bounded width plus `extra`, as an index value.
  Value width(const MaskWidth &w, int64_t extra = 0) {
    if (w.constant)
      return cst(*w.constant + extra);
    return extra ? add(w.value, cst(extra)) : w.value;
  }
};
} // namespace

/// The blocks of side B (blocks of `blockB`, `lenB` elements) that the block
/// [aStart, aStart + blockA) of side A (`lenA` elements) must visit, when
/// element b is visible from element a iff
/// `a + off - lower <= b <= a + off + upper` with `off = lenB - lenA`.
/// The key blocks of a query block are this with A = queries; the query
/// blocks of a key block the same band seen from the keys (off negated, the
/// sides swapped).
static MaskBlockRange buildBandBlockRange(OpBuilder &b, Location loc,
                                          Value aStart, int64_t blockA,
                                          int64_t blockB, Value lenA,
                                          Value lenB, const MaskWidth &lower,
                                          const MaskWidth &upper) {
  IndexMath m{b, loc};
  Value blk = m.cst(blockB);
  // The block's first and last real element (a block past the end of A
  // has none; it is taken as its first, which only widens its range), and
  // the diagonal's offset. Only for a band.
  Value first = aStart, last, off;
  if (lower.isBounded() || upper.isBounded()) {
    last =
        m.max(m.sub(m.min(m.add(first, m.cst(blockA)), lenA), m.cst(1)), first);
    off = m.sub(lenB, lenA);
  }
  // upper + 1, built once.
  Value upperEnd;
  auto upperPlusOne = [&]() -> Value {
    if (!upperEnd)
      upperEnd = m.width(upper, 1);
    return upperEnd;
  };

  // [lo, hi): blocks holding an element visible from some element of the
  // block, [first + off - lower, last + off + upper].
  Value lo = m.cst(0);
  if (lower.isBounded())
    lo = m.alignDown(m.sub(m.add(first, off), m.width(lower)), blk);
  Value lastVisible = lenB;
  if (upper.isBounded())
    lastVisible = m.min(lenB, m.add(m.add(last, off), upperPlusOne()));
  Value hi = m.alignUp(lastVisible, blk);
  if (lower.isBounded())
    hi = m.max(hi, lo);
  hi = m.min(hi, lenB);
  if (lower.isBounded())
    lo = m.min(lo, hi);

  // [fullLo, fullHi): whole blocks every element of which is visible from
  // every element of the block, [last + off - lower, first + off + upper].
  Value fullLo = lo;
  if (lower.isBounded())
    fullLo = m.clamp(m.alignUp(m.sub(m.add(last, off), m.width(lower)), blk),
                     lo, hi);
  Value fullEnd = lenB;
  if (upper.isBounded())
    fullEnd = m.min(lenB, m.add(m.add(first, off), upperPlusOne()));
  Value fullHi = m.clamp(m.alignDown(fullEnd, blk), fullLo, hi);
  return {lo, fullLo, fullHi, hi};
}

Value MaskAttr::buildVisible(OpBuilder &b, Location loc, ValueRange params,
                             Value query, Value key, Value nq, Value nk) const {
  if (isFull())
    return arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1);
  std::optional<MaskBand> band = getBand(params);
  IndexMath m{b, loc};
  // Bottom-right aligned: query i's diagonal is key i + Nk - Nq. Signed
  // compares: the bounds may be negative.
  Value diag = m.add(query, m.sub(nk, nq));
  Value visible;
  auto conjoin = [&](arith::CmpIPredicate pred, Value bound) {
    Value c = b.createOrFold<arith::CmpIOp>(loc, pred, key, bound);
    visible = visible ? b.createOrFold<arith::AndIOp>(loc, visible, c) : c;
  };
  if (band->left.isBounded())
    conjoin(arith::CmpIPredicate::sge, m.sub(diag, m.width(band->left)));
  if (band->right.isBounded())
    conjoin(arith::CmpIPredicate::sle, m.add(diag, m.width(band->right)));
  return visible;
}

MaskBlockRange MaskAttr::buildKeyBlockRange(OpBuilder &b, Location loc,
                                            ValueRange params, Value qStart,
                                            int64_t blockQ, int64_t blockKV,
                                            Value nq, Value nk) const {
  MaskBand band = *getBand(params);
  return buildBandBlockRange(b, loc, qStart, blockQ, blockKV, nq, nk, band.left,
                             band.right);
}

MaskBlockRange MaskAttr::buildQueryBlockRange(OpBuilder &b, Location loc,
                                              ValueRange params, Value kStart,
                                              int64_t blockKV, int64_t blockQ,
                                              Value nq, Value nk) const {
  // Query i sees key j iff j - off - right <= i <= j - off + left.
  MaskBand band = *getBand(params);
  return buildBandBlockRange(b, loc, kStart, blockKV, blockQ, nk, nq,
                             band.right, band.left);
}
