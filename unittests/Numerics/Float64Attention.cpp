//===- Float64Attention.cpp - independent float64 attention ---------------===//
//
// Forward and backward attention in plain float64 loops, written from the
// math in FADialect.td and sharing no code with the passes (not even
// the mask attribute), so that a bug in a shared helper cannot hide from it.
// The backward uses the softmax Jacobian directly rather than the
// `rowsum(dO * O)` shortcut that the lowerings use.
//
//===----------------------------------------------------------------------===//

#include "AttentionHarness.h"

#include <cassert>
#include <cmath>
#include <limits>

using namespace mlir::fa::numerics;

double mlir::fa::numerics::float64Scale(const AttentionProblem &problem) {
  if (problem.scale)
    return static_cast<double>(*problem.scale);
  return 1.0 / std::sqrt(static_cast<double>(problem.headDim));
}

bool mlir::fa::numerics::float64IsVisible(const AttentionProblem &problem,
                                          int64_t i, int64_t j) {
  // "Key j is visible from query i when, with off = Nk - Nq,
  //  i + off - left <= j <= i + off + right" (-1 = unbounded; causal means
  //  right = 0).
  int64_t off = problem.seqK - problem.seqQ;
  int64_t left = problem.window ? (*problem.window)[0] : -1;
  int64_t right = problem.window ? (*problem.window)[1] : -1;
  if (problem.causal)
    right = 0;
  if (left >= 0 && j < i + off - left)
    return false;
  if (right >= 0 && j > i + off + right)
    return false;
  return j >= 0 && j < problem.seqK;
}

namespace {

/// Scores of one (batch, query head) pair: s[i][j] after scale and softcap
/// (hidden entries are left out by the callers), plus the pre-softcap
/// argument of tanh for the chain rule.
struct HeadScores {
  int64_t nq, nk;
  std::vector<double> s, tanhArg;
  double &at(int64_t i, int64_t j) { return s[i * nk + j]; }
};

HeadScores headScores(const AttentionProblem &p, const HostTensor &q,
                      const HostTensor &k, int64_t b, int64_t h) {
  int64_t hk = h / (p.headsQ / p.headsKV);
  double scale = float64Scale(p);
  HeadScores hs{p.seqQ, p.seqK, std::vector<double>(p.seqQ * p.seqK),
                std::vector<double>(p.seqQ * p.seqK)};
  for (int64_t i = 0; i < p.seqQ; ++i) {
    for (int64_t j = 0; j < p.seqK; ++j) {
      double dot = 0.0;
      for (int64_t d = 0; d < p.headDim; ++d)
        dot += q.at({b, h, i, d}) * k.at({b, hk, j, d});
      double s = scale * dot;
      if (p.softcap) {
        double c = *p.softcap;
        hs.tanhArg[i * p.seqK + j] = s / c;
        s = c * std::tanh(s / c);
      }
      hs.at(i, j) = s;
    }
  }
  return hs;
}

/// Softmax probabilities of one head; rows without a visible key are all 0.
/// Also returns each row's log-sum-exp (+inf for such rows).
std::vector<double> headProbs(const AttentionProblem &p, HeadScores &hs,
                              std::vector<double> *lse) {
  std::vector<double> probs(p.seqQ * p.seqK, 0.0);
  for (int64_t i = 0; i < p.seqQ; ++i) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < p.seqK; ++j)
      if (float64IsVisible(p, i, j))
        m = std::max(m, hs.at(i, j));
    if (std::isinf(m)) {
      if (lse)
        (*lse)[i] = std::numeric_limits<double>::infinity();
      continue;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < p.seqK; ++j)
      if (float64IsVisible(p, i, j))
        sum += std::exp(hs.at(i, j) - m);
    for (int64_t j = 0; j < p.seqK; ++j)
      if (float64IsVisible(p, i, j))
        probs[i * p.seqK + j] = std::exp(hs.at(i, j) - m) / sum;
    if (lse)
      (*lse)[i] = m + std::log(sum);
  }
  return probs;
}

} // namespace

