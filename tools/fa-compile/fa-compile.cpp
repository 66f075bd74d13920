//===- fa-compile.cpp - Compile fa.attention to PTX + manifest ------------===//
//
// The compile driver: takes an attention configuration (flags) or an IR file
// holding a `func.func` that calls `fa.attention` on memref-backed tensors,
// runs the GPU pipeline, and writes `<name>.ptx` plus `<name>.json`, a
// manifest that tells a runtime how to launch the kernel: entry name,
// parameters in order (each memref expands to allocated pointer, aligned
// pointer, offset, sizes and strides), grid and block, dynamic shared memory
// and the op's attributes.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FADialect.h"
#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/InitAllPasses.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <cmath>
#include <optional>

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory category("fa-compile options");

static cl::opt<std::string>
    inputFile(cl::Positional,
              cl::desc("[input.mlir] (a func calling fa.attention on "
                       "memref-backed tensors; flags describe it "
                       "otherwise)"),
              cl::init(""), cl::cat(category));
static cl::opt<std::string> outputDir("o", cl::desc("Output directory"),
                                      cl::init("."), cl::cat(category));
static cl::opt<std::string>
    kernelName("name",
               cl::desc("Kernel name (default: derived from the config)"),
               cl::init(""), cl::cat(category));
static cl::opt<std::string> kind("kind",
                                 cl::desc("Kernel kind: forward or backward"),
                                 cl::init("forward"), cl::cat(category));
static cl::opt<int64_t> headDim("head-dim", cl::desc("Head dim D of q and k"),
                                cl::init(128), cl::cat(category));
static cl::opt<int64_t>
    valueHeadDim("value-head-dim",
                 cl::desc("Head dim Dv of v (default: --head-dim)"),
                 cl::init(0), cl::cat(category));
static cl::opt<std::string> dtype("dtype", cl::desc("f16 or bf16"),
                                  cl::init("bf16"), cl::cat(category));
static cl::opt<bool> causal("causal", cl::desc("Causal mask (bottom-right)"),
                            cl::init(false), cl::cat(category));
static cl::opt<std::string>
    window("window", cl::desc("Sliding window 'left,right' (-1 = unbounded)"),
           cl::init(""), cl::cat(category));
static cl::opt<double> softcap("softcap", cl::desc("Soft-capping value (> 0)"),
                               cl::init(0.0), cl::cat(category));
static cl::opt<double> scale("scale",
                             cl::desc("Softmax scale (default 1/sqrt(D))"),
                             cl::init(0.0), cl::cat(category));
static cl::opt<std::string> chip("chip", cl::desc("sm_80 or sm_90a"),
                                 cl::init("sm_80"), cl::cat(category));
static cl::opt<int64_t> blockQ("block-q", cl::desc("Query rows per block"),
                               cl::init(0), cl::cat(category));
static cl::opt<int64_t> blockKV("block-kv", cl::desc("Keys per block"),
                                cl::init(0), cl::cat(category));
static cl::opt<int64_t> warps("warps",
                              cl::desc("Warps per thread block (0 = 4 for "
                                       "the forward, 8 for the backward)"),
                              cl::init(0), cl::cat(category));
static cl::opt<int64_t> stages("stages",
                               cl::desc("K/V shared-memory stages (2 = "
                                        "double buffering)"),
                               cl::init(2), cl::cat(category));
static cl::opt<std::string>
    mma("mma",
        cl::desc("Forward tensor-core instructions: auto (wgmma on sm_90a "
                 "where the head dims allow it, else mma.sync), mma.sync or "
                 "wgmma (sm_90a)"),
        cl::init("auto"), cl::cat(category));
static cl::opt<bool> deterministic(
    "deterministic",
    cl::desc("Backward: deterministic dQ (a separate dQ kernel, no atomics)"),
    cl::init(false), cl::cat(category));
static cl::opt<std::string>
    pipelineName("pipeline", cl::desc("Pass pipeline that ends in gpu.binary"),
                 cl::init(""), cl::cat(category));
static cl::opt<bool> defaultSet(
    "default-set",
    cl::desc("Compile the default kernel set (forward and backward x D "
             "64/128 x f16/bf16 x causal/not x sm_80/sm_90a) into -o"),
    cl::init(false), cl::cat(category));
static cl::opt<bool> emitMLIR("emit-mlir",
                              cl::desc("Also write <name>.mlir (final IR)"),
                              cl::init(false), cl::cat(category));

