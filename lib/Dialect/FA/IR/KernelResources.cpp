//===- KernelResources.cpp - What the GPU kernels need and chips offer ----===//

#include "fa/Dialect/FA/IR/KernelResources.h"

#include "fa/Dialect/FA/IR/FAOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::fa;

bool mlir::fa::isPersistentScheduler(TileScheduler scheduler) {
  return scheduler != TileScheduler::Grid;
}

//===----------------------------------------------------------------------===//
// Chips
//===----------------------------------------------------------------------===//

// CUDA C Programming Guide, "Technical Specifications per Compute
// Capability": 163 KiB of shared memory per block on 8.0, 227 KiB on 9.0.
// PTX ISA: sm_80 since 7.0, sm_90 since 7.8, sm_90a (wgmma) since 8.0; the
// vector reductions of the sm_90 backward need 8.1.
// Per multiprocessor: 164 KiB of shared memory on 8.0, 228 KiB on 9.0, 1 KiB
// of it reserved per resident block; 64 K registers and 2048 threads.
static const ChipInfo kChips[] = {
    {"sm_80", 166912, 255, 1024, /*wgmma=*/false, /*vectorReductions=*/false,
     /*minPtxVersion=*/70, 167936, 1024, 65536, 2048},
    {"sm_90", 232448, 255, 1024, /*wgmma=*/false, /*vectorReductions=*/true,
     /*minPtxVersion=*/81, 233472, 1024, 65536, 2048},
    {"sm_90a", 232448, 255, 1024, /*wgmma=*/true, /*vectorReductions=*/true,
     /*minPtxVersion=*/81, 233472, 1024, 65536, 2048},
};

int64_t mlir::fa::residentBlocks(KernelConfigAttr config,
                                 const KernelProblem &problem) {
  const ChipInfo *chip = lookupChip(config.getChip());
  if (!chip)
    return 1;
  KernelResources res = kernelResources(config, problem);
  int64_t threads = std::max<int64_t>(res.threads, 1);
  int64_t bySmem = chip->sharedMemoryPerMultiprocessor /
                   (res.sharedMemory + chip->reservedSharedMemoryPerBlock);
  int64_t byRegs =
      chip->registersPerMultiprocessor / (threads * chip->registersPerThread);
  int64_t byThreads = chip->threadsPerMultiprocessor / threads;
  return std::max<int64_t>(1, std::min({bySmem, byRegs, byThreads}));
}

const ChipInfo *mlir::fa::lookupChip(StringRef name) {
  for (const ChipInfo &chip : kChips)
    if (chip.name == name)
      return &chip;
  return nullptr;
}

std::string mlir::fa::supportedChipNames() {
  std::string names;
  for (const ChipInfo &chip : kChips)
    names += (names.empty() ? "" : ", ") + chip.name.str();
  return names;
}

//===----------------------------------------------------------------------===//
// The kernels' resources
//===----------------------------------------------------------------------===//

int64_t mlir::fa::backwardDqChunk(int64_t blockQ, int64_t headDim,
                                  int64_t warps) {
  // The chunks must tile the head dim exactly (D = 96 or 160 is no multiple
  // of 64) and deal evenly to the warps.
  auto works = [&](int64_t chunk) {
    return headDim % chunk == 0 &&
           (blockQ / 16) * (headDim / chunk) % warps == 0;
  };
  for (int64_t chunk = 64; chunk >= 16; chunk /= 2)
    if (chunk <= headDim && works(chunk))
      return chunk;
  return 0;
}

PairColumns mlir::fa::backwardPairColumns(int64_t dSlice, int64_t dvSlice) {
  if (dSlice == dvSlice && dSlice % 128 != 0)
    return {dSlice, 0, true};
  auto half = [](int64_t cols) {
    return 64 * llvm::divideCeil(llvm::divideCeil(cols, 64), 2);
  };
  return {half(dSlice), half(dvSlice), false};
}

/// Warps of the deterministic dQ kernel: at most one per 16 query rows.
static int64_t queryBlockWarps(KernelConfigAttr config) {
  return std::min<int64_t>(config.getWarps(),
                           std::max<int64_t>(config.getBlockQ() / 16, 1));
}

