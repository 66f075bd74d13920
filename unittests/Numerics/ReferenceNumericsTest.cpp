//===- ReferenceNumericsTest.cpp - fa-lower-to-reference on the CPU -------===//
//
// Runs `mlir::fa::buildReferenceCPUPipeline` (fa-lower-to-reference and the
// CPU lowering) through the ExecutionEngine and compares its forward (out,
// lse) and backward (dq, dk, dv) with the float64 implementation, over
// sequence lengths, head dims and every attribute of the ops.
//
//===----------------------------------------------------------------------===//

#include "AttentionHarness.h"

#include "fa/Pipelines/Pipelines.h"

#include <cmath>
#include <functional>
#include <limits>

using namespace mlir::fa::numerics;

namespace {

/// Bounds for `allClose` (|got - want| <= rtol * (|want| + max|want|)).
///
/// f32: the reference computes in f32 from inputs that the float64 code sees
/// exactly, so the error is f32 rounding (2^-24 ~ 6e-8 per operation)
/// accumulated over dot products of up to 130 terms and a few exp/log/tanh
/// evaluations, amplified by at most the size of the scores (exp turns an
/// absolute error in s into a relative one in P). Observed: <= 3e-6 (the
/// peakiest case, D = 128 with scale 0.3), typically ~5e-7. 1e-5 leaves room
/// for other libm/codegen choices while a wrong mask, scale or softcap moves
/// results by > 1e-2.
///
/// f16/bf16: results are rounded once to the element type (half an ulp,
/// 2^-11 resp. 2^-8 relative, which the max|want| term halves again); the
/// backward also consumes `out` rounded to the element type (in Di =
/// rowsum(dO * O)), which the float64 backward does not. Observed forward
/// 2e-4 / 1.4e-3 and backward 4e-4 / 3.3e-3 for f16 / bf16. lse is f32 in
/// every case.
struct Tolerances {
  double forward, lse, backward;
};

Tolerances tolerancesFor(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return {1e-5, 1e-5, 1e-5};
  case ElementType::F16:
    return {1e-3, 1e-5, 2e-3};
  case ElementType::BF16:
    return {8e-3, 1e-5, 1.5e-2};
  }
  return {};
}

uint64_t seedFor(const AttentionProblem &p) {
  return std::hash<std::string>{}(p.name());
}

class ReferenceNumerics : public ::testing::TestWithParam<AttentionProblem> {};

TEST_P(ReferenceNumerics, Forward) {
  const AttentionProblem &p = GetParam();
  AttentionInputs in = makeRandomInputs(p, seedFor(p));
  auto jit = AttentionJit::compile(p, AttentionKind::Forward,
                                   mlir::fa::buildReferenceCPUPipeline);
  ASSERT_TRUE(!!jit) << llvm::toString(jit.takeError());
  auto got = (*jit)->forward(in);
  ASSERT_TRUE(!!got) << llvm::toString(got.takeError());
  ForwardResult want = float64Forward(p, in.q, in.k, in.v);
  Tolerances tol = tolerancesFor(p.elementType);
  EXPECT_TRUE(allClose("out", got->out, want.out, tol.forward));
  EXPECT_TRUE(allClose("lse", got->lse, want.lse, tol.lse));
}

TEST_P(ReferenceNumerics, Backward) {
  const AttentionProblem &p = GetParam();
  AttentionInputs in = makeRandomInputs(p, seedFor(p));
  auto jit = AttentionJit::compile(p, AttentionKind::Backward,
                                   mlir::fa::buildReferenceCPUPipeline);
  ASSERT_TRUE(!!jit) << llvm::toString(jit.takeError());
  // `out` and `lse` as the forward would hand them over.
  ForwardResult fwd = float64Forward(p, in.q, in.k, in.v);
  auto got = (*jit)->backward(in, fwd.out, fwd.lse);
  ASSERT_TRUE(!!got) << llvm::toString(got.takeError());
  BackwardResult want = float64Backward(p, in.q, in.k, in.v, in.dout);
  double tol = tolerancesFor(p.elementType).backward;
  EXPECT_TRUE(allClose("dq", got->dq, want.dq, tol));
  EXPECT_TRUE(allClose("dk", got->dk, want.dk, tol));
  EXPECT_TRUE(allClose("dv", got->dv, want.dv, tol));
}