namespace {

/// Everything that selects one kernel.
struct KernelConfig {
  std::string kind = "forward";
  int64_t d = 128, dv = 128;
  std::string dtype = "bf16";
  bool causal = false;
  int64_t windowLeft = -1, windowRight = -1;
  std::optional<double> softcap, scale;
  std::string chip = "sm_80";
  bool deterministic = false;
  int64_t blockQ = 0, blockKV = 0, warps = 0, stages = 2;
  /// Forward only: "auto", "mma.sync" or "wgmma".
  std::string mma = "auto";
  bool backward() const { return kind == "backward"; }

  double effectiveScale() const {
    return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(d));
  }
  bool hasWindow() const { return windowLeft >= 0 || windowRight >= 0; }

  std::string defaultName() const {
    std::string n =
        llvm::formatv("{0}_d{1}", backward() ? "fa_bwd" : "fa_fwd", d);
    if (dv != d)
      n += llvm::formatv("_dv{0}", dv).str();
    n += "_" + dtype;
    if (causal)
      n += "_causal";
    if (hasWindow())
      n += llvm::formatv("_w{0}_{1}",
                         windowLeft < 0 ? "inf" : std::to_string(windowLeft),
                         windowRight < 0 ? "inf" : std::to_string(windowRight))
               .str();
    if (softcap)
      n += llvm::formatv("_cap{0}", *softcap).str();
    if (scale)
      n += llvm::formatv("_s{0}", *scale).str();
    if (backward() && deterministic)
      n += "_det";
    std::string c = chip;
    llvm::erase(c, '_');
    n += "_" + c;
    for (char &ch : n)
      if (!llvm::isAlnum(ch) && ch != '_')
        ch = '_';
    return n;
  }
};

/// What the generated functions share: q/k/v-like memref and tensor types
/// (memrefs strided, so one kernel serves both [B, H, N, D] and [B, N, H, D]
/// layouts) and the op's attribute text.
struct FunctionParts {
  std::string qm, vm, qt, vt, attrs;
};

FunctionParts functionParts(const KernelConfig &c) {
  auto memref4 = [&](int64_t d) {
    return llvm::formatv(
               "memref<?x?x?x{0}x{1}, strided<[?, ?, ?, 1], offset: ?>>", d,
               c.dtype)
        .str();
  };
  auto tensor4 = [&](int64_t d) {
    return llvm::formatv("tensor<?x?x?x{0}x{1}>", d, c.dtype).str();
  };
  FunctionParts p{memref4(c.d), memref4(c.dv), tensor4(c.d), tensor4(c.dv), ""};
  if (c.causal)
    p.attrs += " causal";
  if (c.hasWindow())
    p.attrs +=
        llvm::formatv(" window [{0}, {1}]", c.windowLeft, c.windowRight).str();
  if (c.softcap)
    p.attrs += llvm::formatv(" softcap {0:e}", *c.softcap).str();
  if (c.scale)
    p.attrs += llvm::formatv(" scale {0:e}", *c.scale).str();
  if (c.backward() && c.deterministic)
    p.attrs += " deterministic";
  return p;
}

/// The forward's function: fa.attention between memrefs.
std::string buildForwardModule(const KernelConfig &c) {
  FunctionParts p = functionParts(c);
  std::string lm = "memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>";
  std::string lt = "tensor<?x?x?xf32>";
  return llvm::formatv(
             R"mlir(
func.func @fa_fwd(%q: {0}, %k: {0}, %v: {1}, %out: {1}, %lse: {2}) {{
  %qt = bufferization.to_tensor %q restrict : {0} to {3}
  %kt = bufferization.to_tensor %k restrict : {0} to {3}
  %vt = bufferization.to_tensor %v restrict : {1} to {4}
  %o, %l = fa.attention %qt, %kt, %vt{6} : ({3}, {3}, {4}) -> ({4}, {5})
  bufferization.materialize_in_destination %o in restrict writable %out : ({4}, {1}) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : ({5}, {2}) -> ()
  return
}
)mlir",
             p.qm, p.vm, lm, p.qt, p.vt, lt, p.attrs)
      .str();
}

