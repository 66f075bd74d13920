//===- SelectKernelConfig.cpp - Choose each op's GPU kernel config --------===//
//
// The one place where tiles, warps, stages and the MMA kind are chosen: a
// table per chip and head dim, then the largest tiles that fit the chip
// (KernelResources.h) when the table's do not.
//
//===----------------------------------------------------------------------===//

#include "fa/Dialect/FA/IR/FAOps.h"
#include "fa/Dialect/FA/IR/KernelResources.h"
#include "fa/Dialect/FA/Transforms/Passes.h"

#include "llvm/ADT/SetVector.h"

#include "llvm/Support/raw_ostream.h"
#include <algorithm>

namespace mlir::fa {
#define GEN_PASS_DEF_FASELECTKERNELCONFIG
#include "fa/Dialect/FA/Transforms/Passes.h.inc"
} // namespace mlir::fa

using namespace mlir;
using namespace mlir::fa;

namespace {

struct Tiles {
  int64_t blockQ, blockKV, warps, stages;
  int64_t dkvSplit = 1;
  KernelSchedule schedule = KernelSchedule::Cooperative;
  TileScheduler tileScheduler = TileScheduler::Grid;
};

/// What the table is indexed by.
struct OpTraits {
  bool backward = false, deterministic = false;
  int64_t d = 0, dv = 0;
  /// No mask and no softcap: the cheapest score arithmetic.
  bool plain = false;
  /// A mask rule (causal, window): tiles of unequal work.
  bool masked = false;
  /// A score_mod or mask_mod.
  bool modifiers = false;
  /// Packed sequences or a paged cache; a paged cache takes the cooperative
  /// grid kernel only (a TMA box of a page would read its unused rows).
  bool sequenceForm = false;
  /// A paged cache's page size (0 for the other forms).
  int64_t pageSize = 0;
  Type elt;
};

/// The table: per kernel, MMA kind and chip, the tiles measured fastest on
/// the H200 (docs/PERFORMANCE.md), before any shrinking to fit.
Tiles tableTiles(const OpTraits &op, MmaKind mma, const ChipInfo &chip) {
  int64_t dmax = std::max(op.d, op.dv);
  if (!op.backward) {
    if (mma == MmaKind::Wgmma) {
      // D <= 64: one warpgroup per block, 3 blocks per SM overlap one's
      // softmax with another's MMAs; larger D: two warpgroups share each
      // K/V block, of 64 keys at D = 96 (1.04-1.33x FA2 against 0.86-1.23x
      // with 128 keys, H200, 2026-12-01) and of 128 keys above.
      if (dmax <= 64)
        return {64, 128, 4, 2};
      return dmax <= 96 ? Tiles{128, 64, 8, 2} : Tiles{128, 128, 8, 2};
    }
    // FlashAttention-2's sm8x tiles: 128 query rows over 4 warps, 64 keys
    // per block at D <= 64 and 32 up to 160; past that O of two row tiles
    // per warp no longer fits the registers: one row tile per warp.
    if (dmax <= 64)
      return {128, 64, 4, 2};
    if (dmax <= 160)
      return {128, 32, 4, 2};
    return {64, 64, 4, 2};
  }
  if (mma == MmaKind::Wgmma)
    // Two warpgroups of 64 keys with dK/dV in registers; 128-query blocks at
    // D <= 64 when the score arithmetic is cheap (the others spill there).
    return {dmax <= 64 && op.plain ? 128 : 64, 128, 8, 2};
  // sm_80's scalar dQ atomics need more registers than sm_90's staged
  // vector reductions: 64 keys over 4 warps there, 128 over 8 on sm_90.
  if (!chip.vectorReductions)
    return {64, 64, 4, 2};
  return {dmax <= 64 ? 128 : 64, 128, 8, 2};
}

/// The backward's dK/dV split: the fewest thread blocks per key block whose
/// column slices keep dK, dV and the score tiles within 192 registers of
/// the tiles `t` (as D <= 128 does unsplit), whole 64-column panels with
/// wgmma.
int64_t tableSplit(const OpTraits &op, MmaKind mma, const Tiles &t) {
  // With wgmma, a pair of warpgroups on 64 keys shares the columns of large
  // head dims without computing anything twice: tried first, unsplit.
  if (mma == MmaKind::Wgmma && std::max(op.d, op.dv) > 128)
    return 1;
  int64_t m = t.blockKV / (16 * t.warps);
  for (int64_t split = 1; split <= 4; ++split) {
    if (op.d % (16 * split) || op.dv % (16 * split))
      continue;
    if (mma == MmaKind::Wgmma && split > 1 &&
        ((op.d / split) % 64 || (op.dv / split) % 64))
      continue;
    if (m * (op.d + op.dv) / (2 * split) + m * t.blockQ <= 192)
      return split;
  }
  return 1;
}

/// Candidates from the table's tiles down, the request's fixed fields kept:
/// smaller key blocks first, then smaller query blocks (and, where the MMA
/// kind ties warps to the block, fewer warps), then one K/V stage; for the
/// backward the table's dK/dV split first, then the others.
/// The warp-specialized forward's tiles: 64 query rows per consumer
/// warpgroup, 128 keys, two stages; three consumers at D = 64 (their
/// registers allow it and the producer is shared by more rows), two above.
/// Measured on the H200 (2026-12-01, fifth session, both orders): 1.17-1.40x
/// the cooperative kernel at D = 128 (N 1k-16k); at D = 64 1.06-1.23x from
/// N = 4k on, 0.78-0.95x at N = 1k.
SmallVector<Tiles> warpSpecializedCandidates(const OpTraits &op, MmaKind mma,
                                             const ChipInfo &chip,
                                             const KernelConfigRequest &req) {
  if (op.backward || op.pageSize || mma != MmaKind::Wgmma || !chip.wgmma ||
      (req.schedule && *req.schedule != KernelSchedule::WarpSpecialized))
    return {};
  // Chosen (not forced) where it was measured to win. A persistent tile
  // scheduler asks for it: only this kernel loops over tiles.
  bool asked = req.schedule.has_value() ||
               (req.tileScheduler && isPersistentScheduler(*req.tileScheduler));
  int64_t dmax = std::max(op.d, op.dv);
  if (!asked && (op.d % 64 || op.dv % 64 || dmax > 128))
    return {};
  int64_t q = req.blockQ ? req.blockQ : (dmax <= 64 ? 192 : 128);
  int64_t warps = req.warps ? req.warps : q / 16;
  // One consumer warpgroup leaves nothing to overlap: only on request.
  if (!asked && warps < 8)
    return {};
  Tiles t{q,
          req.blockKV ? req.blockKV : 128,
          warps,
          req.stages ? req.stages : 2,
          1,
          KernelSchedule::WarpSpecialized,
          TileScheduler::Grid};
  if (req.tileScheduler) {
    t.tileScheduler = *req.tileScheduler;
    return {t};
  }
  // The persistent scheduler (with its TMA-store epilogue) where it was
  // measured to win: without a mask, 1.01-1.59x the grid kernels at D = 128
  // and 1.03-1.39x at D = 64 (N 512-16k, H200, 2026-12-02); the grid one
  // last (fa-compile's choice when the others spill). With a mask, the
  // dynamic scheduler: the static order loses at causal 16k (0.84x at D =
  // 128), the atomic counter balances the uneven tiles. Dv != D without a
  // mask: persistent, 0.55-0.98x the grid's time at (64, 128) and
  // 0.70-0.99x at (128, 64) up to 4k, 1.02-1.03x at 16k
  // (2026-12-02, eighth session); with a mask the dynamic kernels have not
  // run on the H200 at Dv != D: grid.
  if (op.d != op.dv && op.masked)
    return {t};
  // Packed sequences: the dynamic scheduler too (their tiles are as uneven
  // as the sequences; the static one spills 8 bytes at D = 128).
  Tiles persistent = t;
  persistent.tileScheduler = op.masked || op.sequenceForm
                                 ? TileScheduler::Dynamic
                                 : TileScheduler::Persistent;
  if (persistent.tileScheduler == TileScheduler::Dynamic)
    return {persistent, t};
  // Without a mask the dynamic kernel next: where the static one spills
  // (D = 64: 16-20 bytes of its tile loop's 64-bit state) the dynamic one,
  // which takes its tiles from the counter, has none.
  Tiles dynamic = t;
  dynamic.tileScheduler = TileScheduler::Dynamic;
  return {persistent, dynamic, t};
}

SmallVector<Tiles> candidates(const OpTraits &op, MmaKind mma,
                              const ChipInfo &chip,
                              const KernelConfigRequest &req) {
  SmallVector<Tiles> ws = warpSpecializedCandidates(op, mma, chip, req);
  if (!op.backward &&
      (req.schedule == KernelSchedule::WarpSpecialized ||
       (req.tileScheduler && isPersistentScheduler(*req.tileScheduler))))
    return ws;
  Tiles t = tableTiles(op, mma, chip);
  SmallVector<int64_t> splits = {1};
  if (op.backward) {
    int64_t first = req.dkvSplit ? req.dkvSplit : tableSplit(op, mma, t);
    splits = {first};
    for (int64_t split = 1; split <= 4 && !req.dkvSplit; ++split)
      if (split != first)
        splits.push_back(split);
  }
  auto pick = [](int64_t fixed, int64_t chosen) {
    return fixed ? fixed : chosen;
  };
  bool wgmma = mma == MmaKind::Wgmma;
  SmallVector<int64_t> qs, kvs;
  for (int64_t q = pick(req.blockQ, t.blockQ); q >= 16; q /= 2) {
    qs.push_back(q);
    if (req.blockQ)
      break;
  }
  llvm::SetVector<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>> out;
  SmallVector<int64_t> stageList = {pick(req.stages, t.stages)};
  if (!req.stages && !op.backward)
    stageList.push_back(1);
  for (int64_t split : splits)
    for (int64_t stages : stageList)
      for (int64_t q : qs) {
        // Warps: fixed, or the table's (tied to the rows each warp owns).
        int64_t warps = req.warps;
        if (!warps) {
          if (!op.backward)
            warps = wgmma ? q / 16 : std::min<int64_t>(t.warps, q / 16);
          else
            warps = t.warps;
        }
        int64_t kvStart = pick(req.blockKV, t.blockKV);
        // The wgmma backward ties block_kv to the warps: 16 keys per warp
        // (fewer warps shrink it), or two warpgroups sharing 64 keys, which
        // split the work instead of keeping everything twice (first for
        // head dims past 128, whose dK and dV do not fit one warpgroup).
        SmallVector<std::pair<int64_t, int64_t>> kvWarps;
        if (req.blockKV && req.warps) {
          kvWarps.push_back({req.blockKV, req.warps});
        } else if (op.backward && wgmma && !req.blockKV && !req.warps) {
          bool pairFirst = std::max(op.d, op.dv) > 128;
          if (pairFirst)
            kvWarps.push_back({64, 8});
          for (int64_t w = warps; w >= 4; w -= 4)
            kvWarps.push_back({16 * w, w});
          if (!pairFirst)
            kvWarps.push_back({64, 8});
        } else {
          // The mma.sync backward may also halve the warps (its dQ units
          // must deal evenly to them).
          SmallVector<int64_t> warpList = {warps};
          for (int64_t w = warps / 2; op.backward && !req.warps && w >= 2;
               w /= 2)
            warpList.push_back(w);
          for (int64_t w : warpList) {
            int64_t step = op.backward ? 16 * w : 16;
            for (int64_t kv = kvStart; kv >= step; kv -= step) {
              kvWarps.push_back({kv, w});
              if (req.blockKV)
                break;
            }
          }
        }
        for (auto [kv, w] : kvWarps)
          out.insert({q, kv, w, stages, split});
      }
  SmallVector<Tiles> result = ws;
  // The warp-specialized backward first (dense): its overlap and dQ warp
  // (docs/HOPPER.md) need 16 keys per consumer warp and no dK/dV split. At D =
  // Dv = 128 on the cooperative kernel's first tiles. Where it spills (softcap,
  // some windows), fa-compile takes the cooperative candidates that follow.
  // With score / mask modifiers at D = 128 too: where their kernels fit the
  // registers (ALiBi, a causal mask_mod) 1.09x and 1.17x the cooperative
  // kernel (H100, N = 4k, 2026-12-06), the modifier GPU suite passing; the
  // others spill and fa-compile keeps the cooperative kernel.
  bool wsBackward = op.backward && wgmma && !req.schedule && !op.sequenceForm;
  if (wsBackward && op.d == 128 && op.dv == 128) {
    for (auto [q, kv, w, st, split] : out) {
      if (kv != 16 * w || split != 1)
        continue;
      result.push_back({q, kv, w, st, split});
      result.back().schedule = KernelSchedule::WarpSpecialized;
      break;
    }
  }
  // At D = Dv = 64 on 128 x 128 tiles of 8 warps (at 64 queries one dQ
  // unit would serve two warpgroups). With lse2 / delta through the
  // shared-memory ring it takes 0.77-0.82x the time of the previous
  // defaults (H100, 2026-12-07: the cooperative kernel unmasked, this
  // kernel with global lse2 / delta loads causal; N 2k-16k) and 0.76-0.80x
  // deterministic (8k).
  auto fixedOr = [](int64_t fixed, int64_t v) { return !fixed || fixed == v; };
  if (wsBackward && !op.modifiers && op.d == 64 && op.dv == 64 &&
      fixedOr(req.blockQ, 128) && fixedOr(req.blockKV, 128) &&
      fixedOr(req.warps, 8) && fixedOr(req.stages, 2) &&
      fixedOr(req.dkvSplit, 1))
    result.push_back({128, 128, 8, 2, 1, KernelSchedule::WarpSpecialized,
                      TileScheduler::Grid});
  for (auto [q, kv, w, st, split] : out) {
    result.push_back({q, kv, w, st, split});
    // The warp-specialized backward on request (the cooperative one stays
    // the default until the H200 says otherwise); candidates it does not
    // support fail the configuration check.
    if (op.backward && req.schedule)
      result.back().schedule = *req.schedule;
  }
  // A backward's requested tile scheduler applies to every candidate
  // (persistent: only the warp-specialized ones pass the check).
  if (op.backward && req.tileScheduler)
    for (Tiles &t : result)
      t.tileScheduler = *req.tileScheduler;
  return result;
}

FailureOr<OpTraits> traitsOf(Operation *op) {
  OpTraits t;
  auto fill = [&](auto attention) {
    t.d = attention.getHeadDim();
    t.dv = attention.getValueHeadDim();
    t.elt = attention.getQuery().getType().getElementType();
    // Constant or run-time: a mask or a softcap is code either way.
    t.plain = !attention.hasMaskRule() && !attention.hasSoftcap();
    t.masked = attention.hasMaskRule();
  };
  if (auto fwd = dyn_cast<AttentionOp>(op)) {
    fill(fwd);
    // A score_mod is score code; a mask_mod makes tiles unequal as a mask
    // rule does.
    t.plain &= !fwd.hasModifiers();
    t.modifiers = fwd.hasModifiers();
    t.masked |= fwd.hasMaskMod();
  } else if (auto bwd = dyn_cast<AttentionBackwardOp>(op)) {
    fill(bwd);
    t.plain &= !bwd.hasModifiers();
    t.modifiers = bwd.hasModifiers();
    t.masked |= bwd.hasMaskMod();
    t.backward = true;
    t.deterministic = bwd.getDeterministic();
  } else if (auto varlen = dyn_cast<AttentionVarlenOp>(op)) {
    fill(varlen);
    t.sequenceForm = true;
  } else if (auto varlenBwd = dyn_cast<AttentionVarlenBackwardOp>(op)) {
    fill(varlenBwd);
    t.backward = true;
    t.deterministic = varlenBwd.getDeterministic();
    t.sequenceForm = true;
  } else if (auto paged = dyn_cast<AttentionPagedOp>(op)) {
    fill(paged);
    t.sequenceForm = true;
    t.pageSize = paged.getPageSize();
  } else {
    return failure();
  }
  return t;
}

} // namespace

