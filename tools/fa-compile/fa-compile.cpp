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
#include "fa/Dialect/FAGPU/IR/FAGPU.h"
#include "fa/Dialect/FAPTX/IR/FAPTX.h"
#include "fa/InitAllPasses.h"
#include "fa/Pipelines/GPUPipelines.h"
#include "fa/Pipelines/LaunchDescription.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
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
static cl::opt<std::string> softcap(
    "softcap",
    cl::desc("Soft-capped scores (a kernel kind); the value is a run-time "
             "parameter: '--softcap' or '--softcap=V', V is checked (> 0) but "
             "does not change the kernel"),
    cl::ValueOptional, cl::init(""), cl::cat(category));
static cl::opt<double>
    scale("scale",
          cl::desc("Accepted for compatibility and checked (> 0): the softmax "
                   "scale is a run-time parameter of every kernel"),
          cl::init(0.0), cl::cat(category));
static cl::opt<std::string> chip("chip", cl::desc("sm_80 or sm_90a"),
                                 cl::init("sm_80"), cl::cat(category));
static cl::opt<int64_t> blockQ("block-q",
                               cl::desc("Query rows per block (0 = choose)"),
                               cl::init(0), cl::cat(category));
static cl::opt<int64_t> blockKV("block-kv",
                                cl::desc("Keys per block (0 = choose)"),
                                cl::init(0), cl::cat(category));
static cl::opt<int64_t> warps("warps",
                              cl::desc("Warps per thread block (0 = choose)"),
                              cl::init(0), cl::cat(category));
static cl::opt<int64_t>
    stages("stages",
           cl::desc("Forward: K/V shared-memory stages, 1 or 2 (0 = choose)"),
           cl::init(0), cl::cat(category));
static cl::opt<int64_t> dkvSplit(
    "dkv-split",
    cl::desc("Backward: thread blocks per key block, each with a slice of "
             "the dK/dV columns (0 = choose)"),
    cl::init(0), cl::cat(category));