/// The backward's function: fa.attention_backward between memrefs.
std::string buildBackwardModule(const KernelConfig &c) {
  FunctionParts p = functionParts(c);
  std::string lm = "memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>";
  std::string lt = "tensor<?x?x?xf32>";
  return llvm::formatv(
             R"mlir(
func.func @fa_bwd(%q: {0}, %k: {0}, %v: {1}, %out: {1}, %dout: {1}, %lse: {2},
                  %dq: {0}, %dk: {0}, %dv: {1}) {{
  %qt = bufferization.to_tensor %q restrict : {0} to {3}
  %kt = bufferization.to_tensor %k restrict : {0} to {3}
  %vt = bufferization.to_tensor %v restrict : {1} to {4}
  %ot = bufferization.to_tensor %out restrict : {1} to {4}
  %dot = bufferization.to_tensor %dout restrict : {1} to {4}
  %lt = bufferization.to_tensor %lse restrict : {2} to {5}
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot{6} : ({3}, {3}, {4}, {4}, {5}, {4}) -> ({3}, {3}, {4})
  bufferization.materialize_in_destination %gq in restrict writable %dq : ({3}, {0}) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : ({3}, {0}) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : ({4}, {1}) -> ()
  return
}
)mlir",
             p.qm, p.vm, lm, p.qt, p.vt, lt, p.attrs)
      .str();
}

/// Reads the configuration back from the (verified) attention op, so a
/// user-written IR file and the flags produce the same manifest.
template <typename OpT>
KernelConfig configFromOp(OpT op, const KernelConfig &flags) {
  KernelConfig c = flags;
  c.d = op.getHeadDim();
  c.dv = op.getValueHeadDim();
  Type elt = op.getQuery().getType().getElementType();
  c.dtype = elt.isBF16() ? "bf16" : elt.isF16() ? "f16" : "f32";
  c.causal = op.getCausal();
  c.windowLeft = c.windowRight = -1;
  if (auto w = op.getWindowAttr()) {
    c.windowLeft = w[0];
    c.windowRight = w[1];
  }
  c.softcap.reset();
  if (auto s = op.getSoftcapAttr())
    c.softcap = s.getValueAsDouble();
  c.scale.reset();
  if (auto s = op.getScaleAttr())
    c.scale = s.getValueAsDouble();
  return c;
}

/// A named memref parameter: the host function's arguments in order.
struct ParamInfo {
  const char *name;
  const char *dims[4];
};
constexpr ParamInfo kForwardArgs[] = {{"q", {"B", "Hq", "Nq", "D"}},
                                      {"k", {"B", "Hkv", "Nk", "D"}},
                                      {"v", {"B", "Hkv", "Nk", "Dv"}},
                                      {"out", {"B", "Hq", "Nq", "Dv"}},
                                      {"lse", {"B", "Hq", "Nq", nullptr}}};
constexpr ParamInfo kBackwardArgs[] = {
    {"q", {"B", "Hq", "Nq", "D"}},     {"k", {"B", "Hkv", "Nk", "D"}},
    {"v", {"B", "Hkv", "Nk", "Dv"}},   {"out", {"B", "Hq", "Nq", "Dv"}},
    {"dout", {"B", "Hq", "Nq", "Dv"}}, {"lse", {"B", "Hq", "Nq", nullptr}},
    {"dq", {"B", "Hq", "Nq", "D"}},    {"dk", {"B", "Hkv", "Nk", "D"}},
    {"dv", {"B", "Hkv", "Nk", "Dv"}}};
/// The backward's workspace (memref.alloc, tagged by the conversion).
constexpr ParamInfo kWorkspace[] = {
    {"delta", {"B", "Hq", "ceildiv(Nq, 128) * 128", nullptr}},
    {"lse2", {"B", "Hq", "ceildiv(Nq, 128) * 128", nullptr}},
    {"dq_accum", {"B", "Hq", "Nq", "D"}}};

StringRef dtypeName(Type elt) {
  return elt.isBF16() ? "bf16" : elt.isF16() ? "f16" : "f32";
}

