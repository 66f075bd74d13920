//===- MaskModBlocks.cpp - What a mask_mod hides in a block ---------------===//
//
// Abstract interpretation of a mask_mod region over a tile: integers as
// signed intervals [lo, hi] (index values built next to the loop), booleans
// as (mayBeTrue, mayBeFalse). The values are built as IR because the tile's
// bounds are run-time values; constants fold.
//
//===----------------------------------------------------------------------===//

#include "MaskModBlocks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

#include <array>
#include <cstdlib>

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::detail;

namespace {

/// An integer's range, or a boolean's possible values; neither: unknown.
struct Abstract {
  Value lo, hi;     // integers (index)
  Value canT, canF; // booleans (i1)
  bool isInt() const { return lo && hi; }
  bool isBool() const { return canT && canF; }
};

class Interpreter {
public:
  Interpreter(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value i1(bool v) { return arith::ConstantIntOp::create(b, loc, v, 1); }
  Value add(Value x, Value y) {
    return b.createOrFold<arith::AddIOp>(loc, x, y);
  }
  Value sub(Value x, Value y) {
    return b.createOrFold<arith::SubIOp>(loc, x, y);
  }
  Value mul(Value x, Value y) {
    return b.createOrFold<arith::MulIOp>(loc, x, y);
  }
  Value minS(Value x, Value y) {
    return b.createOrFold<arith::MinSIOp>(loc, x, y);
  }
  Value maxS(Value x, Value y) {
    return b.createOrFold<arith::MaxSIOp>(loc, x, y);
  }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return b.createOrFold<arith::CmpIOp>(loc, p, x, y);
  }
  Value andI(Value x, Value y) {
    return b.createOrFold<arith::AndIOp>(loc, x, y);
  }
  Value orI(Value x, Value y) {
    return b.createOrFold<arith::OrIOp>(loc, x, y);
  }
  Value notI(Value x) {
    return b.createOrFold<arith::XOrIOp>(loc, x, i1(true));
  }
  Value select(Value c, Value x, Value y) {
    return b.createOrFold<arith::SelectOp>(loc, c, x, y);
  }

  Abstract exact(Value v) { return {v, v, {}, {}}; }
  Abstract range(Value lo, Value hi) { return {lo, hi, {}, {}}; }
  Abstract boolean(Value t, Value f) { return {{}, {}, t, f}; }
  Abstract anyBool() { return boolean(i1(true), i1(true)); }

  Abstract get(Value v) {
    auto it = values.find(v);
    return it == values.end() ? Abstract() : it->second;
  }
  /// An integer's interval, or a boolean's values, as index-typed bounds.
  Abstract asInt(Value v) {
    Abstract a = get(v);
    return a.isInt() ? a : Abstract();
  }
  Abstract asBool(Value v) {
    Abstract a = get(v);
    return a.isBool() ? a : anyBool();
  }

  void visit(Operation *op);
  llvm::DenseMap<Value, Abstract> values;

private:
  Abstract compare(arith::CmpIPredicate p, Abstract x, Abstract y);