static cl::opt<std::string>
    mma("mma",
        cl::desc("Tensor-core instructions: auto (wgmma on sm_90a where the "
                 "op allows it, else mma.sync), mma.sync or wgmma (sm_90a)"),
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
static cl::opt<bool> noSpillCheck(
    "no-spill-check",
    cl::desc("Take the first configuration that fits without asking ptxas "
             "whether it spills registers"),
    cl::init(false), cl::cat(category));
static cl::opt<std::string> schedule(
    "schedule",
    cl::desc("auto (the kernel configuration's choice), cooperative or "
             "warp_specialized (a TMA producer warpgroup feeding the "
             "consumer warpgroups; wgmma, docs/HOPPER.md; the backward's "
             "on request only)"),
    cl::init("auto"), cl::cat(category));
static cl::opt<std::string> tileScheduler(
    "tile-scheduler",
    cl::desc("auto (the kernel configuration's choice), grid, "
             "persistent (warp_specialized: one thread block per "
             "multiprocessor looping over the tiles; the backward's key "
             "blocks too) or dynamic (forward: persistent, each block's "
             "next tile from an atomic counter in a workspace the launcher "
             "zeroes)"),
    cl::init("auto"), cl::cat(category));
static cl::opt<bool>
    warpSpecialize("warp-specialize",
                   cl::desc("Same as --schedule=warp_specialized"),
                   cl::init(false), cl::cat(category));
static cl::opt<bool> intraWarpgroupOverlap(
    "intra-warpgroup-overlap",
    cl::desc("--warp-specialize: the softmax of key block j runs under the "
             "P V GEMM of block j - 1 (default on; =false to compare)"),
    cl::init(true), cl::cat(category));
static cl::opt<bool> pingPong(
    "ping-pong",
    cl::desc("--warp-specialize: consumer warpgroups take turns at issuing "
             "their GEMMs (default on; =false to compare)"),
    cl::init(true), cl::cat(category));
static cl::opt<std::string> kvSplits(
    "kv-splits",
    cl::desc("Forward: split each query block's keys into chunks computed in "
             "parallel and merged by their LSEs (fa-split-kv, for decoding): "
             "none (default), auto (a count chosen at run time from the "
             "problem and the device's SM count) or a number"),
    cl::init("none"), cl::cat(category));
static cl::opt<std::string> form(
    "form",
    cl::desc("Dense ([B, H, N, D] tensors, the default), varlen "
             "(packed sequences: [T, H, D] tensors with cumulative offsets "
             "cu_seqlens_q / cu_seqlens_k and max_seqlen_q, forward and "
             "backward; the backward also takes max_seqlen_k) or paged "
             "(forward: q [B, H, Nq, D] against key/value pages "
             "[P, S, Hkv, D] of a page table, cache_seqlens keys per batch)"),
    cl::init("dense"), cl::cat(category));
static cl::opt<int64_t>
    pageSize("page-size",
             cl::desc("--form=paged: keys per page S (a multiple of 16; the "
                      "key blocks divide it)"),
             cl::init(256), cl::cat(category));
static cl::opt<std::string> modifiersFile(
    "modifiers",
    cl::desc("A file whose first fa.attention holds score_mod / mask_mod "
             "regions and captures (e.g. flashmlir.trace_modifiers(...)"
             ".module(...)): the forward kernel computes them; the captures "
             "become memref arguments capture0, capture1, ..."),
    cl::init(""), cl::cat(category));
static cl::opt<std::string> modifiersKey(
    "modifiers-key",
    cl::desc("With --modifiers: a string the manifest keeps as "
             "modifiers.key (a runtime's cache key of the modifiers)"),
    cl::init(""), cl::cat(category));
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
  /// Whether there is a sliding window; its sizes are kernel parameters
  /// unless an input IR file's op has them built in (constantWindow).
  bool window = false;
  bool constantWindow = false;
  int64_t windowLeft = -1, windowRight = -1;
  /// Whether scores are soft-capped; the value is a kernel parameter.
  bool softcap = false;
  /// Constants of an input IR file's op (flags never set them): such a
  /// kernel has them built in instead of taking them as parameters.
  std::optional<double> constantScale, constantSoftcap;
  std::string chip = "sm_80";
  bool deterministic = false;
  /// What the user fixes of the kernel configuration (0 / "auto": chosen
  /// by fa-select-kernel-config).
  int64_t blockQ = 0, blockKV = 0, warps = 0, stages = 0, dkvSplit = 0;
  std::string mma = "auto";
  std::string schedule = "auto";
  std::string tileScheduler = "auto";
  bool intraWarpgroupOverlap = true, pingPong = true;
  /// Split-KV: 0 none, -1 a run-time count, N that many chunks.
  int64_t kvSplits = 0;
  /// "dense", "varlen" (packed sequences) or "paged" (a paged cache of
  /// `pageSize` keys per page).
  std::string form = "dense";
  int64_t pageSize = 0;
  bool backward() const { return kind == "backward"; }

  bool hasWindow() const { return window; }

  std::string defaultName() const {
    std::string n =
        llvm::formatv("{0}_d{1}", backward() ? "fa_bwd" : "fa_fwd", d);
    if (form == "varlen")
      n = llvm::formatv("{0}_varlen_d{1}", backward() ? "fa_bwd" : "fa_fwd", d);
    else if (form == "paged")
      n = llvm::formatv("fa_fwd_paged{0}_d{1}", pageSize, d);
    if (dv != d)
      n += llvm::formatv("_dv{0}", dv).str();
    n += "_" + dtype;
    if (causal)
      n += "_causal";
    if (hasWindow() && !constantWindow)
      n += "_window";
    else if (hasWindow())
      n += llvm::formatv("_w{0}_{1}",
                         windowLeft < 0 ? "inf" : std::to_string(windowLeft),
                         windowRight < 0 ? "inf" : std::to_string(windowRight))
               .str();
    if (softcap)
      n += "_softcap";
    if (kvSplits < 0)
      n += "_splitkv";
    else if (kvSplits > 0)
      n += llvm::formatv("_splitkv{0}", kvSplits).str();
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
/// layouts), the op's attribute text, and the run-time scalars: the
/// function's trailing f32 arguments (`scalarArgs`), which the op takes as
/// operands (`scalarTypes`, the op's extra operand types).
struct FunctionParts {
  std::string qm, vm, qt, vt, attrs, scalarArgs, scalarTypes;
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
  FunctionParts p{memref4(c.d), memref4(c.dv), tensor4(c.d), tensor4(c.dv)};
  // The mask: causal is a right bound of 0; a run-time window takes its
  // sizes as operands (a causal one only the left).
  auto side = [](int64_t w) {
    return w < 0 ? std::string("inf") : std::to_string(w);
  };
  bool runtimeWindow = c.hasWindow() && !c.constantWindow;
  if (c.hasWindow() && c.constantWindow)
    p.attrs += llvm::formatv(" mask<window {0}, {1}>", side(c.windowLeft),
                             c.causal ? std::string("0") : side(c.windowRight))
                   .str();
  else if (runtimeWindow && c.causal)
    p.attrs += " mask<window ?, 0>(%window_left)";
  else if (runtimeWindow)
    p.attrs += " mask<window ?, ?>(%window_left, %window_right)";
  else if (c.causal)
    p.attrs += " mask<causal>";
  // The operand types in the op's operand order: softcap, scale, window.
  if (c.softcap) {
    p.attrs += " softcap %softcap";
    p.scalarArgs += ", %softcap: f32";
    p.scalarTypes += ", f32";
  }
  p.attrs += " scale %scale";
  p.scalarArgs += ", %scale: f32";
  p.scalarTypes += ", f32";
  if (runtimeWindow) {
    // (A causal kernel's function keeps the right size, unused.)
    p.scalarArgs += ", %window_left: i64, %window_right: i64";
    p.scalarTypes += c.causal ? ", i64" : ", i64, i64";
  }
  if (c.backward() && c.deterministic)
    p.attrs += " deterministic";
  return p;
}

/// A packed [H, T, d] tensor of the kernel's element type, as a memref (any
/// strides but unit rows) and as a tensor.
std::string packedMemref(const KernelConfig &c, int64_t d) {
  return llvm::formatv("memref<?x?x{0}x{1}, strided<[?, ?, 1], offset: ?>>", d,
                       c.dtype)
      .str();
}
std::string packedTensor(const KernelConfig &c, int64_t d) {
  return llvm::formatv("tensor<?x?x{0}x{1}>", d, c.dtype).str();
}

/// The packed forward's function: fa.attention_varlen between memrefs
/// ([H, T, D] views of the [T, H, D] tensors; contiguous i32 offsets).
std::string buildVarlenModule(const KernelConfig &c) {
  FunctionParts p = functionParts(c);
  std::string lm = "memref<?x?xf32, strided<[?, ?], offset: ?>>";
  return llvm::formatv(
             R"mlir(
func.func @fa_fwd_varlen(%q: {0}, %k: {0}, %v: {1}, %out: {1}, %lse: {2},
                         %cu_seqlens_q: memref<?xi32>, %cu_seqlens_k: memref<?xi32>,
                         %max_seqlen_q: index{6}) {{
  %qt = bufferization.to_tensor %q restrict : {0} to {3}
  %kt = bufferization.to_tensor %k restrict : {0} to {3}
  %vt = bufferization.to_tensor %v restrict : {1} to {4}
  %cq = bufferization.to_tensor %cu_seqlens_q restrict : memref<?xi32> to tensor<?xi32>
  %ck = bufferization.to_tensor %cu_seqlens_k restrict : memref<?xi32> to tensor<?xi32>
  %o, %l = fa.attention_varlen %qt, %kt, %vt seqlens(%cq, %ck) max_seqlen_q(%max_seqlen_q){5} : ({3}, {3}, {4}, tensor<?xi32>, tensor<?xi32>, index{7}) -> ({4}, tensor<?x?xf32>)
  bufferization.materialize_in_destination %o in restrict writable %out : ({4}, {1}) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<?x?xf32>, {2}) -> ()
  return
}
)mlir",
             packedMemref(c, c.d), packedMemref(c, c.dv), lm,
             packedTensor(c, c.d), packedTensor(c, c.dv), p.attrs, p.scalarArgs,
             p.scalarTypes)
      .str();
}

/// The paged forward's function: fa.attention_paged between memrefs (the
/// pools as [P, Hkv, S, D] views of [P, S, Hkv, D] tensors).
std::string buildPagedModule(const KernelConfig &c) {
  FunctionParts p = functionParts(c);
  auto pool = [&](int64_t d) {
    return llvm::formatv(
               "memref<?x?x{0}x{1}x{2}, strided<[?, ?, ?, 1], offset: ?>>",
               c.pageSize, d, c.dtype)
        .str();
  };
  auto poolTensor = [&](int64_t d) {
    return llvm::formatv("tensor<?x?x{0}x{1}x{2}>", c.pageSize, d, c.dtype)
        .str();
  };
  std::string lm = "memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>";
  return llvm::formatv(
             R"mlir(
func.func @fa_fwd_paged(%q: {0}, %k_cache: {5}, %v_cache: {6}, %out: {1}, %lse: {2},
                        %page_table: memref<?x?xi32>, %cache_seqlens: memref<?xi32>{9}) {{
  %qt = bufferization.to_tensor %q restrict : {0} to {3}
  %kt = bufferization.to_tensor %k_cache restrict : {5} to {7}
  %vt = bufferization.to_tensor %v_cache restrict : {6} to {8}
  %pt = bufferization.to_tensor %page_table restrict : memref<?x?xi32> to tensor<?x?xi32>
  %nt = bufferization.to_tensor %cache_seqlens restrict : memref<?xi32> to tensor<?xi32>
  %o, %l = fa.attention_paged %qt, %kt, %vt pages(%pt) seqlens(%nt){10} : ({3}, {7}, {8}, tensor<?x?xi32>, tensor<?xi32>{11}) -> ({4}, tensor<?x?x?xf32>)
  bufferization.materialize_in_destination %o in restrict writable %out : ({4}, {1}) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : (tensor<?x?x?xf32>, {2}) -> ()
  return
}
)mlir",
             p.qm, p.vm, lm, p.qt, p.vt, pool(c.d), pool(c.dv), poolTensor(c.d),
             poolTensor(c.dv), p.scalarArgs, p.attrs, p.scalarTypes)
      .str();
}

/// The forward's function: fa.attention between memrefs.
std::string buildForwardModule(const KernelConfig &c) {
  if (c.form == "varlen")
    return buildVarlenModule(c);
  if (c.form == "paged")
    return buildPagedModule(c);
  FunctionParts p = functionParts(c);
  std::string lm = "memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>";
  std::string lt = "tensor<?x?x?xf32>";
  return llvm::formatv(
             R"mlir(
func.func @fa_fwd(%q: {0}, %k: {0}, %v: {1}, %out: {1}, %lse: {2}{7}) {{
  %qt = bufferization.to_tensor %q restrict : {0} to {3}
  %kt = bufferization.to_tensor %k restrict : {0} to {3}
  %vt = bufferization.to_tensor %v restrict : {1} to {4}
  %o, %l = fa.attention %qt, %kt, %vt{6} : ({3}, {3}, {4}{8}) -> ({4}, {5})
  bufferization.materialize_in_destination %o in restrict writable %out : ({4}, {1}) -> ()
  bufferization.materialize_in_destination %l in restrict writable %lse : ({5}, {2}) -> ()
  return
}
)mlir",
             p.qm, p.vm, lm, p.qt, p.vt, lt, p.attrs, p.scalarArgs,
             p.scalarTypes)
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
                  %dq: {0}, %dk: {0}, %dv: {1}{7}) {{
  %qt = bufferization.to_tensor %q restrict : {0} to {3}
  %kt = bufferization.to_tensor %k restrict : {0} to {3}
  %vt = bufferization.to_tensor %v restrict : {1} to {4}
  %ot = bufferization.to_tensor %out restrict : {1} to {4}
  %dot = bufferization.to_tensor %dout restrict : {1} to {4}
  %lt = bufferization.to_tensor %lse restrict : {2} to {5}
  %gq, %gk, %gv = fa.attention_backward %qt, %kt, %vt, %ot, %lt, %dot{6} : ({3}, {3}, {4}, {4}, {5}, {4}{8}) -> ({3}, {3}, {4})
  bufferization.materialize_in_destination %gq in restrict writable %dq : ({3}, {0}) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : ({3}, {0}) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : ({4}, {1}) -> ()
  return
}
)mlir",
             p.qm, p.vm, lm, p.qt, p.vt, lt, p.attrs, p.scalarArgs,
             p.scalarTypes)
      .str();
}

