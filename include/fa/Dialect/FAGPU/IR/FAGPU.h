//===- FAGPU.h - GPU-level schedule ops -------------------------*- C++ -*-===//

#ifndef FA_DIALECT_FAGPU_IR_FAGPU_H
#define FA_DIALECT_FAGPU_IR_FAGPU_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "fa/Dialect/FAGPU/IR/FAGPUOpsDialect.h.inc"

namespace mlir::fagpu {
/// Threads of a warpgroup: the unit of the warp roles (and of wgmma).
constexpr int64_t kWarpgroupThreads = 128;
} // namespace mlir::fagpu

#define GET_TYPEDEF_CLASSES
#include "fa/Dialect/FAGPU/IR/FAGPUOpsTypes.h.inc"

#define GET_OP_CLASSES
#include "fa/Dialect/FAGPU/IR/FAGPUOps.h.inc"

#endif // FA_DIALECT_FAGPU_IR_FAGPU_H