  OpBuilder &b;
  Location loc;
};

Abstract Interpreter::compare(arith::CmpIPredicate p, Abstract x, Abstract y) {
  using P = arith::CmpIPredicate;
  if (!x.isInt() || !y.isInt())
    return anyBool();
  // Unsigned predicates agree with the signed ones on non-negative ranges.
  Value nonNeg;
  switch (p) {
  case P::ult:
  case P::ule:
  case P::ugt:
  case P::uge:
    nonNeg = andI(cmp(P::sge, x.lo, idx(0)), cmp(P::sge, y.lo, idx(0)));
    p = p == P::ult   ? P::slt
        : p == P::ule ? P::sle
        : p == P::ugt ? P::sgt
                      : P::sge;
    break;
  default:
    break;
  }
  Abstract r;
  switch (p) {
  case P::slt: // x < y for some pair, x >= y for some pair
    r = boolean(cmp(P::slt, x.lo, y.hi), cmp(P::sge, x.hi, y.lo));
    break;
  case P::sle:
    r = boolean(cmp(P::sle, x.lo, y.hi), cmp(P::sgt, x.hi, y.lo));
    break;
  case P::sgt:
    r = boolean(cmp(P::sgt, x.hi, y.lo), cmp(P::sle, x.lo, y.hi));
    break;
  case P::sge:
    r = boolean(cmp(P::sge, x.hi, y.lo), cmp(P::slt, x.lo, y.hi));
    break;
  case P::eq:
  case P::ne: {
    Value overlap = andI(cmp(P::sle, x.lo, y.hi), cmp(P::sle, y.lo, x.hi));
    // Always equal only when both are the same single value.
    Value same = andI(andI(cmp(P::eq, x.lo, x.hi), cmp(P::eq, y.lo, y.hi)),
                      cmp(P::eq, x.lo, y.lo));
    r = p == P::eq ? boolean(overlap, notI(same))
                   : boolean(notI(same), overlap);
    break;
  }
  default:
    return anyBool();
  }
  if (nonNeg)
    r = boolean(orI(r.canT, notI(nonNeg)), orI(r.canF, notI(nonNeg)));
  return r;
}

void Interpreter::visit(Operation *op) {
  auto result = [&](Abstract a) { values[op->getResult(0)] = a; };
  if (op->getNumResults() != 1)
    return;
  Type type = op->getResult(0).getType();
  // Scalars of at most 64 bits only (floats, vectors, wider integers:
  // unknown).
  if (!type.isIndex() &&
      !(type.isSignlessInteger() && type.getIntOrFloatBitWidth() <= 64))
    return;
  APInt c;
  if (matchPattern(op->getResult(0), m_ConstantInt(&c))) {
    if (type.isInteger(1))
      result(boolean(i1(!c.isZero()), i1(c.isZero())));
    else
      result(exact(idx(c.getSExtValue())));
    return;
  }
  if (isa<arith::IndexCastOp, arith::ExtSIOp, arith::TruncIOp>(op)) {
    // (Positions and their arithmetic stay far from the narrow types'
    // bounds.)
    if (Abstract a = asInt(op->getOperand(0)); a.isInt())
      result(a);
    return;
  }
  if (isa<arith::AddIOp, arith::SubIOp, arith::MulIOp, arith::MinSIOp,
          arith::MaxSIOp, arith::FloorDivSIOp, arith::DivSIOp>(op) &&
      !type.isInteger(1)) {
    Abstract x = asInt(op->getOperand(0)), y = asInt(op->getOperand(1));
    if (!x.isInt() || !y.isInt())
      return;
    if (isa<arith::AddIOp>(op))
      return result(range(add(x.lo, y.lo), add(x.hi, y.hi)));
    if (isa<arith::SubIOp>(op))
      return result(range(sub(x.lo, y.hi), sub(x.hi, y.lo)));
    if (isa<arith::MinSIOp>(op))
      return result(range(minS(x.lo, y.lo), minS(x.hi, y.hi)));
    if (isa<arith::MaxSIOp>(op))
      return result(range(maxS(x.lo, y.lo), maxS(x.hi, y.hi)));
    // Multiplication and division by a constant: monotone, in the constant's
    // direction.
    APInt k;
    bool constRhs = matchPattern(op->getOperand(1), m_ConstantInt(&k));
    if (isa<arith::MulIOp>(op)) {
      APInt kl;
      bool constLhs = matchPattern(op->getOperand(0), m_ConstantInt(&kl));
      if (!constRhs && !constLhs)
        return;
      Abstract v = constRhs ? x : y;
      int64_t f = constRhs ? k.getSExtValue() : kl.getSExtValue();
      Value lo = mul(v.lo, idx(f)), hi = mul(v.hi, idx(f));
      return result(f >= 0 ? range(lo, hi) : range(hi, lo));
    }
    if (!constRhs || k.getSExtValue() <= 0)
      return;
    Value kv = idx(k.getSExtValue());
    if (isa<arith::FloorDivSIOp>(op))
      return result(range(b.createOrFold<arith::FloorDivSIOp>(loc, x.lo, kv),
                          b.createOrFold<arith::FloorDivSIOp>(loc, x.hi, kv)));
    return result(range(b.createOrFold<arith::DivSIOp>(loc, x.lo, kv),
                        b.createOrFold<arith::DivSIOp>(loc, x.hi, kv)));
  }
  if (auto cmpOp = dyn_cast<arith::CmpIOp>(op)) {
    if (cmpOp.getLhs().getType().isInteger(1)) {
      // eq / ne of booleans: xor and its negation.
      Abstract x = asBool(cmpOp.getLhs()), y = asBool(cmpOp.getRhs());
      Value t = orI(andI(x.canT, y.canF), andI(x.canF, y.canT));
      Value f = orI(andI(x.canT, y.canT), andI(x.canF, y.canF));
      if (cmpOp.getPredicate() == arith::CmpIPredicate::eq)
        return result(boolean(f, t));
      if (cmpOp.getPredicate() == arith::CmpIPredicate::ne)
        return result(boolean(t, f));
      return result(anyBool());
    }
    return result(compare(cmpOp.getPredicate(), asInt(cmpOp.getLhs()),
                          asInt(cmpOp.getRhs())));
  }
  if (type.isInteger(1) &&
      isa<arith::AndIOp, arith::OrIOp, arith::XOrIOp>(op)) {
    Abstract x = asBool(op->getOperand(0)), y = asBool(op->getOperand(1));
    if (isa<arith::AndIOp>(op))
      return result(boolean(andI(x.canT, y.canT), orI(x.canF, y.canF)));
    if (isa<arith::OrIOp>(op))
      return result(boolean(orI(x.canT, y.canT), andI(x.canF, y.canF)));
    return result(boolean(orI(andI(x.canT, y.canF), andI(x.canF, y.canT)),
                          orI(andI(x.canT, y.canT), andI(x.canF, y.canF))));
  }
  if (auto sel = dyn_cast<arith::SelectOp>(op)) {
    Abstract c = asBool(sel.getCondition());
    if (type.isInteger(1)) {
      Abstract x = asBool(sel.getTrueValue()), y = asBool(sel.getFalseValue());
      return result(boolean(orI(andI(c.canT, x.canT), andI(c.canF, y.canT)),
                            orI(andI(c.canT, x.canF), andI(c.canF, y.canF))));
    }
    Abstract x = asInt(sel.getTrueValue()), y = asInt(sel.getFalseValue());
    if (x.isInt() && y.isInt())
      return result(range(minS(x.lo, y.lo), maxS(x.hi, y.hi)));
    return;
  }
  // Anything else: unknown (booleans may be either value).
}

} // namespace

