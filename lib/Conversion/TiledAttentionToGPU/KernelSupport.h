//===- KernelSupport.h - Building blocks of the attention kernels -*- C++ -*-//
//
// What the forward and backward GPU conversions share: scalar builders, the
// shared-memory tile layout and the warp-level mma.sync m16n8k16 fragments.
// Internal to lib/Conversion/TiledAttentionToGPU.
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_CONVERSION_TILEDATTENTIONTOGPU_KERNELSUPPORT_H
#define FA_LIB_CONVERSION_TILEDATTENTIONTOGPU_KERNELSUPPORT_H

#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FA/IR/KernelResources.h"
#include "fa/Dialect/FAGPU/IR/FAGPU.h"
#include "fa/Dialect/FAPTX/IR/FAPTX.h"
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
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::fa::detail {

// (kWarpSize comes from NVGPUDialect.h.)
constexpr double kLog2e = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;
/// Elements of a 16-byte chunk (one cp.async, one ldmatrix row) of f16/bf16.
constexpr int64_t kChunk = kTileChunk;

/// The TMA tensor map type of the warp-specialized kernels' tiles: one box
/// [1, 1, rows, 64] per 64-column panel ([1, rows, 64] of a packed [H, T, D]
/// tensor: rank 3), 128-byte swizzle (the layout the wgmma descriptors
/// read), zero fill past the tensor's rows. `cols`: the box's columns when
/// not a 64-column panel (128 bytes of f32: 32).
inline nvgpu::TensorMapDescriptorType
tmaDescriptor(MLIRContext *ctx, int64_t rows, Type elt, int64_t rank = 4,
              int64_t cols = TileLayout::kPanelCols) {
  SmallVector<int64_t> shape(rank - 2, 1);
  shape.append({rows, cols});
  auto box = MemRefType::get(
      shape, elt, AffineMap(),
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
  return nvgpu::TensorMapDescriptorType::get(
      ctx, box, nvgpu::TensorMapSwizzleKind::SWIZZLE_128B,
      nvgpu::TensorMapL2PromoKind::L2PROMO_128B,
      nvgpu::TensorMapOOBKind::OOB_ZERO,
      nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
}

/// A producer / consumer channel of the warp-specialized kernels: a ring of
/// `stages` [rows, cols] tiles at byte `offset` of the dynamic shared memory
/// `smem`, each stage the tile's 64-column panels, one TMA box of
/// `tmaDescriptor(rows, elt, rank)` each; `arrivals` consumer threads
/// release an item. Returns the channel and the kernel-side tensor map of
/// the host map `host`.
inline std::pair<Value, Value>
createPanelChannel(OpBuilder &b, Location loc, Value smem, Value offset,
                   Value host, int64_t rows, int64_t cols, int64_t stages,
                   Type elt, int64_t arrivals, int64_t rank = 4) {
  MLIRContext *ctx = b.getContext();
  auto smemSpace =
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto descriptor = tmaDescriptor(ctx, rows, elt, rank);
  SmallVector<int64_t> bufferShape = {cols / TileLayout::kPanelCols};
  llvm::append_range(bufferShape, descriptor.getTensor().getShape());
  auto bufferType = MemRefType::get(bufferShape, elt, AffineMap(), smemSpace);
  SmallVector<int64_t> ringShape = {stages};
  llvm::append_range(ringShape, bufferShape);
  auto ringType = MemRefType::get(ringShape, elt, AffineMap(), smemSpace);
  Value ring =
      memref::ViewOp::create(b, loc, ringType, smem, offset, ValueRange{});
  Value map = faptx::TensorMapParamOp::create(b, loc, descriptor, host);
  Value channel = fagpu::ChannelCreateOp::create(
      b, loc, fagpu::ChannelType::get(ctx, stages, bufferType), ring,
      b.getI64IntegerAttr(arrivals));
  return {channel, map};
}

/// The alignment a vector access of global memory may claim: the kernels
/// take 16-byte aligned tensors whose rows are multiples of 16 bytes
/// (python/flashmlir/_validate.py checks them) and access vectors at column
/// multiples of their length, so an access of `type` lies at a multiple of
/// its size, up to 16 bytes. Without it, LLVM assumes the element's
/// alignment and NVPTX splits the access into scalar ones.
inline IntegerAttr globalVectorAlignment(OpBuilder &b, VectorType type) {
  int64_t bytes = type.getNumElements() * type.getElementTypeBitWidth() / 8;
  return b.getI64IntegerAttr(std::min<int64_t>(16, bytes));
}

/// vector.load / vector.store of global memory with that alignment.
inline Value loadGlobalVector(OpBuilder &b, Location loc, VectorType type,
                              Value memref, ValueRange indices) {
  return vector::LoadOp::create(b, loc, type, memref, indices,
                                /*nontemporal=*/false,
                                globalVectorAlignment(b, type));
}
inline void storeGlobalVector(OpBuilder &b, Location loc, Value value,
                              Value memref, ValueRange indices) {
  vector::StoreOp::create(
      b, loc, value, memref, indices,
      /*nontemporal=*/false,
      globalVectorAlignment(b, cast<VectorType>(value.getType())));
}

/// The producer warpgroup's registers (setmaxnreg's minimum).
constexpr int64_t kMinProducerRegs = 24;

/// The registers per thread a warpgroup of a block of `launchThreads` holds
/// times 128: the launch gives each thread 64K / threads registers, rounded
/// down to 8 (168 at 384 threads), which setmaxnreg redistributes between
/// the roles (an increase past the block's allocation waits forever).
inline int64_t warpgroupRegisters(int64_t launchThreads) {
  return 65536 / launchThreads / 8 * 8 * launchThreads /
         fagpu::kWarpgroupThreads;
}

/// The kernels compute key - query differences and the window's limits in
/// i32: a window bound is saturated here, far above any sequence they take
/// (kMaxKernelSequenceLength), so that `off + right - d0` cannot wrap (a
/// bound of 2^31 - 1 would hide every key).
inline int64_t saturatedWindowBound(int64_t bound) {
  return std::min<int64_t>(bound, 2 * kMaxKernelSequenceLength);
}

/// A run-time window side (a mask parameter: a negative value already
/// unbounded) as an i32 kernel value, saturated as
/// saturatedWindowBound by one min; built once at a kernel's start.
inline Value buildKernelWindowBound(OpBuilder &b, Location loc,
                                    Value indexBound) {
  Value sat = arith::MinSIOp::create(
      b, loc, indexBound,
      arith::ConstantIndexOp::create(b, loc, 2 * kMaxKernelSequenceLength));
  return arith::IndexCastOp::create(b, loc, b.getI32Type(), sat);
}

/// A mask as text, for diagnostics.
inline std::string maskText(MaskAttrInterface mask) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << mask;
  return text;
}

/// A band mask (MaskAttrInterface::getBand) as the kernels compare it, in
/// i32: key - query differences against the widths, each a saturated
/// constant or a run-time value.
struct KernelMask {
  MaskBand band; // no side bounded: no mask (a key tail at most)
  /// The run-time widths (i32, saturated), else null.
  Value left, right;

  /// Builds the mask's parameters and run-time widths at the builder's
  /// point: a kernel's start, where their first uses put the run-time sizes
  /// among the kernel's parameters. A null mask hides nothing.
  static KernelMask build(OpBuilder &b, Location loc, MaskAttrInterface mask,
                          ValueRange operands) {
    KernelMask km;
    if (!mask)
      return km;
    SmallVector<Value> params = mask.buildParameters(b, loc, operands);
    km.band = *mask.getBand(params);
    if (km.band.left.value)
      km.left = buildKernelWindowBound(b, loc, km.band.left.value);
    if (km.band.right.value)
      km.right = buildKernelWindowBound(b, loc, km.band.right.value);
    return km;
  }

  bool hasLeft() const { return band.left.isBounded(); }
  bool hasRight() const { return band.right.isBounded(); }
  /// The i32 width of a bounded side at the builder's point.
  Value leftWidth(OpBuilder &b, Location loc) const {
    return width(b, loc, band.left, left);
  }
  Value rightWidth(OpBuilder &b, Location loc) const {
    return width(b, loc, band.right, right);
  }

private:
  static Value width(OpBuilder &b, Location loc, const MaskWidth &w,
                     Value runtime) {
    if (w.constant)
      return arith::ConstantIntOp::create(b, loc, b.getI32Type(),
                                          saturatedWindowBound(*w.constant));
    return runtime;
  }
};

/// A tile in shared memory: its layout (TileLayout, the resource model's
/// definition) and a flat 1-d memref view of it (element index
/// row * storedCols() + col, panel by panel): every address is then one
/// per-lane register plus a constant.
struct SmemTile : TileLayout {
  Value view;

  static SmemTile layout(int64_t rows, int64_t cols, bool swizzle,
                         bool panels) {
    SmemTile t;
    static_cast<TileLayout &>(t) = TileLayout::get(rows, cols, swizzle, panels);
    return t;
  }
  int64_t bytes(int64_t eltBytes) const { return elements() * eltBytes; }
};

/// Scalar builders at one location, shared by the kernel emitters.
class KernelBuilder {
public:
  KernelBuilder(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value i32(int64_t v) {
    return arith::ConstantIntOp::create(b, loc, b.getI32Type(), v);
  }
  Value f32(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value divu(Value x, int64_t y) {
    return arith::DivUIOp::create(b, loc, x, idx(y));
  }
  Value remu(Value x, int64_t y) {
    return arith::RemUIOp::create(b, loc, x, idx(y));
  }
  Value divu(Value x, Value y) { return arith::DivUIOp::create(b, loc, x, y); }
  Value remu(Value x, Value y) { return arith::RemUIOp::create(b, loc, x, y); }
  /// x / y and x % y of index values below 2^31 (loop counters), in i32: a
  /// 64-bit division is a call to a slow subroutine in SASS.
  std::pair<Value, Value> divRemU32(Value x, Value y) {
    Value x32 = toI32(x), y32 = toI32(y);
    Value q = arith::DivUIOp::create(b, loc, x32, y32);
    Value r = arith::SubIOp::create(b, loc, x32,
                                    arith::MulIOp::create(b, loc, q, y32));
    auto index = [&](Value v) {
      return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), v)
          .getResult();
    };
    return {index(q), index(r)};
  }
  Value slt(Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, x, y);
  }
  Value toI32(Value x) {
    return arith::IndexCastOp::create(b, loc, b.getI32Type(), x);
  }
  // Shared-memory element offsets: i32 (one register each; they stay far
  // below 2^31), nsw so that constant terms fold into the address.
  Value addNsw(Value x, Value y) {
    auto op = arith::AddIOp::create(b, loc, x, y);
    op.setOverflowFlags(arith::IntegerOverflowFlags::nsw);
    return op;
  }
  Value mulNsw(Value x, Value y) {
    auto op = arith::MulIOp::create(b, loc, x, y);
    op.setOverflowFlags(arith::IntegerOverflowFlags::nsw);
    return op;
  }
  Value smemIndex(Value off32) {
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), off32);
  }

  /// cp.async groups: commit the copies issued since the last commit; wait
  /// until at most `pending` committed groups are in flight. (The NVVM ops:
  /// nvgpu's token-carrying forms print a commit of no tokens in a form that
  /// does not parse back.)
  void commitCopies() { NVVM::CpAsyncCommitGroupOp::create(b, loc); }
  void waitCopies(int64_t pending) {
    NVVM::CpAsyncWaitGroupOp::create(b, loc, pending);
  }

  /// Deals `total` items to `workers` workers: worker `id` takes items id,
  /// id + workers, ...; `body(item)` is emitted once per round, the last,
  /// partial round under `item < total`.
  void forEachDealt(Value id, int64_t workers, int64_t total,
                    llvm::function_ref<void(Value)> body) {
    for (int64_t i = 0, e = llvm::divideCeil(total, workers); i < e; ++i) {
      Value item = add(id, idx(i * workers));
      OpBuilder::InsertionGuard guard(b);
      if ((i + 1) * workers > total) {
        auto ifOp = scf::IfOp::create(b, loc, slt(item, idx(total)), false);
        b.setInsertionPointToStart(ifOp.thenBlock());
      }
      body(item);
    }
  }

  OpBuilder &b;
  Location loc;
};