/// The packed backward's function: fa.attention_varlen_backward between
/// memrefs ([H, T, D] views of [T, H, D] tensors), the dense backward's
/// arguments followed by the offsets and both maximum lengths.
std::string buildVarlenBackwardModule(const KernelConfig &c) {
  FunctionParts p = functionParts(c);
  std::string lm = "memref<?x?xf32, strided<[?, 1], offset: ?>>";
  std::string lt = "tensor<?x?xf32>";
  return llvm::formatv(
             R"mlir(
func.func @fa_bwd_varlen(%q: {0}, %k: {0}, %v: {1}, %out: {1}, %dout: {1}, %lse: {2},
                         %dq: {0}, %dk: {0}, %dv: {1},
                         %cu_seqlens_q: memref<?xi32>, %cu_seqlens_k: memref<?xi32>,
                         %max_seqlen_q: index, %max_seqlen_k: index{7}) {{
  %qt = bufferization.to_tensor %q restrict : {0} to {3}
  %kt = bufferization.to_tensor %k restrict : {0} to {3}
  %vt = bufferization.to_tensor %v restrict : {1} to {4}
  %ot = bufferization.to_tensor %out restrict : {1} to {4}
  %dot = bufferization.to_tensor %dout restrict : {1} to {4}
  %lt = bufferization.to_tensor %lse restrict : {2} to {5}
  %cq = bufferization.to_tensor %cu_seqlens_q restrict : memref<?xi32> to tensor<?xi32>
  %ck = bufferization.to_tensor %cu_seqlens_k restrict : memref<?xi32> to tensor<?xi32>
  %gq, %gk, %gv = fa.attention_varlen_backward %qt, %kt, %vt, %ot, %lt, %dot seqlens(%cq, %ck) max_seqlen_q(%max_seqlen_q) max_seqlen_k(%max_seqlen_k){6} : ({3}, {3}, {4}, {4}, {5}, {4}, tensor<?xi32>, tensor<?xi32>, index, index{8}) -> ({3}, {3}, {4})
  bufferization.materialize_in_destination %gq in restrict writable %dq : ({3}, {0}) -> ()
  bufferization.materialize_in_destination %gk in restrict writable %dk : ({3}, {0}) -> ()
  bufferization.materialize_in_destination %gv in restrict writable %dv : ({4}, {1}) -> ()
  return
}
)mlir",
             packedMemref(c, c.d), packedMemref(c, c.dv), lm,
             packedTensor(c, c.d), packedTensor(c, c.dv), lt, p.attrs,
             p.scalarArgs, p.scalarTypes)
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
  // (compileOne accepts `#fa.mask` masks only.)
  auto mask = dyn_cast_or_null<fa::MaskAttr>(op.getMaskAttr());
  c.causal = mask && mask.getRight() == 0;
  c.windowLeft = c.windowRight = -1;
  // Causal alone (a right bound of 0) is not a window.
  c.window = mask && !mask.isFull() && !mask.isCausal();
  c.constantWindow = c.window && mask.getNumDynamicSides() == 0;
  if (c.constantWindow) {
    c.windowLeft = mask.getLeft();
    c.windowRight = mask.getRight();
  }
  c.softcap = op.hasSoftcap();
  c.constantSoftcap.reset();
  if (auto s = op.getSoftcapAttr())
    c.constantSoftcap = s.getValueAsDouble();
  c.constantScale.reset();
  if (FloatAttr s = op.getStaticScale())
    c.constantScale = s.getValueAsDouble();
  return c;
}

/// The host function's memref arguments in order, as the launcher names
/// them (fa-compile's ABI: the functions it builds, and an input file's).
/// Function-local statics: no global constructors.
ArrayRef<fa::HostArgument> forwardArgs() {
  static const SmallVector<fa::HostArgument> args = {
      {"q", {"B", "Hq", "Nq", "D"}},
      {"k", {"B", "Hkv", "Nk", "D"}},
      {"v", {"B", "Hkv", "Nk", "Dv"}},
      {"out", {"B", "Hq", "Nq", "Dv"}},
      {"lse", {"B", "Hq", "Nq"}}};
  return args;
}
/// Packed sequences: [H, T, D] views; B1 = B + 1 offsets; max_seqlen_q a
/// scalar (no dims) that grid expressions name.
ArrayRef<fa::HostArgument> varlenArgs() {
  static const SmallVector<fa::HostArgument> args = {
      {"q", {"Hq", "Tq", "D"}},   {"k", {"Hkv", "Tk", "D"}},
      {"v", {"Hkv", "Tk", "Dv"}}, {"out", {"Hq", "Tq", "Dv"}},
      {"lse", {"Hq", "Tq"}},      {"cu_seqlens_q", {"B1"}},
      {"cu_seqlens_k", {"B1"}},   {"max_seqlen_q", {}}};
  return args;
}
/// A paged cache: pools [P, Hkv, S, D] (views of [P, S, Hkv, D]), page table
/// [B, maxPages].
ArrayRef<fa::HostArgument> pagedArgs() {
  static const SmallVector<fa::HostArgument> args = {
      {"q", {"B", "Hq", "Nq", "D"}},
      {"k_cache", {"P", "Hkv", "S", "D"}},
      {"v_cache", {"P", "Hkv", "S", "Dv"}},
      {"out", {"B", "Hq", "Nq", "Dv"}},
      {"lse", {"B", "Hq", "Nq"}},
      {"page_table", {"B", "MaxPages"}},
      {"cache_seqlens", {"B"}}};
  return args;
}
/// The packed backward: the dense backward's tensors as [H, T, X] views,
/// then the offsets and both maximum lengths.
ArrayRef<fa::HostArgument> varlenBackwardArgs() {
  static const SmallVector<fa::HostArgument> args = {
      {"q", {"Hq", "Tq", "D"}},     {"k", {"Hkv", "Tk", "D"}},
      {"v", {"Hkv", "Tk", "Dv"}},   {"out", {"Hq", "Tq", "Dv"}},
      {"dout", {"Hq", "Tq", "Dv"}}, {"lse", {"Hq", "Tq"}},
      {"dq", {"Hq", "Tq", "D"}},    {"dk", {"Hkv", "Tk", "D"}},
      {"dv", {"Hkv", "Tk", "Dv"}},  {"cu_seqlens_q", {"B1"}},
      {"cu_seqlens_k", {"B1"}},     {"max_seqlen_q", {}},
      {"max_seqlen_k", {}}};
  return args;
}
ArrayRef<fa::HostArgument> backwardArgs() {
  static const SmallVector<fa::HostArgument> args = {
      {"q", {"B", "Hq", "Nq", "D"}},     {"k", {"B", "Hkv", "Nk", "D"}},
      {"v", {"B", "Hkv", "Nk", "Dv"}},   {"out", {"B", "Hq", "Nq", "Dv"}},
      {"dout", {"B", "Hq", "Nq", "Dv"}}, {"lse", {"B", "Hq", "Nq"}},
      {"dq", {"B", "Hq", "Nq", "D"}},    {"dk", {"B", "Hkv", "Nk", "D"}},
      {"dv", {"B", "Hkv", "Nk", "Dv"}}};
  return args;
}

StringRef dtypeName(Type elt) {
  if (elt.isInteger(32))
    return "i32";
  if (elt.isInteger(64))
    return "i64";
  if (elt.isInteger(1))
    return "i1";
  return elt.isBF16() ? "bf16" : elt.isF16() ? "f16" : "f32";
}

/// The run-time scalars of the host function: argument number -> role
/// ("scale", "softcap", "window_left", "window_right"), the names Python
/// binds their values to.
using ScalarRoles = llvm::SmallDenseMap<unsigned, StringRef>;

/// The role of a run-time scalar kernel parameter: a scalar argument of the
/// host function, or a factor the conversion computes from them on the host
/// (ScoreFactors): "log2e_<role>" (the role times f32 log2(e)) and
/// "scale_over_softcap". The launcher computes those in f32 as the host IR
/// does (python/flashmlir/_interface.py).
std::optional<std::string> scalarRole(Value v, func::FuncOp host,
                                      const ScalarRoles &roles) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    if (arg.getOwner() != &host.getBody().front() ||
        !roles.count(arg.getArgNumber()))
      return std::nullopt;
    return roles.lookup(arg.getArgNumber()).str();
  }
  Operation *op = v.getDefiningOp();
  if (!op || op->getNumOperands() != 2)
    return std::nullopt;
  if (isa<arith::MulFOp>(op)) {
    for (unsigned i : {0u, 1u}) {
      FloatAttr c;
      if (!matchPattern(op->getOperand(1 - i), m_Constant(&c)) ||
          c.getValueAsDouble() !=
              static_cast<double>(static_cast<float>(llvm::numbers::log2e)))
        continue;
      if (std::optional<std::string> r =
              scalarRole(op->getOperand(i), host, roles))
        return "log2e_" + *r;
    }
    return std::nullopt;
  }
  // scale / softcap; the softcap may be a constant (the manifest's number:
  // fa-recognize-builtin-modifiers' softcap from a score_mod).
  FloatAttr cap;
  if (isa<arith::DivFOp>(op) &&
      scalarRole(op->getOperand(0), host, roles) == "scale" &&
      (scalarRole(op->getOperand(1), host, roles) == "softcap" ||
       matchPattern(op->getOperand(1), m_Constant(&cap))))
    return std::string("scale_over_softcap");
  return std::nullopt;
}