BlockVerdict mlir::fa::detail::buildMaskModBlockVerdict(
    OpBuilder &b, Location loc, Region &maskMod, Value batch, Value head,
    Value iLo, Value iHi, Value jLo, Value jHi, Value headLast) {
  Interpreter interp(b, loc);
  Block &body = maskMod.front();
  interp.values[body.getArgument(0)] = interp.exact(batch);
  interp.values[body.getArgument(1)] =
      headLast ? interp.range(head, headLast) : interp.exact(head);
  interp.values[body.getArgument(2)] = interp.range(iLo, iHi);
  interp.values[body.getArgument(3)] = interp.range(jLo, jHi);
  for (Operation &op : body.without_terminator())
    interp.visit(&op);
  Abstract verdict = interp.asBool(body.getTerminator()->getOperand(0));
  return {verdict.canT, verdict.canF};
}

Value mlir::fa::detail::lastPosition(OpBuilder &b, Location loc, Value start,
                                     int64_t size, Value len) {
  Value end = b.createOrFold<arith::AddIOp>(
      loc, start, arith::ConstantIndexOp::create(b, loc, size));
  end = b.createOrFold<arith::MinSIOp>(loc, end, len);
  return b.createOrFold<arith::SubIOp>(
      loc, end, arith::ConstantIndexOp::create(b, loc, 1));
}