/// KernelBuilder that also recomputes, inside a kernel, the index values a
/// tiled loop nest computes (loop bounds, tile offsets, mask operands): the
/// conversions clone the nest's own arithmetic instead of re-deriving it.
class NestCloner : public KernelBuilder {
public:
  using KernelBuilder::KernelBuilder;

  /// The kernel-side value of an index of the nest, with `mapping` holding
  /// the kernel values of the nest's induction variables. Pure index
  /// arithmetic is cloned; `tensor.dim` of a to_tensor becomes `memref.dim`,
  /// `tensor.extract` of one `memref.load`.
  /// Anything else records the failure (`failed`, `failedValue`) and gives a
  /// placeholder.
  Value clone(OpFoldResult ofr, IRMapping &mapping) {
    if (auto attr = dyn_cast<Attribute>(ofr))
      return idx(cast<IntegerAttr>(attr).getInt());
    Value v = cast<Value>(ofr);
    if (Value mapped = mapping.lookupOrNull(v))
      return mapped;
    Operation *def = v.getDefiningOp();
    // Values from outside the nest (the memrefs) are captured; an unmapped
    // induction variable of the nest cannot be.
    if (!def)
      return nest && nest->isAncestor(v.getParentBlock()->getParentOp())
                 ? fail(v)
                 : v;
    if (auto dim = dyn_cast<tensor::DimOp>(def)) {
      auto toTensor =
          dim.getSource().getDefiningOp<bufferization::ToTensorOp>();
      if (!toTensor)
        return fail(v);
      Value res = memref::DimOp::create(b, loc, toTensor.getBuffer(),
                                        clone(dim.getIndex(), mapping));
      mapping.map(v, res);
      return res;
    }
    // An element of a memref-backed tensor (the packed forms' sequence
    // offsets, a page table): a load of the memref in the kernel.
    if (auto extract = dyn_cast<tensor::ExtractOp>(def)) {
      auto toTensor =
          extract.getTensor().getDefiningOp<bufferization::ToTensorOp>();
      if (!toTensor)
        return fail(v);
      SmallVector<Value> indices;
      for (Value index : extract.getIndices())
        indices.push_back(clone(index, mapping));
      Value res = memref::LoadOp::create(b, loc, toTensor.getBuffer(), indices);
      mapping.map(v, res);
      return res;
    }
    // The launch device's SM count (fa-split-kv's run-time split count):
    // a host value, passed in.
    if (isa<fagpu::HostMultiprocessorCountOp>(def))
      return v;
    // A loop of index arithmetic (fa-specialize-masks's scan of a
    // mask_mod's block verdicts): the values it reads from the nest first,
    // then the loop whole.
    if (auto loop = dyn_cast<scf::ForOp>(def)) {
      if (!isScalarLoop(loop))
        return fail(v);
      loop.walk([&](Operation *op) {
        for (Value operand : op->getOperands())
          if (!loop->isAncestor(operand.getParentRegion()->getParentOp()))
            (void)clone(operand, mapping);
      });
      Operation *copy = b.clone(*loop, mapping);
      return copy->getResult(cast<OpResult>(v).getResultNumber());
    }
    if (def->getNumRegions() != 0 || !isMemoryEffectFree(def))
      return fail(v);
    for (Value operand : def->getOperands())
      (void)clone(operand, mapping);
    Operation *copy = b.clone(*def, mapping);
    return copy->getResult(cast<OpResult>(v).getResultNumber());
  }

