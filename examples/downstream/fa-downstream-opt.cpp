//===- fa-downstream-opt.cpp - An mlir-opt built on installed FlashMLIR ---===//
//
// The smallest useful consumer of the FlashMLIR package: an opt tool that
// knows the fa dialect (plus func, to hold it), the fa passes and the fa
// pipelines. Every other dialect a pass produces is loaded on demand through
// the passes' dependent dialects.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FADialect.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Pipelines/Pipelines.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::fa::registerFAPasses();
  mlir::fa::registerFAPipelines();

  mlir::DialectRegistry registry;
  registry.insert<mlir::fa::FADialect, mlir::func::FuncDialect>();

  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "FlashMLIR downstream example\n", registry));
}