/// Blocks per chunk of the coarse scan.
static constexpr int64_t kScanChunk = 8;

//===----------------------------------------------------------------------===//
// Bands: mask_mods that bound the scanned index by linear functions
//===----------------------------------------------------------------------===//

namespace {

/// c + sum coef[n] * (b, h, i, j)[n] with constant coefficients.
struct Linear {
  std::array<int64_t, 4> coef = {0, 0, 0, 0};
  int64_t c = 0;
};

/// Coefficients beyond this are not a band of interest (and could
/// overflow).
constexpr int64_t kMaxCoefficient = int64_t(1) << 40;

bool small(const Linear &l) {
  return std::abs(l.c) < kMaxCoefficient && llvm::all_of(l.coef, [](int64_t x) {
           return std::abs(x) < kMaxCoefficient;
         });
}

Linear combine(const Linear &x, const Linear &y, int64_t sign) {
  Linear r;
  for (int n = 0; n < 4; ++n)
    r.coef[n] = x.coef[n] + sign * y.coef[n];
  r.c = x.c + sign * y.c;
  return r;
}

/// `v` (an index or integer value of the mask_mod's body) as a linear form
/// of its index arguments, or none.
std::optional<Linear> linearOf(Value v, Block &body) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    if (arg.getOwner() != &body || arg.getArgNumber() >= 4)
      return std::nullopt;
    Linear l;
    l.coef[arg.getArgNumber()] = 1;
    return l;
  }
  Operation *def = v.getDefiningOp();
  if (!def || def->getBlock() != &body)
    return std::nullopt;
  IntegerAttr cst;
  if (matchPattern(v, m_Constant(&cst)) && cst.getType().isIndex()) {
    Linear l;
    l.c = cst.getInt();
    return small(l) ? std::optional<Linear>(l) : std::nullopt;
  }
  std::optional<Linear> r;
  if (isa<arith::AddIOp, arith::SubIOp, arith::MulIOp>(def)) {
    std::optional<Linear> x = linearOf(def->getOperand(0), body);
    std::optional<Linear> y = linearOf(def->getOperand(1), body);
    if (!x || !y)
      return std::nullopt;
    if (isa<arith::AddIOp>(def))
      r = combine(*x, *y, 1);
    else if (isa<arith::SubIOp>(def))
      r = combine(*x, *y, -1);
    else {
      // One side a constant.
      bool xConst = llvm::all_of(x->coef, [](int64_t c) { return c == 0; });
      bool yConst = llvm::all_of(y->coef, [](int64_t c) { return c == 0; });
      if (!xConst && !yConst)
        return std::nullopt;
      const Linear &f = xConst ? *y : *x;
      int64_t k = xConst ? x->c : y->c;
      if (std::abs(k) >= kMaxCoefficient)
        return std::nullopt;
      Linear m;
      for (int n = 0; n < 4; ++n)
        m.coef[n] = f.coef[n] * k;
      m.c = f.c * k;
      r = m;
    }
  }
  if (r && small(*r))
    return r;
  return std::nullopt;
}

/// Adds to `out` the constraints `F >= 0` that `v` (an i1 of the body)
/// being true implies, or fails for a value it cannot read (it may then
/// imply anything). Index comparisons with signed predicates, and
/// conjunctions of them and of anything else (a conjunct it cannot read,
/// such as a document id compare, only hides more: it adds no constraint).
bool collectConstraints(Value v, Block &body, SmallVectorImpl<Linear> &out) {
  Operation *def = v.getDefiningOp();
  if (!def || def->getBlock() != &body)
    return false;
  if (isa<arith::AndIOp>(def)) {
    (void)collectConstraints(def->getOperand(0), body, out);
    (void)collectConstraints(def->getOperand(1), body, out);
    return true;
  }
  if (matchPattern(v, m_One()))
    return true;
  auto cmp = dyn_cast<arith::CmpIOp>(def);
  if (!cmp || !cmp.getLhs().getType().isIndex())
    return false;
  std::optional<Linear> x = linearOf(cmp.getLhs(), body);
  std::optional<Linear> y = linearOf(cmp.getRhs(), body);
  if (!x || !y)
    return false;
  Linear d = combine(*x, *y, -1); // lhs - rhs
  Linear neg = combine(Linear(), d, -1);
  using P = arith::CmpIPredicate;
  switch (cmp.getPredicate()) {
  case P::sge:
    out.push_back(d);
    return true;
  case P::sgt:
    d.c -= 1;
    out.push_back(d);
    return true;
  case P::sle:
    out.push_back(neg);
    return true;
  case P::slt:
    neg.c -= 1;
    out.push_back(neg);
    return true;
  case P::eq:
    out.push_back(d);
    out.push_back(neg);
    return true;
  default:
    // (Unsigned compares of index differences that may be negative are not
    // linear constraints.)
    return false;
  }
}

} // namespace