  /// Whether `loop` computes only index and i1 values from values defined
  /// above it (with ops free of memory effects): a loop `clone` copies.
  static bool isScalarLoop(scf::ForOp loop) {
    for (Type t : loop.getResultTypes())
      if (!t.isIndex() && !t.isInteger(1))
        return false;
    WalkResult r = loop.getBody()->walk([&](Operation *op) {
      if (op->getNumRegions() != 0 || !isMemoryEffectFree(op))
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    return !r.wasInterrupted();
  }

  /// The loop nest being converted.
  Operation *nest = nullptr;
  bool failed = false;
  Value failedValue;

private:
  Value fail(Value v) {
    if (!failed)
      failedValue = v;
    failed = true;
    return idx(0);
  }
};

/// Inlines a modifier region (score_mod or mask_mod of a tile step) at
/// score elements of a thread's fragments. Each op is cloned once per class
/// of the positions it depends on: ops of b, h and the captures once (per
/// inliner), those of q_idx only once per row, those of kv_idx only once per
/// column, the rest per element; a row's or column's position itself is
/// made at its first use (`rowOf` / `colOf`), so that few stay live. Index
/// arithmetic runs in i32 (positions, batch and head are below 2^31, as in
/// FlexAttention's kernels); a capture's `tensor.extract` becomes a load of
/// its memref, `tensor.dim` a `memref.dim`. One inliner serves one
/// straight-line stretch of code (its clones dominate only that).
class ModifierInliner {
public:
  /// Where a thread's rows and columns are: row `rowKey` is `rowBase +
  /// rowOffset(rowKey)`, column `colKey` is `colBase + colOffset(colKey)`
  /// (i32; before the clamp to the sequence that rowOf / colOf apply for
  /// reading captures). With it, a value of the region that is an affine
  /// function of kv_idx - q_idx (j - i, i + w - j, ...) is made from the
  /// one difference colBase - rowBase plus a constant per element, and a
  /// comparison of such values is one compare of that difference against
  /// a constant (the built-in mask's d0 form): no per-column positions
  /// held in registers. Padding rows and keys get unclamped positions
  /// there; their results are discarded or masked.
  struct Positions {
    Value rowBase, colBase;
    std::function<int64_t(int64_t)> rowOffset, colOffset;
  };

  /// `region` takes (score if `score`), b, h, q_idx, kv_idx and the captures,
  /// whose kernel memrefs are `captures`; `batch` and `head` are i32.
  ModifierInliner(OpBuilder &b, Location loc, Region &region, bool score,
                  ValueRange captures, Value batch, Value head,
                  std::function<Value(int64_t)> rowOf,
                  std::function<Value(int64_t)> colOf,
                  std::optional<Positions> positions = std::nullopt)
      : b(b), loc(loc), body(region.front()), score(score),
        rowOf(std::move(rowOf)), colOf(std::move(colOf)),
        positions(std::move(positions)) {
    unsigned first = score ? 1 : 0;
    invariant.map(body.getArgument(first), batch);
    invariant.map(body.getArgument(first + 1), head);
    for (auto [arg, memref] :
         llvm::zip_equal(body.getArguments().drop_front(first + 4), captures))
      memrefs[arg] = memref;
    if (score)
      classes[body.getArgument(0)] = kScore;
    classes[body.getArgument(first + 2)] = kRow;
    classes[body.getArgument(first + 3)] = kCol;
    for (Operation &op : body.without_terminator()) {
      unsigned c = 0;
      for (Value operand : op.getOperands())
        c |= classes.lookup(operand);
      for (Value result : op.getResults())
        classes[result] = c;
    }
    if (this->positions)
      findAffine(body.getArgument(first + 2), body.getArgument(first + 3));
  }

  /// Whether the kernels inline every op of `region` (arith and math ops,
  /// and reads of the captures); else the first op they do not.
  static Operation *findUnsupported(Region &region) {
    Block &body = region.front();
    for (Operation &op : body.without_terminator()) {
      if (isa<tensor::ExtractOp, tensor::DimOp>(op)) {
        Value source = op.getOperand(0);
        auto arg = dyn_cast<BlockArgument>(source);
        if (!arg || arg.getOwner() != &body)
          return &op;
        continue;
      }
      if (op.getNumRegions() != 0 ||
          !isa<arith::ArithDialect, math::MathDialect>(op.getDialect()))
        return &op;
    }
    return nullptr;
  }

  /// The region's value at the element of row `rowKey` and column `colKey`
  /// with score `s` (score_mod).
  Value at(Value s, int64_t rowKey, int64_t colKey) {
    unsigned first = score ? 1 : 0;
    IRMapping &rows = rowMaps[rowKey], &cols = colMaps[colKey];
    IRMapping elem;
    if (score)
      elem.map(body.getArgument(0), s);
    Value rowArg = body.getArgument(first + 2),
          colArg = body.getArgument(first + 3);
    auto lookup = [&](Value v) -> Value {
      if (v == rowArg && !rows.contains(v))
        rows.map(v, rowOf(rowKey));
      if (v == colArg && !cols.contains(v))
        cols.map(v, colOf(colKey));
      for (IRMapping *m : {&elem, &rows, &cols, &invariant})
        if (Value r = m->lookupOrNull(v))
          return r;
      return v;
    };
    Type i32 = b.getI32Type();
    auto toIndex = [&](Value v) -> Value {
      return v.getType().isIndex()
                 ? v
                 : arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
    };
    for (Operation &op : body.without_terminator()) {
      unsigned c = op.getNumResults() ? classes.lookup(op.getResult(0)) : 0;
      IRMapping &target = c == 0      ? invariant
                          : c == kRow ? rows
                          : c == kCol ? cols
                                      : elem;
      if (op.getNumResults() && target.contains(op.getResult(0)))
        continue;
      Value result;
      if (c == kElem && positions) {
        // (kv_idx - q_idx) forms: from the difference, see Positions.
        int64_t k = positions->colOffset(colKey) - positions->rowOffset(rowKey);
        if (Value v = fromDifference(op, k)) {
          target.map(op.getResult(0), v);
          continue;
        }
      }
      if (auto extract = dyn_cast<tensor::ExtractOp>(op)) {
        SmallVector<Value> indices;
        auto shape = extract.getTensor().getType().getShape();
        for (auto [d, i] : llvm::enumerate(extract.getIndices())) {
          // An index that is a function of kv_idx - q_idx (a relative
          // position's table): from the difference, clamped into the
          // dimension (only padding elements, whose results are dropped,
          // reach past it; the clamped positions' index is the same
          // elsewhere).
          Value fromDiff;
          if (positions && classes.lookup(i) == kElem &&
              !ShapedType::isDynamic(shape[d]))
            fromDiff = differenceForm(i, positions->colOffset(colKey) -
                                             positions->rowOffset(rowKey));
          if (fromDiff) {
            fromDiff = arith::MaxSIOp::create(
                b, loc, fromDiff, arith::ConstantIntOp::create(b, loc, i32, 0));
            fromDiff = arith::MinSIOp::create(
                b, loc, fromDiff,
                arith::ConstantIntOp::create(b, loc, i32, shape[d] - 1));
          }
          indices.push_back(toIndex(fromDiff ? fromDiff : lookup(i)));
        }
        result = memref::LoadOp::create(b, loc, memrefs[extract.getTensor()],
                                        indices);
      } else if (auto dim = dyn_cast<tensor::DimOp>(op)) {
        result = arith::IndexCastOp::create(
            b, loc, i32,
            memref::DimOp::create(b, loc, memrefs[dim.getSource()],
                                  toIndex(lookup(dim.getIndex()))));
      } else if (auto cst = dyn_cast<arith::ConstantOp>(op);
                 cst && cst.getType().isIndex()) {
        result = arith::ConstantIntOp::create(
            b, loc, i32, cast<IntegerAttr>(cst.getValue()).getInt());
      } else if (isa<arith::IndexCastOp, arith::IndexCastUIOp>(op)) {
        // Between i32 (for index) and the other integer type.
        Value in = lookup(op.getOperand(0));
        Type out = op.getResult(0).getType().isIndex()
                       ? i32
                       : op.getResult(0).getType();
        unsigned from = in.getType().getIntOrFloatBitWidth(),
                 to = out.getIntOrFloatBitWidth();
        bool isSigned = isa<arith::IndexCastOp>(op);
        if (from == to)
          result = in;
        else if (from > to)
          result = arith::TruncIOp::create(b, loc, out, in);
        else if (isSigned)
          result = arith::ExtSIOp::create(b, loc, out, in);
        else
          result = arith::ExtUIOp::create(b, loc, out, in);
      } else if (auto ext = isa<arith::SIToFPOp>(op)
                                ? lookup(op.getOperand(0))
                                      .getDefiningOp<arith::ExtSIOp>()
                                : arith::ExtSIOp()) {
        // sitofp(extsi(x : i32)) is sitofp(x): the narrowed index arithmetic
        // left the extension; 32-bit conversions are the cheap ones.
        result = arith::SIToFPOp::create(b, loc, op.getResult(0).getType(),
                                         ext.getIn());
      } else if (auto div = dyn_cast<arith::DivFOp>(op);
                 div && classes.lookup(div.getRhs()) != kElem &&
                 (classes.lookup(div.getRhs()) & kScore) == 0) {
        // x / y with y the same for a row, a column or everywhere: x times
        // 1 / y, the reciprocal computed once there (within 1.5 ulp of the
        // quotient; the GPU's IEEE division costs about ten instructions).
        Value rhs = lookup(div.getRhs());
        Value recip = reciprocals.lookup(rhs);
        if (!recip) {
          recip = arith::DivFOp::create(
              b, loc,
              arith::ConstantOp::create(b, loc,
                                        b.getFloatAttr(rhs.getType(), 1.0)),
              rhs);
          reciprocals[rhs] = recip;
        }
        result = arith::MulFOp::create(b, loc, lookup(div.getLhs()), recip);
      } else {
        IRMapping operands;
        for (Value operand : op.getOperands())
          operands.map(operand, lookup(operand));
        Operation *copy = b.clone(op, operands);
        for (OpResult r : copy->getResults())
          if (r.getType().isIndex())
            r.setType(i32);
        // A product feeding a sum may fuse into one fma (as ptxas does in
        // FlexAttention's kernels): only the rounding between them goes.
        if (isa<arith::AddFOp, arith::SubFOp, arith::MulFOp>(copy))
          copy->setAttr(
              cast<arith::ArithFastMathInterface>(copy).getFastMathAttrName(),
              arith::FastMathFlagsAttr::get(b.getContext(),
                                            arith::FastMathFlags::contract));
        target.map(op.getResults(), copy->getResults());
        continue;
      }
      target.map(op.getResult(0), result);
    }
    return lookup(body.getTerminator()->getOperand(0));
  }

private:
  static constexpr unsigned kScore = 1, kRow = 2, kCol = 4, kElem = kRow | kCol;

  /// An integer value of the region as ci q_idx + cj kv_idx + c; `nonneg`:
  /// known >= 0 (a position plus a constant >= 0).
  struct Affine {
    int64_t ci = 0, cj = 0, c = 0;
    bool nonneg = false;
  };

  /// The affine forms of the region's index arithmetic over q_idx and
  /// kv_idx (constants, add, sub, index casts; products by constants).
  void findAffine(Value row, Value col) {
    affine[row] = {1, 0, 0, true};
    affine[col] = {0, 1, 0, true};
    for (Operation &op : body.without_terminator()) {
      if (op.getNumResults() != 1 ||
          !op.getResult(0).getType().isSignlessIntOrIndex() ||
          op.getResult(0).getType().isInteger(1))
        continue;
      Value r = op.getResult(0);
      auto of = [&](Value v) { return affine.find(v); };
      IntegerAttr cst;
      if (matchPattern(r, m_Constant(&cst))) {
        affine[r] = {0, 0, cst.getInt(), cst.getInt() >= 0};
      } else if (isa<arith::IndexCastOp>(op) &&
                 of(op.getOperand(0)) != affine.end()) {
        affine[r] = affine[op.getOperand(0)];
      } else if (isa<arith::AddIOp, arith::SubIOp>(op) &&
                 of(op.getOperand(0)) != affine.end() &&
                 of(op.getOperand(1)) != affine.end()) {
        Affine x = affine[op.getOperand(0)], y = affine[op.getOperand(1)];
        int64_t sign = isa<arith::SubIOp>(op) ? -1 : 1;
        affine[r] = {x.ci + sign * y.ci, x.cj + sign * y.cj, x.c + sign * y.c,
                     sign > 0 && x.nonneg && y.nonneg};
      } else if (isa<arith::MulIOp>(op) &&
                 of(op.getOperand(0)) != affine.end() &&
                 of(op.getOperand(1)) != affine.end()) {
        Affine x = affine[op.getOperand(0)], y = affine[op.getOperand(1)];
        if (y.ci || y.cj)
          std::swap(x, y);
        if (y.ci || y.cj)
          continue;
        affine[r] = {x.ci * y.c, x.cj * y.c, x.c * y.c, x.nonneg && y.c >= 0};
      }
    }
    // Values that reach a capture's index keep the clamped positions (a
    // padding row or key must not read out of bounds).
    for (Operation &op : llvm::reverse(body.without_terminator())) {
      bool feeds = isa<tensor::ExtractOp, tensor::DimOp>(op) ||
                   llvm::any_of(op.getResults(),
                                [&](Value r) { return indexing.contains(r); });
      if (!feeds)
        continue;
      for (Value operand : op.getOperands())
        if (!isa<RankedTensorType>(operand.getType()))
          indexing.insert(operand);
    }
  }

  /// The difference colBase - rowBase (made at first use: the caller's
  /// element loops are straight-line code in one block).
  Value difference() {
    if (!diff)
      diff =
          arith::SubIOp::create(b, loc, positions->colBase, positions->rowBase);
    return diff;
  }

  /// `op` (of the element class) at the element whose kv_idx - q_idx is
  /// difference() + k, when it is an affine function of that difference
  /// (cj (j - i) + c, cj = +-1) or a comparison of two such; else null.
  Value fromDifference(Operation &op, int64_t k) {
    if (llvm::any_of(op.getResults(),
                     [&](Value r) { return indexing.contains(r); }))
      return Value();
    Type i32 = b.getI32Type();
    auto cst = [&](int64_t v) -> Value {
      return arith::ConstantIntOp::create(b, loc, i32, v);
    };
    auto form = [&](Value v) -> std::optional<Affine> {
      auto it = affine.find(v);
      if (it == affine.end())
        return std::nullopt;
      return it->second;
    };
    if (auto cmp = dyn_cast<arith::CmpIOp>(op)) {
      std::optional<Affine> l = form(cmp.getLhs()), r = form(cmp.getRhs());
      if (!l || !r)
        return Value();
      Affine d{l->ci - r->ci, l->cj - r->cj, l->c - r->c};
      if (d.ci != -d.cj || (d.cj != 1 && d.cj != -1))
        return Value();
      using P = arith::CmpIPredicate;
      P pred = cmp.getPredicate();
      // Unsigned compares equal the signed ones on values >= 0 only.
      bool isUnsigned =
          pred == P::ult || pred == P::ule || pred == P::ugt || pred == P::uge;
      if (isUnsigned && !(l->nonneg && r->nonneg))
        return Value();
      P s = pred == P::ult   ? P::slt
            : pred == P::ule ? P::sle
            : pred == P::ugt ? P::sgt
            : pred == P::uge ? P::sge
                             : pred;
      // lhs - rhs = cj (D + k) + c with D = difference(): compare D with a
      // constant (the predicate mirrored when cj = -1).
      if (d.cj == 1)
        return arith::CmpIOp::create(b, loc, s, difference(), cst(-(k + d.c)));
      P mirrored = s == P::slt   ? P::sgt
                   : s == P::sle ? P::sge
                   : s == P::sgt ? P::slt
                   : s == P::sge ? P::sle
                                 : s;
      return arith::CmpIOp::create(b, loc, mirrored, difference(),
                                   cst(d.c - k));
    }
    if (op.getNumResults() != 1)
      return Value();
    return differenceForm(op.getResult(0), k);
  }

  /// Integer value `v` (index or i32) of the region at the element whose
  /// kv_idx - q_idx is difference() + k, when it is cj (j - i) + c with
  /// cj = +-1; else null.
  Value differenceForm(Value v, int64_t k) {
    if (!(v.getType().isIndex() || v.getType().isInteger(32)))
      return Value();
    auto it = affine.find(v);
    if (it == affine.end())
      return Value();
    const Affine &a = it->second;
    if (a.ci != -a.cj || (a.cj != 1 && a.cj != -1))
      return Value();
    Type i32 = b.getI32Type();
    auto cst = [&](int64_t x) -> Value {
      return arith::ConstantIntOp::create(b, loc, i32, x);
    };
    // cj (D + k) + c: D + (k + c) or (c - k) - D.
    if (a.cj == 1)
      return addNsw(difference(), cst(k + a.c));
    return arith::SubIOp::create(b, loc, cst(a.c - k), difference(),
                                 arith::IntegerOverflowFlags::nsw);
  }

  Value addNsw(Value x, Value y) {
    return arith::AddIOp::create(b, loc, x, y,
                                 arith::IntegerOverflowFlags::nsw);
  }

  OpBuilder &b;
  Location loc;
  Block &body;
  bool score;
  std::function<Value(int64_t)> rowOf, colOf;
  std::optional<Positions> positions;
  llvm::DenseMap<Value, Affine> affine;
  llvm::DenseSet<Value> indexing;
  Value diff;
  llvm::DenseMap<Value, unsigned> classes;
  llvm::DenseMap<Value, Value> memrefs;
  IRMapping invariant;
  llvm::DenseMap<int64_t, IRMapping> rowMaps, colMaps;
  /// 1 / y of each divisor y made so far (see `at`).
  llvm::DenseMap<Value, Value> reciprocals;
};

/// Register fragments of one warp for mma.sync m16n8k16 (f16/bf16 in, f32
/// accumulation), in nvgpu's vector form:
///   A 16x16: vector<4x2xT>, rows a0..a3 = (r, k), (r+8, k), (r, k+8),
///            (r+8, k+8) with r = lane/4, k = 2*(lane%4)
///   B 16x8:  vector<2x2xT>, rows b0, b1 = k-rows 2*(lane%4) and +8, n = lane/4
///   C 16x8:  vector<2x2xf32>, row h = query row lane/4 + 8h, columns
///            2*(lane%4) + {0, 1}
/// Two adjacent C fragments (n = 0..7, 8..15) converted to T are the A
/// fragment of the 16x16 block they cover: P never leaves registers.
/// The Hopper (wgmma) path would provide a second flavour of this class.
class WarpFragments {
public:
  WarpFragments(OpBuilder &b, Location loc, Type elt)
      : b(b), loc(loc), elt(elt) {
    f32 = b.getF32Type();
    aType = VectorType::get({4, 2}, elt);
    bType = VectorType::get({2, 2}, elt);
    cType = VectorType::get({2, 2}, f32);
  }

  Value zeroC() {
    return arith::ConstantOp::create(b, loc, cType, b.getZeroAttr(cType));
  }

  /// x4 ldmatrix of four 8x8 matrices whose row addresses the caller
  /// computed for this lane (an element index into the flat tile `view`).
  Value ldmatrix(Value view, Value index, bool transpose) {
    return nvgpu::LdMatrixOp::create(b, loc, aType, view, ValueRange{index},
                                     transpose, /*numTiles=*/4);
  }

  /// Splits an x4 result into the B fragments of two n8 tiles.
  std::pair<Value, Value> splitB(Value x4) {
    auto pick = [&](int64_t r0) {
      Value frag =
          arith::ConstantOp::create(b, loc, bType, b.getZeroAttr(bType));
      for (int64_t i = 0; i < 2; ++i) {
        Value row =
            vector::ExtractOp::create(b, loc, x4, ArrayRef<int64_t>{r0 + i});
        frag =
            vector::InsertOp::create(b, loc, row, frag, ArrayRef<int64_t>{i});
      }
      return frag;
    };
    return {pick(0), pick(2)};
  }

  /// D = A * B + C.
  Value mma(Value a, Value bFrag, Value c) {
    if (elt.isF16())
      return nvgpu::MmaSyncOp::create(b, loc, a, bFrag, c,
                                      ArrayRef<int64_t>{16, 8, 16});
    // MLIR 22's nvgpu.mma.sync lowering has no bf16 case: emit the NVVM op on
    // packed bf16x2 registers.
    Type i32 = b.getI32Type();
    auto packed = [&](Value frag, int64_t n) {
      SmallVector<Value> regs;
      for (int64_t i = 0; i < n; ++i)
        regs.push_back(LLVM::BitcastOp::create(
            b, loc, i32,
            vector::ExtractOp::create(b, loc, frag, ArrayRef<int64_t>{i})));
      return regs;
    };
    SmallVector<Value> accs;
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t e = 0; e < 2; ++e)
        accs.push_back(element(c, h, e));
    auto resType =
        LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
    auto op = NVVM::MmaOp::create(
        b, loc, resType, packed(a, 4), packed(bFrag, 2), accs,
        ArrayRef<int64_t>{16, 8, 16}, std::nullopt, std::nullopt,
        std::array<NVVM::MMATypes, 2>{NVVM::MMATypes::bf16,
                                      NVVM::MMATypes::bf16},
        std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                       NVVM::MMALayout::col});
    SmallVector<Value> res;
    for (int64_t i = 0; i < 4; ++i)
      res.push_back(
          LLVM::ExtractValueOp::create(b, loc, op, ArrayRef<int64_t>{i}));
    return fromElements(res);
  }

