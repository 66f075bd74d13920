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

/// Extracts rows [start, start + len) of head `head` in batch `batch` of a
/// [B, H, N, D] tensor as a [len, D] slice and pads it with zeros to
/// [tileRows, D].
Value extractPaddedTile(OpBuilder &b, Location loc, Value src, Value batch,
                        Value head, Value start, Value len, int64_t tileRows) {
  auto srcType = cast<RankedTensorType>(src.getType());
  int64_t d = srcType.getDimSize(3);
  Type elt = srcType.getElementType();
  SmallVector<OpFoldResult> offsets =
      getAsOpFoldResult(ValueRange{batch, head, start});
  offsets.push_back(b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), b.getIndexAttr(1),
                                     getAsOpFoldResult(len), b.getIndexAttr(d)};
  SmallVector<OpFoldResult> strides(4, b.getIndexAttr(1));
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

struct TileAttentionPattern final : OpRewritePattern<AttentionOp> {
  TileAttentionPattern(MLIRContext *ctx, int64_t blockQ, int64_t blockKV)
      : OpRewritePattern(ctx), blockQ(blockQ), blockKV(blockKV) {}

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    // The op's kernel configuration, when it has one, decides the tiles
    // (over the pass options) and goes on to the loop nest for the GPU
    // conversion.
    KernelConfigAttr config = op.getKernelConfigAttr();
    int64_t blockQ = config ? config.getBlockQ() : this->blockQ;
    int64_t blockKV = config ? config.getBlockKV() : this->blockKV;
    Location loc = op.getLoc();
    Value q = op.getQuery(), k = op.getKey(), v = op.getValue();
    RankedTensorType outType = op.getOut().getType();
    RankedTensorType lseType = op.getLse().getType();
    Type elt = outType.getElementType();
    Type f32 = rewriter.getF32Type();
    int64_t dv = op.getValueHeadDim();

    auto dim = [&](Value t, int64_t i) -> Value {
      return rewriter.createOrFold<tensor::DimOp>(loc, t, i);
    };
    Value batch = dim(q, 0), heads = dim(q, 1), nq = dim(q, 2);
    Value kvHeads = dim(k, 1), nk = dim(k, 2);
    Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value br = arith::ConstantIndexOp::create(rewriter, loc, blockQ);
    Value bc = arith::ConstantIndexOp::create(rewriter, loc, blockKV);
    // Query heads per key/value head (grouped-query attention).
    Value group = rewriter.createOrFold<arith::DivUIOp>(loc, heads, kvHeads);
    Value numQBlocks = rewriter.createOrFold<arith::CeilDivUIOp>(loc, nq, br);

    // out is [B, Hq, Nq, Dv] and lse [B, Hq, Nq]: B, Hq and Nq are q's sizes,
    // Dv is v's (static).
    SmallVector<OpFoldResult> rowSizes =
        getAsOpFoldResult(ValueRange{batch, heads, nq});
    SmallVector<OpFoldResult> outSizes = rowSizes;
    outSizes.push_back(rewriter.getIndexAttr(dv));
    Value outInit = createResultInit(rewriter, loc, outSizes, outType);
    Value lseInit = createResultInit(rewriter, loc, rowSizes, lseType);

    // Batch on z, heads on y, query blocks on x: the launch grid of
    // fa-convert-tiled-attention-to-gpu (x has no 65535 limit).
    auto forall = scf::ForallOp::create(
        rewriter, loc, getAsOpFoldResult(ValueRange{batch, heads, numQBlocks}),
        ValueRange{outInit, lseInit},
        fa::detail::blockMapping(rewriter,
                                 {gpu::MappingId::DimZ, gpu::MappingId::DimY,
                                  gpu::MappingId::DimX}));
    if (config)
      forall->setAttr(kKernelConfigAttrName, config);
    Block *body = forall.getBody();
    Value b = body->getArgument(0), h = body->getArgument(1),
          qBlock = body->getArgument(2);
    Value outArg = body->getArgument(3), lseArg = body->getArgument(4);

    rewriter.setInsertionPointToStart(body);
    Value qStart = arith::MulIOp::create(rewriter, loc, qBlock, br);
    Value qLen = tileLength(rewriter, loc, qStart, nq, br);
    Value kvHead = rewriter.createOrFold<arith::DivUIOp>(loc, h, group);
    Value qTile =
        extractPaddedTile(rewriter, loc, q, b, h, qStart, qLen, blockQ);

    // The online-softmax state: unnormalized accumulator, running row max and
    // running row sum, all f32.
    Value acc0 = createFilledTensor(rewriter, loc, {blockQ, dv}, f32, 0.0);
    Value max0 = createFilledTensor(rewriter, loc, {blockQ}, f32,
                                    -std::numeric_limits<double>::infinity());
    Value sum0 = createFilledTensor(rewriter, loc, {blockQ}, f32, 0.0);

    auto loop = scf::ForOp::create(
        rewriter, loc, zero, nk, bc, ValueRange{acc0, max0, sum0},
        [&](OpBuilder &nb, Location nloc, Value kStart, ValueRange state) {
          Value kLen = tileLength(nb, nloc, kStart, nk, bc);
          Value kTile =
              extractPaddedTile(nb, nloc, k, b, kvHead, kStart, kLen, blockKV);
          Value vTile =
              extractPaddedTile(nb, nloc, v, b, kvHead, kStart, kLen, blockKV);
          auto step = OnlineAttentionOp::create(
              nb, nloc, state[0].getType(), state[1].getType(),
              state[2].getType(), qTile, kTile, vTile, state[0], state[1],
              state[2], qStart, kStart, nq, nk, op.getDynamicSoftcap(),
              op.getDynamicScale(), op.getMaskOperands(), op.getStaticScale(),
              op.getMaskAttr(), op.getSoftcapAttr(), /*exp2=*/nullptr);
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
    OpFoldResult c0 = rewriter.getIndexAttr(0), c1 = rewriter.getIndexAttr(1);
    OpFoldResult rows = getAsOpFoldResult(qLen);
    tensor::ParallelInsertSliceOp::create(
        rewriter, loc, outRows, outArg,
        ArrayRef<OpFoldResult>{b, h, qStart, c0},
        ArrayRef<OpFoldResult>{c1, c1, rows, rewriter.getIndexAttr(dv)},
        ArrayRef<OpFoldResult>{c1, c1, c1, c1});
    tensor::ParallelInsertSliceOp::create(rewriter, loc, lseRows, lseArg,
                                          ArrayRef<OpFoldResult>{b, h, qStart},
                                          ArrayRef<OpFoldResult>{c1, c1, rows},
                                          ArrayRef<OpFoldResult>{c1, c1, c1});

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
    RewritePatternSet patterns(&getContext());
    patterns.add<TileAttentionPattern>(&getContext(), blockQ, blockKV);
    // One walk, no folding: only fa.attention ops change.
    walkAndApplyPatterns(root, std::move(patterns));
  }
};

} // namespace