/// Describes one kernel parameter of a host-side gpu.launch_func: a function
/// argument or a workspace buffer.
FailureOr<llvm::json::Object> describeParam(Value operand, func::FuncOp host,
                                            ArrayRef<ParamInfo> args) {
  auto memrefType = dyn_cast<MemRefType>(operand.getType());
  if (!memrefType)
    return failure();
  const ParamInfo *info = nullptr;
  if (auto arg = dyn_cast<BlockArgument>(operand)) {
    if (arg.getOwner() == &host.getBody().front() &&
        arg.getArgNumber() < args.size())
      info = &args[arg.getArgNumber()];
  } else if (auto alloc = operand.getDefiningOp<memref::AllocOp>()) {
    if (auto tag = alloc->getAttrOfType<StringAttr>("fa.workspace"))
      for (const ParamInfo &ws : kWorkspace)
        if (tag.getValue() == ws.name)
          info = &ws;
  }
  if (!info)
    return failure();
  llvm::json::Array dimNames;
  for (int64_t i = 0; i < memrefType.getRank(); ++i)
    dimNames.push_back(info->dims[i]);
  return llvm::json::Object{{"name", info->name},
                            {"type", "memref"},
                            {"rank", memrefType.getRank()},
                            {"dtype", dtypeName(memrefType.getElementType())},
                            {"dims", std::move(dimNames)}};
}

std::optional<int64_t> constantOf(Value v) {
  APInt value;
  if (v && matchPattern(v, m_ConstantInt(&value)))
    return value.getSExtValue();
  return std::nullopt;
}

/// The manifest entry of one launch: entry, grid, block, shared memory and
/// parameters.
FailureOr<llvm::json::Object> describeLaunch(gpu::LaunchFuncOp launch,
                                             func::FuncOp host,
                                             ArrayRef<ParamInfo> args,
                                             llvm::json::Array grid) {
  llvm::json::Array params;
  for (Value operand : launch.getKernelOperands()) {
    FailureOr<llvm::json::Object> p = describeParam(operand, host, args);
    if (failed(p)) {
      launch.emitError("fa-compile: kernel parameter of type ")
          << operand.getType()
          << " is not a function argument or a workspace buffer";
      return failure();
    }
    params.push_back(std::move(*p));
  }
  std::optional<int64_t> bx = constantOf(launch.getBlockSizeX());
  std::optional<int64_t> by = constantOf(launch.getBlockSizeY());
  std::optional<int64_t> bz = constantOf(launch.getBlockSizeZ());
  std::optional<int64_t> smem =
      launch.getDynamicSharedMemorySize()
          ? constantOf(launch.getDynamicSharedMemorySize())
          : std::optional<int64_t>(0);
  if (!bx || !by || !bz || !smem) {
    launch.emitError("fa-compile: block size and dynamic shared memory must "
                     "be constants");
    return failure();
  }
  return llvm::json::Object{{"entry", launch.getKernelName().getValue()},
                            {"threads", *bx * *by * *bz},
                            {"block", llvm::json::Array{*bx, *by, *bz}},
                            {"dynamic_shared_memory", *smem},
                            {"grid", std::move(grid)},
                            {"params", std::move(params)}};
}

/// Whether the wgmma kernels take this configuration: head dims in 64-column
/// panels, whole warpgroups, 16 rows per warp (query rows in the forward,
/// keys in the backward) and, in the backward, 64-query dQ tiles. Tiles left
/// at 0 are chosen to fit.
bool fitsWgmma(const KernelConfig &c) {
  if (c.d % 64 || c.dv % 64 || c.dv > 256 || (c.warps && c.warps % 4))
    return false;
  int64_t rows = c.backward() ? c.blockKV : c.blockQ;
  if (rows && (rows % 64 || rows > 256 || (c.warps && rows != 16 * c.warps)))
    return false;
  if (c.backward() && c.blockQ && (c.blockQ % 64 || c.blockQ > 256))
    return false;
  if (!c.backward() && c.blockKV && (c.blockKV % 16 || c.blockKV > 256))
    return false;
  return true;
}

