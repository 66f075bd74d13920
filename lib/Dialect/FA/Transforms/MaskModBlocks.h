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
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/Region.h"

#include <optional>
#include <utility>

namespace mlir::fa::detail {

/// i1 values, computed at the builder's point: whether the mask_mod may see
/// some (b, h, i, j) with i in [iLo, iHi] and j in [jLo, jHi] (`maySee`), and
/// whether it may hide some (`mayHide`). Exact for index arithmetic with
/// constants (add, sub, mul and division by constants, min / max, casts),
/// comparisons, and / or / xor / select of booleans; anything else (a
/// capture's element, floating-point values) may be anything, so a block it
/// decides is kept and masked. `iLo > iHi` (a block without rows) may give
/// any answer: such a block stores nothing. With `headLast` the verdict
/// holds for every head of [head, headLast] (a group of query heads).
struct BlockVerdict {
  Value maySee, mayHide;
};
BlockVerdict buildMaskModBlockVerdict(OpBuilder &b, Location loc,
                                      Region &maskMod, Value batch, Value head,
                                      Value iLo, Value iHi, Value jLo,
                                      Value jHi, Value headLast = Value());

/// The last of `size` positions from `start`, clipped to `len`.
Value lastPosition(OpBuilder &b, Location loc, Value start, int64_t size,
                   Value len);

/// Where a mask_mod's blocks are scanned, and against what: blocks of
/// `block` positions along the queries (`scanKeys` false) or the keys, from
/// the element offsets [lo, hi) of a sequence of `len`, against the fixed
/// positions [fixedLo, fixedLast] of the other axis, at (batch, head) or
/// every head of [head, headLast].
struct MaskModScan {
  Region *maskMod;
  Value batch, head, headLast;
  bool scanKeys;
  Value fixedLo, fixedLast;
  int64_t block;
  Value len;
};

/// The blocks of [lo, hi) that the mask_mod may see, as element offsets
/// [first, last + block) clipped to hi (begin = end = hi when it sees
/// none), computed in front of the loop that uses them: a coarse scan over
/// chunks of 8 blocks (one verdict per chunk), then the first and the last
/// chunk that may see block by block (a chunk whose blocks all turn out
/// unseen keeps its bound: the range stays a superset). None when the
/// verdict cannot rule a block out (e.g. it reads a capture): every block
/// stays.
std::optional<std::pair<Value, Value>>
buildMaskModVisibleRange(RewriterBase &rewriter, Location loc,
                         const MaskModScan &scan, Value lo, Value hi);

/// Run-time ranges of a mask (fa.attention's key_ranges, the backward's
/// query_ranges): per group of `rows` positions of one axis, [begin, end)
/// along the other holds everything visible, and with 4 columns [fullBegin,
/// fullEnd) is shown whole by the mask_mod.
struct BlockRange {
  /// The union of the block's groups, begin rounded down to a multiple of
  /// `roundTo`, both within [0, limit], end >= begin.
  Value begin, end;
  /// With 4 columns: the intersection of the groups' full ranges (null
  /// otherwise).
  Value fullBegin, fullEnd;
};
/// The groups of `rows` positions a block of `block` positions may touch
/// (the ranges of that many groups are read, unrolled, per block).
int64_t rangeGroupsPerBlock(int64_t block, int64_t rows);
/// At most this many groups per block.
constexpr int64_t kMaxRangeGroups = 16;
/// The ranges ([B, H, groups, 2 or 4] i32) of the block of positions
/// [start, start + len) (len >= 1, len <= block) at (batch, head).
BlockRange buildBlockRange(OpBuilder &b, Location loc, Value ranges,
                           int64_t rows, Value batch, Value head, Value start,
                           Value len, int64_t block, int64_t roundTo,
                           Value limit);

} // namespace mlir::fa::detail

#endif // FA_DIALECT_FA_TRANSFORMS_MASKMODBLOCKS_H
