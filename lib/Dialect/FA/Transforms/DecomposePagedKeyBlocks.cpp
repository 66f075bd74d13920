//===- DecomposePagedKeyBlocks.cpp - Paged key blocks as gathers ----------===//
//
// Expands fa.paged_key_block into a tensor.generate: element (r, d) is
//
//   start + r < limit ? pages[table[batch, (start + r) / S], head,
//                             (start + r) mod S, d]
//                     : 0
//
// with the loads under an scf.if, so that rows past the sequence read
// neither the table (its entries there are unspecified) nor the pool. An
// element at a time is slow, and fine for the CPU pipeline, which checks
// numerics; the GPU conversions copy whole rows from the op itself.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Transforms/Passes.h"

#include "BuilderUtils.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FADECOMPOSEPAGEDKEYBLOCKS
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

struct DecomposePagedKeyBlock final : OpRewritePattern<PagedKeyBlockOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(PagedKeyBlockOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = op.getResult().getType();
    Type elt = type.getElementType();
    Value pageSize =
        arith::ConstantIndexOp::create(rewriter, loc, op.getPageSize());
    auto generate = tensor::GenerateOp::create(
        rewriter, loc, type, ValueRange{},
        [&](OpBuilder &b, Location l, ValueRange ivs) {
          Value key = arith::AddIOp::create(b, l, op.getStart(), ivs[0]);
          Value inSequence = arith::CmpIOp::create(
              b, l, arith::CmpIPredicate::slt, key, op.getLimit());
          auto ifOp = scf::IfOp::create(
              b, l, inSequence,
              [&](OpBuilder &tb, Location tl) {
                Value page = fa::detail::extractIndex(
                    tb, tl, op.getPageTable(),
                    {op.getBatch(),
                     arith::DivUIOp::create(tb, tl, key, pageSize)});
                Value row = arith::RemUIOp::create(tb, tl, key, pageSize);
                Value x = tensor::ExtractOp::create(
                    tb, tl, op.getPages(),
                    ValueRange{page, op.getHead(), row, ivs[1]});
                scf::YieldOp::create(tb, tl, x);
              },
              [&](OpBuilder &eb, Location el) {
                Value zero =
                    arith::ConstantOp::create(eb, el, elt, eb.getZeroAttr(elt));
                scf::YieldOp::create(eb, el, zero);
              });
          tensor::YieldOp::create(b, l, ifOp.getResult(0));
        });
    rewriter.replaceOp(op, generate.getResult());
    return success();
  }
};

struct FADecomposePagedKeyBlocksPass final
    : fa::impl::FADecomposePagedKeyBlocksBase<FADecomposePagedKeyBlocksPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<DecomposePagedKeyBlock>(&getContext());
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace
