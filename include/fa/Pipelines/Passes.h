//===- Passes.h - FlashMLIR pipeline passes ---------------------*- C++ -*-===//

#ifndef FA_PIPELINES_PASSES_H
#define FA_PIPELINES_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::fa {

#define GEN_PASS_DECL
#include "fa/Pipelines/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fa/Pipelines/Passes.h.inc"

} // namespace mlir::fa

#endif // FA_PIPELINES_PASSES_H