/// The element offsets [first, end) of the blocks of [lo, hi) that a
/// mask_mod of linear bounds on the scanned index (unit coefficient: `j >=
/// i - 99`, `j <= i`, ...) may see, computed from the bounds at the fixed
/// block's rows and the head range without a scan; none when the mask_mod
/// is not of that form or bounds nothing.
static std::optional<std::pair<Value, Value>>
buildBandRange(OpBuilder &b, Location loc, const MaskModScan &scan, Value lo,
               Value hi) {
  Block &body = scan.maskMod->front();
  SmallVector<Linear> constraints;
  if (!collectConstraints(body.getTerminator()->getOperand(0), body,
                          constraints))
    return std::nullopt;
  // The scanned index's argument and the fixed one's.
  int scanned = scan.scanKeys ? 3 : 2, fixed = scan.scanKeys ? 2 : 3;
  auto idx = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  // The extreme of `l` (without the scanned index) over the fixed block and
  // the heads: its smallest value (`smallest`) or its largest.
  auto extreme = [&](const Linear &l, bool smallest) -> Value {
    Value v = idx(l.c);
    auto term = [&](int64_t k, Value x) {
      if (k != 0)
        v = b.createOrFold<arith::AddIOp>(
            loc, v, b.createOrFold<arith::MulIOp>(loc, idx(k), x));
    };
    term(l.coef[0], scan.batch);
    Value headLast = scan.headLast ? scan.headLast : scan.head;
    bool headLow = (l.coef[1] >= 0) == smallest;
    term(l.coef[1], headLow ? scan.head : headLast);
    bool fixedLow = (l.coef[fixed] >= 0) == smallest;
    term(l.coef[fixed], fixedLow ? scan.fixedLo : scan.fixedLast);
    return v;
  };
  Value begin, last;
  for (const Linear &f : constraints) {
    int64_t a = f.coef[scanned];
    if (a == 0)
      continue; // (a condition on the other indices: it only hides more)
    if (a != 1 && a != -1)
      return std::nullopt;
    // a x + R >= 0: x >= -R (a = 1) or x <= R (a = -1).
    Linear r = f;
    r.coef[scanned] = 0;
    if (a == 1) {
      Value bound = extreme(combine(Linear(), r, -1), /*smallest=*/true);
      begin = begin ? b.createOrFold<arith::MaxSIOp>(loc, begin, bound) : bound;
    } else {
      Value bound = extreme(r, /*smallest=*/false);
      last = last ? b.createOrFold<arith::MinSIOp>(loc, last, bound) : bound;
    }
  }
  if (!begin && !last)
    return std::nullopt;
  Value bs = idx(scan.block), one = idx(1);
  // [x0, x1): the positions of [lo, hi) within the bounds.
  Value x0 = begin ? b.createOrFold<arith::MaxSIOp>(loc, begin, lo) : lo;
  Value x1 = last ? b.createOrFold<arith::MinSIOp>(
                        loc, b.createOrFold<arith::AddIOp>(loc, last, one), hi)
                  : hi;
  Value empty =
      b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::sle, x1, x0);
  // Whole blocks from lo: x0 rounded down, x1 up (at most hi).
  Value first = b.createOrFold<arith::AddIOp>(
      loc, lo,
      b.createOrFold<arith::MulIOp>(
          loc,
          b.createOrFold<arith::DivUIOp>(
              loc, b.createOrFold<arith::SubIOp>(loc, x0, lo), bs),
          bs));
  Value end = b.createOrFold<arith::MinSIOp>(
      loc,
      b.createOrFold<arith::AddIOp>(
          loc, lo,
          b.createOrFold<arith::MulIOp>(
              loc,
              b.createOrFold<arith::CeilDivSIOp>(
                  loc, b.createOrFold<arith::SubIOp>(loc, x1, lo), bs),
              bs)),
      hi);
  return std::make_pair(b.createOrFold<arith::SelectOp>(loc, empty, hi, first),
                        b.createOrFold<arith::SelectOp>(loc, empty, hi, end));
}