  /// c[0] += a * b.first, c[1] += a * b.second: the two n8 tiles of a
  /// 16-column block (the B fragments of one x4 ldmatrix, see splitB).
  void mma16(Value a, std::pair<Value, Value> bFrags,
             MutableArrayRef<Value> c) {
    c[0] = mma(a, bFrags.first, c[0]);
    c[1] = mma(a, bFrags.second, c[1]);
  }

  /// Element (row half h, column e) of a C fragment.
  Value element(Value c, int64_t h, int64_t e) {
    return vector::ExtractOp::create(b, loc, c, ArrayRef<int64_t>{h, e});
  }

  /// A C fragment from its four elements (c0, c1, c2, c3).
  Value fromElements(ArrayRef<Value> elems) {
    Value c = zeroC();
    auto rowType = VectorType::get({2}, f32);
    for (int64_t h = 0; h < 2; ++h) {
      Value row = vector::FromElementsOp::create(
          b, loc, rowType, ValueRange{elems[2 * h], elems[2 * h + 1]});
      c = vector::InsertOp::create(b, loc, row, c, ArrayRef<int64_t>{h});
    }
    return c;
  }

  /// wgmma accumulator values (4 per 8 columns, in the C fragments'
  /// element order) as C fragments, and back.
  SmallVector<Value> fromAccumulator(ArrayRef<Value> values) {
    SmallVector<Value> out;
    for (size_t i = 0; i < values.size(); i += 4)
      out.push_back(fromElements(values.slice(i, 4)));
    return out;
  }
  SmallVector<Value> toAccumulator(ValueRange fragments) {
    SmallVector<Value> out;
    for (Value f : fragments)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t e = 0; e < 2; ++e)
          out.push_back(element(f, h, e));
    return out;
  }

  /// Multiplies row half h of `c` by scales[h].
  Value scaleRows(Value c, Value s0, Value s1) {
    auto rowType = VectorType::get({2}, f32);
    Value scales = zeroC();
    // A named array: a ValueRange over a braced list would dangle here.
    Value rowScales[2] = {s0, s1};
    for (int64_t h = 0; h < 2; ++h)
      scales = vector::InsertOp::create(
          b, loc, vector::BroadcastOp::create(b, loc, rowType, rowScales[h]),
          scales, ArrayRef<int64_t>{h});
    return arith::MulFOp::create(b, loc, c, scales);
  }

  /// Row half h of `c` in the input element type: one packed conversion.
  Value truncRow(Value c, int64_t h) {
    Value row = vector::ExtractOp::create(b, loc, c, ArrayRef<int64_t>{h});
    return arith::TruncFOp::create(b, loc, VectorType::get({2}, elt), row);
  }

  /// The A fragment of the 16x16 block covered by two adjacent C fragments.
  Value packA(Value c0, Value c1) {
    Value a = arith::ConstantOp::create(b, loc, aType, b.getZeroAttr(aType));
    int64_t i = 0;
    for (Value c : {c0, c1})
      for (int64_t h = 0; h < 2; ++h)
        a = vector::InsertOp::create(b, loc, truncRow(c, h), a,
                                     ArrayRef<int64_t>{i++});
    return a;
  }

