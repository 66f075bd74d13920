//===- TileAttention.cpp - Tile fa.attention into blocks ------------------===//
//
// Rewrites `fa.attention` into the FlashAttention loop nest:
//
//   scf.forall (b, h, qBlock) in (B, Hq, ceil(Nq / Br)) {
//     q tile [Br, D] (zero-padded at the sequence tail)
//     acc = 0, max = -inf, sum = 0
//     scf.for kStart = 0 to Nk step Bc iter_args(acc, max, sum) {
//       k, v tiles [Bc, D], [Bc, Dv] (zero-padded)
//       acc, max, sum = fa.online_attention q, k, v into acc, max, sum
//                           masked(qStart, kStart, Nq, Nk) ...
//     }
//     out, lse = fa.online_attention_finalize acc, max, sum
//     insert the first min(Br, Nq - qStart) rows of out and lse
//   } {mapping = [#gpu.block<z>, #gpu.block<y>, #gpu.block<x>]}
//
// The key loop iterates over key offsets (step Bc) rather than block numbers
// so that `fa-specialize-masks` can reason about the step's `k_start`
// directly. Every step is masked here: the mask also hides the zero-padded
// keys past Nk. Tiles are static so later passes can map them to registers.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/Transforms/Passes.h"

#include "BuilderUtils.h"
#include "MaskModBlocks.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/Utils/Utils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

#include <limits>

namespace mlir::fa {
#define GEN_PASS_DEF_FATILEATTENTION
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

/// Returns `tensor<shape x elt>` filled with `value`.
Value createFilledTensor(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                         Type elt, double value) {
  Value empty = tensor::EmptyOp::create(b, loc, shape, elt);
  Value cst =
      arith::ConstantOp::create(b, loc, elt, b.getFloatAttr(elt, value));
  return linalg::FillOp::create(b, loc, cst, empty).getResult(0);
}

/// Extracts `len` rows of a tensor, from `offsets` (rows on dimension
/// `rank - 2`, the head dim last and whole, every other size 1), as a
/// [len, D] slice and pads it with zeros to [tileRows, D].
Value extractPaddedTile(OpBuilder &b, Location loc, Value src,
                        ArrayRef<OpFoldResult> offsets, Value len,
                        int64_t tileRows) {
  auto srcType = cast<RankedTensorType>(src.getType());
  int64_t rank = srcType.getRank();
  int64_t d = srcType.getDimSize(rank - 1);
  Type elt = srcType.getElementType();
  SmallVector<OpFoldResult> sizes(rank, b.getIndexAttr(1));
  sizes[rank - 2] = getAsOpFoldResult(len);
  sizes[rank - 1] = b.getIndexAttr(d);
  SmallVector<OpFoldResult> strides(rank, b.getIndexAttr(1));
  auto sliceType = RankedTensorType::get({ShapedType::kDynamic, d}, elt);
  Value slice = tensor::ExtractSliceOp::create(b, loc, sliceType, src, offsets,
                                               sizes, strides);
  auto tileType = RankedTensorType::get({tileRows, d}, elt);
  Value zero = arith::ConstantOp::create(b, loc, elt, b.getZeroAttr(elt));
  return tensor::createPadHighOp(tileType, slice, zero, /*nofold=*/false, loc,
                                 b);
}

/// `min(tile, total - start)`: the number of valid rows of a tile.
Value tileLength(OpBuilder &b, Location loc, Value start, Value total,
                 Value tile) {
  Value rest = b.createOrFold<arith::SubIOp>(loc, total, start);
  return b.createOrFold<arith::MinSIOp>(loc, tile, rest);
}

/// The init of a result of declared type `declared` whose sizes are `sizes`
/// (from the operands): static where the operands or the declared type know
/// the size. The verifier only asks the declared result types to agree with
/// the operands, so they may be more or less static; where they are less,
/// the caller casts the loop's result to them.
Value createResultInit(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                       RankedTensorType declared) {
  SmallVector<OpFoldResult> mixed;
  for (auto [size, declaredSize] : llvm::zip_equal(sizes, declared.getShape()))
    mixed.push_back(ShapedType::isDynamic(declaredSize)
                        ? size
                        : OpFoldResult(b.getIndexAttr(declaredSize)));
  return tensor::EmptyOp::create(b, loc, mixed, declared.getElementType());
}

/// One sequence of the batch as a query block sees it.
struct Sequence {
  /// The sequence's index in the batch.
  Value index;
  /// Query and key counts of the sequence.
  Value nq, nk;
  /// Where its query and key rows start in packed tensors (varlen only).
  Value qBase, kBase;
};

/// What differs between the dense, packed (varlen) and paged forms of the
/// loop nest: where a sequence's rows live. The rest of the nest (tiles,
/// state, key loop, finalize) is one.
struct NestForm {
  /// The tensors the tiles are sliced from, and the key/value head count.
  Value q, k, v, kvHeads;
  /// Sequences (the forall's first dimension) and query heads.
  Value numSeqs, heads;
  /// Upper bound of any sequence's query count (sizes the query-block
  /// dimension).
  Value maxNq;
  /// The sizes of lse (q's without the head dim).
  SmallVector<OpFoldResult> rowSizes;
  /// The sequence `b`, computed at the top of a query block.
  std::function<Sequence(OpBuilder &, Location, Value b)> sequence;
  /// Offsets of query row `row` of a sequence, head `h`, in q (and out,
  /// with a 0 head-dim offset appended); lse takes the same without it.
  std::function<SmallVector<OpFoldResult>(OpBuilder &, Location,
                                          const Sequence &, Value h, Value row)>
      rowOffsets;
  /// The zero-padded [rows, D] tile of `src` (k or v) holding the `len`
  /// keys of a sequence from key `row` on, key/value head `kvh`.
  std::function<Value(OpBuilder &, Location, const Sequence &, Value src,
                      Value kvh, Value row, Value len, int64_t rows)>
      keyTile;
};

/// A NestForm::keyTile slicing the keys at `offsets(seq, kvh, row)` (the
/// head-dim offset included).
template <typename OffsetsFn> auto slicedKeyTile(OffsetsFn offsets) {
  return [=](OpBuilder &nb, Location nl, const Sequence &seq, Value src,
             Value kvh, Value row, Value len, int64_t rows) {
    return extractPaddedTile(nb, nl, src, offsets(nb, nl, seq, kvh, row), len,
                             rows);
  };
}

/// Builds the FlashAttention loop nest of `op` (fa.attention or one of its
/// varlen / paged forms) for `form`, and replaces the op with it.
template <typename OpT>
void buildNest(PatternRewriter &rewriter, OpT op, const NestForm &form,
               int64_t blockQ, int64_t blockKV) {
  Value q = form.q, k = form.k, v = form.v;
  KernelConfigAttr config = op.getKernelConfigAttr();
  Location loc = op.getLoc();
  RankedTensorType outType = op.getOut().getType();
  RankedTensorType lseType = op.getLse().getType();
  Type elt = outType.getElementType();
  Type f32 = rewriter.getF32Type();
  int64_t dv = op.getValueHeadDim();
  bool dense = isa<AttentionOp>(op.getOperation());

  Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
  Value br = arith::ConstantIndexOp::create(rewriter, loc, blockQ);
  Value bc = arith::ConstantIndexOp::create(rewriter, loc, blockKV);
  // Query heads per key/value head (grouped-query attention).
  Value group =
      rewriter.createOrFold<arith::DivUIOp>(loc, form.heads, form.kvHeads);
  Value numQBlocks =
      rewriter.createOrFold<arith::CeilDivUIOp>(loc, form.maxNq, br);

  // out and lse have q's sizes but the head dim (Dv is v's, static).
  SmallVector<OpFoldResult> outSizes = form.rowSizes;
  outSizes.push_back(rewriter.getIndexAttr(dv));
  Value outInit = createResultInit(rewriter, loc, outSizes, outType);
  Value lseInit = createResultInit(rewriter, loc, form.rowSizes, lseType);

  // Batch on z, heads on y, query blocks on x: the launch grid of
  // fa-convert-tiled-attention-to-gpu (x has no 65535 limit).
  auto forall = scf::ForallOp::create(
      rewriter, loc,
      getAsOpFoldResult(ValueRange{form.numSeqs, form.heads, numQBlocks}),
      ValueRange{outInit, lseInit},
      fa::detail::blockMapping(
          rewriter,
          {gpu::MappingId::DimZ, gpu::MappingId::DimY, gpu::MappingId::DimX}));
  if (config)
    forall->setAttr(kKernelConfigAttrName, config);
  Block *body = forall.getBody();
  Value b = body->getArgument(0), h = body->getArgument(1),
        qBlock = body->getArgument(2);
  Value outArg = body->getArgument(3), lseArg = body->getArgument(4);

  rewriter.setInsertionPointToStart(body);
  Sequence seq = form.sequence(rewriter, loc, b);
  Value qStart = arith::MulIOp::create(rewriter, loc, qBlock, br);
  Value qLen = tileLength(rewriter, loc, qStart, seq.nq, br);
  // Sequences shorter than the longest leave blocks without rows: they
  // store nothing and visit no key.
  Value keyEnd = seq.nk;
  if (!dense) {
    qLen = arith::MaxSIOp::create(rewriter, loc, qLen, zero);
    Value hasRows = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::sgt, qLen, zero);
    keyEnd = arith::SelectOp::create(rewriter, loc, hasRows, seq.nk, zero);
  }
  Value kvHead = rewriter.createOrFold<arith::DivUIOp>(loc, h, group);
  SmallVector<OpFoldResult> rowOffsets =
      form.rowOffsets(rewriter, loc, seq, h, qStart);
  SmallVector<OpFoldResult> qOffsets = rowOffsets;
  qOffsets.push_back(rewriter.getIndexAttr(0));
  Value qTile = extractPaddedTile(rewriter, loc, q, qOffsets, qLen, blockQ);

  // The online-softmax state: unnormalized accumulator, running row max and
  // running row sum, all f32.
  Value acc0 = createFilledTensor(rewriter, loc, {blockQ, dv}, f32, 0.0);
  Value max0 = createFilledTensor(rewriter, loc, {blockQ}, f32,
                                  -std::numeric_limits<double>::infinity());
  Value sum0 = createFilledTensor(rewriter, loc, {blockQ}, f32, 0.0);

  // Run-time key ranges (fa.attention's key_ranges): only those keys, and
  // for the mask_mod the keys it shows to every row.
  Value keyBegin = zero, fullBegin, fullEnd;
  if constexpr (std::is_same_v<OpT, AttentionOp>) {
    if (op.getKeyRanges()) {
      fa::detail::BlockRange r = fa::detail::buildBlockRange(
          rewriter, loc, op.getKeyRanges(), *op.getKeyRangeRows(), seq.index, h,
          qStart, qLen, blockQ, blockKV, seq.nk);
      keyBegin = r.begin;
      keyEnd = r.end;
      if (op.hasMaskMod()) {
        fullBegin = r.fullBegin;
        fullEnd = r.fullEnd;
      }
    }
  }

  auto loop = scf::ForOp::create(
      rewriter, loc, keyBegin, keyEnd, bc, ValueRange{acc0, max0, sum0},
      [&](OpBuilder &nb, Location nloc, Value kStart, ValueRange state) {
        Value kLen = tileLength(nb, nloc, kStart, seq.nk, bc);
        Value kTile =
            form.keyTile(nb, nloc, seq, k, kvHead, kStart, kLen, blockKV);
        Value vTile =
            form.keyTile(nb, nloc, seq, v, kvHead, kStart, kLen, blockKV);
        // Modifiers (fa.attention only): the regions, with the tile's batch
        // and query head; the step applies them at global positions.
        Value batchIndex, headIndex;
        ValueRange captures;
        if constexpr (std::is_same_v<OpT, AttentionOp>) {
          if (op.hasModifiers()) {
            batchIndex = seq.index;
            headIndex = h;
            captures = op.getCaptures();
          }
        }
        auto step = OnlineAttentionOp::create(
            nb, nloc, state[0].getType(), state[1].getType(),
            state[2].getType(), qTile, kTile, vTile, state[0], state[1],
            state[2], qStart, kStart, seq.nq, seq.nk, batchIndex, headIndex,
            fullBegin, fullEnd, op.getDynamicSoftcap(), op.getDynamicScale(),
            op.getMaskOperands(), captures, op.getStaticScale(),
            op.getMaskAttr(), op.getSoftcapAttr(), /*exp2=*/nullptr);
        if constexpr (std::is_same_v<OpT, AttentionOp>) {
          IRMapping none;
          op.getScoreMod().cloneInto(&step.getScoreMod(), none);
          op.getMaskMod().cloneInto(&step.getMaskMod(), none);
        }
        scf::YieldOp::create(nb, nloc, step.getResults());
      });

