//===- BlockMapping.h - Tiled foralls to thread-block ids -------*- C++ -*-===//
//
// fa-tile-attention and fa-tile-attention-backward put a `mapping` of
// #gpu.block<x|y|z> attributes on each scf.forall: the thread-block id that
// each induction variable becomes in the kernel (batch on z, heads on y,
// blocks on x). The GPU conversions read it here to assign block ids and
// size the grid, rather than assume dimension positions: a mapped forall
// keeps its unit dimensions through canonicalization, an unmapped one loses
// them. Internal to lib/Conversion/TiledAttentionToGPU.
//
//===----------------------------------------------------------------------===//

#ifndef FA_LIB_CONVERSION_TILEDATTENTIONTOGPU_BLOCKMAPPING_H
#define FA_LIB_CONVERSION_TILEDATTENTIONTOGPU_BLOCKMAPPING_H

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <array>

namespace mlir::fa::detail {

/// The thread-block dimension of each induction variable of `forall`: its
/// mapping, which must be #gpu.block<x>, <y> or <z>, each at most once. A
/// forall without a mapping (hand-written IR) gets `unmapped`, the order the
/// tiling passes use, which then also fixes its rank. Fails (without a
/// diagnostic) otherwise.
inline FailureOr<SmallVector<gpu::Dimension>>
getBlockDims(scf::ForallOp forall, ArrayRef<gpu::Dimension> unmapped) {
  std::optional<ArrayAttr> mapping = forall.getMapping();
  if (!mapping || mapping->empty()) {
    if (forall.getRank() != static_cast<int64_t>(unmapped.size()))
      return failure();
    return llvm::to_vector(unmapped);
  }
  SmallVector<gpu::Dimension> dims;
  for (Attribute attr : *mapping) {
    auto block = dyn_cast<gpu::GPUBlockMappingAttr>(attr);
    if (!block)
      return failure();
    gpu::Dimension dim;
    switch (block.getBlock()) {
    case gpu::MappingId::DimX:
      dim = gpu::Dimension::x;
      break;
    case gpu::MappingId::DimY:
      dim = gpu::Dimension::y;
      break;
    case gpu::MappingId::DimZ:
      dim = gpu::Dimension::z;
      break;
    default: // Linear mappings.
      return failure();
    }
    if (llvm::is_contained(dims, dim))
      return failure();
    dims.push_back(dim);
  }
  return dims;
}

/// The block id along `dim`.
inline Value getBlockId(gpu::KernelDim3 ids, gpu::Dimension dim) {
  switch (dim) {
  case gpu::Dimension::x:
    return ids.x;
  case gpu::Dimension::y:
    return ids.y;
  case gpu::Dimension::z:
    return ids.z;
  }
  llvm_unreachable("unknown gpu::Dimension");
}

/// The launch grid (x, y, z) of `forall` with block dimensions `dims`: along
/// each dimension the upper bound of the induction variable mapped to it, 1
/// where none is.
inline std::array<Value, 3> getLaunchGrid(OpBuilder &b, Location loc,
                                          scf::ForallOp forall,
                                          ArrayRef<gpu::Dimension> dims) {
  std::array<OpFoldResult, 3> sizes = {b.getIndexAttr(1), b.getIndexAttr(1),
                                       b.getIndexAttr(1)};
  for (auto [ub, dim] : llvm::zip_equal(forall.getMixedUpperBound(), dims))
    sizes[static_cast<unsigned>(dim)] = ub;
  return {getValueOrCreateConstantIndexOp(b, loc, sizes[0]),
          getValueOrCreateConstantIndexOp(b, loc, sizes[1]),
          getValueOrCreateConstantIndexOp(b, loc, sizes[2])};
}

} // namespace mlir::fa::detail

#endif // FA_LIB_CONVERSION_TILEDATTENTIONTOGPU_BLOCKMAPPING_H
