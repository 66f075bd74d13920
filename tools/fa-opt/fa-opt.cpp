//===- fa-opt.cpp - FlashMLIR optimizer driver ----------------------------===//
//
// mlir-opt with the fa dialect, its passes and pipelines. Registers every
// upstream dialect, pass and LLVM IR translation too, so each pipeline of the
// test suite (down to gpu-module-to-binary) runs with this tool alone.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FADialect.h"
#include "fa/Dialect/FAGPU/IR/FAGPU.h"
#include "fa/Dialect/FAPTX/IR/FAPTX.h"
#include "fa/InitAllPasses.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::fa::registerAllFAPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
  registry.insert<mlir::fa::FADialect, mlir::faptx::FAPTXDialect,
                  mlir::fagpu::FAGPUDialect>();

  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "FlashMLIR optimizer driver\n", registry));
}
