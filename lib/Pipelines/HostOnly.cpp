//===- HostOnly.cpp - Reject fa ops in device code ------------------------===//
//
// The first pass of the CPU pipelines: fa ops inside a gpu.module are device
// code, which those pipelines do not lower. Rejecting them up front keeps the
// fa passes (which walk the whole IR) from expanding them into ops that the
// host lowering would then leave behind half converted.
//
//===----------------------------------------------------------------------===//

#include "fa/Pipelines/Passes.h"

#include "fa/Dialect/FA/IR/FADialect.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FAHOSTONLY
#include "fa/Pipelines/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// The first op of the fa dialect nested in `root`, or null.
Operation *findFAOp(Operation *root) {
  Operation *found = nullptr;
  root->walk([&](Operation *op) {
    if (!isa_and_nonnull<FADialect>(op->getDialect()))
      return WalkResult::advance();
    found = op;
    return WalkResult::interrupt();
  });
  return found;
}

struct FAHostOnlyPass final : fa::impl::FAHostOnlyBase<FAHostOnlyPass> {
  using Base::Base;

  void runOnOperation() override {
    bool failed = false;
    getOperation()->walk([&](gpu::GPUModuleOp gpuModule) {
      Operation *faOp = findFAOp(gpuModule);
      if (!faOp)
        return;
      InFlightDiagnostic diag =
          gpuModule.emitError()
          << "holds " << faOp->getName()
          << ", device code that the CPU pipelines do not lower (they lower "
             "host code; the GPU pipelines take fa ops on the host)";
      diag.attachNote(faOp->getLoc()) << "fa op in device code here";
      failed = true;
    });
    if (failed)
      signalPassFailure();
  }
};

} // namespace
