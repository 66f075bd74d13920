//===- GPUPipelines.cpp - FlashMLIR GPU pass pipelines --------------------===//

#include "fa/Pipelines/GPUPipelines.h"

#include "fa/Conversion/Passes.h"
#include "fa/Dialect/FA/IR/KernelResources.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cstdlib>

using namespace mlir;
using namespace mlir::fa;

/// Makes the NVPTX back end address shared memory with 32-bit registers, as
/// nvcc does. With 64-bit shared pointers every ldmatrix/cp.async address
/// takes two registers, which is what pushes the D=128 kernel into spills.
/// The NVVM serializer passes no LLVM flags, so this sets the back end's
/// (process-wide) option directly.
static void useShortSharedPointers() {
  auto &options = llvm::cl::getRegisteredOptions();
  auto it = options.find("nvptx-short-ptr");
  if (it != options.end() && it->second->getNumOccurrences() == 0)
    (void)it->second->addOccurrence(0, "nvptx-short-ptr", "true");
}

/// gpu.launch ops -> outlined gpu.modules lowered to NVVM -> gpu.binary.
static void addKernelToBinaryPasses(OpPassManager &pm, StringRef chip,
                                    StringRef features, StringRef toolkit,
                                    StringRef format, bool shortPointers) {
  // Outline before any canonicalization: it would hoist the kernel's
  // constants to the host and turn them into kernel arguments.
  pm.addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  // Folds and dead code only: region simplification (block merging over a
  // kernel of thousands of ops) took a third of a compile and changed no
  // kernel.
  GreedyRewriteConfig fold;
  fold.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
  pm.addPass(createCanonicalizerPass(fold));

  if (shortPointers)
    useShortSharedPointers();
  GpuNVVMAttachTargetOptions target;
  target.chip = chip.str();
  target.features = features.str();
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));

  // math.exp2 / log2 / tanh must reach convert-gpu-to-nvvm as math ops so
  // they become libdevice calls (ex2.approx for exp2).
  OpPassManager &kernel = pm.nest<gpu::GPUModuleOp>();
  // The schedule ops (fagpu) first: they lower to scf, nvgpu and nvvm.
  kernel.addPass(createFALowerChannels());
  kernel.addPass(createFALowerWarpSpecialize());
  kernel.addPass(createSCFToControlFlowPass());
  kernel.addPass(createConvertNVGPUToNVVMPass());
  kernel.addPass(memref::createExpandStridedMetadataPass());
  kernel.addPass(createLowerAffinePass());
  kernel.addPass(createConvertGpuOpsToNVVMOps());
  kernel.addPass(createFAExternDynamicSharedMemory());
  // faptx ops and NVVM ops built on inline PTX (wgmma.mma_async).
  kernel.addPass(createFAConvertFAPTXToLLVM());
  kernel.addPass(createConvertNVVMToLLVMPass());
  kernel.addPass(createCanonicalizerPass());
  kernel.addPass(createCSEPass());
  kernel.addPass(createReconcileUnrealizedCastsPass());

  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = format.str();
  // libdevice (exp2, log2, tanh, fmax) is linked from the toolkit; without
  // it the PTX would call undefined __nv_* functions.
  binary.toolkitPath = toolkit.empty() ? findCudaToolkit() : toolkit.str();
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

/// The PTX features: the user's, or PTX 8.0 (the chip's oldest PTX version
/// where that is newer: 8.1 on sm_90, whose backward reduces dQ 16 bytes at a
/// time).
template <typename Options>
static std::string ptxFeatures(const Options &options) {
  if (!options.features.empty())
    return options.features;
  const ChipInfo *chip = lookupChip(options.chip);
  int64_t version = std::max<int64_t>(80, chip ? chip->minPtxVersion : 80);
  return "+ptx" + std::to_string(version);
}

/// fa-select-kernel-config with the pipeline's fixed fields.
template <typename Options>
static void addSelectKernelConfig(OpPassManager &pm, const Options &options,
                                  StringRef schedule = "auto",
                                  StringRef tileScheduler = "auto") {
  FASelectKernelConfigOptions select;
  select.chip = options.chip;
  select.mma = options.mma;
  select.blockQ = options.blockQ;
  select.blockKV = options.blockKV;
  select.warps = options.warps;
  select.stages = options.stages;
  select.dkvSplit = options.dkvSplit;
  select.schedule = schedule.str();
  select.tileScheduler = tileScheduler.str();
  pm.addPass(createFASelectKernelConfig(select));
}

void mlir::fa::buildGPUForwardPipeline(
    OpPassManager &pm, const GPUForwardPipelineOptions &options) {
  // Modifiers that state a built-in run the built-in's kernel code.
  pm.addPass(createFARecognizeBuiltinModifiers());
  addSelectKernelConfig(pm, options, options.schedule, options.tileScheduler);
  // The tiled form the conversion consumes; the tiles and everything the
  // conversion needs come from the kernel configuration.
  pm.addPass(createFATileAttention());
  pm.addPass(createFASpecializeMasks());
  if (options.kvSplits != 0) {
    FASplitKVOptions split;
    split.splits = std::max<int64_t>(options.kvSplits, 0);
    pm.addPass(createFASplitKV(split));
  }
  pm.addPass(createFAUseExp2());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  FAConvertTiledAttentionToGPUOptions convert;
  pm.addPass(createFAConvertTiledAttentionToGPU(convert));
  // fa-split-kv's merges, over the workspace the conversion allocated.
  pm.addPass(createFAConvertAttentionMergeToGPU());
  addKernelToBinaryPasses(pm, options.chip, ptxFeatures(options),
                          options.toolkit, options.format,
                          options.shortSharedPointers);
}