  auto tileOutType = RankedTensorType::get({blockQ, dv}, elt);
  auto finalize = OnlineAttentionFinalizeOp::create(
      rewriter, loc, tileOutType, max0.getType(), loop.getResult(0),
      loop.getResult(1), loop.getResult(2), /*exp2=*/nullptr);

  // Keep the valid rows of the tile.
  SmallVector<OpFoldResult> one2(2, rewriter.getIndexAttr(1));
  Value outRows = tensor::ExtractSliceOp::create(
      rewriter, loc, RankedTensorType::get({ShapedType::kDynamic, dv}, elt),
      finalize.getOut(),
      ArrayRef<OpFoldResult>{rewriter.getIndexAttr(0),
                             rewriter.getIndexAttr(0)},
      ArrayRef<OpFoldResult>{getAsOpFoldResult(qLen),
                             rewriter.getIndexAttr(dv)},
      one2);
  Value lseRows = tensor::ExtractSliceOp::create(
      rewriter, loc, RankedTensorType::get({ShapedType::kDynamic}, f32),
      finalize.getLse(), ArrayRef<OpFoldResult>{rewriter.getIndexAttr(0)},
      ArrayRef<OpFoldResult>{getAsOpFoldResult(qLen)},
      ArrayRef<OpFoldResult>{rewriter.getIndexAttr(1)});

  rewriter.setInsertionPointToStart(forall.getTerminator().getBody());
  OpFoldResult c1 = rewriter.getIndexAttr(1);
  SmallVector<OpFoldResult> lseSizes(rowOffsets.size(), c1);
  lseSizes.back() = getAsOpFoldResult(qLen);
  SmallVector<OpFoldResult> outSizes2 = lseSizes;
  outSizes2.push_back(rewriter.getIndexAttr(dv));
  tensor::ParallelInsertSliceOp::create(
      rewriter, loc, outRows, outArg, qOffsets, outSizes2,
      SmallVector<OpFoldResult>(outSizes2.size(), c1));
  tensor::ParallelInsertSliceOp::create(
      rewriter, loc, lseRows, lseArg, rowOffsets, lseSizes,
      SmallVector<OpFoldResult>(lseSizes.size(), c1));

  rewriter.setInsertionPointAfter(forall);
  SmallVector<Value> results;
  Type declaredTypes[] = {outType, lseType};
  for (auto [result, type] :
       llvm::zip_equal(forall.getResults(), declaredTypes)) {
    Value declared = result;
    if (declared.getType() != type)
      declared = tensor::CastOp::create(rewriter, loc, type, result);
    results.push_back(declared);
  }
  rewriter.replaceOp(op, results);
}

/// The op's kernel configuration, when it has one, decides the tiles (over
/// the pass options) and goes on to the loop nest for the GPU conversion.
template <typename OpT>
std::pair<int64_t, int64_t> blockSizes(OpT op, int64_t blockQ,
                                       int64_t blockKV) {
  if (KernelConfigAttr config = op.getKernelConfigAttr())
    return {config.getBlockQ(), config.getBlockKV()};
  return {blockQ, blockKV};
}

Value dimOf(OpBuilder &b, Location loc, Value t, int64_t i) {
  return b.createOrFold<tensor::DimOp>(loc, t, i);
}

