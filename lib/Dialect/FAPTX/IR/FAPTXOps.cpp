//===- FAPTXOps.cpp - PTX-only instructions as ops ------------------------===//

#include "fa/Dialect/FAPTX/IR/FAPTX.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::faptx;

#include "fa/Dialect/FAPTX/IR/FAPTXOpsDialect.cpp.inc"

void FAPTXDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "fa/Dialect/FAPTX/IR/FAPTXOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// WgmmaMmaRSOp
//===----------------------------------------------------------------------===//

LogicalResult
WgmmaMmaRSOp::inferReturnTypes(MLIRContext *context, std::optional<Location>,
                               ValueRange operands, DictionaryAttr attributes,
                               OpaqueProperties properties, RegionRange regions,
                               SmallVectorImpl<Type> &inferredReturnTypes) {
  Adaptor adaptor(operands, attributes, properties, regions);
  inferredReturnTypes.assign(adaptor.getAcc().size(),
                             Float32Type::get(context));
  return success();
}

LogicalResult WgmmaMmaRSOp::verify() {
  int64_t n = getN();
  // The dense f16/bf16 shapes of wgmma: m64nNk16 with N = 8, 16, ..., 256.
  if (n % 8 != 0 || n > 256)
    return emitOpError("n must be a multiple of 8 from 8 to 256, not ") << n;
  if (getA().size() != 4)
    return emitOpError("A (64 x 16 from registers) takes 4 i32 registers "
                       "per thread, not ")
           << getA().size();
  if (int64_t(getAcc().size()) != n / 2)
    return emitOpError("an m64n")
           << n << "k16 accumulator has " << n / 2
           << " f32 registers per thread, not " << getAcc().size();
  return success();
}

//===----------------------------------------------------------------------===//
// RedGlobalAddOp
//===----------------------------------------------------------------------===//

LogicalResult RedGlobalAddOp::verify() {
  size_t n = getValues().size();
  if (n != 2 && n != 4)
    return emitOpError("red.global.add.v<n>.f32 takes 2 or 4 values, not ")
           << n;
  return success();
}

//===----------------------------------------------------------------------===//
// TensorMapParamOp
//===----------------------------------------------------------------------===//

LogicalResult TensorMapParamOp::verify() {
  // Before outlining, a value a gpu.launch captures (it becomes a kernel
  // argument).
  if (auto launch = (*this)->getParentOfType<gpu::LaunchOp>())
    if (!launch.getBody().isAncestor(getParam().getParentRegion()))
      return success();
  auto arg = dyn_cast<BlockArgument>(getParam());
  Operation *owner = arg ? arg.getOwner()->getParentOp() : nullptr;
  if (!arg || !isa_and_nonnull<FunctionOpInterface>(owner) ||
      arg.getOwner() != &owner->getRegion(0).front())
    return emitOpError("takes an argument of the enclosing kernel function "
                       "(or a value its gpu.launch captures)");
  return success();
}

#define GET_OP_CLASSES
#include "fa/Dialect/FAPTX/IR/FAPTXOps.cpp.inc"
