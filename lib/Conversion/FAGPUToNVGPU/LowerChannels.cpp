//===- LowerChannels.cpp - fagpu channels to TMA and mbarriers ------------===//
//
// Each !fagpu.channel becomes a ring of buffers with a "full" and an
// "empty" mbarrier per buffer; puts, gets and releases become the phase
// waits, transaction-count arrivals and TMA loads of the protocol the pass
// documentation describes.
//
//===----------------------------------------------------------------------===//

#include "fa/Conversion/FAGPUToNVGPU/FAGPUToNVGPU.h"
#include "fa/Dialect/FAGPU/IR/FAGPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::fa {
#define GEN_PASS_DEF_FALOWERCHANNELS
#include "fa/Conversion/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fagpu;

namespace {

/// mbarrier.try_wait.parity's suspend-time hint (ns) per attempt; the
/// lowering loops until the phase completes.
constexpr int64_t kWaitTicks = 10000000;

/// What a channel lowers to, and the index arithmetic of its items.
struct ChannelParts {
  Value ring, full, empty;
  ChannelType type;

  Value idx(OpBuilder &b, Location loc, int64_t v) const {
    return arith::ConstantIndexOp::create(b, loc, v);
  }
  /// The buffer of item `i` and its round.
  std::pair<Value, Value> stageAndRound(OpBuilder &b, Location loc,
                                        Value i) const {
    Value stages = idx(b, loc, type.getStages());
    return {arith::RemUIOp::create(b, loc, i, stages),
            arith::DivUIOp::create(b, loc, i, stages)};
  }
  /// The phase bit of `round` as the i1 try_wait.parity takes.
  Value parity(OpBuilder &b, Location loc, Value round) const {
    Value bit = arith::RemUIOp::create(b, loc, round, idx(b, loc, 2));
    return arith::IndexCastOp::create(b, loc, b.getI1Type(), bit);
  }
  void wait(OpBuilder &b, Location loc, Value group, Value stage,
            Value round) const {
    nvgpu::MBarrierTryWaitParityOp::create(b, loc, group, parity(b, loc, round),
                                           idx(b, loc, kWaitTicks), stage);
  }
  /// Buffer `stage` of the ring.
  Value buffer(OpBuilder &b, Location loc, Value stage) const {
    MemRefType buf = type.getBuffer();
    SmallVector<OpFoldResult> offsets(buf.getRank() + 1, b.getIndexAttr(0));
    offsets[0] = stage;
    SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1)};
    for (int64_t d : buf.getShape())
      sizes.push_back(b.getIndexAttr(d));
    SmallVector<OpFoldResult> strides(buf.getRank() + 1, b.getIndexAttr(1));
    return memref::SubViewOp::create(b, loc, type.getStageType(), ring, offsets,
                                     sizes, strides);
  }
};

/// The barriers, initialized by thread 0 and published to the whole block
/// (and to the TMA unit) before anything else uses them.
ChannelParts createChannel(ChannelCreateOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  ChannelParts parts;
  parts.type = op.getChannel().getType();
  parts.ring = op.getRing();
  auto group = nvgpu::MBarrierGroupType::get(
      b.getContext(), parts.type.getBuffer().getMemorySpace(),
      parts.type.getStages());
  parts.full = nvgpu::MBarrierCreateOp::create(b, loc, group);
  parts.empty = nvgpu::MBarrierCreateOp::create(b, loc, group);
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid,
                                      parts.idx(b, loc, 0));
  auto ifOp = scf::IfOp::create(b, loc, first, /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    for (int64_t s = 0; s < parts.type.getStages(); ++s) {
      Value stage = parts.idx(b, loc, s);
      nvgpu::MBarrierInitOp::create(b, loc, parts.full, parts.idx(b, loc, 1),
                                    stage, Value());
      nvgpu::MBarrierInitOp::create(b, loc, parts.empty,
                                    parts.idx(b, loc, op.getArrivals()), stage,
                                    Value());
    }
    NVVM::FenceMbarrierInitOp::create(b, loc);
  }
  gpu::BarrierOp::create(b, loc);
  return parts;
}

/// Opens `if (thread 0 of the warpgroup)` at `op` (the thread that issues a
/// producer op) and leaves `b` inside it.
void electProducerThread(OpBuilder &b, Operation *op,
                         const ChannelParts &parts) {
  Location loc = op->getLoc();
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value lane =
      arith::RemUIOp::create(b, loc, tid, parts.idx(b, loc, kWarpgroupThreads));
  Value elected = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane,
                                        parts.idx(b, loc, 0));
  auto ifOp = scf::IfOp::create(b, loc, elected, /*withElseRegion=*/false);
  b.setInsertionPointToStart(ifOp.thenBlock());
}

/// From the second round on, waits until the consumers of item `index -
/// stages` released the buffer (phase round - 1 of its empty barrier).
void waitUntilFree(OpBuilder &b, Location loc, const ChannelParts &parts,
                   Value index, Value stage, Value round) {
  Value reuse =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, index,
                            parts.idx(b, loc, parts.type.getStages()));
  auto reuseIf = scf::IfOp::create(b, loc, reuse, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(reuseIf.thenBlock());
  Value prev = arith::SubIOp::create(b, loc, round, parts.idx(b, loc, 1));
  parts.wait(b, loc, parts.empty, stage, prev);
}

