//===- MaskModBlocks.h - What a mask_mod hides in a block -------*- C++ -*-===//
//
// A mask_mod's verdict on a whole (query block, key block) tile, from
// interval arithmetic over its region: the passes that skip invisible blocks
// and drop the mask of fully visible ones (fa-specialize-masks) read it.
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FA_TRANSFORMS_MASKMODBLOCKS_H
#define FA_DIALECT_FA_TRANSFORMS_MASKMODBLOCKS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Region.h"

namespace mlir::fa::detail {

/// i1 values, computed at the builder's point: whether the mask_mod may see
/// some (b, h, i, j) with i in [iLo, iHi] and j in [jLo, jHi] (`maySee`), and
/// whether it may hide some (`mayHide`). Exact for index arithmetic with
/// constants (add, sub, mul and division by constants, min / max, casts),
/// comparisons, and / or / xor / select of booleans; anything else (a
/// capture's element, floating-point values) may be anything, so a block it
/// decides is kept and masked. `iLo > iHi` (a block without rows) may give
/// any answer: such a block stores nothing.
struct BlockVerdict {
  Value maySee, mayHide;
};
BlockVerdict buildMaskModBlockVerdict(OpBuilder &b, Location loc,
                                      Region &maskMod, Value batch, Value head,
                                      Value iLo, Value iHi, Value jLo,
                                      Value jHi);

} // namespace mlir::fa::detail

#endif // FA_DIALECT_FA_TRANSFORMS_MASKMODBLOCKS_H
