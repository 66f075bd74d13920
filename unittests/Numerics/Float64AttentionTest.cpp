//===- Float64AttentionTest.cpp - checks of the float64 reference ---------===//
//
// The float64 implementation is the yardstick of every numerics test, so it
// is checked on its own: its forward against a hand-computed case, and its
// backward against central finite differences of its forward.
//
//===----------------------------------------------------------------------===//

#include "AttentionHarness.h"

#include <cmath>
#include <limits>

using namespace mlir::fa::numerics;

namespace {

TEST(Float64Attention, HandComputedForward) {
  // One query, two keys, D = 8 with q = e0, k0 = e0, k1 = 0, scale 1:
  // scores (1, 0), so P = (e, 1) / (e + 1) and lse = log(e + 1).
  AttentionProblem p;
  p.seqQ = 1;
  p.seqK = 2;
  p.headDim = p.valueHeadDim = 8;
  p.scale = 1.0f;
  HostTensor q(p.qShape()), k(p.kShape()), v(p.vShape());
  q.at({0, 0, 0, 0}) = 1.0;
  k.at({0, 0, 0, 0}) = 1.0;
  for (int64_t e = 0; e < 8; ++e) {
    v.at({0, 0, 0, e}) = 1.0;
    v.at({0, 0, 1, e}) = -1.0;
  }
  ForwardResult r = float64Forward(p, q, k, v);
  double w = std::exp(1.0) / (std::exp(1.0) + 1.0);
  EXPECT_NEAR(r.out.at({0, 0, 0, 3}), w - (1.0 - w), 1e-15);
  EXPECT_NEAR(r.lse.at({0, 0, 0}), std::log(std::exp(1.0) + 1.0), 1e-15);

  // Causal with Nq = 2 > Nk = 1: row 0 sees nothing (out 0, lse +inf).
  p.seqQ = 2;
  p.seqK = 1;
  p.causal = true;
  HostTensor q2(p.qShape(), 0.5), k2(p.kShape(), 0.5), v2(p.vShape(), 2.0);
  ForwardResult c = float64Forward(p, q2, k2, v2);
  EXPECT_EQ(c.out.at({0, 0, 0, 0}), 0.0);
  EXPECT_EQ(c.lse.at({0, 0, 0}), std::numeric_limits<double>::infinity());
  EXPECT_DOUBLE_EQ(c.out.at({0, 0, 1, 0}), 2.0);
}

/// Central differences of `lossOf(float64Forward(...))` with respect to every
/// element of `x` (one of the inputs, perturbed in place).
HostTensor finiteDifferences(const AttentionProblem &p, AttentionInputs &in,
                             HostTensor &x, double h) {
  HostTensor grad(x.shape);
  for (int64_t n = 0; n < x.numElements(); ++n) {
    double saved = x.data[n];
    x.data[n] = saved + h;
    double plus = lossOf(float64Forward(p, in.q, in.k, in.v).out, in.dout);
    x.data[n] = saved - h;
    double minus = lossOf(float64Forward(p, in.q, in.k, in.v).out, in.dout);
    x.data[n] = saved;
    grad.data[n] = (plus - minus) / (2.0 * h);
  }
  return grad;
}

class Float64Gradient : public ::testing::TestWithParam<AttentionProblem> {};

TEST_P(Float64Gradient, MatchesFiniteDifferences) {
  const AttentionProblem &p = GetParam();
  AttentionInputs in = makeRandomInputs(p, /*seed=*/7);
  BackwardResult grad = float64Backward(p, in.q, in.k, in.v, in.dout);
  // h = 1e-5: truncation error O(h^2) ~ 1e-10 and rounding error
  // O(eps * |loss| / h) ~ 1e-10, both far below the 1e-7 bound.
  const double h = 1e-5, rtol = 1e-7;
  EXPECT_TRUE(allClose("dq", grad.dq, finiteDifferences(p, in, in.q, h), rtol));
  EXPECT_TRUE(allClose("dk", grad.dk, finiteDifferences(p, in, in.k, h), rtol));
  EXPECT_TRUE(allClose("dv", grad.dv, finiteDifferences(p, in, in.v, h), rtol));
}

AttentionProblem small(int64_t hq, int64_t hkv, int64_t nq, int64_t nk) {
  AttentionProblem p;
  p.batch = 2;
  p.headsQ = hq;
  p.headsKV = hkv;
  p.seqQ = nq;
  p.seqK = nk;
  p.headDim = 8;
  p.valueHeadDim = 16;
  return p;
}

std::vector<AttentionProblem> gradientProblems() {
  std::vector<AttentionProblem> ps;
  ps.push_back(small(2, 2, 5, 7));
  AttentionProblem causal = small(2, 1, 7, 4); // rows 0..2 see nothing
  causal.causal = true;
  ps.push_back(causal);
  AttentionProblem window = small(4, 2, 6, 9);
  window.window = {{2, 1}};
  window.scale = 0.6f;
  ps.push_back(window);
  AttentionProblem capped = small(3, 1, 5, 6);
  capped.softcap = 2.0f;
  capped.causal = true;
  capped.window = {{3, 0}};
  ps.push_back(capped);
  return ps;
}

INSTANTIATE_TEST_SUITE_P(Small, Float64Gradient,
                         ::testing::ValuesIn(gradientProblems()),
                         [](const auto &info) { return info.param.name(); });

} // namespace