KernelResources mlir::fa::kernelResources(KernelConfigAttr config,
                                          const KernelProblem &problem) {
  const ChipInfo *chip = lookupChip(config.getChip());
  bool wgmma = config.getMma() == MmaKind::Wgmma;
  int64_t bq = config.getBlockQ(), bkv = config.getBlockKV();
  int64_t d = problem.headDim, dv = problem.valueHeadDim;
  KernelResources r;
  r.warps = problem.kind == KernelKind::BackwardQueryBlock
                ? queryBlockWarps(config)
                : config.getWarps();
  r.threads = 32 * r.warps;
  auto tile = [&](int64_t rows, int64_t cols) {
    return TileLayout::get(rows, cols, /*swizzle=*/false, wgmma).bytes();
  };
  switch (problem.kind) {
  case KernelKind::Forward: {
    // Q | K stages | V stages (TiledAttentionToGPU.cpp); persistent, two
    // Q buffers (the producer loads the next tile's Q during this one).
    int64_t stages = config.getStages();
    bool persistent = isPersistentScheduler(config.getTileScheduler());
    int64_t qBuffers = persistent ? 2 : 1;
    // Persistent, O is staged for a TMA store after the K/V rings; dynamic,
    // the tile index of each Q buffer follows.
    r.sharedMemory =
        qBuffers * tile(bq, d) + tile(stages * bkv, d) +
        tile(stages * bkv, dv) + (wgmma ? kWgmmaAlignment : 0) +
        (persistent ? tile(bq, dv) : 0) +
        (config.getTileScheduler() == TileScheduler::Dynamic ? kTileSlotBytes
                                                             : 0);
    if (wgmma) {
      // One warpgroup row of 16 per warp: O [16, dv] and S [16, Bc].
      r.accumulatorRegisters = dv / 2 + bkv / 2;
    } else {
      // The conversion splits the softmax into 32-key sub-steps when O and
      // the whole score tile would not fit together.
      int64_t m = bq / (16 * r.warps);
      int64_t o = m * dv / 2, keys = bkv;
      if (o + m * bkv / 2 > 160 && bkv % 32 == 0)
        keys = 32;
      r.accumulatorRegisters = o + m * keys / 2;
    }
    return r;
  }
  case KernelKind::BackwardKeyBlock: {
    // K | V | Q x 2 | dO x 2 | [dS^T] | lse2 x 2 | delta x 2 | [dQ staging]
    // (TiledAttentionBackwardToGPU.cpp), wgmma tiles 1024-byte aligned.
    // Each of the dkv_split blocks of a key block keeps (and adds dQ for)
    // one slice of the head-dim columns.
    int64_t split = config.getDkvSplit();
    int64_t dSlice = d / split, dvSlice = dv / split;
    bool staged = problem.withDq && chip && chip->vectorReductions;
    int64_t bytes = 0;
    auto place = [&](int64_t tileBytes) {
      if (wgmma)
        bytes = llvm::alignTo(bytes, kWgmmaAlignment);
      bytes += tileBytes;
    };
    // A wgmma pair of warpgroups per 64 keys passes P^T and dS^T through
    // shared memory.
    int64_t wgSplit = wgmma ? 16 * r.warps / bkv : 1;
    place(tile(bkv, d));
    place(tile(bkv, dv));
    place(tile(2 * bq, d));
    place(tile(2 * bq, dv));
    // Warp-specialized: the consumers meet once per query block, so dS^T is
    // double-buffered; lse2 and delta come through a ring of stages
    // (cooperative: beside each of the two Q / dO buffers).
    bool ws = config.getSchedule() == KernelSchedule::WarpSpecialized;
    if (problem.withDq || wgSplit > 1)
      place(tile(bkv, bq));
    if (wgSplit > 1 || (ws && problem.withDq))
      place(tile(bkv, bq));
    bytes += (ws ? kBackwardColumnStages : 2) * (2 * bq * 4);
    if (staged && ws) {
      // Per warp, 16 rows x 64 columns of f32 as two 128-byte swizzled
      // panels that a bulk tensor reduction adds to dQ.
      place(r.warps * 16 * 64 * 4);
    } else if (staged) {
      int64_t chunk = wgmma ? 64 : backwardDqChunk(bq, dSlice, r.warps);
      auto staging = [&](int64_t rows) {
        return r.warps * rows * (chunk + 4) * 4;
      };
      auto fits = [&](int64_t rows) {
        return !chip || bytes + staging(rows) + (wgmma ? kWgmmaAlignment : 0) <=
                            chip->sharedMemoryPerBlock;
      };
      // The pair's P^T and dS^T tiles leave no room for a 16-row area at the
      // largest head dims (D = 256: 249,856 B): there each warp stages the
      // rows of its fragments' two halves one after the other (8 rows,
      // 232,448 B on sm_90a). Where neither fits, the fragments add 8-byte
      // reductions directly.
      r.dqStageRows = fits(16) || wgSplit == 1 ? 16 : fits(8) ? 8 : 0;
      staged = r.dqStageRows != 0;
      if (staged)
        bytes += staging(r.dqStageRows);
    }
    r.stagesDq = staged;
    r.sharedMemory = bytes + (wgmma ? kWgmmaAlignment : 0);
    // dK and dV of 16 keys per warp row tile; S^T and dP^T of those keys
    // against the query block.
    if (wgSplit > 1) {
      // Each warpgroup's dK / dV columns (backwardPairColumns) of 64 keys;
      // S^T and dP^T of 64 keys against half the queries.
      PairColumns cols = backwardPairColumns(dSlice, dvSlice);
      r.accumulatorRegisters = (cols.k + cols.v) / 2 + bq / 2;
      return r;
    }
    int64_t m = bkv / (16 * r.warps);
    r.accumulatorRegisters = m * (dSlice + dvSlice) / 2 + m * bq;
    return r;
  }
  case KernelKind::BackwardQueryBlock: {
    // Q | dO | K x 2 | V x 2, mma.sync.
    auto padded = [&](int64_t rows, int64_t cols) {
      return TileLayout::get(rows, cols, false, false).bytes();
    };
    r.sharedMemory = padded(bq, d) + padded(bq, dv) + padded(2 * bkv, d) +
                     padded(2 * bkv, dv);
    int64_t m = bq / (16 * r.warps);
    r.accumulatorRegisters = m * d / 2 + m * bkv;
    return r;
  }
  }
  llvm_unreachable("unknown kernel kind");
}