/// The manifest entry of a TMA tensor map the runtime encodes: the map of
/// a memref argument or workspace buffer with the box, swizzle, L2
/// promotion and fill of the host op's descriptor
/// (python/flashmlir/_tensormap.py reads it).
FailureOr<llvm::json::Object>
describeTensorMap(fagpu::HostTensorMapOp map, func::FuncOp host,
                  ArrayRef<fa::HostArgument> args) {
  std::string tensor;
  if (auto arg = dyn_cast<BlockArgument>(map.getSource())) {
    if (arg.getOwner() != &host.getBody().front() ||
        arg.getArgNumber() >= args.size())
      return failure();
    tensor = args[arg.getArgNumber()].name.str();
  } else if (auto alloc = map.getSource().getDefiningOp<memref::AllocOp>()) {
    auto tag = alloc->getAttrOfType<StringAttr>("fa.workspace");
    if (!tag)
      return failure();
    tensor = tag.getValue().str();
  } else {
    return failure();
  }
  auto descriptor = cast<nvgpu::TensorMapDescriptorType>(map.getDescriptor());
  MemRefType box = descriptor.getTensor();
  llvm::json::Array boxDims;
  for (int64_t d : box.getShape())
    boxDims.push_back(d);
  StringRef swizzle;
  switch (descriptor.getSwizzle()) {
  case nvgpu::TensorMapSwizzleKind::SWIZZLE_NONE:
    swizzle = "none";
    break;
  case nvgpu::TensorMapSwizzleKind::SWIZZLE_32B:
    swizzle = "32B";
    break;
  case nvgpu::TensorMapSwizzleKind::SWIZZLE_64B:
    swizzle = "64B";
    break;
  case nvgpu::TensorMapSwizzleKind::SWIZZLE_128B:
    swizzle = "128B";
    break;
  }
  StringRef l2;
  switch (descriptor.getL2promo()) {
  case nvgpu::TensorMapL2PromoKind::L2PROMO_NONE:
    l2 = "none";
    break;
  case nvgpu::TensorMapL2PromoKind::L2PROMO_64B:
    l2 = "64B";
    break;
  case nvgpu::TensorMapL2PromoKind::L2PROMO_128B:
    l2 = "128B";
    break;
  case nvgpu::TensorMapL2PromoKind::L2PROMO_256B:
    l2 = "256B";
    break;
  }
  if (descriptor.getInterleave() !=
      nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE)
    return failure();
  return llvm::json::Object{
      {"name", tensor + "_map"},
      {"type", "tensormap"},
      {"tensor", tensor},
      {"dtype", dtypeName(box.getElementType())},
      {"box", std::move(boxDims)},
      {"swizzle", swizzle},
      {"l2_promotion", l2},
      {"oob_fill", descriptor.getOob() == nvgpu::TensorMapOOBKind::OOB_NAN
                       ? "nan"
                       : "zero"}};
}

/// Describes one kernel parameter of a host-side gpu.launch_func: a function
/// argument (a memref, or a run-time scalar of `roles`) or a workspace
/// buffer (a memref.alloc the conversion tagged, its sizes read from it).
FailureOr<llvm::json::Object> describeParam(Value operand, unsigned position,
                                            func::FuncOp host,
                                            ArrayRef<fa::HostArgument> args,
                                            const ScalarRoles &roles) {
  if (auto map = operand.getDefiningOp<fagpu::HostTensorMapOp>())
    return describeTensorMap(map, host, args);
  auto memrefType = dyn_cast<MemRefType>(operand.getType());
  if (operand.getType().isIndex()) {
    // A size the host computes (split-KV: the split count's parts, the
    // device's SM count), as an expression the launcher evaluates.
    FailureOr<std::string> value = fa::describeSize(operand, host, args);
    if (failed(value))
      return failure();
    return llvm::json::Object{{"name", "size_" + std::to_string(position)},
                              {"type", "i64"},
                              {"value", *value}};
  }
  if (!memrefType) {
    Type type = operand.getType();
    std::optional<std::string> role = scalarRole(operand, host, roles);
    if (!role || !(type.isF32() || type.isInteger(64)))
      return failure();
    return llvm::json::Object{{"name", *role},
                              {"type", type.isF32() ? "f32" : "i64"},
                              {"role", *role},
                              {"value", *role}};
  }
  std::string name;
  llvm::json::Array dims;
  if (auto arg = dyn_cast<BlockArgument>(operand)) {
    if (arg.getOwner() != &host.getBody().front() ||
        arg.getArgNumber() >= args.size())
      return failure();
    const fa::HostArgument &a = args[arg.getArgNumber()];
    if (static_cast<int64_t>(a.dims.size()) != memrefType.getRank())
      return failure();
    name = a.name.str();
    for (StringRef d : a.dims)
      dims.push_back(d);
  } else if (auto alloc = operand.getDefiningOp<memref::AllocOp>()) {
    auto tag = alloc->getAttrOfType<StringAttr>("fa.workspace");
    if (!tag)
      return failure();
    FailureOr<SmallVector<std::string, 4>> sizes =
        fa::describeAllocation(alloc, host, args);
    if (failed(sizes))
      return failure();
    name = tag.getValue().str();
    for (std::string &d : *sizes)
      dims.push_back(std::move(d));
  } else {
    return failure();
  }
  return llvm::json::Object{{"name", name},
                            {"type", "memref"},
                            {"rank", memrefType.getRank()},
                            {"dtype", dtypeName(memrefType.getElementType())},
                            {"dims", std::move(dims)}};
}

std::optional<int64_t> constantOf(Value v) {
  APInt value;
  if (v && matchPattern(v, m_ConstantInt(&value)))
    return value.getSExtValue();
  return std::nullopt;
}

