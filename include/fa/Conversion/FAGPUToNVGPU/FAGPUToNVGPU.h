//===- FAGPUToNVGPU.h - fagpu schedule ops to nvgpu/nvvm --------*- C++ -*-===//

#ifndef FA_CONVERSION_FAGPUTONVGPU_FAGPUTONVGPU_H
#define FA_CONVERSION_FAGPUTONVGPU_FAGPUTONVGPU_H

#include "mlir/Pass/Pass.h"

namespace mlir::fa {
#define GEN_PASS_DECL_FALOWERCHANNELS
#define GEN_PASS_DECL_FALOWERWARPSPECIALIZE
#include "fa/Conversion/Passes.h.inc"
} // namespace mlir::fa

#endif // FA_CONVERSION_FAGPUTONVGPU_FAGPUTONVGPU_H
