//===- AttentionMaskTest.cpp - the visibility rule ------------------------===//

#include "fa/Dialect/FA/IR/FAOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::fa;

TEST(AttentionMask, FullSeesEverything) {
  AttentionMask m = AttentionMask::get(false, nullptr);
  EXPECT_TRUE(m.isFull());
  EXPECT_TRUE(m.isVisible(0, 99, 1, 100));
  EXPECT_FALSE(m.isVisible(0, 100, 1, 100));
}

TEST(AttentionMask, CausalIsBottomRightAligned) {
  AttentionMask m = AttentionMask::get(true, nullptr);
  // Nq = 2, Nk = 5: row 0 sees keys 0..3, row 1 sees 0..4.
  EXPECT_TRUE(m.isVisible(0, 3, 2, 5));
  EXPECT_FALSE(m.isVisible(0, 4, 2, 5));
  EXPECT_TRUE(m.isVisible(1, 4, 2, 5));
  // Nq = 5, Nk = 2: rows 0..2 see nothing, row 3 sees key 0.
  for (int j = 0; j < 2; ++j)
    EXPECT_FALSE(m.isVisible(2, j, 5, 2));
  EXPECT_TRUE(m.isVisible(3, 0, 5, 2));
  EXPECT_FALSE(m.isVisible(3, 1, 5, 2));
}

TEST(AttentionMask, SlidingWindow) {
  MLIRContext ctx;
  Builder b(&ctx);
  AttentionMask m = AttentionMask::get(false, b.getDenseI64ArrayAttr({2, 1}));
  // Nq = Nk = 10: row 5 sees keys 3..6.
  for (int j = 0; j < 10; ++j)
    EXPECT_EQ(m.isVisible(5, j, 10, 10), j >= 3 && j <= 6) << j;
  // -1 is unbounded; causal forces right = 0.
  AttentionMask c = AttentionMask::get(true, b.getDenseI64ArrayAttr({-1, 0}));
  EXPECT_FALSE(c.left.has_value());
  EXPECT_EQ(c.right, 0);
}