/// Rows of batch b at `row` of head h, in [B, H, N, ...] tensors.
SmallVector<OpFoldResult> batchRowOffsets(OpBuilder &, Location,
                                          const Sequence &seq, Value h,
                                          Value row) {
  return getAsOpFoldResult(ValueRange{seq.index, h, row});
}

/// fa.attention: one sequence per batch, all of the same lengths.
NestForm nestForm(AttentionOp op, OpBuilder &b) {
  Location loc = op.getLoc();
  NestForm form;
  form.q = op.getQuery();
  form.k = op.getKey();
  form.v = op.getValue();
  form.kvHeads = dimOf(b, loc, form.k, 1);
  Value nq = dimOf(b, loc, form.q, 2), nk = dimOf(b, loc, form.k, 2);
  form.numSeqs = dimOf(b, loc, form.q, 0);
  form.heads = dimOf(b, loc, form.q, 1);
  form.maxNq = nq;
  form.rowSizes = getAsOpFoldResult(ValueRange{form.numSeqs, form.heads, nq});
  form.sequence = [=](OpBuilder &, Location, Value bi) {
    return Sequence{bi, nq, nk, Value(), Value()};
  };
  form.rowOffsets = batchRowOffsets;
  form.keyTile = slicedKeyTile(
      [](OpBuilder &nb, Location, const Sequence &seq, Value kvh, Value row) {
        SmallVector<OpFoldResult> offsets =
            getAsOpFoldResult(ValueRange{seq.index, kvh, row});
        offsets.push_back(nb.getIndexAttr(0));
        return offsets;
      });
  return form;
}

/// fa.attention_varlen: sequence b's rows start at cu_seqlens[b] of the
/// packed [H, T, D] tensors; the forall runs over the sequences and
/// ceil(max_seqlen_q / Br) query blocks.
NestForm nestForm(AttentionVarlenOp op, OpBuilder &b) {
  using fa::detail::extractIndex;
  Location loc = op.getLoc();
  NestForm form;
  form.q = op.getQuery();
  form.k = op.getKey();
  form.v = op.getValue();
  form.kvHeads = dimOf(b, loc, form.k, 0);
  Value cuQ = op.getCuSeqlensQ(), cuK = op.getCuSeqlensK();
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  form.numSeqs = arith::SubIOp::create(b, loc, dimOf(b, loc, cuQ, 0), one);
  form.heads = dimOf(b, loc, form.q, 0);
  form.maxNq = op.getMaxSeqlenQ();
  form.rowSizes =
      getAsOpFoldResult(ValueRange{form.heads, dimOf(b, loc, form.q, 1)});
  form.sequence = [=](OpBuilder &nb, Location nl, Value bi) {
    Value next = arith::AddIOp::create(nb, nl, bi, one);
    Value qBase = extractIndex(nb, nl, cuQ, bi);
    Value kBase = extractIndex(nb, nl, cuK, bi);
    Value nq =
        arith::SubIOp::create(nb, nl, extractIndex(nb, nl, cuQ, next), qBase);
    Value nk =
        arith::SubIOp::create(nb, nl, extractIndex(nb, nl, cuK, next), kBase);
    return Sequence{bi, nq, nk, qBase, kBase};
  };
  form.rowOffsets = [](OpBuilder &nb, Location nl, const Sequence &seq, Value h,
                       Value row) {
    Value r = arith::AddIOp::create(nb, nl, seq.qBase, row);
    return getAsOpFoldResult(ValueRange{h, r});
  };
  form.keyTile = slicedKeyTile([](OpBuilder &nb, Location nl,
                                  const Sequence &seq, Value kvh, Value row) {
    Value r = arith::AddIOp::create(nb, nl, seq.kBase, row);
    SmallVector<OpFoldResult> offsets = getAsOpFoldResult(ValueRange{kvh, r});
    offsets.push_back(nb.getIndexAttr(0));
    return offsets;
  });
  return form;
}

