//===- SpecializeMasks.cpp ------------------------------------------------------------===//
//
// Placeholder: not implemented yet. The pass fails loudly rather than
// pretending to work.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Transforms/Passes.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FASPECIALIZEMASKS
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {
struct FASpecializeMasksPass final : fa::impl::FASpecializeMasksBase<FASpecializeMasksPass> {
  using Base::Base;
  void runOnOperation() override {
    getOperation()->emitError("SpecializeMasks is not implemented yet");
    signalPassFailure();
  }
};
} // namespace
