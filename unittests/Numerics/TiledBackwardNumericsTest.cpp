//===- TiledBackwardNumericsTest.cpp - fa-tile-attention-backward on CPU --===//
//
// Runs `fa-tile-attention-backward` and `fa-decompose-attention-backward-step`
// followed by the CPU lowering through the ExecutionEngine and compares dq,
// dk, dv with the float64 backward, over sequence lengths that are and are not
// multiples of the blocks, head dims, block sizes, masks, GQA/MQA, softcap and
// both dQ modes. The forward's
// `out` and `lse` come from the float64 forward (rounded on the way in), so
// only the backward is under test.
//
//===----------------------------------------------------------------------===//

#include "AttentionHarness.h"
#include "TiledCase.h"

#include "fa/Dialect/FA/Transforms/Passes.h"
#include "fa/Pipelines/Pipelines.h"

#include <cstring>
#include <functional>
#include <string>

using namespace mlir::fa::numerics;

namespace {

/// Why tiledTolerance (TiledCase.h) holds for the backward; bounds for `allClose` (|got - want| <= rtol * (|want| + max|want|)).
///
/// f32: everything is computed in f32 from inputs the float64 code sees
/// exactly. Beyond f32 rounding in dot products of up to 339 terms, the tiled
/// form recomputes P = exp2(s * log2e - lse * log2e) from an LSE rounded to
/// f32 (|lse| < ~10, so P is off by ~1e-6 relative at most). Observed over
/// the cases below: <= 3.5e-6. 1e-5 leaves room and still fails for any
/// wrong term (a dropped Di, LSE or mask changes results by > 1e-2).
///
/// f16/bf16: P and dS are rounded to the element type before their GEMMs, as
/// tensor cores consume them (2^-11 resp. 2^-8 relative per product term,
/// averaging out over the sums), on top of the rounding of the results and
/// of `out` (through Di). Observed: <= 5.2e-4 (f16), <= 4.6e-3 (bf16); the
/// bounds keep a factor ~4.

PipelineBuilder tiledBackwardPipeline(int64_t blockQ, int64_t blockKV) {
  return [=](mlir::OpPassManager &pm) {
    pm.addPass(mlir::fa::createFATileAttentionBackward(
        mlir::fa::FATileAttentionBackwardOptions{blockQ, blockKV}));
    pm.addPass(mlir::fa::createFADecomposeAttentionBackwardStep());
    mlir::fa::buildCPUToLLVMPipeline(pm);
  };
}

/// Runs the tiled backward of `c` on random inputs; `want` gets the float64
/// gradients when non-null.
llvm::Expected<BackwardResult> runTiled(const TiledCase &c,
                                        BackwardResult *want = nullptr,
                                        double maxLogit = 0) {
  const AttentionProblem &p = c.problem;
  AttentionInputs in = makeRandomInputs(p, seedFor(p));
  if (maxLogit > 0)
    scaleLogits(p, in, maxLogit);
  auto jit = AttentionJit::compile(p, AttentionKind::Backward,
                                   tiledBackwardPipeline(c.blockQ, c.blockKV));
  if (!jit)
    return jit.takeError();
  ForwardResult fwd = float64Forward(p, in.q, in.k, in.v);
  if (want)
    *want = float64Backward(p, in.q, in.k, in.v, in.dout);
  return (*jit)->backward(in, fwd.out, fwd.lse);
}

class TiledBackwardNumerics : public ::testing::TestWithParam<TiledCase> {};

TEST_P(TiledBackwardNumerics, MatchesFloat64) {
  const TiledCase &c = GetParam();
  BackwardResult want;
  auto got = runTiled(c, &want);
  ASSERT_TRUE(!!got) << llvm::toString(got.takeError());
  double tol = tiledTolerance(c.problem.elementType);
  EXPECT_TRUE(allClose("dq", got->dq, want.dq, tol));
  EXPECT_TRUE(allClose("dk", got->dk, want.dk, tol));
  EXPECT_TRUE(allClose("dv", got->dv, want.dv, tol));
}

/// Each case runs in the fast mode and, with `deterministic`, again in the
/// deterministic one.
std::vector<TiledCase> withBothModes(std::vector<TiledCase> cases) {
  size_t n = cases.size();
  for (size_t i = 0; i < n; ++i) {
    TiledCase det = cases[i];
    det.problem.deterministic = true;
    cases.push_back(det);
  }
  return cases;
}

auto caseName = [](const auto &info) { return info.param.name(); };

INSTANTIATE_TEST_SUITE_P(Tiled, TiledBackwardNumerics,
                         ::testing::ValuesIn(withBothModes(sharedTiledCases())),
                         caseName);

bool bitwiseEqual(const HostTensor &a, const HostTensor &b) {
  return a.shape == b.shape && std::memcmp(a.data.data(), b.data.data(),
                                           a.data.size() * sizeof(double)) == 0;
}

/// Deterministic mode: two runs of the same compiled function give the same
/// bits, and the fast mode computes the same math (equal up to the order of
/// f32 additions, which on this host happens to be the same).
TEST(TiledBackwardNumerics, DeterministicIsRepeatableAndMatchesFastMode) {
  TiledCase c =
      C(113, 339, 64).blocks(32, 64).heads(4, 2).causal().window(100, 0);
  c.problem.deterministic = true;
  const AttentionProblem &p = c.problem;
  AttentionInputs in = makeRandomInputs(p, 7);
  ForwardResult fwd = float64Forward(p, in.q, in.k, in.v);
  auto det = AttentionJit::compile(p, AttentionKind::Backward,
                                   tiledBackwardPipeline(c.blockQ, c.blockKV));
  ASSERT_TRUE(!!det) << llvm::toString(det.takeError());
  auto first = (*det)->backward(in, fwd.out, fwd.lse);
  auto second = (*det)->backward(in, fwd.out, fwd.lse);
  ASSERT_TRUE(first && second) << llvm::toString(first.takeError())
                               << llvm::toString(second.takeError());
  EXPECT_TRUE(bitwiseEqual(first->dq, second->dq));
  EXPECT_TRUE(bitwiseEqual(first->dk, second->dk));
  EXPECT_TRUE(bitwiseEqual(first->dv, second->dv));

  AttentionProblem fastProblem = p;
  fastProblem.deterministic = false;
  auto fast = AttentionJit::compile(fastProblem, AttentionKind::Backward,
                                    tiledBackwardPipeline(c.blockQ, c.blockKV));
  ASSERT_TRUE(!!fast) << llvm::toString(fast.takeError());
  auto fastGrads = (*fast)->backward(in, fwd.out, fwd.lse);
  ASSERT_TRUE(!!fastGrads) << llvm::toString(fastGrads.takeError());
  EXPECT_TRUE(allClose("dq", fastGrads->dq, first->dq, 1e-6));
  EXPECT_TRUE(allClose("dk", fastGrads->dk, first->dk, 1e-6));
  EXPECT_TRUE(allClose("dv", fastGrads->dv, first->dv, 1e-6));
}

/// Rows that see no key (lse = +inf) and keys no row sees get exactly zero
/// gradients, never NaN, in both modes.
TEST(TiledBackwardNumerics, InvisibleRowsAndKeysGetExactZeros) {
  for (bool deterministic : {false, true}) {
    // Causal with Nq > Nk: rows 0..48 see nothing (whole query blocks are
    // skipped, the block of rows 48..63 is partly visible); the left window
    // of 8 skips most key blocks of every query block.
    TiledCase c = C(113, 64, 32).blocks(16, 16).causal().window(8, 0);
    c.problem.deterministic = deterministic;
    BackwardResult want;
    auto got = runTiled(c, &want);
    ASSERT_TRUE(!!got) << llvm::toString(got.takeError());
    for (int64_t i = 0; i < 49; ++i)
      for (int64_t d = 0; d < c.problem.headDim; ++d)
        EXPECT_EQ(got->dq.at({0, 0, i, d}), 0.0) << "row " << i;
    EXPECT_TRUE(allClose("dq", got->dq, want.dq, 1e-5));
    EXPECT_TRUE(allClose("dk", got->dk, want.dk, 1e-5));
    EXPECT_TRUE(allClose("dv", got->dv, want.dv, 1e-5));
  }
}

/// Logits up to 1e4: the recomputation exp2(s * log2e - lse * log2e) must
/// neither overflow nor lose the probabilities. An f32 score of magnitude 1e4
/// carries an absolute rounding error of ~D * 2^-24 * 1e4 (~4e-2 at D = 64),
/// which becomes a relative error of P, dS and so of the gradients of the same
/// size: 5e-2 relative, and never NaN or inf.
class TiledBackwardLargeLogits : public ::testing::TestWithParam<TiledCase> {};

TEST_P(TiledBackwardLargeLogits, NoOverflowAndBoundedError) {
  const TiledCase &c = GetParam();
  BackwardResult want;
  auto got = runTiled(c, &want, /*maxLogit=*/1e4);
  ASSERT_TRUE(!!got) << llvm::toString(got.takeError());
  EXPECT_TRUE(allClose("dq", got->dq, want.dq, 5e-2));
  EXPECT_TRUE(allClose("dk", got->dk, want.dk, 5e-2));
  EXPECT_TRUE(allClose("dv", got->dv, want.dv, 5e-2));
}

INSTANTIATE_TEST_SUITE_P(
    Tiled, TiledBackwardLargeLogits,
    ::testing::ValuesIn(withBothModes({
        C(113, 339, 64).blocks(32, 64),
        C(339, 113, 32).blocks(64, 16).causal().heads(4, 2),
    })),
    [](const ::testing::TestParamInfo<TiledCase> &info) {
      return info.param.name();
    });

} // namespace