void mlir::fa::buildGPUBackwardPipeline(
    OpPassManager &pm, const GPUBackwardPipelineOptions &options) {
  pm.addPass(createFARecognizeBuiltinModifiers());
  addSelectKernelConfig(pm, options);
  // The score_mod's derivative, which the tile steps read.
  pm.addPass(createFADifferentiateScoreMod());
  pm.addPass(createFATileAttentionBackward());
  // CSE only: canonicalization would fold the nest's single-iteration loops
  // (one query head per kv head, static lengths), which the conversion
  // matches.
  pm.addPass(createCSEPass());
  pm.addPass(createFAConvertTiledAttentionBackwardToGPU());
  addKernelToBinaryPasses(pm, options.chip, ptxFeatures(options),
                          options.toolkit, options.format,
                          options.shortSharedPointers);
}

void mlir::fa::buildGPUToBinaryPipeline(
    OpPassManager &pm, const GPUToBinaryPipelineOptions &options) {
  addKernelToBinaryPasses(pm, options.chip, ptxFeatures(options),
                          options.toolkit, options.format,
                          options.shortSharedPointers);
}

std::string mlir::fa::findCudaToolkit() {
  SmallVector<std::string> candidates;
  for (const char *var : {"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"})
    if (const char *dir = std::getenv(var))
      candidates.push_back(dir);
  candidates.push_back("/usr/local/cuda");
  for (const std::string &dir : candidates) {
    SmallString<128> libdevice(dir);
    llvm::sys::path::append(libdevice, "nvvm", "libdevice", "libdevice.10.bc");
    if (llvm::sys::fs::exists(libdevice))
      return dir;
  }
  return "";
}

/// The target options a GPU pipeline can honour, checked when the pipeline
/// is built (the LLVM back end would otherwise stop with a fatal error).
template <typename Options>
static LogicalResult
checkTargetOptions(const Options &options,
                   function_ref<LogicalResult(const Twine &)> errorHandler) {
  const ChipInfo *chip = lookupChip(options.chip);
  if (!chip)
    return errorHandler("unknown chip '" + options.chip.getValue() +
                        "' (supported: " + supportedChipNames() + ")");
  // features: "+ptxNN" (and other "+feature"s, passed through).
  SmallVector<StringRef> features;
  StringRef(options.features).split(features, ',', -1, false);
  for (StringRef feature : features) {
    unsigned version = 0;
    if (!feature.consume_front("+ptx"))
      continue;
    if (feature.getAsInteger(10, version))
      return errorHandler("features: bad PTX version '+ptx" + feature + "'");
    if (version < chip->minPtxVersion)
      return errorHandler("features: " + chip->name + " needs PTX " +
                          Twine(chip->minPtxVersion / 10) + "." +
                          Twine(chip->minPtxVersion % 10) +
                          " or newer, got +ptx" + Twine(version));
  }
  StringRef format = options.format;
  if (!llvm::is_contained({"isa", "assembly", "bin", "binary", "fatbin",
                           "fatbinary", "offloading"},
                          format))
    return errorHandler("format must be isa, bin, fatbin or offloading, got '" +
                        format + "'");
  return success();
}

/// Registers `build` as pipeline `arg` with its options checked first.
template <typename Options>
static void registerGPUPipeline(StringRef arg, StringRef description,
                                void (*build)(OpPassManager &,
                                              const Options &)) {
  registerPassPipeline(
      arg, description,
      [arg, build](OpPassManager &pm, StringRef text,
                   function_ref<LogicalResult(const Twine &)> errorHandler) {
        Options options;
        std::string parseErrors;
        llvm::raw_string_ostream os(parseErrors);
        if (failed(options.parseFromString(text, os)))
          return errorHandler(arg + ": " + parseErrors);
        if (failed(checkTargetOptions(options, [&](const Twine &msg) {
              return errorHandler(arg + ": " + msg);
            })))
          return failure();
        build(pm, options);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optHandler) {
        optHandler(Options());
      });
}

void mlir::fa::registerFAGPUPipelines() {
  registerGPUPipeline<GPUForwardPipelineOptions>(
      "fa-gpu-forward",
      "fa.attention on memrefs to a FlashAttention forward kernel "
      "(mma.sync or wgmma) and its PTX in a gpu.binary",
      buildGPUForwardPipeline);
  registerGPUPipeline<GPUBackwardPipelineOptions>(
      "fa-gpu-backward",
      "fa.attention_backward on memrefs to the FlashAttention backward "
      "kernels (mma.sync or wgmma) and their PTX in one gpu.binary",
      buildGPUBackwardPipeline);
  registerGPUPipeline<GPUToBinaryPipelineOptions>(
      "fa-gpu-to-binary",
      "GPU-level IR (gpu.launch ops or gpu.modules of fagpu, gpu, nvgpu, nvvm "
      "and faptx ops) to NVVM and its PTX in a gpu.binary",
      buildGPUToBinaryPipeline);
}
