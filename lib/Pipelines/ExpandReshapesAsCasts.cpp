//===- ExpandReshapesAsCasts.cpp - Dynamic expand_shape as a cast ---------===//
//
// Works around an upstream crash (MLIR 22): expand-strided-metadata cannot
// lower a memref.expand_shape whose reassociation group has two or more
// dynamic output sizes. Such a reshape of a strided memref is a
// reinterpret_cast with strides computed at run time; this pass writes it
// that way, before expand-strided-metadata runs.
//
//===----------------------------------------------------------------------===//

#include "fa/Pipelines/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FAEXPANDRESHAPESASCASTS
#include "fa/Pipelines/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// Whether some group of `op` splits a dimension into two or more dynamic
/// sizes (what upstream cannot lower).
bool hasDynamicGroup(memref::ExpandShapeOp op) {
  MemRefType type = op.getResultType();
  for (const ReassociationIndices &group : op.getReassociationIndices())
    if (llvm::count_if(group, [&](int64_t d) { return type.isDynamicDim(d); }) >
        1)
      return true;
  return false;
}

struct ExpandShapeAsCast final : OpRewritePattern<memref::ExpandShapeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(memref::ExpandShapeOp op,
                                PatternRewriter &rewriter) const override {
    if (!hasDynamicGroup(op))
      return failure();
    Location loc = op.getLoc();
    auto meta =
        memref::ExtractStridedMetadataOp::create(rewriter, loc, op.getSrc());
    SmallVector<OpFoldResult> sizes = op.getMixedOutputShape();
    SmallVector<OpFoldResult> strides(sizes.size());
    for (auto [srcDim, group] : llvm::enumerate(op.getReassociationIndices())) {
      OpFoldResult stride = meta.getStrides()[srcDim];
      for (int64_t d : llvm::reverse(group)) {
        strides[d] = stride;
        if (d == group.front())
          break;
        stride = arith::MulIOp::create(
                     rewriter, loc,
                     getValueOrCreateConstantIndexOp(rewriter, loc, stride),
                     getValueOrCreateConstantIndexOp(rewriter, loc, sizes[d]))
                     .getResult();
      }
    }
    // Where the result type knows a stride or the offset, the cast must
    // state it as a constant (identity layouts: 0 and the trailing strides).
    auto [typeStrides, typeOffset] = op.getResultType().getStridesAndOffset();
    for (auto [stride, known] : llvm::zip_equal(strides, typeStrides))
      if (!ShapedType::isDynamic(known))
        stride = rewriter.getIndexAttr(known);
    OpFoldResult offset = ShapedType::isDynamic(typeOffset)
                              ? OpFoldResult(meta.getOffset())
                              : OpFoldResult(rewriter.getIndexAttr(typeOffset));
    rewriter.replaceOpWithNewOp<memref::ReinterpretCastOp>(
        op, op.getResultType(), meta.getBaseBuffer(), offset, sizes, strides);
    return success();
  }
};

struct FAExpandReshapesAsCastsPass final
    : fa::impl::FAExpandReshapesAsCastsBase<FAExpandReshapesAsCastsPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandShapeAsCast>(&getContext());
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace
