//===- TiledAttentionBackwardToGPU.cpp - Tiled backward to GPU kernels ----===//
//
// Maps the loop nests of `fa-tile-attention-backward` onto gpu.launch ops
// running the FlashAttention-2 backward with tensor-core mma.sync:
//
//   preprocess   grid (ceil(Nq / 128), Hq, B), 128 query rows per block,
//                lanes along each row (16-byte, coalesced accesses):
//                delta = rowsum(dO * O) (the nest's Di generic), lse2 =
//                LSE * log2(e), both padded to whole query blocks (delta 0,
//                lse2 +inf past Nq, so padded rows give P = 0 with no mask);
//                fast mode: zeroes the f32 dQ accumulator.
//   key block    grid (ceil(Nk / Bc), Hkv, B), warp w owns keys
//                [16 m w, 16 m (w + 1)) of the block. dK and dV stay in
//                registers while the kernel walks the query heads of the
//                group and the query blocks the nest visits (its cloned
//                bounds), with Q / dO / lse2 / delta double-buffered in
//                shared memory by cp.async. Everything is computed
//                transposed, keys as rows, so every GEMM takes its A operand
//                from registers or shared memory and P^T, dS^T never leave
//                registers:
//                  S^T = K Q^T, P^T = exp2(S^T c - lse2), dP^T = V dO^T,
//                  dS^T = P^T (dP^T - delta), dV += P^T dO, dK += dS^T Q
//                fast mode (`fa.dq_accumulation`): dS^T goes to shared
//                memory; (16-row, column-chunk) units of dQ = dS K are dealt
//                to the warps and added to the f32 accumulator (sm_90:
//                staged per warp, 16-byte red.global.add.v4.f32 along rows;
//                else one f32 atomic per element).
//                With `wgmma` (sm_90a) the key-block kernel keeps this
//                structure with warpgroup MMAs: S^T, dP^T and dQ read both
//                operands from 128-byte swizzled tiles through descriptors,
//                dV and dK take P^T / dS^T from registers, and dQ units are
//                (64 queries, 64 columns) per warpgroup (docs/GPU.md).
//   dq convert   fast mode: dq = scale * accumulator, in the element type.
//   query block  deterministic mode's dQ nest: grid (ceil(Nq / Br), Hq, B),
//                rows as in the forward, the key blocks in ascending order:
//                dQ += dS K in registers, no atomics: bitwise reproducible.
//
// The launches read the nests' tiles straight from the memrefs behind their
// `bufferization.to_tensor`s, recompute every index the nests compute from
// the block ids (loop bounds, tile offsets, mask operands), and write the
// memrefs the results are materialized into. delta, lse2 and the dQ
// accumulator are `memref.alloc`ed workspace.
//
//===----------------------------------------------------------------------===//

#include "fa/Conversion/TiledAttentionToGPU/TiledAttentionToGPU.h"

#include "BlockMapping.h"
#include "KernelSupport.h"

#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FA/IR/KernelResources.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <limits>

namespace mlir::fa {
#define GEN_PASS_DEF_FACONVERTTILEDATTENTIONBACKWARDTOGPU
#include "fa/Conversion/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;
using namespace mlir::fa::detail;

namespace {

/// Rows the preprocessing and conversion kernels handle per thread block;
/// also the granule the lse2 / delta workspace is padded to.
constexpr int64_t kRowKernelThreads = 128;

//===----------------------------------------------------------------------===//
// Matching the tiled backward
//===----------------------------------------------------------------------===//

/// Rows [offsets[2], ...) of head offsets[1] in batch offsets[0] of a
/// [B, H, N(, X)] tensor; of a packed [H, T(, X)] tensor (`packed`), rows
/// [offsets[2], ...) of head offsets[1], offsets[0] = 0: the kernels see it
/// as a batch of one.
struct RowSlice {
  Value source;
  SmallVector<OpFoldResult, 3> offsets;
  bool packed = false;
};

/// Follows a (padded) row slice back to the sliced tensor. Padding needs no
/// code: the kernels zero-fill (or +inf-fill) past the sequence ends. A
/// tile of one row per element ([rows]) slices lse or delta, one of rows of
/// width X ([rows, X]) the others; the source rank says dense or packed.
FailureOr<RowSlice> traceRowSlice(Value tile) {
  if (auto pad = tile.getDefiningOp<tensor::PadOp>()) {
    if (!llvm::all_of(pad.getMixedLowPad(), isZeroInteger))
      return failure();
    tile = pad.getSource();
  }
  auto slice = tile.getDefiningOp<tensor::ExtractSliceOp>();
  if (!slice || !slice.hasUnitStride())
    return failure();
  int64_t rank = slice.getSourceType().getRank();
  int64_t tileRank = slice.getResultType().getRank();
  if (tileRank != 1 && tileRank != 2)
    return failure();
  // Leading unit dims: (batch, head) dense, (head) packed.
  int64_t lead = rank - tileRank;
  if (lead != 1 && lead != 2)
    return failure();
  SmallVector<OpFoldResult> offsets = slice.getMixedOffsets();
  SmallVector<OpFoldResult> sizes = slice.getMixedSizes();
  for (int64_t i = 0; i < lead; ++i)
    if (!isOneInteger(sizes[i]))
      return failure();
  if (tileRank == 2 && (!isZeroInteger(offsets[rank - 1]) ||
                        getConstantIntValue(sizes[rank - 1]) !=
                            slice.getSourceType().getDimSize(rank - 1)))
    return failure();
  if (lead == 2)
    return RowSlice{slice.getSource(), {offsets[0], offsets[1], offsets[2]}};
  OpFoldResult zero = IntegerAttr::get(IndexType::get(tile.getContext()), 0);
  return RowSlice{slice.getSource(),
                  {zero, offsets[0], offsets[1]},
                  /*packed=*/true};
}

/// The memref behind a `bufferization.to_tensor`, or null.
Value memrefOf(Value tensor) {
  auto toTensor = tensor.getDefiningOp<bufferization::ToTensorOp>();
  return toTensor ? toTensor.getBuffer() : Value();
}

/// What every backward kernel takes from the step op and its tiles.
struct StepInputs {
  AttentionBackwardStepOp step;
  RowSlice q, k, v, dout, lse, delta;
  /// Packed sequences: [H, T, X] tensors, seen by the kernels as [1, H, T,
  /// X] (batchView).
  bool packed = false;
  Value qMem, kMem, vMem, doMem, lseMem;
  /// The Di generic: delta = rowsum(dO * O).
  linalg::GenericOp deltaOp;
  Value outMem;
};

/// The memrefs a forall's results are materialized into, in result order.
FailureOr<SmallVector<Operation *>> resultStores(scf::ForallOp forall,
                                                 SmallVector<Value> &dests) {
  SmallVector<Operation *> stores;
  for (OpResult result : forall->getResults()) {
    auto store = result.hasOneUse()
                     ? dyn_cast<bufferization::MaterializeInDestinationOp>(
                           *result.getUsers().begin())
                     : nullptr;
    if (!store || !isa<MemRefType>(store.getDest().getType()))
      return failure();
    dests.push_back(store.getDest());
    stores.push_back(store);
  }
  return stores;
}

LogicalResult matchStepInputs(AttentionBackwardStepOp step, StepInputs &in,
                              Operation *anchor) {
  auto fail = [&](const Twine &why) {
    return anchor->emitError("fa-convert-tiled-attention-backward-to-gpu: ")
           << why;
  };
  in.step = step;
  auto trace = [&](Value tile, RowSlice &slice, Value *mem) -> LogicalResult {
    FailureOr<RowSlice> s = traceRowSlice(tile);
    if (failed(s))
      return failure();
    slice = *s;
    if (mem) {
      *mem = memrefOf(slice.source);
      if (!*mem)
        return failure();
    }
    return success();
  };
  if (failed(trace(step.getQuery(), in.q, &in.qMem)) ||
      failed(trace(step.getKey(), in.k, &in.kMem)) ||
      failed(trace(step.getValue(), in.v, &in.vMem)) ||
      failed(trace(step.getDout(), in.dout, &in.doMem)) ||
      failed(trace(step.getLse(), in.lse, &in.lseMem)) ||
      failed(trace(step.getDelta(), in.delta, nullptr)))
    return fail("the step's tiles must be row slices of memrefs (through "
                "bufferization.to_tensor) or of the delta generic");
  in.packed = in.q.packed;
  for (const RowSlice *s : {&in.k, &in.v, &in.dout, &in.lse, &in.delta})
    if (s->packed != in.packed)
      return fail("the step's tiles must all be dense ([B, H, N, X]) or all "
                  "packed ([H, T, X]) row slices");
  // Rows of packed sequences: the sequence limits come from the step's
  // positions, which only a masked step has.
  if (in.packed && !step.isMasked())
    return fail("a step of packed sequences must be masked (its lengths "
                "bound the rows)");
  in.deltaOp = in.delta.source.getDefiningOp<linalg::GenericOp>();
  if (!in.deltaOp || in.deltaOp.getNumDpsInputs() != 2 ||
      in.deltaOp.getNumResults() != 1 ||
      memrefOf(in.deltaOp.getDpsInputs()[0]) != in.doMem ||
      !memrefOf(in.deltaOp.getDpsInputs()[1]))
    return fail("delta must be the rowsum(dO * O) generic over the dO and O "
                "memrefs");
  in.outMem = memrefOf(in.deltaOp.getDpsInputs()[1]);
  for (Value m : {in.qMem, in.kMem, in.vMem, in.doMem, in.outMem, in.lseMem})
    if (!cast<MemRefType>(m.getType()).isLastDimUnitStride())
      return fail("every row of q, k, v, out, dout and lse must be "
                  "contiguous");
  return success();
}

//===----------------------------------------------------------------------===//
// Configuration
//===----------------------------------------------------------------------===//

struct BackwardConfig {
  int64_t br, bc, d, dv, warps;
  /// m16 row tiles per warp: key rows in the key-block kernel, query rows
  /// in the query-block kernel.
  int64_t mTiles;
  Type elt;
  /// Scale and softcap: attributes, or run-time values that the kernels
  /// take as parameters.
  ScoreScalars scalars;
  /// The steps' mask (null: none, or a key tail only) and its operands.
  MaskAttrInterface mask;
  ValueRange maskOperands;
  bool masked;
  /// In the kernel being emitted (bindScalars, at its start): the scale and
  /// the exponent factors of the scores u, p = exp2(u c - lse2).
  Value scale;
  ScoreFactors factors;
  /// The mask's band, its run-time widths built by bindScalars.
  KernelMask kmask;
  /// The step's score_mod / mask_mod (and score_mod_grad), if any: a
  /// score_mod's scores are natural units, s = score_mod(scale x), u =
  /// tanh(s / softcap) (modSoftcap) or s, p = exp2(u modExp - lse2); dS
  /// gains score_mod_grad(scale x) (the scale itself comes last, as for
  /// every kernel).
  AttentionBackwardStepOp modifiers;
  Value modScale, modSoftcap, modExp;
  /// Columns of dQ per work unit of the key-block kernel.
  int64_t dqChunk = 64;
  /// sm_90 8-byte f32 reductions (red.global.add.v2.f32) for dQ.
  bool vectorAtomics = false;
  /// dQ through the per-warp staging area (KernelResources::stagesDq) of
  /// dqStageRows rows (KernelResources::dqStageRows; cooperative kernels).
  bool stageDq = false;
  int64_t dqStageRows = 16;
  /// Key-block kernel on warpgroup MMAs (sm_90a).
  bool wgmma = false;
  /// Key-block kernel (wgmma): a producer warpgroup TMA-loads K, V and each
  /// query block's Q and dO into mbarrier rings (`schedule =
  /// warp_specialized`); the consumers read lse2 and delta from global
  /// memory and meet only before dQ.
  bool warpSpecialized = false;
  /// Warp-specialized key-block kernel with `tile_scheduler = persistent`:
  /// one thread block per multiprocessor walks the key blocks (tiles); the
  /// producer loads a tile's K and V once the consumers are done with the
  /// previous tile's (its dK / dV stores overlap them) and the Q / dO ring
  /// runs on across tiles.
  bool persistent = false;
  /// Key-block kernel: thread blocks per key block, each keeping the dK, dV
  /// (and adding the dQ) columns of one slice of the head dims.
  int64_t split = 1;
  /// Columns of dK (and dQ) and of dV per slice.
  int64_t dkCols() const { return d / split; }
  int64_t dvCols() const { return dv / split; }
  /// wgmma key-block kernel: warpgroups sharing each 64 keys (2: the
  /// warpgroups split the queries of S^T, dP^T and the columns of dK, dV;
  /// P^T and dS^T go through shared memory; nothing is computed twice).
  int64_t wgSplit = 1;
  /// The columns each warp keeps dK and dV accumulators for (a wgSplit
  /// pair: backwardPairColumns).
  int64_t accKCols() const {
    return wgSplit > 1 ? backwardPairColumns(dkCols(), dvCols()).k : dkCols();
  }
  int64_t accVCols() const {
    return wgSplit > 1 ? backwardPairColumns(dkCols(), dvCols()).v : dvCols();
  }
  /// A wgSplit pair in roles: the first warpgroup's accumulators are dK,
  /// the second's dV.
  bool pairRoles() const {
    return wgSplit > 1 && backwardPairColumns(dkCols(), dvCols()).roles;
  }

  int64_t threads() const { return warps * kWarpSize; }
  /// The key-block kernel's block: the producer warpgroup on top.
  int64_t launchThreads() const {
    return threads() + (warpSpecialized ? fagpu::kWarpgroupThreads : 0);
  }
  bool softcap() const { return scalars.hasSoftcap(); }
  /// Warp-specialized at 128 queries per block, where S^T and dP^T take
  /// 128 of the consumers' 240 registers. These kernels spilled until the
  /// iteration's head and query block were divided out in i32 (64-bit,
  /// each division is a call to a subroutine that holds registers), the
  /// ring's copies recomputed their column row in each iteration (its
  /// 64-bit loop-invariant parts held 8 registers) and P took
  /// ex2.approx.ftz (no per-element denormal fix-up). At 64 queries each
  /// of the three makes some kernels spill instead (deterministic, some
  /// modifiers): ptxas' allocation is at its edge there too.
  bool tightRegisters() const { return warpSpecialized && br > 64; }
  /// Builds `scale` and `factors` at the builder's insertion point, the
  /// start of a kernel: its first uses put the run-time scalars first in the
  /// kernel's parameters.
  void bindScalars(OpBuilder &b, Location loc) {
    scale = scalars.buildScale(b, loc);
    factors = ScoreFactors::build(b, loc, scale, scalars.buildSoftcap(b, loc),
                                  kLog2e);
    kmask = KernelMask::build(b, loc, masked ? mask : MaskAttrInterface(),
                              maskOperands);
    if (modifiers && modifiers.hasScoreMod()) {
      modScale = scale;
      modSoftcap = scalars.buildSoftcap(b, loc);
      Value log2e = arith::ConstantOp::create(
          b, loc, b.getF32FloatAttr(static_cast<float>(kLog2e)));
      modExp = modSoftcap
                   ? b.createOrFold<arith::MulFOp>(loc, modSoftcap, log2e)
                   : log2e;
    }
  }
};

FailureOr<BackwardConfig> getConfig(AttentionBackwardStepOp step, int64_t warps,
                                    bool keyRows, Operation *anchor,
                                    int64_t split = 1, int64_t wgSplit = 1) {
  auto fail = [&](const Twine &why) -> FailureOr<BackwardConfig> {
    anchor->emitError("fa-convert-tiled-attention-backward-to-gpu: ") << why;
    return failure();
  };
  if (step.hasModifiers()) {
    if (!step.isMasked() || !step.getBatchIndex())
      return fail("a step with score_mod or mask_mod needs its positions and "
                  "at(batch, head)");
    if (step.hasScoreMod() && step.getScoreModGrad().empty())
      return fail("a score_mod needs its derivative score_mod_grad "
                  "(fa-differentiate-score-mod)");
    for (Value capture : step.getCaptures()) {
      auto toTensor = capture.getDefiningOp<bufferization::ToTensorOp>();
      if (!toTensor || !isa<MemRefType>(toTensor.getBuffer().getType()))
        return fail("the captures of score_mod and mask_mod must be memrefs "
                    "(through bufferization.to_tensor)");
    }
    for (Region *region :
         {&step.getScoreMod(), &step.getMaskMod(), &step.getScoreModGrad()})
      if (!region->empty())
        if (Operation *op = ModifierInliner::findUnsupported(*region))
          return fail(Twine("the kernels inline arith and math ops and reads "
                            "of the captures (tensor.extract, tensor.dim) in "
                            "score_mod and mask_mod, not ") +
                      op->getName().getStringRef());
  }
  auto qType = cast<RankedTensorType>(step.getQuery().getType());
  auto kType = cast<RankedTensorType>(step.getKey().getType());
  auto vType = cast<RankedTensorType>(step.getValue().getType());
  BackwardConfig cfg;
  cfg.br = qType.getDimSize(0);
  cfg.d = qType.getDimSize(1);
  cfg.bc = kType.getDimSize(0);
  cfg.dv = vType.getDimSize(1);
  cfg.warps = warps;
  cfg.elt = qType.getElementType();
  cfg.scalars = step.getScoreScalars();
  cfg.masked = step.isMasked();
  if (step.hasModifiers())
    cfg.modifiers = step;
  if (step.hasMaskRule()) {
    cfg.mask = step.getMaskAttr();
    cfg.maskOperands = step.getMaskOperands();
    if (!cfg.mask.isBand())
      return fail(Twine("the kernels compute band masks (causal, sliding "
                        "window), not ") +
                  maskText(cfg.mask));
  }
  if (!cfg.elt.isF16() && !cfg.elt.isBF16())
    return fail("mma.sync needs f16 or bf16 inputs");
  if (cfg.br % 16 || cfg.bc % 16 || cfg.d % 16 || cfg.dv % 16)
    return fail("block sizes and head dims must be multiples of 16");
  if (warps < 1 || warps > kMaxWarpsPerBlock)
    return fail("warps must be in [1, " + Twine(kMaxWarpsPerBlock) + "], got " +
                Twine(warps));
  // (Warpgroups of a wgSplit pair own the same keys.)
  int64_t rows = keyRows ? cfg.bc * wgSplit : cfg.br;
  if (rows % (16 * warps))
    return fail(Twine(keyRows ? "block-kv" : "block-q") +
                " must be a multiple of 16 * warps");
  cfg.mTiles = rows / (16 * warps);
  cfg.wgSplit = keyRows ? wgSplit : 1;
  if (kRowKernelThreads % cfg.br)
    return fail("block-q must divide 128");
  if (keyRows) {
    cfg.split = split;
    if (cfg.d % (16 * split) || cfg.dv % (16 * split))
      return fail("dkv_split must cut the head dims into whole 16-column "
                  "tiles");
    cfg.dqChunk = backwardDqChunk(cfg.br, cfg.dkCols(), warps);
    if (!cfg.dqChunk)
      return fail("the dQ tiles of block-q x head dim do not split evenly "
                  "over the warps");
  }
  return cfg;
}

//===----------------------------------------------------------------------===//
// Shared emitter pieces
//===----------------------------------------------------------------------===//

/// Where the visibility bounds of one tile stand for this lane: for an
/// element whose key is `keyOff` past the lane's first key and whose
/// key - query difference is `diff` past the lane's, the key exists iff
/// keyOff < keyLimit and the band holds iff leftLimit <= diff <= rightLimit
/// (i32; a null limit is an unbounded side).
struct MaskLimits {
  Value keyLimit, rightLimit, leftLimit;
};

/// Where a score element of the tile lies for the modifiers: keys naming
/// its query row and key column (the same key, the same position), and the
/// clamped positions (i32) they stand for, made at first use.
struct ElementPositions {
  function_ref<int64_t(int64_t frag, int64_t h, int64_t el)> queryKey, keyKey;
  std::function<Value(int64_t)> queryOf, keyOf;
  /// The same as bases and offsets (ModifierInliner::Positions).
  std::optional<ModifierInliner::Positions> affine;
  Value batch, head;
  SmallVector<Value> captures;
};

class BackwardEmitter : public NestCloner {
public:
  BackwardEmitter(OpBuilder &b, Location loc) : NestCloner(b, loc) {}

  Value divs(Value x, int64_t y) {
    return arith::DivUIOp::create(b, loc, x, idx(y));
  }
  Value fmul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value fadd(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value fsub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value inf() { return f32(std::numeric_limits<double>::infinity()); }

  /// A packed [H, T(, X)] memref as [1, H, T(, X)], so that one kernel body
  /// addresses dense and packed rows; dense memrefs as they are.
  Value batchView(Value memref, bool packed) {
    if (!packed)
      return memref;
    auto type = cast<MemRefType>(memref.getType());
    SmallVector<int64_t> shape = {1};
    llvm::append_range(shape, type.getShape());
    SmallVector<ReassociationIndices> groups = {{0, 1}};
    for (int64_t i = 1; i < type.getRank(); ++i)
      groups.push_back({i + 1});
    return memref::ExpandShapeOp::create(b, loc, shape, memref, groups);
  }

  /// A flat 1-d view of rows of (batch, head) of a [B, H, N, X] memref from
  /// element (row0, col0): element (row0 + r, col0 + c) is r * rowStride + c.
  std::pair<Value, Value> rowView(Value memref, Value batch, Value head,
                                  Type elt) {
    auto meta = memref::ExtractStridedMetadataOp::create(b, loc, memref);
    ValueRange strides = meta.getStrides();
    Value offset = add(meta.getOffset(),
                       add(mul(batch, strides[0]), mul(head, strides[1])));
    Value size = mul(meta.getSizes()[2], strides[2]);
    auto flatType = MemRefType::get(
        {ShapedType::kDynamic}, elt,
        StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, {1}));
    Value view = memref::ReinterpretCastOp::create(
        b, loc, flatType, memref, OpFoldResult(offset),
        ArrayRef<OpFoldResult>{size},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
    return {view, strides[2]};
  }

  /// cp.async of rows [row0, row0 + rows) of (batch, head) of `memref` into
  /// tile rows [dstRow0, ...); rows >= limit are zero-filled. Threads copy
  /// 16-byte chunks, consecutive threads along a row (coalesced).
  void copyRows(Value memref, Value batch, Value head, Value row0, Value limit,
                const SmemTile &tile, Value dstRow0, int64_t rows,
                int64_t threads) {
    auto [view, rowStride] = rowView(memref, batch, head, elt);
    int64_t chunks = tile.cols / kChunk;
    int64_t total = rows * chunks;
    auto tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
    forEachDealt(tid, threads, total, [&](Value c) {
      Value r = divu(c, chunks), ch = remu(c, chunks);
      Value srcRow = add(row0, r);
      Value n = arith::SelectOp::create(b, loc, slt(srcRow, limit), idx(kChunk),
                                        idx(0));
      // Rows past the end read nothing; keep their address in bounds anyway.
      Value safeRow =
          arith::SelectOp::create(b, loc, slt(srcRow, limit), srcRow, idx(0));
      Value src = add(mul(safeRow, rowStride), mul(ch, idx(kChunk)));
      Value dstRow = add(r, dstRow0);
      Value dst;
      if (tile.panels) {
        // Chunk ch: panel ch / 8, swizzled chunk (ch % 8) ^ (row % 8).
        Value chunk =
            arith::XOrIOp::create(b, loc, remu(ch, 8), remu(dstRow, 8));
        dst = add(add(mul(divu(ch, 8), idx(tile.panelStride())),
                      mul(dstRow, idx(SmemTile::kPanelCols))),
                  mul(chunk, idx(kChunk)));
      } else {
        dst = add(mul(dstRow, idx(tile.storedCols())), mul(ch, idx(kChunk)));
      }
      nvgpu::DeviceAsyncCopyOp::create(
          b, loc, tokenType, tile.view, ValueRange{dst}, view, ValueRange{src},
          b.getIndexAttr(kChunk), n, b.getUnitAttr());
    });
  }

  /// cp.async of `rows` f32 of a padded [B, H, Npad] workspace row from
  /// (batch, head, row0) into dst[dstOff, ...).
  void copyF32Rows(Value ws, Value batch, Value head, Value row0, Value dst,
                   Value dstOff, int64_t rows) {
    auto tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
    int64_t chunks = rows / 4;
    auto ifOp = scf::IfOp::create(b, loc, slt(tid, idx(chunks)), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Value col = mul(tid, idx(4));
    nvgpu::DeviceAsyncCopyOp::create(
        b, loc, tokenType, dst, ValueRange{add(col, dstOff)}, ws,
        ValueRange{batch, head, add(row0, col)}, b.getIndexAttr(4), Value(),
        b.getUnitAttr());
  }

  /// copyF32Rows for rows of packed sequences: they start anywhere (no
  /// 16-byte alignment), so one f32 per thread; rows >= limit read as 0,
  /// which with the zero-filled Q and dO rows gives them no gradient.
  void copyF32RowsPacked(Value ws, Value head, Value row0, Value limit,
                         Value dst, Value dstOff, int64_t rows,
                         int64_t threads) {
    auto tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
    forEachDealt(tid, threads, rows, [&](Value r) {
      Value row = add(row0, r);
      Value in = slt(row, limit);
      Value n = arith::SelectOp::create(b, loc, in, idx(1), idx(0));
      Value safeRow = arith::SelectOp::create(b, loc, in, row, idx(0));
      nvgpu::DeviceAsyncCopyOp::create(
          b, loc, tokenType, dst, ValueRange{add(r, dstOff)}, ws,
          ValueRange{idx(0), head, safeRow}, b.getIndexAttr(1), n, UnitAttr());
    });
  }

  void commit() { commitCopies(); }
  /// Every copy issued so far has landed (cp.async.wait_all).
  void waitAll() {
    commitCopies();
    waitCopies(0);
  }

  /// ldmatrix lane offsets. Pattern A: matrices (r, c), (r + 8, c),
  /// (r, c + 1), (r + 8, c + 1) (an A fragment, or the two B fragments of
  /// a transposed [k, n] tile). Pattern B: (r, c), (r, c + 1), (r + 8, c),
  /// (r + 8, c + 1) (two B fragments of an [n, k] tile, or an A fragment
  /// of a transposed [k, m] tile). In elements of a padded tile.
  Value laneOffset(const SmemTile &tile, bool patternA) {
    Value row = patternA ? remu(lane, 16)
                         : add(remu(lane, 8), mul(divu(lane, 16), idx(8)));
    Value chunk = patternA ? divu(lane, 16) : remu(divu(lane, 8), 2);
    return add(mul(row, idx(tile.storedCols())), mul(chunk, idx(kChunk)));
  }
  /// x4 ldmatrix of rows [row0, +16) x columns [col0, +16) of `tile`.
  Value load(const SmemTile &tile, Value laneOff, Value row0, Value col0,
             bool transpose, WarpFragments &frags) {
    Value index = add(add(laneOff, mul(row0, idx(tile.storedCols()))), col0);
    return frags.ldmatrix(tile.view, index, transpose);
  }

  /// A B^T on C fragments: `mTiles` 16-row tiles of `a` from row aRow0
  /// against `n` rows of `bt` from row bRow0, both row-major over `depth`
  /// columns (ldmatrix, B fragments of two n8 tiles per load). Fragment
  /// (mt, nt) is at mt * n / 8 + nt.
  SmallVector<Value> gemmABt(WarpFragments &frags, const SmemTile &a,
                             Value laneA, Value aRow0, int64_t mTiles,
                             const SmemTile &bt, Value laneB, Value bRow0,
                             int64_t n, int64_t depth) {
    int64_t nn = n / 8;
    SmallVector<Value> c(mTiles * nn, frags.zeroC());
    for (int64_t ks = 0; ks < depth / 16; ++ks) {
      SmallVector<Value> af;
      for (int64_t mt = 0; mt < mTiles; ++mt)
        af.push_back(load(a, laneA, add(aRow0, idx(16 * mt)), idx(16 * ks),
                          false, frags));
      for (int64_t np = 0; np < n / 16; ++np) {
        auto bs = frags.splitB(load(bt, laneB, add(bRow0, idx(16 * np)),
                                    idx(16 * ks), false, frags));
        for (int64_t mt = 0; mt < mTiles; ++mt) {
          frags.mma16(af[mt], bs,
                      MutableArrayRef<Value>(c).slice(mt * nn + 2 * np, 2));
        }
      }
    }
    return c;
  }

  /// out += L R: L as C fragments ([mTiles, k], `lhsTiles` n8 tiles per row
  /// tile, packed into A fragments in registers), R = rows [bRow0, +k) of
  /// `rhs` read transposed, `width` columns from `col0` (0 if null).
  void accumulateFrags(WarpFragments &frags, SmallVector<Value> &out,
                       ArrayRef<Value> lhs, int64_t lhsTiles, int64_t mTiles,
                       int64_t k, const SmemTile &rhs, Value laneR, Value bRow0,
                       int64_t width, Value col0 = Value()) {
    int64_t nn = width / 8;
    for (int64_t kk = 0; kk < k / 16; ++kk) {
      SmallVector<Value> af;
      for (int64_t mt = 0; mt < mTiles; ++mt)
        af.push_back(frags.packA(lhs[mt * lhsTiles + 2 * kk],
                                 lhs[mt * lhsTiles + 2 * kk + 1]));
      for (int64_t dp = 0; dp < width / 16; ++dp) {
        Value col = col0 ? add(col0, idx(16 * dp)) : idx(16 * dp);
        auto bs = frags.splitB(
            load(rhs, laneR, add(bRow0, idx(16 * kk)), col, true, frags));
        for (int64_t mt = 0; mt < mTiles; ++mt) {
          frags.mma16(af[mt], bs,
                      MutableArrayRef<Value>(out).slice(mt * nn + 2 * dp, 2));
        }
      }
    }
  }

  /// The modifiers' batch and query head (i32) and capture memrefs of
  /// `step`, in the kernel.
  void bindModifierOperands(ElementPositions &pos, AttentionBackwardStepOp step,
                            IRMapping &it) {
    pos.batch = toI32(clone(step.getBatchIndex(), it));
    pos.head = toI32(clone(step.getHeadIndex(), it));
    for (Value c : step.getCaptures())
      pos.captures.push_back(
          c.getDefiningOp<bufferization::ToTensorOp>().getBuffer());
  }

  /// The limits for a lane whose first element pairs key `key0` with query
  /// `query0`, with the masked step's sequence lengths.
  /// Warp-specialized: in i32 from the start (the same values mod 2^32), so
  /// that no 64-bit key0 is held across the loop (those kernels spill
  /// otherwise).
  MaskLimits maskLimits(const BackwardConfig &cfg, Value key0, Value query0,
                        Value qLen, Value kLen) {
    MaskLimits lim;
    Value d0, off;
    if (cfg.warpSpecialized) {
      Value k0 = toI32(key0), kl = toI32(kLen);
      d0 = arith::SubIOp::create(b, loc, k0, toI32(query0));
      off = arith::SubIOp::create(b, loc, kl, toI32(qLen));
      lim.keyLimit = arith::SubIOp::create(b, loc, kl, k0);
    } else {
      d0 = toI32(sub(key0, query0));
      off = toI32(sub(kLen, qLen));
      lim.keyLimit = toI32(sub(kLen, key0));
    }
    if (cfg.kmask.hasRight())
      lim.rightLimit = sub(
          arith::AddIOp::create(b, loc, off, cfg.kmask.rightWidth(b, loc)), d0);
    if (cfg.kmask.hasLeft())
      lim.leftLimit = sub(
          arith::SubIOp::create(b, loc, off, cfg.kmask.leftWidth(b, loc)), d0);
    return lim;
  }

  /// Whether the element at (keyOff, diff) past the lane's first is visible.
  Value visibleAt(const MaskLimits &lim, int64_t keyOff, int64_t diff) {
    auto cmp = [&](arith::CmpIPredicate pred, int64_t lhs, Value rhs) {
      return arith::CmpIOp::create(b, loc, pred, i32(lhs), rhs);
    };
    Value vis = cmp(arith::CmpIPredicate::slt, keyOff, lim.keyLimit);
    if (lim.rightLimit)
      vis = arith::AndIOp::create(
          b, loc, vis, cmp(arith::CmpIPredicate::sle, diff, lim.rightLimit));
    if (lim.leftLimit)
      vis = arith::AndIOp::create(
          b, loc, vis, cmp(arith::CmpIPredicate::sge, diff, lim.leftLimit));
    return vis;
  }

  /// Whether the mask shows every element of the block's tile of keys
  /// [k0, k0 + Bc) x queries [q0, q0 + Br) (i32; Br / Bc the
  /// configuration's): its keys end by kLen, and the band holds its corners
  /// (key - query <= kLen - qLen + right at the last key and the first
  /// query, >= kLen - qLen - left at the first key and the last query).
  /// Padded query rows need no mask (their lse2 is +inf).
  Value wholeTileVisible(const BackwardConfig &cfg, Value k0, Value q0,
                         Value kLen, Value qLen) {
    using P = arith::CmpIPredicate;
    Value kEnd = arith::AddIOp::create(b, loc, k0, i32(cfg.bc));
    Value full = arith::CmpIOp::create(b, loc, P::sle, kEnd, kLen);
    Value off = arith::SubIOp::create(b, loc, kLen, qLen);
    if (cfg.kmask.hasRight()) {
      Value lastKey = arith::SubIOp::create(b, loc, kEnd, i32(1));
      Value most = arith::SubIOp::create(b, loc, lastKey, q0);
      Value limit =
          arith::AddIOp::create(b, loc, off, cfg.kmask.rightWidth(b, loc));
      full = arith::AndIOp::create(
          b, loc, full, arith::CmpIOp::create(b, loc, P::sle, most, limit));
    }
    if (cfg.kmask.hasLeft()) {
      Value lastQuery = arith::AddIOp::create(b, loc, q0, i32(cfg.br - 1));
      Value least = arith::SubIOp::create(b, loc, k0, lastQuery);
      Value limit =
          arith::SubIOp::create(b, loc, off, cfg.kmask.leftWidth(b, loc));
      full = arith::AndIOp::create(
          b, loc, full, arith::CmpIOp::create(b, loc, P::sge, least, limit));
    }
    return full;
  }

  Value lane, g, tig, tid;
  Type elt;
};

/// Dynamic shared memory carved into tiles.
struct SmemLayout {
  int64_t bytes = 0;
  Value base;
  Attribute space;
  /// wgmma: bytes from `base` to its first 1024-byte boundary (every offset
  /// is taken from there) and that boundary's shared address.
  Value pad, alignedAddr;

  Value offset(OpBuilder &b, Location loc) {
    Value off = arith::ConstantIndexOp::create(b, loc, bytes);
    return pad ? arith::AddIOp::create(b, loc, pad, off) : off;
  }
  SmemTile tile(OpBuilder &b, Location loc, int64_t rows, int64_t cols,
                Type elt) {
    SmemTile t = SmemTile::layout(rows, cols, /*swizzle=*/false,
                                  /*panels=*/false);
    auto type = MemRefType::get({t.elements()}, elt, AffineMap(), space);
    t.view = memref::ViewOp::create(b, loc, type, base, offset(b, loc),
                                    ValueRange{});
    bytes += t.bytes(2);
    return t;
  }
  /// A wgmma tile (128-byte swizzled panels) at a 1024-byte boundary; its
  /// shared address in `addr`.
  SmemTile panelTile(OpBuilder &b, Location loc, int64_t rows, int64_t cols,
                     Type elt, Value &addr) {
    bytes = llvm::alignTo(bytes, 1024);
    SmemTile t = SmemTile::layout(rows, cols, /*swizzle=*/true,
                                  /*panels=*/true);
    auto type = MemRefType::get({t.elements()}, elt, AffineMap(), space);
    t.view = memref::ViewOp::create(b, loc, type, base, offset(b, loc),
                                    ValueRange{});
    addr = arith::AddIOp::create(b, loc, alignedAddr,
                                 arith::ConstantIndexOp::create(b, loc, bytes));
    bytes += t.bytes(2);
    return t;
  }
  Value f32Buffer(OpBuilder &b, Location loc, int64_t n) {
    auto type = MemRefType::get({n}, b.getF32Type(), AffineMap(), space);
    Value v = memref::ViewOp::create(b, loc, type, base, offset(b, loc),
                                     ValueRange{});
    bytes += 4 * n;
    return v;
  }
  /// Bytes to allocate: the slack for the alignment included.
  int64_t allocBytes() const { return pad ? bytes + 1024 : bytes; }
};

SmemLayout makeSmem(OpBuilder &b, Location loc) {
  SmemLayout s;
  s.space =
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  s.base = gpu::DynamicSharedMemoryOp::create(
      b, loc,
      MemRefType::get({ShapedType::kDynamic}, b.getI8Type(), AffineMap(),
                      s.space));
  return s;
}

/// Creates a gpu.launch named `name` (kernel symbol) in module `module`, of
/// `threads` threads and the given grid; the builder ends up in its body.
gpu::LaunchOp createLaunch(OpBuilder &b, Location loc, ArrayRef<Value> grid,
                           int64_t threads, StringRef module, StringRef name) {
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value nThreads = arith::ConstantIndexOp::create(b, loc, threads);
  Value smem = arith::ConstantIntOp::create(b, loc, b.getI32Type(), 0);
  auto launch = gpu::LaunchOp::create(
      b, loc, grid[0], grid[1], grid[2], nThreads, one, one, smem, nullptr, {},
      {}, {}, nullptr, nullptr, nullptr,
      FlatSymbolRefAttr::get(b.getContext(), module),
      FlatSymbolRefAttr::get(b.getContext(), name));
  b.setInsertionPointToStart(&launch.getBody().front());
  return launch;
}

/// Finishes a launch: its dynamic shared memory size and terminator.
void finishLaunch(OpBuilder &b, Location loc, gpu::LaunchOp launch,
                  int64_t smemBytes) {
  gpu::TerminatorOp::create(b, loc);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(launch);
  launch.getDynamicSharedMemorySizeMutable().assign(
      arith::ConstantIntOp::create(b, loc, b.getI32Type(), smemBytes));
}

//===----------------------------------------------------------------------===//
// Row kernels: preprocessing and dQ conversion
//===----------------------------------------------------------------------===//

/// delta = rowsum(dO * O), lse2 = LSE * log2(e), padded to the block's 128
/// rows; zeroes the block's rows of dqAcc. Memory is read and written in
/// 16-byte pieces by consecutive lanes along each row (coalesced): `lanes`
/// threads share a row of dO and O and sum their partial dot products with
/// shuffles.
void emitPreprocess(BackwardEmitter &e, gpu::LaunchOp launch, Value out,
                    Value dout, Value lse, Value delta, Value lse2, Value dqAcc,
                    Value dqOrder, int64_t br, int64_t dv, int64_t d, Type elt,
                    bool packed) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  // First uses fix the kernel's parameter order.
  out = e.batchView(out, packed);
  dout = e.batchView(dout, packed);
  lse = e.batchView(lse, packed);
  Value nq = memref::DimOp::create(b, loc, out, 2);
  (void)memref::DimOp::create(b, loc, dout, 2);
  (void)memref::DimOp::create(b, loc, lse, 2);
  (void)memref::DimOp::create(b, loc, delta, 2);
  (void)memref::DimOp::create(b, loc, lse2, 2);
  if (dqAcc)
    (void)memref::DimOp::create(b, loc, dqAcc, 2);
  Value orderBlocks;
  if (dqOrder)
    orderBlocks = memref::DimOp::create(b, loc, dqOrder, 2);
  gpu::KernelDim3 ids = launch.getBlockIds();
  Value bi = ids.z, h = ids.y, tid = launch.getThreadIds().x;
  Value row0 = e.mul(ids.x, e.idx(kRowKernelThreads));
  Type f32 = b.getF32Type();

  // Lanes per row: a power of two dividing both the row's chunks and 32.
  int64_t chunks = dv / kChunk, lanes = 1;
  while (lanes * 2 <= std::min<int64_t>(chunks, kWarpSize) &&
         chunks % (lanes * 2) == 0)
    lanes *= 2;
  auto vt = VectorType::get({kChunk}, elt);
  auto vf = VectorType::get({kChunk}, f32);
  // The loads of kPreprocessBatch passes come before their stores (the
  // stores may alias the loads as far as LLVM knows, so a store between two
  // passes would serialize their memory round trips; more passes at once
  // made ptxas spill: at most 8 pieces of each in flight, 20 bytes at
  // D = 96 with 12): rows past Nq read row Nq - 1 and their sums are
  // dropped.
  const int64_t kPreprocessBatch =
      std::clamp<int64_t>(8 / (chunks / lanes), 1, 4);
  Value lastRow = e.sub(nq, e.idx(1));
  Value lane = e.remu(tid, lanes);
  for (int64_t first = 0; first < lanes; first += kPreprocessBatch) {
    SmallVector<Value> rowsOf, sums;
    int64_t last = std::min(lanes, first + kPreprocessBatch);
    for (int64_t pass = first; pass < last; ++pass) {
      Value row = e.add(e.add(row0, e.idx(pass * kRowKernelThreads / lanes)),
                        e.divu(tid, lanes));
      Value readRow = arith::MinUIOp::create(b, loc, row, lastRow);
      Value acc = arith::ConstantOp::create(b, loc, vf, b.getZeroAttr(vf));
      for (int64_t c = 0; c < chunks / lanes; ++c) {
        Value col = e.mul(e.add(lane, e.idx(c * lanes)), e.idx(kChunk));
        SmallVector<Value> at = {bi, h, readRow, col};
        Value x = loadGlobalVector(b, loc, vt, dout, at);
        Value y = loadGlobalVector(b, loc, vt, out, at);
        acc = math::FmaOp::create(b, loc, arith::ExtFOp::create(b, loc, vf, x),
                                  arith::ExtFOp::create(b, loc, vf, y), acc);
      }
      Value sum =
          vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, acc);
      for (int64_t m = lanes / 2; m >= 1; m /= 2)
        sum = e.fadd(sum, gpu::ShuffleOp::create(b, loc, sum, m, kWarpSize,
                                                 gpu::ShuffleMode::XOR)
                              .getShuffleResult());
      rowsOf.push_back(row);
      sums.push_back(sum);
    }
    for (int64_t pass = first; pass < last; ++pass) {
      Value row = rowsOf[pass - first];
      Value inRange = e.slt(row, nq);
      // One lane per row writes; padded rows get delta = 0, lse2 = +inf (no
      // gradient flows through them).
      auto leader = scf::IfOp::create(
          b, loc,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane,
                                e.idx(0)),
          false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(leader.thenBlock());
      memref::StoreOp::create(b, loc,
                              arith::SelectOp::create(b, loc, inRange,
                                                      sums[pass - first],
                                                      e.f32(0.0)),
                              delta, ValueRange{bi, h, row});
      auto lseIf = scf::IfOp::create(b, loc, TypeRange{f32}, inRange, true);
      b.setInsertionPointToStart(lseIf.thenBlock());
      Value l = memref::LoadOp::create(b, loc, lse, ValueRange{bi, h, row});
      scf::YieldOp::create(b, loc, ValueRange{e.fmul(l, e.f32(kLog2e))});
      b.setInsertionPointToStart(lseIf.elseBlock());
      scf::YieldOp::create(b, loc, ValueRange{e.inf()});
      b.setInsertionPointAfter(lseIf);
      memref::StoreOp::create(b, loc, lseIf.getResult(0), lse2,
                              ValueRange{bi, h, row});
    }
  }

  if (dqOrder) {
    // The fixed-order dQ's semaphores of the query blocks starting in rows
    // [row0, row0 + 128): 0, none has added yet.
    int64_t perBlock = kRowKernelThreads / br;
    Value qb = e.add(e.mul(ids.x, e.idx(perBlock)), tid);
    Value mine = arith::AndIOp::create(b, loc, e.slt(tid, e.idx(perBlock)),
                                       e.slt(qb, orderBlocks));
    auto ifOp = scf::IfOp::create(b, loc, mine, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    memref::StoreOp::create(
        b, loc, arith::ConstantIntOp::create(b, loc, b.getI32Type(), 0),
        dqOrder, ValueRange{bi, h, qb});
  }
  if (dqAcc) {
    // Zero rows [row0, row0 + 128) of dqAcc, 16 bytes per lane, rows in
    // order.
    auto v4 = VectorType::get({4}, f32);
    Value zero = arith::ConstantOp::create(b, loc, v4, b.getZeroAttr(v4));
    int64_t perRow = d / 4;
    for (int64_t i = 0; i < perRow; ++i) {
      Value c = e.add(tid, e.idx(i * kRowKernelThreads));
      Value row = e.add(row0, e.divu(c, perRow));
      auto ifOp = scf::IfOp::create(b, loc, e.slt(row, nq), false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      storeGlobalVector(
          b, loc, zero, dqAcc,
          ValueRange{bi, h, row, e.mul(e.remu(c, perRow), e.idx(4))});
    }
  }
}

/// dq = scale * dqAcc in the element type, 8 elements per lane, rows in
/// order (coalesced).
void emitDqConvert(BackwardEmitter &e, gpu::LaunchOp launch, Value dqAcc,
                   Value dq, int64_t d, Value scale, Type elt, bool packed) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  auto vf = VectorType::get({kChunk}, b.getF32Type());
  auto vt = VectorType::get({kChunk}, elt);
  // First: the run-time scale leads the parameters, as in every kernel.
  Value s = vector::BroadcastOp::create(b, loc, vf, scale);
  Value nq = memref::DimOp::create(b, loc, dqAcc, 2);
  dq = e.batchView(dq, packed);
  (void)memref::DimOp::create(b, loc, dq, 2);
  gpu::KernelDim3 ids = launch.getBlockIds();
  Value bi = ids.z, h = ids.y, tid = launch.getThreadIds().x;
  Value row0 = e.mul(ids.x, e.idx(kRowKernelThreads));
  int64_t perRow = d / kChunk;
  // Loads in groups of kConvertBatch before their stores (which LLVM must
  // assume alias them): that many round trips in flight per thread. Rows
  // past Nq read row Nq - 1 and store nothing.
  constexpr int64_t kConvertBatch = 8;
  Value lastRow = e.sub(nq, e.idx(1));
  for (int64_t i0 = 0; i0 < perRow; i0 += kConvertBatch) {
    SmallVector<Value> rows, cols, xs;
    for (int64_t i = i0; i < std::min(perRow, i0 + kConvertBatch); ++i) {
      Value c = e.add(tid, e.idx(i * kRowKernelThreads));
      rows.push_back(e.add(row0, e.divu(c, perRow)));
      cols.push_back(e.mul(e.remu(c, perRow), e.idx(kChunk)));
      Value readRow = arith::MinUIOp::create(b, loc, rows.back(), lastRow);
      xs.push_back(loadGlobalVector(b, loc, vf, dqAcc,
                                    ValueRange{bi, h, readRow, cols.back()}));
    }
    for (auto [row, col, x] : llvm::zip_equal(rows, cols, xs)) {
      auto ifOp = scf::IfOp::create(b, loc, e.slt(row, nq), false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      Value y = arith::TruncFOp::create(b, loc, vt, e.fmul(x, s));
      storeGlobalVector(b, loc, y, dq, ValueRange{bi, h, row, col});
    }
  }
}

/// Whether the steps' mask is a causal band (bounded on the right only: the
/// first key blocks see the most queries), read at the host without leaving
/// IR behind (the mask's parameters are built in a scratch block).
bool isCausalBand(OpBuilder &b, Location loc, const BackwardConfig &cfg) {
  if (!cfg.masked || !cfg.mask)
    return false;
  Block scratch;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&scratch);
  KernelMask km = KernelMask::build(b, loc, cfg.mask, cfg.maskOperands);
  bool band = km.hasRight() && !km.hasLeft();
  for (Operation &op : scratch)
    op.dropAllReferences();
  while (!scratch.empty())
    scratch.back().erase();
  return band;
}

/// Whether a key-block kernel may split its GQA group over G blocks, one
/// query head each (grid y = Hq), adding dK and dV into f32 accumulators
/// that a row kernel converts (FA3's structure). One block per (key block,
/// kv head) walking G heads makes few, long blocks: with 128 of them on 132
/// multiprocessors (16:2, B = 1, 8k: 1.79x the time of 16:4, H100) the
/// longest is twice the mean. The warp-specialized grid kernel, causal, not
/// deterministic, dense.
bool splitsGroups(const BackwardConfig &cfg, bool causalBand, bool packed,
                  bool orderedDq) {
  return cfg.warpSpecialized && !cfg.persistent && cfg.split == 1 &&
         cfg.wgSplit == 1 && causalBand && !packed && !orderedDq;
}

/// Whether a key-block kernel's fixed dQ order may rotate each key block's
/// query blocks (KeyBlockKernel::orderRank): every key block sees every
/// query block (no mask, no modifiers), one tile per block.
bool rotatesDqOrder(const BackwardConfig &cfg, bool orderedDq, bool packed) {
  return orderedDq && !cfg.mask && !cfg.modifiers && !cfg.persistent && !packed;
}

/// Whether `init` (a shared output of the nest) is a linalg.fill of zero.
bool isZeroFill(Value init) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  if (!fill)
    return false;
  Value x = fill.getInputs()[0];
  return matchPattern(x, m_AnyZeroFloat()) || matchPattern(x, m_Zero());
}

//===----------------------------------------------------------------------===//
// Score-tile math shared by both GEMM kernels
//===----------------------------------------------------------------------===//

/// Called between the two phases of scoreGradients with P (C fragments);
/// returns the dP fragments (the kernel may issue GEMMs on P and wait for
/// dP's GEMM here).
using AfterProbabilities = function_ref<SmallVector<Value>(ArrayRef<Value> p)>;

/// P and dS of one score tile held as C fragments `s` (scores) and `dp`,
/// with per-element lse2 / delta / visibility supplied by the kernel.
/// Returns {P, dS} as C fragments (f32). With `afterP`, `dp` is empty: every
/// P is computed first, then afterP(P) gives dP and dS follows. A null lse2
/// (delta) means the kernel folded it into the GEMM's accumulator: `s`
/// holds S - lse2 / foldedExp and P = exp2(foldedExp s) (`dp` holds dP -
/// delta). `fullTile` (no modifiers): an i1, uniform over the block, true
/// when `visible` holds for every element of the tile; such tiles skip the
/// per-element mask (an scf.if around it), P of the others is selected as
/// before.
std::pair<SmallVector<Value>, SmallVector<Value>>
scoreGradients(BackwardEmitter &e, WarpFragments &frags,
               const BackwardConfig &cfg, ArrayRef<Value> s, ArrayRef<Value> dp,
               function_ref<Value(int64_t frag, int64_t h, int64_t el)> lse2,
               function_ref<Value(int64_t frag, int64_t h, int64_t el)> delta,
               function_ref<Value(int64_t frag, int64_t h, int64_t el)> visible,
               const ElementPositions *positions = nullptr,
               AfterProbabilities afterP = nullptr, Value foldedExp = Value(),
               Value fullTile = Value()) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  AttentionBackwardStepOp mods = cfg.modifiers;
  bool scoreMod = mods && mods.hasScoreMod(),
       maskMod = mods && mods.hasMaskMod();
  assert((!mods || positions) && "modifiers need the elements' positions");
  Value c = scoreMod ? cfg.modExp : cfg.factors.expFactor, zero = e.f32(0.0),
        one = e.f32(1.0);
  std::optional<ModifierInliner> scoreInl, gradInl, maskInl;
  Value capInv;
  auto inliner = [&](std::optional<ModifierInliner> &inl, Region &region,
                     bool score) {
    inl.emplace(b, loc, region, score, positions->captures, positions->batch,
                positions->head, positions->queryOf, positions->keyOf,
                positions->affine);
  };
  if (scoreMod) {
    inliner(scoreInl, mods.getScoreMod(), true);
    inliner(gradInl, mods.getScoreModGrad(), true);
    if (cfg.modSoftcap)
      capInv = arith::DivFOp::create(b, loc, one, cfg.modSoftcap);
  }
  if (maskMod)
    inliner(maskInl, mods.getMaskMod(), false);
  auto gradient = [&](Value p, Value u, Value grad, Value dpValue,
                      Value deltaValue) {
    Value ds = e.fmul(p, deltaValue ? e.fsub(dpValue, deltaValue) : dpValue);
    if (cfg.softcap())
      ds = e.fmul(ds, e.fsub(one, e.fmul(u, u)));
    if (grad)
      ds = e.fmul(ds, grad);
    return ds;
  };
  // Two phases: one f32 per element waits for dP, its P times the score's
  // own derivative (dS = that x (dP - delta)).
  SmallVector<Value> weights;
  SmallVector<Value> pFrags, dsFrags;
  // After an element's P: its weight for the dS of phase two (afterP), or
  // its dS.
  auto finish = [&](Value p, Value u, Value grad, int64_t f, int64_t h,
                    int64_t el, SmallVector<Value> &dse) {
    if (afterP) {
      Value w = p;
      if (cfg.softcap())
        w = e.fmul(w, e.fsub(one, e.fmul(u, u)));
      if (grad)
        w = e.fmul(w, grad);
      weights.push_back(w);
      return;
    }
    dse.push_back(
        gradient(p, u, grad, frags.element(dp[f], h, el), delta(f, h, el)));
  };
  assert((!fullTile || !mods) && "the full-tile path is for plain steps");
  // fullTile: every unselected P (and its score, for the softcap's
  // derivative), element by element.
  SmallVector<Value> pe, us;
  for (size_t f = 0; f < s.size(); ++f) {
    SmallVector<Value> dse;
    if (!fullTile)
      pe.clear();
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t el = 0; el < 2; ++el) {
        Value u = frags.element(s[f], h, el), grad;
        int64_t qKey = positions ? positions->queryKey(f, h, el) : 0,
                kKey = positions ? positions->keyKey(f, h, el) : 0;
        if (scoreMod) {
          Value x = e.fmul(u, cfg.modScale);
          u = scoreInl->at(x, qKey, kKey);
          grad = gradInl->at(x, qKey, kKey);
          if (capInv)
            u = faptx::TanhOp::create(b, loc, e.fmul(u, capInv));
        } else if (cfg.softcap()) {
          u = faptx::TanhOp::create(b, loc, e.fmul(u, cfg.factors.capIn));
        }
        // P = exp2(u c - lse2); lse2 = +inf (padded or empty rows) gives 0.
        Value l = lse2(f, h, el);
        Value x = l ? math::FmaOp::create(b, loc, u, c,
                                          arith::NegFOp::create(b, loc, l))
                          .getResult()
                    : e.fmul(u, foldedExp);
        // (Denormal results flushed where registers are tight, as in the
        // forward's wgmma softmax.)
        Value p = cfg.tightRegisters()
                      ? faptx::Ex2Op::create(b, loc, x).getResult()
                      : math::Exp2Op::create(b, loc, x).getResult();
        if (fullTile) {
          // Selected below, all elements at once.
          pe.push_back(p);
          us.push_back(u);
          continue;
        }
        Value vis = visible(f, h, el);
        if (maskMod) {
          Value seen = maskInl->at(Value(), qKey, kKey);
          vis = vis ? arith::AndIOp::create(b, loc, vis, seen) : seen;
        }
        if (vis)
          p = arith::SelectOp::create(b, loc, vis, p, zero);
        pe.push_back(p);
        finish(p, u, grad, f, h, el, dse);
      }
    if (fullTile)
      continue;
    pFrags.push_back(frags.fromElements(pe));
    if (!afterP)
      dsFrags.push_back(frags.fromElements(dse));
  }
  if (fullTile) {
    // A tile that the mask leaves whole needs no selection: one branch for
    // the block instead of a compare and a select per element.
    SmallVector<Type> types(pe.size(), b.getF32Type());
    auto ifOp = scf::IfOp::create(b, loc, types, fullTile, /*withElse=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      scf::YieldOp::create(b, loc, pe);
      b.setInsertionPointToStart(ifOp.elseBlock());
      SmallVector<Value> selected;
      for (size_t i = 0; i < pe.size(); ++i) {
        int64_t f = i / 4, h = (i / 2) % 2, el = i % 2;
        Value vis = visible(f, h, el);
        selected.push_back(
            vis ? arith::SelectOp::create(b, loc, vis, pe[i], zero).getResult()
                : pe[i]);
      }
      scf::YieldOp::create(b, loc, selected);
    }
    for (size_t f = 0; f < s.size(); ++f) {
      SmallVector<Value> pf, dse;
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t el = 0; el < 2; ++el) {
          size_t i = 4 * f + 2 * h + el;
          Value p = ifOp.getResult(i);
          pf.push_back(p);
          finish(p, us[i], Value(), f, h, el, dse);
        }
      pFrags.push_back(frags.fromElements(pf));
      if (!afterP)
        dsFrags.push_back(frags.fromElements(dse));
    }
  }
  if (!afterP)
    return {pFrags, dsFrags};
  SmallVector<Value> late = afterP(pFrags);
  for (size_t f = 0; f < s.size(); ++f) {
    SmallVector<Value> dse;
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t el = 0; el < 2; ++el) {
        Value dpValue = frags.element(late[f], h, el), d = delta(f, h, el);
        dse.push_back(e.fmul(weights[4 * f + 2 * h + el],
                             d ? e.fsub(dpValue, d) : dpValue));
      }
    dsFrags.push_back(frags.fromElements(dse));
  }
  return {pFrags, dsFrags};
}

//===----------------------------------------------------------------------===//
// Key-block kernel: dK, dV (and dQ atomics)
//===----------------------------------------------------------------------===//

/// The nest `fa-tile-attention-backward` builds for dK/dV: forall over
/// (batch, kv head[, key block]) { [scf.for key blocks {fa.dq_accumulation}]
/// { scf.for heads of the group { scf.for query blocks { step } } } }.
struct KeyBlockNest {
  StepInputs in;
  scf::ForallOp forall;
  /// The block id of each of the forall's induction variables (the key-block
  /// loop, when there is one, takes x).
  SmallVector<gpu::Dimension> blockDims;
  scf::ForOp keyLoop, headLoop, queryLoop;
  bool withDq = false;
  /// The key-block loop asks for a fixed dQ order (deterministic).
  bool orderedDq = false;
  Value dq, dk, dv;
  SmallVector<Operation *> stores;
};

FailureOr<KeyBlockNest> matchKeyBlockNest(AttentionBackwardStepOp step) {
  KeyBlockNest n;
  auto fail = [&](Operation *at, const Twine &why) -> FailureOr<KeyBlockNest> {
    at->emitError("fa-convert-tiled-attention-backward-to-gpu: ") << why;
    return failure();
  };
  n.queryLoop = dyn_cast<scf::ForOp>(step->getParentOp());
  n.headLoop = n.queryLoop ? dyn_cast<scf::ForOp>(n.queryLoop->getParentOp())
                           : scf::ForOp();
  if (!n.headLoop)
    return fail(step, "expected the step in a query-block loop inside a "
                      "head loop");
  Operation *parent = n.headLoop->getParentOp();
  n.keyLoop = dyn_cast<scf::ForOp>(parent);
  if (n.keyLoop)
    parent = n.keyLoop->getParentOp();
  n.forall = dyn_cast<scf::ForallOp>(parent);
  n.withDq = step.getDqAcc() != nullptr;
  if (!n.forall || !n.forall.isNormalized())
    return fail(step, "expected the loops in a normalized scf.forall over "
                      "(batch, kv head[, key block])");
  SmallVector<gpu::Dimension> unmapped = {gpu::Dimension::z, gpu::Dimension::y};
  if (!n.keyLoop)
    unmapped.push_back(gpu::Dimension::x);
  FailureOr<SmallVector<gpu::Dimension>> blockDims =
      getBlockDims(n.forall, unmapped);
  if (failed(blockDims) ||
      (n.keyLoop && llvm::is_contained(*blockDims, gpu::Dimension::x)))
    return fail(n.forall, "expected a mapping of distinct #gpu.block<x|y|z> "
                          "(x left to a key-block loop), or none on a forall "
                          "over (batch, kv head[, key block])");
  n.blockDims = *blockDims;
  if (!step.getDkAcc() || n.withDq != bool(n.keyLoop))
    return fail(step, "a key-block nest computes dK and dV, and dQ exactly "
                      "when it loops over key blocks itself");
  for (scf::ForOp loop : {n.keyLoop, n.headLoop, n.queryLoop})
    if (loop && !isOneInteger(loop.getStep()))
      return fail(loop, "expected unit-step loops");
  if (n.keyLoop && !isZeroInteger(n.keyLoop.getLowerBound()))
    return fail(n.keyLoop, "expected the key-block loop to start at 0");
  // Running the key blocks as concurrent thread blocks with dQ atomics is
  // what the marker allows.
  if (n.keyLoop && !n.keyLoop->hasAttr(kDqAccumulationAttrName))
    return fail(n.keyLoop, Twine("a key-block loop carrying dQ must be "
                                 "marked ") +
                               kDqAccumulationAttrName);
  n.orderedDq = n.keyLoop && isOrderedDqAccumulation(n.keyLoop);
  if (!isZeroInteger(n.headLoop.getLowerBound()))
    return fail(n.headLoop, "expected the head loop to start at 0");
  if (failed(matchStepInputs(step, n.in, n.forall)))
    return failure();
  SmallVector<Value> dests;
  FailureOr<SmallVector<Operation *>> stores = resultStores(n.forall, dests);
  if (failed(stores) || dests.size() != (n.withDq ? 3u : 2u))
    return fail(n.forall, "the forall's results (dq, dk, dv or dk, dv) must "
                          "be materialized into memrefs");
  n.stores = *stores;
  if (n.withDq)
    n.dq = dests[0];
  n.dk = dests[dests.size() - 2];
  n.dv = dests.back();
  return n;
}

/// Packed sequences: zeroes the dK and dV rows outside [cu_k[0], cu_k[B])
/// (the rows of no sequence), one row per thread. The bounds are the nest's
/// own key rows, recomputed for the first sequence's first key block and
/// past the last sequence's keys.
void emitZeroRows(BackwardEmitter &e, gpu::LaunchOp launch, KeyBlockNest n,
                  int64_t d, int64_t dv, Type elt) {
  OpBuilder &b = e.b;
  Location loc = e.loc;
  e.nest = n.forall;
  Value dk = e.batchView(n.dk, true), dv4 = e.batchView(n.dv, true);
  Value tk = memref::DimOp::create(b, loc, dk, 2);
  Value h = launch.getBlockIds().y, tid = launch.getThreadIds().x;
  Value row =
      e.add(e.mul(launch.getBlockIds().x, e.idx(kRowKernelThreads)), tid);
  // The sequence induction variable is the one on z.
  int64_t seqDim =
      llvm::find(n.blockDims, gpu::Dimension::z) - n.blockDims.begin();
  auto firstBlockOf = [&](Value seq) {
    IRMapping m;
    for (auto [i, iv] : llvm::enumerate(n.forall.getInductionVars()))
      m.map(iv, int64_t(i) == seqDim ? seq : e.idx(0));
    m.map(n.keyLoop.getInductionVar(), e.idx(0));
    return m;
  };
  AttentionBackwardStepOp step = n.in.step;
  IRMapping m0 = firstBlockOf(e.idx(0));
  Value lo =
      e.sub(e.clone(n.in.k.offsets[2], m0), e.clone(step.getKStart(), m0));
  Value numSeqs = e.clone(n.forall.getMixedUpperBound()[seqDim], m0);
  auto hasSeqs = scf::IfOp::create(b, loc, TypeRange{b.getIndexType()},
                                   e.slt(e.idx(0), numSeqs), true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(hasSeqs.thenBlock());
    IRMapping last = firstBlockOf(e.sub(numSeqs, e.idx(1)));
    Value hi = e.add(e.sub(e.clone(n.in.k.offsets[2], last),
                           e.clone(step.getKStart(), last)),
                     e.clone(step.getKLen(), last));
    scf::YieldOp::create(b, loc, hi);
    b.setInsertionPointToStart(hasSeqs.elseBlock());
    scf::YieldOp::create(b, loc, lo);
  }
  Value hi = hasSeqs.getResult(0);
  Value orphan = arith::OrIOp::create(
      b, loc, e.slt(row, lo),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, row, hi));
  orphan = arith::AndIOp::create(b, loc, orphan, e.slt(row, tk));
  auto ifOp = scf::IfOp::create(b, loc, orphan, false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  auto vt = VectorType::get({kChunk}, elt);
  Value zero = arith::ConstantOp::create(b, loc, vt, b.getZeroAttr(vt));
  for (auto [mem, width] : {std::pair<Value, int64_t>{dk, d}, {dv4, dv}})
    for (int64_t c = 0; c < width / kChunk; ++c)
      storeGlobalVector(b, loc, zero, mem,
                        ValueRange{e.idx(0), h, row, e.idx(c * kChunk)});
}

/// Columns of one box of the warp-specialized kernel's dQ reductions: 128
/// bytes of f32, the most a 128-byte swizzled box spans; a warpgroup's
/// [64, 64] unit is two such panels.
constexpr int64_t kDqBoxCols = 32;
constexpr int64_t kDqUnitFloats = 64 * 64;
/// Named barriers of the warp-specialized backward: 1 is the consumers'
/// (dS^T); the dQ hand-over of warpgroup w uses kDqFullBarrier + w and
/// kDqEmptyBarrier + w (the kernel has at most two consumer warpgroups:
/// block_kv = 16 x warps <= 128).
constexpr int64_t kDqFullBarrier = 2;
constexpr int64_t kDqEmptyBarrier = 4;
/// Polls of a fixed-order dQ semaphore before the kernel traps (each an L2
/// round trip: tens of seconds, far past any wait for a running block).
constexpr int64_t kDqOrderPolls = int64_t(1) << 26;
/// The most key blocks per head for which the fixed dQ order rotates (and
/// fewer than the multiprocessors): all of a head's blocks must be able to
/// be resident together (one per multiprocessor), since a block may wait
/// for one launched after it.
constexpr int64_t kMaxRotatedKeyBlocks = 64;

class KeyBlockKernel : public BackwardEmitter {
public:
  /// `maps`: the host tensor maps of q, k, v and dout (warp-specialized).
  /// `dqOrder`: the semaphores of a fixed dQ order (a nest marked
  /// `fa.dq_accumulation = "ordered"`): the dQ warp adds each query block's
  /// dQ with key blocks descending, each waiting for the key block above
  /// (FlashAttention-3's deterministic mode). Given `hostSms` (the launch
  /// device's multiprocessor count, a host value the kernel takes as a
  /// parameter, the manifest's SMS; rotatesDqOrder), the order rotates.
  KeyBlockKernel(OpBuilder &b, Location loc, KeyBlockNest &n,
                 const BackwardConfig &cfg, Value lse2, Value delta,
                 Value dqAcc, Value dqOrder = Value(),
                 ArrayRef<Value> maps = {}, Value dkAcc = Value(),
                 Value dvAcc = Value(), Value hostSms = Value())
      : BackwardEmitter(b, loc), n(n), cfg(cfg), frags(b, loc, cfg.elt),
        wg(b, loc, cfg.elt), lse2(lse2), delta(delta), dqAcc(dqAcc),
        dkAcc(dkAcc), dvAcc(dvAcc), dqOrder(dqOrder), hostSms(hostSms),
        hostMaps(maps) {
    assert((!hostSms || dqOrder) && "only a fixed dQ order rotates");
    elt = cfg.elt;
  }

  /// Emits the kernel body; returns its shared-memory bytes.
  int64_t emit(gpu::LaunchOp launch);

private:
  /// Maps the nest's block induction variables (and the key loop's) to the
  /// block coordinates `ids` of the grid `grid` (the launch's, or a
  /// persistent kernel's tile and its tile grid); sets the dK / dV slice.
  /// `ordered`: the coordinates are in launch order already (persistent:
  /// mapTile ordered them).
  void mapBlock(gpu::KernelDim3 ids, gpu::KernelDim3 grid,
                bool ordered = false);
  /// Persistent: maps tile `t` of the grid of key blocks (heavy blocks
  /// first as mapBlock orders them; i32 arithmetic) and sets the tile's
  /// values (tileValues); returns its iteration count. The loops call it
  /// again on a fenced copy of the tile index at each iteration, so that
  /// the tile's values are recomputed there rather than held (or spilled)
  /// across the iterations.
  Value mapTile(Value t);
  /// The grid of key blocks (x: key blocks, y / z: the forall's), cloned
  /// with `base`.
  std::array<Value, 3> tileGrid();
  /// The mapped block's key rows, head, batch and query blocks (kStart, ...,
  /// qbLo, nQB); returns its iteration count (heads x query blocks).
  Value tileValues();
  /// The consumers' part of one key block: the column ring's first stages,
  /// the iterations and the dK / dV stores.
  void consumeTile(Value total, ArrayRef<Value> init);
  /// Persistent: calls `body` with each tile's iteration count for the
  /// tiles of this thread block (round r takes tiles [r G, (r + 1) G) of
  /// the grid of key blocks, block b the b-th of them in even rounds and
  /// the b-th from the end in odd ones), with the tile mapped (mapBlock,
  /// tileValues) and `ringBase` / `kvItem` set; each role walks them.
  void forEachTile(function_ref<void(Value)> body);
  /// The Q / dO ring's item of iteration t: persistent, the iterations of
  /// the block's earlier tiles come before.
  Value item(Value t) {
    return ringBase ? fromI32(arith::AddIOp::create(b, loc, ringBase, toI32(t)))
                    : t;
  }
  /// Persistent: the K / V channels' item of the current tile.
  Value kvIndex() { return fromI32(kvItem); }
  Value fromI32(Value v) {
    return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), v);
  }
  /// A causal band (bounded on the right only): key block j sees the
  /// queries from j on, the first blocks are the longest.
  bool heavyBlocksFirst() const {
    // (The fixed dQ order dispatches key blocks in that order instead.)
    return !dqOrder && cfg.masked && cfg.mask && cfg.kmask.hasRight() &&
           !cfg.kmask.hasLeft();
  }
  /// The run-time test of the causal GQA rules (mapBlock's launch order,
  /// iteration's loop order): at most 64 key blocks, at most 1024 blocks
  /// where `blocks` is given, and at least `minGroup` query heads per kv
  /// head.
  Value smallGqaGrid(Value keyBlocks, Value blocks, Value group,
                     int64_t minGroup) {
    using P = arith::CmpIPredicate;
    Value small = cmpIdx(P::ule, keyBlocks, 64);
    if (blocks)
      small =
          arith::AndIOp::create(b, loc, small, cmpIdx(P::ule, blocks, 1024));
    return arith::AndIOp::create(b, loc, small,
                                 cmpIdx(P::uge, group, minGroup));
  }
  /// `a pred c` for an index `a` and a constant `c`.
  Value cmpIdx(arith::CmpIPredicate pred, Value a, int64_t c) {
    return arith::CmpIOp::create(b, loc, pred, a, idx(c));
  }
  /// `x and not y` for i1 values.
  Value andNot(Value x, Value y) {
    Value notY = arith::XOrIOp::create(
        b, loc, y, arith::ConstantIntOp::create(b, loc, 1, 1));
    return arith::AndIOp::create(b, loc, x, notY);
  }
  /// queryOuter kernels: the run-time test for 4 <= G < 8 with at most 32
  /// key blocks, where the query-outer order runs with the plain launch
  /// order (iteration() says why).
  Value midGqaGrid(Value keyBlocks, Value group) {
    assert(queryOuter() && "only the query-outer kernels take this order");
    using P = arith::CmpIPredicate;
    // (One statement per op: the IR's order does not depend on the order
    // in which a compiler evaluates arguments.)
    Value few = cmpIdx(P::ule, keyBlocks, 32);
    Value atLeast4 = cmpIdx(P::uge, group, 4);
    Value below8 = cmpIdx(P::ult, group, 8);
    Value mid = arith::AndIOp::create(b, loc, atLeast4, below8);
    return arith::AndIOp::create(b, loc, few, mid);
  }
  /// The flattened loop's order may be (query block descending, head) for
  /// a causal block with head dims of 128 or more (iteration() says when
  /// and why), else it is (head, query block). (Not at D = 64: 0.98-1.03x
  /// the time at G = 8, H100.)
  bool queryOuter() const {
    return heavyBlocksFirst() && cfg.d >= 128 && !cfg.persistent;
  }
  /// queryOuter: whether this tile's loop is in that order, and the key
  /// block modulo the group size (the first head).
  Value queryOuterNow, headRotation;
  /// The mapping of the nest's induction variables at iteration t of the
  /// flattened (head, query block) loop.
  IRMapping iteration(Value t);
  void issue(Value t, Value buf);
  SmallVector<Value> body(Value t, Value buf, ValueRange acc);
  /// body() on warpgroup MMAs.
  SmallVector<Value> bodyWgmma(Value t, Value buf, ValueRange acc);
  /// P^T and dS^T (C fragments) from the S^T and dP^T fragments of one tile:
  /// per-column lse2 / delta and the mask (shared by the bodies). The
  /// fragments cover queries [qOff, qOff + nCols) of the block (default:
  /// all of them). `afterP`: see scoreGradients.
  std::pair<SmallVector<Value>, SmallVector<Value>>
  gradients(IRMapping &it, Value qRow0, ArrayRef<Value> s, ArrayRef<Value> dpT,
            Value qOff = Value(), int64_t nCols = 0,
            AfterProbabilities afterP = nullptr);
  /// bodyWgmma for a wgSplit pair of warpgroups sharing 64 keys.
  SmallVector<Value> bodyWgmmaSplit(Value t, Value buf, ValueRange acc);
  /// Stores this warp's 16 key rows of P^T or dS^T (packed A registers of
  /// queries [qOff, ...)) into a 128-byte swizzled panel tile over the
  /// queries.
  void storeTransposed(const SmemTile &tile, ArrayRef<Value> regs, Value qOff,
                       int64_t nCols);
  /// dQ = dS K of this iteration added to the accumulator (dS^T in dsTile).
  /// `afterIssue` (one unit per warpgroup only) issues more GEMMs after
  /// dQ's, which run while dQ is reduced.
  void addDqWgmma(IRMapping &it, function_ref<void()> afterIssue = nullptr);
  /// The dQ GEMM units (64 queries x 64 columns) each warpgroup takes per
  /// iteration, or 0 when they do not divide evenly.
  int64_t dqUnitsPerWarpgroup() const;
  /// A chain of SS wgmmas C[M, n] = A B^T over `depth` (both operands
  /// K-major 64-column panels, 16 per k-step); no commit.
  SmallVector<Value> chainSS(Value descA, const SmemTile &a, Value descB,
                             const SmemTile &bt, int64_t depth, int64_t n,
                             ArrayRef<Value> init = {});
  /// Warp-specialized: the accumulator of an S^T or dP^T chain starting at
  /// -factor x this lane's columns (`cols`, loadColumns' order; no factor:
  /// -cols).
  SmallVector<Value> columnInit(ArrayRef<Value> cols, Value factor);
  void epilogue(ValueRange acc);
  /// dqAcc[at] += x, dqAcc[at + 1] += y.
  void addToAccumulator(ValueRange at, Value x, Value y);
  /// sm_90: adds a warp's [16, chunk] dQ tile (C fragments) to rows
  /// [row0, +16) x columns [col0, +chunk) of dqAcc through the warp's
  /// staging area: 16-byte reductions, consecutive lanes along rows. An
  /// 8-row area takes the fragments' two 8-row halves in turn.
  void stageAndReduce(ArrayRef<Value> dq, int64_t chunk, Value batch,
                      Value head, Value row0, Value col0);
  /// Adds a warp's [16, chunk] dQ tile (C fragments) at rows [row0, +16) x
  /// columns [col0, +chunk): staged when the kernel has a staging area,
  /// else each lane's two adjacent columns at a time.
  void reduceDq(ArrayRef<Value> dq, int64_t chunk, Value batch, Value head,
                Value row0, Value col0);
  /// Warp-specialized: the channels and the roles (the producer's loop),
  /// then the consumers' K / V wait; the builder ends in the consumers'
  /// region.
  void emitWarpRoles(Value total);
  /// Warp-specialized: lse2 and delta of iteration `t`'s query block into
  /// stage `stage` of the column ring (cp.async, uncommitted).
  void copyColumns(Value t, Value stage);
  /// Warp-specialized: this lane's lse2 and delta columns of iteration `t`
  /// from the column ring into wsLseCols / wsDeltaCols.
  void loadColumns(Value t);
  /// Warp-specialized dQ: each consumer warpgroup writes its [64, 64] dQ
  /// unit (this warp's 16 rows, C fragments) to its 128-byte swizzled
  /// staging panels and hands them to the producer's dQ warp, which adds
  /// them to the accumulator with bulk tensor reductions (emitDqWarp), so
  /// the consumers issue no reductions. Named barriers per warpgroup
  /// (128 consumer threads + the dQ warp): "full" after the stores,
  /// "empty" once the reductions have read the panels.
  void stageDqUnit(ArrayRef<Value> dq);
  /// `finalWait`: the reductions complete before it returns (persistent:
  /// once, after the last tile's).
  void emitDqWarp(Value total, Value producerLane, bool finalWait = true);
  /// The fixed dQ order (dQ warp, one lane): before the first addition to a
  /// query block, wait (when `waits`) until the key block above has added
  /// to it; after the last, let the key block below go on.
  void waitForTurn(Value semaphore, Value waits, Value want);
  void passTurn(Value semaphore, Value mine);
  /// Query block `rem` (counted from qbLo) of the block's iteration order:
  /// rotated by qbShift when the fixed dQ order rotates.
  Value rotateQb(Value rem);
  /// The rotated fixed order's position of this key block among those
  /// adding into query block `qb` (rotatesDqOrder).
  Value orderRank(Value qb);
  void dqBarrier(bool sync, int64_t first, Value group);
  /// Per-warp dQ staging (f32, sm_90 only) and its row stride.
  Value dqStage;
  int64_t stageStride = 0;
  /// Warp-specialized: the staging area's byte offset (1024-byte aligned)
  /// and the kernel-side tensor map of the dQ accumulator.
  int64_t dqStageOffset = 0;
  Value dqMap;

  /// (A copy: packed memrefs are replaced by their in-kernel views.)
  KeyBlockNest n;
  const BackwardConfig &cfg;
  WarpFragments frags;
  WarpgroupMma wg;
  // wgmma descriptors: K and V rows of this warpgroup (K-major A); Q and dO
  // buffer 0 as K-major B (S^T, dP^T) and MN-major B (dK, dV); dS^T as
  // MN-major A and K as MN-major B (dQ).
  Value kDescA, vDescA, qDescB, doDescB, qDescMN, doDescMN, dsDescA, kDescMN;
  // wgSplit: P^T and dS^T as K-major A of the dV / dK GEMMs.
  Value pDescK, dsDescK;
  Value lse2, delta, dqAcc;
  /// The group split (splitsGroups): the f32 dK / dV accumulators, [B, Hkv,
  /// Nk or 0, D / Dv]; in the kernel, whether this launch splits (their
  /// rows are not 0) and this block's head of the group.
  Value dkAcc, dvAcc, splitNow, headOffset;
  /// The fixed dQ order: the semaphores and their query heads and blocks;
  /// from which query block of a head on (counted from qbLo) the key block
  /// above this one (which adds first) sees the same query blocks; this
  /// block's key block (the key-block loop's index).
  Value dqOrder, orderHeads, orderBlocks, firstWait, blockKey;
  /// The fixed dQ order without a mask (rotatesDqOrder): the launch
  /// device's multiprocessor count (a host value, given only then), whether
  /// this launch rotates (few enough key blocks), the number of key blocks,
  /// and the query block this block starts at (0 when not rotating).
  Value hostSms, rotates, orderKeyBlocks, qbShift;
  IRMapping base;
  /// Persistent: this block's x and the launch's (blocks per grid), the
  /// Q / dO items of the block's earlier tiles and its tile count so far
  /// (the K / V channels' item).
  /// (ringBase, kvItem and tileLinear are i32: one register each.)
  Value persistentBlock, persistentGrid, ringBase, kvItem;
  /// Persistent: the current tile and the mapping before any tile's (each
  /// tile's clones start from it).
  Value tileLinear;
  IRMapping tileBase;
  /// Persistent: mapTile on a fenced copy of the current tile's index.
  void remapTile() {
    if (cfg.persistent)
      (void)mapTile(fromI32(wg.fenceOperands({tileLinear})[0]));
  }
  Value nq, nk, kStart, kBatch, kHead, qbLo, nQB, warp, warpKey0;
  /// This block's slice of the head-dim columns (0 unless split) and its
  /// first dK / dV column.
  Value slice, dkCol0, dvCol0;
  SmemTile kTile, vTile, qTile, doTile, dsTile, pTile;
  /// (colStage: the element offset of this iteration's stage of colS.)
  Value lseS, deltaS, colS, colStage;
  /// Warp-specialized: host tensor maps (q, k, v, dout), channels, the
  /// byte offsets of each tile in the dynamic shared memory, the current
  /// dS^T buffer (bytes and elements past the first) and the columns of
  /// loadColumns.
  SmallVector<Value> hostMaps;
  Operation *roles = nullptr;
  Value smemBase, smemPad, smemAligned;
  Value qChannel, doChannel, kChannel, vChannel;
  int64_t qOffset = 0, doOffset = 0, kOffset = 0, vOffset = 0;
  Value dsBufBytes, dsBufElems;
  SmallVector<Value> wsLseCols, wsDeltaCols;
  /// Warp-specialized: lse2 and delta come from a ring of
  /// kBackwardColumnStages [2, Br] f32 stages (colS) that the consumers fill
  /// by cp.async two iterations ahead: loaded from global memory where they
  /// are used, they were a quarter of the consumers' stall samples (L2
  /// latency), and held in registers any earlier they spill. delta starts
  /// the dP^T accumulators, and so does lse2 the S^T ones where
  /// backwardFoldsLse (not with a softcap or score_mod: S is not the
  /// exponent's argument there), instead of being subtracted per element,
  /// so their registers are free again once the GEMMs are issued.
  /// `expRecip` = 1 / foldedExp.
  /// The exponent factor is at least 2^-100 there (a smaller one only
  /// changes P by 2^-100 |S|), so that lse2 / it stays finite.
  bool foldLse = false;
  Value wsTotal, foldedExp, expRecip;
  Value laneK, laneQB, laneV, laneDoB, laneDoA, laneQA, laneDsB, laneKA;
};

IRMapping KeyBlockKernel::iteration(Value t) {
  IRMapping m = base;
  Value head, qb;
  if (queryOuter()) {
    // A causal GQA block walks its group's G heads. Head by head, the key
    // blocks of a (kv head, batch) drift apart (block j spends nQB(j)
    // iterations per head), so that together they read every head's Q and
    // dO, and L2 misses (40% hits at 16:2 and 2k, 83% for MHA). Query
    // blocks outer, last first, heads inner instead: they read the same
    // query block at the same time, each stopping at its diagonal. The
    // heads rotate by the key block (headRotation) so that the blocks add
    // into G different dQ tiles, not all into one. H100, 16k tokens: D =
    // 128 16:2 (G = 8) 0.78-0.81x the time at 1k / 2k, 0.93x at 8k; D =
    // 256 8:1 0.78x at 2k (1.02x at 8k). But 1.04x at 16:2 with 128 key
    // blocks (16k), where mapBlock does not reorder either: so for G >= 8
    // only with at most 64 key blocks. At G = 4 the order alone leaves L2
    // at 50% hits: there mapBlock's reorder keeps blocks of every (kv head,
    // batch) resident at once (256 MB of Q, dO and dQ at 2k). With the
    // plain launch order instead (midGqaGrid): 85% hits, 0.80 / 0.89x the
    // time at 1k / 2k (H100, 16:4), but 1.02x at 8k: so at most 32 key
    // blocks. One i32 division either way (the 64-bit one was a SASS
    // subroutine call: with it gone MHA takes 0.94-0.98x the time).
    Value group = clone(n.headLoop.getUpperBound(), base);
    Value gqa = queryOuterNow;
    auto [quot, rem] =
        divRemU32(t, arith::SelectOp::create(b, loc, gqa, group, nQB));
    Value rotated = add(rem, headRotation);
    rotated = arith::SelectOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, rotated,
                              group),
        sub(rotated, group), rotated);
    head = arith::SelectOp::create(b, loc, gqa, rotated, quot);
    qb = arith::SelectOp::create(b, loc, gqa, sub(sub(nQB, idx(1)), quot), rem);
  } else if (cfg.tightRegisters() || cfg.persistent) {
    std::tie(head, qb) = divRemU32(t, nQB);
    qb = rotateQb(qb);
  } else {
    head = divu(t, nQB);
    qb = rotateQb(remu(t, nQB));
  }
  // (A split group: t < nQB, so head is 0 before the block's own.)
  if (headOffset)
    head = add(head, headOffset);
  m.map(n.headLoop.getInductionVar(), head);
  m.map(n.queryLoop.getInductionVar(), add(qbLo, qb));
  return m;
}

Value KeyBlockKernel::rotateQb(Value rem) {
  if (!qbShift)
    return rem;
  Value qb = add(rem, qbShift);
  return arith::SelectOp::create(
      b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, qb, nQB),
      sub(qb, nQB), qb);
}

Value KeyBlockKernel::orderRank(Value qb) {
  // Key block j starts at query block s_j = j * nQB / nKB and walks them
  // in order: it reaches `qb` at step (qb - s_j) mod nQB. The blocks with
  // s_j <= qb (j < J = ceil((qb + 1) nKB / nQB)) arrive first, the later
  // j the earlier; then the others, again the later j the earlier. The
  // order is fixed by the indices alone (deterministic), and a block
  // finds the ones before it done when all run in step.
  // (One op per statement: the IR's order does not depend on the order
  // C++ evaluates arguments in.)
  Value nKB = orderKeyBlocks, j = blockKey, one = idx(1);
  Value next = add(qb, one);
  Value reach = mul(next, nKB);
  Value roundUp = add(reach, sub(nQB, one));
  Value bigJ = divu(roundUp, nQB);
  Value early = slt(j, bigJ);
  Value lastEarly = sub(bigJ, one);
  Value earlyRank = sub(lastEarly, j);
  Value lastLate = add(bigJ, sub(nKB, one));
  Value lateRank = sub(lastLate, j);
  return arith::SelectOp::create(b, loc, early, earlyRank, lateRank);
}

void KeyBlockKernel::issue(Value t, Value buf) {
  IRMapping m = iteration(t);
  auto at = [&](const RowSlice &s, int i) { return clone(s.offsets[i], m); };
  Value row0 = mul(buf, idx(cfg.br));
  copyRows(n.in.qMem, at(n.in.q, 0), at(n.in.q, 1), at(n.in.q, 2), nq, qTile,
           row0, cfg.br, cfg.threads());
  copyRows(n.in.doMem, at(n.in.dout, 0), at(n.in.dout, 1), at(n.in.dout, 2), nq,
           doTile, row0, cfg.br, cfg.threads());
  if (n.in.packed) {
    copyF32RowsPacked(lse2, at(n.in.lse, 1), at(n.in.lse, 2), nq, lseS, row0,
                      cfg.br, cfg.threads());
    copyF32RowsPacked(delta, at(n.in.delta, 1), at(n.in.delta, 2), nq, deltaS,
                      row0, cfg.br, cfg.threads());
  } else {
    copyF32Rows(lse2, at(n.in.lse, 0), at(n.in.lse, 1), at(n.in.lse, 2), lseS,
                row0, cfg.br);
    copyF32Rows(delta, at(n.in.delta, 0), at(n.in.delta, 1), at(n.in.delta, 2),
                deltaS, row0, cfg.br);
  }
  commit();
}

std::pair<SmallVector<Value>, SmallVector<Value>>
KeyBlockKernel::gradients(IRMapping &it, Value qRow0, ArrayRef<Value> s,
                          ArrayRef<Value> dpT, Value qOff, int64_t nCols,
                          AfterProbabilities afterP) {
  const int64_t nqt = (nCols ? nCols : cfg.br) / 8;
  if (!qOff)
    qOff = idx(0);
  // Per-column lse2 and delta: columns qOff + 8 nt + 2 tig + {0, 1} of the
  // block.
  auto v2 = VectorType::get({2}, b.getF32Type());
  SmallVector<Value> lseCols = wsLseCols, deltaCols = wsDeltaCols;
  for (int64_t nt = 0; !cfg.warpSpecialized && nt < nqt; ++nt) {
    Value col = add(add(add(qRow0, qOff), idx(8 * nt)), mul(tig, idx(2)));
    lseCols.push_back(vector::LoadOp::create(b, loc, v2, lseS, col));
    deltaCols.push_back(vector::LoadOp::create(b, loc, v2, deltaS, col));
  }
  for (int64_t nt = 0; cfg.warpSpecialized && !foldLse && nt < nqt; ++nt) {
    Value col = add(add(colStage, idx(8 * nt)), mul(tig, idx(2)));
    lseCols.push_back(vector::LoadOp::create(b, loc, v2, colS, col));
  }
  auto colValue = [&](SmallVector<Value> &cols, int64_t f, int64_t el) {
    return vector::ExtractOp::create(b, loc, cols[f % nqt],
                                     ArrayRef<int64_t>{el});
  };

  // Visibility, keys as rows: key - query = d0 + (16 mt + 8 h - 8 nt - e)
  // with d0 = (kStart + warpKey0 + g) - (qStart + 2 tig).
  MaskLimits lim;
  AttentionBackwardStepOp step = n.in.step;
  ElementPositions pos;
  Value key0, query0, qLast, kLast, fullTile;
  Value qStart, kS, qLen, kLen;
  // The lane's limits, built at the first use: with the full-tile test, in
  // the branch of the partial tiles only.
  auto buildLimits = [&] {
    if (lim.keyLimit)
      return;
    key0 = add(add(kS, warpKey0), g);
    query0 = add(add(qStart, qOff), mul(tig, idx(2)));
    lim = maskLimits(cfg, key0, query0, qLen, kLen);
  };
  if (cfg.masked) {
    qStart = clone(step.getQStart(), it);
    kS = clone(step.getKStart(), it);
    qLen = clone(step.getQLen(), it);
    kLen = clone(step.getKLen(), it);
    // The warpgroup pairs (head dims past 128) test each tile whole first.
    // (Elsewhere the branch costs registers: the warp-specialized consumers
    // spill 36-72 bytes with it, and 22 other kernels of the package's set
    // would fall back to smaller tiles.)
    if (cfg.modifiers || cfg.wgSplit == 1) {
      buildLimits();
      qLast = toI32(sub(qLen, idx(1)));
      kLast = toI32(sub(kLen, idx(1)));
    } else {
      fullTile = wholeTileVisible(cfg, toI32(kS), toI32(qStart), toI32(kLen),
                                  toI32(qLen));
    }
  }
  auto visible = [&](int64_t f, int64_t h, int64_t el) -> Value {
    if (!cfg.masked)
      return Value();
    buildLimits();
    int64_t mt = f / nqt, nt = f % nqt, keyOff = 16 * mt + 8 * h;
    return visibleAt(lim, keyOff, keyOff - 8 * nt - el);
  };
  // Keys as rows: query 8 nt + el, key 16 mt + 8 h past the lane's first.
  if (cfg.modifiers) {
    Value q0 = toI32(query0), k0 = toI32(key0);
    pos.queryKey = [&](int64_t f, int64_t, int64_t el) {
      return (f % nqt) * 2 + el;
    };
    pos.keyKey = [&](int64_t f, int64_t h, int64_t) {
      return (f / nqt) * 2 + h;
    };
    pos.queryOf = [this, q0, qLast](int64_t key) -> Value {
      return arith::MinSIOp::create(
          b, loc, addNsw(q0, i32(8 * (key / 2) + key % 2)), qLast);
    };
    pos.keyOf = [this, k0, kLast](int64_t key) -> Value {
      return arith::MinSIOp::create(
          b, loc, addNsw(k0, i32(16 * (key / 2) + 8 * (key % 2))), kLast);
    };
    pos.affine = ModifierInliner::Positions{
        q0, k0, [](int64_t key) { return 8 * (key / 2) + key % 2; },
        [](int64_t key) { return 16 * (key / 2) + 8 * (key % 2); }};
    bindModifierOperands(pos, step, it);
  }

  // (Warp specialized: folded into the accumulators, see foldLse.)
  bool lseFolded = foldLse, deltaFolded = cfg.warpSpecialized;
  return scoreGradients(
      *this, frags, cfg, s, dpT,
      [&](int64_t f, int64_t, int64_t el) {
        return lseFolded ? Value() : colValue(lseCols, f, el);
      },
      [&](int64_t f, int64_t, int64_t el) {
        return deltaFolded ? Value() : colValue(deltaCols, f, el);
      },
      visible, cfg.modifiers ? &pos : nullptr, afterP,
      lseFolded ? foldedExp : Value(), fullTile);
}

SmallVector<Value> KeyBlockKernel::body(Value t, Value buf, ValueRange acc) {
  const int64_t m = cfg.mTiles, nqt = cfg.br / 8, ndk = cfg.dkCols() / 8,
                ndv = cfg.dvCols() / 8;
  IRMapping it = iteration(t);
  Value qRow0 = mul(buf, idx(cfg.br));
  auto keyRow = [&](int64_t mt) { return add(warpKey0, idx(16 * mt)); };

  // S^T = K Q^T and dP^T = V dO^T: [keys, queries], keys as rows.
  auto gemmT = [&](const SmemTile &a, Value laneA, const SmemTile &bt,
                   Value laneB, int64_t depth) {
    return gemmABt(frags, a, laneA, warpKey0, m, bt, laneB, qRow0, cfg.br,
                   depth);
  };
  SmallVector<Value> s = gemmT(kTile, laneK, qTile, laneQB, cfg.d);
  SmallVector<Value> dpT = gemmT(vTile, laneV, doTile, laneDoB, cfg.dv);
  auto [p, ds] = gradients(it, qRow0, s, dpT);

  // dV += P^T dO, dK += dS^T Q: A from the P^T / dS^T fragments, B from the
  // row tiles read transposed.
  SmallVector<Value> dk(acc.take_front(m * ndk)),
      dv(acc.slice(m * ndk, m * ndv));
  // (This block's slice of the columns.)
  accumulateFrags(frags, dv, p, nqt, m, cfg.br, doTile, laneDoA, qRow0,
                  cfg.dvCols(), dvCol0);
  accumulateFrags(frags, dk, ds, nqt, m, cfg.br, qTile, laneQA, qRow0,
                  cfg.dkCols(), dkCol0);

  if (n.withDq) {
    // dS^T to shared memory, then each warp adds its query rows of
    // dQ = dS K to the accumulator.
    for (int64_t mt = 0; mt < m; ++mt)
      for (int64_t nt = 0; nt < nqt; ++nt)
        for (int64_t h = 0; h < 2; ++h) {
          Value row = add(add(keyRow(mt), g), idx(8 * h));
          Value index = add(mul(row, idx(dsTile.storedCols())),
                            add(idx(8 * nt), mul(tig, idx(2))));
          vector::StoreOp::create(b, loc, frags.truncRow(ds[mt * nqt + nt], h),
                                  dsTile.view, index);
        }
    gpu::BarrierOp::create(b, loc);
    Value qBatch = clone(n.in.q.offsets[0], it),
          qHead = clone(n.in.q.offsets[1], it),
          qStart = clone(n.in.q.offsets[2], it);
    // Work units of dQ: (16-row tile, column chunk) pairs, dealt to the
    // warps round-robin.
    int64_t mq = cfg.br / 16, chunk = cfg.dqChunk,
            units = mq * cfg.dkCols() / chunk;
    for (int64_t i = 0; i < units / cfg.warps; ++i) {
      Value u = add(warp, idx(i * cfg.warps));
      Value qr = mul(remu(u, mq), idx(16));
      Value c0 = add(dkCol0, mul(divu(u, mq), idx(chunk)));
      SmallVector<Value> dq(chunk / 8, frags.zeroC());
      for (int64_t kk = 0; kk < cfg.bc / 16; ++kk) {
        Value a = load(dsTile, laneDsB, idx(16 * kk), qr, true, frags);
        for (int64_t dp = 0; dp < chunk / 16; ++dp) {
          auto bs = frags.splitB(load(kTile, laneKA, idx(16 * kk),
                                      add(c0, idx(16 * dp)), true, frags));
          frags.mma16(a, bs, MutableArrayRef<Value>(dq).slice(2 * dp, 2));
        }
      }
      reduceDq(dq, chunk, qBatch, qHead, add(qStart, qr), c0);
    }
  }
  SmallVector<Value> next = dk;
  llvm::append_range(next, dv);
  return next;
}

SmallVector<Value> KeyBlockKernel::bodyWgmma(Value t, Value buf,
                                             ValueRange acc) {
  const int64_t ndk = cfg.dkCols() / 8, ndv = cfg.dvCols() / 8;
  const int64_t rowBytes = SmemTile::kPanelRowBytes, k16Bytes = 16 * rowBytes;
  IRMapping it = iteration(t);
  Value qRow0 = mul(buf, idx(cfg.br));
  // Buffer `buf` of Q and dO: rows [buf Br, +Br) of each panel, or (warp
  // specialized) stage `buf` of the TMA rings, whole tiles apart.
  Value qBufBytes = mul(qRow0, idx(rowBytes)), doBufBytes = qBufBytes;
  if (cfg.warpSpecialized) {
    qBufBytes = mul(buf, idx(qTile.bytes(2)));
    doBufBytes = mul(buf, idx(doTile.bytes(2)));
    loadColumns(t);
    // The columns of two iterations on (the last one's again past the end).
    Value ahead = add(t, idx(2));
    copyColumns(arith::MinUIOp::create(b, loc, ahead, sub(wsTotal, idx(1))),
                remu(ahead, kBackwardColumnStages));
    commit();
  }
  Value qB = wg.advance(wg.opaque(qDescB), qBufBytes),
        doB = wg.advance(wg.opaque(doDescB), doBufBytes);
  // dK and dV read this block's slice of Q and dO: whole panels (split > 1).
  Value qMN = wg.advance(
            wg.opaque(qDescMN),
            add(qBufBytes,
                mul(slice, idx(cfg.dkCols() / 64 * qTile.panelStride() * 2)))),
        doMN = wg.advance(
            wg.opaque(doDescMN),
            add(doBufBytes,
                mul(slice, idx(cfg.dvCols() / 64 * doTile.panelStride() * 2))));
  Value kA = wg.opaque(kDescA), vA = wg.opaque(vDescA);

  // S^T = K Q^T and dP^T = V dO^T: this warpgroup's 64 keys against the
  // block's queries, both operands K-major in shared memory. Warp
  // specialized, each its own group: P is computed while dP^T runs, dS
  // while dV runs (FlashAttention-3's order).
  // (Not at 128 queries per block: S^T, dP^T and the lse2 / delta columns
  // of both phases then exceed the consumers' 240 registers.)
  const bool overlap = cfg.warpSpecialized && cfg.br <= 64;
  SmallVector<Value> sInit, dpInit;
  if (cfg.warpSpecialized) {
    if (foldLse)
      sInit = columnInit(wsLseCols, expRecip);
    dpInit = columnInit(wsDeltaCols, Value());
  }
  wg.fence();
  SmallVector<Value> sAcc = chainSS(kA, kTile, qB, qTile, cfg.d, cfg.br, sInit);
  if (overlap)
    wg.commit();
  SmallVector<Value> dpAcc =
      chainSS(vA, vTile, doB, doTile, cfg.dv, cfg.br, dpInit);
  wg.commit();

  // dV += P^T dO, dK += dS^T Q: A from the P^T / dS^T fragments in
  // registers, B = dO / Q MN-major (16 queries per k-step).
  auto pack = [&](ArrayRef<Value> frs) {
    SmallVector<Value> regs;
    for (int64_t kk = 0; kk < cfg.br / 16; ++kk) {
      Value a = frags.packA(frs[2 * kk], frs[2 * kk + 1]);
      for (int64_t i = 0; i < 4; ++i)
        regs.push_back(LLVM::BitcastOp::create(
            b, loc, b.getI32Type(),
            vector::ExtractOp::create(b, loc, a, ArrayRef<int64_t>{i})));
    }
    return wg.fenceOperands(regs);
  };
  SmallVector<Value> dk, dv, pRegs, dsRegs;
  auto issueDv = [&] {
    dv = wg.fenceOperands(frags.toAccumulator(acc.slice(ndk, ndv)));
    wg.fence();
    for (int64_t kk = 0; kk < cfg.br / 16; ++kk)
      dv = wg.mmaRS(ArrayRef<Value>(pRegs).slice(4 * kk, 4),
                    wg.advance(doMN, kk * k16Bytes), cfg.dvCols(), dv);
  };
  auto issueDk = [&] {
    for (int64_t kk = 0; kk < cfg.br / 16; ++kk)
      dk = wg.mmaRS(ArrayRef<Value>(dsRegs).slice(4 * kk, 4),
                    wg.advance(qMN, kk * k16Bytes), cfg.dkCols(), dk);
  };
  std::pair<SmallVector<Value>, SmallVector<Value>> grads;
  if (overlap) {
    wg.wait(1);
    grads = gradients(it, qRow0, frags.fromAccumulator(wg.fenceOperands(sAcc)),
                      {}, Value(), 0, [&](ArrayRef<Value> p) {
                        pRegs = pack(p);
                        issueDv();
                        wg.commit();
                        wg.wait(1);
                        return frags.fromAccumulator(wg.fenceOperands(dpAcc));
                      });
    dsRegs = pack(grads.second);
    dk = wg.fenceOperands(frags.toAccumulator(acc.take_front(ndk)));
  } else {
    wg.wait(0);
    grads = gradients(it, qRow0, frags.fromAccumulator(wg.fenceOperands(sAcc)),
                      frags.fromAccumulator(wg.fenceOperands(dpAcc)));
    pRegs = pack(grads.first);
    dsRegs = pack(grads.second);
    dk = wg.fenceOperands(frags.toAccumulator(acc.take_front(ndk)));
    issueDv();
    issueDk();
    wg.commit();
  }
  if (cfg.warpSpecialized) {
    // The next iteration's columns land before the barrier below, which
    // makes them every consumer's.
    waitCopies(1);
    if (!n.withDq)
      NVVM::BarrierOp::create(b, loc, TypeRange{}, i32(1), i32(cfg.threads()),
                              NVVM::BarrierReductionAttr(), Value());
  }

  if (n.withDq) {
    if (cfg.warpSpecialized) {
      // dS^T alternates between two buffers: a warpgroup may write this
      // one while the other still reads the previous one in its dQ GEMM;
      // the barrier below also ends every read of the buffer written next.
      Value odd = remu(item(t), 2);
      dsBufBytes = mul(odd, idx(dsTile.bytes(2)));
      dsBufElems = mul(odd, idx(dsTile.elements()));
    }
    storeTransposed(dsTile, dsRegs, idx(0), cfg.br);
    wg.fenceSharedForAsync();
    if (cfg.warpSpecialized)
      NVVM::BarrierOp::create(b, loc, TypeRange{}, i32(1), i32(cfg.threads()),
                              NVVM::BarrierReductionAttr(), Value());
    else
      gpu::BarrierOp::create(b, loc);
    // Overlapped: dK follows dQ's GEMM, which is waited for alone, so dK
    // runs while dQ is handed over (one dQ unit per warpgroup: dK's
    // accumulators stay outside any region).
    if (overlap && dqUnitsPerWarpgroup() == 1) {
      addDqWgmma(it, [&] {
        issueDk();
        wg.commit();
      });
    } else {
      if (overlap) {
        wg.fence();
        issueDk();
        wg.commit();
      }
      addDqWgmma(it);
    }
  } else if (overlap) {
    wg.fence();
    issueDk();
    wg.commit();
  }
  wg.wait(0);
  SmallVector<Value> next = frags.fromAccumulator(wg.fenceOperands(dk));
  llvm::append_range(next, frags.fromAccumulator(wg.fenceOperands(dv)));
  return next;
}

void KeyBlockKernel::emitWarpRoles(Value total) {
  // Rings of 64-column panel tiles (the layout the wgmma descriptors read).
  auto channel = [&](Value host, int64_t rows, int64_t cols, int64_t offset,
                     int64_t stages) {
    return createPanelChannel(b, loc, smemBase, add(smemPad, idx(offset)), host,
                              rows, cols, stages, cfg.elt, cfg.threads());
  };
  auto [qCh, qMap] = channel(hostMaps[0], cfg.br, cfg.d, qOffset, 2);
  auto [kCh, kMap] = channel(hostMaps[1], cfg.bc, cfg.d, kOffset, 1);
  auto [vCh, vMap] = channel(hostMaps[2], cfg.bc, cfg.dv, vOffset, 1);
  auto [doCh, doMap] = channel(hostMaps[3], cfg.br, cfg.dv, doOffset, 2);
  qChannel = qCh;
  doChannel = doCh;
  if (dqStage && hostMaps.size() > 4)
    dqMap = faptx::TensorMapParamOp::create(
        b, loc,
        tmaDescriptor(b.getContext(), 64, b.getF32Type(), /*rank=*/4,
                      kDqBoxCols),
        hostMaps[4]);
  kChannel = kCh;
  vChannel = vCh;
  // The producer keeps setmaxnreg's minimum, the consumers take the rest.
  int64_t consumers = cfg.warps / 4;
  int64_t consumerRegs = std::min<int64_t>(
      240, (warpgroupRegisters(cfg.launchThreads()) - kMinProducerRegs) /
               consumers / 8 * 8);
  // (Cloned here, not in a role: `base` memoizes the clones. Persistent,
  // each role's tile loop clones its own.)
  Value vHead, vBatch;
  if (!cfg.persistent) {
    vHead = clone(n.in.v.offsets[1], base);
    vBatch = clone(n.in.v.offsets[0], base);
  }
  Value zero = idx(0);
  auto op = fagpu::WarpSpecializeOp::create(b, loc, consumers, kMinProducerRegs,
                                            consumerRegs);
  roles = op;
  for (Region *r : {&op.getProducer(), &op.getConsumers()}) {
    Block *block = b.createBlock(r);
    b.setInsertionPointToEnd(block);
    fagpu::YieldOp::create(b, loc);
  }
  // Producer: K and V once, then Q and dO of every iteration (warp 0);
  // with dQ, warp 1 hands the consumers' dQ units to the TMA unit.
  b.setInsertionPoint(op.getProducer().front().getTerminator());
  // (The producer's own thread numbers: `tid` counts the consumers' from 0.)
  Value producerTid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value producerWarp = divu(producerTid, kWarpSize);
  if (dqMap) {
    auto ifOp = scf::IfOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, producerWarp,
                              idx(1)),
        false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Value lane = remu(producerTid, kWarpSize);
    if (cfg.persistent) {
      forEachTile([&](Value tileTotal) {
        emitDqWarp(tileTotal, lane, /*finalWait=*/false);
      });
      NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0),
                                           UnitAttr());
    } else {
      emitDqWarp(total, lane);
    }
  }
  auto loadWarp =
      scf::IfOp::create(b, loc,
                        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                              producerWarp, zero),
                        false);
  b.setInsertionPointToStart(loadWarp.thenBlock());
  // K and V (item `kvAt`), then Q and dO of each of the `count` iterations.
  auto putTile = [&](Value count, Value kvAt, Value vHead, Value vBatch) {
    fagpu::ChannelPutTmaOp::create(b, loc, kChannel, kvAt, kMap,
                                   ValueRange{zero, kStart, kHead, kBatch});
    fagpu::ChannelPutTmaOp::create(b, loc, vChannel, kvAt, vMap,
                                   ValueRange{zero, kStart, vHead, vBatch});
    auto loop = scf::ForOp::create(b, loc, zero, count, idx(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value t = loop.getInductionVar();
    remapTile();
    IRMapping m = iteration(t);
    auto put = [&](Value ch, Value map, const RowSlice &slice) {
      fagpu::ChannelPutTmaOp::create(
          b, loc, ch, item(t), map,
          ValueRange{zero, clone(slice.offsets[2], m),
                     clone(slice.offsets[1], m), clone(slice.offsets[0], m)});
    };
    put(qChannel, qMap, n.in.q);
    put(doChannel, doMap, n.in.dout);
  };
  if (cfg.persistent) {
    forEachTile([&](Value tileTotal) {
      putTile(tileTotal, kvIndex(), clone(n.in.v.offsets[1], base),
              clone(n.in.v.offsets[0], base));
    });
  } else {
    putTile(total, zero, vHead, vBatch);
  }
  // Consumers: K and V first (also when no query block is visible: no TMA
  // may still write the shared memory when the block exits). Persistent,
  // of each tile (emit).
  b.setInsertionPoint(op.getConsumers().front().getTerminator());
  if (cfg.persistent)
    return;
  for (Value ch : {kChannel, vChannel})
    fagpu::ChannelGetOp::create(
        b, loc, cast<fagpu::ChannelType>(ch.getType()).getStageType(), ch,
        zero);
}

std::array<Value, 3> KeyBlockKernel::tileGrid() {
  // As the grid kernel's launch (mapBlock's order): key blocks on x.
  std::array<Value, 3> extent = {idx(1), idx(1), idx(1)};
  for (auto [ub, dim] :
       llvm::zip_equal(n.forall.getMixedUpperBound(), n.blockDims))
    extent[static_cast<unsigned>(dim)] = clone(ub, base);
  if (n.keyLoop)
    extent[0] = clone(n.keyLoop.getUpperBound(), base);
  return extent;
}

void KeyBlockKernel::forEachTile(function_ref<void(Value)> body) {
  IRMapping outer = base;
  // (The group size, a division, once: every tile's clones start here.)
  (void)clone(n.headLoop.getUpperBound(), base);
  tileBase = base;
  std::array<Value, 3> extent = tileGrid();
  // The loop's state in i32 (one register each, not two: the producer
  // warpgroup walks the tiles with setmaxnreg's minimum).
  Type i32 = b.getI32Type();
  auto c32 = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, loc, i32, v).getResult();
  };
  Value tiles = toI32(mul(mul(extent[0], extent[1]), extent[2]));
  Value grid = toI32(persistentGrid), block = toI32(persistentBlock);
  Value one = c32(1);
  Value rounds = arith::DivUIOp::create(
      b, loc,
      arith::AddIOp::create(b, loc, tiles,
                            arith::SubIOp::create(b, loc, grid, one)),
      grid);
  auto loop = scf::ForOp::create(b, loc, c32(0), rounds, one,
                                 ValueRange{c32(0), c32(0)});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value round = loop.getInductionVar();
  ValueRange carried = loop.getRegionIterArgs();
  Value odd =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                            arith::AndIOp::create(b, loc, round, one), c32(0));
  Value pos = arith::SelectOp::create(
      b, loc, odd,
      arith::SubIOp::create(b, loc, arith::SubIOp::create(b, loc, grid, one),
                            block),
      block);
  Value t32 = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, round, grid), pos);
  auto tileIf = scf::IfOp::create(
      b, loc, carried.getTypes(),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, t32, tiles),
      /*withElseRegion=*/true);
  b.setInsertionPointToStart(tileIf.elseBlock());
  scf::YieldOp::create(b, loc, carried);
  b.setInsertionPointToStart(tileIf.thenBlock());
  tileLinear = t32;
  Value total = mapTile(fromI32(t32));
  ringBase = carried[0];
  kvItem = carried[1];
  body(total);
  scf::YieldOp::create(
      b, loc,
      ValueRange{arith::AddIOp::create(b, loc, carried[0], toI32(total)),
                 arith::AddIOp::create(b, loc, carried[1], one)});
  b.setInsertionPointToEnd(loop.getBody());
  scf::YieldOp::create(b, loc, tileIf.getResults());
  base = outer;
  ringBase = kvItem = tileLinear = Value();
}

Value KeyBlockKernel::mapTile(Value t) {
  // Fresh clones per tile (and per role: the roles share no values); the
  // grid's extents from the parameters again (not held).
  base = tileBase;
  std::array<Value, 3> extent = tileGrid();
  auto [rest, x] = divRemU32(t, extent[0]);
  auto [z, y] = divRemU32(rest, extent[1]);
  if (heavyBlocksFirst()) {
    // mapBlock's order (its reasons there): every (kv head, batch)'s key
    // block 0 first, then block 1, ... on small GQA grids.
    Value pairs = mul(extent[1], extent[2]);
    Value tiles = mul(extent[0], pairs);
    Value reorder = smallGqaGrid(extent[0], tiles,
                                 clone(n.headLoop.getUpperBound(), base), 2);
    auto [keyBlock, pair] = divRemU32(t, pairs);
    auto [pz, py] = divRemU32(pair, extent[1]);
    auto pick = [&](Value reordered, Value plain) {
      return arith::SelectOp::create(b, loc, reorder, reordered, plain)
          .getResult();
    };
    x = pick(keyBlock, x);
    y = pick(py, y);
    z = pick(pz, z);
  }
  mapBlock({x, y, z}, {extent[0], extent[1], extent[2]}, /*ordered=*/true);
  return tileValues();
}

void KeyBlockKernel::copyColumns(Value t, Value stage) {
  // lse2 and delta are padded to whole 128-row blocks: always in bounds.
  IRMapping it = iteration(t);
  Value batch = clone(n.in.lse.offsets[0], it),
        head = clone(n.in.lse.offsets[1], it),
        row0 = clone(n.in.lse.offsets[2], it);
  // (Recomputed in each iteration, not kept: BackwardConfig::tightRegisters.)
  if (cfg.tightRegisters()) {
    batch = wg.opaqueIndex(batch);
    head = wg.opaqueIndex(head);
    row0 = wg.opaqueIndex(row0);
  }
  Value at = mul(stage, idx(2 * cfg.br));
  copyF32Rows(lse2, batch, head, row0, colS, at, cfg.br);
  copyF32Rows(delta, batch, head, row0, colS, add(at, idx(cfg.br)), cfg.br);
}

void KeyBlockKernel::loadColumns(Value t) {
  // Columns 8 nt + 2 tig + {0, 1} of the query block.
  auto v2 = VectorType::get({2}, b.getF32Type());
  colStage = mul(remu(t, kBackwardColumnStages), idx(2 * cfg.br));
  wsLseCols.clear();
  wsDeltaCols.clear();
  for (int64_t nt = 0; nt < cfg.br / 8; ++nt) {
    Value col = add(add(colStage, idx(8 * nt)), mul(tig, idx(2)));
    // (Unfolded lse2 is read where it is used: gradients.)
    if (foldLse)
      wsLseCols.push_back(vector::LoadOp::create(b, loc, v2, colS, col));
    wsDeltaCols.push_back(
        vector::LoadOp::create(b, loc, v2, colS, add(col, idx(cfg.br))));
  }
}

void KeyBlockKernel::storeTransposed(const SmemTile &tile, ArrayRef<Value> regs,
                                     Value qOff, int64_t nCols) {
  // Row = key, column tile ct = (qOff + 8 nt) / 8: panel ct / 8, chunk
  // (ct % 8) ^ (row % 8) (row % 8 = g: warpKey0 is a multiple of 16). The
  // packed A registers hold row half h of fragment nt (no f32 copy live).
  Value ct0 = divu(qOff, 8);
  Value gHere = cfg.warpSpecialized ? wg.opaqueIndex(g) : g;
  for (int64_t nt = 0; nt < nCols / 8; ++nt)
    for (int64_t h = 0; h < 2; ++h) {
      Value row = add(add(warpKey0, g), idx(8 * h));
      Value ct = add(ct0, idx(nt));
      Value chunk = arith::XOrIOp::create(b, loc, gHere, remu(ct, 8));
      Value index = add(add(mul(divu(ct, 8), idx(tile.panelStride())),
                            mul(row, idx(SmemTile::kPanelCols))),
                        add(mul(chunk, idx(kChunk)), mul(tig, idx(2))));
      if (dsBufElems)
        index = add(index, dsBufElems);
      Value packed =
          LLVM::BitcastOp::create(b, loc, VectorType::get({2}, cfg.elt),
                                  regs[4 * (nt / 2) + 2 * (nt % 2) + h]);
      vector::StoreOp::create(b, loc, packed, tile.view, index);
    }
}

SmallVector<Value> KeyBlockKernel::columnInit(ArrayRef<Value> cols,
                                              Value factor) {
  // C-fragment order: 8 columns (nt) x row half (h) x column (el).
  SmallVector<Value> scaled, acc;
  for (Value col : cols) {
    Value x = factor ? arith::MulFOp::create(b, loc, col,
                                             vector::BroadcastOp::create(
                                                 b, loc, col.getType(), factor))
                     : col;
    scaled.push_back(arith::NegFOp::create(b, loc, x));
  }
  for (Value col : scaled)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t el = 0; el < 2; ++el)
        acc.push_back(
            vector::ExtractOp::create(b, loc, col, ArrayRef<int64_t>{el}));
  return wg.fenceOperands(acc);
}

SmallVector<Value> KeyBlockKernel::chainSS(Value descA, const SmemTile &a,
                                           Value descB, const SmemTile &bt,
                                           int64_t depth, int64_t n,
                                           ArrayRef<Value> init) {
  SmallVector<Value> c(init);
  for (int64_t ks = 0; ks < depth / 16; ++ks) {
    int64_t panel = ks / 4, inPanel = (ks % 4) * 32;
    c = wg.mmaSS(wg.advance(descA, panel * a.panelStride() * 2 + inPanel),
                 wg.advance(descB, panel * bt.panelStride() * 2 + inPanel), n,
                 c);
  }
  return c;
}

int64_t KeyBlockKernel::dqUnitsPerWarpgroup() const {
  int64_t panels = llvm::divideCeil(cfg.dkCols(), 64);
  int64_t units = cfg.br / 64 * panels, groups = cfg.warps / 4;
  bool even = units % groups == 0 && cfg.dkCols() % 64 == 0;
  return even ? units / groups : 0;
}

void KeyBlockKernel::addDqWgmma(IRMapping &it,
                                function_ref<void()> afterIssue) {
  assert((!afterIssue || dqUnitsPerWarpgroup() == 1) &&
         "GEMMs after dQ's need one dQ unit per warpgroup");
  const int64_t k16Bytes = 16 * SmemTile::kPanelRowBytes;
  Value qBatch = clone(n.in.q.offsets[0], it),
        qHead = clone(n.in.q.offsets[1], it),
        qStart = clone(n.in.q.offsets[2], it);
  // dQ = dS K in (64 queries, 64 columns) units of this block's slice,
  // dealt to the warpgroups; A = dS (dS^T read MN-major), B = K read
  // MN-major, 16 keys per k-step. A head dim that is no multiple of 64
  // (D = 96, unsplit) ends in a narrower unit.
  int64_t panels = llvm::divideCeil(cfg.dkCols(), 64),
          lastCols = cfg.dkCols() - 64 * (panels - 1);
  int64_t groups = cfg.warps / 4, mq = cfg.br / 64, units = mq * panels;
  Value panel0 = mul(slice, idx(cfg.dkCols() / 64));
  // (Fewer units than warpgroups in the last round: the others go on.)
  forEachDealt(divu(warp, 4), groups, units, [&](Value u) {
    Value mt = remu(u, mq), c = divu(u, mq);
    Value dsA =
        wg.advance(wg.opaque(dsDescA), mul(mt, idx(dsTile.panelStride() * 2)));
    if (dsBufBytes)
      dsA = wg.advance(dsA, dsBufBytes);
    Value kB = wg.advance(wg.opaque(kDescMN),
                          mul(add(panel0, c), idx(kTile.panelStride() * 2)));
    Value row0 =
        add(add(qStart, mul(mt, idx(64))), mul(remu(warp, 4), idx(16)));
    Value col0 = add(dkCol0, mul(c, idx(64)));
    auto unit = [&](int64_t cols) {
      wg.fence();
      SmallVector<Value> dq;
      for (int64_t kk = 0; kk < cfg.bc / 16; ++kk)
        dq = wg.mmaSS(wg.advance(dsA, kk * k16Bytes),
                      wg.advance(kB, kk * k16Bytes), cols, dq,
                      NVVM::MMALayout::col, NVVM::MMALayout::row);
      wg.commit();
      if (afterIssue)
        afterIssue();
      wg.wait(afterIssue ? 1 : 0);
      reduceDq(frags.fromAccumulator(wg.fenceOperands(dq)), cols, qBatch, qHead,
               row0, col0);
    };
    if (lastCols == 64) {
      unit(64);
      return;
    }
    auto ifOp = scf::IfOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, c,
                              idx(panels - 1)),
        /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    unit(lastCols);
    b.setInsertionPointToStart(ifOp.elseBlock());
    unit(64);
  });
}

SmallVector<Value> KeyBlockKernel::bodyWgmmaSplit(Value t, Value buf,
                                                  ValueRange acc) {
  const int64_t half = cfg.br / 2;
  const int64_t ndk = cfg.accKCols() / 8, ndv = cfg.accVCols() / 8;
  const int64_t rowBytes = SmemTile::kPanelRowBytes, k16Bytes = 16 * rowBytes;
  IRMapping it = iteration(t);
  Value qRow0 = mul(buf, idx(cfg.br));
  Value bufBytes = mul(qRow0, idx(rowBytes));
  Value wgId = divu(warp, 4);
  // This warpgroup's half of the queries (rows of the Q / dO buffers).
  Value qOff = mul(wgId, idx(half));
  Value halfBytes = mul(qOff, idx(rowBytes));
  Value qB = wg.advance(wg.opaque(qDescB), add(bufBytes, halfBytes)),
        doB = wg.advance(wg.opaque(doDescB), add(bufBytes, halfBytes));
  Value kA = wg.opaque(kDescA), vA = wg.opaque(vDescA);
  auto pack = [&](ArrayRef<Value> frs) {
    SmallVector<Value> regs;
    for (int64_t kk = 0; kk < half / 16; ++kk) {
      Value a = frags.packA(frs[2 * kk], frs[2 * kk + 1]);
      for (int64_t i = 0; i < 4; ++i)
        regs.push_back(LLVM::BitcastOp::create(
            b, loc, b.getI32Type(),
            vector::ExtractOp::create(b, loc, a, ArrayRef<int64_t>{i})));
    }
    return regs;
  };

  // S^T = K Q^T and dP^T = V dO^T for the 64 keys of the block and this
  // warpgroup's half of the queries (N = block-q / 2).
  wg.fence();
  SmallVector<Value> sAcc = chainSS(kA, kTile, qB, qTile, cfg.d, half);
  SmallVector<Value> dpAcc = chainSS(vA, vTile, doB, doTile, cfg.dv, half);
  wg.commit();
  wg.wait(0);
  auto [p, ds] =
      gradients(it, qRow0, frags.fromAccumulator(wg.fenceOperands(sAcc)),
                frags.fromAccumulator(wg.fenceOperands(dpAcc)), qOff, half);

  // P^T and dS^T of both halves to shared memory, for the dV / dK GEMMs of
  // both warpgroups (and dQ).
  storeTransposed(pTile, pack(p), qOff, half);
  storeTransposed(dsTile, pack(ds), qOff, half);
  wg.fenceSharedForAsync();
  gpu::BarrierOp::create(b, loc);

  // dV[:, cols] += P^T dO[:, cols], dK[:, cols] += dS^T Q[:, cols]: A = P^T /
  // dS^T K-major in shared memory (all block-q queries), B = dO / Q
  // MN-major, this warpgroup's columns of this block's slice.
  SmallVector<Value> dk =
      wg.fenceOperands(frags.toAccumulator(acc.take_front(ndk)));
  SmallVector<Value> dv =
      wg.fenceOperands(frags.toAccumulator(acc.slice(ndk, ndv)));
  // Both warpgroups run the same instructions (a wgmma in a divergent
  // branch gets serialized), each one chain of `cols` columns of B from the
  // slice's panel `slicePanels`, the second warpgroup `shift` panels on.
  auto accumulate = [&](Value descA, const SmemTile &aTile, Value descMN,
                        const SmemTile &bTile, int64_t cols, Value slicePanels,
                        int64_t shift, SmallVector<Value> &out) {
    Value first = shift ? add(slicePanels, mul(wgId, idx(shift))) : slicePanels;
    Value bDesc = wg.advance(
        descMN, add(bufBytes, mul(first, idx(bTile.panelStride() * 2))));
    for (int64_t kk = 0; kk < cfg.br / 16; ++kk) {
      int64_t panel = kk / 4, inPanel = (kk % 4) * 32;
      out =
          wg.mmaSS(wg.advance(descA, panel * aTile.panelStride() * 2 + inPanel),
                   wg.advance(bDesc, kk * k16Bytes), cols, out,
                   NVVM::MMALayout::row, NVVM::MMALayout::row);
    }
  };
  Value slicePanelsK = mul(slice, idx(cfg.dkCols() / 64));
  Value slicePanelsV = mul(slice, idx(cfg.dvCols() / 64));
  PairColumns pc = backwardPairColumns(cfg.dkCols(), cfg.dvCols());
  wg.fence();
  if (pc.roles) {
    // Roles: the first warpgroup's chain is dK += dS^T Q, the second's dV
    // += P^T dO, all the slice's columns: the same instructions on operands
    // picked by the warpgroup (D = Dv, so the tiles have the same shape).
    Value first =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, wgId, idx(0));
    auto pick = [&](Value forK, Value forV) {
      return arith::SelectOp::create(b, loc, first, forK, forV).getResult();
    };
    // (One statement per op: the IR's order does not depend on the order
    // in which a compiler evaluates arguments.)
    Value dsA = wg.opaque(dsDescK);
    Value pA = wg.opaque(pDescK);
    Value descA = pick(dsA, pA);
    Value qMN = wg.opaque(qDescMN);
    Value doMN = wg.opaque(doDescMN);
    Value descMN = pick(qMN, doMN);
    accumulate(descA, dsTile, descMN, qTile, pc.k, slicePanelsK, 0, dk);
  } else {
    // Halves: each warpgroup takes pc.k / pc.v columns (whole panels,
    // rounded up), the second one the last of them, so with an odd panel
    // count (D = 192 / Dv = 128) the middle panel is computed by both and
    // stored by the first.
    auto shift = [](int64_t sliceCols, int64_t cols) {
      return llvm::divideCeil(sliceCols, 64) - cols / 64;
    };
    accumulate(wg.opaque(pDescK), pTile, wg.opaque(doDescMN), doTile, pc.v,
               slicePanelsV, shift(cfg.dvCols(), pc.v), dv);
    accumulate(wg.opaque(dsDescK), dsTile, wg.opaque(qDescMN), qTile, pc.k,
               slicePanelsK, shift(cfg.dkCols(), pc.k), dk);
  }
  wg.commit();
  if (n.withDq)
    addDqWgmma(it);
  wg.wait(0);
  SmallVector<Value> next = frags.fromAccumulator(wg.fenceOperands(dk));
  llvm::append_range(next, frags.fromAccumulator(wg.fenceOperands(dv)));
  return next;
}

void KeyBlockKernel::stageAndReduce(ArrayRef<Value> dq, int64_t chunk,
                                    Value batch, Value head, Value row0,
                                    Value col0) {
  int64_t rows = cfg.dqStageRows;
  Value base = mul(warp, idx(rows * stageStride));
  auto v4 = VectorType::get({4}, b.getF32Type());
  Value all = i32(-1);
  Value stride, nRows, heads, ptr;
  int64_t perRow = chunk / 4;
  // A 16-row area takes both halves of the fragments (rows g and g + 8) at
  // once; an 8-row one each half in its own pass.
  for (int64_t pass = 0; pass < 16 / rows; ++pass) {
    for (int64_t nt = 0; nt < chunk / 8; ++nt)
      for (int64_t h = 0; h < 2; ++h) {
        if (rows == 8 && h != pass)
          continue;
        int64_t rowOff = rows == 8 ? 0 : 8 * h;
        Value at = add(base, add(mul(add(g, idx(rowOff)), idx(stageStride)),
                                 add(idx(8 * nt), mul(tig, idx(2)))));
        vector::StoreOp::create(
            b, loc,
            vector::ExtractOp::create(b, loc, dq[nt], ArrayRef<int64_t>{h}),
            dqStage, at);
      }
    NVVM::SyncWarpOp::create(b, loc, all);
    if (pass == 0) {
      stride = memref::DimOp::create(b, loc, dqAcc, 3);
      nRows = memref::DimOp::create(b, loc, dqAcc, 2);
      heads = memref::DimOp::create(b, loc, dqAcc, 1);
      ptr = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, dqAcc);
    }
    Value passRow0 = rows == 8 ? add(row0, idx(8 * pass)) : row0;
    for (int64_t i = 0; i < rows * perRow / kWarpSize; ++i) {
      Value c = add(lane, idx(i * kWarpSize));
      Value r = divu(c, perRow), c4 = mul(remu(c, perRow), idx(4));
      Value row = add(passRow0, r);
      auto ifOp = scf::IfOp::create(b, loc, slt(row, nq), false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      Value v = vector::LoadOp::create(
          b, loc, v4, dqStage,
          ValueRange{add(base, add(mul(r, idx(stageStride)), c4))});
      Value offset =
          add(mul(add(mul(add(mul(batch, heads), head), nRows), row), stride),
              add(col0, c4));
      Value addr = arith::IndexCastOp::create(b, loc, b.getI64Type(),
                                              add(ptr, mul(offset, idx(4))));
      SmallVector<Value> values;
      for (int64_t e = 0; e < 4; ++e)
        values.push_back(
            vector::ExtractOp::create(b, loc, v, ArrayRef<int64_t>{e}));
      faptx::RedGlobalAddOp::create(b, loc, addr, values);
    }
    // The next pass or unit of this warp overwrites the area.
    NVVM::SyncWarpOp::create(b, loc, all);
  }
}

void KeyBlockKernel::dqBarrier(bool sync, int64_t first, Value group) {
  Value id = toI32(add(group, idx(first)));
  Value count = i32(fagpu::kWarpgroupThreads + kWarpSize);
  if (sync)
    NVVM::BarrierOp::create(b, loc, TypeRange{}, id, count,
                            NVVM::BarrierReductionAttr(), Value());
  else
    NVVM::BarrierArriveOp::create(b, loc, id, count);
}

void KeyBlockKernel::stageDqUnit(ArrayRef<Value> dq) {
  Value group = divu(warp, 4);
  // The dQ warp has read the warpgroup's previous unit.
  dqBarrier(/*sync=*/true, kDqEmptyBarrier, group);
  // Row r = 16 (warp % 4) + g + 8 h of panel nt / 4, 16-byte chunk
  // (2 (nt % 4) + tig / 2) ^ (r % 8) (128-byte swizzle; r % 8 = g):
  // conflict-free 8-byte stores.
  Value base = add(mul(group, idx(kDqUnitFloats)),
                   mul(remu(warp, 4), idx(16 * kDqBoxCols)));
  Value gHere = cfg.warpSpecialized ? wg.opaqueIndex(g) : g;
  for (int64_t nt = 0; nt < 64 / 8; ++nt)
    for (int64_t h = 0; h < 2; ++h) {
      Value chunk = arith::XOrIOp::create(
          b, loc, add(idx(2 * (nt % 4)), divu(tig, 2)), gHere);
      Value at =
          add(add(base, idx((nt / 4) * kDqUnitFloats / 2 + 8 * h * kDqBoxCols)),
              add(add(mul(g, idx(kDqBoxCols)), mul(chunk, idx(4))),
                  mul(remu(tig, 2), idx(2))));
      vector::StoreOp::create(
          b, loc,
          vector::ExtractOp::create(b, loc, dq[nt], ArrayRef<int64_t>{h}),
          dqStage, at);
    }
  // Visible to the TMA unit (async proxy) before the dQ warp issues.
  wg.fenceSharedForAsync();
  dqBarrier(/*sync=*/false, kDqFullBarrier, group);
}

void KeyBlockKernel::emitDqWarp(Value total, Value producerLane,
                                bool finalWait) {
  // Every warpgroup's staging area starts empty. (Arrivals only where a
  // consumer waits: none after the last iteration.)
  int64_t groups = cfg.warps / 4;
  assert(groups <= kDqEmptyBarrier - kDqFullBarrier &&
         "more consumer warpgroups than dQ barrier ids");
  Value zero = idx(0);
  auto onlyIf = [&](Value cond, function_ref<void()> body) {
    auto ifOp = scf::IfOp::create(b, loc, cond, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    body();
  };
  onlyIf(slt(zero, total), [&] {
    for (int64_t gi = 0; gi < groups; ++gi)
      dqBarrier(/*sync=*/false, kDqEmptyBarrier, idx(gi));
  });
  Value leader = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                       producerLane, zero);
  // The fixed order: the address of the semaphore of the group's first
  // head and this block's first query block.
  Value orderBase;
  if (dqOrder) {
    IRMapping first = iteration(zero);
    Value row = add(mul(add(mul(clone(n.in.q.offsets[0], first), orderHeads),
                            clone(n.in.q.offsets[1], first)),
                        orderBlocks),
                    qbLo);
    orderBase =
        add(memref::ExtractAlignedPointerAsIndexOp::create(b, loc, dqOrder),
            mul(row, idx(4)));
  }
  auto loop = scf::ForOp::create(b, loc, zero, total, idx(1));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    remapTile();
    IRMapping m = iteration(loop.getInductionVar());
    Value qBatch = clone(n.in.q.offsets[0], m),
          qHead = clone(n.in.q.offsets[1], m),
          qStart = clone(n.in.q.offsets[2], m);
    // The fixed order: this query block's semaphore, and whether the key
    // block above adds before this one.
    Value semaphore, waits, want, mine;
    if (dqOrder) {
      // (Few registers: the producer has kMinProducerRegs. Relative to the
      // group's first semaphore.)
      Value t = loop.getInductionVar();
      Value rem = remu(t, nQB);
      Value qb = rotateQb(rem);
      Value at = add(mul(divu(t, nQB), orderBlocks), qb);
      semaphore = LLVM::IntToPtrOp::create(
          b, loc, LLVM::LLVMPointerType::get(b.getContext(), 1),
          arith::IndexCastOp::create(b, loc, b.getI64Type(),
                                     add(orderBase, mul(at, idx(4))))
              .getResult());
      waits = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, rem,
                                    firstWait);
      if (qbShift) {
        // Rotating: wait for the count of blocks done to reach this
        // block's rank, then count this one; else the descending order's
        // values (waitForTurn, passTurn).
        Value rank = orderRank(qb);
        Value rankDone = add(rank, idx(1));
        Value above = add(blockKey, idx(2));
        Value self = add(blockKey, idx(1));
        waits = arith::OrIOp::create(b, loc, waits, rotates);
        want = arith::SelectOp::create(b, loc, rotates, rank, above);
        mine = arith::SelectOp::create(b, loc, rotates, rankDone, self);
      }
    }
    // The units in the consumers' order (addDqWgmma): unit u is warpgroup
    // u % groups's, 64 queries (u % mq) by 64 columns (u / mq).
    int64_t mq = cfg.br / 64, units = mq * (cfg.dkCols() / 64);
    auto map = UnrealizedConversionCastOp::create(
                   b, loc, LLVM::LLVMPointerType::get(b.getContext()), dqMap)
                   .getResult(0);
    for (int64_t u = 0; u < units; ++u) {
      int64_t gi = u % groups;
      dqBarrier(/*sync=*/true, kDqFullBarrier, idx(gi));
      {
        auto ifOp = scf::IfOp::create(b, loc, leader, false);
        OpBuilder::InsertionGuard g2(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        if (dqOrder && u == 0)
          waitForTurn(semaphore, waits, want);
        Value row0 = add(qStart, idx(64 * (u % mq)));
        Value col0 = add(dkCol0, idx(64 * (u / mq)));
        for (int64_t p = 0; p < 64 / kDqBoxCols; ++p) {
          // (The shared address as the pointer NVVM's op takes.)
          Value addr = add(smemAligned,
                           idx(dqStageOffset + 4 * (gi * kDqUnitFloats +
                                                    p * kDqUnitFloats / 2)));
          Value src = LLVM::IntToPtrOp::create(
              b, loc, LLVM::LLVMPointerType::get(b.getContext(), 3),
              arith::IndexCastOp::create(b, loc, b.getI64Type(), addr)
                  .getResult());
          NVVM::CpAsyncBulkTensorReduceOp::create(
              b, loc, map, src, NVVM::TMAReduxKind::ADD,
              NVVM::TMAStoreMode::TILE,
              ValueRange{toI32(add(col0, idx(p * kDqBoxCols))), toI32(row0),
                         toI32(qHead), toI32(qBatch)},
              Value());
        }
        NVVM::CpAsyncBulkCommitGroupOp::create(b, loc);
        // The area is free again once the reductions have read it.
        NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0),
                                             b.getUnitAttr());
      }
      NVVM::SyncWarpOp::create(b, loc, i32(-1));
      auto arrive = [&] {
        dqBarrier(/*sync=*/false, kDqEmptyBarrier, idx(gi));
      };
      // (The warpgroup's last unit of the last iteration: no one waits.)
      if (u + groups < units)
        arrive();
      else
        onlyIf(slt(add(loop.getInductionVar(), idx(1)), total), arrive);
      if (dqOrder && u == units - 1)
        onlyIf(leader, [&] { passTurn(semaphore, mine); });
    }
  }
  // The reductions have completed before the block exits.
  if (finalWait)
    NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0),
                                         UnitAttr());
}

void KeyBlockKernel::waitForTurn(Value semaphore, Value waits,
                                 Value wantIndex) {
  // The semaphore holds `want` once the key blocks before this one in the
  // query block's order have added (passTurn; by default the descending
  // order: the key block above stores its index + 1). Spin on an acquire
  // load; after kDqOrderPolls polls (tens of seconds) trap rather than hang.
  Type i32Type = b.getI32Type(), i64Type = b.getI64Type();
  if (!wantIndex)
    wantIndex = add(blockKey, idx(2));
  Value want = arith::IndexCastOp::create(b, loc, i32Type, wantIndex);
  auto ifOp = scf::IfOp::create(b, loc, waits, false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  Value zero64 = arith::ConstantIntOp::create(b, loc, i64Type, 0);
  auto spin = scf::WhileOp::create(
      b, loc, TypeRange{i64Type}, ValueRange{zero64},
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value seen = LLVM::LoadOp::create(
            nb, nl, i32Type, semaphore, /*alignment=*/4, /*isVolatile=*/false,
            /*isNonTemporal=*/false, /*isInvariant=*/false,
            /*isInvariantGroup=*/false, LLVM::AtomicOrdering::acquire,
            "device");
        Value polls = arith::AddIOp::create(
            nb, nl, args[0], arith::ConstantIntOp::create(nb, nl, i64Type, 1));
        Value early =
            arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::ne, seen, want);
        Value more = arith::CmpIOp::create(
            nb, nl, arith::CmpIPredicate::slt, polls,
            arith::ConstantIntOp::create(nb, nl, i64Type, kDqOrderPolls));
        scf::ConditionOp::create(nb, nl,
                                 arith::AndIOp::create(nb, nl, early, more),
                                 ValueRange{polls});
      },
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        scf::YieldOp::create(nb, nl, args);
      });
  Value gaveUp = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::sge, spin.getResult(0),
      arith::ConstantIntOp::create(b, loc, i64Type, kDqOrderPolls));
  auto trapIf = scf::IfOp::create(b, loc, gaveUp, false);
  b.setInsertionPointToStart(trapIf.thenBlock());
  LLVM::Trap::create(b, loc);
  b.setInsertionPointAfter(trapIf);
  // The bulk reductions that follow (async proxy) come after the acquire.
  NVVM::FenceProxyOp::create(b, loc, NVVM::ProxyKind::async_global,
                             NVVM::SharedSpaceAttr());
}

void KeyBlockKernel::passTurn(Value semaphore, Value mineIndex) {
  if (!mineIndex)
    mineIndex = add(blockKey, idx(1));
  Value mine = arith::IndexCastOp::create(b, loc, b.getI32Type(), mineIndex);
  // The reductions have completed (not only read the staging area) and are
  // ordered before the release that lets the key block below add.
  NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, b.getI32IntegerAttr(0),
                                       UnitAttr());
  NVVM::FenceProxyOp::create(b, loc, NVVM::ProxyKind::async_global,
                             NVVM::SharedSpaceAttr());
  LLVM::StoreOp::create(b, loc, mine, semaphore, /*alignment=*/4,
                        /*isVolatile=*/false, /*isNonTemporal=*/false,
                        /*isInvariantGroup=*/false,
                        LLVM::AtomicOrdering::release, "device");
}

void KeyBlockKernel::reduceDq(ArrayRef<Value> dq, int64_t chunk, Value batch,
                              Value head, Value row0, Value col0) {
  if (dqMap) {
    assert(chunk == 64 && "the dQ warp takes 64-column units");
    stageDqUnit(dq);
    return;
  }
  if (dqStage) {
    stageAndReduce(dq, chunk, batch, head, row0, col0);
    return;
  }
  for (int64_t h = 0; h < 2; ++h) {
    Value row = add(add(row0, g), idx(8 * h));
    auto ifOp = scf::IfOp::create(b, loc, slt(row, nq), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    for (int64_t nt = 0; nt < chunk / 8; ++nt) {
      Value col = add(add(col0, idx(8 * nt)), mul(tig, idx(2)));
      addToAccumulator(ValueRange{batch, head, row, col},
                       frags.element(dq[nt], h, 0),
                       frags.element(dq[nt], h, 1));
    }
  }
}

void KeyBlockKernel::addToAccumulator(ValueRange at, Value x, Value y) {
  if (!cfg.vectorAtomics) {
    SmallVector<Value> next(at);
    memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addf, x, dqAcc,
                                at);
    next.back() = add(next.back(), idx(1));
    memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addf, y, dqAcc,
                                next);
    return;
  }
  // sm_90: one 8-byte reduction for the lane's two adjacent columns. The
  // accumulator is an identity-layout allocation: its address is linear.
  Value offset = at[0];
  for (int i = 1; i < 4; ++i)
    offset = add(mul(offset, memref::DimOp::create(b, loc, dqAcc, i)), at[i]);
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, dqAcc);
  Value addr = arith::IndexCastOp::create(b, loc, b.getI64Type(),
                                          add(base, mul(offset, idx(4))));
  faptx::RedGlobalAddOp::create(b, loc, addr, ValueRange{x, y});
}

void KeyBlockKernel::epilogue(ValueRange acc) {
  const int64_t m = cfg.mTiles, ndk = cfg.dkCols() / 8, ndv = cfg.dvCols() / 8;
  Value scale = cfg.scale, one = f32(1.0);
  // This warp's rows of the key block below Nk (`atRow`, once per row)
  // and each of their fragments scaled by `factor`, with its half and
  // first column (`atFragment`).
  auto forEachRow =
      [&](ValueRange frs, int64_t nn, Value factor, Value col0,
          function_ref<void(Value row)> atRow,
          function_ref<void(Value f, int64_t h, Value col)> atFragment) {
        for (int64_t mt = 0; mt < m; ++mt)
          for (int64_t h = 0; h < 2; ++h) {
            Value row =
                add(add(add(kStart, warpKey0), g), idx(16 * mt + 8 * h));
            auto ifOp = scf::IfOp::create(b, loc, slt(row, nk), false);
            OpBuilder::InsertionGuard guard(b);
            b.setInsertionPointToStart(ifOp.thenBlock());
            atRow(row);
            for (int64_t nt = 0; nt < nn; ++nt) {
              Value f = frags.scaleRows(frs[mt * nn + nt], factor, factor);
              Value col = add(col0, add(idx(8 * nt), mul(tig, idx(2))));
              atFragment(f, h, col);
            }
          }
      };
  auto store = [&](Value dest, ValueRange frs, int64_t nn, Value factor,
                   Value col0) {
    Value row;
    forEachRow(
        frs, nn, factor, col0, [&](Value r) { row = r; },
        [&](Value f, int64_t h, Value col) {
          Value half = frags.truncRow(f, h);
          storeGlobalVector(b, loc, half, dest,
                            ValueRange{kBatch, kHead, row, col});
        });
  };
  // A split group: adds to the f32 accumulators, a lane's two adjacent
  // columns per 8-byte reduction. (Pairing lanes for 16-byte ones costs the
  // 240-register consumers 8 bytes of spills.)
  auto reduce = [&](Value accum, ValueRange frs, int64_t nn, Value factor,
                    Value col0) {
    Value rows = memref::DimOp::create(b, loc, accum, 2);
    Value cols = memref::DimOp::create(b, loc, accum, 3);
    Value heads = memref::DimOp::create(b, loc, accum, 1);
    Value ptr = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, accum);
    Value rowStart;
    forEachRow(
        frs, nn, factor, col0,
        [&](Value row) {
          rowStart =
              mul(add(mul(add(mul(kBatch, heads), kHead), rows), row), cols);
        },
        [&](Value f, int64_t h, Value col) {
          Value addr = arith::IndexCastOp::create(
              b, loc, b.getI64Type(),
              add(ptr, mul(add(rowStart, col), idx(4))));
          faptx::RedGlobalAddOp::create(
              b, loc, addr,
              ValueRange{frags.element(f, h, 0), frags.element(f, h, 1)});
        });
  };
  if (cfg.wgSplit == 1 && dkAcc) {
    auto ifOp = scf::IfOp::create(b, loc, splitNow, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    reduce(dkAcc, acc.take_front(m * ndk), ndk, scale, dkCol0);
    reduce(dvAcc, acc.slice(m * ndk, m * ndv), ndv, one, dvCol0);
    b.setInsertionPointToStart(ifOp.elseBlock());
    store(n.dk, acc.take_front(m * ndk), ndk, scale, dkCol0);
    store(n.dv, acc.slice(m * ndk, m * ndv), ndv, one, dvCol0);
    return;
  }
  if (cfg.wgSplit == 1) {
    store(n.dk, acc.take_front(m * ndk), ndk, scale, dkCol0);
    store(n.dv, acc.slice(m * ndk, m * ndv), ndv, one, dvCol0);
    return;
  }
  // A wgSplit pair: the first warpgroup's accumulators hold columns
  // [0, 64 h) of the slice, the second's [64 (panels - h), 64 panels): it
  // stores the columns from 64 h on.
  const int64_t accK = cfg.accKCols() / 8, accV = cfg.accVCols() / 8;
  Value wgId = divu(warp, 4);
  if (cfg.pairRoles()) {
    // Roles: the first warpgroup holds dK, the second dV, whole.
    auto ifOp = scf::IfOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, wgId, idx(0)),
        /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    store(n.dk, acc.take_front(accK), accK, scale, dkCol0);
    b.setInsertionPointToStart(ifOp.elseBlock());
    store(n.dv, acc.take_front(accK), accK, one, dvCol0);
    return;
  }
  auto share = [&](Value dest, ValueRange frs, int64_t sliceCols,
                   Value sliceCol0, Value factor) {
    int64_t panels = llvm::divideCeil(sliceCols, 64),
            h = llvm::divideCeil(panels, 2);
    int64_t first = std::min<int64_t>(sliceCols, 64 * h);
    int64_t skip = (64 * h - 64 * (panels - h)) / 8;
    auto ifOp = scf::IfOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, wgId, idx(0)),
        /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    store(dest, frs, first / 8, factor, sliceCol0);
    b.setInsertionPointToStart(ifOp.elseBlock());
    store(dest, frs.slice(skip, (sliceCols - first) / 8),
          (sliceCols - first) / 8, factor, add(sliceCol0, idx(first)));
  };
  share(n.dk, acc.take_front(accK), cfg.dkCols(), dkCol0, scale);
  share(n.dv, acc.slice(accK, accV), cfg.dvCols(), dvCol0, one);
}

void KeyBlockKernel::mapBlock(gpu::KernelDim3 ids, gpu::KernelDim3 grid,
                              bool ordered) {
  // x: the key block, times the dK/dV column slices when split.
  Value blockX = ids.x, blockY = ids.y, blockZ = ids.z;
  slice = idx(0);
  if (cfg.split > 1) {
    slice = remu(ids.x, cfg.split);
    blockX = divu(ids.x, cfg.split);
  }
  // A split group's accumulators have rows (splitsGroups).
  if (dkAcc)
    splitNow =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                              memref::DimOp::create(b, loc, dkAcc, 2), idx(0));
  if (heavyBlocksFirst() && !ordered) {
    // With a causal band the first key blocks see the most queries, and
    // with GQA each block walks the G heads of its group: few, long blocks
    // whose last-launched ones form a tail (+12% at 16:4 and 8k tokens per
    // batch against MHA, +34% at 16:2). Then the launch order (x fastest)
    // takes every (kv head, batch)'s key block 0 first, then block 1, ...
    // Only for small grids of at most 64 key blocks: H200, bf16 causal
    // (2026-12-03), 0.70-0.86x the time at D = 128 and 0.82-0.91x at
    // D = 64 for G = 4 / 8 with 256-512 blocks, 0.96x with 1024; with 128
    // key blocks (N = 16k) or MHA's 2048+ blocks the head-major order's
    // L2 reuse of Q and dO wins (1.02-1.11x the time reordered).
    Value keyBlocks = divu(grid.x, cfg.split);
    Value blocks = mul(mul(grid.x, grid.y), grid.z);
    Value group = clone(n.headLoop.getUpperBound(), base);
    Value reorder = smallGqaGrid(keyBlocks, blocks, group, 2);
    if (queryOuter()) {
      Value mid = midGqaGrid(keyBlocks, group);
      reorder = andNot(reorder, mid);
    }
    if (dkAcc) // A split group: MHA's launch order (and its L2 reuse).
      reorder = andNot(reorder, splitNow);
    Value linear = add(ids.x, mul(grid.x, add(ids.y, mul(grid.y, ids.z))));
    Value pairs = mul(grid.y, grid.z);
    Value rest = divu(linear, cfg.split);
    Value pair = remu(rest, pairs);
    auto pick = [&](Value reordered, Value plain) {
      return arith::SelectOp::create(b, loc, reorder, reordered, plain)
          .getResult();
    };
    slice = pick(remu(linear, cfg.split), slice);
    blockX = pick(divu(rest, pairs), blockX);
    blockY = pick(remu(pair, grid.y), blockY);
    blockZ = pick(divu(pair, grid.y), blockZ);
  }
  if (dkAcc) {
    // y counts query heads: the kv head and this block's head of its group.
    assert(!ordered && !cfg.persistent && "a split group is the grid kernel's");
    Value group = clone(n.headLoop.getUpperBound(), base);
    auto [kvHead, head] = divRemU32(blockY, group);
    blockY = arith::SelectOp::create(b, loc, splitNow, kvHead, blockY);
    headOffset = arith::SelectOp::create(b, loc, splitNow, head, idx(0));
  }
  if (dqOrder) {
    // Each query block takes the key blocks' dQ in descending order, so
    // launch them in that order: a block only waits for blocks launched
    // before it (resident or done), never for one that may not start.
    // (Descending, because in a causal band the key block above starts
    // its query blocks later and so reaches each one first: it rarely
    // waits. Without a mask the order rotates instead, rotatesDqOrder.)
    blockX = sub(sub(grid.x, idx(1)), blockX);
  }
  dkCol0 = mul(slice, idx(cfg.dkCols()));
  dvCol0 = mul(slice, idx(cfg.dvCols()));
  gpu::KernelDim3 blockIds{blockX, blockY, blockZ};
  for (auto [iv, dim] :
       llvm::zip_equal(n.forall.getInductionVars(), n.blockDims))
    base.map(iv, getBlockId(blockIds, dim));
  if (n.keyLoop)
    base.map(n.keyLoop.getInductionVar(), blockX);
  blockKey = blockX;
}

Value KeyBlockKernel::tileValues() {
  kStart = clone(n.in.k.offsets[2], base);
  kBatch = clone(n.in.k.offsets[0], base);
  kHead = clone(n.in.k.offsets[1], base);
  // (V's batch and head too: `base` memoizes them for the copies.)
  (void)clone(n.in.v.offsets[0], base);
  (void)clone(n.in.v.offsets[1], base);
  if (n.in.packed) {
    // A sequence's rows end at its first row plus its length: the limit of
    // every copy and store (rows past it are the next sequence's).
    AttentionBackwardStepOp step = n.in.step;
    nk = add(sub(kStart, clone(step.getKStart(), base)),
             clone(step.getKLen(), base));
    IRMapping first = base;
    first.map(n.headLoop.getInductionVar(), idx(0));
    first.map(n.queryLoop.getInductionVar(), idx(0));
    nq = add(
        sub(clone(n.in.q.offsets[2], first), clone(step.getQStart(), first)),
        clone(step.getQLen(), first));
  }
  qbLo = clone(n.queryLoop.getLowerBound(), base);
  Value qbHi = clone(n.queryLoop.getUpperBound(), base);
  Value groups = clone(n.headLoop.getUpperBound(), base);
  Value zero = idx(0), one = idx(1);
  Value span = arith::MaxSIOp::create(b, loc, sub(qbHi, qbLo), zero);
  Value total = mul(groups, span);
  if (splitNow)
    total = arith::SelectOp::create(b, loc, splitNow, span, total);
  nQB = arith::MaxSIOp::create(b, loc, span, one);
  if (hostSms) {
    // Without a mask every key block adds into every query block: in the
    // descending order all of them start at query block 0 and block j
    // waits for the nKB - 1 - j above it (a ramp of nKB iterations: 0.79x
    // the fast backward at D = 64, 2k, H100). Each key block starts at its
    // own query block instead (orderRank). Only where all of a head's key
    // blocks can be resident at once, fewer than the multiprocessors (MIG
    // slices have few): a block may then wait for one launched after it.
    orderKeyBlocks = clone(n.keyLoop.getUpperBound(), base);
    Value fewerThanSms = sub(hostSms, one);
    Value limit =
        arith::MinUIOp::create(b, loc, fewerThanSms, idx(kMaxRotatedKeyBlocks));
    rotates = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ule,
                                    orderKeyBlocks, limit);
    Value spread = mul(blockKey, nQB);
    Value start = divu(spread, orderKeyBlocks);
    qbShift = arith::SelectOp::create(b, loc, rotates, start, zero);
  }
  if (queryOuter()) {
    headRotation = divRemU32(blockKey, groups).second;
    Value keyBlocks = tileGrid()[0];
    Value big = smallGqaGrid(keyBlocks, Value(), groups, 8);
    Value mid = midGqaGrid(keyBlocks, groups);
    queryOuterNow = arith::OrIOp::create(b, loc, big, mid);
    if (splitNow)
      queryOuterNow = andNot(queryOuterNow, splitNow);
  }
  if (dqOrder) {
    // The query blocks of the key block above, from the nest's own bounds
    // (a fresh mapping: `base` memoizes this block's). A band mask's bounds
    // do not decrease with the key block: the blocks that see a query
    // block are consecutive, and the one above sees this block's query
    // blocks from its own first one on (none: past the last key block).
    IRMapping above;
    for (Value iv : n.forall.getInductionVars())
      above.map(iv, base.lookup(iv));
    Value next = add(blockKey, one);
    above.map(n.keyLoop.getInductionVar(), next);
    Value aboveLo = clone(n.queryLoop.getLowerBound(), above);
    firstWait = arith::SelectOp::create(
        b, loc, slt(next, clone(n.keyLoop.getUpperBound(), base)),
        arith::MaxSIOp::create(b, loc, sub(aboveLo, qbLo), zero), nQB);
  }

  return total;
}

void KeyBlockKernel::consumeTile(Value total, ArrayRef<Value> init) {
  Value zero = idx(0), one = idx(1);
  wsTotal = total;
  {
    // The ring's first two iterations, every consumer's before the loop
    // (none when no query block is visible: the block's first one may lie
    // past the padded rows then).
    auto first = scf::IfOp::create(b, loc, slt(zero, total), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(first.thenBlock());
    Value last = sub(total, one);
    copyColumns(zero, zero);
    commit();
    copyColumns(arith::MinUIOp::create(b, loc, one, last), one);
    commit();
    waitCopies(1);
    NVVM::BarrierOp::create(b, loc, TypeRange{}, i32(1), i32(cfg.threads()),
                            NVVM::BarrierReductionAttr(), Value());
  }
  // The consumers' loop: wait for the iteration's Q and dO, release them
  // once its GEMMs are done (the body ends waiting for them).
  auto loop = scf::ForOp::create(b, loc, zero, total, one, init);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value t = loop.getInductionVar();
    remapTile();
    for (Value ch : {qChannel, doChannel})
      fagpu::ChannelGetOp::create(
          b, loc, cast<fagpu::ChannelType>(ch.getType()).getStageType(), ch,
          item(t));
    SmallVector<Value> nextAcc =
        bodyWgmma(t, remu(item(t), 2), loop.getRegionIterArgs());
    for (Value ch : {qChannel, doChannel})
      fagpu::ChannelReleaseOp::create(b, loc, ch, item(t));
    scf::YieldOp::create(b, loc, nextAcc);
  }
  remapTile();
  if (cfg.persistent) {
    // The tile's GEMMs are done (its last iteration waited for them): the
    // producer may load the next tile's K and V while dK and dV are stored.
    for (Value ch : {kChannel, vChannel})
      fagpu::ChannelReleaseOp::create(b, loc, ch, kvIndex());
  }
  epilogue(loop.getResults());
  // (Persistent: the last iteration's column copy lands before the next
  // tile's first ones go to the same stages.)
  if (cfg.persistent)
    waitCopies(0);
}

int64_t KeyBlockKernel::emit(gpu::LaunchOp launch) {
  nest = n.forall;
  // First uses fix the kernel's parameter order:
  // q, k, v, dout, lse2, delta, [dq_accum], dk, dv.
  for (Value *mem : {&n.in.qMem, &n.in.kMem, &n.in.vMem, &n.in.doMem})
    *mem = batchView(*mem, n.in.packed);
  nq = memref::DimOp::create(b, loc, n.in.qMem, 2);
  nk = memref::DimOp::create(b, loc, n.in.kMem, 2);
  for (Value mem : {n.in.vMem, n.in.doMem, lse2, delta})
    (void)memref::DimOp::create(b, loc, mem, 2);
  if (n.withDq)
    (void)memref::DimOp::create(b, loc, dqAcc, 2);
  if (dqOrder) {
    orderHeads = memref::DimOp::create(b, loc, dqOrder, 1);
    orderBlocks = memref::DimOp::create(b, loc, dqOrder, 2);
  }
  n.dk = batchView(n.dk, n.in.packed);
  n.dv = batchView(n.dv, n.in.packed);
  (void)memref::DimOp::create(b, loc, n.dk, 2);
  (void)memref::DimOp::create(b, loc, n.dv, 2);

  gpu::KernelDim3 ids = launch.getBlockIds();
  if (cfg.persistent) {
    // (forEachTile maps each tile's coordinates.)
    persistentBlock = ids.x;
    persistentGrid = launch.getGridSize().x;
  } else {
    mapBlock(ids, launch.getGridSize());
  }

  tid = launch.getThreadIds().x;
  // Warp-specialized: the producer is warpgroup 0; the consumers count
  // their threads from 0 (the producer never reads these).
  if (cfg.warpSpecialized)
    tid = sub(tid, idx(fagpu::kWarpgroupThreads));
  lane = remu(tid, kWarpSize);
  g = divu(lane, 4);
  tig = remu(lane, 4);
  warp = divu(tid, kWarpSize);
  // (The two warpgroups of a wgSplit pair own the same 64 keys.)
  warpKey0 = cfg.wgSplit > 1 ? mul(remu(warp, 4), idx(16))
                             : mul(warp, idx(16 * cfg.mTiles));

  SmemLayout smem = makeSmem(b, loc);
  smemBase = smem.base;
  if (cfg.wgmma) {
    // 128-byte swizzled panel tiles from the first 1024-byte boundary.
    Value addr =
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, smem.base);
    smem.pad = remu(sub(idx(1024), remu(addr, 1024)), 1024);
    smem.alignedAddr = add(addr, smem.pad);
    smemAligned = smem.alignedAddr;
    smemPad = smem.pad;
    Value kAddr, vAddr, qAddr, doAddr, dsAddr, pAddr, unused;
    // (The byte offset of the next panel tile.)
    auto next = [&] { return int64_t(llvm::alignTo(smem.bytes, 1024)); };
    kOffset = next();
    kTile = smem.panelTile(b, loc, cfg.bc, cfg.d, cfg.elt, kAddr);
    vOffset = next();
    vTile = smem.panelTile(b, loc, cfg.bc, cfg.dv, cfg.elt, vAddr);
    if (cfg.warpSpecialized) {
      // Two-stage TMA rings: stage s of Q is a [Br, D] panel tile at
      // qOffset + s x its bytes (the same bytes as the buffers below).
      qOffset = next();
      qTile = smem.panelTile(b, loc, cfg.br, cfg.d, cfg.elt, qAddr);
      (void)smem.panelTile(b, loc, cfg.br, cfg.d, cfg.elt, unused);
      doOffset = next();
      doTile = smem.panelTile(b, loc, cfg.br, cfg.dv, cfg.elt, doAddr);
      (void)smem.panelTile(b, loc, cfg.br, cfg.dv, cfg.elt, unused);
    } else {
      qTile = smem.panelTile(b, loc, 2 * cfg.br, cfg.d, cfg.elt, qAddr);
      doTile = smem.panelTile(b, loc, 2 * cfg.br, cfg.dv, cfg.elt, doAddr);
    }
    if (n.withDq || cfg.wgSplit > 1)
      dsTile = smem.panelTile(b, loc, cfg.bc, cfg.br, cfg.elt, dsAddr);
    if (cfg.wgSplit > 1)
      pTile = smem.panelTile(b, loc, cfg.bc, cfg.br, cfg.elt, pAddr);
    // Warp-specialized: dS^T's second buffer follows the first.
    if (cfg.warpSpecialized && n.withDq)
      (void)smem.panelTile(b, loc, cfg.bc, cfg.br, cfg.elt, unused);
    // 8-row groups 1024 bytes apart; MN-major operands span 64-column panels
    // panelStride apart (K-major ones ignore the leading offset). Each
    // warpgroup's 64 keys (the same ones for a wgSplit pair).
    Value groupRows = cfg.wgSplit > 1 ? idx(0)
                                      : mul(divu(warp, 4),
                                            idx(64 * SmemTile::kPanelRowBytes));
    kDescA = wg.descriptor(add(kAddr, groupRows), 16, 1024);
    vDescA = wg.descriptor(add(vAddr, groupRows), 16, 1024);
    qDescB = wg.descriptor(qAddr, 16, 1024);
    doDescB = wg.descriptor(doAddr, 16, 1024);
    qDescMN = wg.descriptor(qAddr, qTile.panelStride() * 2, 1024);
    doDescMN = wg.descriptor(doAddr, doTile.panelStride() * 2, 1024);
    kDescMN = wg.descriptor(kAddr, kTile.panelStride() * 2, 1024);
    if (n.withDq)
      dsDescA = wg.descriptor(dsAddr, dsTile.panelStride() * 2, 1024);
    if (cfg.wgSplit > 1) {
      pDescK = wg.descriptor(pAddr, 16, 1024);
      dsDescK = wg.descriptor(dsAddr, 16, 1024);
    }
  } else {
    kTile = smem.tile(b, loc, cfg.bc, cfg.d, cfg.elt);
    vTile = smem.tile(b, loc, cfg.bc, cfg.dv, cfg.elt);
    qTile = smem.tile(b, loc, 2 * cfg.br, cfg.d, cfg.elt);
    doTile = smem.tile(b, loc, 2 * cfg.br, cfg.dv, cfg.elt);
    if (n.withDq)
      dsTile = smem.tile(b, loc, cfg.bc, cfg.br, cfg.elt);
  }
  if (!cfg.warpSpecialized) {
    lseS = smem.f32Buffer(b, loc, 2 * cfg.br);
    deltaS = smem.f32Buffer(b, loc, 2 * cfg.br);
  } else {
    colS = smem.f32Buffer(b, loc, kBackwardColumnStages * 2 * cfg.br);
  }
  if (n.withDq && cfg.stageDq && cfg.warpSpecialized) {
    // Per consumer warpgroup, two [64, 32] f32 panels, 128-byte swizzled:
    // the dQ warp's TMA boxes.
    smem.bytes = llvm::alignTo(smem.bytes, 1024);
    dqStageOffset = smem.bytes;
    dqStage = smem.f32Buffer(b, loc, cfg.warps / 4 * kDqUnitFloats);
  } else if (n.withDq && cfg.stageDq) {
    // Rows padded by 4 floats: the 8 rows a fragment store touches fall in
    // distinct banks.
    stageStride = (cfg.wgmma ? 64 : cfg.dqChunk) + 4;
    dqStage = smem.f32Buffer(b, loc, cfg.warps * cfg.dqStageRows * stageStride);
  }

  if (!cfg.wgmma) {
    laneK = laneOffset(kTile, true);
    laneV = laneOffset(vTile, true);
    laneQB = laneOffset(qTile, false);
    laneDoB = laneOffset(doTile, false);
    laneQA = laneOffset(qTile, true);
    laneDoA = laneOffset(doTile, true);
    laneKA = laneK;
    if (n.withDq)
      laneDsB = laneOffset(dsTile, false);
  }

  Value total = cfg.persistent ? Value() : tileValues();
  Value zero = idx(0), one = idx(1);
  SmallVector<Value> init(cfg.mTiles * (cfg.accKCols() + cfg.accVCols()) / 8,
                          frags.zeroC());
  if (cfg.warpSpecialized) {
    emitWarpRoles(total);
    AttentionBackwardStepOp mods = cfg.modifiers;
    foldLse = backwardFoldsLse(cfg.br) && !cfg.softcap() &&
              !(mods && mods.hasScoreMod());
    if (foldLse) {
      foldedExp = arith::MaximumFOp::create(b, loc, cfg.factors.expFactor,
                                            f32(0x1p-100));
      expRecip = arith::DivFOp::create(b, loc, f32(1.0), foldedExp);
    }
    if (cfg.persistent) {
      forEachTile([&](Value tileTotal) {
        for (Value ch : {kChannel, vChannel})
          fagpu::ChannelGetOp::create(
              b, loc, cast<fagpu::ChannelType>(ch.getType()).getStageType(), ch,
              kvIndex());
        consumeTile(tileTotal, init);
      });
    } else {
      consumeTile(total, init);
    }
    b.setInsertionPointAfter(roles);
    return smem.allocBytes();
  }

  // K and V once, then the first (head, query block).
  copyRows(n.in.kMem, kBatch, kHead, kStart, nk, kTile, zero, cfg.bc,
           cfg.threads());
  copyRows(n.in.vMem, clone(n.in.v.offsets[0], base),
           clone(n.in.v.offsets[1], base), kStart, nk, vTile, zero, cfg.bc,
           cfg.threads());
  commit();
  {
    auto ifOp = scf::IfOp::create(b, loc, slt(zero, total), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    issue(zero, zero);
  }

  auto loop = scf::ForOp::create(b, loc, zero, total, one, init);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value t = loop.getInductionVar();
    Value buf = remu(t, 2);
    // Iteration t has landed for every thread, and every warp is done with
    // the buffers (and dS^T) the next copies overwrite.
    waitAll();
    if (cfg.wgmma)
      wg.fenceSharedForAsync();
    gpu::BarrierOp::create(b, loc);
    Value next = add(t, one);
    {
      auto ifOp = scf::IfOp::create(b, loc, slt(next, total), false);
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      issue(next, sub(one, buf));
    }
    ValueRange acc = loop.getRegionIterArgs();
    scf::YieldOp::create(b, loc,
                         cfg.wgSplit > 1 ? bodyWgmmaSplit(t, buf, acc)
                         : cfg.wgmma     ? bodyWgmma(t, buf, acc)
                                         : body(t, buf, acc));
  }
  waitAll();
  epilogue(loop.getResults());
  return smem.allocBytes();
}

//===----------------------------------------------------------------------===//
// Query-block kernel: deterministic dQ
//===----------------------------------------------------------------------===//

/// The deterministic dQ nest: forall over (batch, query head, query block)
/// { scf.for key blocks { step with only the dQ accumulator } }.
struct QueryBlockNest {
  StepInputs in;
  scf::ForallOp forall;
  /// The block id of each of the forall's induction variables.
  SmallVector<gpu::Dimension> blockDims;
  scf::ForOp keyLoop;
  Value dq;
  SmallVector<Operation *> stores;
};

FailureOr<QueryBlockNest> matchQueryBlockNest(AttentionBackwardStepOp step) {
  QueryBlockNest n;
  auto fail = [&](Operation *at,
                  const Twine &why) -> FailureOr<QueryBlockNest> {
    at->emitError("fa-convert-tiled-attention-backward-to-gpu: ") << why;
    return failure();
  };
  n.keyLoop = dyn_cast<scf::ForOp>(step->getParentOp());
  n.forall = n.keyLoop ? dyn_cast<scf::ForallOp>(n.keyLoop->getParentOp())
                       : scf::ForallOp();
  if (!n.forall || !n.forall.isNormalized() ||
      !isOneInteger(n.keyLoop.getStep()))
    return fail(step, "expected a dQ-only step in a unit-step key-block loop "
                      "of a normalized scf.forall over (batch, query head, "
                      "query block)");
  FailureOr<SmallVector<gpu::Dimension>> blockDims = getBlockDims(
      n.forall, {gpu::Dimension::z, gpu::Dimension::y, gpu::Dimension::x});
  if (failed(blockDims))
    return fail(n.forall, "expected a mapping of distinct #gpu.block<x|y|z>, "
                          "or none on a 3-d forall over (batch, query head, "
                          "query block)");
  n.blockDims = *blockDims;
  if (failed(matchStepInputs(step, n.in, n.forall)))
    return failure();
  SmallVector<Value> dests;
  FailureOr<SmallVector<Operation *>> stores = resultStores(n.forall, dests);
  if (failed(stores) || dests.size() != 1)
    return fail(n.forall, "the forall's dq result must be materialized into "
                          "a memref");
  n.stores = *stores;
  n.dq = dests[0];
  return n;
}

class QueryBlockKernel : public BackwardEmitter {
public:
  QueryBlockKernel(OpBuilder &b, Location loc, QueryBlockNest &n,
                   const BackwardConfig &cfg, Value lse2, Value delta)
      : BackwardEmitter(b, loc), n(n), cfg(cfg), frags(b, loc, cfg.elt),
        lse2(lse2), delta(delta) {
    elt = cfg.elt;
  }
  int64_t emit(gpu::LaunchOp launch);

private:
  void copyKV(IRMapping &m, Value buf);

  QueryBlockNest &n;
  const BackwardConfig &cfg;
  WarpFragments frags;
  Value lse2, delta;
  Value nk, kbLo;
  SmemTile qTile, doTile, kTile, vTile;
};

void QueryBlockKernel::copyKV(IRMapping &m, Value buf) {
  auto at = [&](const RowSlice &s, int i) { return clone(s.offsets[i], m); };
  Value row0 = mul(buf, idx(cfg.bc));
  copyRows(n.in.kMem, at(n.in.k, 0), at(n.in.k, 1), at(n.in.k, 2), nk, kTile,
           row0, cfg.bc, cfg.threads());
  copyRows(n.in.vMem, at(n.in.v, 0), at(n.in.v, 1), at(n.in.v, 2), nk, vTile,
           row0, cfg.bc, cfg.threads());
  commit();
}

