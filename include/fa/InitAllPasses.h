//===- InitAllPasses.h - Register every FlashMLIR pass -----------*- C++ -*-===//
//
// One place that registers FlashMLIR's passes and pipelines, shared by
// fa-opt, fa-compile and the mlir-opt plugin.
//
//===----------------------------------------------------------------------===//

#ifndef FA_INITALLPASSES_H
#define FA_INITALLPASSES_H

#include "fa/Conversion/Passes.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Pipelines/GPUPipelines.h"
#include "fa/Pipelines/Passes.h"
#include "fa/Pipelines/Pipelines.h"

namespace mlir::fa {

inline void registerAllFAPasses() {
  registerFAPasses();
  registerFAConversionPasses();
  registerFAPipelinesPasses();
  registerFAPipelines();
  registerFAGPUPipelines();
}

} // namespace mlir::fa

#endif // FA_INITALLPASSES_H