std::optional<std::pair<Value, Value>>
mlir::fa::detail::buildMaskModVisibleRange(RewriterBase &rewriter, Location loc,
                                           const MaskModScan &scan, Value lo,
                                           Value hi) {
  // A band: its bounds, no scan.
  if (std::optional<std::pair<Value, Value>> band =
          buildBandRange(rewriter, loc, scan, lo, hi))
    return band;
  int64_t bs = scan.block;
  Value blockValue = arith::ConstantIndexOp::create(rewriter, loc, bs);
  int64_t chunk = kScanChunk * bs;
  Value chunkValue = arith::ConstantIndexOp::create(rewriter, loc, chunk);
  // Whether the mask_mod may see something of the `size` positions from x0.
  auto maySee = [&](OpBuilder &b, Location l, Value x0, int64_t size) {
    Value xLast = lastPosition(b, l, x0, size, scan.len);
    Value iLo = scan.scanKeys ? scan.fixedLo : x0,
          iHi = scan.scanKeys ? scan.fixedLast : xLast,
          jLo = scan.scanKeys ? x0 : scan.fixedLo,
          jHi = scan.scanKeys ? xLast : scan.fixedLast;
    return buildMaskModBlockVerdict(b, l, *scan.maskMod, scan.batch, scan.head,
                                    iLo, iHi, jLo, jHi, scan.headLast)
        .maySee;
  };
  auto select = [](OpBuilder &b, Location l, Value c, Value x, Value y) {
    return b.createOrFold<arith::SelectOp>(l, c, x, y);
  };
  auto isUnset = [&](OpBuilder &b, Location l, Value v, Value unset) {
    return b.createOrFold<arith::CmpIOp>(l, arith::CmpIPredicate::eq, v, unset);
  };
  // Coarse: the first and the last chunk that may see (hi if none).
  bool alwaysSeen = false;
  auto coarse = scf::ForOp::create(
      rewriter, loc, lo, hi, chunkValue, ValueRange{hi, hi},
      [&](OpBuilder &b, Location l, Value c0, ValueRange acc) {
        Value see = maySee(b, l, c0, chunk);
        alwaysSeen = matchPattern(see, m_One());
        Value first = select(
            b, l,
            b.createOrFold<arith::AndIOp>(l, see, isUnset(b, l, acc[0], hi)),
            c0, acc[0]);
        scf::YieldOp::create(b, l,
                             ValueRange{first, select(b, l, see, c0, acc[1])});
      });
  if (alwaysSeen) {
    rewriter.eraseOp(coarse);
    return std::nullopt;
  }
  Value firstChunk = coarse.getResult(0), lastChunk = coarse.getResult(1);
  auto chunkEnd = [&](Value c0) {
    return rewriter.createOrFold<arith::MinSIOp>(
        loc, rewriter.createOrFold<arith::AddIOp>(loc, c0, chunkValue), hi);
  };
  // Fine: the first block of the first chunk that may see (the chunk's
  // start if none does), and the end of the last chunk's last such block.
  auto first = scf::ForOp::create(
      rewriter, loc, firstChunk, chunkEnd(firstChunk), blockValue,
      ValueRange{hi}, [&](OpBuilder &b, Location l, Value x0, ValueRange acc) {
        Value take = b.createOrFold<arith::AndIOp>(l, maySee(b, l, x0, bs),
                                                   isUnset(b, l, acc[0], hi));
        scf::YieldOp::create(b, l, select(b, l, take, x0, acc[0]));
      });
  auto last = scf::ForOp::create(
      rewriter, loc, lastChunk, chunkEnd(lastChunk), blockValue, ValueRange{hi},
      [&](OpBuilder &b, Location l, Value x0, ValueRange acc) {
        Value end = b.createOrFold<arith::MinSIOp>(
            l, b.createOrFold<arith::AddIOp>(l, x0, blockValue), hi);
        scf::YieldOp::create(b, l,
                             select(b, l, maySee(b, l, x0, bs), end, acc[0]));
      });
  Value begin =
      select(rewriter, loc, isUnset(rewriter, loc, first.getResult(0), hi),
             firstChunk, first.getResult(0));
  Value end =
      select(rewriter, loc, isUnset(rewriter, loc, last.getResult(0), hi),
             chunkEnd(lastChunk), last.getResult(0));
  // (No chunk may see: begin = hi, end = hi.)
  return std::make_pair(begin,
                        rewriter.createOrFold<arith::MaxSIOp>(loc, end, begin));
}