LogicalResult compileOne(MLIRContext &ctx, const KernelConfig &flags,
                         OwningOpRef<ModuleOp> module) {
  // Find the op and derive the config from it.
  Operation *attention = nullptr;
  module->walk([&](Operation *op) {
    if (!attention && isa<fa::AttentionOp, fa::AttentionBackwardOp>(op))
      attention = op;
  });
  if (!attention)
    return module->emitError(
        "fa-compile: no fa.attention or fa.attention_backward op in the "
        "input");
  KernelConfig config = flags;
  if (auto fwd = dyn_cast<fa::AttentionOp>(attention)) {
    config = configFromOp(fwd, flags);
    config.kind = "forward";
  } else {
    auto bwd = cast<fa::AttentionBackwardOp>(attention);
    config = configFromOp(bwd, flags);
    config.kind = "backward";
    config.deterministic = bwd.getDeterministic();
  }
  if (config.mma == "auto") {
    config.mma =
        config.chip == "sm_90a" && fitsWgmma(config) ? "wgmma" : "mma.sync";
  } else if (config.mma != "mma.sync" && config.mma != "wgmma") {
    return attention->emitError("fa-compile: --mma must be auto, mma.sync or "
                                "wgmma, got '")
           << config.mma << "'";
  }
  if (config.mma == "wgmma" && config.chip != "sm_90a")
    return attention->emitError("fa-compile: wgmma needs --chip=sm_90a, got ")
           << config.chip;
  if (config.backward() && config.mma == "wgmma") {
    // Two warpgroups of 64 keys with dK/dV in registers, 64-query blocks
    // (1.07-1.29x FA2 on the H200, docs/PERFORMANCE.md). At D <= 64 an
    // unmasked kernel without softcap also fits 128-query blocks in the
    // registers (1.22x instead of 1.09x); the mask and softcap arithmetic
    // of the others would spill there.
    if (config.warps == 0)
      config.warps = config.blockKV ? config.blockKV / 16 : 8;
    if (config.blockKV == 0)
      config.blockKV = 16 * config.warps;
    bool plain = !config.causal && !config.hasWindow() && !config.softcap;
    if (config.blockQ == 0)
      config.blockQ = std::max(config.d, config.dv) <= 64 && plain ? 128 : 64;
  } else if (config.backward()) {
    // The key-block kernel keeps dK, dV (f32) of 16 keys per warp in
    // registers. On sm_90, 128 keys over 8 warps against 64-query blocks
    // measured fastest on the H200 (docs/PERFORMANCE.md). sm_80's scalar
    // dQ atomics need more registers: 64 keys over 4 warps keep it free of
    // spills.
    // At D <= 64 the registers leave room for 128-query blocks (fewer Q/dO
    // shared-memory reads per key: 0.80-0.86x -> 0.87-0.93x FA2 there).
    bool sm80 = config.chip == "sm_80";
    if (config.blockQ == 0)
      config.blockQ = !sm80 && std::max(config.d, config.dv) <= 64 ? 128 : 64;
    if (config.blockKV == 0)
      config.blockKV = sm80 ? 64 : 128;
    if (config.warps == 0)
      config.warps = sm80 ? 4 : 8;
  } else if (config.mma == "wgmma") {
    // Measured on the H200 (docs/PERFORMANCE.md, tile sweep): at D = 128 two
    // warpgroups of 64 query rows share each K/V block of 128 keys (one
    // block per SM); at D <= 64 one warpgroup per block, so that 3 blocks
    // per SM overlap one's softmax with another's MMAs.
    bool large = std::max(config.d, config.dv) > 64;
    if (config.warps == 0)
      config.warps = config.blockQ ? config.blockQ / 16 : large ? 8 : 4;
    if (config.blockQ == 0)
      config.blockQ = 16 * config.warps;
    if (config.blockKV == 0)
      config.blockKV = 128;
  } else {
    if (config.warps == 0)
      config.warps = 4;
    // FlashAttention-2's sm8x tiles, which keep the kernel free of register
    // spills (docs/GPU.md): 128 query rows; 64 keys per block at D <= 64, 32
    // at larger D.
    if (config.blockQ == 0)
      config.blockQ = 128;
    if (config.blockKV == 0)
      config.blockKV = std::max(config.d, config.dv) > 64 ? 32 : 64;
  }
  if (config.dtype == "f32")
    return attention->emitError(
        "fa-compile: the GPU kernels take f16 or bf16 inputs, not f32");
  auto host = attention->getParentOfType<func::FuncOp>();
  std::string name =
      kernelName.empty() || defaultSet ? config.defaultName() : kernelName;
  std::string pipeline =
      config.backward()
          ? llvm::formatv("{0}{{block-q={1} block-kv={2} warps={3} chip={4} "
                          "wgmma={5}}",
                          pipelineName.empty() ? "fa-gpu-backward"
                                               : pipelineName.getValue(),
                          config.blockQ, config.blockKV, config.warps,
                          config.chip, config.mma == "wgmma")
                .str()
          : llvm::formatv(
                "{0}{{block-q={1} block-kv={2} warps={3} stages={4} chip={5} "
                "wgmma={6}}",
                pipelineName.empty() ? "fa-gpu-forward"
                                     : pipelineName.getValue(),
                config.blockQ, config.blockKV, config.warps, config.stages,
                config.chip, config.mma == "wgmma")
                .str();
  PassManager pm(&ctx);
  if (failed(parsePassPipeline(pipeline, pm, llvm::errs())))
    return module->emitError("fa-compile: cannot build pipeline '")
           << pipeline << "'";
  if (failed(pm.run(*module)))
    return module->emitError("fa-compile: the pipeline failed for ") << name;
  // Collect the launches and the binary.
  SmallVector<gpu::LaunchFuncOp> launches;
  module->walk([&](gpu::LaunchFuncOp op) { launches.push_back(op); });
  SmallVector<gpu::BinaryOp> binaries;
  module->walk([&](gpu::BinaryOp op) { binaries.push_back(op); });
  size_t expected = config.backward() ? 3 : 1;
  if (launches.size() != expected || binaries.size() != 1 ||
      binaries[0].getObjects().size() != 1)
    return module->emitError("fa-compile: expected ")
           << expected << " gpu.launch_func and one gpu.binary, got "
           << launches.size() << " and " << binaries.size();
  auto object = cast<gpu::ObjectAttr>(binaries[0].getObjects()[0]);
  StringRef ptx = object.getObject().getValue();
  // A call left to an external function means libdevice was not linked: the
  // PTX would not assemble.
  if (ptx.contains(".extern .func"))
    return module->emitError("fa-compile: the PTX calls external functions "
                             "(libdevice not found); set CUDA_HOME to a CUDA "
                             "toolkit with nvvm/libdevice");

  llvm::json::Object manifest{
      {"version", 1},
      {"name", name},
      {"kind", config.kind},
      {"chip", config.chip},
      {"dtype", config.dtype},
      {"head_dim", config.d},
      {"value_head_dim", config.dv},
      {"causal", config.causal},
      {"window", llvm::json::Array{config.windowLeft, config.windowRight}},
      {"softcap", config.softcap ? llvm::json::Value(*config.softcap)
                                 : llvm::json::Value(nullptr)},
      {"scale", config.effectiveScale()},
      {"scale_is_default", !config.scale.has_value()},
      {"block_q", config.blockQ},
      {"block_kv", config.blockKV},
      {"warps", config.warps},
      {"mma", config.mma},
  };
  if (!config.backward()) {
    FailureOr<llvm::json::Object> k = describeLaunch(
        launches[0], host, kForwardArgs,
        llvm::json::Array{
            llvm::formatv("ceildiv(Nq, {0})", config.blockQ).str(), "Hq", "B"});
    if (failed(k))
      return failure();
    manifest["stages"] = config.stages;
    for (auto &[key, value] : *k)
      manifest[key] = std::move(value);
  } else {
    manifest["deterministic"] = config.deterministic;
    llvm::json::Array kernels, workspace;
    std::string rows = "ceildiv(Nq, 128)";
    for (gpu::LaunchFuncOp launch : launches) {
      StringRef entry = launch.getKernelName().getValue();
      llvm::json::Array grid;
      if (entry.ends_with("_preprocess_kernel") ||
          entry.ends_with("_dq_convert_kernel"))
        grid = llvm::json::Array{rows, "Hq", "B"};
      else if (entry.ends_with("_dq_kernel"))
        grid = llvm::json::Array{
            llvm::formatv("ceildiv(Nq, {0})", config.blockQ).str(), "Hq", "B"};
      else
        grid = llvm::json::Array{
            llvm::formatv("ceildiv(Nk, {0})", config.blockKV).str(), "Hkv",
            "B"};
      FailureOr<llvm::json::Object> k =
          describeLaunch(launch, host, kBackwardArgs, std::move(grid));
      if (failed(k))
        return failure();
      kernels.push_back(std::move(*k));
    }
    for (const ParamInfo &ws : kWorkspace) {
      if (config.deterministic && StringRef(ws.name) == "dq_accum")
        continue;
      llvm::json::Array dims;
      for (const char *d : ws.dims)
        if (d)
          dims.push_back(d);
      workspace.push_back(llvm::json::Object{
          {"name", ws.name}, {"dtype", "f32"}, {"dims", std::move(dims)}});
    }
    manifest["kernels"] = std::move(kernels);
    manifest["workspace"] = std::move(workspace);
  }
  if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
    return module->emitError("fa-compile: cannot create ")
           << outputDir << ": " << ec.message();
  auto write =
      [&](StringRef ext,
          llvm::function_ref<void(raw_ostream &)> fn) -> LogicalResult {
    SmallString<256> path(outputDir);
    llvm::sys::path::append(path, name + ext);
    std::string error;
    auto file = openOutputFile(path, &error);
    if (!file)
      return module->emitError("fa-compile: ") << error;
    fn(file->os());
    file->keep();
    llvm::outs() << "wrote " << path << "\n";
    return success();
  };
  if (failed(write(".ptx", [&](raw_ostream &os) { os << ptx; })) ||
      failed(write(".json", [&](raw_ostream &os) {
        os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest)))
           << "\n";
      })))
    return failure();
  if (emitMLIR &&
      failed(write(".mlir", [&](raw_ostream &os) { module->print(os); })))
    return failure();
  return success();
}

