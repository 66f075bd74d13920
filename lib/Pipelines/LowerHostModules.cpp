//===- LowerHostModules.cpp - Host lowering of every builtin.module -------===//
//
// The host lowering (one-shot bufferize with function boundaries, func to
// LLVM, ...) converts the functions of the module it runs on, not those of
// nested modules. This pass runs it as a dynamic pipeline on each
// builtin.module that holds functions, innermost first, so that every level
// is lowered whole; an outer module's run then sees its inner modules
// already in the LLVM dialect.
//
//===----------------------------------------------------------------------===//

#include "fa/Pipelines/Passes.h"

#include "fa/Pipelines/Pipelines.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FALOWERHOSTMODULES
#include "fa/Pipelines/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

bool holdsFunctions(ModuleOp module) {
  return !module.getBody()->getOps<FunctionOpInterface>().empty();
}

/// The builtin.module ops at or under `root` that directly hold a function,
/// innermost first. Function bodies and gpu.module ops are not searched.
SmallVector<ModuleOp> hostModulesInnermostFirst(ModuleOp root) {
  SmallVector<ModuleOp> modules;
  root->walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (isa<FunctionOpInterface, gpu::GPUModuleOp>(op))
      return WalkResult::skip();
    if (auto module = dyn_cast<ModuleOp>(op))
      if (holdsFunctions(module))
        modules.push_back(module);
    return WalkResult::advance();
  });
  // Pre-order puts every module before the modules nested in it.
  std::reverse(modules.begin(), modules.end());
  return modules;
}

struct FALowerHostModulesPass final
    : fa::impl::FALowerHostModulesBase<FALowerHostModulesPass> {
  using Base::Base;

  void getDependentDialects(DialectRegistry &registry) const override {
    // The dynamic pipeline's dialects must be loaded before it runs.
    OpPassManager pipeline(ModuleOp::getOperationName());
    buildModuleToLLVMPipeline(pipeline);
    pipeline.getDependentDialects(registry);
  }

  LogicalResult initialize(MLIRContext *) override {
    hostPipeline = OpPassManager(ModuleOp::getOperationName());
    buildModuleToLLVMPipeline(hostPipeline);
    return success();
  }

  void runOnOperation() override {
    for (ModuleOp module : hostModulesInnermostFirst(getOperation())) {
      if (failed(runPipeline(hostPipeline, module)))
        return signalPassFailure();
      for (FunctionOpInterface func :
           module.getBody()->getOps<FunctionOpInterface>()) {
        if (isa<LLVM::LLVMFuncOp>(func))
          continue;
        func.emitError() << "fa-lower-host-modules: " << func->getName() << " @"
                         << func.getName()
                         << " was not lowered to the LLVM dialect";
        return signalPassFailure();
      }
    }
  }

  OpPassManager hostPipeline{ModuleOp::getOperationName()};
};

} // namespace
