//===- TiledAttentionToGPU.h - Tiled attention to GPU -----------*- C++ -*-===//

#ifndef FA_CONVERSION_TILEDATTENTIONTOGPU_TILEDATTENTIONTOGPU_H
#define FA_CONVERSION_TILEDATTENTIONTOGPU_TILEDATTENTIONTOGPU_H

#include "mlir/Pass/Pass.h"

namespace mlir {
class RewriterBase;
namespace scf {
class ForallOp;
} // namespace scf
namespace linalg {
class GenericOp;
} // namespace linalg

namespace fa {
class AttentionBackwardStepOp;

#define GEN_PASS_DECL_FACONVERTTILEDATTENTIONTOGPU
#define GEN_PASS_DECL_FACONVERTATTENTIONMERGETOGPU
#define GEN_PASS_DECL_FACONVERTTILEDATTENTIONBACKWARDTOGPU
#include "fa/Conversion/Passes.h.inc"

/// Rewrites one tiled-attention `scf.forall` (see the pass description) into
/// a `gpu.launch` running the FlashAttention-2 forward with mma.sync. Fails,
/// with a diagnostic, without changing the IR when `forall` is not of that
/// form.
LogicalResult
convertTiledAttentionToGPU(RewriterBase &rewriter, scf::ForallOp forall,
                           const FAConvertTiledAttentionToGPUOptions &options);

/// Rewrites the loop nests of one tiled `fa.attention_backward` (the
/// `steps` reading the delta computed by `deltaOp`) into the preprocessing,
/// key-block and dQ launches described in the pass documentation. Fails
/// with a diagnostic when the nests are not of that form.
LogicalResult convertTiledAttentionBackwardToGPU(
    RewriterBase &rewriter, linalg::GenericOp deltaOp,
    ArrayRef<AttentionBackwardStepOp> steps,
    const FAConvertTiledAttentionBackwardToGPUOptions &options);

} // namespace fa
} // namespace mlir

#endif // FA_CONVERSION_TILEDATTENTIONTOGPU_TILEDATTENTIONTOGPU_H
