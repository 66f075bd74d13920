//===- Passes.h - FlashMLIR conversion passes -------------------*- C++ -*-===//

#ifndef FA_CONVERSION_PASSES_H
#define FA_CONVERSION_PASSES_H

#include "fa/Conversion/FAGPUToNVGPU/FAGPUToNVGPU.h"
#include "fa/Conversion/FAPTXToLLVM/FAPTXToLLVM.h"
#include "fa/Conversion/TiledAttentionToGPU/TiledAttentionToGPU.h"

namespace mlir::fa {

#define GEN_PASS_REGISTRATION
#include "fa/Conversion/Passes.h.inc"

} // namespace mlir::fa

#endif // FA_CONVERSION_PASSES_H