//===----------------------------------------------------------------------===//
// Verification
//===----------------------------------------------------------------------===//

LogicalResult KernelConfigAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, StringRef chip, MmaKind mma,
    int64_t blockQ, int64_t blockKV, int64_t warps, int64_t stages,
    int64_t dkvSplit, KernelSchedule schedule, TileScheduler tileScheduler) {
  const ChipInfo *info = lookupChip(chip);
  if (!info)
    return emitError() << "unknown chip '" << chip
                       << "' (supported: " << supportedChipNames() << ")";
  if (mma == MmaKind::Wgmma && !info->wgmma)
    return emitError() << "wgmma needs sm_90a, not " << chip;
  if (blockQ <= 0 || blockKV <= 0)
    return emitError() << "block_q and block_kv must be positive, got "
                       << blockQ << " and " << blockKV;
  if (warps < 1 || 32 * warps > info->threadsPerBlock)
    return emitError() << "warps must be in [1, " << info->threadsPerBlock / 32
                       << "], got " << warps;
  if (stages != 1 && stages != 2)
    return emitError() << "stages must be 1 or 2, got " << stages;
  if (dkvSplit < 1 || dkvSplit > 4)
    return emitError() << "dkv_split must be in [1, 4], got " << dkvSplit;
  if (schedule == KernelSchedule::WarpSpecialized) {
    if (mma != MmaKind::Wgmma)
      return emitError() << "the warp_specialized schedule needs wgmma";
    // The producer warpgroup comes on top of the consumers' warps.
    if (32 * warps + 128 > info->threadsPerBlock)
      return emitError() << "warp_specialized: " << warps
                         << " consumer warps and the producer warpgroup are "
                            "more than "
                         << info->threadsPerBlock << " threads";
  }
  // Only the warp-specialized kernel loops over tiles.
  if (isPersistentScheduler(tileScheduler) &&
      schedule != KernelSchedule::WarpSpecialized)
    return emitError() << "the " << stringifyTileScheduler(tileScheduler)
                       << " tile scheduler needs the warp_specialized "
                          "schedule";
  return success();
}

