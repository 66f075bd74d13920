//===- TiledAttentionToGPU.cpp - Tiled attention to a GPU kernel ----------===//
//
// Maps the query-block loop nest of `fa-tile-attention` (after
// `fa-specialize-masks` / `fa-use-exp2`) onto one `gpu.launch` that runs the
// FlashAttention-2 forward with tensor-core mma.sync (sm_80 and later), or,
// with `wgmma`, with Hopper warpgroup MMAs on 128-byte swizzled tiles (same
// mapping and softmax; see docs/GPU.md):
//
//   grid  = (ceil(Nq / Br), Hq, B), one thread block per query block
//   block = 32 * warps threads; warp w owns query rows [w * Br/warps, ...)
//
//   smem: Q [Br, D] | K [stages x Bc, D] | V [stages x Bc, Dv]  (cp.async)
//   prologue: copy Q and the first K/V block; Q -> registers (if it fits)
//   for each key loop of the input (masked / unmasked / masked):
//     for kStart in [lb, ub) step Bc:
//       wait for block kStart, barrier, start copying block kStart + Bc
//       S = Q K^T (mma.sync m16n8k16, f32 accumulators)
//       [mask], online softmax on the fragments (quad shuffles, exp2)
//       O = alpha * O + P V (P reused from the S fragments, in registers)
//   O /= rowsum, LSE = ln2 * (m + log2(rowsum)), guarded stores
//
// The run-time bounds of the key loops and every index the tiled IR computes
// from (b, h, qBlock) are cloned into the kernel, with the forall's induction
// variables mapped to the block ids, so the kernel visits exactly the key
// blocks the tiled IR does. The softmax always runs in base 2 internally (the
// running max never leaves the kernel), which is exact whether or not the
// input carries the `exp2` form.
//
//===----------------------------------------------------------------------===//

#include "fa/Conversion/TiledAttentionToGPU/TiledAttentionToGPU.h"

#include "BlockMapping.h"
#include "KernelSupport.h"
#include "fa/Dialect/FAGPU/IR/FAGPU.h"

#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FA/IR/KernelResources.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

namespace mlir::fa {
#define GEN_PASS_DEF_FACONVERTTILEDATTENTIONTOGPU
#include "fa/Conversion/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::detail;

namespace {

using fagpu::kWarpgroupThreads;
/// The named barriers of the consumers: 1 for all of them (0 is the
/// block's), kTurnBarrier + w for consumer warpgroup w's turn (ping-pong),
/// kStoreBarrier + w for warpgroup w's O staging (TMA-store epilogue).
constexpr int64_t kTurnBarrier = 2;
constexpr int64_t kStoreBarrier = 8;
/// Query rows of one consumer warpgroup (wgmma's M).
constexpr int64_t kWarpgroupRows = 64;

//===----------------------------------------------------------------------===//
// Matching the tiled IR
//===----------------------------------------------------------------------===//

/// Where a [rows, D] tile of the tiled IR comes from: rows from
/// `offsets[2]` on of head `offsets[1]` in batch `offsets[0]` of `memref`
/// ([B, H, N, D]), or of head `offsets[1]` of a packed [H, T, D] memref
/// (`offsets[0]` is 0 then).
struct TileSource {
  Value memref;
  SmallVector<OpFoldResult, 3> offsets;
  /// Key tiles of packed sequences: rows `rowBase + iv` of the key loop's
  /// induction variable (the sequence's first row, loop-invariant).
  OpFoldResult rowBase;
  /// Key tiles of a paged cache (fa.paged_key_block): key j of sequence
  /// `offsets[0]` is row `j mod pageSize` of page `pageTable[offsets[0], j /
  /// pageSize]` of `memref` ([P, Hkv, S, D]). A block spans pages when
  /// pageSize is not a multiple of its rows.
  int64_t pageSize = 0;
  /// The page table's memref (paged).
  Value pageTable;
  /// The slice's rows (the tile's rows past them are zeros).
  OpFoldResult rows;
  /// Packed or paged key tiles: the key count L of the slice's rows
  /// min(L - iv, Bc), past which the copies zero-fill (the sequence's keys
  /// end there, not at the memref's).
  Value rowLimit;

  int64_t rank() const { return cast<MemRefType>(memref.getType()).getRank(); }
  /// The row dimension of `memref`.
  unsigned rowDim() const { return rank() - 2; }
};

/// Follows a (zero-padded) slice of a `bufferization.to_tensor` back to the
/// memref. Padding needs no code: the copies zero-fill rows past the end.
FailureOr<TileSource> traceTile(Value tile) {
  if (auto pad = tile.getDefiningOp<tensor::PadOp>()) {
    Value padValue = pad.getConstantPaddingValue();
    if (!padValue || !matchPattern(padValue, m_AnyZeroFloat()) ||
        !llvm::all_of(pad.getMixedLowPad(), isZeroInteger))
      return failure();
    tile = pad.getSource();
  }
  auto slice = tile.getDefiningOp<tensor::ExtractSliceOp>();
  if (!slice || !slice.hasUnitStride())
    return failure();
  int64_t rank = slice.getSourceType().getRank();
  if (rank != 3 && rank != 4)
    return failure();
  auto toTensor = slice.getSource().getDefiningOp<bufferization::ToTensorOp>();
  if (!toTensor || !isa<MemRefType>(toTensor.getBuffer().getType()))
    return failure();
  SmallVector<OpFoldResult> offsets = slice.getMixedOffsets();
  SmallVector<OpFoldResult> sizes = slice.getMixedSizes();
  if (!isZeroInteger(offsets[rank - 1]) ||
      !llvm::all_of(ArrayRef(sizes).take_front(rank - 2), isOneInteger) ||
      getConstantIntValue(sizes[rank - 1]) !=
          slice.getSourceType().getDimSize(rank - 1))
    return failure();
  if (rank == 3)
    offsets.insert(offsets.begin(), OpBuilder(slice).getIndexAttr(0));
  TileSource src{toTensor.getBuffer(),
                 {offsets[0], offsets[1], offsets[2]},
                 OpBuilder(slice).getIndexAttr(0)};
  src.rows = sizes[rank - 2];
  return src;
}

/// How a key loop decides its mask_mod per block (fa-specialize-masks's
/// nest of scf.if over the block verdicts): a node tests `cond` (a value of
/// the loop body) and goes on to node `then` or `otherwise`; a leaf says
/// whether the block runs with the mask_mod. A block the nest skips runs
/// with it too: it hides every key then, leaving the state as skipping
/// does.
struct VerdictNode {
  Value cond;
  int then = -1, otherwise = -1;
  bool withMaskMod = false;
};

/// One key loop of a query block: `scf.for` threading (acc, max, sum)
/// through a single `fa.online_attention`, or through a mask_mod's steps
/// under its block verdicts (with and without the mask_mod, otherwise
/// alike).
struct KeyLoop {
  scf::ForOp loop;
  /// The step the kernel computes: the one with the mask_mod if any.
  OnlineAttentionOp step;
  /// The verdict nest (node 0 the root); empty: `step` everywhere.
  SmallVector<VerdictNode> verdict;
};

/// Parses the block of a key loop or of one of its verdict's scf.if
/// branches into `kl.verdict`: the node index, or -1 on a shape that is not
/// fa-specialize-masks's.
int parseVerdict(Block &block, KeyLoop &kl, OnlineAttentionOp &withMod,
                 OnlineAttentionOp &without) {
  ValueRange state = kl.loop.getRegionIterArgs();
  Operation *last = nullptr;
  for (Operation &op : block.without_terminator()) {
    if (isa<OnlineAttentionOp, scf::IfOp>(op)) {
      if (last)
        return -1;
      last = &op;
    } else if (!isMemoryEffectFree(&op)) {
      // (The block's tiles and verdict arithmetic only.)
      return -1;
    }
  }
  ValueRange yielded = block.getTerminator()->getOperands();
  int index = kl.verdict.size();
  kl.verdict.emplace_back();
  if (!last) {
    // Skipped: the state passes through.
    if (yielded != state)
      return -1;
    kl.verdict[index].withMaskMod = true;
    return index;
  }
  if (yielded != ValueRange(last->getResults()))
    return -1;
  if (auto step = dyn_cast<OnlineAttentionOp>(last)) {
    if (ValueRange{step.getAcc(), step.getMax(), step.getSum()} != state)
      return -1;
    OnlineAttentionOp &slot = step.hasMaskMod() ? withMod : without;
    if (slot && slot != step)
      return -1;
    slot = step;
    kl.verdict[index].withMaskMod = step.hasMaskMod();
    return index;
  }
  auto ifOp = cast<scf::IfOp>(last);
  if (ifOp.getElseRegion().empty())
    return -1;
  kl.verdict[index].cond = ifOp.getCondition();
  int then = parseVerdict(ifOp.getThenRegion().front(), kl, withMod, without);
  if (then < 0)
    return -1;
  int otherwise =
      parseVerdict(ifOp.getElseRegion().front(), kl, withMod, without);
  if (otherwise < 0)
    return -1;
  kl.verdict[index].then = then;
  kl.verdict[index].otherwise = otherwise;
  return index;
}

/// Whether `a` and `b` are the same step up to b's lacking the mask_mod.
bool sameStepButMaskMod(OnlineAttentionOp a, OnlineAttentionOp b) {
  return a.getQuery() == b.getQuery() && a.getKey() == b.getKey() &&
         a.getValue() == b.getValue() && a.getQStart() == b.getQStart() &&
         a.getKStart() == b.getKStart() && a.getQLen() == b.getQLen() &&
         a.getKLen() == b.getKLen() && a.getMaskAttr() == b.getMaskAttr() &&
         a.getMaskOperands() == b.getMaskOperands() &&
         a.getScoreScalars() == b.getScoreScalars() &&
         a.hasScoreMod() == b.hasScoreMod() && !b.hasMaskMod();
}

/// Everything the kernel needs from one tiled-attention `scf.forall`.
struct TiledAttention {
  scf::ForallOp forall;
  /// The block id of each of the forall's induction variables.
  SmallVector<gpu::Dimension> blockDims;
  TileSource q, k, v;
  SmallVector<KeyLoop> loops;
  Value out, lse;
  /// out and lse are packed ([H, T, Dv] and [H, T]): no batch index.
  bool packedOut = false;
  SmallVector<OpFoldResult> outOffsets, lseOffsets;
  /// Valid rows of the query block: min(Br, Nq - qStart).
  OpFoldResult rows;
  SmallVector<Operation *> stores;
};

/// True when `v` can be recomputed inside the kernel from the block ids and
/// values defined above the forall (index arithmetic, dims, constants, and
/// elements of memref-backed tensors: the packed forms' offsets and page
/// tables), and from `loopIV` when given (a key loop's).
bool isClonable(Value v, scf::ForallOp forall, Value loopIV = {}) {
  if (llvm::is_contained(forall.getInductionVars(), v) || v == loopIV)
    return true;
  Operation *def = v.getDefiningOp();
  if (!def)
    return !forall->isAncestor(v.getParentBlock()->getParentOp());
  auto operandsClonable = [&](ValueRange operands) {
    return llvm::all_of(operands, [&](Value operand) {
      return isClonable(operand, forall, loopIV);
    });
  };
  if (auto dim = dyn_cast<tensor::DimOp>(def))
    if (dim.getSource().getDefiningOp<bufferization::ToTensorOp>())
      return isClonable(dim.getIndex(), forall, loopIV);
  if (auto extract = dyn_cast<tensor::ExtractOp>(def))
    return extract.getTensor().getDefiningOp<bufferization::ToTensorOp>() &&
           operandsClonable(extract.getIndices());
  if (auto scan = dyn_cast<scf::ForOp>(def)) {
    // (fa-specialize-masks's scan of a mask_mod's block verdicts.)
    if (!NestCloner::isScalarLoop(scan))
      return false;
    bool clonable = true;
    scan.walk([&](Operation *op) {
      for (Value operand : op->getOperands())
        if (!scan->isAncestor(operand.getParentRegion()->getParentOp()))
          clonable &= isClonable(operand, forall, loopIV);
    });
    return clonable;
  }
  if (def->getNumRegions() != 0 || !isMemoryEffectFree(def))
    return false;
  return operandsClonable(def->getOperands());
}

bool isClonable(OpFoldResult ofr, scf::ForallOp forall, Value loopIV = {}) {
  auto v = dyn_cast<Value>(ofr);
  return !v || isClonable(v, forall, loopIV);
}

/// The TileSource of a paged key block of `loop`: rows from the loop's
/// induction variable on, the batch, head and limit loop-invariant.
FailureOr<TileSource> tracePagedKeyBlock(PagedKeyBlockOp op, scf::ForOp loop,
                                         scf::ForallOp forall) {
  auto pages = op.getPages().getDefiningOp<bufferization::ToTensorOp>();
  auto table = op.getPageTable().getDefiningOp<bufferization::ToTensorOp>();
  if (!pages || !table || !isa<MemRefType>(pages.getBuffer().getType()) ||
      !isa<MemRefType>(table.getBuffer().getType()) ||
      op.getStart() != loop.getInductionVar())
    return failure();
  for (Value v : {op.getBatch(), op.getHead(), op.getLimit()})
    if (!loop.isDefinedOutsideOfLoop(v) || !isClonable(v, forall))
      return failure();
  TileSource src;
  src.memref = pages.getBuffer();
  src.offsets = {op.getBatch(), op.getHead(), op.getStart()};
  src.rowBase = OpBuilder(op).getIndexAttr(0);
  src.pageSize = op.getPageSize();
  src.pageTable = table.getBuffer();
  src.rowLimit = op.getLimit();
  return src;
}

/// Matches the tile of a key loop's K or V: the same head rows as the other
/// loops, starting at the loop's induction variable (dense), at a
/// loop-invariant row base plus it (packed), or a fa.paged_key_block from it
/// (paged).
LogicalResult matchKeyTile(Value tile, scf::ForOp loop, scf::ForallOp forall,
                           std::optional<TileSource> &expected) {
  Value iv = loop.getInductionVar();
  auto invariant = [&](OpFoldResult ofr) {
    auto v = dyn_cast<Value>(ofr);
    return !v || loop.isDefinedOutsideOfLoop(v);
  };
  FailureOr<TileSource> src = failure();
  if (auto paged = tile.getDefiningOp<PagedKeyBlockOp>())
    src = tracePagedKeyBlock(paged, loop, forall);
  else
    src = traceTile(tile);
  if (failed(src))
    return failure();
  if (src->pageSize) {
    // Each key loop's blocks start at its own induction variable.
    if (expected && !(expected->memref == src->memref &&
                      expected->pageTable == src->pageTable &&
                      expected->pageSize == src->pageSize &&
                      expected->offsets[0] == src->offsets[0] &&
                      expected->offsets[1] == src->offsets[1] &&
                      expected->rowLimit == src->rowLimit))
      return failure();
    if (!expected)
      expected = *src;
    return success();
  }
  OpFoldResult row = src->offsets[2];
  auto rowValue = dyn_cast<Value>(row);
  Operation *rowDef = rowValue ? rowValue.getDefiningOp() : nullptr;
  if (row == OpFoldResult(iv)) {
    // Dense.
  } else if (auto add = dyn_cast_or_null<arith::AddIOp>(rowDef)) {
    Value base = add.getLhs() == iv ? add.getRhs() : add.getLhs();
    if ((add.getLhs() != iv && add.getRhs() != iv) || !invariant(base))
      return failure();
    src->rowBase = base;
  } else {
    return failure();
  }
  if (!invariant(src->offsets[1]) || !invariant(src->offsets[0]))
    return failure();
  if (!isZeroInteger(src->rowBase)) {
    // rows = min(L - iv, Bc), L loop-invariant.
    auto rows = dyn_cast<Value>(src->rows);
    auto min = rows ? rows.getDefiningOp<arith::MinSIOp>() : nullptr;
    int64_t bc = cast<RankedTensorType>(tile.getType()).getDimSize(0);
    if (!min)
      return failure();
    for (auto [x, y] : {std::pair(min.getLhs(), min.getRhs()),
                        std::pair(min.getRhs(), min.getLhs())}) {
      auto sub = x.getDefiningOp<arith::SubIOp>();
      if (sub && sub.getRhs() == iv && getConstantIntValue(y) == bc &&
          loop.isDefinedOutsideOfLoop(sub.getLhs()))
        src->rowLimit = sub.getLhs();
    }
    if (!src->rowLimit)
      return failure();
  }
  if (!expected) {
    expected = *src;
    return success();
  }
  return success(expected->memref == src->memref && !expected->pageSize &&
                 expected->offsets[0] == src->offsets[0] &&
                 expected->offsets[1] == src->offsets[1] &&
                 expected->rowBase == src->rowBase &&
                 expected->rowLimit == src->rowLimit);
}

FailureOr<TiledAttention> matchTiledAttention(scf::ForallOp forall) {
  auto fail = [&](const Twine &why) -> FailureOr<TiledAttention> {
    forall.emitError("fa-convert-tiled-attention-to-gpu: ") << why;
    return failure();
  };
  TiledAttention ta;
  ta.forall = forall;
  if (!forall.isNormalized() || forall.getNumResults() != 2)
    return fail("expected a normalized scf.forall with 2 results");
  FailureOr<SmallVector<gpu::Dimension>> blockDims = getBlockDims(
      forall, {gpu::Dimension::z, gpu::Dimension::y, gpu::Dimension::x});
  if (failed(blockDims))
    return fail("expected a mapping of distinct #gpu.block<x|y|z>, or none "
                "on a 3-d scf.forall over (batch, head, query block)");
  ta.blockDims = *blockDims;

  std::optional<TileSource> k, v;
  OnlineAttentionFinalizeOp finalize;
  for (Operation &op : forall.getBody()->without_terminator()) {
    if (auto fin = dyn_cast<OnlineAttentionFinalizeOp>(op)) {
      finalize = fin;
      continue;
    }
    auto loop = dyn_cast<scf::ForOp>(op);
    // (A loop of index arithmetic, such as a mask_mod's key-range scan, is
    // cloned where its results are used.)
    if (!loop || NestCloner::isScalarLoop(loop))
      continue;
    KeyLoop kl{loop, {}, {}};
    OnlineAttentionOp withMod, without;
    if (loop.getNumRegionIterArgs() != 3 ||
        parseVerdict(*loop.getBody(), kl, withMod, without) != 0)
      return fail("a key loop may only thread (acc, max, sum) through one "
                  "fa.online_attention, or through a mask_mod's steps under "
                  "its block verdict (fa-specialize-masks)");
    if (withMod && without && !sameStepButMaskMod(withMod, without))
      return fail("the steps of a mask_mod's block verdict must differ in "
                  "the mask_mod only");
    OnlineAttentionOp step = withMod ? withMod : without;
    kl.step = step;
    // A single step needs no verdict; a skipped block needs the step with
    // the mask_mod (which then hides every key).
    if (!kl.verdict.front().cond)
      kl.verdict.clear();
    else if (!withMod)
      return fail("a mask_mod's block verdict skips blocks but has no step "
                  "with the mask_mod");
    for (const VerdictNode &node : kl.verdict)
      if (node.cond && !isClonable(node.cond, forall, loop.getInductionVar()))
        return fail("a block verdict of the mask_mod cannot be recomputed in "
                    "the kernel");
    if (step.hasModifiers()) {
      if (!step.isMasked())
        return fail("a step with score_mod or mask_mod needs its positions");
      for (Value capture : step.getCaptures()) {
        auto toTensor = capture.getDefiningOp<bufferization::ToTensorOp>();
        if (!toTensor || !isa<MemRefType>(toTensor.getBuffer().getType()))
          return fail("the captures of score_mod and mask_mod must be "
                      "memrefs (through bufferization.to_tensor)");
      }
      for (Region *region : {&step.getScoreMod(), &step.getMaskMod()})
        if (!region->empty())
          if (Operation *op = ModifierInliner::findUnsupported(*region))
            return fail(Twine("the kernels inline arith and math ops and "
                              "reads of the captures (tensor.extract, "
                              "tensor.dim) in score_mod and mask_mod, not ") +
                        op->getName().getStringRef());
    }
    if (step.isMasked() && step.getKStart() != loop.getInductionVar())
      return fail("the masked step must start at the loop's key offset");
    if (failed(matchKeyTile(step.getKey(), loop, forall, k)) ||
        failed(matchKeyTile(step.getValue(), loop, forall, v)))
      return fail("K/V tiles must be slices of memrefs (through "
                  "bufferization.to_tensor) at the loop's key offset");
    if (!ta.loops.empty()) {
      KeyLoop &prev = ta.loops.back();
      if (loop.getInitArgs() != ValueRange(prev.loop.getResults()) ||
          loop.getLowerBound() != prev.loop.getUpperBound() ||
          step.getQuery() != prev.step.getQuery() ||
          !(step.getScoreScalars() == prev.step.getScoreScalars()) ||
          step.hasScoreMod() != prev.step.hasScoreMod() ||
          step.getCaptures() != prev.step.getCaptures())
        return fail("key loops must run back to back over the same query "
                    "tile and state");
    }
    ta.loops.push_back(std::move(kl));
  }
  if (ta.loops.empty() || !finalize ||
      ValueRange(finalize->getOperands()) !=
          ValueRange(ta.loops.back().loop.getResults()))
    return fail("expected key loops followed by fa.online_attention_finalize");
  ta.k = *k;
  ta.v = *v;
  if (ta.k.rowBase != ta.v.rowBase || ta.k.rowLimit != ta.v.rowLimit ||
      ta.k.pageSize != ta.v.pageSize || ta.k.pageTable != ta.v.pageTable ||
      ta.k.offsets[0] != ta.v.offsets[0])
    return fail("K and V tiles must cover the same rows of the same "
                "sequences");

  FailureOr<TileSource> q = traceTile(ta.loops.front().step.getQuery());
  if (failed(q))
    return fail("the Q tile must be a slice of a memref (through "
                "bufferization.to_tensor)");
  ta.q = *q;

  // Results: parallel_insert_slice of the finalized rows into the shared
  // outputs, which are materialized into memrefs after the loop nest.
  for (Operation &op : forall.getTerminator().getYieldingOps()) {
    auto insert = dyn_cast<tensor::ParallelInsertSliceOp>(op);
    if (!insert)
      return fail("unexpected op in scf.forall.in_parallel");
    auto dest = dyn_cast<BlockArgument>(insert.getDest());
    auto outArgs = forall.getRegionOutArgs();
    auto it = llvm::find(outArgs, dest);
    if (it == outArgs.end())
      return fail("parallel_insert_slice must write a shared output");
    OpResult result = forall->getResult(std::distance(outArgs.begin(), it));
    auto store = result.hasOneUse()
                     ? dyn_cast<bufferization::MaterializeInDestinationOp>(
                           *result.getUsers().begin())
                     : nullptr;
    if (!store || !isa<MemRefType>(store.getDest().getType()))
      return fail("forall results must be materialized into memrefs");
    Value src = insert.getSource();
    if (auto slice = src.getDefiningOp<tensor::ExtractSliceOp>())
      if (llvm::all_of(slice.getMixedOffsets(), isZeroInteger))
        src = slice.getSource();
    SmallVector<OpFoldResult> offsets = insert.getMixedOffsets();
    SmallVector<OpFoldResult> sizes = insert.getMixedSizes();
    // out [B, H, N, Dv] or packed [H, T, Dv]; lse [B, H, N] or [H, T].
    bool isOut = src == finalize.getOut();
    int64_t rank = sizes.size();
    int64_t rowDim = isOut ? rank - 2 : rank - 1;
    if (!insert.hasUnitStride() || rowDim < 1 || rowDim > 2 ||
        !llvm::all_of(ArrayRef(sizes).take_front(rowDim), isOneInteger) ||
        (isOut && !isZeroInteger(offsets[rank - 1])))
      return fail("unexpected result slice");
    bool packed = rowDim == 1;
    if (packed)
      offsets.insert(offsets.begin(), OpBuilder(insert).getIndexAttr(0));
    offsets.resize(3);
    if (isOut) {
      ta.out = store.getDest();
      ta.outOffsets = offsets;
      ta.rows = sizes[rowDim];
      ta.packedOut = packed;
    } else if (src == finalize.getLse()) {
      ta.lse = store.getDest();
      ta.lseOffsets = offsets;
    } else {
      return fail("results must be slices of the finalized out and lse");
    }
    ta.stores.push_back(store);
  }
  if (!ta.out || !ta.lse)
    return fail("expected both out and lse to be stored");
  bool packedQ = ta.q.rank() == 3;
  if (packedQ != ta.packedOut || (ta.k.rank() == 3) != packedQ ||
      (ta.v.rank() == 3) != packedQ)
    return fail("q, k, v, out and lse must all be packed ([H, T, D]) or all "
                "batched ([B, H, N, D])");

  // Everything the kernel indexes with must be recomputable from the block
  // ids.
  SmallVector<OpFoldResult> needed;
  llvm::append_range(needed, ta.q.offsets);
  for (TileSource *src : {&ta.k, &ta.v}) {
    needed.append({src->offsets[0], src->offsets[1], src->rowBase});
    if (src->rowLimit)
      needed.push_back(src->rowLimit);
  }
  llvm::append_range(needed, ta.outOffsets);
  llvm::append_range(needed, ta.lseOffsets);
  needed.append({ta.rows, ta.q.rows});
  for (KeyLoop &kl : ta.loops) {
    needed.append({kl.loop.getLowerBound(), kl.loop.getUpperBound()});
    if (kl.step.isMasked())
      needed.append(
          {kl.step.getQStart(), kl.step.getQLen(), kl.step.getKLen()});
    if (kl.step.hasModifiers())
      needed.append({kl.step.getBatchIndex(), kl.step.getHeadIndex()});
  }
  for (OpFoldResult ofr : needed)
    if (!isClonable(ofr, forall))
      return fail("an index of the loop nest cannot be recomputed in the "
                  "kernel");
  return ta;
}

//===----------------------------------------------------------------------===//
// Kernel configuration
//===----------------------------------------------------------------------===//

struct KernelConfig {
  int64_t br, bc, d, dv, warps, stages;
  /// m16 row tiles per warp.
  int64_t mTiles;
  Type elt;
  /// Whether each warp keeps its Q fragments in registers for the whole key
  /// loop (else it reloads them from shared memory per block, as FA2 does
  /// for large head dims).
  bool qInRegs;
  /// Keys per online-softmax sub-step (divides bc).
  int64_t softmaxKeys;
  /// Scale and softcap: attributes, or run-time values that the kernel
  /// takes as parameters.
  ScoreScalars scalars;
  /// The mask of the masked steps and its operands (null when no step has
  /// one: no mask, or a key tail only).
  MaskAttrInterface mask;
  ValueRange maskOperands;
  /// Warpgroup MMAs (sm_90a) on 128-byte swizzled panels instead of
  /// mma.sync and ldmatrix.
  bool wgmma;
  /// A TMA producer warpgroup feeding the `warps / 4` consumer warpgroups
  /// through fagpu channels (docs/HOPPER.md); K and V stage-major.
  bool warpSpecialized = false;
  /// Warp-specialized schedule (docs/HOPPER.md): S(j) and P(j-1) V(j-1)
  /// issued together, the softmax of S(j) under the P V GEMM; and the
  /// consumer warpgroups taking turns at issuing (2 or 3 of them).
  bool overlap = false, pingPong = false;
  /// Warp-specialized: one thread block per multiprocessor, looping over
  /// the tiles (tile_scheduler = persistent or dynamic).
  bool persistent = false;
  /// Persistent, each block's next tile comes from an atomic counter (a
  /// workspace word the launcher zeroes), passed from the producer to the
  /// consumers in shared memory with the tile's Q (tile_scheduler =
  /// dynamic).
  bool dynamic = false;
  /// out is f32 (split-KV partials, fa-split-kv), not the input type.
  bool f32Out = false;
  /// The Q region (persistent: two buffers of qTileBytes), K and V stages,
  /// (persistent) O's staging tile for the TMA store after them and
  /// (dynamic) the tile index of each Q buffer.
  int64_t qBytes, kBytes, vBytes, qTileBytes, oBytes = 0, slotBytes = 0;

