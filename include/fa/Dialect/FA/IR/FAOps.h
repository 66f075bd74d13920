//===- FAOps.h - FlashMLIR attention ops ------------------------*- C++ -*-===//

#ifndef FA_DIALECT_FA_IR_FAOPS_H
#define FA_DIALECT_FA_IR_FAOPS_H

#include "fa/Dialect/FA/IR/FADialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <cstdint>
#include <limits>
#include <optional>

#include "fa/Dialect/FA/IR/FAEnums.h.inc"
#define GET_ATTRDEF_CLASSES
#include "fa/Dialect/FA/IR/FAAttrs.h.inc"

namespace mlir::fa {

/// Discardable attribute of the fast backward's key-block loop
/// (fa-tile-attention-backward): its iterations are independent except for
/// the additive update of the dQ they carry, so a parallel lowering may run
/// them concurrently and accumulate dQ with atomics.
constexpr llvm::StringLiteral kDqAccumulationAttrName = "fa.dq_accumulation";

/// Discardable attribute (a `#fa.kernel_config`) that the tiling passes put
/// on the loop nests they make from an op with a `kernel_config`, for the
/// GPU conversions.
constexpr llvm::StringLiteral kKernelConfigAttrName = "fa.kernel_config";

/// Largest head dimension the dialect accepts (FlashAttention's limit).
constexpr int64_t kMaxHeadDim = 256;

/// Largest window bound the dialect accepts: the GPU kernels compute the
/// mask in i32, and the host code adds 1 to a bound.
constexpr int64_t kMaxWindowBound = std::numeric_limits<int32_t>::max();

/// The visibility rule of an attention op, in one place so that every
/// lowering (reference, tiled, GPU) agrees on it. Key j is visible from query
/// i iff `i + off - left <= j <= i + off + right` with `off = Nk - Nq`; an
/// unbounded side is `std::nullopt`. `causal` is `right = 0`.
struct AttentionMask {
  std::optional<int64_t> left;
  std::optional<int64_t> right;

  static AttentionMask get(bool causal, DenseI64ArrayAttr window) {
    AttentionMask mask;
    if (window && window[0] >= 0)
      mask.left = window[0];
    if (causal)
      mask.right = 0;
    else if (window && window[1] >= 0)
      mask.right = window[1];
    return mask;
  }

  /// True when every key is visible from every query.
  bool isFull() const { return !left && !right; }

  bool isVisible(int64_t i, int64_t j, int64_t nq, int64_t nk) const {
    int64_t diag = i + nk - nq;
    if (left && j < diag - *left)
      return false;
    if (right && j > diag + *right)
      return false;
    return j >= 0 && j < nk;
  }
};

} // namespace mlir::fa

#define GET_OP_CLASSES
#include "fa/Dialect/FA/IR/FAOps.h.inc"

#endif // FA_DIALECT_FA_IR_FAOPS_H
