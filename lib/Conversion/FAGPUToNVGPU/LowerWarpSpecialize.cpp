//===- LowerWarpSpecialize.cpp - warp roles to a branch -------------------===//
//
// fagpu.warp_specialize -> scf.if on the warpgroup index, each role first
// moving to its register budget with setmaxnreg.
//
//===----------------------------------------------------------------------===//

#include "fa/Conversion/FAGPUToNVGPU/FAGPUToNVGPU.h"
#include "fa/Dialect/FAGPU/IR/FAGPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FALOWERWARPSPECIALIZE
#include "fa/Conversion/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fagpu;

namespace {

/// Moves the ops of `region` (but its yield) to the start of `dest`.
void inlineRole(Region &region, Block *dest) {
  Block &body = region.front();
  body.getTerminator()->erase();
  dest->getOperations().splice(dest->begin(), body.getOperations());
}

void lowerWarpSpecialize(WarpSpecializeOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value wg = arith::DivUIOp::create(
      b, loc, tid, arith::ConstantIndexOp::create(b, loc, kWarpgroupThreads));
  Value isProducer =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, wg,
                            arith::ConstantIndexOp::create(b, loc, 0));
  auto branch = scf::IfOp::create(b, loc, isProducer, /*withElse=*/true);
  auto roleStart = [&](Block *block, NVVM::SetMaxRegisterAction action,
                       int64_t registers) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(block);
    NVVM::SetMaxRegisterOp::create(b, loc, uint32_t(registers), action);
  };
  inlineRole(op.getProducer(), branch.thenBlock());
  inlineRole(op.getConsumers(), branch.elseBlock());
  roleStart(branch.thenBlock(), NVVM::SetMaxRegisterAction::decrease,
            op.getProducerRegisters());
  roleStart(branch.elseBlock(), NVVM::SetMaxRegisterAction::increase,
            op.getConsumerRegisters());
  op.erase();
}

struct FALowerWarpSpecializePass
    : fa::impl::FALowerWarpSpecializeBase<FALowerWarpSpecializePass> {
  void runOnOperation() override {
    SmallVector<WarpSpecializeOp> ops;
    getOperation()->walk([&](WarpSpecializeOp op) { ops.push_back(op); });
    for (WarpSpecializeOp op : ops)
      lowerWarpSpecialize(op);
  }
};

} // namespace