  /// The threads that compute (the consumers when warp-specialized).
  int64_t threads() const { return warps * kWarpSize; }
  int64_t launchThreads() const {
    return threads() + (warpSpecialized ? kWarpgroupThreads : 0);
  }
  /// wgmma tiles must start at 1024-byte boundaries (the swizzle pattern is
  /// taken from address bits 7-9): room to align the dynamic base.
  int64_t alignSlack() const { return wgmma ? kWgmmaAlignment : 0; }
  int64_t smemBytes() const {
    return qBytes + kBytes + vBytes + oBytes + slotBytes + alignSlack();
  }
};

FailureOr<KernelConfig>
getKernelConfig(TiledAttention &ta,
                const FAConvertTiledAttentionToGPUOptions &options) {
  auto fail = [&](const Twine &why) -> FailureOr<KernelConfig> {
    ta.forall.emitError("fa-convert-tiled-attention-to-gpu: ") << why;
    return failure();
  };
  OnlineAttentionOp step = ta.loops.front().step;
  auto qType = cast<RankedTensorType>(step.getQuery().getType());
  auto kType = cast<RankedTensorType>(step.getKey().getType());
  auto vType = cast<RankedTensorType>(step.getValue().getType());
  KernelConfig cfg;
  cfg.br = qType.getDimSize(0);
  cfg.d = qType.getDimSize(1);
  cfg.bc = kType.getDimSize(0);
  cfg.dv = vType.getDimSize(1);
  // The loop nest's kernel configuration (fa-select-kernel-config) decides;
  // the pass options serve IR without one.
  auto config =
      ta.forall->getAttrOfType<KernelConfigAttr>(kKernelConfigAttrName);
  cfg.warps = config ? config.getWarps() : options.warps;
  cfg.stages = config ? config.getStages() : options.stages;
  cfg.wgmma = config ? config.getMma() == MmaKind::Wgmma : options.wgmma;
  if (config && (config.getBlockQ() != cfg.br || config.getBlockKV() != cfg.bc))
    return fail(Twine("the tiles (") + Twine(cfg.br) + " x " + Twine(cfg.bc) +
                ") are not those of the kernel configuration (" +
                Twine(config.getBlockQ()) + " x " + Twine(config.getBlockKV()) +
                ")");
  cfg.elt = qType.getElementType();
  cfg.scalars = step.getScoreScalars();
  for (KeyLoop &kl : ta.loops)
    if (kl.step.isMasked() && kl.step.hasMaskRule()) {
      cfg.mask = kl.step.getMaskAttr();
      cfg.maskOperands = kl.step.getMaskOperands();
      break;
    }
  if (cfg.mask && !cfg.mask.isBand())
    return fail(Twine("the kernels compute band masks (causal, sliding "
                      "window), not ") +
                maskText(cfg.mask));

  if (!cfg.elt.isF16() && !cfg.elt.isBF16())
    return fail("mma.sync needs f16 or bf16 inputs");
  Type outElt = cast<MemRefType>(ta.out.getType()).getElementType();
  if (kType.getElementType() != cfg.elt || vType.getElementType() != cfg.elt ||
      (outElt != cfg.elt && !outElt.isF32()))
    return fail("q, k and v must share one element type, out that one or f32 "
                "(split-KV partials)");
  cfg.f32Out = outElt.isF32();
  if (cfg.stages != 1 && cfg.stages != 2)
    return fail("stages must be 1 or 2");
  if (cfg.warps < 1 || cfg.warps > kMaxWarpsPerBlock)
    return fail("warps must be in [1, " + Twine(kMaxWarpsPerBlock) + "], got " +
                Twine(cfg.warps));
  if (cfg.br % (16 * cfg.warps) != 0)
    return fail("block-q must be a multiple of 16 * warps");
  if (cfg.bc % 16 != 0 || cfg.d % 16 != 0 || cfg.dv % 16 != 0)
    return fail("block-kv and the head dims must be multiples of 16");
  for (KeyLoop &kl : ta.loops)
    if (getConstantIntValue(kl.loop.getStep()) != cfg.bc)
      return fail("key loops must step by whole key tiles");
  for (Value m : {ta.q.memref, ta.k.memref, ta.v.memref, ta.out})
    if (!cast<MemRefType>(m.getType()).isLastDimUnitStride())
      return fail("q, k, v and out rows must be contiguous");
  cfg.mTiles = cfg.br / (16 * cfg.warps);
  if (cfg.wgmma) {
    if (cfg.warps % 4 != 0)
      return fail("wgmma needs whole warpgroups: warps must be a multiple of "
                  "4");
    if (cfg.mTiles != 1)
      return fail("with wgmma each warp owns 16 query rows: block-q must be "
                  "16 * warps");
    if (cfg.bc > 256 || cfg.dv > 256)
      return fail("wgmma's N is at most 256: block-kv and the value head dim "
                  "must be at most 256");
  }
  cfg.warpSpecialized =
      config ? config.getSchedule() == KernelSchedule::WarpSpecialized
             : options.warpSpecialize;
  cfg.persistent = config && isPersistentScheduler(config.getTileScheduler());
  cfg.dynamic = config && config.getTileScheduler() == TileScheduler::Dynamic;
  cfg.overlap = cfg.warpSpecialized && options.intraWarpgroupOverlap;
  cfg.pingPong = cfg.overlap && options.pingPong && cfg.warps / 4 >= 2 &&
                 cfg.warps / 4 <= 3;
  // Packed sequences: TMA boxes from a sequence's first row (rows of the
  // next sequence in a box are masked; the persistent kernel stores O as TMA
  // boxes only for warpgroups whose rows all lie in the sequence, the rest
  // by guarded stores); a page's unused rows may hold anything: paged
  // caches take the cooperative kernel's copies.
  if (cfg.warpSpecialized && ta.k.pageSize)
    return fail("paged caches have cooperative kernels only (a TMA box of a "
                "page would read its unused rows)");
  if (cfg.persistent && cfg.f32Out)
    return fail("the persistent kernel's TMA store writes out in the input "
                "element type, not f32");
  if (cfg.persistent && !cfg.overlap)
    return fail("the persistent tile scheduler needs the overlapped "
                "warp-specialized schedule (intra-warpgroup-overlap)");
  if (cfg.warpSpecialized &&
      (!cfg.wgmma || cfg.d % TileLayout::kPanelCols != 0 ||
       cfg.dv % TileLayout::kPanelCols != 0 || cfg.bc > 256))
    return fail("warp-specialize needs wgmma, head dims that are multiples "
                "of 64 and block-kv <= 256 (one TMA box per 64-column "
                "panel)");

  // Registers per thread for the f32 state (O, S) and the Q fragments:
  // keep Q in registers only while that leaves room for addresses and
  // temporaries below the 255-register limit.
  int64_t oRegs = cfg.mTiles * cfg.dv / 2, sRegs = cfg.mTiles * cfg.bc / 2,
          qRegs = cfg.mTiles * cfg.d / 4;
  // (wgmma reads Q from shared memory through descriptors.)
  cfg.qInRegs = !cfg.wgmma && oRegs + sRegs + qRegs <= 192;
  // Past 160 registers of O and S together the kernel spills (D = 128 with
  // Bc = 64): split the softmax into 32-key sub-steps on the same buffers.
  cfg.softmaxKeys = cfg.bc;
  if (!cfg.wgmma && oRegs + sRegs > 160 && cfg.bc % 32 == 0)
    cfg.softmaxKeys = 32;

  auto tileBytes = [&](int64_t rows, int64_t cols) {
    return TileLayout::get(rows, cols, /*swizzle=*/false, cfg.wgmma).bytes();
  };
  cfg.qTileBytes = tileBytes(cfg.br, cfg.d);
  cfg.qBytes = (cfg.persistent ? 2 : 1) * cfg.qTileBytes;
  if (cfg.persistent)
    cfg.oBytes = tileBytes(cfg.br, cfg.dv);
  if (cfg.dynamic)
    cfg.slotBytes = kTileSlotBytes;
  cfg.kBytes = tileBytes(cfg.stages * cfg.bc, cfg.d);
  cfg.vBytes = tileBytes(cfg.stages * cfg.bc, cfg.dv);
  if (config) {
    // The op verifier checked the configuration with the resource model:
    // this kernel must need exactly what the model says.
    KernelResources model =
        kernelResources(config, {KernelKind::Forward, cfg.d, cfg.dv});
    if (model.sharedMemory != cfg.smemBytes())
      return fail(Twine("internal error: the kernel needs ") +
                  Twine(cfg.smemBytes()) +
                  " bytes of shared memory, the resource model says " +
                  Twine(model.sharedMemory));
    const ChipInfo *chip = lookupChip(config.getChip());
    if (chip && cfg.smemBytes() > chip->sharedMemoryPerBlock)
      return fail(Twine("the kernel needs ") + Twine(cfg.smemBytes()) +
                  " bytes of shared memory, more than the " +
                  Twine(chip->sharedMemoryPerBlock) +
                  " a thread block may have on " + chip->name);
  }
  return cfg;
}

//===----------------------------------------------------------------------===//
// Kernel emission
//===----------------------------------------------------------------------===//

/// Reduces `vals` (at least one) with `combine` as a balanced tree.
static Value treeReduce(SmallVector<Value> vals,
                        function_ref<Value(Value, Value)> combine) {
  while (vals.size() > 1) {
    SmallVector<Value> next;
    for (size_t i = 0; i + 1 < vals.size(); i += 2)
      next.push_back(combine(vals[i], vals[i + 1]));
    if (vals.size() % 2)
      next.push_back(vals.back());
    vals = std::move(next);
  }
  return vals.front();
}

/// The score factors of a step with a score_mod, which reads natural-unit
/// scores: s = score_mod(scale * x), then u = tanh(s / softcap) with
/// exponent u * (softcap * log2(e)), or the exponent s * log2(e). Host
/// values (kernel parameters or constants); null without a score_mod.
struct ModifierFactors {
  Value scale, softcap, expFactor;
};

class ForwardKernelEmitter : public NestCloner {
public:
  /// `factors` are values of the host (see convertForall).
  ForwardKernelEmitter(OpBuilder &b, Location loc, TiledAttention &ta,
                       const KernelConfig &cfg, ScoreFactors factors,
                       ModifierFactors modFactors, Value kMapHost = {},
                       Value vMapHost = {}, Value qMapHost = {},
                       Value oMapHost = {}, Value counter = {})
      : NestCloner(b, loc), ta(ta), cfg(cfg), frags(b, loc, cfg.elt),
        wg(b, loc, cfg.elt), factors(factors), modFactors(modFactors),
        kMapHost(kMapHost), vMapHost(vMapHost), qMapHost(qMapHost),
        oMapHost(oMapHost), counter(counter) {}