private:
  OpBuilder &b;
  Location loc;
  Type elt, f32;
  VectorType aType, bType, cType;
};

/// Warpgroup-level MMA (wgmma.mma_async, sm_90a) for one warpgroup of 4
/// warps owning 64 rows. Accumulators are `n / 2` f32 values per thread in
/// the order of PTX's m64nNk16 D fragment, which per warp is the mma.sync
/// C layout repeated over n / 8 column tiles: value 4 j + 2 h + e is row
/// lane / 4 + 8 h, column 8 j + 2 (lane % 4) + e of the warp's 16 rows. The
/// register A fragment of a k16 step is mma.sync's A fragment (4 x b32).
class WarpgroupMma {
public:
  WarpgroupMma(OpBuilder &b, Location loc, Type elt)
      : b(b), loc(loc), elt(elt) {}

  /// The constant part of a shared-memory matrix descriptor with 128-byte
  /// swizzle: leading and stride byte offsets, layout type 1 (bits 62-63).
  /// The start address (bytes / 16, bits 0-13) is added to it.
  static uint64_t descriptorBits(int64_t leadingBytes, int64_t strideBytes) {
    return (uint64_t(leadingBytes >> 4) << 16) |
           (uint64_t(strideBytes >> 4) << 32) | (uint64_t(1) << 62);
  }