int64_t QueryBlockKernel::emit(gpu::LaunchOp launch) {
  nest = n.forall;
  // Parameter order: q, k, v, dout, lse2, delta, dq.
  Value nq = memref::DimOp::create(b, loc, n.in.qMem, 2);
  nk = memref::DimOp::create(b, loc, n.in.kMem, 2);
  for (Value mem : {n.in.vMem, n.in.doMem, lse2, delta, n.dq})
    (void)memref::DimOp::create(b, loc, mem, 2);

  const int64_t m = cfg.mTiles, nkt = cfg.bc / 8, nd = cfg.d / 8;
  gpu::KernelDim3 ids = launch.getBlockIds();
  IRMapping base;
  for (auto [iv, dim] :
       llvm::zip_equal(n.forall.getInductionVars(), n.blockDims))
    base.map(iv, getBlockId(ids, dim));
  tid = launch.getThreadIds().x;
  lane = remu(tid, kWarpSize);
  g = divu(lane, 4);
  tig = remu(lane, 4);
  Value warpRow = mul(divu(tid, kWarpSize), idx(16 * m));

  SmemLayout smem = makeSmem(b, loc);
  qTile = smem.tile(b, loc, cfg.br, cfg.d, cfg.elt);
  doTile = smem.tile(b, loc, cfg.br, cfg.dv, cfg.elt);
  kTile = smem.tile(b, loc, 2 * cfg.bc, cfg.d, cfg.elt);
  vTile = smem.tile(b, loc, 2 * cfg.bc, cfg.dv, cfg.elt);
  Value laneQ = laneOffset(qTile, true), laneDo = laneOffset(doTile, true);
  Value laneKB = laneOffset(kTile, false), laneVB = laneOffset(vTile, false);
  Value laneKA = laneOffset(kTile, true);

  auto at = [&](const RowSlice &s, int i) { return clone(s.offsets[i], base); };
  Value qBatch = at(n.in.q, 0), qHead = at(n.in.q, 1), qStart = at(n.in.q, 2);
  Value zero = idx(0), one = idx(1);
  copyRows(n.in.qMem, qBatch, qHead, qStart, nq, qTile, zero, cfg.br,
           cfg.threads());
  copyRows(n.in.doMem, at(n.in.dout, 0), at(n.in.dout, 1), at(n.in.dout, 2), nq,
           doTile, zero, cfg.br, cfg.threads());
  commit();
  kbLo = clone(n.keyLoop.getLowerBound(), base);
  Value kbHi = clone(n.keyLoop.getUpperBound(), base);
  {
    auto ifOp = scf::IfOp::create(b, loc, slt(kbLo, kbHi), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    IRMapping m0 = base;
    m0.map(n.keyLoop.getInductionVar(), kbLo);
    copyKV(m0, zero);
  }
  // This lane's rows: warpRow + 16 mt + g + 8 h (padded workspace: always
  // in bounds).
  SmallVector<Value> rowLse, rowDelta;
  Value lb = at(n.in.lse, 0), lh = at(n.in.lse, 1), ls = at(n.in.lse, 2);
  Value db = at(n.in.delta, 0), dh = at(n.in.delta, 1), ds0 = at(n.in.delta, 2);
  for (int64_t mt = 0; mt < m; ++mt)
    for (int64_t h = 0; h < 2; ++h) {
      Value r = add(add(warpRow, g), idx(16 * mt + 8 * h));
      rowLse.push_back(
          memref::LoadOp::create(b, loc, lse2, ValueRange{lb, lh, add(ls, r)}));
      rowDelta.push_back(memref::LoadOp::create(
          b, loc, delta, ValueRange{db, dh, add(ds0, r)}));
    }

  SmallVector<Value> init(m * nd, frags.zeroC());
  auto loop = scf::ForOp::create(b, loc, kbLo, kbHi, one, init);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value kb = loop.getInductionVar();
    IRMapping it = base;
    it.map(n.keyLoop.getInductionVar(), kb);
    Value buf = remu(sub(kb, kbLo), 2);
    Value kRow0 = mul(buf, idx(cfg.bc));
    waitAll();
    gpu::BarrierOp::create(b, loc);
    Value next = add(kb, one);
    {
      auto ifOp = scf::IfOp::create(b, loc, slt(next, kbHi), false);
      OpBuilder::InsertionGuard g2(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      IRMapping mn = base;
      mn.map(n.keyLoop.getInductionVar(), next);
      copyKV(mn, sub(one, buf));
    }
    // S = Q K^T, dP = dO V^T: queries as rows.
    auto gemm = [&](const SmemTile &a, Value laneA, const SmemTile &bt,
                    Value laneB, int64_t depth) {
      return gemmABt(frags, a, laneA, warpRow, m, bt, laneB, kRow0, cfg.bc,
                     depth);
    };
    SmallVector<Value> s = gemm(qTile, laneQ, kTile, laneKB, cfg.d);

    // Visibility, queries as rows: key - query = d0 + (8 nt + e - 16 mt -
    // 8 h), d0 = (kStart + 2 tig) - (qStart + warpRow + g).
    MaskLimits lim;
    AttentionBackwardStepOp step = n.in.step;
    Value col0, row0, qLast, kLast;
    if (cfg.masked) {
      Value qS = clone(step.getQStart(), it), kS = clone(step.getKStart(), it),
            qLen = clone(step.getQLen(), it), kLen = clone(step.getKLen(), it);
      col0 = add(kS, mul(tig, idx(2)));
      row0 = add(add(qS, warpRow), g);
      lim = maskLimits(cfg, col0, row0, qLen, kLen);
      qLast = toI32(sub(qLen, idx(1)));
      kLast = toI32(sub(kLen, idx(1)));
    }
    auto visible = [&](int64_t f, int64_t h, int64_t el) -> Value {
      if (!cfg.masked)
        return Value();
      int64_t mt = f / nkt, nt = f % nkt, keyOff = 8 * nt + el;
      return visibleAt(lim, keyOff, keyOff - 16 * mt - 8 * h);
    };
    // Queries as rows: query 16 mt + 8 h, key 8 nt + el past the lane's
    // first.
    ElementPositions pos;
    if (cfg.modifiers) {
      Value r0 = toI32(row0), c0 = toI32(col0);
      pos.queryKey = [&](int64_t f, int64_t h, int64_t) {
        return (f / nkt) * 2 + h;
      };
      pos.keyKey = [&](int64_t f, int64_t, int64_t el) {
        return (f % nkt) * 2 + el;
      };
      pos.queryOf = [this, r0, qLast](int64_t key) -> Value {
        return arith::MinSIOp::create(
            b, loc, addNsw(r0, i32(16 * (key / 2) + 8 * (key % 2))), qLast);
      };
      pos.keyOf = [this, c0, kLast](int64_t key) -> Value {
        return arith::MinSIOp::create(
            b, loc, addNsw(c0, i32(8 * (key / 2) + key % 2)), kLast);
      };
      pos.affine = ModifierInliner::Positions{
          r0, c0, [](int64_t key) { return 16 * (key / 2) + 8 * (key % 2); },
          [](int64_t key) { return 8 * (key / 2) + key % 2; }};
      bindModifierOperands(pos, step, it);
    }
    SmallVector<Value> dp = gemm(doTile, laneDo, vTile, laneVB, cfg.dv);
    auto [p, ds] = scoreGradients(
        *this, frags, cfg, s, dp,
        [&](int64_t f, int64_t h, int64_t) {
          return rowLse[(f / nkt) * 2 + h];
        },
        [&](int64_t f, int64_t h, int64_t) {
          return rowDelta[(f / nkt) * 2 + h];
        },
        visible, cfg.modifiers ? &pos : nullptr);
    (void)p;
    // dQ += dS K.
    SmallVector<Value> dq(loop.getRegionIterArgs());
    accumulateFrags(frags, dq, ds, nkt, m, cfg.bc, kTile, laneKA, kRow0, cfg.d);
    scf::YieldOp::create(b, loc, dq);
  }
  waitAll();
  Value scale = cfg.scale;
  for (int64_t mt = 0; mt < m; ++mt)
    for (int64_t h = 0; h < 2; ++h) {
      Value row = add(add(qStart, add(warpRow, g)), idx(16 * mt + 8 * h));
      auto ifOp = scf::IfOp::create(b, loc, slt(row, nq), false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      for (int64_t nt = 0; nt < nd; ++nt) {
        Value f = frags.scaleRows(loop.getResult(mt * nd + nt), scale, scale);
        storeGlobalVector(
            b, loc, frags.truncRow(f, h), n.dq,
            ValueRange{qBatch, qHead, row, add(idx(8 * nt), mul(tig, idx(2)))});
      }
    }
  return smem.bytes;
}

} // namespace

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

/// With a kernel configuration, the kernel must need exactly the shared
/// memory the resource model predicted (which the op verifier checked
/// against the chip), and no more than the chip offers.
static LogicalResult checkSharedMemory(Operation *anchor,
                                       KernelConfigAttr config,
                                       const ChipInfo *chip,
                                       const KernelProblem &problem,
                                       int64_t bytes) {
  if (!config)
    return success();
  int64_t model = kernelResources(config, problem).sharedMemory;
  if (model != bytes)
    return anchor->emitError("fa-convert-tiled-attention-backward-to-gpu: "
                             "internal error: a kernel needs ")
           << bytes << " bytes of shared memory, the resource model says "
           << model;
  if (bytes > chip->sharedMemoryPerBlock)
    return anchor->emitError("fa-convert-tiled-attention-backward-to-gpu: a "
                             "kernel needs ")
           << bytes << " bytes of shared memory, more than the "
           << chip->sharedMemoryPerBlock << " a thread block may have on "
           << chip->name;
  return success();
}

LogicalResult mlir::fa::convertTiledAttentionBackwardToGPU(
    RewriterBase &rewriter, linalg::GenericOp deltaOp,
    ArrayRef<AttentionBackwardStepOp> steps,
    const FAConvertTiledAttentionBackwardToGPUOptions &options) {
  Location loc = deltaOp.getLoc();
  std::optional<KeyBlockNest> keyNest;
  std::optional<QueryBlockNest> queryNest;
  for (AttentionBackwardStepOp step : steps) {
    if (step.getDkAcc()) {
      if (keyNest)
        return step.emitError("fa-convert-tiled-attention-backward-to-gpu: "
                              "two dK/dV nests share one delta");
      FailureOr<KeyBlockNest> n = matchKeyBlockNest(step);
      if (failed(n))
        return failure();
      keyNest = *n;
    } else {
      if (queryNest)
        return step.emitError("fa-convert-tiled-attention-backward-to-gpu: "
                              "two dQ nests share one delta");
      FailureOr<QueryBlockNest> n = matchQueryBlockNest(step);
      if (failed(n))
        return failure();
      queryNest = *n;
    }
  }
  if (!keyNest || keyNest->withDq == bool(queryNest))
    return deltaOp.emitError("fa-convert-tiled-attention-backward-to-gpu: "
                             "expected one dK/dV/dQ nest, or one dK/dV nest "
                             "and one dQ nest");
  // The nest's kernel configuration (fa-select-kernel-config) decides; the
  // pass options serve IR without one.
  auto config =
      keyNest->forall->getAttrOfType<KernelConfigAttr>(kKernelConfigAttrName);
  const ChipInfo *chip = config ? lookupChip(config.getChip()) : nullptr;
  if (config && !chip)
    return keyNest->forall.emitError(
        "fa-convert-tiled-attention-backward-to-gpu: unknown chip in the "
        "kernel configuration");
  int64_t warps = config ? config.getWarps() : int64_t(options.warps);
  bool wgmma = config ? config.getMma() == MmaKind::Wgmma : options.wgmma;
  // wgmma with two warpgroups per 64 keys: the pair splits the work.
  int64_t wgSplit = 1;
  if (wgmma && config && config.getBlockKV() < 16 * warps)
    wgSplit = 16 * warps / config.getBlockKV();
  FailureOr<BackwardConfig> keyCfg =
      getConfig(keyNest->in.step, warps, /*keyRows=*/true, keyNest->forall,
                config ? config.getDkvSplit() : 1, wgSplit);
  if (failed(keyCfg))
    return failure();
  if (config &&
      (config.getBlockQ() != keyCfg->br || config.getBlockKV() != keyCfg->bc))
    return keyNest->forall.emitError(
               "fa-convert-tiled-attention-backward-to-gpu: the tiles (")
           << keyCfg->br << " x " << keyCfg->bc
           << ") are not those of the kernel configuration ("
           << config.getBlockQ() << " x " << config.getBlockKV() << ")";
  keyCfg->vectorAtomics = chip ? chip->vectorReductions : options.vectorAtomics;
  keyCfg->stageDq = keyNest->withDq && keyCfg->vectorAtomics;
  if (config) {
    KernelResources res =
        kernelResources(config, {KernelKind::BackwardKeyBlock, keyCfg->d,
                                 keyCfg->dv, keyNest->withDq});
    keyCfg->stageDq = res.stagesDq;
    if (res.dqStageRows)
      keyCfg->dqStageRows = res.dqStageRows;
  }
  if (wgmma) {
    auto fail = [&](const Twine &why) {
      return keyNest->forall.emitError(
                 "fa-convert-tiled-attention-backward-to-gpu: wgmma ")
             << why;
    };
    keyCfg->wgmma = true;
    if (warps % 4 != 0 || keyCfg->mTiles != 1)
      return fail("needs whole warpgroups of 16 keys per warp: warps a "
                  "multiple of 4 and block-kv == 16 * warps");
    if (keyCfg->br % 64 || keyCfg->br > 256)
      return fail("reads dS^T in 64-query panels: block-q must be a multiple "
                  "of 64, at most 256");
    if (keyCfg->split > 1 && (keyCfg->dkCols() % 64 || keyCfg->dvCols() % 64))
      return fail("reads Q and dO slices in whole 64-column panels: each "
                  "dkv_split slice must be a multiple of 64 columns");
    if (keyNest->withDq && !keyCfg->vectorAtomics)
      return fail("adds dQ with vector reductions: set vector-atomics");
  }
  if (config && config.getSchedule() == KernelSchedule::WarpSpecialized) {
    auto fail = [&](const Twine &why) {
      return keyNest->forall.emitError(
                 "fa-convert-tiled-attention-backward-to-gpu: the "
                 "warp_specialized backward ")
             << why;
    };
    if (!wgmma || wgSplit > 1 || keyCfg->split > 1)
      return fail("needs wgmma with 16 keys per consumer warp and no "
                  "dkv_split");
    if (keyNest->in.packed)
      return fail("takes dense [B, H, N, D] tensors, not packed sequences");
    if (keyCfg->d % 64 || keyCfg->dv % 64)
      return fail("loads 64-column TMA panels: head dims must be multiples of "
                  "64");
    keyCfg->warpSpecialized = true;
  }
  if (config && config.getTileScheduler() != TileScheduler::Grid) {
    // (A fixed dQ order is the deterministic mode's.)
    std::string why = whyBackwardTileSchedulerFails(config, keyNest->orderedDq);
    if (!why.empty())
      return keyNest->forall.emitError(
                 "fa-convert-tiled-attention-backward-to-gpu: ")
             << why;
    keyCfg->persistent = true;
  }
  if (keyNest->orderedDq && !keyCfg->warpSpecialized)
    return keyNest->keyLoop.emitError(
        "fa-convert-tiled-attention-backward-to-gpu: a fixed dQ order "
        "(fa.dq_accumulation = \"ordered\") needs the warp_specialized "
        "kernel's dQ warp");
  std::optional<BackwardConfig> queryCfg;
  if (queryNest) {
    // The dQ kernel splits its query rows over the warps: at most one warp
    // per 16 rows.
    int64_t rows =
        cast<RankedTensorType>(queryNest->in.step.getQuery().getType())
            .getDimSize(0);
    int64_t qWarps = std::min<int64_t>(warps, std::max<int64_t>(rows / 16, 1));
    FailureOr<BackwardConfig> c = getConfig(
        queryNest->in.step, qWarps, /*keyRows=*/false, queryNest->forall);
    if (failed(c))
      return failure();
    queryCfg = *c;
  }

  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(keyNest->forall);
  OpBuilder &b = rewriter;
  auto func = keyNest->forall->getParentOfType<FunctionOpInterface>();
  std::string prefix = func ? func.getName().str() : "fa_bwd";
  std::string module = prefix + "_kernels";
  auto cidx = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  const StepInputs &in = keyNest->in;
  if (in.packed && queryNest)
    return queryNest->forall.emitError(
        "fa-convert-tiled-attention-backward-to-gpu: packed sequences have no "
        "deterministic dQ kernel; the fast mode (dQ by atomics) has one");
  // Packed sequences: the row kernels and the workspace see [H, T] rows as a
  // batch of one.
  bool packed = in.packed;
  Value batch = packed ? Value(cidx(1))
                       : memref::DimOp::create(b, loc, in.qMem, 0).getResult();
  Value hq = memref::DimOp::create(b, loc, in.qMem, packed ? 0 : 1);
  Value nq = memref::DimOp::create(b, loc, in.qMem, packed ? 1 : 2);
  Value rowBlocks =
      arith::CeilDivUIOp::create(b, loc, nq, cidx(kRowKernelThreads));
  Value nqPad =
      arith::MulIOp::create(b, loc, rowBlocks, cidx(kRowKernelThreads));
  Type f32 = b.getF32Type();
  // (Packed: a static batch of one.)
  int64_t wsBatch = packed ? 1 : ShapedType::kDynamic;
  SmallVector<Value> wsSizes = {hq, nqPad}, accSizes = {hq, nq};
  if (!packed) {
    wsSizes.insert(wsSizes.begin(), batch);
    accSizes.insert(accSizes.begin(), batch);
  }
  auto ws3 = MemRefType::get(
      {wsBatch, ShapedType::kDynamic, ShapedType::kDynamic}, f32);
  Value delta = memref::AllocOp::create(b, loc, ws3, wsSizes);
  Value lse2 = memref::AllocOp::create(b, loc, ws3, wsSizes);
  Value dqAcc;
  if (keyNest->withDq)
    dqAcc = memref::AllocOp::create(
        b, loc,
        MemRefType::get(
            {wsBatch, ShapedType::kDynamic, ShapedType::kDynamic, keyCfg->d},
            f32),
        accSizes);

  // The fixed dQ order's semaphores, one per query block of Br rows: how
  // many key blocks have added to it (the preprocessing zeroes them).
  Value dqOrder, dkAcc, dvAcc;
  if (keyNest->orderedDq) {
    SmallVector<Value> sizes = {
        batch, hq, arith::CeilDivUIOp::create(b, loc, nq, cidx(keyCfg->br))};
    dqOrder = memref::AllocOp::create(
        b, loc,
        MemRefType::get(
            {ShapedType::kDynamic, ShapedType::kDynamic, ShapedType::kDynamic},
            b.getI32Type()),
        sizes);
  }

  // Tagged for drivers that describe kernel parameters (fa-compile).
  Value workspace[] = {delta, lse2, dqAcc, dqOrder};
  StringRef tags[] = {"delta", "lse2", "dq_accum", "dq_order"};
  for (int i = 0; i < 4; ++i)
    if (workspace[i])
      workspace[i].getDefiningOp()->setAttr("fa.workspace",
                                            b.getStringAttr(tags[i]));

  auto launchAt = [&](ArrayRef<Value> grid, int64_t threads, StringRef name) {
    OpBuilder::InsertionGuard g(b);
    return createLaunch(b, loc, grid, threads, module, (prefix + name).str());
  };
  // Preprocess.
  {
    gpu::LaunchOp launch = launchAt({rowBlocks, hq, batch}, kRowKernelThreads,
                                    "_preprocess_kernel");
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&launch.getBody().front());
    BackwardEmitter e(b, loc);
    emitPreprocess(e, launch, in.outMem, in.doMem, in.lseMem, delta, lse2,
                   dqAcc, dqOrder, keyCfg->br, keyCfg->dv, keyCfg->d,
                   keyCfg->elt, packed);
    finishLaunch(b, loc, launch, 0);
  }
  // Key blocks.
  {
    std::array<Value, 3> grid =
        getLaunchGrid(b, loc, keyNest->forall, keyNest->blockDims);
    if (keyNest->keyLoop)
      grid[0] = getValueOrCreateConstantIndexOp(
          b, loc, keyNest->keyLoop.getUpperBound());
    // The dK/dV column slices of a key block are neighbours on x.
    if (keyCfg->split > 1)
      grid[0] = arith::MulIOp::create(b, loc, grid[0], cidx(keyCfg->split));
    // A split GQA group (splitsGroups): at run time, with G >= 2 and fewer
    // blocks than 1.5 per multiprocessor, y counts query heads and the f32
    // accumulators have Nk rows (else none). Below 1.5 waves of causal
    // blocks (longest first) the longest sets the time: 2x the mean at one
    // wave, 1.3x at 1.5; from two waves they pair up (a model of the
    // schedule). At D = 128 also for G >= 8 from 32 key blocks (N = 4k),
    // where the walk over 8 heads costs L2 hits and the split's reductions
    // less: 0.97 / 0.94 / 0.92x the time at 4k / 8k / 16k (16:2, H100;
    // 1.01-1.06x below 4k, and G = 4 or D = 64 gained nothing). In index
    // arithmetic the manifest's expressions can state:
    // split = min(G - 1, 1) * min(max(3 SMs - 2 blocks, 0) + wide, 1),
    // wide = min(max(G - 7, 0), 1) * min(max(key blocks - 31, 0), 1).
    if (splitsGroups(*keyCfg, isCausalBand(b, loc, *keyCfg), packed,
                     keyNest->orderedDq) &&
        keyNest->withDq) {
      Value hkv = memref::DimOp::create(b, loc, in.kMem, 1);
      Value nk = memref::DimOp::create(b, loc, in.kMem, 2);
      Value group = arith::DivUIOp::create(b, loc, hq, hkv);
      Value one = cidx(1), zero = cidx(0);
      Value gqa = arith::MinUIOp::create(
          b, loc, arith::SubIOp::create(b, loc, group, one), one);
      Value blocks = arith::MulIOp::create(
          b, loc, arith::MulIOp::create(b, loc, grid[0], grid[1]), grid[2]);
      Value waves = arith::MulIOp::create(
          b, loc, fagpu::HostMultiprocessorCountOp::create(b, loc), cidx(3));
      Value twice = arith::MulIOp::create(b, loc, blocks, cidx(2));
      auto atLeast = [&](Value x, int64_t n) { // x >= n as 0 / 1
        return arith::MinSIOp::create(
            b, loc,
            arith::MaxSIOp::create(
                b, loc, arith::SubIOp::create(b, loc, x, cidx(n - 1)), zero),
            one);
      };
      Value few = arith::MaxSIOp::create(
          b, loc, arith::SubIOp::create(b, loc, waves, twice), zero);
      if (keyCfg->d >= 128) {
        Value wideGroup = atLeast(group, 8);
        Value manyBlocks = atLeast(grid[0], 32);
        few = arith::AddIOp::create(
            b, loc, few, arith::MulIOp::create(b, loc, wideGroup, manyBlocks));
      }
      few = arith::MinSIOp::create(b, loc, few, one);
      Value split = arith::MulIOp::create(b, loc, gqa, few);
      grid[1] = arith::MulIOp::create(
          b, loc, grid[1],
          arith::AddIOp::create(
              b, loc, one,
              arith::MulIOp::create(
                  b, loc, split, arith::SubIOp::create(b, loc, group, one))));
      Value rows = arith::MulIOp::create(b, loc, nk, split);
      for (auto [acc, cols, tag] :
           {std::make_tuple(&dkAcc, keyCfg->d, "dk_accum"),
            std::make_tuple(&dvAcc, keyCfg->dv, "dv_accum")}) {
        *acc = memref::AllocOp::create(
            b, loc,
            MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic,
                             ShapedType::kDynamic, cols},
                            f32),
            ValueRange{batch, hkv, rows});
        (*acc).getDefiningOp()->setAttr("fa.workspace", b.getStringAttr(tag));
        (*acc).getDefiningOp()->setAttr("fa.workspace_zeroed", b.getUnitAttr());
      }
    }
    // Persistent: one block per multiprocessor (on x), each walking tiles
    // of the grid above.
    if (keyCfg->persistent) {
      Value tiles = arith::MulIOp::create(
          b, loc, arith::MulIOp::create(b, loc, grid[0], grid[1]), grid[2]);
      Value sms = fagpu::HostMultiprocessorCountOp::create(b, loc);
      grid = {arith::MinUIOp::create(b, loc, tiles, sms), cidx(1), cidx(1)};
    }
    // Warp-specialized: tensor maps of the tiles the producer loads, made
    // by the runtime from these host ops.
    SmallVector<Value> maps;
    if (keyCfg->warpSpecialized) {
      auto ptr = LLVM::LLVMPointerType::get(b.getContext());
      auto map = [&](Value mem, int64_t rows) {
        maps.push_back(fagpu::HostTensorMapOp::create(
            b, loc, ptr, mem,
            TypeAttr::get(tmaDescriptor(b.getContext(), rows, keyCfg->elt))));
      };
      map(in.qMem, keyCfg->br);
      map(in.kMem, keyCfg->bc);
      map(in.vMem, keyCfg->bc);
      map(in.doMem, keyCfg->br);
      // dQ's f32 accumulator, which the dQ warp adds each warpgroup's
      // 64 x 64 dQ unit to (two 32-column boxes).
      if (keyNest->withDq)
        maps.push_back(fagpu::HostTensorMapOp::create(
            b, loc, ptr, dqAcc,
            TypeAttr::get(tmaDescriptor(b.getContext(), 64, b.getF32Type(),
                                        /*rank=*/4, kDqBoxCols))));
    }
    Value sms;
    if (rotatesDqOrder(*keyCfg, keyNest->orderedDq, packed))
      sms = fagpu::HostMultiprocessorCountOp::create(b, loc);
    gpu::LaunchOp launch = launchAt(grid, keyCfg->launchThreads(), "_kernel");
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&launch.getBody().front());
    keyCfg->bindScalars(b, loc);
    KeyBlockKernel kernel(b, loc, *keyNest, *keyCfg, lse2, delta, dqAcc,
                          dqOrder, maps, dkAcc, dvAcc, sms);
    int64_t bytes = kernel.emit(launch);
    if (failed(checkSharedMemory(keyNest->forall, config, chip,
                                 {KernelKind::BackwardKeyBlock, keyCfg->d,
                                  keyCfg->dv, keyNest->withDq},
                                 bytes)))
      return failure();
    finishLaunch(b, loc, launch, bytes);
    if (kernel.failed)
      return keyNest->forall.emitError(
                 "fa-convert-tiled-attention-backward-to-gpu: an index of the "
                 "dK/dV nest cannot be recomputed in the kernel: ")
             << kernel.failedValue;
  }
  if (keyNest->withDq) {
    gpu::LaunchOp launch = launchAt({rowBlocks, hq, batch}, kRowKernelThreads,
                                    "_dq_convert_kernel");
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&launch.getBody().front());
    BackwardEmitter e(b, loc);
    // Only the scale: no dead use may make the softcap a parameter.
    keyCfg->scale = keyCfg->scalars.buildScale(b, loc);
    emitDqConvert(e, launch, dqAcc, keyNest->dq, keyCfg->d, keyCfg->scale,
                  keyCfg->elt, packed);
    finishLaunch(b, loc, launch, 0);
  }
  if (dkAcc) {
    // dK and dV from the split group's accumulators (the key-block kernel
    // scaled dK): with no rows (no split) one block that does nothing.
    Value rows = memref::DimOp::create(b, loc, dkAcc, 2);
    Value hkv = memref::DimOp::create(b, loc, dkAcc, 1);
    Value blocks = arith::MaxUIOp::create(
        b, loc,
        arith::CeilDivUIOp::create(b, loc, rows, cidx(kRowKernelThreads)),
        cidx(1));
    gpu::LaunchOp launch = launchAt({blocks, hkv, batch}, kRowKernelThreads,
                                    "_dkv_convert_kernel");
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&launch.getBody().front());
    BackwardEmitter e(b, loc);
    Value one = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0));
    auto ifOp = scf::IfOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                              memref::DimOp::create(b, loc, dkAcc, 2), cidx(0)),
        false);
    b.setInsertionPointToStart(ifOp.thenBlock());
    emitDqConvert(e, launch, dkAcc, keyNest->dk, keyCfg->d, one, keyCfg->elt,
                  packed);
    emitDqConvert(e, launch, dvAcc, keyNest->dv, keyCfg->dv, one, keyCfg->elt,
                  packed);
    b.setInsertionPointToEnd(&launch.getBody().front());
    finishLaunch(b, loc, launch, 0);
  }
  if (!keyNest->withDq) {
    std::array<Value, 3> grid =
        getLaunchGrid(b, loc, queryNest->forall, queryNest->blockDims);
    gpu::LaunchOp launch = launchAt(grid, queryCfg->threads(), "_dq_kernel");
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&launch.getBody().front());
    queryCfg->bindScalars(b, loc);
    QueryBlockKernel kernel(b, loc, *queryNest, *queryCfg, lse2, delta);
    int64_t bytes = kernel.emit(launch);
    if (failed(checkSharedMemory(
            queryNest->forall, config, chip,
            {KernelKind::BackwardQueryBlock, queryCfg->d, queryCfg->dv},
            bytes)))
      return failure();
    finishLaunch(b, loc, launch, bytes);
    if (kernel.failed)
      return queryNest->forall.emitError(
                 "fa-convert-tiled-attention-backward-to-gpu: an index of the "
                 "dQ nest cannot be recomputed in the kernel: ")
             << kernel.failedValue;
  }
  // Rows of no sequence: zeros, when the nest starts dK and dV as zeros
  // (dQ's come from the zeroed accumulator).
  if (packed && isZeroFill(keyNest->forall.getOutputs()[keyNest->withDq]) &&
      isZeroFill(keyNest->forall.getOutputs()[keyNest->withDq + 1])) {
    Value tk = memref::DimOp::create(b, loc, keyNest->dk, 1);
    Value hkv = memref::DimOp::create(b, loc, keyNest->dk, 0);
    Value blocks =
        arith::CeilDivUIOp::create(b, loc, tk, cidx(kRowKernelThreads));
    gpu::LaunchOp launch = launchAt({blocks, hkv, cidx(1)}, kRowKernelThreads,
                                    "_zero_rows_kernel");
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&launch.getBody().front());
    BackwardEmitter e(b, loc);
    emitZeroRows(e, launch, *keyNest, keyCfg->d, keyCfg->dv, keyCfg->elt);
    finishLaunch(b, loc, launch, 0);
    if (e.failed)
      return keyNest->forall.emitError(
                 "fa-convert-tiled-attention-backward-to-gpu: the sequences' "
                 "key rows cannot be recomputed in a kernel: ")
             << e.failedValue;
  }
  for (Value ws : {delta, lse2, dqAcc, dqOrder, dkAcc, dvAcc})
    if (ws)
      memref::DeallocOp::create(b, loc, ws);

  for (Operation *store : keyNest->stores)
    rewriter.eraseOp(store);
  rewriter.eraseOp(keyNest->forall);
  if (queryNest) {
    for (Operation *store : queryNest->stores)
      rewriter.eraseOp(store);
    rewriter.eraseOp(queryNest->forall);
  }
  if (deltaOp->use_empty())
    rewriter.eraseOp(deltaOp);
  return success();
}

/// fa-tile-attention-backward decides a mask_mod per block: `scf.if %maySee
/// { scf.if %mayHide { step } else { step without the mask_mod } } else {
/// accumulators }`. The kernels run the step with the mask_mod on every
/// block (exact for any block: one it hides whole leaves the accumulators
/// as they are), so the nest becomes that step.
static void collapseMaskModVerdicts(RewriterBase &rewriter, Operation *root) {
  SmallVector<AttentionBackwardStepOp> masked;
  root->walk([&](AttentionBackwardStepOp step) {
    if (step.hasMaskMod() && isa<scf::IfOp>(step->getParentOp()))
      masked.push_back(step);
  });
  for (AttentionBackwardStepOp step : masked) {
    // The outermost scf.if of the nest that yields the step's results.
    Operation *top = step;
    while (auto ifOp = dyn_cast<scf::IfOp>(top->getParentOp())) {
      auto yield = cast<scf::YieldOp>(top->getBlock()->getTerminator());
      if (yield.getOperands() != ValueRange(top->getResults()) ||
          ifOp.getNumResults() != top->getNumResults())
        break;
      top = ifOp;
    }
    if (top == step)
      continue;
    rewriter.setInsertionPoint(top);
    Operation *copy = rewriter.clone(*step);
    rewriter.replaceOp(top, copy->getResults());
  }
}

namespace {

struct FAConvertTiledAttentionBackwardToGPUPass final
    : fa::impl::FAConvertTiledAttentionBackwardToGPUBase<
          FAConvertTiledAttentionBackwardToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    collapseMaskModVerdicts(rewriter, getOperation());
    // Group the steps by the delta they read: one group per backward op.
    llvm::MapVector<Operation *, SmallVector<AttentionBackwardStepOp>> groups;
    bool ok = true;
    getOperation()->walk([&](AttentionBackwardStepOp step) {
      FailureOr<RowSlice> slice = traceRowSlice(step.getDelta());
      auto generic = succeeded(slice)
                         ? slice->source.getDefiningOp<linalg::GenericOp>()
                         : linalg::GenericOp();
      if (!generic) {
        step.emitError("fa-convert-tiled-attention-backward-to-gpu: the "
                       "step's delta must be a row slice of the delta generic");
        ok = false;
        return;
      }
      groups[generic].push_back(step);
    });
    if (!ok)
      return signalPassFailure();
    FAConvertTiledAttentionBackwardToGPUOptions options{warps, vectorAtomics,
                                                        wgmma};
    for (auto &[op, steps] : groups)
      if (failed(convertTiledAttentionBackwardToGPU(
              rewriter, cast<linalg::GenericOp>(op), steps, options)))
        return signalPassFailure();
  }
};

} // namespace