  void emit(gpu::LaunchOp launch);

private:
  /// The kernel-side value of an index of the tiled IR.
  Value clone(OpFoldResult ofr);

  /// How the threads copy `rows` rows of one head of a global tensor into a
  /// shared-memory tile. Everything here is computed once, before the key
  /// loops; a copy then costs one multiply by the row stride per round of
  /// rows, every chunk and destination being a constant offset.
  struct CopyPlan {
    /// 1-d view of the head's rows from this thread's first element (row
    /// tRow, chunk tChunk of (batch, head)).
    Value src;
    /// Elements between two rows of `src`.
    Value rowStride;
    const SmemTile *tile = nullptr;
    int64_t rows = 0, perRow = 0, rowsPerRound = 0, rounds = 0;
    /// This thread's first row and chunk.
    Value tRow, tChunk;
    /// The thread's first destination element (i32; unswizzled tiles only).
    Value dstLane;
    /// A paged source: elements between two pages (`src` starts in page 0).
    Value pageStride;
    /// A paged source whose blocks span pages: `src` starts at row 0 of
    /// the page (not at the thread's row), each round finds its own page.
    bool spansPages = false;
  };
  /// The plan of the tiles of `src` in (batch, head) (a packed source: of
  /// the head from row `rowBase` on; paged: of the head in page 0).
  CopyPlan planCopy(const TileSource &src, Value batch, Value head,
                    Value rowBase, const SmemTile &tile, int64_t rows);
  /// Copies rows [srcRow0, srcRow0 + rows) of the plan's head (of page
  /// `page` if paged) into rows [dstRow0, ...) of its tile, zero-filling
  /// rows >= `limit` (counted from `limitRow0` for srcRow0 if given: a
  /// page's rows are not the sequence's).
  void copyTile(const CopyPlan &plan, Value srcRow0, Value limit, Value dstRow0,
                Value page = {}, Value limitRow0 = {},
                ArrayRef<Value> roundSources = {});
  /// Copies key/value block `kStart` into buffer rows [dstRow0, +Bc) and
  /// commits the copies as one group.
  /// Where a paged block's rows are: its page and first row (within one
  /// page), or each copy round's page and row for K and V (spanning pages).
  struct PagedBlock {
    Value page, row;
    SmallVector<std::pair<Value, Value>> kRows, vRows;
  };
  /// The page lookups of key block `kStart` (none for other forms). Keys
  /// past the sequence are clamped to its last, so that a block past the
  /// end (the loop's look-ahead) reads only table entries that exist.
  PagedBlock lookupPages(Value kStart);
  void copyKV(Value kStart, Value dstRow0) {
    copyKV(kStart, dstRow0, lookupPages(kStart));
  }
  void copyKV(Value kStart, Value dstRow0, const PagedBlock &pages);
  /// The page holding key `key` of the block's sequence (paged).
  Value pageOf(Value key);
  /// The page and in-page row of each copy round's key of block `kStart`
  /// for this thread (a plan whose blocks span pages), clamped to the
  /// sequence's last key: rows past it are zero-filled, and the table holds
  /// no page for them.
  SmallVector<std::pair<Value, Value>> pagedRounds(const CopyPlan &plan,
                                                   Value kStart);
  /// Where the rounds of `plan` start in its pool (`plan.src`).
  SmallVector<Value> roundSources(const CopyPlan &plan,
                                  ArrayRef<std::pair<Value, Value>> rows);
  void commit() { commitCopies(); }
  void waitGroups(int64_t pending) { waitCopies(pending); }

  /// This lane's element offset (i32) of its ldmatrix row address in `tile`,
  /// for row `row` (a multiple of 8 plus the lane's row offset):
  /// row * storedCols plus, unswizzled, the lane's chunk offset (0 or 1
  /// chunk).
  Value ldmatrixLane(const SmemTile &tile, Value row, bool aPattern);
  /// Element index of this lane's ldmatrix row address for rows [row, +16)
  /// and chunks [chunk0, +2) past `laneBase` (from ldmatrixLane plus a
  /// multiple of 8 rows), swizzle included: a constant offset of `laneBase`
  /// unless swizzled.
  Value ldmatrixIndex(const SmemTile &tile, Value laneBase, int64_t row,
                      int64_t chunk0, bool aPattern);
  /// A fragment of Q rows [warpRow + 16 mt, +16) x cols [16 ks, +16).
  Value loadQ(int64_t mt, int64_t ks);
  /// B fragments of K rows [row, +16) of the current block x cols
  /// [16 ks, +16): two n8 tiles.
  std::pair<Value, Value> loadKFrags(int64_t row, int64_t ks);
  /// B fragments of V rows [row, +16) of the current block x cols
  /// [16 dp, +16), transposed.
  std::pair<Value, Value> loadVFrags(int64_t row, int64_t dp);

  /// One step of the online softmax over the `keys` keys from `kStart`,
  /// held in rows [k0, +keys) of the current block's buffer (kBlock,
  /// vBlock). The state is (acc..., max..., sum...).
  SmallVector<Value> emitStep(OnlineAttentionOp step, Value kStart, int64_t k0,
                              int64_t keys, ValueRange state,
                              Value maskModIf = {});
  // The pieces of a step (wgmma), shared by emitStep and the overlapped
  // schedule.
  /// S = Q K^T for keys [k0, +keys) of kDescBlock: issued and committed, not
  /// waited for.
  SmallVector<Value> issueScores(int64_t k0, int64_t keys);
  struct SoftmaxUpdate {
    /// exp2 of the scores against the new max (fragment element order).
    SmallVector<Value> p;
    SmallVector<Value> newMax, newSum;
    /// exp2(old max - new max) per row: the factor of O.
    SmallVector<Value> alphas;
  };
  /// Score function, mask and online-softmax update of one step. A step
  /// with a mask_mod applies it where `maskModIf` (an i1 of the block's
  /// verdict) holds, or everywhere when null.
  SoftmaxUpdate emitSoftmax(OnlineAttentionOp step, Value kStart, int64_t keys,
                            ArrayRef<Value> s, ValueRange maxIn,
                            ValueRange sumIn, Value maskModIf = {});
  /// Whether block `kStart` of `kl` runs with the mask_mod (its verdict
  /// nest's leaf), or null when the loop has no verdict.
  Value maskModVerdict(KeyLoop &kl, Value kStart);
  Value pFrag(ArrayRef<Value> p, int64_t keys, int64_t mt, int64_t nt);
  /// P as the register A operand of wgmma (4 x i32 per 16 keys).
  SmallVector<Value> packP(ArrayRef<Value> p, int64_t keys);
  /// O += P V on V rows [k0, +keys) of `vDescOf`: issued and committed.
  SmallVector<Value> issuePV(ArrayRef<Value> pRegs, ArrayRef<Value> o,
                             Value vDescOf, int64_t k0, int64_t keys);
  void emitKeyLoop(KeyLoop &kl, SmallVector<Value> &state);
  /// All key loops with the overlapped schedule (cfg.overlap): a prologue
  /// computes P of the first block, each iteration issues S of its block
  /// and P V of the one before, an epilogue adds the last P V.
  void emitOverlappedLoops(SmallVector<Value> &state);
  /// Key blocks of the tile that warpgroup `wgIdx` computes: none when its
  /// rows lie past the queries (a ragged last tile), else up to its last
  /// row's band edge (a causal tile's last blocks can be hidden from its
  /// first warpgroups). The rest it only takes and releases.
  Value warpgroupBlocks(Value wgIdx);
  /// Whether the overlapped loops bound each warpgroup's key blocks: dense
  /// causal masks with tiles of more rows than keys (D = 64: 192 x 128),
  /// where a tile's last block is hidden from its first warpgroups (0.86 /
  /// 0.88 / 0.95x the time at N = 1000 / 1k / 2k, H100). With them the D =
  /// 64 unmasked, window and packed-sequence kernels, and a document
  /// mask_mod's, spilled; 128 x 128 tiles gain nothing when Nq = Nk.
  bool boundsPerWarpgroup() {
    return cfg.overlap && cfg.br > cfg.bc && cfg.mask && kmask.hasRight() &&
           !kmask.hasLeft() && !ta.packedOut &&
           llvm::none_of(ta.loops,
                         [](KeyLoop &kl) { return kl.step.hasModifiers(); });
  }
  void emitEpilogue(ValueRange state);
  /// The online-softmax state before the first key block: acc = 0,
  /// max = -inf, sum = 0.
  SmallVector<Value> initialState() {
    SmallVector<Value> state(cfg.mTiles * cfg.dv / 8, frags.zeroC());
    state.append(2 * cfg.mTiles, f32(-std::numeric_limits<double>::infinity()));
    state.append(2 * cfg.mTiles, f32(0.0));
    return state;
  }
  /// The wgmma descriptor `desc` of a stage-major ring's buffer 0 moved to
  /// item `item`'s buffer (stage item % stages, `stageBytes` apart).
  Value stageDescriptor(Value desc, int64_t stageBytes, int64_t stages,
                        Value item) {
    Value units = arith::IndexCastOp::create(
        b, loc, b.getI64Type(), mul(remu(item, stages), idx(stageBytes / 16)));
    return arith::AddIOp::create(b, loc, desc, units);
  }

  TiledAttention &ta;
  const KernelConfig &cfg;
  WarpFragments frags;
  WarpgroupMma wg;
  IRMapping mapping;
  /// The exponent factors, computed by the host: kernel parameters (or
  /// constants) that the score FMAs read directly.
  ScoreFactors factors;
  /// With a score_mod: the factors of its natural-unit scores.
  ModifierFactors modFactors;
  /// The mask's band, its run-time widths computed once at the kernel's
  /// start.
  KernelMask kmask;

  // wgmma descriptors: Q rows of this warpgroup; K and V buffer 0; K and V
  // of the current block.
  Value qDesc, kDesc, vDesc, kDescBlock, vDescBlock;

  Value tid, lane, g, tig, warpRow;
  // Per-lane ldmatrix row offsets and (swizzled) chunk offsets.
  Value aRowOff, bRowOff, aChunkOff, bChunkOff, aChunkX, bChunkX;
  // Per-lane ldmatrix element offsets: Q rows of this warp, K and V rows of
  // buffer 0 (loop-invariant); kBlock, vBlock: those of the current block.
  Value qLane, kLane, vLane, kBlock, vBlock;
  Value nq, nk, lo, hi;
  /// Keys past which the K/V copies zero-fill: nk, or (packed, paged) the
  /// sequence's key count.
  Value kLimit;
  /// The sequence of a paged cache's blocks (its row of the page table).
  Value kSeq;
  SmemTile qTile, kTile, vTile;
  CopyPlan kCopy, vCopy;
  SmallVector<Value> qFrags;

  // Warp-specialized: the host's tensor maps of K and V, the channels, and
  // the channel item of the key block being computed.
  Value kMapHost, vMapHost;
  Value kChannel, vChannel, item;
  // Persistent: Q comes through a two-stage channel too, one item per tile
  // (tileIndex: the block's tiles so far).
  Value qMapHost, qChannel, tileIndex;
  // Persistent: O goes out through shared memory and a TMA store (boxes of
  // one warpgroup's 64 rows per 64-column panel).
  /// oStageOffset: the staging tile's byte offset from smemBase.
  Value oMapHost, oMap, oStage, smemBase, oStageOffset;
  /// Writes this thread's rows of O into the staging tile and has one
  /// thread per warpgroup store them; the stores of the last tile must have
  /// read the tile first.
  void emitTmaStore(ArrayRef<Value> outFrags, int64_t mt, Value ob, Value oh,
                    Value oq, Value packedRows = {});
  /// Packed sequences: the warpgroup's staged rows below `rows` (of the
  /// tile) stored by its threads, 16 bytes each, coalesced.
  void copyStagedRows(Value oh, Value oq, Value row0, Value rows);
  /// The warpgroup's first thread (the one that issues its TMA stores).
  Value isWarpgroupLeader() {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                 remu(tid, kWarpgroupThreads), idx(0));
  }
  /// The channel item of the tile's first key block: the blocks of the
  /// thread block's earlier tiles (persistent), else 0.
  Value itemBase;
  /// Builds the K/V channels and the producer role; leaves the builder in
  /// the consumer role.
  void emitWarpRoles(Value base, Value pad);
  /// The producer's puts of the mapped tile: its Q (persistent) and the K
  /// and V of its visible key blocks. `lo`, `hi` and the item base set.
  void emitProducerTile(Value qMap, Value kMap, Value vMap);
  /// The consumers' work on the mapped tile whose Q is in buffer
  /// `tileIndex` (persistent; qDesc0: buffer 0's descriptor): the nest's
  /// indices cloned, Q taken (unless dynamic), key loops, epilogue, Q
  /// released.
  void emitConsumerTile(Value qDesc0, function_ref<void()> cloneIndices);

  // Dynamic tile scheduler: the counter (a kernel memref parameter, zeroed
  // by the launcher) and the shared-memory slot of each Q buffer's tile
  // index.
  Value counter, tileSlots;
  /// The producer's loop: its block's first tile is blockX, each later one
  /// the counter's next value plus gridX; the first index past the tiles
  /// goes to the consumers as the end marker (a Q item without data). One
  /// thread runs it: it issues every put anyway, and needs no broadcast of
  /// the atomic's result.
  void emitDynamicProducer(Value qMap, Value kMap, Value vMap);
  /// The consumers' loop: each Q item's tile index, read from its slot,
  /// until the end marker.
  void emitDynamicConsumer(Value qDesc0, function_ref<void()> cloneIndices);