FailureOr<KernelConfigAttr>
mlir::fa::selectKernelConfig(Operation *op, const KernelConfigRequest &req) {
  FailureOr<OpTraits> traits = traitsOf(op);
  if (failed(traits))
    return op->emitOpError("has no kernel configuration to select");
  const ChipInfo *chip = lookupChip(req.chip);
  if (!chip)
    return op->emitError("fa-select-kernel-config: unknown chip '")
           << req.chip << "' (supported: " << supportedChipNames() << ")";
  if (traits->pageSize &&
      (req.schedule == KernelSchedule::WarpSpecialized ||
       (req.tileScheduler && *req.tileScheduler != TileScheduler::Grid)))
    return op->emitOpError("has cooperative grid kernels only: a TMA box of "
                           "a page would read its unused rows");
  if (!traits->elt.isF16() && !traits->elt.isBF16())
    return op->emitError("fa-select-kernel-config: the GPU kernels take f16 "
                         "or bf16 inputs, not ")
           << traits->elt;
  SmallVector<MmaKind> kinds;
  if (req.mma)
    kinds.push_back(*req.mma);
  else if (chip->wgmma)
    kinds = {MmaKind::Wgmma, MmaKind::MmaSync};
  else
    kinds = {MmaKind::MmaSync};

  MLIRContext *ctx = op->getContext();
  // Why the first candidate of each MMA kind fails, for the error.
  std::string reasons;
  int64_t skipped = 0;
  for (MmaKind mma : kinds) {
    if (mma == MmaKind::Wgmma && !chip->wgmma)
      return op->emitError("fa-select-kernel-config: wgmma needs sm_90a, not ")
             << chip->name;
    std::string first;
    for (const Tiles &t : candidates(*traits, mma, *chip, req)) {
      auto config = KernelConfigAttr::getChecked(
          [] { return InFlightDiagnostic(); }, ctx, chip->name, mma, t.blockQ,
          t.blockKV, t.warps, t.stages, t.dkvSplit, t.schedule,
          t.tileScheduler);
      if (!config) {
        if (first.empty())
          first = "the fixed fields are out of range";
        continue;
      }
      std::string why =
          whyKernelConfigFails(config, traits->backward, traits->deterministic,
                               traits->d, traits->dv);
      if (why.empty()) {
        if (skipped++ == req.skip)
          return config;
        continue;
      }
      if (first.empty()) {
        llvm::raw_string_ostream os(first);
        os << Attribute(config) << " fails: " << why;
      }
    }
    if (first.empty())
      first = std::string(stringifyMmaKind(mma)) +
              ": no candidate with the fixed fields";
    reasons += (reasons.empty() ? "" : "; ") + first;
  }
  if (skipped)
    return op->emitError("fa-select-kernel-config: only ")
           << skipped << " kernel configurations work for this op, none to "
           << "take after skipping " << req.skip;
  bool fixed = req.blockQ || req.blockKV || req.warps || req.stages ||
               req.dkvSplit || req.mma || req.schedule.has_value() ||
               req.tileScheduler.has_value();
  return op->emitError("fa-select-kernel-config: no kernel configuration "
                       "works for this op on ")
         << chip->name << (fixed ? " with the fixed fields" : "")
         << " (the first candidate of each MMA kind: " << reasons << ")";
}

