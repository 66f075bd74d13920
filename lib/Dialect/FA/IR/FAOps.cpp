//===- FAOps.cpp - FlashMLIR attention ops --------------------------------===//

#include "fa/Dialect/FA/IR/FAOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"

#include <cmath>

using namespace mlir;
using namespace mlir::fa;

//===----------------------------------------------------------------------===//
// Shared verification
//===----------------------------------------------------------------------===//

/// Two dimension sizes agree unless both are static and differ.
static bool dimsCompatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

static std::string dimStr(int64_t d) {
  return ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d);
}

/// Checks that dimension `dim` of `a` (named `aName`) agrees with dimension
/// `bDim` of `b`.
static LogicalResult checkDim(Operation *op, StringRef what, RankedTensorType a,
                              int64_t aDim, StringRef aName,
                              RankedTensorType b, int64_t bDim,
                              StringRef bName) {
  if (dimsCompatible(a.getDimSize(aDim), b.getDimSize(bDim)))
    return success();
  return op->emitOpError() << what << " mismatch: " << aName << " has "
                           << dimStr(a.getDimSize(aDim)) << " but " << bName
                           << " has " << dimStr(b.getDimSize(bDim));
}

/// Checks scale, softcap and window, shared by every op of the dialect.
static LogicalResult verifyScoreAttributes(Operation *op, FloatAttr scale,
                                           bool causal,
                                           DenseI64ArrayAttr window,
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
  if (window) {
    if (window.size() != 2)
      return op->emitOpError()
             << "window must be [left, right], got " << window.size()
             << " values";
    for (int64_t w : window.asArrayRef())
      if (w < -1)
        return op->emitOpError()
               << "window bounds must be >= 0, or -1 for unbounded, got "
               << w;
    if (causal && window[1] != 0)
      return op->emitOpError()
             << "causal attention sees no key to the right of the "
                "diagonal: window right bound must be 0, got "
             << window[1];
  }
  return success();
}

/// Verifies what the forward and the backward op have in common: q, k, v
/// shapes and element types, and the attributes.
static LogicalResult verifyAttentionInputs(Operation *op, RankedTensorType q,
                                           RankedTensorType k,
                                           RankedTensorType v,
                                           FloatAttr scale, bool causal,
                                           DenseI64ArrayAttr window,
                                           FloatAttr softcap) {
  Type elt = q.getElementType();
  if (k.getElementType() != elt || v.getElementType() != elt)
    return op->emitOpError() << "query, key and value must have the same "
                                "element type, got "
                             << elt << ", " << k.getElementType() << " and "
                             << v.getElementType();

  if (failed(checkDim(op, "batch size", q, 0, "query", k, 0, "key")) ||
      failed(checkDim(op, "batch size", k, 0, "key", v, 0, "value")) ||
      failed(checkDim(op, "key/value head count", k, 1, "key", v, 1,
                      "value")) ||
      failed(checkDim(op, "key/value sequence length", k, 2, "key", v, 2,
                      "value")) ||
      failed(checkDim(op, "head dim", q, 3, "query", k, 3, "key")))
    return failure();

  int64_t d = q.getDimSize(3), dv = v.getDimSize(3);
  for (auto [name, size] : {std::pair<StringRef, int64_t>{"query/key", d},
                            std::pair<StringRef, int64_t>{"value", dv}}) {
    if (ShapedType::isDynamic(size))
      return op->emitOpError() << name << " head dim must be static";
    if (size <= 0 || size % 8 != 0 || size > kMaxHeadDim)
      return op->emitOpError()
             << "unsupported " << name << " head dim " << size
             << ": expected a multiple of 8 in [8, " << kMaxHeadDim << "]";
  }

  int64_t hq = q.getDimSize(1), hkv = k.getDimSize(1);
  if (!ShapedType::isDynamic(hkv) && hkv == 0)
    return op->emitOpError() << "key/value head count must be positive";
  if (!ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv) &&
      hq % hkv != 0)
    return op->emitOpError()
           << "query head count (" << hq
           << ") must be a multiple of the key/value head count (" << hkv
           << ")";

  return verifyScoreAttributes(op, scale, causal, window, softcap);
}

/// Verifies that `actual` has the shape `expected` (with compatible dynamic
/// dims) and element type `elt`.
static LogicalResult checkShape(Operation *op, StringRef name,
                                RankedTensorType actual,
                                ArrayRef<int64_t> expected, Type elt) {
  if (actual.getElementType() != elt)
    return op->emitOpError() << name << " must have element type " << elt
                             << ", got " << actual.getElementType();
  if (actual.getRank() != static_cast<int64_t>(expected.size()))
    return op->emitOpError() << name << " must have rank " << expected.size()
                             << ", got " << actual.getRank();
  for (auto [i, pair] : llvm::enumerate(llvm::zip(actual.getShape(),
                                                  expected))) {
    auto [a, e] = pair;
    if (!dimsCompatible(a, e))
      return op->emitOpError() << name << " dimension " << i << " must be "
                               << dimStr(e) << ", got " << dimStr(a);
  }
  return success();
}