  // Persistent tile scheduler: the launch's block id and grid size along x;
  // the open tile loop's test that its round has a tile for this block.
  Value blockX, gridX;
  scf::IfOp tileIf;
  /// The tile grid's extent per dimension (query blocks, heads, batches)
  /// and its tile count, cloned from the nest's bounds (tileCount).
  Value tileExtent[3], tiles;
  /// Computes tileExtent and tiles afresh (the other role's clones do not
  /// dominate this one's code).
  void tileCount();
  /// Maps the nest's induction variables to tile `t`'s coordinates: query
  /// blocks fastest (the blocks working at once share their heads' K and V
  /// in L2), the last first (with a causal mask the longest tiles start
  /// first).
  void mapTile(Value t);
  /// Opens the loop over this thread block's tiles (one per round of gridX
  /// tiles, in snake order), carrying the channel item base and the tile
  /// count, and maps the nest to the tile.
  scf::ForOp beginTileLoop();
  /// Yields the item base of the next tile (this tile's key blocks on top)
  /// and leaves the builder after the loop.
  void endTileLoop(scf::ForOp loop);
  /// Key blocks of the tile: items it puts into / takes from the channels.
  Value tileBlocks() {
    return arith::CeilDivUIOp::create(b, loc, sub(hi, lo), idx(cfg.bc));
  }
  /// Ping-pong's first turn (once per thread block: before the tile loop
  /// when persistent, else by the key loops).
  void startTurns();
  /// The consumers' barrier (bar.sync 1, threads()): the producer warpgroup
  /// does not take part.
  void consumerBarrier();
};

Value ForwardKernelEmitter::clone(OpFoldResult ofr) {
  return NestCloner::clone(ofr, mapping);
}

ForwardKernelEmitter::CopyPlan
ForwardKernelEmitter::planCopy(const TileSource &src, Value batch, Value head,
                               Value rowBase, const SmemTile &tile,
                               int64_t rows) {
  // Groups of `perRow` threads copy 128 contiguous bytes of a row per
  // instruction (coalesced); a thread copies chunks tChunk + j * perRow of
  // rows tRow + i * rowsPerRound. All copies of a thread then address off
  // one row base by constants, except for the few rounds: few registers.
  CopyPlan plan;
  plan.tile = &tile;
  plan.rows = rows;
  int64_t chunks = tile.cols / kChunk;
  plan.perRow = std::min<int64_t>(chunks, 8);
  while (chunks % plan.perRow != 0 || cfg.threads() % plan.perRow != 0)
    --plan.perRow;
  plan.rowsPerRound = cfg.threads() / plan.perRow;
  plan.rounds = llvm::divideCeil(rows, plan.rowsPerRound);
  plan.tRow = divu(tid, plan.perRow);
  plan.tChunk = remu(tid, plan.perRow);

  // A 1-d view of the head's rows from the thread's first element: element
  // (batch, head, tRow + row, 8 tChunk + col) is element
  // row * stride[2] + col of it (packed: (head, rowBase + tRow + row, ...);
  // paged: of page 0, a page `pageStride` elements further). Its size
  // covers the head's rows (paged: the pool); rows past the end are never
  // dereferenced (src-size 0).
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, src.memref);
  ValueRange strides = meta.getStrides();
  unsigned r = src.rowDim();
  plan.rowStride = strides[r];
  plan.spansPages = src.pageSize && src.pageSize % rows != 0;
  Value offset;
  if (plan.spansPages) {
    // Each round adds its page's and row's offsets.
    offset = add(add(meta.getOffset(), mul(head, strides[r - 1])),
                 mul(plan.tChunk, idx(kChunk)));
  } else if (r == 2 && !src.pageSize && !rowBase) {
    // (One expression: the dense kernels' PTX as before.)
    offset =
        add(add(meta.getOffset(),
                add(mul(batch, strides[0]), mul(head, strides[1]))),
            add(mul(plan.tRow, plan.rowStride), mul(plan.tChunk, idx(kChunk))));
  } else {
    offset = add(meta.getOffset(), mul(head, strides[r - 1]));
    if (rowBase)
      offset = add(offset, mul(rowBase, plan.rowStride));
    offset = add(offset, add(mul(plan.tRow, plan.rowStride),
                             mul(plan.tChunk, idx(kChunk))));
  }
  Value size = mul(meta.getSizes()[r], plan.rowStride);
  if (src.pageSize) {
    plan.pageStride = strides[0];
    size = mul(meta.getSizes()[0], strides[0]);
  }
  auto flatType = MemRefType::get(
      {ShapedType::kDynamic}, cfg.elt,
      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, {1}));
  plan.src = memref::ReinterpretCastOp::create(
      b, loc, flatType, src.memref, OpFoldResult(offset),
      ArrayRef<OpFoldResult>{size}, ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
  if (!tile.swizzle)
    plan.dstLane = addNsw(mulNsw(toI32(plan.tRow), i32(tile.storedCols())),
                          mulNsw(toI32(plan.tChunk), i32(kChunk)));
  return plan;
}

void ForwardKernelEmitter::copyTile(const CopyPlan &plan, Value srcRow0,
                                    Value limit, Value dstRow0, Value page,
                                    Value limitRow0,
                                    ArrayRef<Value> roundSources) {
  const SmemTile &tile = *plan.tile;
  int64_t sc = tile.storedCols();
  int64_t chunks = tile.cols / kChunk, perRow = plan.perRow,
          rowsPerRound = plan.rowsPerRound;
  Value full = idx(kChunk), none = idx(0);
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
  // Per round of a copy: one multiply by the row stride; chunks and the
  // destination advance by constants.
  Value dstRow0Off = mulNsw(toI32(dstRow0), i32(sc));
  Value dstBase = tile.swizzle ? dstRow0Off : addNsw(plan.dstLane, dstRow0Off);
  // Rows tRow + i * rowsPerRound < limit - srcRow0 exist.
  Value remaining = sub(limit, limitRow0 ? limitRow0 : srcRow0);
  Value pageBase = page ? mul(page, plan.pageStride) : Value();
  for (int64_t i = 0; i < plan.rounds; ++i) {
    // One multiply per round (not a chain of adds of a hoisted stride: LLVM
    // would keep one 64-bit base pointer per round alive across the loop).
    Value srcRound;
    if (!roundSources.empty()) {
      srcRound = roundSources[i];
    } else {
      srcRound = mul(i == 0 ? srcRow0 : add(srcRow0, idx(i * rowsPerRound)),
                     plan.rowStride);
      if (pageBase)
        srcRound = add(pageBase, srcRound);
    }
    // Rows past the end read nothing (src-size 0) and are zero-filled; the
    // address is not dereferenced then, so it needs no clamping.
    Value n = arith::SelectOp::create(
        b, loc,
        slt(plan.tRow,
            i == 0 ? remaining : sub(remaining, idx(i * rowsPerRound))),
        full, none);
    std::optional<OpBuilder::InsertionGuard> guard;
    if ((i + 1) * rowsPerRound > plan.rows) {
      // Last, partial round: only the first rows exist.
      auto ifOp = scf::IfOp::create(
          b, loc, slt(plan.tRow, idx(plan.rows - i * rowsPerRound)), false);
      guard.emplace(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
    }
    for (int64_t j = 0; j < chunks / perRow; ++j) {
      Value srcIndex =
          j == 0 ? srcRound : add(srcRound, idx(j * perRow * kChunk));
      Value dstIndex;
      if (tile.panels) {
        // Chunk c of row r: panel c / 8, swizzled chunk (c % 8) ^ (r % 8).
        Value r = add(plan.tRow, idx(i * rowsPerRound));
        Value chunk = add(plan.tChunk, idx(j * perRow));
        Value dstChunk =
            arith::XOrIOp::create(b, loc, remu(chunk, 8), remu(r, 8));
        dstIndex = smemIndex(addNsw(
            dstBase, toI32(add(add(mul(divu(chunk, 8), idx(tile.panelStride())),
                                   mul(r, idx(sc))),
                               mul(dstChunk, idx(kChunk))))));
      } else if (tile.swizzle) {
        Value r = add(plan.tRow, idx(i * rowsPerRound));
        Value chunk = add(plan.tChunk, idx(j * perRow));
        Value dstChunk = arith::XOrIOp::create(b, loc, chunk, remu(r, 8));
        dstIndex = smemIndex(addNsw(
            dstBase, toI32(add(mul(r, idx(sc)), mul(dstChunk, idx(kChunk))))));
      } else {
        dstIndex = smemIndex(
            addNsw(dstBase, i32(i * rowsPerRound * sc + j * perRow * kChunk)));
      }
      // (The next commit covers it, inside the if or not.)
      nvgpu::DeviceAsyncCopyOp::create(
          b, loc, tokenType, tile.view, ValueRange{dstIndex}, plan.src,
          ValueRange{srcIndex}, b.getIndexAttr(kChunk), n, b.getUnitAttr());
    }
  }
}

ForwardKernelEmitter::PagedBlock
ForwardKernelEmitter::lookupPages(Value kStart) {
  PagedBlock pb;
  if (!ta.k.pageSize)
    return pb;
  if (!kCopy.spansPages && !vCopy.spansPages) {
    // Block kStart is rows kStart mod S of one page (S is a multiple of
    // Bc).
    Value key = arith::MinSIOp::create(b, loc, kStart, sub(kLimit, idx(1)));
    pb.row = remu(kStart, ta.k.pageSize);
    pb.page = pageOf(key);
    return pb;
  }
  // The block spans pages: each round of rows finds its page. K and V share
  // the lookups when their rounds cover the same rows.
  pb.kRows = pagedRounds(kCopy, kStart);
  pb.vRows =
      vCopy.rowsPerRound == kCopy.rowsPerRound && vCopy.rounds == kCopy.rounds
          ? pb.kRows
          : pagedRounds(vCopy, kStart);
  return pb;
}

void ForwardKernelEmitter::copyKV(Value kStart, Value dstRow0,
                                  const PagedBlock &pb) {
  if (!ta.k.pageSize) {
    copyTile(kCopy, kStart, kLimit, dstRow0);
    copyTile(vCopy, kStart, kLimit, dstRow0);
  } else if (pb.page) {
    copyTile(kCopy, pb.row, kLimit, dstRow0, pb.page, kStart);
    copyTile(vCopy, pb.row, kLimit, dstRow0, pb.page, kStart);
  } else {
    copyTile(kCopy, kStart, kLimit, dstRow0, Value(), kStart,
             roundSources(kCopy, pb.kRows));
    copyTile(vCopy, kStart, kLimit, dstRow0, Value(), kStart,
             roundSources(vCopy, pb.vRows));
  }
  commit();
}

Value ForwardKernelEmitter::pageOf(Value key) {
  Value page = memref::LoadOp::create(
      b, loc, ta.k.pageTable, ValueRange{kSeq, divu(key, ta.k.pageSize)});
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), page);
}

SmallVector<std::pair<Value, Value>>
ForwardKernelEmitter::pagedRounds(const CopyPlan &plan, Value kStart) {
  int64_t s = ta.k.pageSize;
  Value last = sub(kLimit, idx(1));
  SmallVector<std::pair<Value, Value>> rows;
  for (int64_t i = 0; i < plan.rounds; ++i) {
    Value row = i == 0 ? plan.tRow : add(plan.tRow, idx(i * plan.rowsPerRound));
    Value key = add(kStart, row);
    key = arith::MinSIOp::create(b, loc, key, last);
    rows.push_back({pageOf(key), remu(key, s)});
  }
  return rows;
}

SmallVector<Value>
ForwardKernelEmitter::roundSources(const CopyPlan &plan,
                                   ArrayRef<std::pair<Value, Value>> rows) {
  SmallVector<Value> sources;
  for (auto [page, row] : rows) {
    Value pageBase = mul(page, plan.pageStride);
    sources.push_back(add(pageBase, mul(row, plan.rowStride)));
  }
  return sources;
}

Value ForwardKernelEmitter::ldmatrixLane(const SmemTile &tile, Value row,
                                         bool aPattern) {
  Value off = mulNsw(toI32(row), i32(tile.storedCols()));
  if (tile.swizzle)
    return off;
  return addNsw(off,
                mulNsw(toI32(aPattern ? aChunkOff : bChunkOff), i32(kChunk)));
}

Value ForwardKernelEmitter::ldmatrixIndex(const SmemTile &tile, Value laneBase,
                                          int64_t row, int64_t chunk0,
                                          bool aPattern) {
  int64_t rowOff = row * tile.storedCols();
  if (!tile.swizzle)
    return smemIndex(addNsw(laneBase, i32(rowOff + chunk0 * kChunk)));
  // chunk0 is even and the lane's offset is 0 or 1, so the swizzled chunk
  // (chunk0 + off) ^ (row % 8) is chunk0 ^ (off ^ (row % 8)); the row base
  // is a multiple of 8.
  Value chunk =
      arith::XOrIOp::create(b, loc, aPattern ? aChunkX : bChunkX, idx(chunk0));
  return smemIndex(
      addNsw(addNsw(laneBase, i32(rowOff)), mulNsw(toI32(chunk), i32(kChunk))));
}

Value ForwardKernelEmitter::loadQ(int64_t mt, int64_t ks) {
  return frags.ldmatrix(
      qTile.view,
      ldmatrixIndex(qTile, qLane, 16 * mt, 2 * ks, /*aPattern=*/true),
      /*transpose=*/false);
}

std::pair<Value, Value> ForwardKernelEmitter::loadKFrags(int64_t row,
                                                         int64_t ks) {
  // Matrices (n0, k0), (n0, k0+8), (n0+8, k0), (n0+8, k0+8): B fragments of
  // key rows n0..n0+7 and n0+8..n0+15.
  return frags.splitB(frags.ldmatrix(
      kTile.view, ldmatrixIndex(kTile, kBlock, row, 2 * ks, /*aPattern=*/false),
      /*transpose=*/false));
}

std::pair<Value, Value> ForwardKernelEmitter::loadVFrags(int64_t row,
                                                         int64_t dp) {
  // Matrices (k0, n0), (k0+8, n0), (k0, n0+8), (k0+8, n0+8), transposed:
  // B fragments of value columns n0..n0+7 and n0+8..n0+15.
  return frags.splitB(frags.ldmatrix(
      vTile.view, ldmatrixIndex(vTile, vBlock, row, 2 * dp, /*aPattern=*/true),
      /*transpose=*/true));
}

SmallVector<Value> ForwardKernelEmitter::issueScores(int64_t k0, int64_t keys) {
  // One warpgroup MMA chain of D / 16 k-steps: Q rows of this warpgroup
  // against the block's keys, both read through descriptors; a k-step
  // advances 32 bytes inside a 128-byte panel row.
  SmallVector<Value> acc;
  for (int64_t ks = 0; ks < cfg.d / 16; ++ks) {
    int64_t panel = ks / 4, inPanel = (ks % 4) * 32;
    acc = wg.mmaSS(wg.advance(qDesc, panel * qTile.panelStride() * 2 + inPanel),
                   wg.advance(kDescBlock, panel * kTile.panelStride() * 2 +
                                              inPanel +
                                              k0 * SmemTile::kPanelRowBytes),
                   keys, acc);
  }
  wg.commit();
  return acc;
}

Value ForwardKernelEmitter::maskModVerdict(KeyLoop &kl, Value kStart) {
  if (kl.verdict.empty())
    return Value();
  // The conditions depend on the block: cloned with the loop's induction
  // variable mapped, without leaving block-local values in `mapping`.
  IRMapping local = mapping;
  local.map(kl.loop.getInductionVar(), kStart);
  std::function<Value(int)> build = [&](int node) -> Value {
    const VerdictNode &n = kl.verdict[node];
    if (!n.cond)
      return arith::ConstantIntOp::create(b, loc, n.withMaskMod, 1);
    Value cond = NestCloner::clone(n.cond, local);
    return b.createOrFold<arith::SelectOp>(loc, cond, build(n.then),
                                           build(n.otherwise));
  };
  return build(0);
}

ForwardKernelEmitter::SoftmaxUpdate ForwardKernelEmitter::emitSoftmax(
    OnlineAttentionOp step, Value kStart, int64_t keys, ArrayRef<Value> s,
    ValueRange maxIn, ValueRange sumIn, Value maskModIf) {
  const int64_t m = cfg.mTiles, ns = keys / 8;
  // Scores u (before the exp2 factor c): p = exp2(u * c - m), m in log2
  // units. With softcap, u = tanh(s * scale / softcap), c = softcap * log2e.
  // With a score_mod, u = score_mod(s * scale) (tanh(. / softcap)), c =
  // log2e (softcap * log2e).
  bool scoreMod = step.hasScoreMod(), maskMod = step.hasMaskMod();
  Value cst = scoreMod ? modFactors.expFactor : factors.expFactor;
  Value negInf = f32(-std::numeric_limits<double>::infinity());
  SmallVector<Value> uVals(m * ns * 4);
  auto u = [&](int64_t mt, int64_t nt, int64_t h, int64_t e) -> Value & {
    return uVals[((mt * ns + nt) * 2 + h) * 2 + e];
  };
  // The modifiers' positions (i32): this lane's rows and columns, clamped
  // to the sequence's last (padding reads the last row's / key's values,
  // then is discarded / masked); made where first used.
  SmallVector<Value> captures;
  Value batch, head, row0, col0, qLast, kLast;
  std::function<Value(int64_t)> rowOf, colOf;
  std::optional<ModifierInliner::Positions> positions;
  if (scoreMod || maskMod) {
    qLast = toI32(sub(clone(step.getQLen()), idx(1)));
    kLast = toI32(sub(clone(step.getKLen()), idx(1)));
    row0 = toI32(add(add(clone(step.getQStart()), warpRow), g));
    col0 = toI32(add(kStart, mul(tig, idx(2))));
    // rowKey = 2 mt + h, colKey = 2 nt + e.
    rowOf = [&](int64_t r) -> Value {
      return arith::MinSIOp::create(
          b, loc, addNsw(row0, i32(16 * (r / 2) + 8 * (r % 2))), qLast);
    };
    colOf = [&](int64_t c) -> Value {
      return arith::MinSIOp::create(
          b, loc, addNsw(col0, i32(8 * (c / 2) + c % 2)), kLast);
    };
    positions = ModifierInliner::Positions{
        row0, col0, [](int64_t r) { return 16 * (r / 2) + 8 * (r % 2); },
        [](int64_t c) { return 8 * (c / 2) + c % 2; }};
    batch = toI32(clone(step.getBatchIndex()));
    head = toI32(clone(step.getHeadIndex()));
    for (Value c : step.getCaptures())
      captures.push_back(
          c.getDefiningOp<bufferization::ToTensorOp>().getBuffer());
  }
  std::optional<ModifierInliner> scoreInliner;
  Value capInv;
  if (scoreMod) {
    scoreInliner.emplace(b, loc, step.getScoreMod(), /*score=*/true, captures,
                         batch, head, rowOf, colOf, positions);
    if (modFactors.softcap)
      capInv = arith::DivFOp::create(b, loc, f32(1.0), modFactors.softcap);
  }
  for (int64_t mt = 0; mt < m; ++mt)
    for (int64_t nt = 0; nt < ns; ++nt)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t e = 0; e < 2; ++e) {
          Value x = frags.element(s[mt * ns + nt], h, e);
          if (scoreMod) {
            // (contract: scale x + bias may become one fma.)
            x = arith::MulFOp::create(b, loc, x, modFactors.scale,
                                      arith::FastMathFlags::contract);
            x = scoreInliner->at(x, mt * 2 + h, nt * 2 + e);
            if (capInv)
              x = faptx::TanhOp::create(
                  b, loc, arith::MulFOp::create(b, loc, x, capInv));
          } else if (factors.capIn) {
            x = faptx::TanhOp::create(
                b, loc, arith::MulFOp::create(b, loc, x, factors.capIn));
          }
          u(mt, nt, h, e) = x;
        }

  if (maskMod) {
    // Keys the mask_mod hides: -inf (where the block's verdict says so).
    auto apply = [&] {
      ModifierInliner inliner(b, loc, step.getMaskMod(), /*score=*/false,
                              captures, batch, head, rowOf, colOf, positions);
      for (int64_t mt = 0; mt < m; ++mt)
        for (int64_t nt = 0; nt < ns; ++nt)
          for (int64_t h = 0; h < 2; ++h)
            for (int64_t e = 0; e < 2; ++e) {
              Value visible = inliner.at(Value(), mt * 2 + h, nt * 2 + e);
              Value &x = u(mt, nt, h, e);
              x = arith::SelectOp::create(b, loc, visible, x, negInf);
            }
    };
    if (!maskModIf || matchPattern(maskModIf, m_One())) {
      apply();
    } else if (!matchPattern(maskModIf, m_Zero())) {
      SmallVector<Value> before = uVals;
      auto ifOp = scf::IfOp::create(b, loc, TypeRange(ValueRange(uVals)),
                                    maskModIf, /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.elseBlock());
      scf::YieldOp::create(b, loc, before);
      b.setInsertionPointToStart(ifOp.thenBlock());
      apply();
      scf::YieldOp::create(b, loc, uVals);
      uVals.assign(ifOp.getResults().begin(), ifOp.getResults().end());
    }
  }

  if (step.isMasked()) {
    // col - row = d0 + (8 nt + e - 16 mt - 8 h) with the lane's
    // d0 = (kStart + 2 tig) - (qStart + warpRow + g): every bound becomes one
    // compare of a constant against a per-step scalar.
    Value qStart = clone(step.getQStart()), qLen = clone(step.getQLen()),
          kLen = clone(step.getKLen());
    Value col0 = add(kStart, mul(tig, idx(2)));
    Value row0 = add(add(qStart, warpRow), g);
    Value d0 = toI32(sub(col0, row0));
    if (boundsPerWarpgroup()) {
      // The lane's part of d0 from a fenced thread index: hoisted out of
      // the tile loop it was one register too many beside the warpgroup's
      // block count (4 bytes of spill at D = 64).
      Value t = wg.opaqueIndex(tid);
      Value ln = remu(t, kWarpSize);
      Value laneRow =
          add(mul(divu(t, kWarpSize), idx(cfg.br / cfg.warps)), divu(ln, 4));
      Value laneCol = mul(remu(ln, 4), idx(2));
      d0 = toI32(add(sub(kStart, qStart), sub(laneCol, laneRow)));
    }
    Value off = toI32(sub(kLen, qLen));
    Value keyLimit = toI32(sub(kLen, col0)); // 8 nt + e < keyLimit
    Value rightLimit, leftLimit;
    // (A step without the mask attribute, masked for its modifiers or the
    // key tail, compares the tail only.)
    bool band = step.hasMaskRule();
    if (band && kmask.hasRight())
      rightLimit =
          sub(arith::AddIOp::create(b, loc, off, kmask.rightWidth(b, loc)),
              d0); // cst <= rightLimit
    if (band && kmask.hasLeft())
      leftLimit =
          sub(arith::SubIOp::create(b, loc, off, kmask.leftWidth(b, loc)),
              d0); // cst >= leftLimit
    auto cmp = [&](arith::CmpIPredicate pred, int64_t lhs, Value rhs) {
      return arith::CmpIOp::create(b, loc, pred, i32(lhs), rhs);
    };
    auto apply = [&] {
      for (int64_t mt = 0; mt < m; ++mt)
        for (int64_t nt = 0; nt < ns; ++nt)
          for (int64_t h = 0; h < 2; ++h)
            for (int64_t e = 0; e < 2; ++e) {
              int64_t colOff = 8 * nt + e, diff = colOff - 16 * mt - 8 * h;
              Value visible = cmp(arith::CmpIPredicate::slt, colOff, keyLimit);
              if (rightLimit)
                visible = arith::AndIOp::create(
                    b, loc, visible,
                    cmp(arith::CmpIPredicate::sle, diff, rightLimit));
              if (leftLimit)
                visible = arith::AndIOp::create(
                    b, loc, visible,
                    cmp(arith::CmpIPredicate::sge, diff, leftLimit));
              Value &x = u(mt, nt, h, e);
              x = arith::SelectOp::create(b, loc, visible, x, negInf);
            }
    };
    if (band || !(scoreMod || maskMod)) {
      apply();
    } else {
      // A modifier's step is masked for its positions: most of its blocks
      // are whole, and only the sequence's last needs the tail compare.
      SmallVector<Value> before = uVals;
      auto ifOp = scf::IfOp::create(
          b, loc, TypeRange(ValueRange(uVals)),
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt,
                                add(kStart, idx(keys)), kLen),
          /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.elseBlock());
      scf::YieldOp::create(b, loc, before);
      b.setInsertionPointToStart(ifOp.thenBlock());
      apply();
      scf::YieldOp::create(b, loc, uVals);
      uVals.assign(ifOp.getResults().begin(), ifOp.getResults().end());
    }
  }

  // 2^x: flushing denormal results (faptx.ex2) saves ptxas's rescaling of
  // each input.
  auto exp2 = [&](Value x) -> Value {
    if (cfg.wgmma)
      return faptx::Ex2Op::create(b, loc, x);
    return math::Exp2Op::create(b, loc, x);
  };

  // Online softmax per row (mt, h): the 4 lanes of a quad share a row.
  SoftmaxUpdate r;
  r.p.resize(m * ns * 4);
  for (int64_t mt = 0; mt < m; ++mt)
    for (int64_t h = 0; h < 2; ++h) {
      // wgmma: pairwise trees, since a chain of the 2 * ns (= 64 at 128
      // keys) dependent max/add ops of a row makes the softmax
      // latency-bound. mma.sync's steps are short (2 * ns = 8 to 16) and its
      // registers full: chains there.
      SmallVector<Value> rowVals;
      for (int64_t nt = 0; nt < ns; ++nt)
        for (int64_t e = 0; e < 2; ++e)
          rowVals.push_back(u(mt, nt, h, e));
      auto reduce = [&](SmallVector<Value> vals,
                        function_ref<Value(Value, Value)> combine) {
        if (cfg.wgmma)
          return treeReduce(std::move(vals), combine);
        Value acc = vals.front();
        for (Value v : ArrayRef<Value>(vals).drop_front())
          acc = combine(acc, v);
        return acc;
      };
      Value rowMax = reduce(rowVals, [&](Value x, Value y) -> Value {
        return arith::MaxNumFOp::create(b, loc, x, y);
      });
      for (int32_t mask : {1, 2})
        rowMax = arith::MaxNumFOp::create(
            b, loc, rowMax,
            gpu::ShuffleOp::create(b, loc, rowMax, mask, kWarpSize,
                                   gpu::ShuffleMode::XOR)
                .getShuffleResult());
      Value mOld = maxIn[mt * 2 + h];
      Value mNew = arith::MaxNumFOp::create(
          b, loc, mOld, arith::MulFOp::create(b, loc, rowMax, cst));
      // A row with no visible key so far keeps max = -inf; exponentiate
      // against 0 so that it stays at p = 0, alpha = 0 instead of NaN.
      Value isEmpty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                            mNew, negInf);
      Value mSafe = arith::SelectOp::create(b, loc, isEmpty, f32(0.0), mNew);
      Value alpha = exp2(arith::SubFOp::create(b, loc, mOld, mSafe));
      Value negM = arith::NegFOp::create(b, loc, mSafe);
      SmallVector<Value> terms = {
          arith::MulFOp::create(b, loc, sumIn[mt * 2 + h], alpha)};
      for (int64_t nt = 0; nt < ns; ++nt)
        for (int64_t e = 0; e < 2; ++e) {
          Value x = math::FmaOp::create(b, loc, u(mt, nt, h, e), cst, negM);
          Value pe = exp2(x);
          r.p[((mt * ns + nt) * 2 + h) * 2 + e] = pe;
          terms.push_back(pe);
        }
      Value rowSum = reduce(terms, [&](Value x, Value y) -> Value {
        return arith::AddFOp::create(b, loc, x, y);
      });
      r.newMax.push_back(mNew);
      r.newSum.push_back(rowSum);
      r.alphas.push_back(alpha);
    }
  return r;
}

Value ForwardKernelEmitter::pFrag(ArrayRef<Value> p, int64_t keys, int64_t mt,
                                  int64_t nt) {
  SmallVector<Value> elems;
  for (int64_t i = 0; i < 4; ++i)
    elems.push_back(p[(mt * (keys / 8) + nt) * 4 + i]);
  return frags.fromElements(elems);
}

SmallVector<Value> ForwardKernelEmitter::packP(ArrayRef<Value> p,
                                               int64_t keys) {
  // P in the S fragments' layout is the A operand's register layout.
  SmallVector<Value> pRegs;
  for (int64_t kk = 0; kk < keys / 16; ++kk) {
    Value pa =
        frags.packA(pFrag(p, keys, 0, 2 * kk), pFrag(p, keys, 0, 2 * kk + 1));
    for (int64_t i = 0; i < 4; ++i)
      pRegs.push_back(LLVM::BitcastOp::create(
          b, loc, b.getI32Type(),
          vector::ExtractOp::create(b, loc, pa, ArrayRef<int64_t>{i})));
  }
  return pRegs;
}

SmallVector<Value> ForwardKernelEmitter::issuePV(ArrayRef<Value> pRegs,
                                                 ArrayRef<Value> o,
                                                 Value vDescOf, int64_t k0,
                                                 int64_t keys) {
  // O += P V: V through an MN-major descriptor, 16 keys (2 swizzle rows of
  // 8) per k-step.
  SmallVector<Value> acc(o);
  for (int64_t kk = 0; kk < keys / 16; ++kk)
    acc =
        wg.mmaRS(pRegs.slice(4 * kk, 4),
                 wg.advance(vDescOf, (k0 + 16 * kk) * SmemTile::kPanelRowBytes),
                 cfg.dv, acc);
  wg.commit();
  return acc;
}

SmallVector<Value> ForwardKernelEmitter::emitStep(OnlineAttentionOp step,
                                                  Value kStart, int64_t k0,
                                                  int64_t keys,
                                                  ValueRange state,
                                                  Value maskModIf) {
  const int64_t m = cfg.mTiles, ns = keys / 8, nd = cfg.dv / 8;
  ValueRange accIn = state.take_front(m * nd);
  ValueRange maxIn = state.slice(m * nd, 2 * m);
  ValueRange sumIn = state.take_back(2 * m);

  // S = Q K^T, k-step outermost so each K fragment feeds every row tile.
  SmallVector<Value> s(m * ns, frags.zeroC());
  if (cfg.wgmma) {
    if (cfg.warpSpecialized)
      fagpu::ChannelGetOp::create(
          b, loc, cast<fagpu::ChannelType>(kChannel.getType()).getStageType(),
          kChannel, item);
    wg.fence();
    SmallVector<Value> acc = issueScores(k0, keys);
    wg.wait(0);
    acc = wg.fenceOperands(acc);
    if (cfg.warpSpecialized)
      fagpu::ChannelReleaseOp::create(b, loc, kChannel, item);
    s = frags.fromAccumulator(acc);
  }
  for (int64_t ks = 0; !cfg.wgmma && ks < cfg.d / 16; ++ks) {
    SmallVector<Value> qa;
    for (int64_t mt = 0; mt < m; ++mt)
      qa.push_back(cfg.qInRegs ? qFrags[mt * (cfg.d / 16) + ks]
                               : loadQ(mt, ks));
    for (int64_t np = 0; np < keys / 16; ++np) {
      auto bs = loadKFrags(k0 + 16 * np, ks);
      for (int64_t mt = 0; mt < m; ++mt) {
        frags.mma16(qa[mt], bs,
                    MutableArrayRef<Value>(s).slice(mt * ns + 2 * np, 2));
      }
    }
  }

  SoftmaxUpdate sm =
      emitSoftmax(step, kStart, keys, s, maxIn, sumIn, maskModIf);

  // O = alpha * O + P V, P taken from the score fragments.
  SmallVector<Value> acc;
  for (int64_t mt = 0; mt < m; ++mt)
    for (int64_t dn = 0; dn < nd; ++dn)
      acc.push_back(frags.scaleRows(accIn[mt * nd + dn], sm.alphas[2 * mt],
                                    sm.alphas[2 * mt + 1]));
  if (cfg.wgmma) {
    SmallVector<Value> o = frags.toAccumulator(acc);
    SmallVector<Value> pRegs = wg.fenceOperands(packP(sm.p, keys));
    o = wg.fenceOperands(o);
    if (cfg.warpSpecialized)
      fagpu::ChannelGetOp::create(
          b, loc, cast<fagpu::ChannelType>(vChannel.getType()).getStageType(),
          vChannel, item);
    wg.fence();
    o = issuePV(pRegs, o, vDescBlock, k0, keys);
    wg.wait(0);
    o = wg.fenceOperands(o);
    if (cfg.warpSpecialized)
      fagpu::ChannelReleaseOp::create(b, loc, vChannel, item);
    acc = frags.fromAccumulator(o);
  }
  for (int64_t kk = 0; !cfg.wgmma && kk < keys / 16; ++kk) {
    SmallVector<Value> pa;
    for (int64_t mt = 0; mt < m; ++mt)
      pa.push_back(frags.packA(pFrag(sm.p, keys, mt, 2 * kk),
                               pFrag(sm.p, keys, mt, 2 * kk + 1)));
    for (int64_t dp = 0; dp < cfg.dv / 16; ++dp) {
      auto bs = loadVFrags(k0 + 16 * kk, dp);
      for (int64_t mt = 0; mt < m; ++mt) {
        frags.mma16(pa[mt], bs,
                    MutableArrayRef<Value>(acc).slice(mt * nd + 2 * dp, 2));
      }
    }
  }

  SmallVector<Value> result = acc;
  llvm::append_range(result, sm.newMax);
  llvm::append_range(result, sm.newSum);
  return result;
}

void ForwardKernelEmitter::emitKeyLoop(KeyLoop &kl, SmallVector<Value> &state) {
  Value lb = clone(kl.loop.getLowerBound()),
        ub = clone(kl.loop.getUpperBound());
  auto loop = scf::ForOp::create(b, loc, lb, ub, idx(cfg.bc), state);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value kStart = loop.getInductionVar();
  if (cfg.warpSpecialized) {
    // Item i = the block's position in [lo, hi), across loops, in buffer
    // i % stages of the stage-major K and V rings.
    item = add(itemBase, divu(sub(kStart, lo), cfg.bc));
    kDescBlock = stageDescriptor(kDesc, kTile.bytes(2), cfg.stages, item);
    vDescBlock = stageDescriptor(vDesc, vTile.bytes(2), cfg.stages, item);
    SmallVector<Value> newState(loop.getRegionIterArgs());
    newState = emitStep(kl.step, kStart, 0, cfg.bc, newState,
                        maskModVerdict(kl, kStart));
    scf::YieldOp::create(b, loc, newState);
    state.assign(loop.getResults().begin(), loop.getResults().end());
    return;
  }
  // Buffers alternate with the block's position in [lo, hi), across loops.
  Value buf = cfg.stages == 1 ? idx(0) : remu(divu(sub(kStart, lo), cfg.bc), 2);
  Value kRow0 = mul(buf, idx(cfg.bc));
  if (cfg.wgmma) {
    // The descriptors of this block's buffer (start address in 16 bytes).
    Value units = arith::IndexCastOp::create(
        b, loc, b.getI64Type(), mul(kRow0, idx(SmemTile::kPanelRowBytes / 16)));
    kDescBlock = arith::AddIOp::create(b, loc, kDesc, units);
    vDescBlock = arith::AddIOp::create(b, loc, vDesc, units);
  } else {
    // The lanes' ldmatrix offsets in this block's buffer.
    Value kRow0I32 = toI32(kRow0);
    kBlock = addNsw(kLane, mulNsw(kRow0I32, i32(kTile.storedCols())));
    vBlock = addNsw(vLane, mulNsw(kRow0I32, i32(vTile.storedCols())));
  }
  Value next = add(kStart, idx(cfg.bc));
  // A paged cache: the next block's page lookups before the wait, so that
  // their latency hides behind this block's copies.
  PagedBlock nextPages = lookupPages(next);

  // Block kStart has landed for every thread, and every warp is done with
  // the buffer the next copies overwrite.
  waitGroups(0);
  if (cfg.wgmma)
    wg.fenceSharedForAsync();
  gpu::BarrierOp::create(b, loc);
  auto prefetch = [&](Value dstRow0) {
    auto ifOp = scf::IfOp::create(b, loc, slt(next, hi), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    copyKV(next, dstRow0, nextPages);
  };
  if (cfg.stages == 2)
    prefetch(mul(sub(idx(1), buf), idx(cfg.bc)));

  // The softmax runs on sub-blocks of `cfg.softmaxKeys` keys: fewer live
  // score registers, one more rescale of O per sub-block.
  SmallVector<Value> newState(loop.getRegionIterArgs());
  Value maskModIf = maskModVerdict(kl, kStart);
  for (int64_t k0 = 0; k0 < cfg.bc; k0 += cfg.softmaxKeys)
    newState = emitStep(kl.step, add(kStart, idx(k0)), k0, cfg.softmaxKeys,
                        newState, maskModIf);

  if (cfg.stages == 1) {
    gpu::BarrierOp::create(b, loc);
    prefetch(idx(0));
  }
  scf::YieldOp::create(b, loc, newState);
  state.assign(loop.getResults().begin(), loop.getResults().end());
}

void ForwardKernelEmitter::emitOverlappedLoops(SmallVector<Value> &state) {
  const int64_t nd = cfg.dv / 8, keys = cfg.bc;
  Type kStageType = cast<fagpu::ChannelType>(kChannel.getType()).getStageType();
  Type vStageType = cast<fagpu::ChannelType>(vChannel.getType()).getStageType();
  auto stageDesc = [&](Value desc, const SmemTile &tile, Value it) {
    return stageDescriptor(desc, tile.bytes(2), cfg.stages, it);
  };

  // Ping-pong: warpgroup w issues its GEMMs after bar.sync on barrier
  // kTurnBarrier + w, then hands the turn to the next warpgroup; the first
  // one starts with the turn.
  const int64_t consumers = cfg.warps / 4;
  Value wgIdx = divu(tid, kWarpgroupThreads);
  auto turnBarrier = [&](Value w) { return toI32(add(w, idx(kTurnBarrier))); };
  Value turnThreads = i32(2 * kWarpgroupThreads);
  if (!cfg.persistent)
    startTurns();
  Value nextWg = remu(add(wgIdx, idx(1)), consumers);
  // (From a fenced index, so that no part of it is hoisted out of the tile
  // loop; in i32 and warp-uniform: held across the loops as a per-thread
  // index it spilled.)
  const bool bounded = boundsPerWarpgroup();
  Value blocks32 = bounded ? warpgroupBlocks(wg.opaqueIndex(wgIdx)) : Value();
  auto warpgroupBlockCount = [&]() -> Value {
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), blocks32);
  };
  Value blocks = bounded ? warpgroupBlockCount() : Value();
  Value hiW = bounded ? arith::MinSIOp::create(
                            b, loc, hi, add(lo, mul(blocks, idx(cfg.bc))))
                      : Value();
  Value computes = bounded ? slt(idx(0), blocks) : slt(lo, hi);

  // Prologue: block lo. A masked step's mask (and mask_mod, applied to the
  // whole block) is exact for any block, so the first step with the mask
  // attribute, else the first masked one (if any), serves whichever loop
  // holds lo.
  OnlineAttentionOp firstStep = ta.loops.front().step;
  for (bool rule : {true, false}) {
    auto it = llvm::find_if(ta.loops, [&](KeyLoop &kl) {
      return rule ? kl.step.hasMaskRule() : kl.step.isMasked();
    });
    if (it != ta.loops.end()) {
      firstStep = it->step;
      break;
    }
  }
  const int64_t pCount = keys / 4;
  SmallVector<Value> init = state;
  init.append(pCount, i32(0));
  auto pro = scf::IfOp::create(b, loc, TypeRange(ValueRange(init)), computes,
                               /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(pro.elseBlock());
    scf::YieldOp::create(b, loc, init);
    b.setInsertionPointToStart(pro.thenBlock());
    item = itemBase;
    kDescBlock = stageDesc(kDesc, kTile, item);
    fagpu::ChannelGetOp::create(b, loc, kStageType, kChannel, item);
    wg.fence();
    SmallVector<Value> acc = issueScores(0, keys);
    wg.wait(0);
    acc = wg.fenceOperands(acc);
    fagpu::ChannelReleaseOp::create(b, loc, kChannel, item);
    ValueRange st(state);
    SoftmaxUpdate sm =
        emitSoftmax(firstStep, lo, keys, frags.fromAccumulator(acc),
                    st.slice(nd, 2), st.slice(nd + 2, 2));
    // O is still zero: no rescale.
    SmallVector<Value> out(st.take_front(nd));
    llvm::append_range(out, sm.newMax);
    llvm::append_range(out, sm.newSum);
    llvm::append_range(out, packP(sm.p, keys));
    scf::YieldOp::create(b, loc, out);
  }
  SmallVector<Value> cur(pro.getResults());

  // Blocks lo + bc, ...: each loop clipped to start there.
  Value second = add(lo, idx(cfg.bc));
  for (KeyLoop &kl : ta.loops) {
    Value lb =
        arith::MaxSIOp::create(b, loc, clone(kl.loop.getLowerBound()), second);
    Value ub = clone(kl.loop.getUpperBound());
    if (bounded)
      ub = arith::MinSIOp::create(b, loc, ub, hiW);
    auto loop = scf::ForOp::create(b, loc, lb, ub, idx(cfg.bc), cur);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value kStart = loop.getInductionVar();
    ValueRange st = loop.getRegionIterArgs();
    Value it = add(itemBase, divu(sub(kStart, lo), cfg.bc)),
          prev = sub(it, idx(1));
    kDescBlock = stageDesc(kDesc, kTile, it);
    Value vPrev = stageDesc(vDesc, vTile, prev);
    SmallVector<Value> o =
        wg.fenceOperands(frags.toAccumulator(st.take_front(nd)));
    SmallVector<Value> pRegs =
        wg.fenceOperands(SmallVector<Value>(st.take_back(pCount)));
    fagpu::ChannelGetOp::create(b, loc, kStageType, kChannel, it);
    if (cfg.pingPong)
      NVVM::BarrierOp::create(b, loc, TypeRange{}, turnBarrier(wgIdx),
                              turnThreads, NVVM::BarrierReductionAttr(),
                              Value());
    wg.fence();
    SmallVector<Value> sAcc = issueScores(0, keys);
    // wgmma.fence again after the wait (as ptxas would insert it): the
    // register operands of P V.
    fagpu::ChannelGetOp::create(b, loc, vStageType, vChannel, prev);
    wg.fence();
    o = issuePV(pRegs, o, vPrev, 0, keys);
    if (cfg.pingPong)
      NVVM::BarrierArriveOp::create(b, loc, turnBarrier(nextWg), turnThreads);
    // S is the older group: done once at most the P V group is pending.
    wg.wait(1);
    sAcc = wg.fenceOperands(sAcc);
    fagpu::ChannelReleaseOp::create(b, loc, kChannel, it);
    SoftmaxUpdate sm = emitSoftmax(
        kl.step, kStart, keys, frags.fromAccumulator(sAcc), st.slice(nd, 2),
        st.slice(nd + 2, 2), maskModVerdict(kl, kStart));
    wg.wait(0);
    o = wg.fenceOperands(o);
    fagpu::ChannelReleaseOp::create(b, loc, vChannel, prev);
    SmallVector<Value> next;
    for (Value f : frags.fromAccumulator(o))
      next.push_back(frags.scaleRows(f, sm.alphas[0], sm.alphas[1]));
    llvm::append_range(next, sm.newMax);
    llvm::append_range(next, sm.newSum);
    llvm::append_range(next, packP(sm.p, keys));
    scf::YieldOp::create(b, loc, next);
    cur.assign(loop.getResults().begin(), loop.getResults().end());
  }

  // Epilogue: O += P V of the last block. (The count cast again from its
  // i32: no index value of it lives across the loops.)
  if (bounded) {
    blocks = warpgroupBlockCount();
    computes = slt(idx(0), blocks);
  }
  ValueRange st(cur);
  SmallVector<Value> accOut(st.take_front(nd));
  auto epi = scf::IfOp::create(b, loc, TypeRange(ValueRange(accOut)), computes,
                               /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(epi.elseBlock());
    scf::YieldOp::create(b, loc, accOut);
    b.setInsertionPointToStart(epi.thenBlock());
    Value last = add(itemBase, sub(bounded ? blocks : tileBlocks(), idx(1)));
    SmallVector<Value> o = wg.fenceOperands(frags.toAccumulator(accOut));
    SmallVector<Value> pRegs =
        wg.fenceOperands(SmallVector<Value>(st.take_back(pCount)));
    fagpu::ChannelGetOp::create(b, loc, vStageType, vChannel, last);
    wg.fence();
    o = issuePV(pRegs, o, stageDesc(vDesc, vTile, last), 0, keys);
    wg.wait(0);
    o = wg.fenceOperands(o);
    fagpu::ChannelReleaseOp::create(b, loc, vChannel, last);
    scf::YieldOp::create(b, loc, frags.fromAccumulator(o));
  }
  state.assign(epi.getResults().begin(), epi.getResults().end());
  llvm::append_range(state, st.slice(nd, 4));

  // The blocks past this warpgroup's: taken and released so that the
  // stages turn over, and ping-pong's turn passed on for every block but
  // the first (the prologue takes none), as the loops above would.
  if (!bounded)
    return;
  auto drain = scf::ForOp::create(b, loc, blocks, tileBlocks(), idx(1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(drain.getBody());
  Value i = drain.getInductionVar();
  Value it = add(itemBase, i);
  fagpu::ChannelGetOp::create(b, loc, kStageType, kChannel, it);
  if (cfg.pingPong) {
    auto turn = scf::IfOp::create(b, loc, slt(idx(0), i), false);
    OpBuilder::InsertionGuard turnGuard(b);
    b.setInsertionPointToStart(turn.thenBlock());
    NVVM::BarrierOp::create(b, loc, TypeRange{}, turnBarrier(wgIdx),
                            turnThreads, NVVM::BarrierReductionAttr(), Value());
    NVVM::BarrierArriveOp::create(b, loc, turnBarrier(nextWg), turnThreads);
  }
  fagpu::ChannelReleaseOp::create(b, loc, kChannel, it);
  fagpu::ChannelGetOp::create(b, loc, vStageType, vChannel, it);
  fagpu::ChannelReleaseOp::create(b, loc, vChannel, it);
}

Value ForwardKernelEmitter::warpgroupBlocks(Value wgIdx) {
  // In i32, as the softmax's mask compares (whose terms it shares).
  OnlineAttentionOp step = ta.loops.back().step;
  Value qStart = clone(step.getQStart()), qLen = clone(step.getQLen());
  const int64_t wgRows = 16 * 4 * cfg.mTiles;
  Value first = toI32(add(qStart, mul(wgIdx, idx(wgRows))));
  Value rows = toI32(qLen);
  Value blocks = toI32(tileBlocks());
  // Keys up to row + (kLen - qLen) + right are visible to a row
  // (boundsPerWarpgroup: the band has a right edge).
  Value last = arith::MinSIOp::create(b, loc, add(first, i32(wgRows - 1)),
                                      sub(rows, i32(1)));
  Value off = toI32(sub(clone(step.getKLen()), qLen));
  Value end = add(add(last, off), add(kmask.rightWidth(b, loc), i32(1)));
  Value needed =
      arith::CeilDivSIOp::create(b, loc, sub(end, toI32(lo)), i32(cfg.bc));
  blocks = arith::MinSIOp::create(
      b, loc, blocks, arith::MaxSIOp::create(b, loc, needed, i32(0)));
  blocks = arith::SelectOp::create(b, loc, slt(first, rows), blocks, i32(0));
  // Lane 0's copy: ptxas then knows the count to be warp-uniform.
  return gpu::ShuffleOp::create(b, loc, blocks, 0, kWarpSize,
                                gpu::ShuffleMode::IDX)
      .getShuffleResult();
}

void ForwardKernelEmitter::emitEpilogue(ValueRange state) {
  const int64_t m = cfg.mTiles, nd = cfg.dv / 8;
  Value rows = clone(ta.rows);
  Value ob = clone(ta.outOffsets[0]), oh = clone(ta.outOffsets[1]),
        oq = clone(ta.outOffsets[2]);
  Value lb = clone(ta.lseOffsets[0]), lh = clone(ta.lseOffsets[1]),
        lq = clone(ta.lseOffsets[2]);
  Value zero = f32(0.0), one = f32(1.0);
  Value inf = f32(std::numeric_limits<double>::infinity());
  // Packed out [H, T, Dv] and lse [H, T] have no batch index.
  auto outIndices = [&](Value row, Value col) -> SmallVector<Value> {
    if (ta.packedOut)
      return {oh, row, col};
    return {ob, oh, row, col};
  };
  auto lseIndices = [&](Value row) -> SmallVector<Value> {
    if (ta.packedOut)
      return {lh, add(lq, row)};
    return {lb, lh, add(lq, row)};
  };
  Value isLeader =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tig, idx(0));
  for (int64_t mt = 0; mt < m; ++mt) {
    Value invs[2];
    Value lses[2];
    for (int64_t h = 0; h < 2; ++h) {
      Value sum = state[m * nd + 2 * m + 2 * mt + h];
      for (int32_t mask : {1, 2})
        sum = arith::AddFOp::create(
            b, loc, sum,
            gpu::ShuffleOp::create(b, loc, sum, mask, kWarpSize,
                                   gpu::ShuffleMode::XOR)
                .getShuffleResult());
      // No visible key: out = 0, lse = +inf.
      Value empty =
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, sum, zero);
      invs[h] = arith::SelectOp::create(
          b, loc, empty, zero, arith::DivFOp::create(b, loc, one, sum));
      Value mx = state[m * nd + 2 * mt + h];
      Value lse = arith::MulFOp::create(
          b, loc, f32(kLn2),
          arith::AddFOp::create(b, loc, mx, math::Log2Op::create(b, loc, sum)));
      lses[h] = arith::SelectOp::create(b, loc, empty, inf, lse);
    }
    SmallVector<Value> outFrags;
    for (int64_t dn = 0; dn < nd; ++dn)
      outFrags.push_back(
          frags.scaleRows(state[mt * nd + dn], invs[0], invs[1]));
    auto storeLse = [&] {
      for (int64_t h = 0; h < 2; ++h) {
        Value r = add(add(warpRow, g), idx(16 * mt + 8 * h));
        auto lseIf = scf::IfOp::create(
            b, loc,
            arith::AndIOp::create(b, loc, slt(r, rows), isLeader).getResult(),
            false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(lseIf.thenBlock());
        memref::StoreOp::create(b, loc, lses[h], ta.lse, lseIndices(r));
      }
    };
    if (cfg.persistent && !ta.packedOut) {
      emitTmaStore(outFrags, mt, ob, oh, oq);
      storeLse();
      continue;
    }
    if (cfg.persistent) {
      // Packed sequences: staged the same way; a warpgroup whose rows all
      // lie in the sequence stores TMA boxes, one with rows past its end
      // copies the valid rows out (a box would write the next sequence's).
      emitTmaStore(outFrags, mt, ob, oh, oq, rows);
      storeLse();
      continue;
    }
    for (int64_t h = 0; h < 2; ++h) {
      Value r = add(add(warpRow, g), idx(16 * mt + 8 * h));
      auto ifOp = scf::IfOp::create(b, loc, slt(r, rows), false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      Value outRow = add(oq, r);
      for (int64_t dn = 0; dn < nd; ++dn)
        storeGlobalVector(
            b, loc,
            cfg.f32Out ? vector::ExtractOp::create(b, loc, outFrags[dn],
                                                   ArrayRef<int64_t>{h})
                             .getResult()
                       : frags.truncRow(outFrags[dn], h),
            ta.out, outIndices(outRow, add(mul(tig, idx(2)), idx(8 * dn))));
      auto lseIf = scf::IfOp::create(b, loc, isLeader, false);
      b.setInsertionPointToStart(lseIf.thenBlock());
      memref::StoreOp::create(b, loc, lses[h], ta.lse, lseIndices(r));
    }
  }
}

void ForwardKernelEmitter::emitTmaStore(ArrayRef<Value> outFrags, int64_t mt,
                                        Value ob, Value oh, Value oq,
                                        Value packedRows) {
  const int64_t panels = cfg.dv / TileLayout::kPanelCols;
  // The thread's coordinates from a fenced copy of its index, so the
  // swizzled staging and box addresses, invariant over a persistent kernel's
  // tiles, are formed here instead of being held (or spilled) across the
  // tiles.
  Value t = wg.opaqueIndex(tid);
  Value wgIdx = divu(t, kWarpgroupThreads);
  Value lane = remu(t, kWarpSize);
  Value gHere = divu(lane, 4);
  Value laneRow = add(mul(divu(t, kWarpSize), idx(cfg.br / cfg.warps)), gHere);
  Value colPair = mul(remu(lane, 4), idx(2));
  auto storeBarrier = [&] {
    NVVM::BarrierOp::create(
        b, loc, TypeRange{}, toI32(add(wgIdx, idx(kStoreBarrier))),
        i32(kWarpgroupThreads), NVVM::BarrierReductionAttr(), Value());
  };
  // The last tile's stores have read the staging rows of this warpgroup.
  {
    auto ifOp = scf::IfOp::create(b, loc, isWarpgroupLeader(), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0),
                                         b.getUnitAttr());
  }
  storeBarrier();
  // Rows warpRow + g (+ 8) of panel dn / 8, chunk dn % 8 swizzled with the
  // row (128-byte swizzle: chunk ^ row % 8, and row % 8 = g).
  for (int64_t h = 0; h < 2; ++h) {
    Value r = add(laneRow, idx(16 * mt + 8 * h));
    Value rowBase = add(mul(r, idx(TileLayout::kPanelCols)), colPair);
    for (int64_t dn = 0; dn < cfg.dv / 8; ++dn) {
      Value chunk = arith::XOrIOp::create(b, loc, idx(dn % 8), gHere);
      Value at = add(add(rowBase, mul(chunk, idx(8))),
                     idx((dn / 8) * cfg.br * TileLayout::kPanelCols));
      vector::StoreOp::create(b, loc, frags.truncRow(outFrags[dn], h), oStage,
                              ValueRange{at});
    }
  }
  // Visible to the TMA unit (async proxy), then stored by one thread.
  wg.fenceSharedForAsync();
  storeBarrier();
  OpBuilder::InsertionGuard guard(b);
  Value row0 = mul(wgIdx, idx(kWarpgroupRows));
  if (packedRows) {
    // (Uniform in the warpgroup.)
    auto full = scf::IfOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, packedRows,
                              add(row0, idx(kWarpgroupRows))),
        /*withElseRegion=*/true);
    b.setInsertionPointToStart(full.elseBlock());
    copyStagedRows(oh, oq, row0, packedRows);
    b.setInsertionPointToStart(full.thenBlock());
  }
  auto ifOp = scf::IfOp::create(b, loc, isWarpgroupLeader(), false);
  b.setInsertionPointToStart(ifOp.thenBlock());
  auto smemSpace =
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  SmallVector<int64_t> boxShape(ta.packedOut ? 1 : 2, 1);
  boxShape.append({kWarpgroupRows, TileLayout::kPanelCols});
  auto boxType = MemRefType::get(boxShape, cfg.elt, AffineMap(), smemSpace);
  for (int64_t p = 0; p < panels; ++p) {
    // Bytes from the dynamic base: the staging tile, panel p, the
    // warpgroup's rows.
    Value offset =
        add(oStageOffset, add(idx(p * cfg.br * TileLayout::kPanelCols * 2),
                              mul(row0, idx(TileLayout::kPanelCols * 2))));
    Value box =
        memref::ViewOp::create(b, loc, boxType, smemBase, offset, ValueRange{});
    SmallVector<Value> coords = {idx(p * TileLayout::kPanelCols), add(oq, row0),
                                 oh};
    if (!ta.packedOut)
      coords.push_back(ob);
    nvgpu::TmaAsyncStoreOp::create(b, loc, box, oMap, coords, Value());
  }
  NVVM::CpAsyncBulkCommitGroupOp::create(b, loc);
}

void ForwardKernelEmitter::copyStagedRows(Value oh, Value oq, Value row0,
                                          Value rows) {
  // Chunk i of the warpgroup's rows x Dv / 8 chunks: thread t copies
  // chunks t + 128 j (consecutive threads: consecutive chunks of a row,
  // the global stores coalesce). Row r's chunk c of panel c / 8 is
  // swizzled to c % 8 ^ r % 8 (128-byte swizzle; the staging rows start
  // at a multiple of 8).
  const int64_t chunksPerRow = cfg.dv / 8;
  const int64_t total = kWarpgroupRows * chunksPerRow;
  Value lane = remu(tid, kWarpgroupThreads);
  auto vecType = VectorType::get({8}, cfg.elt);
  // (A loop, not unrolled here: the epilogue's registers are scarce.)
  auto loop =
      scf::ForOp::create(b, loc, lane, idx(total), idx(kWarpgroupThreads));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  {
    Value i = loop.getInductionVar();
    Value r = divu(i, chunksPerRow), c = remu(i, chunksPerRow);
    Value tileRow = add(row0, r);
    auto ifOp = scf::IfOp::create(b, loc, slt(tileRow, rows), false);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Value swizzled = arith::XOrIOp::create(b, loc, remu(c, 8), remu(r, 8));
    Value at = add(add(mul(divu(c, 8), idx(cfg.br * TileLayout::kPanelCols)),
                       mul(tileRow, idx(TileLayout::kPanelCols))),
                   mul(swizzled, idx(8)));
    Value chunk =
        vector::LoadOp::create(b, loc, vecType, oStage, ValueRange{at},
                               /*nontemporal=*/false, llvm::MaybeAlign(16));
    vector::StoreOp::create(b, loc, chunk, ta.out,
                            ValueRange{oh, add(oq, tileRow), mul(c, idx(8))},
                            /*nontemporal=*/false, llvm::MaybeAlign(16));
  }
}

void ForwardKernelEmitter::consumerBarrier() {
  NVVM::BarrierOp::create(
      b, loc, TypeRange{},
      arith::ConstantIntOp::create(b, loc, b.getI32Type(), 1),
      arith::ConstantIntOp::create(b, loc, b.getI32Type(), cfg.threads()),
      NVVM::BarrierReductionAttr(), Value());
}

void ForwardKernelEmitter::startTurns() {
  if (!cfg.pingPong)
    return;
  Value wgIdx = divu(tid, kWarpgroupThreads);
  auto first = scf::IfOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, wgIdx, idx(0)),
      false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(first.thenBlock());
  NVVM::BarrierArriveOp::create(b, loc, toI32(idx(kTurnBarrier)),
                                i32(2 * kWarpgroupThreads));
}

void ForwardKernelEmitter::tileCount() {
  // Every index of the tile is cloned afresh in the loop's region.
  mapping.clear();
  for (Value &e : tileExtent)
    e = idx(1);
  for (auto [ub, dim] :
       llvm::zip_equal(ta.forall.getMixedUpperBound(), ta.blockDims))
    tileExtent[static_cast<unsigned>(dim)] = clone(ub);
  tiles = mul(mul(tileExtent[0], tileExtent[1]), tileExtent[2]);
}

void ForwardKernelEmitter::mapTile(Value t) {
  // In i32: a 64-bit division is a subroutine call in SASS, and its
  // operands and results take register pairs (tile indices stay far below
  // 2^31).
  Value coord[3];
  auto [rest, x] = divRemU32(t, tileExtent[0]);
  coord[0] = sub(sub(tileExtent[0], idx(1)), x);
  std::tie(coord[2], coord[1]) = divRemU32(rest, tileExtent[1]);
  for (auto [iv, dim] :
       llvm::zip_equal(ta.forall.getInductionVars(), ta.blockDims))
    mapping.map(iv, coord[static_cast<unsigned>(dim)]);
}

scf::ForOp ForwardKernelEmitter::beginTileLoop() {
  tileCount();
  // Round k takes tiles [k gridX, (k + 1) gridX), block b the b-th of them
  // in even rounds and the b-th from the end in odd ones: with a causal mask
  // (tile lengths falling along x) a block's long and short tiles pair up.
  Value rounds = arith::CeilDivUIOp::create(b, loc, tiles, gridX);
  auto loop = scf::ForOp::create(b, loc, idx(0), rounds, idx(1),
                                 ValueRange{idx(0), idx(0)});
  b.setInsertionPointToStart(loop.getBody());
  Value round = loop.getInductionVar();
  Value odd = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                    remu(round, 2), idx(1));
  Value pos = arith::SelectOp::create(b, loc, odd,
                                      sub(sub(gridX, idx(1)), blockX), blockX);
  Value t = add(mul(round, gridX), pos);
  ValueRange carried = loop.getRegionIterArgs();
  tileIf = scf::IfOp::create(b, loc, carried.getTypes(), slt(t, tiles),
                             /*withElseRegion=*/true);
  b.setInsertionPointToStart(tileIf.elseBlock());
  scf::YieldOp::create(b, loc, carried);
  b.setInsertionPointToStart(tileIf.thenBlock());
  mapTile(t);
  itemBase = carried[0];
  tileIndex = carried[1];
  return loop;
}

void ForwardKernelEmitter::endTileLoop(scf::ForOp loop) {
  scf::YieldOp::create(
      b, loc, ValueRange{add(itemBase, tileBlocks()), add(tileIndex, idx(1))});
  b.setInsertionPointToEnd(loop.getBody());
  scf::YieldOp::create(b, loc, tileIf.getResults());
  b.setInsertionPointAfter(loop);
}

void ForwardKernelEmitter::emitWarpRoles(Value base, Value pad) {
  MLIRContext *ctx = b.getContext();
  auto smemSpace =
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  // One buffer: the tile's 64-column panels, each one TMA box [1, 1, Bc, 64]
  // ([1, Bc, 64] packed) of 128-byte swizzle (the layout the wgmma
  // descriptors read).
  int64_t rank = ta.k.rank();
  auto channel = [&](Value host, int64_t cols, int64_t byteOffset, int64_t rows,
                     int64_t stages) {
    return createPanelChannel(b, loc, base, add(pad, idx(byteOffset)), host,
                              rows, cols, stages, cfg.elt, cfg.threads(), rank);
  };
  auto [kCh, kMap] = channel(kMapHost, cfg.d, cfg.qBytes, cfg.bc, cfg.stages);
  auto [vCh, vMap] =
      channel(vMapHost, cfg.dv, cfg.qBytes + cfg.kBytes, cfg.bc, cfg.stages);
  Value qMap;
  if (cfg.persistent)
    std::tie(qChannel, qMap) = channel(qMapHost, cfg.d, 0, cfg.br, 2);
  // Dynamic: the tile index of each Q buffer, after O's staging tile.
  if (cfg.dynamic)
    tileSlots = memref::ViewOp::create(
        b, loc, MemRefType::get({2}, b.getI32Type(), AffineMap(), smemSpace),
        base, add(pad, idx(cfg.qBytes + cfg.kBytes + cfg.vBytes + cfg.oBytes)),
        ValueRange{});
  kChannel = kCh;
  vChannel = vCh;
  // The producer keeps few registers; the consumers take the rest of what
  // the block was launched with (setmaxnreg: multiples of 8).
  int64_t consumers = cfg.warps / 4;
  int64_t perWarpgroup = warpgroupRegisters(cfg.launchThreads());
  // Persistent, the producer also walks the tiles: it needs 32 and takes
  // what the consumers leave (32 with three consumers, 40 with two, whose
  // 232 registers hold the D = 128 loop without spills).
  int64_t consumerRegs = std::min<int64_t>(
      240, (perWarpgroup - (cfg.persistent ? 32 : kMinProducerRegs)) /
               consumers / 8 * 8);
  int64_t producerRegs = cfg.persistent
                             ? (perWarpgroup - consumers * consumerRegs) / 8 * 8
                             : kMinProducerRegs;
  auto roles = fagpu::WarpSpecializeOp::create(b, loc, consumers, producerRegs,
                                               consumerRegs);
  for (Region *r : {&roles.getProducer(), &roles.getConsumers()}) {
    Block *block = b.createBlock(r);
    b.setInsertionPointToEnd(block);
    fagpu::YieldOp::create(b, loc);
  }
  // Producer: K and V of every visible key block, in order (of each of its
  // tiles, persistent).
  b.setInsertionPoint(roles.getProducer().front().getTerminator());
  if (cfg.dynamic) {
    emitDynamicProducer(qMap, kMap, vMap);
  } else if (cfg.persistent) {
    scf::ForOp tileLoop = beginTileLoop();
    emitProducerTile(qMap, kMap, vMap);
    endTileLoop(tileLoop);
  } else {
    emitProducerTile(qMap, kMap, vMap);
  }
  b.setInsertionPoint(roles.getConsumers().front().getTerminator());
}