namespace {
/// Collects why a configuration does not work, as one sentence.
struct ConfigChecker {
  KernelConfigAttr config;
  std::string why;

  llvm::raw_string_ostream error() {
    why.clear();
    return llvm::raw_string_ostream(why);
  }

  bool fits(const char *what, const KernelProblem &p) {
    const ChipInfo *chip = lookupChip(config.getChip());
    KernelResources r = kernelResources(config, p);
    if (r.sharedMemory > chip->sharedMemoryPerBlock) {
      error() << what << " needs " << r.sharedMemory
              << " bytes of shared memory, more than the "
              << chip->sharedMemoryPerBlock << " a thread block may have on "
              << chip->name << "; use smaller block_q/block_kv"
              << (p.kind == KernelKind::Forward ? " (or stages = 1)" : "");
      return false;
    }
    if (r.accumulatorRegisters > kAccumulatorRegisterBudget) {
      error() << what << " would keep " << r.accumulatorRegisters
              << " accumulator values per thread in registers, more than the "
              << kAccumulatorRegisterBudget
              << " that leave room for the rest of the kernel; use smaller "
                 "tiles or more warps";
      return false;
    }
    return true;
  }

  /// The reason `config` does not work for the op, or "".
  std::string check(bool backward, bool deterministic, int64_t d, int64_t dv);
};
} // namespace