namespace {

struct FASelectKernelConfigPass final
    : fa::impl::FASelectKernelConfigBase<FASelectKernelConfigPass> {
  using Base::Base;

  void runOnOperation() override {
    KernelConfigRequest req;
    req.chip = chip;
    if (mma == "wgmma") {
      req.mma = MmaKind::Wgmma;
    } else if (mma == "mma_sync" || mma == "mma.sync") {
      req.mma = MmaKind::MmaSync;
    } else if (mma != "auto") {
      getOperation()->emitError("fa-select-kernel-config: mma must be auto, "
                                "mma_sync or wgmma, got '")
          << mma << "'";
      return signalPassFailure();
    }
    // 0 = choose; the upper bounds keep the candidate arithmetic finite
    // (the configuration's own checks then explain what does not fit).
    for (auto [name, value, max] :
         {std::tuple<StringRef, int64_t, int64_t>{"block-q", blockQ, 1024},
          {"block-kv", blockKV, 1024},
          {"warps", warps, 32},
          {"stages", stages, 2},
          {"dkv-split", dkvSplit, 4},
          {"skip", skip, 1024}}) {
      if (value < 0 || value > max) {
        getOperation()->emitError("fa-select-kernel-config: ")
            << name << " must be in [0, " << max << "] (0 = choose), got "
            << value;
        return signalPassFailure();
      }
    }
    req.blockQ = blockQ;
    req.blockKV = blockKV;
    req.warps = warps;
    req.stages = stages;
    req.dkvSplit = dkvSplit;
    req.skip = skip;
    // The attribute's spelling, or with '-' for '_' as pass options are.
    std::string name = schedule;
    std::replace(name.begin(), name.end(), '-', '_');
    if (name != "auto" && !(req.schedule = symbolizeKernelSchedule(name))) {
      getOperation()->emitError("fa-select-kernel-config: schedule must be "
                                "auto, cooperative or warp_specialized, got '")
          << schedule << "'";
      return signalPassFailure();
    }
    if (tileScheduler != "auto" &&
        !(req.tileScheduler = symbolizeTileScheduler(tileScheduler))) {
      getOperation()->emitError("fa-select-kernel-config: tile-scheduler "
                                "must be auto, grid, persistent or "
                                "dynamic, got '")
          << tileScheduler << "'";
      return signalPassFailure();
    }
    auto result = getOperation()->walk([&](Operation *op) {
      // The packed backward's deterministic mode has a CPU lowering only
      // so far: say so here, at the start of every GPU pipeline, rather than
      // fail later on a loop nest the GPU conversion does not know.
      auto varlenBwd = dyn_cast<AttentionVarlenBackwardOp>(op);
      if (varlenBwd && varlenBwd.getDeterministic()) {
        op->emitOpError("has no deterministic GPU kernel yet (the fast mode, "
                        "dQ by atomics, has one): the CPU pipelines "
                        "(fa-reference-cpu, fa-tiled-cpu) lower this op");
        return WalkResult::interrupt();
      }
      if (!isa<AttentionOp, AttentionBackwardOp, AttentionVarlenOp,
               AttentionVarlenBackwardOp, AttentionPagedOp>(op) ||
          op->hasAttr("kernel_config"))
        return WalkResult::advance();
      FailureOr<KernelConfigAttr> config = selectKernelConfig(op, req);
      if (failed(config))
        return WalkResult::interrupt();
      op->setAttr("kernel_config", *config);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
