//===- KernelResources.h - What the GPU kernels need and chips offer -*- C++
//-*-//
//
// The one resource model of the GPU back end: what each supported chip
// offers a thread block, the shared-memory layout rules of the kernels, and
// the shared memory and accumulator registers a kernel configuration needs.
// The op verifier checks `#fa.kernel_config` with it, `fa-select-kernel-config`
// chooses configurations that pass it, and the GPU conversions lay out their
// tiles with the same `TileLayout` (and check that they used what it
// predicted).
//
//===----------------------------------------------------------------------===//

#ifndef FA_DIALECT_FA_IR_KERNELRESOURCES_H
#define FA_DIALECT_FA_IR_KERNELRESOURCES_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MathExtras.h"

#include <cstdint>
#include <string>

namespace mlir::fa {

class KernelConfigAttr;
enum class TileScheduler : uint32_t;

/// Whether the forward kernel of `scheduler` is persistent: one thread block
/// per multiprocessor looping over tiles (persistent and dynamic).
bool isPersistentScheduler(TileScheduler scheduler);

/// Shared memory of the dynamic tile scheduler's tile-index slots (one i32
/// per Q stage, after O's staging tile), padded to 16 bytes.
constexpr int64_t kTileSlotBytes = 16;

/// What one chip offers a thread block (CUDA's documented limits).
struct ChipInfo {
  StringRef name;
  /// Shared memory a block may have after opting in (static + dynamic).
  int64_t sharedMemoryPerBlock;
  int64_t registersPerThread;
  int64_t threadsPerBlock;
  /// Warpgroup MMAs (wgmma.mma_async; sm_90a only).
  bool wgmma;
  /// 8- and 16-byte f32 reductions to global memory (red.global.add.v2/v4,
  /// sm_90 and later).
  bool vectorReductions;
  /// The oldest PTX ISA (x10: 80 = PTX 8.0) that has this target and what
  /// the kernels use on it.
  int64_t minPtxVersion;
  /// Shared memory of one multiprocessor, and what each resident block
  /// takes of it besides its own.
  int64_t sharedMemoryPerMultiprocessor;
  int64_t reservedSharedMemoryPerBlock;
  int64_t registersPerMultiprocessor;
  int64_t threadsPerMultiprocessor;
};

/// The chip called `name` ("sm_80", "sm_90", "sm_90a"), or null.
const ChipInfo *lookupChip(StringRef name);
/// "sm_80, sm_90, sm_90a", for diagnostics.
std::string supportedChipNames();

/// Elements of a 16-byte chunk of f16/bf16 (one cp.async, one ldmatrix row).
constexpr int64_t kTileChunk = 8;

/// The layout of a [rows, cols] f16/bf16 tile in shared memory, as rows of
/// 16-byte chunks. With `swizzle`, chunk c of row r is stored at chunk
/// c ^ (r % 8); otherwise rows are padded by one chunk. Either way the 8
/// rows one ldmatrix phase (or one group of 8 cp.async) touches fall in
/// distinct banks.
///
/// With `panels` (the wgmma layout), the columns are split into panels of 64
/// (128 bytes): panel p is a [rows, 64] block of its own at element
/// p * rows * 64, its rows always swizzled as above. That is the 128-byte
/// swizzled canonical layout wgmma descriptors read (K-major or MN-major),
/// given a 1024-byte aligned tile. A column count that is not a multiple of
/// 64 leaves the last panel partly unused (96 columns: 64 + 32).
struct TileLayout {
  int64_t rows = 0, cols = 0;
  bool swizzle = false;
  bool panels = false;

  static constexpr int64_t kPanelCols = 64;
  /// Bytes of one panel row (f16/bf16).
  static constexpr int64_t kPanelRowBytes = kPanelCols * 2;