void lowerAcquire(ChannelAcquireOp op, const ChannelParts &parts) {
  OpBuilder b(op);
  electProducerThread(b, op, parts);
  auto [stage, round] = parts.stageAndRound(b, op.getLoc(), op.getIndex());
  waitUntilFree(b, op.getLoc(), parts, op.getIndex(), stage, round);
  op.erase();
}

/// A plain arrival completes the phase: the full barrier expects one
/// arrival and, without expect_tx, no bytes.
void lowerSignal(ChannelSignalOp op, const ChannelParts &parts) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  electProducerThread(b, op, parts);
  Value stage = parts.stageAndRound(b, loc, op.getIndex()).first;
  nvgpu::MBarrierArriveOp::create(
      b, loc, nvgpu::MBarrierTokenType::get(b.getContext()), parts.full, stage);
  op.erase();
}

void lowerPut(ChannelPutTmaOp op, const ChannelParts &parts) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  electProducerThread(b, op, parts);
  auto [stage, round] = parts.stageAndRound(b, loc, op.getIndex());
  waitUntilFree(b, loc, parts, op.getIndex(), stage, round);
  MemRefType buf = parts.type.getBuffer();
  int64_t bytes =
      buf.getNumElements() * buf.getElementType().getIntOrFloatBitWidth() / 8;
  nvgpu::MBarrierArriveExpectTxOp::create(
      b, loc, parts.full, parts.idx(b, loc, bytes), stage, Value());
  Value dst = parts.buffer(b, loc, stage);
  int64_t boxes = op.getNumBoxes();
  MemRefType boxType = op.getMap().getType().getTensor();
  if (parts.type.getBuffer().getRank() == boxType.getRank()) {
    nvgpu::TmaAsyncLoadOp::create(b, loc, dst, parts.full, op.getMap(),
                                  op.getCoordinates(), stage, Value(), Value());
    op.erase();
    return;
  }
  // A sequence of boxes (possibly of one): box p is the buffer's leading
  // slice p, p box widths further along the innermost coordinate.
  auto stageType = cast<MemRefType>(dst.getType());
  auto [strides, offset] = stageType.getStridesAndOffset();
  auto boxView = MemRefType::get(
      boxType.getShape(), boxType.getElementType(),
      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic,
                             ArrayRef<int64_t>(strides).drop_front()),
      boxType.getMemorySpace());
  int64_t width = boxType.getShape().back();
  for (int64_t p = 0; p < boxes; ++p) {
    SmallVector<OpFoldResult> offsets(stageType.getRank(), b.getIndexAttr(0));
    offsets[0] = b.getIndexAttr(p);
    SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1)};
    for (int64_t d : boxType.getShape())
      sizes.push_back(b.getIndexAttr(d));
    SmallVector<OpFoldResult> ones(stageType.getRank(), b.getIndexAttr(1));
    Value box =
        memref::SubViewOp::create(b, loc, boxView, dst, offsets, sizes, ones);
    SmallVector<Value> coords(op.getCoordinates());
    coords[0] =
        arith::AddIOp::create(b, loc, coords[0], parts.idx(b, loc, p * width));
    nvgpu::TmaAsyncLoadOp::create(b, loc, box, parts.full, op.getMap(), coords,
                                  stage, Value(), Value());
  }
  op.erase();
}

void lowerGet(ChannelGetOp op, const ChannelParts &parts) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto [stage, round] = parts.stageAndRound(b, loc, op.getIndex());
  parts.wait(b, loc, parts.full, stage, round);
  op.replaceAllUsesWith(parts.buffer(b, loc, stage));
  op.erase();
}

void lowerRelease(ChannelReleaseOp op, const ChannelParts &parts) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value stage = parts.stageAndRound(b, loc, op.getIndex()).first;
  nvgpu::MBarrierArriveOp::create(b, loc,
                                  nvgpu::MBarrierTokenType::get(b.getContext()),
                                  parts.empty, stage);
  op.erase();
}

struct FALowerChannelsPass
    : fa::impl::FALowerChannelsBase<FALowerChannelsPass> {
  void runOnOperation() override {
    SmallVector<ChannelCreateOp> creates;
    getOperation()->walk([&](ChannelCreateOp op) { creates.push_back(op); });
    for (ChannelCreateOp create : creates) {
      ChannelParts parts = createChannel(create);
      for (Operation *user :
           llvm::make_early_inc_range(create.getChannel().getUsers())) {
        if (auto put = dyn_cast<ChannelPutTmaOp>(user))
          lowerPut(put, parts);
        else if (auto get = dyn_cast<ChannelGetOp>(user))
          lowerGet(get, parts);
        else if (auto release = dyn_cast<ChannelReleaseOp>(user))
          lowerRelease(release, parts);
        else if (auto acquire = dyn_cast<ChannelAcquireOp>(user))
          lowerAcquire(acquire, parts);
        else if (auto signal = dyn_cast<ChannelSignalOp>(user))
          lowerSignal(signal, parts);
        else {
          user->emitOpError("uses a channel; fa-lower-channels lowers only "
                            "fagpu channel ops");
          return signalPassFailure();
        }
      }
      create.erase();
    }
  }
};

} // namespace
