//===- FAOps.h - FlashMLIR attention ops ------------------------*- C++ -*-===//

#ifndef FA_DIALECT_FA_IR_FAOPS_H
#define FA_DIALECT_FA_IR_FAOPS_H

#include "fa/Dialect/FA/IR/FADialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <cstdint>
#include <limits>
#include <optional>

namespace mlir::fa {

/// Largest window bound the dialect accepts: the GPU kernels compute the
/// mask in i32, and the host code adds 1 to a bound.
constexpr int64_t kMaxWindowBound = std::numeric_limits<int32_t>::max();

/// One width of a band mask (MaskAttrInterface::getBand): a constant, an
/// index value (a run-time parameter, never negative), or unbounded.
struct MaskWidth {
  std::optional<int64_t> constant;
  Value value;

  bool isBounded() const { return constant || value; }
  /// The width as an index value at the builder's point (null when
  /// unbounded).
  Value build(OpBuilder &b, Location loc) const;
};

/// A diagonal band: key j is visible from query i iff
/// `i + off - left <= j <= i + off + right` (off = Nk - Nq) for each bounded
/// side.
struct MaskBand {
  MaskWidth left, right;
};

/// The blocks one block of the other side must visit, as index values: the
/// offsets of their first elements (multiples of the block size), but `end`,
/// which is at most the sequence length;
/// `begin <= fullBegin <= fullEnd <= end`:
///   [begin, end)         hold an element visible from some row of the
///                        block: blocks outside are seen by nothing;
///   [fullBegin, fullEnd) are seen whole by every row (the last, partial
///                        block of a sequence never is): no mask needed.
/// `fullBegin` is `begin` itself (the same value) when the rule leaves no
/// partially visible block before the full ones. Loops step by the block
/// size from one bound to the next (fa-specialize-masks), or divide them
/// by it (fa-tile-attention-backward).
struct MaskBlockRange {
  Value begin, fullBegin, fullEnd, end;
};

} // namespace mlir::fa

#include "fa/Dialect/FA/IR/FAAttrInterfaces.h.inc"
#include "fa/Dialect/FA/IR/FAEnums.h.inc"
#define GET_ATTRDEF_CLASSES
#include "fa/Dialect/FA/IR/FAAttrs.h.inc"

namespace mlir::fa {

/// Discardable attribute of the fast backward's key-block loop
/// (fa-tile-attention-backward): its iterations are independent except for
/// the additive update of the dQ they carry, so a parallel lowering may run
/// them concurrently and accumulate dQ with atomics.
constexpr llvm::StringLiteral kDqAccumulationAttrName = "fa.dq_accumulation";
/// Its value when the op is deterministic and its kernel takes dQ in a fixed
/// order (the warp-specialized key-block kernel: per query block, the key
/// blocks add in descending order, each waiting for the one above it).
/// Unit-valued: in any order (atomics).
constexpr llvm::StringLiteral kDqAccumulationOrdered = "ordered";

/// Whether the key-block loop `loop` (marked `fa.dq_accumulation`) asks for
/// the fixed order.
inline bool isOrderedDqAccumulation(Operation *loop) {
  auto order = loop->getAttrOfType<StringAttr>(kDqAccumulationAttrName);
  return order && order.getValue() == kDqAccumulationOrdered;
}

/// Discardable attribute (a `#fa.kernel_config`) that the tiling passes put
/// on the loop nests they make from an op with a `kernel_config`, for the
/// GPU conversions.
constexpr llvm::StringLiteral kKernelConfigAttrName = "fa.kernel_config";

/// Largest head dimension the dialect accepts (FlashAttention's limit).
constexpr int64_t kMaxHeadDim = 256;

/// The score scalars of an op as the tile-level ops take them: the scale and
/// the softcap, each a constant attribute or an f32 value known at run time
/// (at most one of the pair; neither for no softcap).
struct ScoreScalars {
  FloatAttr scale;
  Value dynamicScale;
  FloatAttr softcap;
  Value dynamicSoftcap;

  bool hasSoftcap() const { return softcap || dynamicSoftcap; }
  /// The values at the builder's insertion point: the operand, or a new
  /// constant of the attribute (null for an absent softcap).
  Value buildScale(OpBuilder &b, Location loc) const;
  Value buildSoftcap(OpBuilder &b, Location loc) const;
  bool operator==(const ScoreScalars &o) const {
    return scale == o.scale && dynamicScale == o.dynamicScale &&
           softcap == o.softcap && dynamicSoftcap == o.dynamicSoftcap;
  }
};

/// The factors of the softmax exponent, computed once from the scale and
/// softcap values (f32; softcap null when absent) and `log2Base` (log2(e)
/// for base-2 exponentials, 1 for natural ones), so that every lowering
/// scales the raw scores `x = q k^T` the same way:
///   without softcap: exponent = x * expFactor,  expFactor = scale * log2Base
///   with softcap:    exponent = tanh(x * capIn) * expFactor,
///                    capIn = scale / softcap, expFactor = softcap * log2Base
/// Constant inputs fold to constants; run-time ones cost these one or two
/// operations where the factors are built (a kernel's start), not per score.
struct ScoreFactors {
  Value capIn;     // null without softcap
  Value expFactor;

  static ScoreFactors build(OpBuilder &b, Location loc, Value scale,
                            Value softcap, double log2Base);
};

/// Verifies the modifier regions of an attention op (either may be empty):
/// `score_mod` takes (f32 score, index b, h, q_idx, kv_idx) and `mask_mod`
/// (index b, h, q_idx, kv_idx), each followed by one argument per capture of
/// its type; they end in fa.yield of an f32, resp. an i1, and hold no op
/// with a side effect other than a read. `scoreModGrad` (a backward's
/// derivative of the score_mod, if any) has the score_mod's signature and
/// yields an f32.
LogicalResult verifyModifiers(Operation *op, Region &scoreMod, Region &maskMod,
                              ValueRange captures,
                              Region *scoreModGrad = nullptr);

/// Clones the body of a modifier region at the builder's point with its
/// block arguments replaced by `arguments` (score, b, h, q_idx, kv_idx and
/// the captures for a score_mod; the same without the score for a mask_mod)
/// and returns the value it yields.
Value inlineModifier(OpBuilder &b, Region &region, ValueRange arguments);

} // namespace mlir::fa

#define GET_OP_CLASSES
#include "fa/Dialect/FA/IR/FAOps.h.inc"

#endif // FA_DIALECT_FA_IR_FAOPS_H