  /// The descriptor of a 128-byte swizzled tile at shared address `addr`
  /// (index; below 256 KiB).
  Value descriptor(Value addr, int64_t leadingBytes, int64_t strideBytes) {
    Type i64 = b.getI64Type();
    Value a = arith::IndexCastOp::create(b, loc, i64, addr);
    Value field = arith::ShRUIOp::create(
        b, loc, a, arith::ConstantIntOp::create(b, loc, i64, 4));
    return arith::OrIOp::create(
        b, loc, field,
        arith::ConstantIntOp::create(
            b, loc, i64, int64_t(descriptorBits(leadingBytes, strideBytes))));
  }
  /// `desc` advanced by `bytes` (a multiple of 16).
  Value advance(Value desc, int64_t bytes) {
    if (bytes == 0)
      return desc;
    return arith::AddIOp::create(
        b, loc, desc,
        arith::ConstantIntOp::create(b, loc, b.getI64Type(), bytes >> 4));
  }
  /// `desc` as a value LLVM cannot hoist: descriptor offsets derived from it
  /// inside a loop are then computed where they are used instead of living
  /// in (64-bit) registers across the loop.
  Value opaque(Value desc) { return faptx::OpaqueOp::create(b, loc, desc); }
  /// `desc` advanced by `bytes` (index, a multiple of 16).
  Value advance(Value desc, Value bytes) {
    Value units = arith::IndexCastOp::create(
        b, loc, b.getI64Type(),
        arith::DivUIOp::create(b, loc, bytes,
                               arith::ConstantIndexOp::create(b, loc, 16)));
    return arith::AddIOp::create(b, loc, desc, units);
  }

