//===- UseExp2.cpp ------------------------------------------------------------===//
//
// Placeholder: not implemented yet. The pass fails loudly rather than
// pretending to work.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Transforms/Passes.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FAUSEEXP2
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {
struct FAUseExp2Pass final : fa::impl::FAUseExp2Base<FAUseExp2Pass> {
  using Base::Base;
  void runOnOperation() override {
    getOperation()->emitError("UseExp2 is not implemented yet");
    signalPassFailure();
  }
};
} // namespace
