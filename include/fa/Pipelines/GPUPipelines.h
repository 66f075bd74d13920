//===- GPUPipelines.h - FlashMLIR GPU pass pipelines ------------*- C++ -*-===//

#ifndef FA_PIPELINES_GPUPIPELINES_H
#define FA_PIPELINES_GPUPIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <string>

namespace mlir::fa {

/// Options every GPU pipeline shares: the target and how the PTX is made.
template <typename Derived>
struct GPUTargetPipelineOptions : public PassPipelineOptions<Derived> {
  using Base = PassPipelineOptions<Derived>;
  typename Base::template Option<bool> shortSharedPointers{
      *this, "short-smem-ptr",
      llvm::cl::desc("32-bit shared-memory pointers in the NVPTX back end "
                     "(sets LLVM's process-wide --nvptx-short-ptr)"),
      llvm::cl::init(true)};
  typename Base::template Option<std::string> chip{
      *this, "chip", llvm::cl::desc("Target chip (sm_80, sm_90a, ...)"),
      llvm::cl::init("sm_80")};
  typename Base::template Option<std::string> features{
      *this, "features", llvm::cl::desc("PTX features"),
      llvm::cl::init("+ptx80")};
  typename Base::template Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("CUDA toolkit root for libdevice (default: $CUDA_HOME "
                     "and friends)")};
  typename Base::template Option<std::string> format{
      *this, "format",
      llvm::cl::desc("gpu-module-to-binary format (isa = PTX text, bin, "
                     "fatbin, offloading)"),
      llvm::cl::init("isa")};
};

/// Options of the GPU forward pipeline.
struct GPUForwardPipelineOptions
    : public GPUTargetPipelineOptions<GPUForwardPipelineOptions> {
  PassOptions::Option<int64_t> blockQ{*this, "block-q",
                                      llvm::cl::desc("Query rows per block"),
                                      llvm::cl::init(128)};
  PassOptions::Option<int64_t> blockKV{
      *this, "block-kv", llvm::cl::desc("Keys per block"), llvm::cl::init(64)};
  PassOptions::Option<int64_t> warps{*this, "warps",
                                     llvm::cl::desc("Warps per thread block"),
                                     llvm::cl::init(4)};
  PassOptions::Option<int64_t> stages{
      *this, "stages",
      llvm::cl::desc("Shared-memory buffers per K/V tile (1 or 2)"),
      llvm::cl::init(2)};
  PassOptions::Option<bool> swizzle{
      *this, "swizzle",
      llvm::cl::desc("XOR-swizzle shared-memory rows instead of padding")};
  PassOptions::Option<bool> wgmma{
      *this, "wgmma",
      llvm::cl::desc("sm_90a: warpgroup MMAs (wgmma) instead of mma.sync")};
};

/// fa.attention on memrefs (through bufferization.to_tensor /
/// materialize_in_destination) -> tiled, mask-specialized, exp2 form -> one
/// gpu.launch per attention (mma.sync) -> outlined gpu.module lowered to NVVM
/// -> gpu.binary holding the PTX (format=isa). The host side keeps the
/// gpu.launch_func.
void buildGPUForwardPipeline(OpPassManager &pm,
                             const GPUForwardPipelineOptions &options);

/// Options of the GPU backward pipeline.
struct GPUBackwardPipelineOptions
    : public GPUTargetPipelineOptions<GPUBackwardPipelineOptions> {
  PassOptions::Option<int64_t> blockQ{*this, "block-q",
                                      llvm::cl::desc("Query rows per block"),
                                      llvm::cl::init(64)};
  PassOptions::Option<int64_t> blockKV{
      *this, "block-kv", llvm::cl::desc("Keys per block"), llvm::cl::init(64)};
  PassOptions::Option<int64_t> warps{
      *this, "warps",
      llvm::cl::desc("Warps per thread block of the GEMM kernels"),
      llvm::cl::init(4)};
  PassOptions::Option<bool> wgmma{
      *this, "wgmma",
      llvm::cl::desc("sm_90a: the key-block kernel on warpgroup MMAs "
                     "(wgmma) instead of mma.sync")};
};

/// fa.attention_backward on memrefs -> fa-tile-attention-backward ->
/// preprocessing, key-block and dQ gpu.launch ops (mma.sync) in one
/// gpu.module -> NVVM -> gpu.binary holding the PTX of all of them.
void buildGPUBackwardPipeline(OpPassManager &pm,
                              const GPUBackwardPipelineOptions &options);

/// The CUDA toolkit whose libdevice the PTX links: $CUDA_HOME, $CUDA_PATH,
/// $CUDA_ROOT or /usr/local/cuda, the first holding nvvm/libdevice; "" if none.
std::string findCudaToolkit();

/// Registers `fa-gpu-forward` and `fa-gpu-backward` with the global registry.
void registerFAGPUPipelines();

} // namespace mlir::fa

#endif // FA_PIPELINES_GPUPIPELINES_H