static float defaultScale(int64_t headDim) {
  return 1.0f / std::sqrt(static_cast<float>(headDim));
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

void AttentionOp::build(OpBuilder &b, OperationState &state, Value query,
                        Value key, Value value, FloatAttr scale, bool causal,
                        DenseI64ArrayAttr window, FloatAttr softcap) {
  auto q = cast<RankedTensorType>(query.getType());
  auto v = cast<RankedTensorType>(value.getType());
  auto out = RankedTensorType::get(
      {q.getDimSize(0), q.getDimSize(1), q.getDimSize(2), v.getDimSize(3)},
      q.getElementType());
  auto lse = RankedTensorType::get(q.getShape().take_front(3), b.getF32Type());
  build(b, state, out, lse, query, key, value, scale, causal, window, softcap);
}

float AttentionOp::getScaleValue() {
  if (auto s = getScaleAttr())
    return s.getValueAsDouble();
  return defaultScale(getHeadDim());
}

LogicalResult AttentionOp::verify() {
  RankedTensorType q = getQuery().getType(), k = getKey().getType(),
                   v = getValue().getType();
  if (failed(verifyAttentionInputs(*this, q, k, v, getScaleAttr(), getCausal(),
                                   getWindowAttr(), getSoftcapAttr())))
    return failure();
  if (failed(checkShape(*this, "out", getOut().getType(),
                        {q.getDimSize(0), q.getDimSize(1), q.getDimSize(2),
                         v.getDimSize(3)},
                        q.getElementType())))
    return failure();
  return checkShape(*this, "lse", getLse().getType(),
                    q.getShape().take_front(3),
                    Float32Type::get(getContext()));
}

//===----------------------------------------------------------------------===//
// AttentionBackwardOp
//===----------------------------------------------------------------------===//

void AttentionBackwardOp::build(OpBuilder &b, OperationState &state,
                                Value query, Value key, Value value, Value out,
                                Value lse, Value dout, FloatAttr scale,
                                bool causal, DenseI64ArrayAttr window,
                                FloatAttr softcap, bool deterministic) {
  build(b, state, query.getType(), key.getType(), value.getType(), query, key,
        value, out, lse, dout, scale, causal, window, softcap, deterministic);
}

float AttentionBackwardOp::getScaleValue() {
  if (auto s = getScaleAttr())
    return s.getValueAsDouble();
  return defaultScale(getHeadDim());
}

LogicalResult AttentionBackwardOp::verify() {
  RankedTensorType q = getQuery().getType(), k = getKey().getType(),
                   v = getValue().getType();
  if (failed(verifyAttentionInputs(*this, q, k, v, getScaleAttr(), getCausal(),
                                   getWindowAttr(), getSoftcapAttr())))
    return failure();
  SmallVector<int64_t> outShape = {q.getDimSize(0), q.getDimSize(1),
                                   q.getDimSize(2), v.getDimSize(3)};
  Type elt = q.getElementType();
  if (failed(checkShape(*this, "out", getOut().getType(), outShape, elt)) ||
      failed(checkShape(*this, "dout", getDout().getType(), outShape, elt)) ||
      failed(checkShape(*this, "lse", getLse().getType(),
                        q.getShape().take_front(3),
                        Float32Type::get(getContext()))) ||
      failed(checkShape(*this, "dq", getDq().getType(), q.getShape(), elt)) ||
      failed(checkShape(*this, "dk", getDk().getType(), k.getShape(), elt)) ||
      failed(checkShape(*this, "dv", getDv().getType(), v.getShape(), elt)))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// OnlineAttentionOp
//===----------------------------------------------------------------------===//

LogicalResult OnlineAttentionOp::verify() {
  RankedTensorType q = getQuery().getType(), k = getKey().getType(),
                   v = getValue().getType();
  Type elt = q.getElementType();
  if (k.getElementType() != elt || v.getElementType() != elt)
    return emitOpError() << "query, key and value must have the same element "
                            "type, got "
                         << elt << ", " << k.getElementType() << " and "
                         << v.getElementType();
  if (failed(checkDim(*this, "head dim", q, 1, "query", k, 1, "key")) ||
      failed(checkDim(*this, "key block size", k, 0, "key", v, 0, "value")))
    return failure();
  Type f32 = Float32Type::get(getContext());
  int64_t br = q.getDimSize(0), dv = v.getDimSize(1);
  if (failed(checkShape(*this, "acc", getAcc().getType(), {br, dv}, f32)) ||
      failed(checkShape(*this, "max", getMax().getType(), {br}, f32)) ||
      failed(checkShape(*this, "sum", getSum().getType(), {br}, f32)))
    return failure();

  int numMaskOperands = (getQStart() ? 1 : 0) + (getKStart() ? 1 : 0) +
                        (getQLen() ? 1 : 0) + (getKLen() ? 1 : 0);
  if (numMaskOperands != 0 && numMaskOperands != 4)
    return emitOpError() << "masked needs all four of q_start, k_start, "
                            "q_len and k_len";
  if (!isMasked() && (getCausal() || getWindow()))
    return emitOpError() << "a causal or window mask needs the "
                            "masked(q_start, k_start, q_len, k_len) operands";
  return verifyScoreAttributes(*this, getScaleAttr(), getCausal(),
                               getWindowAttr(), getSoftcapAttr());
}

//===----------------------------------------------------------------------===//
// OnlineAttentionFinalizeOp
//===----------------------------------------------------------------------===//

LogicalResult OnlineAttentionFinalizeOp::verify() {
  RankedTensorType acc = getAcc().getType();
  Type f32 = Float32Type::get(getContext());
  int64_t br = acc.getDimSize(0), dv = acc.getDimSize(1);
  if (failed(checkShape(*this, "max", getMax().getType(), {br}, f32)) ||
      failed(checkShape(*this, "sum", getSum().getType(), {br}, f32)) ||
      failed(checkShape(*this, "out", getOut().getType(), {br, dv},
                        getOut().getType().getElementType())) ||
      failed(checkShape(*this, "lse", getLse().getType(), {br}, f32)))
    return failure();
  return success();
}

#define GET_OP_CLASSES
#include "fa/Dialect/FA/IR/FAOps.cpp.inc"
