//===- BuilderUtils.h - Small IR builders of the FA transforms -*- C++ -*-===//
//
// Constants, zero tiles, f32 casts and index offsets that the tiling and
// decomposition passes build over and over. Internal to
// lib/Dialect/FA/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_DIALECT_FA_TRANSFORMS_BUILDERUTILS_H
#define FA_LIB_DIALECT_FA_TRANSFORMS_BUILDERUTILS_H

#include "fa/Dialect/FA/IR/FAOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

namespace mlir::fa::detail {

inline Value indexConst(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

inline Value f32Const(OpBuilder &b, Location loc, double v) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
}

/// A `sizes` tensor of `elemType` filled with 0 (linalg.fill).
inline Value zeroTensor(OpBuilder &b, Location loc,
                        ArrayRef<OpFoldResult> sizes, Type elemType) {
  Value empty = tensor::EmptyOp::create(b, loc, sizes, elemType);
  Value zero = arith::ConstantOp::create(
      b, loc, cast<TypedAttr>(b.getZeroAttr(elemType)));
  return linalg::FillOp::create(b, loc, ValueRange{zero}, ValueRange{empty})
      .getResult(0);
}

inline Value extendToF32(OpBuilder &b, Location loc, Value v) {
  if (v.getType().isF32())
    return v;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), v);
}

inline Value truncateTo(OpBuilder &b, Location loc, Type elemType, Value v) {
  if (elemType.isF32())
    return v;
  return arith::TruncFOp::create(b, loc, elemType, v);
}

/// Element `indices` of an i32 tensor (sequence offsets, lengths, page
/// numbers), as an index.
inline Value extractIndex(OpBuilder &b, Location loc, Value t,
                          ValueRange indices) {
  Value e = tensor::ExtractOp::create(b, loc, t, indices);
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), e);
}

/// `[d0, d1, ...]` -> `[1, d0, d1, ...]`: a packed (varlen) tensor as a
/// batch of one.
inline Value addUnitBatch(OpBuilder &b, Location loc, Value t) {
  auto type = cast<RankedTensorType>(t.getType());
  SmallVector<int64_t> shape = {1};
  llvm::append_range(shape, type.getShape());
  SmallVector<ReassociationIndices> groups = {{0, 1}};
  SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1)};
  for (int64_t i = 0; i < type.getRank(); ++i) {
    if (i > 0)
      groups.push_back({i + 1});
    sizes.push_back(
        type.isDynamicDim(i)
            ? OpFoldResult(tensor::DimOp::create(b, loc, t, i).getResult())
            : OpFoldResult(b.getIndexAttr(type.getDimSize(i))));
  }
  return tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get(shape, type.getElementType()), t, groups,
      sizes);
}

/// The inverse of addUnitBatch.
inline Value dropUnitBatch(OpBuilder &b, Location loc, Value t) {
  auto type = cast<RankedTensorType>(t.getType());
  SmallVector<ReassociationIndices> groups = {{0, 1}};
  for (int64_t i = 2; i < type.getRank(); ++i)
    groups.push_back({i});
  return tensor::CollapseShapeOp::create(b, loc, t, groups);
}

/// The `mapping` of a tiled scf.forall: its induction variables, in order,
/// on the thread-block ids `ids` (e.g. batch on z, heads on y, blocks on x).
/// The GPU conversions read it to assign block ids; canonicalization does
/// not fold the unit dimensions of a mapped forall.
inline ArrayAttr blockMapping(OpBuilder &b, ArrayRef<gpu::MappingId> ids) {
  return b.getArrayAttr(llvm::map_to_vector(ids, [&](gpu::MappingId id) {
    return Attribute(gpu::GPUBlockMappingAttr::get(b.getContext(), id));
  }));
}

/// v + c, without an op when c is 0.
inline Value addIndex(OpBuilder &b, Location loc, Value v, int64_t c) {
  if (c == 0)
    return v;
  if (c < 0)
    return arith::SubIOp::create(b, loc, v, indexConst(b, loc, -c));
  return arith::AddIOp::create(b, loc, v, indexConst(b, loc, c));
}

/// The visibility of score (r, c) of a `masked` tile op (fa.online_attention,
/// fa.attention_backward_step): key j = k_start + c is visible from query
/// i = q_start + r iff it exists (j < k_len) and the op's mask sees it
/// (MaskAttrInterface::buildVisible). The mask's parameters are built once,
/// outside the tile.
struct TileVisibility {
  Value qStart, kStart, qLen, kLen;
  MaskAttrInterface mask; // null: only the key tail hides keys
  SmallVector<Value> params;

  template <typename TileOp>
  static TileVisibility build(OpBuilder &b, Location loc, TileOp op) {
    TileVisibility vis{op.getQStart(), op.getKStart(),      op.getQLen(),
                       op.getKLen(),   MaskAttrInterface(), {}};
    if (op.hasMaskRule()) {
      vis.mask = op.getMaskAttr();
      vis.params = vis.mask.buildParameters(b, loc, op.getMaskOperands());
    }
    return vis;
  }

  /// i1, inside a generic body whose loops 0 and 1 are r and c.
  Value isVisible(OpBuilder &b, Location loc) const {
    Value j = arith::AddIOp::create(b, loc, kStart,
                                    linalg::IndexOp::create(b, loc, 1));
    Value visible =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, j, kLen);
    if (!mask)
      return visible;
    Value i = arith::AddIOp::create(b, loc, qStart,
                                    linalg::IndexOp::create(b, loc, 0));
    return arith::AndIOp::create(
        b, loc, visible, mask.buildVisible(b, loc, params, i, j, qLen, kLen));
  }
};

/// The modifier arguments of a tile op's score at (r, c) (loops 0 and 1 of
/// the generic being built): [score,] b, h, q_start + r, k_start + c and
/// the captures. Positions of the tile's padding (rows past q_len, keys past
/// k_len, whose results are discarded) pass the last valid index instead,
/// so that a modifier never reads a capture out of bounds.
template <typename TileOp>
SmallVector<Value> tileModifierArguments(OpBuilder &b, Location loc, TileOp op,
                                         Value score) {
  SmallVector<Value> args;
  if (score)
    args.push_back(score);
  args.push_back(op.getBatchIndex());
  args.push_back(op.getHeadIndex());
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto position = [&](Value start, Value len, unsigned dim) -> Value {
    Value at = arith::AddIOp::create(b, loc, start,
                                     linalg::IndexOp::create(b, loc, dim));
    Value last = arith::SubIOp::create(b, loc, len, one);
    return arith::MaxSIOp::create(
        b, loc, arith::MinSIOp::create(b, loc, at, last), zero);
  };
  args.push_back(position(op.getQStart(), op.getQLen(), 0));
  args.push_back(position(op.getKStart(), op.getKLen(), 1));
  llvm::append_range(args, op.getCaptures());
  return args;
}

} // namespace mlir::fa::detail

#endif // FA_LIB_DIALECT_FA_TRANSFORMS_BUILDERUTILS_H
