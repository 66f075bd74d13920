//===- TiledAttentionToGPU.h - Tiled attention to GPU -----------*- C++ -*-===//

#ifndef FA_CONVERSION_TILEDATTENTIONTOGPU_TILEDATTENTIONTOGPU_H
#define FA_CONVERSION_TILEDATTENTIONTOGPU_TILEDATTENTIONTOGPU_H

#include "mlir/Pass/Pass.h"

namespace mlir {
class RewriterBase;
namespace scf {
class ForallOp;
} // namespace scf

namespace fa {

#define GEN_PASS_DECL_FACONVERTTILEDATTENTIONTOGPU
#include "fa/Conversion/Passes.h.inc"

/// Rewrites one tiled-attention `scf.forall` (see the pass description) into
/// a `gpu.launch` running the FlashAttention-2 forward with mma.sync. Fails,
/// with a diagnostic, without changing the IR when `forall` is not of that
/// form.
LogicalResult
convertTiledAttentionToGPU(RewriterBase &rewriter, scf::ForallOp forall,
                           const FAConvertTiledAttentionToGPUOptions &options);

} // namespace fa
} // namespace mlir

#endif // FA_CONVERSION_TILEDATTENTIONTOGPU_TILEDATTENTIONTOGPU_H
