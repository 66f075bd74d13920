//===- FAPTX.h - PTX-only instructions as ops -------------------*- C++ -*-===//

#ifndef FA_DIALECT_FAPTX_IR_FAPTX_H
#define FA_DIALECT_FAPTX_IR_FAPTX_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "fa/Dialect/FAPTX/IR/FAPTXOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "fa/Dialect/FAPTX/IR/FAPTXOps.h.inc"

#endif // FA_DIALECT_FAPTX_IR_FAPTX_H