/// Parses the flags into a config, with precise errors.
FailureOr<KernelConfig> configFromFlags() {
  KernelConfig c;
  c.kind = kind;
  if (c.kind != "forward" && c.kind != "backward") {
    llvm::errs() << "fa-compile: unsupported --kind '" << c.kind
                 << "' (supported: forward, backward)\n";
    return failure();
  }
  c.deterministic = deterministic;
  if (c.deterministic && c.kind != "backward") {
    llvm::errs() << "fa-compile: --deterministic applies to --kind "
                    "backward only\n";
    return failure();
  }
  c.d = headDim;
  c.dv = valueHeadDim ? valueHeadDim.getValue() : headDim.getValue();
  c.dtype = dtype;
  if (c.dtype != "f16" && c.dtype != "bf16") {
    llvm::errs() << "fa-compile: --dtype must be f16 or bf16, got '" << c.dtype
                 << "'\n";
    return failure();
  }
  c.causal = causal;
  if (!window.empty()) {
    auto [l, r] = StringRef(window).split(',');
    if (l.trim().getAsInteger(10, c.windowLeft) ||
        r.trim().getAsInteger(10, c.windowRight)) {
      llvm::errs() << "fa-compile: --window must be 'left,right', got '"
                   << window << "'\n";
      return failure();
    }
  }
  if (softcap.getNumOccurrences())
    c.softcap = softcap;
  if (scale.getNumOccurrences())
    c.scale = scale;
  c.chip = chip;
  if (c.chip != "sm_80" && c.chip != "sm_90a") {
    llvm::errs() << "fa-compile: --chip must be sm_80 or sm_90a, got '"
                 << c.chip << "'\n";
    return failure();
  }
  // 0 = pick per head dim (see compileOne).
  c.blockQ = blockQ;
  c.blockKV = blockKV;
  c.warps = warps;
  c.stages = stages;
  c.mma = mma;
  return c;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  registerAllPasses();
  fa::registerAllFAPasses();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "FlashMLIR compile driver: fa.attention -> PTX "
                              "+ JSON manifest\n");

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  registry.insert<fa::FADialect>();
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();

  FailureOr<KernelConfig> flags = configFromFlags();
  if (failed(flags))
    return 1;

  SmallVector<KernelConfig> configs;
  if (defaultSet) {
    for (StringRef kindName : {"forward", "backward"})
      for (int64_t d : {64, 128})
        for (StringRef t : {"f16", "bf16"})
          for (bool c : {false, true})
            for (StringRef ch : {"sm_80", "sm_90a"}) {
              KernelConfig k = *flags;
              k.kind = kindName.str();
              k.d = k.dv = d;
              k.dtype = t.str();
              k.causal = c;
              k.chip = ch.str();
              configs.push_back(k);
            }
  } else {
    configs.push_back(*flags);
  }

  for (const KernelConfig &config : configs) {
    OwningOpRef<ModuleOp> module;
    if (!inputFile.empty() && !defaultSet) {
      module = parseSourceFile<ModuleOp>(inputFile, &ctx);
    } else {
      module = parseSourceString<ModuleOp>(config.backward()
                                               ? buildBackwardModule(config)
                                               : buildForwardModule(config),
                                           &ctx, "fa-compile-config");
    }
    if (!module)
      return 1;
    if (failed(compileOne(ctx, config, std::move(module))))
      return 1;
  }
  return 0;
}