/// A problem builder that reads like the parameter list below.
struct P {
  AttentionProblem p;
  P(int64_t nq, int64_t nk, int64_t d) {
    p.seqQ = nq;
    p.seqK = nk;
    p.headDim = p.valueHeadDim = d;
  }
  P &heads(int64_t hq, int64_t hkv) {
    p.headsQ = hq;
    p.headsKV = hkv;
    return *this;
  }
  P &batch(int64_t b) {
    p.batch = b;
    return *this;
  }
  P &dv(int64_t dv) {
    p.valueHeadDim = dv;
    return *this;
  }
  P &causal() {
    p.causal = true;
    return *this;
  }
  P &window(int64_t left, int64_t right) {
    p.window = {{left, right}};
    return *this;
  }
  /// The window's sizes as run-time arguments.
  P &runtimeWindow(int64_t left, int64_t right) {
    window(left, right);
    p.runtimeWindow = true;
    return *this;
  }
  P &softcap(float c) {
    p.softcap = c;
    return *this;
  }
  P &scale(float s) {
    p.scale = s;
    return *this;
  }
  P &type(ElementType t) {
    p.elementType = t;
    return *this;
  }
  P &shapes(ShapeKind s) {
    p.shapes = s;
    return *this;
  }
  operator AttentionProblem() const { return p; }
};

constexpr ElementType f16 = ElementType::F16, bf16 = ElementType::BF16;
constexpr ShapeKind dynSeq = ShapeKind::DynamicSeq,
                    dynAll = ShapeKind::DynamicAll;

std::vector<AttentionProblem> f32Problems() {
  return {
      // No mask: decode (Nq = 1), Nq < Nk, Nq > Nk, a single key.
      P(1, 130, 128),
      P(1, 1, 32),
      P(17, 31, 32).batch(2),
      P(113, 64, 64).heads(2, 2),
      P(113, 130, 32).dv(64),
      // Causal, bottom-right aligned: Nq < Nk, Nq > Nk (rows 0..48 of
      // 113 x 64, and 0..15 of 17 x 1, see no key: out 0, lse +inf).
      P(17, 31, 64).causal(),
      P(113, 64, 32).causal().heads(2, 1),
      P(17, 1, 32).causal(),
      P(1, 31, 64).causal(),
      P(113, 130, 128).causal().dv(32),
      // Sliding windows: left only, right only, both, with causal.
      P(113, 130, 32).window(8, -1),
      P(17, 31, 64).window(-1, 4),
      P(113, 64, 32).window(5, 3), // Nq > Nk: rows 0..45 see nothing.
      P(17, 64, 64).causal().window(16, 0),
      P(17, 31, 32).window(0, 0), // the diagonal alone
      P(113, 130, 32).runtimeWindow(8, -1),
      P(17, 64, 64).causal().runtimeWindow(16, 0),
      // Grouped-query and multi-query attention.
      P(17, 31, 32).heads(4, 2).causal(),
      P(113, 130, 64).heads(4, 1).window(32, -1),
      P(1, 64, 128).heads(8, 2).batch(2),
      // Softcap, explicit scale, and all of them together.
      P(17, 31, 32).softcap(2.5f),
      P(113, 130, 64).heads(4, 2).causal().softcap(5.0f).dv(128),
      P(17, 64, 128).scale(0.3f),
      P(113, 31, 64).heads(3, 1).window(40, 2).softcap(3.0f).scale(0.2f),
      // Dynamic shapes: only Nq/Nk, or B, H and N.
      P(17, 31, 32).window(4, 4).softcap(4.0f).shapes(dynSeq),
      P(113, 64, 64).heads(4, 2).causal().shapes(dynAll),
      P(1, 130, 32).heads(4, 1).batch(2).shapes(dynAll),
      P(17, 31, 64).heads(6, 3).window(-1, 2).dv(32).shapes(dynAll),
      // No keys at all (Nk = 0 is valid): every row sees nothing.
      P(17, 0, 32),
      P(17, 0, 32).heads(2, 1).causal().shapes(dynAll),
  };
}

std::vector<AttentionProblem> halfProblems() {
  return {
      P(17, 31, 64).type(f16),
      P(113, 64, 32).heads(4, 2).causal().softcap(5.0f).type(f16),
      P(17, 130, 128).window(20, 3).dv(64).shapes(dynAll).type(f16),
      P(17, 31, 64).type(bf16),
      P(113, 64, 32).heads(4, 1).causal().type(bf16),
      P(1, 130, 64).window(32, -1).softcap(3.0f).scale(0.15f).type(bf16),
  };
}

auto problemName = [](const auto &info) { return info.param.name(); };

INSTANTIATE_TEST_SUITE_P(F32, ReferenceNumerics,
                         ::testing::ValuesIn(f32Problems()), problemName);
INSTANTIATE_TEST_SUITE_P(HalfPrecision, ReferenceNumerics,
                         ::testing::ValuesIn(halfProblems()), problemName);

