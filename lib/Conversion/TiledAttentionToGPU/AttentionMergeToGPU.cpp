//===- AttentionMergeToGPU.cpp - Split-KV merge as a GPU kernel -----------===//
//
// fa.attention_merge_splits over workspace memrefs -> one gpu.launch:
//
//   grid  = (N, H, B), one thread block per row (b, h, n)
//   block = Dv threads, thread d owns column d of out
//
//   m   = max over s of the finite lse[b, h S + s, n]      (-inf if none)
//   sum = sum_s exp(lse_s - m),  acc = sum_s exp(lse_s - m) out_s[d]
//   out[b, h, n, d] = acc / sum,  lse[b, h, n] = m + log(sum)  (thread 0)
//
// in base 2 (exp2 / log2 with log2(e) and ln(2) factors, as the forward's
// epilogue). S is the workspace's head count over H. The partials are a few
// KiB per row (decoding), read once; the lse loads are per-row broadcasts.
//
//===----------------------------------------------------------------------===//

#include "fa/Conversion/TiledAttentionToGPU/TiledAttentionToGPU.h"

#include "fa/Dialect/FA/IR/FAOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <limits>

namespace mlir::fa {
#define GEN_PASS_DEF_FACONVERTATTENTIONMERGETOGPU
#include "fa/Conversion/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// The workspace memref `[B, H * S, ...]` a stacked partial `[B, H, S, ...]`
/// reads (through to_tensor and expand_shape).
Value partialBuffer(Value stacked) {
  auto expand = stacked.getDefiningOp<tensor::ExpandShapeOp>();
  if (!expand)
    return nullptr;
  SmallVector<ReassociationIndices> reassoc = expand.getReassociationIndices();
  if (reassoc.size() < 2 || reassoc[0] != ReassociationIndices{0} ||
      reassoc[1] != ReassociationIndices{1, 2})
    return nullptr;
  for (size_t i = 2; i < reassoc.size(); ++i)
    if (reassoc[i].size() != 1)
      return nullptr;
  auto toTensor = expand.getSrc().getDefiningOp<bufferization::ToTensorOp>();
  if (!toTensor || !isa<MemRefType>(toTensor.getBuffer().getType()))
    return nullptr;
  return toTensor.getBuffer();
}

/// The memref `result` is materialized into, and that op.
std::pair<Value, Operation *> storedTo(Value result) {
  if (!result.hasOneUse())
    return {};
  auto store = dyn_cast<bufferization::MaterializeInDestinationOp>(
      *result.getUsers().begin());
  if (!store || !isa<MemRefType>(store.getDest().getType()))
    return {};
  return {store.getDest(), store};
}

LogicalResult convertMerge(RewriterBase &rw, AttentionMergeSplitsOp op) {
  Value parts = partialBuffer(op.getOuts());
  Value partLses = partialBuffer(op.getLses());
  auto [out, outStore] = storedTo(op.getOut());
  auto [lse, lseStore] = storedTo(op.getLse());
  if (!parts || !partLses || !out || !lse)
    return op.emitError("fa-convert-attention-merge-to-gpu: expected partials "
                        "read from memrefs [B, H * S, ...] (bufferization."
                        "to_tensor, tensor.expand_shape) and results "
                        "materialized into memrefs");
  int64_t dv = op.getOuts().getType().getDimSize(4);
  if (ShapedType::isDynamic(dv) || dv > 1024)
    return op.emitError("fa-convert-attention-merge-to-gpu: the value head "
                        "dim must be static and at most 1024 (a thread per "
                        "column), got ")
           << dv;

  Location loc = op.getLoc();
  rw.setInsertionPoint(op);
  auto idx = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(rw, loc, v);
  };
  Value batch = memref::DimOp::create(rw, loc, out, 0);
  Value heads = memref::DimOp::create(rw, loc, out, 1);
  Value rows = memref::DimOp::create(rw, loc, out, 2);
  Value one = idx(1);
  // Outlined into the module of the function's attention kernel (its
  // default name), so that one binary holds both.
  auto func = op->getParentOfType<FunctionOpInterface>();
  std::string prefix = func ? func.getName().str() : "fa";
  auto launch = gpu::LaunchOp::create(
      rw, loc, rows, heads, batch, idx(dv), one, one, nullptr, nullptr, {}, {},
      {}, nullptr, nullptr, nullptr,
      FlatSymbolRefAttr::get(rw.getContext(), prefix + "_kernel"),
      FlatSymbolRefAttr::get(rw.getContext(), prefix + "_merge_kernel"));
  OpBuilder b = OpBuilder::atBlockBegin(&launch.getBody().front());
  Value n = launch.getBlockIds().x, h = launch.getBlockIds().y,
        bi = launch.getBlockIds().z, d = launch.getThreadIds().x;
  auto f32c = [&](double v) -> Value {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  };
  const double inf = std::numeric_limits<double>::infinity();
  Value hk = memref::DimOp::create(b, loc, out, 1);
  Value splits = arith::DivUIOp::create(
      b, loc, memref::DimOp::create(b, loc, parts, 1), hk);
  Value head0 = arith::MulIOp::create(b, loc, h, splits);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value step = arith::ConstantIndexOp::create(b, loc, 1);
  Value posInf = f32c(inf), negInf = f32c(-inf);
  auto lseAt = [&](OpBuilder &nb, Value s) -> Value {
    Value l = memref::LoadOp::create(
        nb, loc, partLses,
        ValueRange{bi, arith::AddIOp::create(nb, loc, head0, s), n});
    // +inf (no key seen) weighs nothing.
    Value seen =
        arith::CmpFOp::create(nb, loc, arith::CmpFPredicate::ONE, l, posInf);
    return arith::SelectOp::create(nb, loc, seen, l, negInf);
  };
  auto maxLoop = scf::ForOp::create(
      b, loc, zero, splits, step, ValueRange{negInf},
      [&](OpBuilder &nb, Location, Value s, ValueRange it) {
        scf::YieldOp::create(
            nb, loc,
            ValueRange{arith::MaximumFOp::create(nb, loc, it[0], lseAt(nb, s))
                           .getResult()});
      });
  Value mx = maxLoop.getResult(0);
  Value none =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, mx, negInf);
  Value log2e = f32c(1.4426950408889634);
  // max * log2(e), 0 when no split saw the row (every weight is then 0).
  Value mx2 = arith::SelectOp::create(b, loc, none, f32c(0.0),
                                      arith::MulFOp::create(b, loc, mx, log2e));
  auto sumLoop = scf::ForOp::create(
      b, loc, zero, splits, step, ValueRange{f32c(0.0), f32c(0.0)},
      [&](OpBuilder &nb, Location, Value s, ValueRange it) {
        Value w = math::Exp2Op::create(
            nb, loc,
            arith::SubFOp::create(
                nb, loc, arith::MulFOp::create(nb, loc, lseAt(nb, s), log2e),
                mx2));
        Value o = memref::LoadOp::create(
            nb, loc, parts,
            ValueRange{bi, arith::AddIOp::create(nb, loc, head0, s), n, d});
        scf::YieldOp::create(
            nb, loc,
            ValueRange{arith::AddFOp::create(nb, loc, it[0], w),
                       math::FmaOp::create(nb, loc, w, o, it[1])});
      });
  Value sum = sumLoop.getResult(0), acc = sumLoop.getResult(1);
  Value value = arith::SelectOp::create(
      b, loc, none, f32c(0.0), arith::DivFOp::create(b, loc, acc, sum));
  Type elt = cast<MemRefType>(out.getType()).getElementType();
  if (elt != value.getType())
    value = arith::TruncFOp::create(b, loc, elt, value);
  memref::StoreOp::create(b, loc, value, out, ValueRange{bi, h, n, d});
  auto first = scf::IfOp::create(
      b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, d, zero),
      false);
  b.setInsertionPointToStart(first.thenBlock());
  Value l = arith::MulFOp::create(
      b, loc, f32c(0.6931471805599453),
      arith::AddFOp::create(b, loc, mx2, math::Log2Op::create(b, loc, sum)));
  memref::StoreOp::create(b, loc,
                          arith::SelectOp::create(b, loc, none, posInf, l), lse,
                          ValueRange{bi, h, n});
  b.setInsertionPointToEnd(&launch.getBody().front());
  gpu::TerminatorOp::create(b, loc);

  rw.eraseOp(outStore);
  rw.eraseOp(lseStore);
  rw.eraseOp(op);
  return success();
}

struct FAConvertAttentionMergeToGPUPass final
    : fa::impl::FAConvertAttentionMergeToGPUBase<
          FAConvertAttentionMergeToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<AttentionMergeSplitsOp> merges;
    getOperation()->walk(
        [&](AttentionMergeSplitsOp op) { merges.push_back(op); });
    IRRewriter rw(&getContext());
    for (AttentionMergeSplitsOp op : merges)
      if (failed(convertMerge(rw, op)))
        return signalPassFailure();
  }
};

} // namespace
