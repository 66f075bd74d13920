//===- FAPlugin.cpp - fa dialect and passes as an mlir-opt plugin ---------===//

#include "fa/Dialect/FA/IR/FADialect.h"
#include "fa/Dialect/FAGPU/IR/FAGPU.h"
#include "fa/Dialect/FAPTX/IR/FAPTX.h"
#include "fa/InitAllPasses.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/Compiler.h"

using namespace mlir;

/// Dialect plugin entry point: `mlir-opt --load-dialect-plugin=FAPlugin.so`.
extern "C" LLVM_ATTRIBUTE_WEAK DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "FlashMLIR", LLVM_VERSION_STRING,
          [](DialectRegistry *registry) {
            registry->insert<fa::FADialect, faptx::FAPTXDialect, fagpu::FAGPUDialect>();
          }};
}

/// Pass plugin entry point: `mlir-opt --load-pass-plugin=FAPlugin.so`.
extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "FlashMLIRPasses", LLVM_VERSION_STRING,
          []() {
            fa::registerAllFAPasses();
          }};
}
