//===- Pipelines.h - FlashMLIR pass pipelines -------------------*- C++ -*-===//

#ifndef FA_PIPELINES_PIPELINES_H
#define FA_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::fa {

/// Options of the tiled CPU pipeline.
struct TiledCPUPipelineOptions
    : public PassPipelineOptions<TiledCPUPipelineOptions> {
  PassOptions::Option<int64_t> blockQ{*this, "block-q",
                                      llvm::cl::desc("Query rows per block"),
                                      llvm::cl::init(64)};
  PassOptions::Option<int64_t> blockKV{*this, "block-kv",
                                       llvm::cl::desc("Keys per block"),
                                       llvm::cl::init(64)};
};

/// Bufferizes tensor code on the host and lowers it to the LLVM dialect
/// (loops, memrefs, math) so the ExecutionEngine or mlir-runner can run it.
void buildCPUToLLVMPipeline(OpPassManager &pm);

/// fa-lower-to-reference followed by the CPU lowering: the golden path.
void buildReferenceCPUPipeline(OpPassManager &pm);

/// The FlashAttention passes (tile the forward and the backward, specialize
/// masks, exp2, decompose the tile ops) followed by the CPU lowering.
void buildTiledCPUPipeline(OpPassManager &pm,
                           const TiledCPUPipelineOptions &options);

/// The FlashAttention passes alone, stopping at linalg on tiles.
void buildTiledAttentionPipeline(OpPassManager &pm,
                                 const TiledCPUPipelineOptions &options);

/// Registers the pipelines above with the global registry (fa-opt).
void registerFAPipelines();

} // namespace mlir::fa

#endif // FA_PIPELINES_PIPELINES_H