//===----------------------------------------------------------------------===//
// Run-time ranges
//===----------------------------------------------------------------------===//

int64_t fa::detail::rangeGroupsPerBlock(int64_t block, int64_t rows) {
  return llvm::divideCeil(block, rows) + (block % rows != 0);
}

fa::detail::BlockRange
fa::detail::buildBlockRange(OpBuilder &b, Location loc, Value ranges,
                            int64_t rows, Value batch, Value head, Value start,
                            Value len, int64_t block, int64_t roundTo,
                            Value limit) {
  auto cst = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  Value rowsV = cst(rows), zero = cst(0), one = cst(1);
  Value first = arith::DivUIOp::create(b, loc, start, rowsV);
  Value lastRow = arith::SubIOp::create(
      b, loc, arith::AddIOp::create(b, loc, start, len), one);
  Value last = arith::DivUIOp::create(b, loc, lastRow, rowsV);
  auto bound = [&](Value g, Value side) -> Value {
    Value x = tensor::ExtractOp::create(b, loc, ranges,
                                        ValueRange{batch, head, g, side});
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), x);
  };
  bool full = cast<RankedTensorType>(ranges.getType()).getDimSize(3) == 4;
  BlockRange r;
  for (int64_t t = 0, n = rangeGroupsPerBlock(block, rows); t < n; ++t) {
    // (Groups past the block's last repeat it.)
    Value g = arith::MinUIOp::create(
        b, loc, arith::AddIOp::create(b, loc, first, cst(t)), last);
    if (full) {
      Value lo = bound(g, cst(2)), hi = bound(g, cst(3));
      r.fullBegin =
          r.fullBegin ? arith::MaxSIOp::create(b, loc, r.fullBegin, lo) : lo;
      r.fullEnd =
          r.fullEnd ? arith::MinSIOp::create(b, loc, r.fullEnd, hi) : hi;
    }
    Value lo = bound(g, zero), hi = bound(g, one);
    // An empty range adds nothing: it becomes [limit, 0).
    Value empty =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, lo, hi);
    lo = arith::SelectOp::create(b, loc, empty, limit, lo);
    hi = arith::SelectOp::create(b, loc, empty, zero, hi);
    r.begin = r.begin ? arith::MinSIOp::create(b, loc, r.begin, lo) : lo;
    r.end = r.end ? arith::MaxSIOp::create(b, loc, r.end, hi) : hi;
  }
  Value unit = cst(roundTo);
  r.begin = arith::MaxSIOp::create(b, loc, r.begin, zero);
  r.begin = arith::MulIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, r.begin, unit), unit);
  r.end = arith::MinSIOp::create(b, loc, r.end, limit);
  // Nothing to visit: an empty loop from begin.
  r.end = arith::MaxSIOp::create(b, loc, r.end, r.begin);
  return r;
}