/// Counts the elements of rows [0, numRows) of head (0, 0) of `t` (rank 3
/// or 4) that differ from `value`.
int64_t countDifferent(const HostTensor &t, int64_t numRows, double value) {
  int64_t rowSize = t.shape.size() == 4 ? t.shape[3] : 1;
  int64_t count = 0;
  for (int64_t n = 0; n < numRows * rowSize; ++n)
    count += t.data[n] != value;
  return count;
}

/// The parameterized tests rely on some problems having rows that see no
/// key; make sure they do, and that those rows come out exactly as
/// documented: out = 0, lse = +inf, dq = 0.
TEST(ReferenceNumerics, RowsWithoutVisibleKeysAreExact) {
  // Causal, Nq = 113 > Nk = 64: query i sees keys j <= i - 49.
  AttentionProblem p = P(113, 64, 32).causal();
  const int64_t numEmpty = 49;
  const double inf = std::numeric_limits<double>::infinity();
  AttentionInputs in = makeRandomInputs(p, 3);
  ForwardResult want = float64Forward(p, in.q, in.k, in.v);
  ASSERT_EQ(countDifferent(want.lse, numEmpty, inf), 0);
  ASSERT_TRUE(std::isfinite(want.lse.at({0, 0, numEmpty})));

  auto fwd = AttentionJit::compile(p, AttentionKind::Forward,
                                   mlir::fa::buildReferenceCPUPipeline);
  ASSERT_TRUE(!!fwd) << llvm::toString(fwd.takeError());
  auto got = (*fwd)->forward(in);
  ASSERT_TRUE(!!got) << llvm::toString(got.takeError());
  EXPECT_EQ(countDifferent(got->lse, numEmpty, inf), 0);
  EXPECT_EQ(countDifferent(got->out, numEmpty, 0.0), 0);

  auto bwd = AttentionJit::compile(p, AttentionKind::Backward,
                                   mlir::fa::buildReferenceCPUPipeline);
  ASSERT_TRUE(!!bwd) << llvm::toString(bwd.takeError());
  auto grads = (*bwd)->backward(in, got->out, got->lse);
  ASSERT_TRUE(!!grads) << llvm::toString(grads.takeError());
  EXPECT_EQ(countDifferent(grads->dq, numEmpty, 0.0), 0);
}

/// A coarse end-to-end check of the JIT'd backward: its gradients against
/// central differences of the JIT'd forward (all in f32, so only loosely).
TEST(ReferenceNumerics, BackwardMatchesFiniteDifferencesOfForward) {
  AttentionProblem p = P(3, 5, 8).heads(2, 1).causal().softcap(2.0f);
  AttentionInputs in = makeRandomInputs(p, 11);
  auto fwd = AttentionJit::compile(p, AttentionKind::Forward,
                                   mlir::fa::buildReferenceCPUPipeline);
  auto bwd = AttentionJit::compile(p, AttentionKind::Backward,
                                   mlir::fa::buildReferenceCPUPipeline);
  ASSERT_TRUE(!!fwd) << llvm::toString(fwd.takeError());
  ASSERT_TRUE(!!bwd) << llvm::toString(bwd.takeError());
  auto base = (*fwd)->forward(in);
  ASSERT_TRUE(!!base) << llvm::toString(base.takeError());
  auto grads = (*bwd)->backward(in, base->out, base->lse);
  ASSERT_TRUE(!!grads) << llvm::toString(grads.takeError());

  // The loss is summed in double from f32 outputs (rounding ~1e-7 per
  // element); with h = 1e-2 that gives ~1e-5 of noise and O(h^2) ~ 1e-4 of
  // truncation error: a 1e-2 bound catches any wrong term of the gradient.
  const double h = 1e-2, rtol = 1e-2;
  auto check = [&](const char *what, HostTensor &x, const HostTensor &grad) {
    HostTensor numeric(x.shape);
    for (int64_t n = 0; n < x.numElements(); ++n) {
      double saved = x.data[n];
      double plus = roundTo(saved + h, p.elementType);
      double minus = roundTo(saved - h, p.elementType);
      x.data[n] = plus;
      auto up = (*fwd)->forward(in);
      x.data[n] = minus;
      auto down = (*fwd)->forward(in);
      x.data[n] = saved;
      ASSERT_TRUE(up && down)
          << llvm::toString(up.takeError()) << llvm::toString(down.takeError());
      numeric.data[n] =
          (lossOf(up->out, in.dout) - lossOf(down->out, in.dout)) /
          (plus - minus);
    }
    EXPECT_TRUE(allClose(what, grad, numeric, rtol));
  };
  check("dq", in.q, grads->dq);
  check("dk", in.k, grads->dk);
  check("dv", in.v, grads->dv);
}

} // namespace