/// The buffers the host function allocates for the kernels, in order: name,
/// element type, dims, and `"init": "zero"` for those the launcher must
/// zero before the launches (`fa.workspace_zeroed`: the dynamic tile
/// scheduler's counter).
FailureOr<llvm::json::Array>
describeWorkspace(func::FuncOp host, ArrayRef<fa::HostArgument> args) {
  llvm::json::Array workspace;
  WalkResult walk = host.walk([&](memref::AllocOp alloc) {
    auto tag = alloc->getAttrOfType<StringAttr>("fa.workspace");
    if (!tag)
      return WalkResult::advance();
    FailureOr<SmallVector<std::string, 4>> sizes =
        fa::describeAllocation(alloc, host, args);
    if (failed(sizes))
      return WalkResult::interrupt();
    llvm::json::Array dims;
    for (std::string &d : *sizes)
      dims.push_back(std::move(d));
    llvm::json::Object buffer{
        {"name", tag.getValue()},
        {"dtype", dtypeName(alloc.getType().getElementType())},
        {"dims", std::move(dims)}};
    if (alloc->hasAttr("fa.workspace_zeroed"))
      buffer["init"] = "zero";
    workspace.push_back(std::move(buffer));
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  return workspace;
}

/// The manifest entry of one launch: entry, grid, block, shared memory and
/// parameters.
FailureOr<llvm::json::Object> describeLaunch(gpu::LaunchFuncOp launch,
                                             func::FuncOp host,
                                             ArrayRef<fa::HostArgument> args,
                                             const ScalarRoles &roles) {
  // The grid as the conversion computed it from the arguments' sizes.
  FailureOr<SmallVector<std::string, 3>> gridSizes =
      fa::describeGrid(launch, host, args);
  if (failed(gridSizes))
    return failure();
  llvm::json::Array grid;
  for (std::string &g : *gridSizes)
    grid.push_back(std::move(g));
  llvm::json::Array params;
  for (auto [position, operand] : llvm::enumerate(launch.getKernelOperands())) {
    FailureOr<llvm::json::Object> p =
        describeParam(operand, position, host, args, roles);
    if (failed(p)) {
      launch.emitError("fa-compile: kernel parameter of type ")
          << operand.getType()
          << " is not a function argument (a memref, or the op's scale, "
             "softcap or window), a factor of the scale and softcap, or a "
             "workspace buffer";
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

/// Configurations fa-compile tries before it settles for one that spills.
constexpr int64_t kMaxCandidates = 8;

/// What one configuration compiles to.
struct CompiledCandidate {
  fa::KernelConfigAttr config;
  std::string ptx;
};

/// Runs fa-select-kernel-config (taking its `skip`-th choice) and the GPU
/// pipeline on `module`; the launches and the one binary are checked.
FailureOr<CompiledCandidate> compileCandidate(MLIRContext &ctx, ModuleOp module,
                                              const KernelConfig &config,
                                              int64_t skip, StringRef name,
                                              bool quiet) {
  Operation *attention = nullptr;
  module->walk([&](Operation *op) {
    if (!attention &&
        isa<fa::AttentionOp, fa::AttentionBackwardOp, fa::AttentionVarlenOp,
            fa::AttentionVarlenBackwardOp, fa::AttentionPagedOp>(op))
      attention = op;
  });
  std::string mmaName = config.mma == "mma.sync" ? "mma_sync" : config.mma;
  std::string select = llvm::formatv(
      "fa-select-kernel-config{{chip={0} mma={1} block-q={2} block-kv={3} "
      "warps={4} stages={5} dkv-split={6} skip={7} schedule={8} "
      "tile-scheduler={9}}",
      config.chip, mmaName, config.blockQ, config.blockKV, config.warps,
      config.stages, config.dkvSplit, skip, config.schedule,
      config.tileScheduler);
  PassManager selectPm(&ctx);
  if (failed(parsePassPipeline(select, selectPm, llvm::errs())))
    return module->emitError("fa-compile: cannot build pipeline '")
           << select << "'";
  // Later candidates run out quietly: the first one's errors were reported.
  std::optional<ScopedDiagnosticHandler> silence;
  if (quiet)
    silence.emplace(&ctx, [](Diagnostic &) { return success(); });
  if (failed(selectPm.run(module)))
    return failure();
  silence.reset();
  auto kernelConfig =
      attention->getAttrOfType<fa::KernelConfigAttr>("kernel_config");
  if (!kernelConfig)
    return attention->emitError("fa-compile: no kernel_config was selected");
  if (kernelConfig.getChip() != config.chip)
    return attention->emitError("fa-compile: the op's kernel_config is for ")
           << kernelConfig.getChip() << ", not --chip=" << config.chip;

  std::string pipeline = llvm::formatv(
      "{0}{{chip={1}{2}}",
      !pipelineName.empty() ? pipelineName.getValue()
      : config.backward()   ? "fa-gpu-backward"
                            : "fa-gpu-forward",
      config.chip,
      config.backward()
          ? std::string()
          : llvm::formatv(" intra-warpgroup-overlap={0} ping-pong={1} "
                          "kv-splits={2}",
                          config.intraWarpgroupOverlap, config.pingPong,
                          config.kvSplits)
                .str());
  PassManager pm(&ctx);
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  // --mlir-timing: a report per candidate (when the pass manager goes).
  auto timing = std::make_unique<DefaultTimingManager>();
  applyDefaultTimingManagerCLOptions(*timing);
  if (timing->isEnabled())
    pm.enableTiming(std::move(timing));
  if (failed(parsePassPipeline(pipeline, pm, llvm::errs())))
    return module->emitError("fa-compile: cannot build pipeline '")
           << pipeline << "'";
  if (failed(pm.run(module)))
    return module->emitError("fa-compile: the pipeline failed for ") << name;
  // The launches and the binary.
  SmallVector<gpu::LaunchFuncOp> launches;
  module->walk([&](gpu::LaunchFuncOp op) { launches.push_back(op); });
  SmallVector<gpu::BinaryOp> binaries;
  module->walk([&](gpu::BinaryOp op) { binaries.push_back(op); });
  // A backward: preprocess, key blocks, dQ (and, packed, the rows of no
  // sequence; dense, a split GQA group's dK / dV conversion).
  size_t expected = config.backward()      ? (config.form == "varlen" ? 4 : 3)
                    : config.kvSplits != 0 ? 2
                                           : 1;
  if (config.backward() && llvm::any_of(launches, [](gpu::LaunchFuncOp op) {
        return op.getKernelName().getValue().ends_with("_dkv_convert_kernel");
      }))
    ++expected;
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
  return CompiledCandidate{kernelConfig, ptx.str()};
}

/// ptxas of the CUDA toolkit whose libdevice the pipelines link, or "".
std::string findPtxas() {
  if (noSpillCheck)
    return "";
  std::string toolkit = fa::findCudaToolkit();
  if (toolkit.empty())
    return "";
  SmallString<128> path(toolkit);
  llvm::sys::path::append(path, "bin", "ptxas");
  return llvm::sys::fs::can_execute(path) ? std::string(path) : "";
}

/// Bytes of register spills (stores) ptxas reports for the kernels of
/// `ptx`, or -1 when it does not assemble; `cubin` gets the binary (empty
/// when ptxas fails).
int64_t spillBytes(StringRef ptxas, StringRef ptx, StringRef chip,
                   std::string &cubin) {
  cubin.clear();
  SmallString<128> in, log, out;
  if (llvm::sys::fs::createTemporaryFile("fa-compile", "ptx", in) ||
      llvm::sys::fs::createTemporaryFile("fa-compile", "log", log) ||
      llvm::sys::fs::createTemporaryFile("fa-compile", "cubin", out))
    return 0;
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(in, ec);
    os << ptx;
  }
  std::string arch = ("-arch=" + chip).str();
  StringRef args[] = {ptxas, arch, "-v", in, "-o", out};
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(log),
                                          StringRef(log)};
  int rc = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects);
  int64_t spills = 0;
  if (auto buf = llvm::MemoryBuffer::getFile(log)) {
    // "... 0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads"
    SmallVector<StringRef> lines;
    (*buf)->getBuffer().split(lines, '\n');
    for (StringRef line : lines) {
      size_t at = line.find(" bytes spill stores");
      if (at == StringRef::npos)
        continue;
      StringRef head = line.take_front(at).rtrim();
      int64_t n = 0;
      if (!head.substr(head.rfind(' ') + 1).getAsInteger(10, n))
        spills += n;
    }
  }
  if (rc == 0)
    if (auto buf = llvm::MemoryBuffer::getFile(out, /*IsText=*/false))
      cubin = (*buf)->getBuffer().str();
  llvm::sys::fs::remove(in);
  llvm::sys::fs::remove(log);
  llvm::sys::fs::remove(out);
  return rc == 0 ? spills : -1;
}

/// The captures of a `--modifiers` op, as the host function's trailing
/// memref arguments `capture<n>` with dims `capture<n>_<d>` (names that
/// outlive the manifest's writing).
struct CaptureArgs {
  /// Whether the op got modifiers (the default name says so).
  bool modifiers = false;
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> dims;
  SmallVector<RankedTensorType> types;
  /// The group size of the modifiers' key_ranges (0: none). A forward takes
  /// them as its last argument `key_ranges` after the captures; a backward
  /// takes `query_ranges` (groups of as many keys) there, then, when
  /// deterministic, the forward's `key_ranges`. Their groups dimensions as
  /// manifest expressions (`ceildiv(Nq, rows)`).
  int64_t keyRangeRows = 0;
  bool keyRangesParam = false, queryRangesParam = false;
  std::string keyRangeGroups, keyRangeColumns, queryRangeGroups;
};

/// Gives the module's fa.attention the regions and captures of `mods`: a
/// memref argument per capture (static shape, any strides), read through
/// bufferization.to_tensor.
LogicalResult spliceModifiers(ModuleOp module, fa::AttentionOp mods,
                              CaptureArgs &captureArgs) {
  Operation *op = nullptr;
  module->walk([&](Operation *a) {
    if (!op && isa<fa::AttentionOp, fa::AttentionBackwardOp>(a))
      op = a;
  });
  if (!op)
    return mods->emitError("fa-compile: --modifiers gives a dense kernel "
                           "score_mod / mask_mod; this kernel has no "
                           "fa.attention or fa.attention_backward");
  auto fwd = dyn_cast<fa::AttentionOp>(op);
  auto bwd = dyn_cast<fa::AttentionBackwardOp>(op);
  if (fwd ? fwd.hasModifiers() : bwd.hasModifiers())
    return op->emitError("fa-compile: the input already has modifiers; "
                         "--modifiers would replace them");
  MLIRContext *ctx = module.getContext();
  auto func = op->getParentOfType<func::FuncOp>();
  OpBuilder b(op);
  Location loc = op->getLoc();
  SmallVector<Value> captures;
  for (Value c : mods.getCaptures()) {
    auto type = cast<RankedTensorType>(c.getType());
    if (!type.hasStaticShape())
      return mods->emitError("fa-compile: captures must have static shapes, "
                             "got ")
             << type;
    SmallVector<int64_t> strides(type.getRank(), ShapedType::kDynamic);
    auto memrefType = MemRefType::get(
        type.getShape(), type.getElementType(),
        StridedLayoutAttr::get(ctx, ShapedType::kDynamic, strides));
    BlockArgument arg = func.front().addArgument(memrefType, loc);
    captures.push_back(bufferization::ToTensorOp::create(
        b, loc, type, arg, /*restrict=*/true, /*writable=*/false));
    unsigned n = captureArgs.names.size();
    captureArgs.names.push_back("capture" + std::to_string(n));
    captureArgs.dims.emplace_back();
    for (int64_t d = 0; d < type.getRank(); ++d)
      captureArgs.dims.back().push_back(llvm::formatv("capture{0}_{1}", n, d));
    captureArgs.types.push_back(type);
  }
  // Ranges: [?, ?, ?, columns] i32, any strides, read through
  // bufferization.to_tensor as the captures.
  auto rangesArgument = [&](int64_t columns) -> Value {
    auto type =
        RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic,
                               ShapedType::kDynamic, columns},
                              b.getI32Type());
    SmallVector<int64_t> strides(4, ShapedType::kDynamic);
    auto memrefType = MemRefType::get(
        type.getShape(), type.getElementType(),
        StridedLayoutAttr::get(ctx, ShapedType::kDynamic, strides));
    BlockArgument arg = func.front().addArgument(memrefType, loc);
    return bufferization::ToTensorOp::create(
        b, loc, type, arg, /*restrict=*/true, /*writable=*/false);
  };
  // The modifiers' key_ranges ([B, Hq, ceil(Nq / rows), 2 or 4]): the
  // forward reads them; the backward reads the queries of each group of as
  // many keys ([B, Hkv, ceil(Nk / rows), 2], the caller's transpose of the
  // same mask) and, when deterministic, the key ranges for dQ.
  Value keyRanges, queryRanges;
  if (mods.getKeyRanges()) {
    int64_t columns =
        cast<RankedTensorType>(mods.getKeyRanges().getType()).getDimSize(3);
    captureArgs.keyRangeRows = *mods.getKeyRangeRows();
    captureArgs.keyRangeGroups =
        llvm::formatv("ceildiv(Nq, {0})", captureArgs.keyRangeRows).str();
    captureArgs.keyRangeColumns = std::to_string(columns);
    if (bwd) {
      queryRanges = rangesArgument(2);
      captureArgs.queryRangesParam = true;
      captureArgs.queryRangeGroups =
          llvm::formatv("ceildiv(Nk, {0})", captureArgs.keyRangeRows).str();
    }
    if (fwd || bwd.getDeterministic()) {
      keyRanges = rangesArgument(columns);
      captureArgs.keyRangesParam = true;
    }
  }
  func.setType(FunctionType::get(ctx, func.front().getArgumentTypes(),
                                 func.getResultTypes()));
  captureArgs.modifiers = true;
  Operation *modified;
  Region *scoreMod, *maskMod;
  if (fwd) {
    auto m = fa::AttentionOp::create(
        b, loc, fwd.getQuery(), fwd.getKey(), fwd.getValue(),
        fwd.getScaleAttr(), fwd.getMaskAttr(), fwd.getSoftcapAttr(),
        fwd.getDynamicScale(), fwd.getDynamicSoftcap(), fwd.getMaskOperands(),
        captures, keyRanges, captureArgs.keyRangeRows);
    modified = m;
    scoreMod = &m.getScoreMod();
    maskMod = &m.getMaskMod();
  } else {
    auto m = fa::AttentionBackwardOp::create(
        b, loc, bwd.getQuery(), bwd.getKey(), bwd.getValue(), bwd.getOut(),
        bwd.getLse(), bwd.getDout(), bwd.getScaleAttr(), bwd.getMaskAttr(),
        bwd.getSoftcapAttr(), bwd.getDeterministic(), bwd.getDynamicScale(),
        bwd.getDynamicSoftcap(), bwd.getMaskOperands(), captures, queryRanges,
        captureArgs.keyRangeRows, keyRanges, captureArgs.keyRangeRows);
    modified = m;
    scoreMod = &m.getScoreMod();
    maskMod = &m.getMaskMod();
  }
  IRMapping none;
  mods.getScoreMod().cloneInto(scoreMod, none);
  mods.getMaskMod().cloneInto(maskMod, none);
  op->replaceAllUsesWith(modified);
  op->erase();
  return mlir::verify(module);
}