ForwardResult mlir::fa::numerics::float64Forward(const AttentionProblem &p,
                                                 const HostTensor &q,
                                                 const HostTensor &k,
                                                 const HostTensor &v) {
  assert(p.headsQ % p.headsKV == 0 && "GQA needs Hq % Hkv == 0");
  ForwardResult r{HostTensor(p.outShape()),
                  HostTensor(std::vector<int64_t>{p.batch, p.headsQ, p.seqQ})};
  int64_t group = p.headsQ / p.headsKV;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.headsQ; ++h) {
      HeadScores hs = headScores(p, q, k, b, h);
      std::vector<double> lse(p.seqQ);
      std::vector<double> probs = headProbs(p, hs, &lse);
      for (int64_t i = 0; i < p.seqQ; ++i) {
        r.lse.at({b, h, i}) = lse[i];
        for (int64_t e = 0; e < p.valueHeadDim; ++e) {
          double acc = 0.0;
          for (int64_t j = 0; j < p.seqK; ++j)
            acc += probs[i * p.seqK + j] * v.at({b, h / group, j, e});
          r.out.at({b, h, i, e}) = acc;
        }
      }
    }
  }
  return r;
}

BackwardResult mlir::fa::numerics::float64Backward(const AttentionProblem &p,
                                                   const HostTensor &q,
                                                   const HostTensor &k,
                                                   const HostTensor &v,
                                                   const HostTensor &dout) {
  BackwardResult r{HostTensor(p.qShape()), HostTensor(p.kShape()),
                   HostTensor(p.vShape())};
  int64_t group = p.headsQ / p.headsKV;
  double scale = float64Scale(p);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.headsQ; ++h) {
      int64_t hk = h / group;
      HeadScores hs = headScores(p, q, k, b, h);
      std::vector<double> probs = headProbs(p, hs, nullptr);
      for (int64_t i = 0; i < p.seqQ; ++i) {
        // dP[j] = dO_i . v_j; the softmax Jacobian gives
        // dS[j] = P[j] * (dP[j] - sum_l P[l] dP[l]).
        std::vector<double> dp(p.seqK, 0.0);
        double weighted = 0.0;
        for (int64_t j = 0; j < p.seqK; ++j) {
          for (int64_t e = 0; e < p.valueHeadDim; ++e)
            dp[j] += dout.at({b, h, i, e}) * v.at({b, hk, j, e});
          weighted += probs[i * p.seqK + j] * dp[j];
        }
        for (int64_t j = 0; j < p.seqK; ++j) {
          double pij = probs[i * p.seqK + j];
          // dV_j += P_ij dO_i (hidden keys have P = 0).
          for (int64_t e = 0; e < p.valueHeadDim; ++e)
            r.dv.at({b, hk, j, e}) += pij * dout.at({b, h, i, e});
          double ds = pij * (dp[j] - weighted);
          // Through s = c * tanh(x / c), x = scale * q.k:
          // ds/dx = 1 - tanh^2(x / c).
          if (p.softcap) {
            double t = std::tanh(hs.tanhArg[i * p.seqK + j]);
            ds *= 1.0 - t * t;
          }
          ds *= scale;
          for (int64_t d = 0; d < p.headDim; ++d) {
            r.dq.at({b, h, i, d}) += ds * k.at({b, hk, j, d});
            r.dk.at({b, hk, j, d}) += ds * q.at({b, h, i, d});
          }
        }
      }
    }
  }
  return r;
}

double mlir::fa::numerics::lossOf(const HostTensor &out,
                                  const HostTensor &dout) {
  assert(out.data.size() == dout.data.size());
  double loss = 0.0;
  for (size_t n = 0; n < out.data.size(); ++n)
    loss += out.data[n] * dout.data[n];
  return loss;
}