/// fa.attention_paged: key block [k0, k0 + Bc) of batch b is a
/// fa.paged_key_block of the pools (it may span pages).
NestForm nestForm(AttentionPagedOp op, OpBuilder &b) {
  using fa::detail::extractIndex;
  Location loc = op.getLoc();
  NestForm form;
  form.q = op.getQuery();
  form.k = op.getKeyPages();
  form.v = op.getValuePages();
  form.kvHeads = dimOf(b, loc, form.k, 1);
  Value table = op.getPageTable(), lens = op.getCacheSeqlens();
  Value nq = dimOf(b, loc, form.q, 2);
  form.numSeqs = dimOf(b, loc, form.q, 0);
  form.heads = dimOf(b, loc, form.q, 1);
  form.maxNq = nq;
  form.rowSizes = getAsOpFoldResult(ValueRange{form.numSeqs, form.heads, nq});
  form.sequence = [=](OpBuilder &nb, Location nl, Value bi) {
    return Sequence{bi, nq, extractIndex(nb, nl, lens, bi), Value(), Value()};
  };
  form.rowOffsets = batchRowOffsets;
  form.keyTile = [=](OpBuilder &nb, Location nl, const Sequence &seq,
                     Value pages, Value kvh, Value row, Value, int64_t rows) {
    auto pagesType = cast<RankedTensorType>(pages.getType());
    auto tileType = RankedTensorType::get({rows, pagesType.getDimSize(3)},
                                          pagesType.getElementType());
    return PagedKeyBlockOp::create(nb, nl, tileType, pages, table, seq.index,
                                   kvh, row, seq.nk)
        .getResult();
  };
  return form;
}

/// Tiles one of the attention ops with its NestForm.
template <typename OpT>
struct TileAttentionPattern final : OpRewritePattern<OpT> {
  TileAttentionPattern(MLIRContext *ctx, int64_t blockQ, int64_t blockKV)
      : OpRewritePattern<OpT>(ctx), blockQ(blockQ), blockKV(blockKV) {}

  LogicalResult matchAndRewrite(OpT op,
                                PatternRewriter &rewriter) const override {
    auto [bq, bkv] = blockSizes(op, blockQ, blockKV);
    buildNest(rewriter, op, nestForm(op, rewriter), bq, bkv);
    return success();
  }

  int64_t blockQ, blockKV;
};

struct FATileAttentionPass final
    : fa::impl::FATileAttentionBase<FATileAttentionPass> {
  using Base::Base;

  void runOnOperation() override {
    Operation *root = getOperation();
    // Block sizes must fill whole tensor-core fragments (16 rows/columns) and
    // keep a tile's state within what a thread block can hold.
    for (auto [name, size] :
         {std::pair<StringRef, int64_t>{"block-q", blockQ},
          std::pair<StringRef, int64_t>{"block-kv", blockKV}}) {
      if (size < 16 || size > 256 || size % 16 != 0) {
        root->emitError() << "fa-tile-attention: " << name << " must be a "
                          << "multiple of 16 in [16, 256], got " << size;
        return signalPassFailure();
      }
    }
    // key_ranges are read per block, unrolled over the row groups it spans.
    WalkResult ranges = root->walk([&](AttentionOp op) {
      if (!op.getKeyRanges())
        return WalkResult::advance();
      int64_t rows = *op.getKeyRangeRows();
      int64_t bq = blockSizes(op, blockQ, blockKV).first;
      if (fa::detail::rangeGroupsPerBlock(bq, rows) <=
          fa::detail::kMaxRangeGroups)
        return WalkResult::advance();
      op.emitError() << "fa-tile-attention: key_ranges rows " << rows
                     << " split a block of " << bq
                     << " query rows into more than "
                     << fa::detail::kMaxRangeGroups << " groups";
      return WalkResult::interrupt();
    });
    if (ranges.wasInterrupted())
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    patterns.add<TileAttentionPattern<AttentionOp>,
                 TileAttentionPattern<AttentionVarlenOp>,
                 TileAttentionPattern<AttentionPagedOp>>(&getContext(), blockQ,
                                                         blockKV);
    // One walk, no folding: only the attention ops change.
    walkAndApplyPatterns(root, std::move(patterns));
  }
};

} // namespace