LogicalResult compileOne(MLIRContext &ctx, const KernelConfig &flags,
                         OwningOpRef<ModuleOp> module,
                         const CaptureArgs &captureArgs) {
  // Modifiers that state a built-in become its attributes first (the GPU
  // pipelines' first pass, run here too so the manifest describes them).
  auto softcapOf = [&]() -> std::optional<double> {
    std::optional<double> cap;
    module->walk([&](Operation *op) {
      FloatAttr s;
      if (isa<fa::AttentionOp, fa::AttentionBackwardOp>(op) &&
          (s = op->getAttrOfType<FloatAttr>("softcap")))
        cap = s.getValueAsDouble();
    });
    return cap;
  };
  std::optional<double> givenSoftcap = softcapOf();
  PassManager recognizePm(&ctx);
  recognizePm.addPass(fa::createFARecognizeBuiltinModifiers());
  if (failed(recognizePm.run(*module)))
    return failure();
  std::optional<double> recognizedSoftcap;
  if (!givenSoftcap)
    recognizedSoftcap = softcapOf();
  // Find the op and derive the config from it.
  Operation *attention = nullptr, *unsupported = nullptr;
  module->walk([&](Operation *op) {
    if (!attention &&
        isa<fa::AttentionOp, fa::AttentionBackwardOp, fa::AttentionVarlenOp,
            fa::AttentionVarlenBackwardOp, fa::AttentionPagedOp>(op))
      attention = op;
    auto varlenBwd = dyn_cast<fa::AttentionVarlenBackwardOp>(op);
    if (!unsupported && varlenBwd && varlenBwd.getDeterministic())
      unsupported = op;
  });
  if (unsupported)
    return unsupported->emitOpError(
        "fa-compile: no deterministic GPU kernel for packed sequences yet "
        "(the fast mode has one; the CPU pipelines fa-reference-cpu and "
        "fa-tiled-cpu lower it)");
  if (!attention)
    return module->emitError(
        "fa-compile: no fa.attention, fa.attention_backward, "
        "fa.attention_varlen, fa.attention_varlen_backward or "
        "fa.attention_paged op in the input");
  KernelConfig config = flags;
  // Calls `fn` with the typed op (they share the accessors used here).
  auto visit = [&](auto fn) {
    if (auto op = dyn_cast<fa::AttentionOp>(attention))
      return fn(op);
    if (auto op = dyn_cast<fa::AttentionBackwardOp>(attention))
      return fn(op);
    if (auto op = dyn_cast<fa::AttentionVarlenOp>(attention))
      return fn(op);
    if (auto op = dyn_cast<fa::AttentionVarlenBackwardOp>(attention))
      return fn(op);
    return fn(cast<fa::AttentionPagedOp>(attention));
  };
  visit([&](auto op) { config = configFromOp(op, flags); });
  config.kind =
      isa<fa::AttentionBackwardOp, fa::AttentionVarlenBackwardOp>(attention)
          ? "backward"
          : "forward";
  config.form = "dense";
  config.pageSize = 0;
  if (auto bwd = dyn_cast<fa::AttentionBackwardOp>(attention))
    config.deterministic = bwd.getDeterministic();
  if (isa<fa::AttentionVarlenOp, fa::AttentionVarlenBackwardOp>(attention))
    config.form = "varlen";
  if (auto paged = dyn_cast<fa::AttentionPagedOp>(attention)) {
    config.form = "paged";
    config.pageSize = paged.getPageSize();
  }
  if (config.dtype == "f32")
    return attention->emitError(
        "fa-compile: the GPU kernels take f16 or bf16 inputs, not f32");
  // The manifest names causal / window kinds: an `#fa.mask` whose run-time
  // sides are both sizes, or the left one of a causal window.
  fa::MaskAttrInterface anyMask;
  visit([&](auto op) { anyMask = op.getMaskAttr(); });
  if (anyMask) {
    auto mask = dyn_cast<fa::MaskAttr>(anyMask);
    if (!mask)
      return attention->emitError("fa-compile: the manifest describes "
                                  "#fa.mask masks only, got ")
             << anyMask;
    if (mask.getNumDynamicSides() == 1 &&
        !(mask.getLeft() == fa::MaskAttr::kDynamic && mask.getRight() == 0))
      return attention->emitError(
                 "fa-compile: a window with one run-time and one constant "
                 "size (other than a causal window's right bound 0) has no "
                 "kernel kind, got ")
             << mask;
  }
  // The run-time scalars become kernel parameters: they must be arguments of
  // the host function, for the manifest to name them.
  ScalarRoles roles;
  auto hostFunc = attention->getParentOfType<func::FuncOp>();
  SmallVector<std::pair<Value, StringRef>> scalars;
  auto addScalars = [&](auto op) {
    scalars.push_back({op.getDynamicScale(), "scale"});
    scalars.push_back({op.getDynamicSoftcap(), "softcap"});
    // One mask operand per run-time side, left first.
    ValueRange w = op.getMaskOperands();
    if (auto mask = dyn_cast_or_null<fa::MaskAttr>(op.getMaskAttr())) {
      unsigned next = 0;
      if (mask.getLeft() == fa::MaskAttr::kDynamic)
        scalars.push_back({w[next++], "window_left"});
      if (mask.getRight() == fa::MaskAttr::kDynamic)
        scalars.push_back({w[next++], "window_right"});
    }
  };
  visit(addScalars);
  for (auto [value, role] : scalars) {
    if (!value)
      continue;
    auto arg = dyn_cast<BlockArgument>(value);
    if (!arg || arg.getOwner() != &hostFunc.getBody().front())
      return attention->emitError("fa-compile: the ")
             << role << " operand must be an argument of the function";
    // One argument per role: Python binds each by its role.
    if (roles.count(arg.getArgNumber()))
      return attention->emitError("fa-compile: the ")
             << role << " operand must be an argument of its own, not that of "
             << roles.lookup(arg.getArgNumber());
    roles[arg.getArgNumber()] = role;
  }
  std::string name =
      kernelName.empty() || defaultSet
          ? config.defaultName() + (captureArgs.modifiers ? "_mod" : "")
          : kernelName;
  bool ownConfig = attention->hasAttr("kernel_config");
  std::string hostName =
      attention->getParentOfType<func::FuncOp>().getName().str();
  bool allFixed = config.blockQ && config.blockKV && config.warps &&
                  (config.backward() ? config.dkvSplit : config.stages) &&
                  config.mma != "auto";
  std::string ptxas = findPtxas();

  // fa-select-kernel-config orders the configurations that fit the chip by
  // preference; the first whose kernels assemble without register spills
  // (when ptxas is at hand) is taken, else the one that spills least.
  OwningOpRef<ModuleOp> best;
  fa::KernelConfigAttr kernelConfig;
  std::string ptx, cubin;
  int64_t bestSpills = -1;
  for (int64_t skip = 0; skip < kMaxCandidates; ++skip) {
    OwningOpRef<ModuleOp> work = cast<ModuleOp>(module->clone());
    FailureOr<CompiledCandidate> c =
        compileCandidate(ctx, *work, config, skip, name, /*quiet=*/skip > 0);
    if (failed(c)) {
      if (skip == 0)
        return failure();
      break; // no further candidate
    }
    std::string binary;
    int64_t spills =
        ptxas.empty() ? 0 : spillBytes(ptxas, c->ptx, config.chip, binary);
    if (spills < 0)
      return module->emitError("fa-compile: ptxas rejects the PTX of ")
             << name << " (" << Attribute(c->config) << ")";
    if (bestSpills < 0 || spills < bestSpills) {
      best = std::move(work);
      kernelConfig = c->config;
      ptx = c->ptx;
      cubin = std::move(binary);
      bestSpills = spills;
    }
    if (spills == 0 || ownConfig || allFixed)
      break;
  }
  if (bestSpills > 0)
    llvm::errs() << "fa-compile: warning: " << name << " spills " << bestSpills
                 << " bytes of registers (" << Attribute(kernelConfig) << ")\n";
  // (`attention` was the original module's: gone now.)
  module = std::move(best);
  auto host = module->lookupSymbol<func::FuncOp>(hostName);
  bool wgmma = kernelConfig.getMma() == fa::MmaKind::Wgmma;
  SmallVector<gpu::LaunchFuncOp> launches;
  module->walk([&](gpu::LaunchFuncOp op) { launches.push_back(op); });

  llvm::json::Object manifest{
      {"version", 1},
      {"name", name},
      {"kind", config.kind},
      {"chip", config.chip},
      {"dtype", config.dtype},
      {"head_dim", config.d},
      {"value_head_dim", config.dv},
      {"causal", config.causal},
      // "runtime": the sizes are kernel parameters (roles window_left and
      // window_right); [left, right]: built in ([-1, -1]: no window).
      {"window", config.hasWindow() && !config.constantWindow
                     ? llvm::json::Value("runtime")
                     : llvm::json::Value(llvm::json::Array{
                           config.windowLeft, config.windowRight})},
      // null: no softcap; "runtime": a kernel parameter; a number: built in.
      {"softcap", config.constantSoftcap
                      ? llvm::json::Value(*config.constantSoftcap)
                  : config.softcap ? llvm::json::Value("runtime")
                                   : llvm::json::Value(nullptr)},
      // null: a kernel parameter (role "scale"); a number: built in.
      {"scale", config.constantScale ? llvm::json::Value(*config.constantScale)
                                     : llvm::json::Value(nullptr)},
      {"block_q", kernelConfig.getBlockQ()},
      {"block_kv", kernelConfig.getBlockKV()},
      {"warps", kernelConfig.getWarps()},
      {"mma", wgmma ? "wgmma" : "mma.sync"},
  };
  if (config.backward()) {
    manifest["dkv_split"] = kernelConfig.getDkvSplit();
    manifest["form"] = config.form;
    manifest["schedule"] = stringifyKernelSchedule(kernelConfig.getSchedule());
    manifest["tile_scheduler"] =
        stringifyTileScheduler(kernelConfig.getTileScheduler());
  }
  if (!config.backward()) {
    // The tensors' form: dense, varlen (packed) or paged (with its page
    // size); the parameters' dims name the sizes of each.
    manifest["form"] = config.form;
    if (config.form == "paged")
      manifest["page_size"] = config.pageSize;
    manifest["stages"] = kernelConfig.getStages();
    manifest["schedule"] = stringifyKernelSchedule(kernelConfig.getSchedule());
    manifest["tile_scheduler"] =
        stringifyTileScheduler(kernelConfig.getTileScheduler());
    if (config.kvSplits != 0)
      manifest["kv_splits"] = config.kvSplits < 0
                                  ? llvm::json::Value("auto")
                                  : llvm::json::Value(config.kvSplits);
  }
  SmallVector<fa::HostArgument> hostArgs(
      config.backward()
          ? (config.form == "varlen" ? varlenBackwardArgs() : backwardArgs())
      : config.form == "varlen" ? varlenArgs()
      : config.form == "paged"  ? pagedArgs()
                                : forwardArgs());
  // The captures: the host function's last arguments (after the scalars,
  // which the manifest names by role).
  llvm::json::Array captureList;
  if (captureArgs.modifiers) {
    unsigned ranges = captureArgs.queryRangesParam + captureArgs.keyRangesParam;
    unsigned first = host.getNumArguments() -
                     static_cast<unsigned>(captureArgs.names.size()) - ranges;
    hostArgs.resize(first, fa::HostArgument{"", {}});
    for (auto [i, name] : llvm::enumerate(captureArgs.names)) {
      fa::HostArgument a{name, {}};
      llvm::json::Array shape;
      for (const std::string &d : captureArgs.dims[i])
        a.dims.push_back(d);
      for (int64_t d : captureArgs.types[i].getShape())
        shape.push_back(d);
      hostArgs.push_back(a);
      captureList.push_back(llvm::json::Object{
          {"name", name},
          {"dtype", dtypeName(captureArgs.types[i].getElementType())},
          {"shape", std::move(shape)}});
    }
    // The modifiers' captures in the op's order (memref parameters of the
    // same names) and the runtime's key, if given.
    // A softcap the score_mod stated is built in ("softcap" above): a call
    // of these modifiers gives none of its own.
    llvm::json::Object section{{"key", modifiersKey.empty()
                                           ? llvm::json::Value(nullptr)
                                           : llvm::json::Value(modifiersKey)},
                               {"captures", std::move(captureList)}};
    // Run-time ranges: the last parameters, the backward's query ranges
    // [B, Hkv, ceil(Nk / rows), 2], then the key ranges [B, Hq, ceil(Nq /
    // rows), 2 or 4] (the dims state the shapes, so the launch checks the
    // tensors').
    if (captureArgs.queryRangesParam) {
      hostArgs.push_back(fa::HostArgument{
          "query_ranges", {"B", "Hkv", captureArgs.queryRangeGroups, "2"}});
      section["query_ranges"] = llvm::json::Object{
          {"name", "query_ranges"}, {"rows", captureArgs.keyRangeRows}};
    }
    if (captureArgs.keyRangesParam) {
      hostArgs.push_back(
          fa::HostArgument{"key_ranges",
                           {"B", "Hq", captureArgs.keyRangeGroups,
                            captureArgs.keyRangeColumns}});
      section["key_ranges"] = llvm::json::Object{
          {"name", "key_ranges"}, {"rows", captureArgs.keyRangeRows}};
    }
    if (recognizedSoftcap)
      section["softcap"] = *recognizedSoftcap;
    manifest["modifiers"] = std::move(section);
  }
  FailureOr<llvm::json::Array> workspace = describeWorkspace(host, hostArgs);
  if (failed(workspace))
    return failure();
  // One launch without a workspace: the flat form. Otherwise (a backward, a
  // split-KV forward, the dynamic tile scheduler's counter) the launches
  // are listed with the buffers they share.
  if (!config.backward() && launches.size() == 1 && workspace->empty()) {
    FailureOr<llvm::json::Object> k =
        describeLaunch(launches[0], host, hostArgs, roles);
    if (failed(k))
      return failure();
    for (auto &[key, value] : *k)
      manifest[key] = std::move(value);
  } else {
    if (config.backward())
      manifest["deterministic"] = config.deterministic;
    llvm::json::Array kernels;
    for (gpu::LaunchFuncOp launch : launches) {
      FailureOr<llvm::json::Object> k =
          describeLaunch(launch, host, hostArgs, roles);
      if (failed(k))
        return failure();
      kernels.push_back(std::move(*k));
    }
    manifest["kernels"] = std::move(kernels);
    manifest["workspace"] = std::move(*workspace);
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
  // The binary ptxas made of the PTX while counting spills: the runtime
  // loads it on a device of exactly this chip (no JIT at load), the PTX
  // elsewhere.
  if (!cubin.empty())
    manifest["cubin"] = name + ".cubin";
  if (failed(write(".ptx", [&](raw_ostream &os) { os << ptx; })) ||
      failed(write(".json", [&](raw_ostream &os) {
        os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest)))
           << "\n";
      })))
    return failure();
  if (!cubin.empty() &&
      failed(write(".cubin", [&](raw_ostream &os) { os << cubin; })))
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
  c.form = form;
  if (c.form != "dense" && c.form != "varlen" && c.form != "paged") {
    llvm::errs() << "fa-compile: --form must be dense, varlen or paged, got '"
                 << c.form << "'\n";
    return failure();
  }
  if (c.form == "paged" && c.kind != "forward") {
    llvm::errs() << "fa-compile: --form=paged is a forward form (a paged "
                    "cache has no backward)\n";
    return failure();
  }
  if (pageSize.getNumOccurrences() && c.form != "paged") {
    llvm::errs() << "fa-compile: --page-size applies to --form=paged only\n";
    return failure();
  }
  if (c.form == "paged") {
    c.pageSize = pageSize;
    if (c.pageSize < 16 || c.pageSize > 4096 || c.pageSize % 16) {
      llvm::errs() << "fa-compile: --page-size must be a multiple of 16 in "
                      "[16, 4096], got "
                   << c.pageSize << "\n";
      return failure();
    }
  }
  c.deterministic = deterministic;
  if (c.deterministic && c.kind != "backward") {
    llvm::errs() << "fa-compile: --deterministic applies to --kind "
                    "backward only\n";
    return failure();
  }
  if (c.deterministic && c.form == "varlen") {
    llvm::errs() << "fa-compile: --deterministic has no kernel for packed "
                    "sequences yet (the fast mode, dQ by atomics, has one)\n";
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
    // The sizes are kernel parameters: they select the window kind (a
    // window unbounded on both sides is none) and are checked as the op's
    // attribute would be.
    for (int64_t w : {c.windowLeft, c.windowRight})
      if (w < -1 || w > fa::kMaxWindowBound) {
        llvm::errs() << "fa-compile: --window bounds must be in [-1, "
                     << fa::kMaxWindowBound << "], got '" << window << "'\n";
        return failure();
      }
    if (c.causal && c.windowRight != 0) {
      llvm::errs() << "fa-compile: --causal needs --window right bound 0, got '"
                   << window << "'\n";
      return failure();
    }
    c.window = c.windowLeft >= 0 || c.windowRight >= 0;
  }
  // Checked here, so that a bad value names its flag (the generated IR
  // would only say "expected attribute value").
  // The values are run-time kernel parameters; a value given here is still
  // checked, so that a typo is not silently accepted.
  auto checkValue = [](StringRef flag, double v) {
    if (std::isfinite(v) && v > 0 && std::isfinite(static_cast<float>(v)))
      return true;
    llvm::errs() << "fa-compile: " << flag
                 << " must be a positive, finite f32 value, got " << v
                 << " (it does not change the kernel: the kernel takes it at "
                    "run time)\n";
    return false;
  };
  if (scale.getNumOccurrences() && !checkValue("--scale", scale))
    return failure();
  if (softcap.getNumOccurrences()) {
    c.softcap = true;
    double v = 1.0;
    if (!softcap.empty() && StringRef(softcap).trim().getAsDouble(v)) {
      llvm::errs() << "fa-compile: --softcap takes no value or a number, got '"
                   << softcap << "'\n";
      return failure();
    }
    if (!checkValue("--softcap", v))
      return failure();
  }
  for (auto [flag, d] : {std::pair<const char *, int64_t>{"--head-dim", c.d},
                         {"--value-head-dim", c.dv}}) {
    if (d < 8 || d > fa::kMaxHeadDim || d % 8) {
      llvm::errs() << "fa-compile: " << flag << " must be a multiple of 8 in "
                   << "[8, " << fa::kMaxHeadDim << "], got " << d << "\n";
      return failure();
    }
  }
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
  c.dkvSplit = dkvSplit;
  c.mma = mma;
  // fa-select-kernel-config checks the name.
  c.schedule =
      warpSpecialize ? std::string("warp_specialized") : schedule.getValue();
  c.tileScheduler = tileScheduler;
  c.intraWarpgroupOverlap = intraWarpgroupOverlap;
  c.pingPong = pingPong;
  if (kvSplits == "auto") {
    c.kvSplits = -1;
  } else if (kvSplits != "none") {
    if (!llvm::to_integer(kvSplits.getValue(), c.kvSplits, 10) ||
        c.kvSplits < 1 || c.kvSplits > 1024) {
      llvm::errs() << "fa-compile: --kv-splits must be none, auto or a number "
                      "in [1, 1024], got '"
                   << kvSplits << "'\n";
      return failure();
    }
  }
  // Decoding: few query rows per block (one, or a GQA group); 64-row
  // blocks halve the padded MMA work of the default 128.
  // 64-key blocks keep two thread blocks per SM (the split heuristic's
  // assumption) with two stages at D = 128.
  if (c.kvSplits != 0 && c.blockQ == 0)
    c.blockQ = 64;
  // (A paged cache's key blocks may span pages.)
  if (c.kvSplits != 0 && c.blockKV == 0)
    c.blockKV = 64;
  // The persistent kernel stores out with TMA in the input type, not the
  // f32 partials.
  if (c.kvSplits != 0 && c.tileScheduler == "auto")
    c.tileScheduler = "grid";
  if (c.kvSplits != 0 && c.form == "varlen") {
    llvm::errs() << "fa-compile: --kv-splits takes dense tensors or a paged "
                    "cache, not packed sequences\n";
    return failure();
  }
  if (c.kvSplits != 0 && c.backward()) {
    llvm::errs() << "fa-compile: --kv-splits is a forward option (the "
                    "backward has no split-KV form)\n";
    return failure();
  }
  if (c.mma != "auto" && c.mma != "mma.sync" && c.mma != "mma_sync" &&
      c.mma != "wgmma") {
    llvm::errs() << "fa-compile: --mma must be auto, mma.sync or wgmma, got '"
                 << c.mma << "'\n";
    return failure();
  }
  for (auto [flag, v] :
       {std::pair<const char *, int64_t>{"--block-q", c.blockQ},
        {"--block-kv", c.blockKV},
        {"--warps", c.warps},
        {"--stages", c.stages},
        {"--dkv-split", c.dkvSplit}}) {
    if (v < 0) {
      llvm::errs() << "fa-compile: " << flag << " must be >= 0 (0 = choose), "
                   << "got " << v << "\n";
      return failure();
    }
  }
  return c;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  registerAllPasses();
  fa::registerAllFAPasses();
  // --mlir-timing, --mlir-print-ir-after-all, ... for the GPU pipeline.
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "FlashMLIR compile driver: fa.attention -> PTX "
                              "+ JSON manifest\n");

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  registry.insert<fa::FADialect, faptx::FAPTXDialect, fagpu::FAGPUDialect>();
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();

  FailureOr<KernelConfig> flags = configFromFlags();
  if (failed(flags))
    return 1;

  std::vector<KernelConfig> configs;
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

  // --modifiers: the regions and captures to give the kernel's op.
  OwningOpRef<ModuleOp> modsModule;
  fa::AttentionOp mods;
  if (!modifiersFile.empty()) {
    if (defaultSet)
      return llvm::errs() << "fa-compile: --modifiers and --default-set "
                             "exclude each other\n",
             1;
    modsModule = parseSourceFile<ModuleOp>(modifiersFile, &ctx);
    if (!modsModule)
      return 1;
    modsModule->walk([&](fa::AttentionOp a) {
      if (!mods && a.hasModifiers())
        mods = a;
    });
    if (!mods) {
      llvm::errs() << "fa-compile: " << modifiersFile
                   << " has no fa.attention with score_mod or mask_mod\n";
      return 1;
    }
  } else if (!modifiersKey.empty()) {
    llvm::errs() << "fa-compile: --modifiers-key needs --modifiers\n";
    return 1;
  }

  for (const KernelConfig &config : configs) {
    OwningOpRef<ModuleOp> module;
    if (!inputFile.empty() && !defaultSet) {
      module = parseSourceFile<ModuleOp>(inputFile, &ctx);
    } else {
      module = parseSourceString<ModuleOp>(
          config.backward()
              ? (config.form == "varlen" ? buildVarlenBackwardModule(config)
                                         : buildBackwardModule(config))
              : buildForwardModule(config),
          &ctx, "fa-compile-config");
    }
    if (!module)
      return 1;
    CaptureArgs captureArgs;
    if (mods && failed(spliceModifiers(*module, mods, captureArgs)))
      return 1;
    if (failed(compileOne(ctx, config, std::move(module), captureArgs)))
      return 1;
  }
  return 0;
}
