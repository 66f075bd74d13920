//===- LaunchDescriptionTest.cpp - sizes read back from the host IR -------===//

#include "fa/Pipelines/LaunchDescription.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::fa;

namespace {

/// A host function whose launch grid and allocation are computed from the
/// sizes of its two memref arguments, as the GPU conversions build them.
constexpr const char *kHost = R"mlir(
module attributes {gpu.container_module} {
gpu.module @kernels {
  gpu.func @k(%a: f32) kernel { gpu.return }
}
func.func @host(%q: memref<?x?x?x64xbf16>, %k: memref<?x?x?x64xbf16>, %s: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c128 = arith.constant 128 : index
  %b = memref.dim %q, %c0 : memref<?x?x?x64xbf16>
  %h = memref.dim %k, %c1 : memref<?x?x?x64xbf16>
  %n = memref.dim %q, %c2 : memref<?x?x?x64xbf16>
  %m = memref.dim %k, %c2 : memref<?x?x?x64xbf16>
  %blocks = arith.ceildivsi %m, %c128 : index
  %split = arith.muli %blocks, %c2 : index
  %sum = arith.addi %n, %m : index
  %rows = arith.muli %sum, %c3 : index
  %diff = arith.subi %n, %sum : index
  %quot = arith.divui %n, %rows : index
  %pad = arith.ceildivui %n, %c128 : index
  %padded = arith.muli %pad, %c128 : index
  %buf = memref.alloc(%b, %padded) : memref<?x?x64xf32>
  gpu.launch_func @kernels::@k blocks in (%split, %h, %b) threads in (%c128, %c1, %c1) args(%s : f32)
  "test.use"(%rows, %diff, %quot) : (index, index, index) -> ()
  return
}
}
)mlir";

struct LaunchDescriptionTest : ::testing::Test {
  LaunchDescriptionTest() {
    ctx.allowUnregisteredDialects();
    ctx.loadDialect<arith::ArithDialect, func::FuncDialect, gpu::GPUDialect,
                    memref::MemRefDialect>();
    module = parseSourceString<ModuleOp>(kHost, &ctx);
    host = module->lookupSymbol<func::FuncOp>("host");
  }
  Operation *use() {
    Operation *found = nullptr;
    host.walk([&](Operation *op) {
      if (op->getName().getStringRef() == "test.use")
        found = op;
    });
    return found;
  }
  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
  func::FuncOp host;
  SmallVector<HostArgument> args = {{"q", {"B", "Hq", "Nq", "D"}},
                                    {"k", {"B", "Hkv", "Nk", "D"}}};
};

TEST_F(LaunchDescriptionTest, GridFromTheArgumentsSizes) {
  ASSERT_TRUE(host);
  gpu::LaunchFuncOp launch;
  host.walk([&](gpu::LaunchFuncOp op) { launch = op; });
  FailureOr<SmallVector<std::string, 3>> grid =
      describeGrid(launch, host, args);
  ASSERT_TRUE(succeeded(grid));
  EXPECT_EQ((*grid)[0], "ceildiv(Nk, 128) * 2");
  EXPECT_EQ((*grid)[1], "Hkv");
  EXPECT_EQ((*grid)[2], "B");
}

TEST_F(LaunchDescriptionTest, AllocationStaticAndDynamicSizes) {
  memref::AllocOp alloc;
  host.walk([&](memref::AllocOp op) { alloc = op; });
  FailureOr<SmallVector<std::string, 4>> dims =
      describeAllocation(alloc, host, args);
  ASSERT_TRUE(succeeded(dims));
  EXPECT_EQ((*dims)[0], "B");
  EXPECT_EQ((*dims)[1], "ceildiv(Nq, 128) * 128");
  EXPECT_EQ((*dims)[2], "64");
}

TEST_F(LaunchDescriptionTest, ParenthesesFollowPrecedence) {
  Operation *op = use();
  ASSERT_TRUE(op);
  EXPECT_EQ(*describeSize(op->getOperand(0), host, args), "(Nq + Nk) * 3");
  EXPECT_EQ(*describeSize(op->getOperand(1), host, args), "Nq - (Nq + Nk)");
  EXPECT_EQ(*describeSize(op->getOperand(2), host, args),
            "Nq // ((Nq + Nk) * 3)");
}

TEST_F(LaunchDescriptionTest, RefusesWhatIsNotASizeExpression) {
  std::string message;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    message = d.str();
    return success();
  });
  // The run-time scalar %s is no size; neither is a dimension of an
  // argument the launcher does not name.
  Value scalar = host.getArgument(2);
  EXPECT_TRUE(failed(describeSize(scalar, host, args)));
  EXPECT_NE(message.find("not computed from the arguments' dimensions"),
            std::string::npos)
      << message;
  SmallVector<HostArgument> onlyQ = {args[0]};
  gpu::LaunchFuncOp launch;
  host.walk([&](gpu::LaunchFuncOp op) { launch = op; });
  EXPECT_TRUE(failed(describeGrid(launch, host, onlyQ)));
  EXPECT_NE(message.find("not a dimension of a named argument"),
            std::string::npos)
      << message;
}

} // namespace