  static bool canSwizzle(int64_t cols) {
    int64_t chunks = cols / kTileChunk;
    return chunks >= 8 && llvm::isPowerOf2_64(chunks);
  }
  /// Panels (always swizzled), or rows XOR-swizzled when `swizzle` is asked
  /// for and the row length allows it, padded otherwise.
  static TileLayout get(int64_t rows, int64_t cols, bool swizzle, bool panels) {
    TileLayout t;
    t.rows = rows;
    t.cols = cols;
    t.panels = panels;
    t.swizzle = panels || (swizzle && canSwizzle(cols));
    return t;
  }
  /// Elements between two rows (of one panel).
  int64_t storedCols() const {
    if (panels)
      return kPanelCols;
    return swizzle ? cols : cols + kTileChunk;
  }
  int64_t numPanels() const { return llvm::divideCeil(cols, kPanelCols); }
  /// Elements between two panels.
  int64_t panelStride() const { return rows * kPanelCols; }
  /// Elements the tile occupies.
  int64_t elements() const {
    return panels ? numPanels() * panelStride() : rows * storedCols();
  }
  int64_t bytes() const { return elements() * 2; }
};

/// wgmma tiles start at 1024-byte boundaries (the swizzle pattern is taken
/// from address bits 7-9); a kernel aligns its dynamic shared memory at run
/// time and allocates this much slack for it.
constexpr int64_t kWgmmaAlignment = 1024;

/// The longest sequence (Nq, Nk) the GPU kernels take: their index and mask
/// arithmetic is i32 (launchers check it).
constexpr int64_t kMaxKernelSequenceLength = int64_t(1) << 28;

/// Rows the backward's preprocessing and dQ conversion kernels handle per
/// thread block; block-q must divide it (the lse2 / delta workspace is
/// padded to it).
constexpr int64_t kBackwardRowBlock = 128;

/// Stages of the warp-specialized key-block kernel's lse2 / delta ring
/// (consumers fill it by cp.async two query blocks ahead: the stage read,
/// the one landing, the one being issued).
constexpr int64_t kBackwardColumnStages = 3;

/// Whether the warp-specialized key-block kernel of `blockQ` queries per
/// block starts its S^T accumulators at -lse2 / c (delta always starts
/// dP^T's). At 128 queries the accumulators' initialization spills and
/// reading lse2 where it is used was 2-5% faster (H100, D = 64); at 64
/// reading it there was up to 3.5% slower unmasked, within 1% causal
/// (D = 128).
inline bool backwardFoldsLse(int64_t blockQ) { return blockQ <= 64; }

/// Accumulator registers per thread above which a kernel cannot keep its
/// state in registers (the rest of the 255 go to addresses, fragments and
/// the softmax).
constexpr int64_t kAccumulatorRegisterBudget = 192;

/// The kernels an attention op becomes.
enum class KernelKind {
  /// The forward (one launch).
  Forward,
  /// The backward's key-block kernel (dK, dV; and dQ by atomics in the
  /// fast mode).
  BackwardKeyBlock,
  /// The deterministic backward's query-block kernel (dQ).
  BackwardQueryBlock,
};

/// The problem a kernel configuration is for.
struct KernelProblem {
  KernelKind kind = KernelKind::Forward;
  int64_t headDim = 0, valueHeadDim = 0;
  /// Backward key-block kernel: dQ added by atomics (fast mode).
  bool withDq = false;
};

/// The most warps a thread block may have on every supported chip (1024
/// threads).
constexpr int64_t kMaxWarpsPerBlock = 32;

/// What one kernel of a configuration needs.
struct KernelResources {
  /// Dynamic shared memory, alignment slack included.
  int64_t sharedMemory = 0;
  /// f32 accumulator (and score) values each thread keeps in registers.
  int64_t accumulatorRegisters = 0;
  int64_t threads = 0;
  /// Warps of the kernel (the deterministic dQ kernel may use fewer than
  /// the configuration's).
  int64_t warps = 0;
  /// Backward key-block kernel with dQ on a chip with vector reductions:
  /// dQ goes through a per-warp shared-memory staging area and 16-byte
  /// reductions along rows. A wgmma warpgroup pair that would not fit the
  /// chip with it adds 8-byte reductions from the fragments instead.
  bool stagesDq = false;
  /// Rows of each warp's staging area when a cooperative kernel stages dQ
  /// (0 otherwise; the warp-specialized area is laid out for TMA): 16 (a
  /// fragment tile), or 8 where a pair's shared memory has room for only
  /// half of it (the two halves of the fragment tile go through it in
  /// turn).
  int64_t dqStageRows = 0;
};

/// The dK / dV accumulator columns of each warpgroup of a backward wgmma
/// pair (two warpgroups per 64 keys) for a slice of `dSlice` / `dvSlice`
/// columns. Both warpgroups issue the same wgmma instructions (one in a
/// divergent branch is serialized). Where D = Dv and the columns do not
/// halve into whole 64-column panels (D = 160, 192), they take roles: the
/// first accumulates all of dK, the second all of dV (`roles`; `k` = the
/// slice, `v` = 0). Otherwise each keeps half the panels of both, rounded up
/// (at D = 192 / Dv = 128 the middle panel of dK is computed by both).
struct PairColumns {
  int64_t k = 0, v = 0;
  bool roles = false;
};
PairColumns backwardPairColumns(int64_t dSlice, int64_t dvSlice);

/// Columns of dQ per work unit of the mma.sync key-block kernel: the
/// largest power-of-two chunk <= 64 (and >= 16) that divides the head dim
/// and deals the (16-row, chunk) units of a [block_q, d] tile evenly to
/// `warps` warps; 0 if none.
int64_t backwardDqChunk(int64_t blockQ, int64_t headDim, int64_t warps);

/// The resources kernel `problem.kind` of `config` needs. Assumes the
/// structural checks of `verifyKernelConfig` pass.
KernelResources kernelResources(KernelConfigAttr config,
                                const KernelProblem &problem);

/// Thread blocks of `config`'s kernel for `problem` one multiprocessor holds
/// at once, from its shared memory and threads, with registers counted at
/// the per-thread maximum (ptxas decides the real count later): at least 1.
int64_t residentBlocks(KernelConfigAttr config, const KernelProblem &problem);

/// Why the backward's key-block kernel cannot have `config`'s tile
/// scheduler (grid always; persistent with the warp_specialized schedule
/// and without the deterministic fixed dQ order), or "" when it can. Part
/// of whyKernelConfigFails; the backward conversion asks it too.
std::string whyBackwardTileSchedulerFails(KernelConfigAttr config,
                                          bool deterministic);

/// Why `config` does not work for an op of head dims (d, dv) (see
/// verifyKernelConfig), or "" when it does.
std::string whyKernelConfigFails(KernelConfigAttr config, bool backward,
                                 bool deterministic, int64_t headDim,
                                 int64_t valueHeadDim);

/// Checks `config` for an op of head dims (d, dv): the chip exists and has
/// the MMA kind, the tiles split over the warps as the kernels need, and
/// every kernel of the op fits the chip's shared memory and register
/// budget. `backward` / `deterministic` select the op's kernels. Errors
/// name the limit and the numbers.
LogicalResult verifyKernelConfig(function_ref<InFlightDiagnostic()> emitError,
                                 KernelConfigAttr config, bool backward,
                                 bool deterministic, int64_t headDim,
                                 int64_t valueHeadDim);

} // namespace mlir::fa

#endif // FA_DIALECT_FA_IR_KERNELRESOURCES_H