std::string ConfigChecker::check(bool backward, bool deterministic, int64_t d,
                                 int64_t dv) {
  bool wgmma = config.getMma() == MmaKind::Wgmma;
  int64_t bq = config.getBlockQ(), bkv = config.getBlockKV(),
          warps = config.getWarps();
  if (d % 16 || dv % 16) {
    error() << "the GPU kernels need head dims that are multiples of 16, got "
            << d << " and " << dv;
    return why;
  }
  if (bq % 16 || bkv % 16) {
    error() << "block_q and block_kv must be multiples of 16";
    return why;
  }
  int64_t split = config.getDkvSplit();
  if (!backward) {
    if (split != 1)
      error() << "dkv_split applies to the backward only";
    else if (bq % (16 * warps))
      error() << "block_q must be a multiple of 16 * warps = " << 16 * warps;
    else if (wgmma && warps % 4)
      error() << "wgmma needs whole warpgroups: warps must be a multiple of 4";
    else if (wgmma && bq != 16 * warps)
      error() << "with wgmma each warp owns 16 query rows: block_q must be "
                 "16 * warps = "
              << 16 * warps;
    else if (wgmma && bkv > 256)
      error() << "wgmma's N is at most 256: block_kv must be at most 256";
    else if (config.getSchedule() == KernelSchedule::WarpSpecialized &&
             (d % 64 || dv % 64))
      error() << "the warp_specialized schedule loads K and V as 64-column "
                 "TMA panels: head dims must be multiples of 64, got "
              << d << " and " << dv;
    else
      fits("the forward kernel", {KernelKind::Forward, d, dv});
    return why;
  }

  bool ws = config.getSchedule() == KernelSchedule::WarpSpecialized;
  if (ws && !wgmma)
    error() << "the warp_specialized schedule needs wgmma";
  else if (ws && (split != 1 || bkv != 16 * warps))
    error() << "the warp_specialized backward keeps 16 keys per consumer "
               "warp and all head-dim columns: block_kv must be 16 * warps = "
            << 16 * warps << " and dkv_split 1";
  else if (ws && (d % 64 || dv % 64))
    error() << "the warp_specialized backward loads Q, dO, K and V as "
               "64-column TMA panels: head dims must be multiples of 64, got "
            << d << " and " << dv;
  else if (std::string s = whyBackwardTileSchedulerFails(config, deterministic);
           !s.empty())
    error() << s;
  else if (config.getStages() != 2)
    error() << "the backward double-buffers its query tiles: stages must be 2";
  else if (d % (16 * split) || dv % (16 * split))
    error() << "dkv_split = " << split << " must cut both head dims into "
            << "slices of whole 16-column tiles, got " << d << " and " << dv;
  else if (wgmma && split > 1 && ((d / split) % 64 || (dv / split) % 64))
    error() << "with wgmma each dkv_split slice must be whole 64-column "
            << "panels, got " << d / split << " and " << dv / split
            << " columns";
  else if (kBackwardRowBlock % bq)
    error() << "block_q must divide " << kBackwardRowBlock;
  else if (bkv % (16 * warps) && !(wgmma && warps == 8 && bkv == 64))
    error() << "block_kv must be a multiple of 16 * warps = " << 16 * warps;
  else if (!backwardDqChunk(bq, d / split, warps))
    error() << "the dQ tiles of block_q x head dim do not split evenly over "
               "the warps";
  else if (wgmma &&
           (warps % 4 || (bkv != 16 * warps && !(warps == 8 && bkv == 64))))
    error() << "wgmma needs whole warpgroups of 16 keys per warp: warps a "
               "multiple of 4 and block_kv = 16 * warps (or 8 warps on 64 "
               "keys: two warpgroups share them)";
  else if (wgmma && bkv < 16 * warps &&
           (llvm::divideCeil(d / split, 64) < 2 ||
            llvm::divideCeil(dv / split, 64) < 2))
    error() << "two warpgroups on 64 keys split the head-dim columns in "
               "64-column panels: each head dim (slice) needs more than 64 "
               "columns";
  else if (wgmma && bq % 64)
    error() << "the wgmma backward's dQ and dS^T tiles are 64 queries: "
               "block_q must be a multiple of 64";
  // (The warp-specialized key-block kernel adds dQ in both modes: in a
  // fixed order when deterministic; with modifiers that mode still takes
  // the dQ kernel, so it must fit too.)
  else if (fits("the key-block kernel", {KernelKind::BackwardKeyBlock, d, dv,
                                         /*withDq=*/!deterministic || ws}) &&
           deterministic) {
    int64_t qWarps = queryBlockWarps(config);
    if (bq % (16 * qWarps))
      error() << "the dQ kernel needs block_q to be a multiple of 16 * "
              << qWarps;
    else
      fits("the dQ kernel", {KernelKind::BackwardQueryBlock, d, dv});
  }
  return why;
}

std::string mlir::fa::whyBackwardTileSchedulerFails(KernelConfigAttr config,
                                                    bool deterministic) {
  TileScheduler scheduler = config.getTileScheduler();
  if (scheduler == TileScheduler::Dynamic)
    return "the backward's tile schedulers are grid and persistent, not "
           "dynamic";
  if (scheduler == TileScheduler::Persistent &&
      config.getSchedule() != KernelSchedule::WarpSpecialized)
    return "the persistent tile scheduler needs the warp_specialized "
           "schedule";
  if (scheduler == TileScheduler::Persistent && deterministic)
    return "the persistent backward keeps no fixed dQ order (a key block "
           "waits for the one above, which a persistent block may not have "
           "started): the deterministic backward is grid only";
  return "";
}

std::string mlir::fa::whyKernelConfigFails(KernelConfigAttr config,
                                           bool backward, bool deterministic,
                                           int64_t d, int64_t dv) {
  return ConfigChecker{config, ""}.check(backward, deterministic, d, dv);
}

LogicalResult
mlir::fa::verifyKernelConfig(function_ref<InFlightDiagnostic()> emitError,
                             KernelConfigAttr config, bool backward,
                             bool deterministic, int64_t d, int64_t dv) {
  std::string why =
      whyKernelConfigFails(config, backward, deterministic, d, dv);
  if (why.empty())
    return success();
  return emitError() << "kernel configuration " << Attribute(config) << ": "
                     << why;
}