  /// Makes the async proxy see what this thread wrote to shared memory with
  /// generic-proxy stores (cp.async included) before a barrier.
  void fenceSharedForAsync() {
    NVVM::FenceProxyOp::create(
        b, loc, NVVM::ProxyKind::async_shared,
        NVVM::SharedSpaceAttr::get(b.getContext(),
                                   NVVM::SharedSpace::shared_cta));
  }
  void fence() { NVVM::WgmmaFenceAlignedOp::create(b, loc); }
  void commit() { NVVM::WgmmaGroupSyncAlignedOp::create(b, loc); }
  void wait(int64_t pending) {
    NVVM::WgmmaWaitGroupSyncOp::create(b, loc, pending);
  }

  /// D (+)= A * B with A [64, 16] and B [16, n] both in shared memory
  /// (descriptors): K-major by default (A row-major, B as [n, 16] rows);
  /// `col` A / `row` B read MN-major tiles (transposed). `acc` empty:
  /// D = A * B.
  SmallVector<Value> mmaSS(Value descA, Value descB, int64_t n,
                           ArrayRef<Value> acc,
                           NVVM::MMALayout layoutA = NVVM::MMALayout::row,
                           NVVM::MMALayout layoutB = NVVM::MMALayout::col) {
    auto structType = accType(n);
    Value inouts;
    if (acc.empty()) {
      inouts = LLVM::PoisonOp::create(b, loc, structType);
    } else {
      inouts = LLVM::PoisonOp::create(b, loc, structType);
      for (auto [i, v] : llvm::enumerate(acc))
        inouts = LLVM::InsertValueOp::create(b, loc, inouts, v,
                                             ArrayRef<int64_t>{int64_t(i)});
    }
    NVVM::WGMMATypes t =
        elt.isF16() ? NVVM::WGMMATypes::f16 : NVVM::WGMMATypes::bf16;
    auto op = NVVM::WgmmaMmaAsyncOp::create(
        b, loc, structType, inouts, descA, descB,
        NVVM::MMAShapeAttr::get(b.getContext(), 64, n, 16), t, t,
        NVVM::WGMMATypes::f32,
        acc.empty() ? NVVM::WGMMAScaleOut::zero : NVVM::WGMMAScaleOut::one,
        NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one, layoutA, layoutB,
        /*satfinite=*/NVVM::MMAIntOverflowAttr());
    SmallVector<Value> res;
    for (int64_t i = 0; i < n / 2; ++i)
      res.push_back(
          LLVM::ExtractValueOp::create(b, loc, op, ArrayRef<int64_t>{i}));
    return res;
  }

