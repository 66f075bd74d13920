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
      *this, "features",
      llvm::cl::desc("PTX features (default: +ptx80, or the chip's oldest "
                     "PTX version if newer)")};
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

/// What the GPU pipelines let a user fix of the kernel configuration; every
/// field left at 0 (`mma=auto`) is chosen by fa-select-kernel-config.
template <typename Derived>
struct GPUKernelPipelineOptions : public GPUTargetPipelineOptions<Derived> {
  using Base = PassPipelineOptions<Derived>;
  typename Base::template Option<std::string> mma{
      *this, "mma",
      llvm::cl::desc("auto (wgmma where the chip and the op allow it), "
                     "mma_sync or wgmma"),
      llvm::cl::init("auto")};
  typename Base::template Option<int64_t> blockQ{
      *this, "block-q", llvm::cl::desc("Query rows per block (0 = choose)"),
      llvm::cl::init(0)};
  typename Base::template Option<int64_t> blockKV{
      *this, "block-kv", llvm::cl::desc("Keys per block (0 = choose)"),
      llvm::cl::init(0)};
  typename Base::template Option<int64_t> warps{
      *this, "warps", llvm::cl::desc("Warps per thread block (0 = choose)"),
      llvm::cl::init(0)};
  typename Base::template Option<int64_t> stages{
      *this, "stages",
      llvm::cl::desc("Shared-memory buffers per streamed tile (0 = choose)"),
      llvm::cl::init(0)};
  typename Base::template Option<int64_t> dkvSplit{
      *this, "dkv-split",
      llvm::cl::desc("Backward: thread blocks per key block sharing the "
                     "dK/dV columns (0 = choose)"),
      llvm::cl::init(0)};
};

/// Options of the GPU forward pipeline.
struct GPUForwardPipelineOptions
    : public GPUKernelPipelineOptions<GPUForwardPipelineOptions> {
  Option<std::string> schedule{
      *this, "schedule",
      llvm::cl::desc("auto (fa-select-kernel-config's choice), cooperative "
                     "or warp_specialized (a TMA producer warpgroup and "
                     "consumer warpgroups; wgmma, docs/HOPPER.md)"),
      llvm::cl::init("auto")};
  Option<std::string> tileScheduler{
      *this, "tile-scheduler",
      llvm::cl::desc("auto (fa-select-kernel-config's choice), grid, "
                     "persistent (warp_specialized: one thread block per "
                     "multiprocessor looping over the tiles) or dynamic "
                     "(persistent, tiles from an atomic counter)"),
      llvm::cl::init("auto")};
  Option<bool> intraWarpgroupOverlap{
      *this, "intra-warpgroup-overlap",
      llvm::cl::desc("warp-specialize: the softmax of block j under the P V "
                     "GEMM of block j - 1"),
      llvm::cl::init(true)};
  Option<bool> pingPong{
      *this, "ping-pong",
      llvm::cl::desc("warp-specialize: consumer warpgroups take turns at "
                     "issuing their GEMMs"),
      llvm::cl::init(true)};
  Option<int64_t> kvSplits{
      *this, "kv-splits",
      llvm::cl::desc("Split-KV (fa-split-kv): 0 none, -1 a run-time count "
                     "from the problem and the device's SM count, N > 0 "
                     "that many chunks per query block"),
      llvm::cl::init(0)};
};

/// fa.attention on memrefs (through bufferization.to_tensor /
/// materialize_in_destination) -> kernel configuration -> tiled,
/// mask-specialized, exp2 form -> one gpu.launch per attention (mma.sync or
/// wgmma) -> outlined gpu.module lowered to NVVM -> gpu.binary holding the
/// PTX (format=isa). The host side keeps the gpu.launch_func.
void buildGPUForwardPipeline(OpPassManager &pm,
                             const GPUForwardPipelineOptions &options);

/// Options of the GPU backward pipeline.
struct GPUBackwardPipelineOptions
    : public GPUKernelPipelineOptions<GPUBackwardPipelineOptions> {};

/// fa.attention_backward on memrefs -> kernel configuration ->
/// fa-tile-attention-backward -> preprocessing, key-block and dQ gpu.launch
/// ops (mma.sync or wgmma) in one
/// gpu.module -> NVVM -> gpu.binary holding the PTX of all of them.
void buildGPUBackwardPipeline(OpPassManager &pm,
                              const GPUBackwardPipelineOptions &options);

/// Options of the GPU-to-binary pipeline: the target only.
struct GPUToBinaryPipelineOptions
    : public GPUTargetPipelineOptions<GPUToBinaryPipelineOptions> {};

/// The back half every GPU pipeline ends with, for GPU-level IR written or
/// produced elsewhere: gpu.launch ops outlined into gpu.modules, which are
/// lowered (fagpu, gpu, nvgpu, nvvm and faptx ops) to NVVM and serialized into
/// a gpu.binary holding the PTX (format=isa).
void buildGPUToBinaryPipeline(OpPassManager &pm,
                              const GPUToBinaryPipelineOptions &options);

/// The CUDA toolkit whose libdevice the PTX links: $CUDA_HOME, $CUDA_PATH,
/// $CUDA_ROOT or /usr/local/cuda, the first holding nvvm/libdevice; "" if none.
std::string findCudaToolkit();

/// Registers `fa-gpu-forward`, `fa-gpu-backward` and `fa-gpu-to-binary`
/// with the global registry.
void registerFAGPUPipelines();

} // namespace mlir::fa

#endif // FA_PIPELINES_GPUPIPELINES_H
