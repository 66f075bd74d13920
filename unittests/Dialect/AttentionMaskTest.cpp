//===- AttentionMaskTest.cpp - the visibility rule ------------------------===//
//
// `#fa.mask` through MaskAttrInterface, on constants: the IR it builds must
// fold, and agree with the rule written out here (and the block ranges with
// the elements they contain).
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FADialect.h"
#include "fa/Dialect/FA/IR/FAOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Matchers.h"
#include "llvm/Support/MathExtras.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::fa;

namespace {

/// Builds the interface's IR on constants into a module and reads back the
/// folded result.
class MaskTest : public ::testing::Test {
protected:
  MaskTest() {
    ctx.loadDialect<arith::ArithDialect, FADialect>();
    module = ModuleOp::create(UnknownLoc::get(&ctx));
    b.setInsertionPointToEnd(module->getBody());
  }

  Value idx(int64_t v) {
    return arith::ConstantIndexOp::create(b, b.getUnknownLoc(), v);
  }
  static int64_t constantOf(Value v) {
    APInt c;
    EXPECT_TRUE(matchPattern(v, m_ConstantInt(&c))) << "did not fold";
    return c.getSExtValue();
  }
  bool visible(MaskAttr m, int64_t i, int64_t j, int64_t nq, int64_t nk) {
    return constantOf(m.buildVisible(b, b.getUnknownLoc(), {}, idx(i), idx(j),
                                     idx(nq), idx(nk))) != 0;
  }
  /// The rule as docs/ARCHITECTURE.md states it (-1 = unbounded).
  static bool rule(int64_t left, int64_t right, int64_t i, int64_t j,
                   int64_t nq, int64_t nk) {
    int64_t diag = i + nk - nq;
    return (left < 0 || j >= diag - left) && (right < 0 || j <= diag + right);
  }

  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
  OpBuilder b{&ctx};
};

TEST_F(MaskTest, NoneSeesEverything) {
  MaskAttr m = MaskAttr::get(&ctx, MaskAttr::kUnbounded, MaskAttr::kUnbounded);
  EXPECT_TRUE(m.isFull());
  EXPECT_TRUE(visible(m, 0, 99, 1, 100));
}

TEST_F(MaskTest, CausalIsBottomRightAligned) {
  MaskAttr m = MaskAttr::getCausal(&ctx);
  EXPECT_FALSE(m.isFull());
  // Nq = 2, Nk = 5: row 0 sees keys 0..3, row 1 sees 0..4.
  EXPECT_TRUE(visible(m, 0, 3, 2, 5));
  EXPECT_FALSE(visible(m, 0, 4, 2, 5));
  EXPECT_TRUE(visible(m, 1, 4, 2, 5));
  // Nq = 5, Nk = 2: rows 0..2 see nothing, row 3 sees key 0.
  for (int j = 0; j < 2; ++j)
    EXPECT_FALSE(visible(m, 2, j, 5, 2));
  EXPECT_TRUE(visible(m, 3, 0, 5, 2));
  EXPECT_FALSE(visible(m, 3, 1, 5, 2));
}

TEST_F(MaskTest, SlidingWindow) {
  MaskAttr m = MaskAttr::get(&ctx, 2, 1);
  // Nq = Nk = 10: row 5 sees keys 3..6.
  for (int j = 0; j < 10; ++j)
    EXPECT_EQ(visible(m, 5, j, 10, 10), j >= 3 && j <= 6) << j;
}

TEST_F(MaskTest, RuntimeSizesFoldToTheirConstants) {
  MaskAttr m = MaskAttr::get(&ctx, MaskAttr::kDynamic, MaskAttr::kDynamic);
  Location loc = b.getUnknownLoc();
  auto i64 = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, loc, b.getI64Type(), v);
  };
  // -1 (any negative) is unbounded: saturated to kMaxWindowBound.
  SmallVector<Value> params = m.buildParameters(b, loc, {i64(3), i64(-5)});
  EXPECT_EQ(constantOf(params[0]), 3);
  EXPECT_EQ(constantOf(params[1]), kMaxWindowBound);
  EXPECT_TRUE(constantOf(
      m.buildVisible(b, loc, params, idx(5), idx(2), idx(9), idx(9))));
  EXPECT_FALSE(constantOf(
      m.buildVisible(b, loc, params, idx(5), idx(1), idx(9), idx(9))));
}

/// For every block of one side, the range holds every block with a visible
/// element and its full part exactly blocks whose every element is visible
/// (but the partial last block), in order.
TEST_F(MaskTest, BlockRangesHoldTheVisibleBlocks) {
  Location loc = b.getUnknownLoc();
  const int64_t sides[] = {-1, 0, 1, 5, 16};
  for (int64_t left : sides)
    for (int64_t right : sides)
      for (auto [nq, nk] :
           {std::pair<int64_t, int64_t>{17, 17}, {9, 40}, {40, 9}, {32, 16}})
        for (auto [bq, bk] :
             {std::pair<int64_t, int64_t>{16, 16}, {8, 16}, {16, 4}}) {
          MaskAttr m = MaskAttr::get(&ctx, left, right);
          SCOPED_TRACE(testing::Message()
                       << "left " << left << " right " << right << " nq " << nq
                       << " nk " << nk << " blocks " << bq << "x" << bk);
          // Key blocks of each query block, and the mirror.
          for (bool keys : {true, false}) {
            int64_t na = keys ? nq : nk, nb = keys ? nk : nq;
            int64_t ba = keys ? bq : bk, bb = keys ? bk : bq;
            for (int64_t a0 = 0; a0 < na; a0 += ba) {
              MaskBlockRange r =
                  keys ? m.buildKeyBlockRange(b, loc, {}, idx(a0), bq, bk,
                                              idx(nq), idx(nk))
                       : m.buildQueryBlockRange(b, loc, {}, idx(a0), bk, bq,
                                                idx(nq), idx(nk));
              // Offsets of first elements (end: at most nb) to block
              // numbers.
              auto blocks = [&](Value offset) {
                return llvm::divideCeil(constantOf(offset), bb);
              };
              ASSERT_EQ(constantOf(r.begin) % bb, 0);
              ASSERT_LE(constantOf(r.end), nb);
              int64_t begin = blocks(r.begin), fullBegin = blocks(r.fullBegin),
                      fullEnd = blocks(r.fullEnd), end = blocks(r.end);
              ASSERT_LE(begin, fullBegin);
              ASSERT_LE(fullBegin, fullEnd);
              ASSERT_LE(fullEnd, end);
              for (int64_t blk = 0; blk * bb < nb; ++blk) {
                bool any = false, all = (blk + 1) * bb <= nb;
                for (int64_t x = a0; x < std::min(a0 + ba, na); ++x)
                  for (int64_t y = blk * bb; y < std::min((blk + 1) * bb, nb);
                       ++y) {
                    bool v = keys ? rule(left, right, x, y, nq, nk)
                                  : rule(left, right, y, x, nq, nk);
                    any |= v;
                    all &= v;
                  }
                if (any) {
                  EXPECT_TRUE(blk >= begin && blk < end) << "block " << blk;
                }
                EXPECT_EQ(all, blk >= fullBegin && blk < fullEnd)
                    << (keys ? "key" : "query") << " block " << blk
                    << " of block at " << a0;
              }
            }
          }
        }
}

} // namespace
