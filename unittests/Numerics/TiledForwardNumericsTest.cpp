//===- TiledForwardNumericsTest.cpp - The tiled forward on the CPU --------===//
//
// Runs the FlashAttention passes (fa-tile-attention, fa-specialize-masks,
// fa-use-exp2, fa-decompose-online-attention) and the CPU lowering through
// the ExecutionEngine, and compares out and lse with the float64
// implementation and with the reference lowering (full N x N scores), over
// sequence lengths that are and are not multiples of the blocks, Nq != Nk,
// head dims, block sizes, masks, GQA/MQA, softcap, and logits up to 1e4 where
// a naive softmax overflows.
//
//===----------------------------------------------------------------------===//

#include "AttentionHarness.h"
#include "TiledCase.h"

#include "fa/Pipelines/Pipelines.h"

#include <cmath>

using namespace mlir::fa::numerics;

namespace {

/// Bounds for `allClose` (|got - want| <= rtol * (|want| + max|want|)).
///
/// f32 on unit-scale inputs: the tiled form differs from float64 by f32
/// rounding in dot products of up to 339 terms, the per-block rescaling by
/// alpha (one rounding per key block), and exp2 of arguments pre-multiplied
/// by an f32-rounded log2(e) * scale. Observed <= 2e-6; 1e-5 is the bound the
/// issue asks for and still fails for a wrong rescale or mask (> 1e-2).
/// f16/bf16: P is rounded to the element type before P V, as tensor cores
/// consume it, and out is rounded on the way out. The bounds are
/// `tiledTolerance` (TiledCase.h), shared with the backward.

PipelineBuilder tiledPipeline(int64_t blockQ, int64_t blockKV,
                              int64_t kvSplits = 0) {
  return [=](mlir::OpPassManager &pm) {
    mlir::fa::TiledCPUPipelineOptions options;
    options.blockQ = blockQ;
    options.blockKV = blockKV;
    options.kvSplits = kvSplits;
    mlir::fa::buildTiledCPUPipeline(pm, options);
  };
}

/// The tiled forward of case `c` (with `kvSplits` chunks per query block)
/// on `in`, JIT'd.
llvm::Expected<ForwardResult>
runTiled(const TiledCase &c, const AttentionInputs &in, int64_t kvSplits = 0) {
  auto tiled =
      AttentionJit::compile(c.problem, AttentionKind::Forward,
                            tiledPipeline(c.blockQ, c.blockKV, kvSplits));
  if (!tiled)
    return tiled.takeError();
  return (*tiled)->forward(in);
}

/// `got` against the float64 implementation, with the tiled bounds.
void expectFloat64(const AttentionProblem &p, const AttentionInputs &in,
                   const ForwardResult &got) {
  double tol = tiledTolerance(p.elementType);
  ForwardResult want = float64Forward(p, in.q, in.k, in.v);
  EXPECT_TRUE(allClose("out", got.out, want.out, tol));
  EXPECT_TRUE(allClose("lse", got.lse, want.lse, tol));
}

class TiledForwardNumerics : public ::testing::TestWithParam<TiledCase> {};

TEST_P(TiledForwardNumerics, MatchesFloat64AndReference) {
  const TiledCase &c = GetParam();
  const AttentionProblem &p = c.problem;
  AttentionInputs in = makeRandomInputs(p, seedFor(p));
  auto got = runTiled(c, in);
  ASSERT_TRUE(!!got) << llvm::toString(got.takeError());
  expectFloat64(p, in, *got);
  double tol = tiledTolerance(p.elementType);

  // The golden path computes the same function.
  auto reference = AttentionJit::compile(p, AttentionKind::Forward,
                                         mlir::fa::buildReferenceCPUPipeline);
  ASSERT_TRUE(!!reference) << llvm::toString(reference.takeError());
  auto ref = (*reference)->forward(in);
  ASSERT_TRUE(!!ref) << llvm::toString(ref.takeError());
  EXPECT_TRUE(allClose("out vs reference", got->out, ref->out, tol));
  EXPECT_TRUE(allClose("lse vs reference", got->lse, ref->lse, tol));
}

/// The shared problems, and block-aligned and square causal shapes that only
/// the forward adds.
std::vector<TiledCase> forwardCases() {
  std::vector<TiledCase> cases = sharedTiledCases();
  cases.push_back(C(64, 64, 64).blocks(64, 64));
  cases.push_back(C(339, 339, 64).blocks(128, 128).causal());
  cases.push_back(C(1, 17, 128).blocks(16, 16).causal());
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, TiledForwardNumerics,
                         ::testing::ValuesIn(forwardCases()),
                         [](const ::testing::TestParamInfo<TiledCase> &info) {
                           return info.param.name();
                         });

//===----------------------------------------------------------------------===//
// Split-KV
//===----------------------------------------------------------------------===//

/// fa-split-kv with 2, 3 and 7 chunks per query block: more chunks than key
/// blocks (empty chunks, lse = +inf partials), chunks that split a masked
/// band, one-query decoding against long and odd key counts. Against
/// float64 with the tiled bounds: the merge adds one f32 rounding per chunk.
class TiledForwardSplitKV
    : public ::testing::TestWithParam<std::tuple<TiledCase, int64_t>> {};

TEST_P(TiledForwardSplitKV, MatchesFloat64) {
  const auto &[c, splits] = GetParam();
  AttentionInputs in = makeRandomInputs(c.problem, seedFor(c.problem));
  auto got = runTiled(c, in, splits);
  ASSERT_TRUE(!!got) << llvm::toString(got.takeError());
  expectFloat64(c.problem, in, *got);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TiledForwardSplitKV,
    ::testing::Combine(::testing::ValuesIn(std::vector<TiledCase>{
                           C(1, 339, 64).blocks(16, 32),
                           C(4, 1000, 64).blocks(16, 64).heads(8, 2),
                           C(1, 17, 32).blocks(16, 16).causal(),
                           C(16, 339, 64).blocks(16, 32).causal(),
                           C(7, 200, 64).blocks(16, 32).window(40, 0),
                           C(113, 339, 64).blocks(32, 64).causal().heads(4, 2),
                           C(3, 128, 128).blocks(16, 64).softcap(30.0f),
                           C(5, 0, 32).blocks(16, 16),
                           C(1, 777, 64)
                               .blocks(16, 64)
                               .heads(8, 1)
                               .shapes(ShapeKind::DynamicAll),
                           C(2, 300, 64).blocks(16, 32).type(ElementType::BF16),
                       }),
                       ::testing::Values<int64_t>(2, 3, 7)),
    [](const ::testing::TestParamInfo<std::tuple<TiledCase, int64_t>> &info) {
      return std::get<0>(info.param).name() + "_splits" +
             std::to_string(std::get<1>(info.param));
    });

//===----------------------------------------------------------------------===//
// Large logits
//===----------------------------------------------------------------------===//

class TiledForwardLargeLogits : public ::testing::TestWithParam<TiledCase> {};

TEST_P(TiledForwardLargeLogits, NoOverflowAndBoundedError) {
  const TiledCase &c = GetParam();
  const AttentionProblem &p = c.problem;
  AttentionInputs in = makeRandomInputs(p, seedFor(p));
  scaleLogits(p, in, 1e4);
  auto got = runTiled(c, in);
  ASSERT_TRUE(!!got) << llvm::toString(got.takeError());
  ForwardResult want = float64Forward(p, in.q, in.k, in.v);
  // An f32 score of magnitude 1e4 carries an absolute rounding error of
  // about D * 2^-24 * 1e4 ~ 4e-2 at D = 64 (the dot product and the scale),
  // and exp2(s * log2e - m) turns that absolute error into a relative error
  // of the probabilities of the same size. So out agrees to ~5e-2 relative at
  // worst, lse (|lse| ~ 1e4) to ~1e-5 relative; NaN or inf never passes
  // allClose.
  EXPECT_TRUE(allClose("out", got->out, want.out, 5e-2));
  EXPECT_TRUE(allClose("lse", got->lse, want.lse, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TiledForwardLargeLogits,
    ::testing::ValuesIn(std::vector<TiledCase>{
        C(113, 339, 64).blocks(32, 64),
        C(339, 113, 64).blocks(64, 16).causal(),
        C(64, 113, 32).blocks(16, 32).window(16, 4).heads(4, 2),
        C(17, 64, 128).blocks(16, 16).softcap(30.0f),
    }),
    [](const ::testing::TestParamInfo<TiledCase> &info) {
      return info.param.name();
    });

} // namespace