  /// D += A * B with A [64, 16] from registers (`a`: 4 x i32 per thread) and
  /// B [16, n] in shared memory, MN-major (descriptor, transposed read).
  SmallVector<Value> mmaRS(ArrayRef<Value> a, Value descB, int64_t n,
                           ArrayRef<Value> acc) {
    auto op = faptx::WgmmaMmaRSOp::create(b, loc, b.getI64IntegerAttr(n),
                                          TypeAttr::get(elt), a, descB, acc);
    return SmallVector<Value>(op.getResults());
  }

  /// Reads of wgmma results must stay after the wait, and the register
  /// operands of a chain must be ready before its wgmma.fence (else ptxas
  /// injects a warpgroup.arrive before each wgmma): route each value (f32 or
  /// i32) through an empty side-effecting asm (CUTLASS's
  /// warpgroup_fence_operand) that LLVM cannot move across those points.
  SmallVector<Value> fenceOperands(ArrayRef<Value> values) {
    SmallVector<Value> res;
    for (Value v : values)
      res.push_back(faptx::OperandFenceOp::create(b, loc, v));
    return res;
  }

  /// `v` (an index) through an operand fence: the addresses derived from it
  /// stay where they are used instead of being hoisted out of a loop and
  /// held in registers across it (or spilled).
  Value opaqueIndex(Value v) {
    Value i = arith::IndexCastOp::create(b, loc, b.getI32Type(), v);
    return arith::IndexCastOp::create(b, loc, b.getIndexType(),
                                      fenceOperands({i})[0]);
  }

private:
  LLVM::LLVMStructType accType(int64_t n) {
    SmallVector<Type> fields(n / 2, b.getF32Type());
    return LLVM::LLVMStructType::getLiteral(b.getContext(), fields);
  }

  OpBuilder &b;
  Location loc;
  Type elt;
};

} // namespace mlir::fa::detail

#endif // FA_LIB_CONVERSION_TILEDATTENTIONTOGPU_KERNELSUPPORT_H
