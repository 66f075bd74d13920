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
  PassOptions::Option<int64_t> blockKV{
      *this, "block-kv", llvm::cl::desc("Keys per block"), llvm::cl::init(64)};
  PassOptions::Option<int64_t> kvSplits{
      *this, "kv-splits",
      llvm::cl::desc("Split each query block's keys into this many chunks "
                     "merged by their LSEs (fa-split-kv; 0: no split)"),
      llvm::cl::init(0)};
};

/// Bufferizes tensor code on the host and lowers it to the LLVM dialect
/// (loops, memrefs, math) so the ExecutionEngine or mlir-runner can run it:
/// fa-host-only, then fa-lower-host-modules (every builtin.module holding
/// functions, nested ones included).
void buildCPUToLLVMPipeline(OpPassManager &pm);

/// The flat host lowering of the functions of one builtin.module, which
/// fa-lower-host-modules runs on each module (`pm` is anchored on
/// builtin.module; nested modules are not lowered by it).
void buildModuleToLLVMPipeline(OpPassManager &pm);

/// fa-lower-to-reference followed by the CPU lowering: the golden path.
/// fa ops in a gpu.module are rejected first (fa-host-only), and each
/// backward's score_mod gets its derivative (fa-differentiate-score-mod).
void buildReferenceCPUPipeline(OpPassManager &pm);

/// The FlashAttention passes (tile the forward and the backward, specialize
/// masks, exp2, decompose the tile ops) followed by the CPU lowering; fa ops
/// in a gpu.module are rejected first (fa-host-only).
void buildTiledCPUPipeline(OpPassManager &pm,
                           const TiledCPUPipelineOptions &options);

/// The FlashAttention passes alone, stopping at linalg on tiles.
void buildTiledAttentionPipeline(OpPassManager &pm,
                                 const TiledCPUPipelineOptions &options);

/// Registers the pipelines above with the global registry (fa-opt).
void registerFAPipelines();

} // namespace mlir::fa

#endif // FA_PIPELINES_PIPELINES_H
