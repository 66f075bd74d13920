//===- KernelResourcesTest.cpp - the backward's dQ staging choice ---------===//
//
// `kernelResources` decides whether a backward key-block kernel stages dQ in
// shared memory and in how many rows per warp: the conversion allocates what
// it says and fa-compile reports its shared memory, so the choice is checked
// here on the configurations the package builds.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FADialect.h"
#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FA/IR/KernelResources.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::fa;

namespace {

class KernelResourcesTest : public ::testing::Test {
protected:
  KernelResourcesTest() { ctx.loadDialect<FADialect>(); }

  /// The backward key-block kernel (fast mode) of a cooperative
  /// configuration.
  KernelResources backward(StringRef chip, MmaKind mma, int64_t blockQ,
                           int64_t blockKV, int64_t warps, int64_t d) {
    auto config = KernelConfigAttr::get(
        &ctx, chip, mma, blockQ, blockKV, warps, /*stages=*/2,
        /*dkvSplit=*/1, KernelSchedule::Cooperative, TileScheduler::Grid);
    return kernelResources(config,
                           {KernelKind::BackwardKeyBlock, d, d, /*withDq=*/
                            true});
  }

  MLIRContext ctx;
};

// A warpgroup per 64 keys at D = 128: a 16-row area per warp.
TEST_F(KernelResourcesTest, SixteenRowsWhereTheyFit) {
  KernelResources r = backward("sm_90a", MmaKind::Wgmma, 64, 64, 4, 128);
  EXPECT_TRUE(r.stagesDq);
  EXPECT_EQ(r.dqStageRows, 16);
}

// The D = 192 pair (8 warps on 64 keys) still has room for 16 rows.
TEST_F(KernelResourcesTest, PairAtD192StagesSixteenRows) {
  KernelResources r = backward("sm_90a", MmaKind::Wgmma, 64, 64, 8, 192);
  EXPECT_TRUE(r.stagesDq);
  EXPECT_EQ(r.dqStageRows, 16);
  EXPECT_LE(r.sharedMemory, 232448);
}

// At D = 256 a 16-row area would take the pair to 249,856 B; 8 rows fill
// sm_90a's 232,448 B exactly.
TEST_F(KernelResourcesTest, PairAtD256StagesEightRows) {
  KernelResources r = backward("sm_90a", MmaKind::Wgmma, 64, 64, 8, 256);
  EXPECT_TRUE(r.stagesDq);
  EXPECT_EQ(r.dqStageRows, 8);
  EXPECT_EQ(r.sharedMemory, 232448);
}

// The pair's dK / dV columns: D = 192's three panels do not halve, so the
// warpgroups take roles (all of dK, all of dV: 64 x 192 / 128 threads = 96
// registers each); D = 256 halves its four; D = 192 / Dv = 128 halves each
// rounded up (the middle dK panel twice).
TEST_F(KernelResourcesTest, PairColumns) {
  PairColumns d192 = backwardPairColumns(192, 192);
  EXPECT_TRUE(d192.roles);
  EXPECT_EQ(d192.k, 192);
  EXPECT_EQ(d192.v, 0);
  PairColumns d256 = backwardPairColumns(256, 256);
  EXPECT_FALSE(d256.roles);
  EXPECT_EQ(d256.k, 128);
  EXPECT_EQ(d256.v, 128);
  PairColumns mixed = backwardPairColumns(192, 128);
  EXPECT_FALSE(mixed.roles);
  EXPECT_EQ(mixed.k, 128);
  EXPECT_EQ(mixed.v, 64);
  // Accumulators: dK / dV columns / 2 plus S^T and dP^T of half the queries.
  EXPECT_EQ(
      backward("sm_90a", MmaKind::Wgmma, 64, 64, 8, 192).accumulatorRegisters,
      96 + 32);
  EXPECT_EQ(
      backward("sm_90a", MmaKind::Wgmma, 64, 64, 8, 256).accumulatorRegisters,
      128 + 32);
}

// sm_80 has no vector reductions: nothing is staged.
TEST_F(KernelResourcesTest, NoStagingWithoutVectorReductions) {
  KernelResources r = backward("sm_80", MmaKind::MmaSync, 64, 64, 4, 128);
  EXPECT_FALSE(r.stagesDq);
  EXPECT_EQ(r.dqStageRows, 0);
}

} // namespace
