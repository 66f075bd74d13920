//===- FAGPUOps.cpp - GPU-level schedule ops ------------------------------===//

#include "fa/Dialect/FAGPU/IR/FAGPU.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fagpu;

#include "fa/Dialect/FAGPU/IR/FAGPUOpsDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "fa/Dialect/FAGPU/IR/FAGPUOpsTypes.cpp.inc"

void FAGPUDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "fa/Dialect/FAGPU/IR/FAGPUOpsTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "fa/Dialect/FAGPU/IR/FAGPUOps.cpp.inc"
      >();
}

static bool isWorkgroup(MemRefType type) {
  auto space = dyn_cast_or_null<gpu::AddressSpaceAttr>(type.getMemorySpace());
  return space && space.getValue() == gpu::AddressSpace::Workgroup;
}

//===----------------------------------------------------------------------===//
// ChannelType
//===----------------------------------------------------------------------===//

LogicalResult ChannelType::verify(function_ref<InFlightDiagnostic()> emitError,
                                  int64_t stages, MemRefType buffer) {
  if (stages < 1)
    return emitError() << "a channel has at least one stage, not " << stages;
  if (!buffer.hasStaticShape() || !buffer.getLayout().isIdentity())
    return emitError() << "a channel buffer has a static shape and the "
                          "identity layout, not "
                       << buffer;
  if (!isWorkgroup(buffer))
    return emitError() << "a channel buffer lives in workgroup (shared) "
                          "memory, not "
                       << buffer;
  return success();
}

MemRefType ChannelType::getStageType() const {
  MemRefType buffer = getBuffer();
  // The buffer's own (identity) strides, at the offset of its stage.
  auto [strides, offset] = buffer.getStridesAndOffset();
  auto layout = StridedLayoutAttr::get(buffer.getContext(),
                                       ShapedType::kDynamic, strides);
  return MemRefType::get(buffer.getShape(), buffer.getElementType(), layout,
                         buffer.getMemorySpace());
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

LogicalResult ChannelCreateOp::verify() {
  ChannelType channel = getChannel().getType();
  MemRefType buffer = channel.getBuffer();
  auto ring = cast<MemRefType>(getRing().getType());
  SmallVector<int64_t> want = {channel.getStages()};
  llvm::append_range(want, buffer.getShape());
  if (ring.getShape() != ArrayRef<int64_t>(want) ||
      ring.getElementType() != buffer.getElementType() ||
      ring.getMemorySpace() != buffer.getMemorySpace() ||
      !ring.getLayout().isIdentity())
    return emitOpError("the ring must be ")
           << channel.getStages() << " contiguous buffers of " << buffer
           << ", not " << ring;
  // The kernel's body: a function's, or a gpu.launch's before outlining.
  Operation *parent = (*this)->getParentOp();
  if (!isa_and_nonnull<FunctionOpInterface, gpu::LaunchOp>(parent) ||
      (*this)->getBlock() != &parent->getRegion(0).front())
    return emitOpError("must be in the kernel's entry block (its lowering "
                       "synchronizes the whole thread block)");
  return success();
}

int64_t ChannelPutTmaOp::getNumBoxes() {
  MemRefType buffer = getChannel().getType().getBuffer();
  MemRefType box = getMap().getType().getTensor();
  return buffer.getRank() == box.getRank() ? 1 : buffer.getDimSize(0);
}

LogicalResult ChannelPutTmaOp::verify() {
  MemRefType buffer = getChannel().getType().getBuffer();
  MemRefType box = getMap().getType().getTensor();
  ArrayRef<int64_t> shape = buffer.getShape();
  if (buffer.getRank() == box.getRank() + 1)
    shape = shape.drop_front();
  if (box.getShape() != shape ||
      box.getElementType() != buffer.getElementType())
    return emitOpError("the channel's buffer ")
           << buffer << " must be the tensor map's box " << box
           << " or a sequence of them along a leading dimension";
  if (int64_t(getCoordinates().size()) != box.getRank())
    return emitOpError("takes one coordinate per box dimension (")
           << box.getRank() << "), not " << getCoordinates().size();
  return success();
}

LogicalResult ChannelGetOp::verify() {
  MemRefType want = getChannel().getType().getStageType();
  if (getBuffer().getType() != want)
    return emitOpError("returns the stage buffer type ")
           << want << ", not " << getBuffer().getType();
  return success();
}

LogicalResult WarpSpecializeOp::verify() {
  for (int64_t regs : {getProducerRegisters(), getConsumerRegisters()})
    if (regs < 24 || regs > 256 || regs % 8 != 0)
      return emitOpError("setmaxnreg takes a multiple of 8 from 24 to 256 "
                         "registers, not ")
             << regs;
  int64_t warpgroups = 1 + getConsumerWarpgroups();
  // 64K registers per multiprocessor: what the roles hold at once.
  int64_t total =
      kWarpgroupThreads * (getProducerRegisters() +
                           getConsumerWarpgroups() * getConsumerRegisters());
  if (total > 65536)
    return emitOpError("the roles would hold ")
           << total << " registers, more than the 65536 of a multiprocessor";
  auto func = (*this)->getParentOfType<gpu::GPUFuncOp>();
  if (func) {
    std::optional<ArrayRef<int32_t>> block = func.getKnownBlockSize();
    if (!block || (*block)[0] != kWarpgroupThreads * warpgroups ||
        (*block)[1] != 1 || (*block)[2] != 1)
      return emitOpError("needs the kernel's known_block_size to be [")
             << kWarpgroupThreads * warpgroups << ", 1, 1] (one producer and "
             << getConsumerWarpgroups() << " consumer warpgroups)";
  }
  return success();
}

LogicalResult HostTensorMapOp::verify() {
  auto source = cast<MemRefType>(getSource().getType());
  MemRefType box =
      cast<nvgpu::TensorMapDescriptorType>(getDescriptor()).getTensor();
  if (source.getRank() != box.getRank() ||
      source.getElementType() != box.getElementType())
    return emitOpError("the box ")
           << box << " must have the rank and element type of " << source;
  if (!source.isLastDimUnitStride())
    return emitOpError("TMA reads rows of contiguous elements: the innermost "
                       "stride of ")
           << source << " must be 1";
  return success();
}

#define GET_OP_CLASSES
#include "fa/Dialect/FAGPU/IR/FAGPUOps.cpp.inc"