void ForwardKernelEmitter::emitProducerTile(Value qMap, Value kMap,
                                            Value vMap) {
  if (cfg.persistent) {
    lo = clone(ta.loops.front().loop.getLowerBound());
    hi = clone(ta.loops.back().loop.getUpperBound());
  }
  Value kBatch = clone(ta.k.offsets[0]), kHead = clone(ta.k.offsets[1]);
  Value vBatch = clone(ta.v.offsets[0]), vHead = clone(ta.v.offsets[1]);
  if (cfg.persistent && ta.packedOut)
    fagpu::ChannelPutTmaOp::create(
        b, loc, qChannel, tileIndex, qMap,
        ValueRange{idx(0), clone(ta.q.offsets[2]), clone(ta.q.offsets[1])});
  else if (cfg.persistent)
    fagpu::ChannelPutTmaOp::create(b, loc, qChannel, tileIndex, qMap,
                                   ValueRange{idx(0), clone(ta.q.offsets[2]),
                                              clone(ta.q.offsets[1]),
                                              clone(ta.q.offsets[0])});
  auto loop = scf::ForOp::create(b, loc, idx(0), tileBlocks(), idx(1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value i = loop.getInductionVar();
  Value kStart = add(lo, mul(i, idx(cfg.bc)));
  Value it = add(itemBase, i);
  if (ta.packedOut) {
    // Packed [H, T, D]: the sequence's rows from its first key row.
    Value row = add(clone(ta.k.rowBase), kStart);
    fagpu::ChannelPutTmaOp::create(b, loc, kChannel, it, kMap,
                                   ValueRange{idx(0), row, kHead});
    fagpu::ChannelPutTmaOp::create(b, loc, vChannel, it, vMap,
                                   ValueRange{idx(0), row, vHead});
    return;
  }
  fagpu::ChannelPutTmaOp::create(b, loc, kChannel, it, kMap,
                                 ValueRange{idx(0), kStart, kHead, kBatch});
  fagpu::ChannelPutTmaOp::create(b, loc, vChannel, it, vMap,
                                 ValueRange{idx(0), kStart, vHead, vBatch});
}

void ForwardKernelEmitter::emitDynamicProducer(Value qMap, Value kMap,
                                               Value vMap) {
  auto leader = scf::IfOp::create(b, loc, isWarpgroupLeader(), false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(leader.thenBlock());
  tileCount();
  Type index = b.getIndexType();
  SmallVector<Type> types(3, index);
  SmallVector<Location> locs(3, loc);
  // (tile, item base, tile count so far)
  auto loop =
      scf::WhileOp::create(b, loc, types, ValueRange{blockX, idx(0), idx(0)});
  Block *before = b.createBlock(&loop.getBefore(), {}, types, locs);
  scf::ConditionOp::create(b, loc, slt(before->getArgument(0), tiles),
                           before->getArguments());
  Block *after = b.createBlock(&loop.getAfter(), {}, types, locs);
  Value t = after->getArgument(0);
  itemBase = after->getArgument(1);
  tileIndex = after->getArgument(2);
  // Taken first: the atomic's latency passes under this tile's puts.
  Value taken = memref::AtomicRMWOp::create(
      b, loc, arith::AtomicRMWKind::addi, i32(1), counter, ValueRange{idx(0)});
  Value next = add(arith::IndexCastUIOp::create(b, loc, index, taken), gridX);
  mapTile(t);
  // The tile index goes into Q's slot once the consumers are done with the
  // buffer's last tile; Q's put publishes it (the full barrier's arrival
  // releases the store, the consumers' wait acquires it).
  fagpu::ChannelAcquireOp::create(b, loc, qChannel, tileIndex);
  memref::StoreOp::create(b, loc, toI32(t), tileSlots,
                          ValueRange{remu(tileIndex, 2)});
  emitProducerTile(qMap, kMap, vMap);
  scf::YieldOp::create(
      b, loc,
      ValueRange{next, add(itemBase, tileBlocks()), add(tileIndex, idx(1))});
  b.setInsertionPointAfter(loop);
  // The end marker: the first index past the tiles, as a Q item without
  // data.
  Value end = loop.getResult(2);
  fagpu::ChannelAcquireOp::create(b, loc, qChannel, end);
  memref::StoreOp::create(b, loc, toI32(loop.getResult(0)), tileSlots,
                          ValueRange{remu(end, 2)});
  fagpu::ChannelSignalOp::create(b, loc, qChannel, end);
}

void ForwardKernelEmitter::emitConsumerTile(Value qDesc0,
                                            function_ref<void()> cloneIndices) {
  cloneIndices();
  // (Dynamic, the tile loop's test took Q to read the tile index.)
  if (!cfg.dynamic)
    fagpu::ChannelGetOp::create(
        b, loc, cast<fagpu::ChannelType>(qChannel.getType()).getStageType(),
        qChannel, tileIndex);
  qDesc = stageDescriptor(qDesc0, cfg.qTileBytes, 2, tileIndex);
  SmallVector<Value> state = initialState();
  emitOverlappedLoops(state);
  emitEpilogue(state);
  // Every consumer's GEMMs on this Q are done (the epilogue waited).
  fagpu::ChannelReleaseOp::create(b, loc, qChannel, tileIndex);
}

void ForwardKernelEmitter::emitDynamicConsumer(
    Value qDesc0, function_ref<void()> cloneIndices) {
  tileCount();
  Type index = b.getIndexType();
  // (item base, tile count so far) -> (those, tile)
  SmallVector<Type> carried(2, index), forwarded(3, index);
  auto loop =
      scf::WhileOp::create(b, loc, forwarded, ValueRange{idx(0), idx(0)});
  Block *before = b.createBlock(&loop.getBefore(), {}, carried,
                                SmallVector<Location>(2, loc));
  Value count = before->getArgument(1);
  fagpu::ChannelGetOp::create(
      b, loc, cast<fagpu::ChannelType>(qChannel.getType()).getStageType(),
      qChannel, count);
  Value t = arith::IndexCastUIOp::create(
      b, loc, index,
      memref::LoadOp::create(b, loc, tileSlots, ValueRange{remu(count, 2)}));
  scf::ConditionOp::create(b, loc, slt(t, tiles),
                           ValueRange{before->getArgument(0), count, t});
  Block *after = b.createBlock(&loop.getAfter(), {}, forwarded,
                               SmallVector<Location>(3, loc));
  itemBase = after->getArgument(0);
  tileIndex = after->getArgument(1);
  mapTile(after->getArgument(2));
  emitConsumerTile(qDesc0, cloneIndices);
  scf::YieldOp::create(
      b, loc, ValueRange{add(itemBase, tileBlocks()), add(tileIndex, idx(1))});
  b.setInsertionPointAfter(loop);
}

void ForwardKernelEmitter::emit(gpu::LaunchOp launch) {
  nest = ta.forall;
  gpu::KernelDim3 blockIds = launch.getBlockIds();
  itemBase = idx(0);
  if (cfg.persistent) {
    // One block per multiprocessor (on x), each looping over tiles.
    blockX = blockIds.x;
    gridX = launch.getGridSize().x;
  } else {
    for (auto [iv, dim] :
         llvm::zip_equal(ta.forall.getInductionVars(), ta.blockDims))
      mapping.map(iv, getBlockId(blockIds, dim));
  }

  // The first uses fix the kernel's parameter order after outlining: the
  // run-time window sizes, then q, k, v, out, lse (the exponent factors
  // wherever the key loop first reads them).
  kmask = KernelMask::build(b, loc, cfg.mask, cfg.maskOperands);
  nq = memref::DimOp::create(b, loc, ta.q.memref, ta.q.rowDim());
  nk = memref::DimOp::create(b, loc, ta.k.memref, ta.k.rowDim());
  // Warp-specialized, V is read only through its tensor map, which the
  // runtime encodes from the kernel's memref parameter of the same tensor
  // (the manifest's rule): keep V a parameter.
  if (cfg.warpSpecialized)
    memref::DimOp::create(b, loc, ta.v.memref, ta.v.rowDim());
  // Persistent, likewise out (its TMA store's tensor map).
  if (cfg.persistent)
    memref::DimOp::create(b, loc, ta.out, ta.packedOut ? 1 : 2);
  // Packed sequences: the grid covers the longest sequence's query blocks;
  // a block past its own sequence's end skips even its setup (the
  // warp-specialized kernel's channels are created in the entry block: its
  // empty blocks create them and find no key block).
  if (ta.packedOut && !cfg.warpSpecialized) {
    auto active = scf::IfOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, clone(ta.rows),
                              idx(0)),
        /*withElseRegion=*/false);
    b.setInsertionPointToStart(active.thenBlock());
  }

  // Shared memory: Q | K buffers | V buffers.
  auto smemSpace =
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  Value base, baseAddr, pad;
  auto sharedMemory = [&] {
    base = gpu::DynamicSharedMemoryOp::create(
        b, loc,
        MemRefType::get({ShapedType::kDynamic}, b.getI8Type(), AffineMap(),
                        smemSpace));
    // wgmma: the tiles start at the first 1024-byte boundary of the block's
    // shared memory.
    if (cfg.wgmma) {
      baseAddr = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, base);
      pad = remu(sub(idx(1024), remu(baseAddr, 1024)), 1024);
    }
  };
  // Indices of the tiled IR, recomputed from the block ids.
  Value qBatch, qHead, qStart, kBatch, kHead, vBatch, vHead, kRowBase;
  auto cloneIndices = [&] {
    qBatch = clone(ta.q.offsets[0]);
    qHead = clone(ta.q.offsets[1]);
    qStart = clone(ta.q.offsets[2]);
    // (Paged: the sequence, whose pages are looked up per block.)
    kBatch = clone(ta.k.offsets[0]);
    vBatch = clone(ta.v.offsets[0]);
    kHead = clone(ta.k.offsets[1]);
    vHead = clone(ta.v.offsets[1]);
    kRowBase = isZeroInteger(ta.k.rowBase) ? Value() : clone(ta.k.rowBase);
    kLimit = ta.k.rowLimit ? clone(ta.k.rowLimit) : nk;
    kSeq = kBatch;
    lo = clone(ta.loops.front().loop.getLowerBound());
    hi = clone(ta.loops.back().loop.getUpperBound());
    // Clone every other index here too, so that the clones dominate all
    // uses.
    for (KeyLoop &kl : ta.loops) {
      clone(kl.loop.getLowerBound());
      clone(kl.loop.getUpperBound());
      if (kl.step.isMasked())
        for (Value v :
             {kl.step.getQStart(), kl.step.getQLen(), kl.step.getKLen()})
          clone(v);
      if (kl.step.hasModifiers())
        for (Value v : {kl.step.getBatchIndex(), kl.step.getHeadIndex()})
          clone(v);
    }
    for (OpFoldResult ofr : ta.outOffsets)
      clone(ofr);
    for (OpFoldResult ofr : ta.lseOffsets)
      clone(ofr);
    clone(ta.rows);
  };

  tid = launch.getThreadIds().x;
  if (cfg.warpSpecialized) {
    // Both roles need the shared memory and the indices; the rest of the
    // kernel is the consumers', with thread ids from 0.
    sharedMemory();
    if (!cfg.persistent)
      cloneIndices();
    emitWarpRoles(base, pad);
    tid = sub(launch.getThreadIds().x, idx(kWarpgroupThreads));
  }
  lane = remu(tid, kWarpSize);
  g = divu(lane, 4);
  tig = remu(lane, 4);
  warpRow = mul(divu(tid, kWarpSize), idx(cfg.br / cfg.warps));
  Value laneMod8 = remu(lane, 8), laneDiv16 = divu(lane, 16);
  aRowOff = remu(lane, 16);
  aChunkOff = laneDiv16;
  bRowOff = add(laneMod8, mul(laneDiv16, idx(8)));
  bChunkOff = remu(divu(lane, 8), 2);
  aChunkX = arith::XOrIOp::create(b, loc, aChunkOff, laneMod8);
  bChunkX = arith::XOrIOp::create(b, loc, bChunkOff, laneMod8);
  if (!cfg.warpSpecialized)
    sharedMemory();

  auto makeTile = [&](int64_t rows, int64_t cols, int64_t byteOffset) {
    SmemTile t = SmemTile::layout(rows, cols, /*swizzle=*/false, cfg.wgmma);
    auto type =
        MemRefType::get({t.elements()}, cfg.elt, AffineMap(), smemSpace);
    Value shift = cfg.wgmma ? add(pad, idx(byteOffset)) : idx(byteOffset);
    t.view = memref::ViewOp::create(b, loc, type, base, shift, ValueRange{});
    return t;
  };
  // Warp-specialized: K and V tiles of one stage (the rings are
  // stage-major); otherwise all stages' rows in each panel.
  int64_t kvRows = cfg.warpSpecialized ? cfg.bc : cfg.stages * cfg.bc;
  qTile = makeTile(cfg.br, cfg.d, 0);
  kTile = makeTile(kvRows, cfg.d, cfg.qBytes);
  vTile = makeTile(kvRows, cfg.dv, cfg.qBytes + cfg.kBytes);
  if (cfg.wgmma) {
    // K-major Q and K: 8-row groups 1024 bytes apart (the leading offset is
    // unused with the 128-byte swizzle). MN-major V: 64-column panels
    // panelStride apart, 8-key groups 1024 bytes apart.
    Value tiles = add(baseAddr, pad);
    Value warpgroup = divu(tid, 4 * kWarpSize);
    qDesc = wg.descriptor(
        add(tiles, mul(warpgroup, idx(64 * SmemTile::kPanelRowBytes))), 16,
        1024);
    kDesc = wg.descriptor(add(tiles, idx(cfg.qBytes)), 16, 1024);
    vDesc = wg.descriptor(add(tiles, idx(cfg.qBytes + cfg.kBytes)),
                          vTile.panelStride() * 2, 1024);
  }

  if (!cfg.warpSpecialized)
    cloneIndices();
  scf::ForOp tileLoop;
  Value qDesc0 = qDesc;
  if (cfg.persistent) {
    // O's staging tile after the K/V rings; its tensor map.
    smemBase = base;
    oStageOffset = add(pad, idx(cfg.qBytes + cfg.kBytes + cfg.vBytes));
    oStage = memref::ViewOp::create(
        b, loc,
        MemRefType::get({cfg.br * cfg.dv}, cfg.elt, AffineMap(), smemSpace),
        base, oStageOffset, ValueRange{});
    if (oMapHost)
      oMap = faptx::TensorMapParamOp::create(
          b, loc,
          tmaDescriptor(b.getContext(), kWarpgroupRows, cfg.elt,
                        ta.packedOut ? 3 : 4),
          oMapHost);
    // Q of each tile comes through its channel (the producer loads the
    // next tile's while this one computes).
    startTurns();
    if (cfg.dynamic) {
      emitDynamicConsumer(qDesc0, cloneIndices);
    } else {
      tileLoop = beginTileLoop();
      emitConsumerTile(qDesc0, cloneIndices);
      endTileLoop(tileLoop);
    }
    // The block's shared memory outlives its last stores' reads.
    auto last = scf::IfOp::create(b, loc, isWarpgroupLeader(), false);
    b.setInsertionPointToStart(last.thenBlock());
    NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0),
                                         b.getUnitAttr());
    b.setInsertionPointAfter(last);
    return;
  }

  // Prologue: Q in one group, the first K/V block (if any) in the next.
  // Loop-invariant address parts, computed once: the copy plans and the
  // lanes' ldmatrix offsets.
  CopyPlan qCopy = planCopy(ta.q, qBatch, qHead, Value(), qTile, cfg.br);
  if (!cfg.warpSpecialized) {
    kCopy = planCopy(ta.k, kBatch, kHead, kRowBase, kTile, cfg.bc);
    vCopy = planCopy(ta.v, vBatch, vHead, kRowBase, vTile, cfg.bc);
  }
  if (!cfg.wgmma) {
    qLane = ldmatrixLane(qTile, add(warpRow, aRowOff), /*aPattern=*/true);
    kLane = ldmatrixLane(kTile, bRowOff, /*aPattern=*/false);
    vLane = ldmatrixLane(vTile, aRowOff, /*aPattern=*/true);
  }

  if (ta.packedOut)
    // Rows past the sequence's are zeros (another sequence's in q).
    copyTile(qCopy, qStart, clone(ta.q.rows), idx(0), Value(), idx(0));
  else
    copyTile(qCopy, qStart, nq, idx(0));
  commit();
  if (cfg.warpSpecialized) {
    // K and V come through the channels; Q must have landed (and be
    // visible to the wgmma's async proxy) for every consumer.
    waitGroups(0);
    wg.fenceSharedForAsync();
    consumerBarrier();
  } else {
    auto ifOp = scf::IfOp::create(b, loc, slt(lo, hi), true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    copyKV(lo, idx(0));
    // An empty group keeps the group count the same on both paths.
    b.setInsertionPointToStart(ifOp.elseBlock());
    commit();
  }
  if (cfg.qInRegs) {
    // Only Q is needed before the loop; K/V may still be in flight.
    waitGroups(1);
    gpu::BarrierOp::create(b, loc);
    for (int64_t mt = 0; mt < cfg.mTiles; ++mt)
      for (int64_t ks = 0; ks < cfg.d / 16; ++ks)
        qFrags.push_back(loadQ(mt, ks));
  }

  SmallVector<Value> state = initialState();
  if (cfg.overlap) {
    emitOverlappedLoops(state);
  } else {
    for (KeyLoop &kl : ta.loops)
      emitKeyLoop(kl, state);
  }
  // No copy may still be in flight when the block exits (e.g. Q when no key
  // block is visible).
  waitGroups(0);
  emitEpilogue(state);
}

} // namespace

/// Results of `forall` that later host code reads as tensors (fa-split-kv's
/// partials, read by fa.attention_merge_splits) get a workspace buffer the
/// kernel writes: a memref.alloc the size of the shared output's
/// tensor.empty, tagged `fa.workspace` with the name the launcher knows it
/// by; the readers see it through bufferization.to_tensor.
static void allocateWorkspaceResults(RewriterBase &rewriter,
                                     scf::ForallOp forall) {
  static constexpr StringLiteral names[] = {"out_partial", "lse_partial"};
  if (forall.getNumResults() != 2)
    return; // The matcher reports it.
  for (auto [i, result] : llvm::enumerate(forall.getResults())) {
    // Only partials on their way to a merge; anything else is the
    // matcher's to report.
    auto expand =
        result.hasOneUse()
            ? dyn_cast<tensor::ExpandShapeOp>(*result.getUsers().begin())
            : nullptr;
    if (!expand || !expand->hasOneUse() ||
        !isa<AttentionMergeSplitsOp>(*expand->getUsers().begin()))
      continue;
    auto empty = forall.getOutputs()[i].getDefiningOp<tensor::EmptyOp>();
    if (!empty)
      continue;
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(forall);
    auto type = cast<RankedTensorType>(result.getType());
    auto alloc = memref::AllocOp::create(
        rewriter, forall.getLoc(),
        MemRefType::get(type.getShape(), type.getElementType()),
        empty.getDynamicSizes());
    alloc->setAttr("fa.workspace", rewriter.getStringAttr(names[i]));
    rewriter.setInsertionPointAfter(forall);
    auto read = bufferization::ToTensorOp::create(
        rewriter, forall.getLoc(), type, alloc, /*restrict=*/true,
        /*writable=*/false);
    rewriter.replaceAllUsesWith(result, read);
    rewriter.setInsertionPoint(read);
    auto store = bufferization::MaterializeInDestinationOp::create(
        rewriter, forall.getLoc(), result, alloc);
    store.setWritable(true);
    store.setRestrict(true);
  }
}

/// The dynamic tile scheduler's counter: a one-word workspace buffer the
/// launcher zeroes before each launch (`fa.workspace_zeroed`). A buffer of
/// the call rather than a global of the module, so that launches running at
/// once (other streams) count apart, and a launch that stops early leaves
/// none behind for the next.
static Value allocateTileCounter(OpBuilder &b, Location loc) {
  auto alloc =
      memref::AllocOp::create(b, loc, MemRefType::get({1}, b.getI32Type()));
  alloc->setAttr("fa.workspace", b.getStringAttr("tile_counter"));
  alloc->setAttr("fa.workspace_zeroed", b.getUnitAttr());
  return alloc;
}

LogicalResult mlir::fa::convertTiledAttentionToGPU(
    RewriterBase &rewriter, scf::ForallOp forall,
    const FAConvertTiledAttentionToGPUOptions &options) {
  allocateWorkspaceResults(rewriter, forall);
  FailureOr<TiledAttention> ta = matchTiledAttention(forall);
  if (failed(ta))
    return failure();
  FailureOr<KernelConfig> cfg = getKernelConfig(*ta, options);
  if (failed(cfg))
    return failure();

  Location loc = forall.getLoc();
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(forall);
  std::array<Value, 3> grid =
      getLaunchGrid(rewriter, loc, forall, ta->blockDims);
  Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
  if (cfg->persistent) {
    // At most one thread block per multiprocessor, each looping over tiles.
    Value tiles = arith::MulIOp::create(
        rewriter, loc, arith::MulIOp::create(rewriter, loc, grid[0], grid[1]),
        grid[2]);
    Value sms = fagpu::HostMultiprocessorCountOp::create(rewriter, loc);
    grid = {arith::MinUIOp::create(rewriter, loc, tiles, sms), one, one};
  }
  Value threads =
      arith::ConstantIndexOp::create(rewriter, loc, cfg->launchThreads());
  Value smemBytes = arith::ConstantIntOp::create(
      rewriter, loc, rewriter.getI32Type(), cfg->smemBytes());
  // The exponent factors on the host, before the launch: the kernel takes
  // scale * log2(e) (or scale / softcap and softcap * log2(e)) as parameters
  // rather than computing them, so its score FMAs read a parameter (a
  // constant-bank operand in SASS) instead of holding it in a register, as
  // a constant scale's kernel does (218 against 237 registers at D = 128).
  ScoreFactors factors =
      ScoreFactors::build(rewriter, loc, cfg->scalars.buildScale(rewriter, loc),
                          cfg->scalars.buildSoftcap(rewriter, loc), kLog2e);
  // A score_mod reads natural-unit scores: the scale and softcap themselves
  // (and softcap * log2(e)).
  ModifierFactors modFactors;
  if (ta->loops.front().step.hasScoreMod()) {
    modFactors.scale = cfg->scalars.buildScale(rewriter, loc);
    modFactors.softcap = cfg->scalars.buildSoftcap(rewriter, loc);
    Value log2e = arith::ConstantOp::create(
        rewriter, loc, rewriter.getF32FloatAttr(static_cast<float>(kLog2e)));
    modFactors.expFactor = modFactors.softcap
                               ? rewriter.createOrFold<arith::MulFOp>(
                                     loc, modFactors.softcap, log2e)
                               : log2e;
  }
  // Warp-specialized: the TMA tensor maps of K and V (one 64-column panel
  // of Bc keys per box, 128-byte swizzle), encoded by the runtime.
  // Persistent, Q's too (one box of block-q rows per panel).
  Value kMap, vMap, qMap, oMap, counter;
  if (cfg->dynamic)
    counter = allocateTileCounter(rewriter, loc);
  if (cfg->warpSpecialized) {
    MLIRContext *ctx = rewriter.getContext();
    auto descriptor = tmaDescriptor(ctx, cfg->bc, cfg->elt, ta->k.rank());
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    kMap = fagpu::HostTensorMapOp::create(rewriter, loc, ptr, ta->k.memref,
                                          TypeAttr::get(descriptor));
    vMap = fagpu::HostTensorMapOp::create(rewriter, loc, ptr, ta->v.memref,
                                          TypeAttr::get(descriptor));
    if (cfg->persistent) {
      qMap = fagpu::HostTensorMapOp::create(
          rewriter, loc, ptr, ta->q.memref,
          TypeAttr::get(tmaDescriptor(ctx, cfg->br, cfg->elt, ta->q.rank())));
      // (Packed: rank 3, used for the warpgroups whose rows all lie in
      // their sequence.)
      oMap = fagpu::HostTensorMapOp::create(
          rewriter, loc, ptr, ta->out,
          TypeAttr::get(tmaDescriptor(ctx, kWarpgroupRows, cfg->elt,
                                      ta->packedOut ? 3 : 4)));
    }
  }
  // As the forall's mapping says: query blocks on x (no 65535 limit), heads
  // on y, batches on z; persistent, all tiles from x.
  auto launch = gpu::LaunchOp::create(rewriter, loc, grid[0], grid[1], grid[2],
                                      threads, one, one, smemBytes);
  rewriter.setInsertionPointToStart(&launch.getBody().front());
  ForwardKernelEmitter emitter(rewriter, loc, *ta, *cfg, factors, modFactors,
                               kMap, vMap, qMap, oMap, counter);
  emitter.emit(launch);
  assert(!emitter.failed && "matchTiledAttention checked every index");
  // (A warp-specialized kernel ends inside its consumer role.)
  rewriter.setInsertionPointToEnd(&launch.getBody().front());
  gpu::TerminatorOp::create(rewriter, loc);

  for (Operation *store : ta->stores)
    rewriter.eraseOp(store);
  rewriter.eraseOp(forall);
  return success();
}

namespace {

struct FAConvertTiledAttentionToGPUPass final
    : fa::impl::FAConvertTiledAttentionToGPUBase<
          FAConvertTiledAttentionToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<scf::ForallOp> foralls;
    getOperation()->walk([&](scf::ForallOp forall) {
      if (!forall.getBody()->getOps<OnlineAttentionFinalizeOp>().empty())
        foralls.push_back(forall);
    });
    FAConvertTiledAttentionToGPUOptions options{
        warps, stages, wgmma, warpSpecialize, intraWarpgroupOverlap, pingPong};
    IRRewriter rewriter(&getContext());
    for (scf::ForallOp forall : foralls)
      if (failed(convertTiledAttentionToGPU(rewriter, forall, options)))
        return signalPassFailure();
  }
};

} // namespace
