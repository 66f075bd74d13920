//===- Pipelines.cpp - FlashMLIR pass pipelines ---------------------------===//

#include "fa/Pipelines/Pipelines.h"

#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Pipelines/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::fa;

void mlir::fa::buildModuleToLLVMPipeline(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  bufferization::OneShotBufferizePassOptions bufferizeOptions;
  bufferizeOptions.bufferizeFunctionBoundaries = true;
  bufferizeOptions.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferizeOptions));
  // The host runs query blocks one after the other.
  pm.addPass(createForallToForLoopPass());
  bufferization::buildBufferDeallocationPipeline(pm);
  // The deallocation pipeline copies buffers a function returns without
  // owning them (bufferization.clone): memref.alloc + memref.copy.
  pm.addPass(createConvertBufferizationToMemRefPass());
  pm.addPass(createConvertLinalgToLoopsPass());
  pm.addPass(createLowerAffinePass());
  // (Upstream crashes on some dynamic reshapes: written as casts first.)
  pm.addPass(createFAExpandReshapesAsCasts());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  // tanh and friends go to libm; exp/exp2/log become LLVM intrinsics.
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

void mlir::fa::buildCPUToLLVMPipeline(OpPassManager &pm) {
  pm.addPass(createFAHostOnly());
  pm.addPass(createFALowerHostModules());
}

void mlir::fa::buildReferenceCPUPipeline(OpPassManager &pm) {
  // Before any fa pass expands fa ops that sit in device code.
  pm.addPass(createFAHostOnly());
  pm.addPass(createFADifferentiateScoreMod());
  pm.addPass(createFALowerToReference());
  pm.addPass(createFALowerHostModules());
}

void mlir::fa::buildTiledAttentionPipeline(
    OpPassManager &pm, const TiledCPUPipelineOptions &options) {
  // The backward's score_mod_grad, which its tile steps read.
  pm.addPass(createFADifferentiateScoreMod());
  pm.addPass(createFATileAttention(
      FATileAttentionOptions{options.blockQ, options.blockKV}));
  pm.addPass(createFATileAttentionBackward(
      FATileAttentionBackwardOptions{options.blockQ, options.blockKV}));
  pm.addPass(createFASpecializeMasks());
  if (options.kvSplits > 0) {
    FASplitKVOptions split;
    split.splits = options.kvSplits;
    pm.addPass(createFASplitKV(split));
  }
  pm.addPass(createFAUseExp2());
  pm.addPass(createFADecomposePagedKeyBlocks());
  pm.addPass(createFADecomposeOnlineAttention());
  pm.addPass(createFADecomposeAttentionBackwardStep());
  // Merges of partial results: elementwise, their reference form.
  pm.addPass(
      createFALowerToReference(FALowerToReferenceOptions{/*mergeOnly=*/true}));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void mlir::fa::buildTiledCPUPipeline(OpPassManager &pm,
                                     const TiledCPUPipelineOptions &options) {
  pm.addPass(createFAHostOnly());
  buildTiledAttentionPipeline(pm, options);
  pm.addPass(createFALowerHostModules());
}

void mlir::fa::registerFAPipelines() {
  PassPipelineRegistration<>(
      "fa-cpu-to-llvm",
      "Bufferize tensor code and lower it to LLVM for the host",
      buildCPUToLLVMPipeline);
  PassPipelineRegistration<>(
      "fa-reference-cpu",
      "Lower fa ops to the N x N reference form and on to LLVM for the host",
      buildReferenceCPUPipeline);
  PassPipelineRegistration<TiledCPUPipelineOptions>(
      "fa-tiled-attention",
      "The FlashAttention passes: tile, specialize masks, exp2, decompose "
      "the forward and backward tile ops, merges to elementwise linalg",
      buildTiledAttentionPipeline);
  PassPipelineRegistration<TiledCPUPipelineOptions>(
      "fa-tiled-cpu",
      "The FlashAttention passes followed by the lowering to LLVM for the host",
      buildTiledCPUPipeline);
}
