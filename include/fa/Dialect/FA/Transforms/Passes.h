//===- Passes.h - FlashMLIR transformation passes ---------------*- C++ -*-===//

#ifndef FA_DIALECT_FA_TRANSFORMS_PASSES_H
#define FA_DIALECT_FA_TRANSFORMS_PASSES_H

#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FAGPU/IR/FAGPU.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;

namespace fa {

#define GEN_PASS_DECL
#include "fa/Dialect/FA/Transforms/Passes.h.inc"

/// What a user fixes of a kernel configuration; 0 (or no `mma`) = choose.
struct KernelConfigRequest {
  std::string chip = "sm_90a";
  std::optional<MmaKind> mma;
  int64_t blockQ = 0, blockKV = 0, warps = 0, stages = 0, dkvSplit = 0;
  /// Configurations that work to pass over before taking one (fa-compile's
  /// next choice when ptxas reports register spills).
  int64_t skip = 0;
  /// The schedule, or none to choose (the backward: cooperative).
  std::optional<KernelSchedule> schedule;
  /// Forward: the tile scheduler, or none to choose.
  std::optional<TileScheduler> tileScheduler;
};

/// The kernel configuration fa-select-kernel-config gives `op` (an
/// fa.attention or fa.attention_backward): the table's choice with the
/// request's fixed fields, shrunk to fit the chip. Emits the reason and
/// fails when nothing fits.
FailureOr<KernelConfigAttr> selectKernelConfig(Operation *op,
                                               const KernelConfigRequest &req);

/// Builds into the empty region `grad` the derivative of the score_mod region
/// `scoreMod` with respect to its score argument (fa-differentiate-score-mod):
/// same signature, yields d(score_mod)/d(score). Emits an error on `op`
/// naming the first op it cannot differentiate.
LogicalResult buildScoreModGradient(Operation *op, Region &scoreMod,
                                    Region &grad);

/// Patterns that rewrite fa.attention / fa.attention_backward into the
/// reference linalg form (full N x N scores).
void populateLowerToReferencePatterns(RewritePatternSet &patterns);

/// Rewrites `op` into a loop over its sequences of fa.attention_backward on
/// their slices (batches of one) and returns that op: the reference form of
/// the packed backward, and the tiled CPU pipelines' until a packed backward
/// nest exists (fa-tile-attention-backward then tiles the loop's op).
AttentionBackwardOp decomposeVarlenBackward(RewriterBase &rewriter,
                                            AttentionVarlenBackwardOp op);

/// Patterns that expand fa.online_attention(_finalize) into linalg on tiles.
void populateDecomposeOnlineAttentionPatterns(RewritePatternSet &patterns);

/// Patterns that expand fa.attention_backward_step into linalg on tiles.
void populateDecomposeAttentionBackwardStepPatterns(
    RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "fa/Dialect/FA/Transforms/Passes.h.inc"

} // namespace fa
} // namespace mlir

#endif // FA_DIALECT_FA_TRANSFORMS_PASSES_H
