//===- TiledCase.h - Test cases for the tiled pipelines ---------*- C++ -*-===//
//
// A problem plus the block sizes of the tiling passes, and a fluent builder
// so parameter lists read like tables.
//
//===----------------------------------------------------------------------===//

#ifndef FA_UNITTESTS_NUMERICS_TILEDCASE_H
#define FA_UNITTESTS_NUMERICS_TILEDCASE_H

#include "AttentionHarness.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace mlir::fa::numerics {

/// One test: a problem and the block sizes of the tiling passes.
struct TiledCase {
  AttentionProblem problem;
  int64_t blockQ = 64;
  int64_t blockKV = 64;

  std::string name() const {
    return problem.name() + "_bq" + std::to_string(blockQ) + "_bkv" +
           std::to_string(blockKV);
  }
};

inline void PrintTo(const TiledCase &c, std::ostream *os) { *os << c.name(); }

/// A seed per problem, so every case draws its own inputs.
inline uint64_t seedFor(const AttentionProblem &p) {
  return std::hash<std::string>{}(p.name());
}

/// Reads like the parameter lists of the tests:
///   C(113, 64, 64).blocks(16, 16).causal().heads(4, 2)
struct C {
  TiledCase c;
  C(int64_t nq, int64_t nk, int64_t d) {
    c.problem.seqQ = nq;
    c.problem.seqK = nk;
    c.problem.headDim = c.problem.valueHeadDim = d;
  }
  C &blocks(int64_t bq, int64_t bkv) {
    c.blockQ = bq;
    c.blockKV = bkv;
    return *this;
  }
  C &heads(int64_t hq, int64_t hkv) {
    c.problem.headsQ = hq;
    c.problem.headsKV = hkv;
    return *this;
  }
  C &batch(int64_t b) {
    c.problem.batch = b;
    return *this;
  }
  C &dv(int64_t dv) {
    c.problem.valueHeadDim = dv;
    return *this;
  }
  C &causal() {
    c.problem.causal = true;
    return *this;
  }
  C &window(int64_t left, int64_t right) {
    c.problem.window = {{left, right}};
    return *this;
  }
  /// The window's sizes as run-time arguments.
  C &runtimeWindow(int64_t left, int64_t right) {
    window(left, right);
    c.problem.runtimeWindow = true;
    return *this;
  }
  C &softcap(float cap) {
    c.problem.softcap = cap;
    return *this;
  }
  C &scale(float s) {
    c.problem.scale = s;
    return *this;
  }
  C &type(ElementType t) {
    c.problem.elementType = t;
    return *this;
  }
  C &shapes(ShapeKind s) {
    c.problem.shapes = s;
    return *this;
  }
  C &deterministic() {
    c.problem.deterministic = true;
    return *this;
  }
  /// Scale and softcap as f32 function arguments (run-time operands).
  C &runtimeScalars() {
    c.problem.runtimeScalars = true;
    return *this;
  }
  operator TiledCase() const { return c; }
};

inline constexpr ElementType f16 = ElementType::F16, bf16 = ElementType::BF16;
inline constexpr ShapeKind dynSeq = ShapeKind::DynamicSeq,
                           dynAll = ShapeKind::DynamicAll;

/// `allClose` bounds of the tiled pipelines against float64, forward and
/// backward (each test explains why they hold for it): f32 1e-5, f16 2e-3,
/// bf16 2e-2.
inline double tiledTolerance(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return 1e-5;
  case ElementType::F16:
    return 2e-3;
  case ElementType::BF16:
    return 2e-2;
  }
  return 0;
}

/// Scales q so that the largest |score| is `target`: a naive exp(s) would
/// overflow f32 (exp(89) = inf), the online softmax must not.
inline void scaleLogits(const AttentionProblem &p, AttentionInputs &in,
                        double target) {
  double scale = p.scale ? *p.scale : 1.0 / std::sqrt(double(p.headDim));
  double maxAbs = 0;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.headsQ; ++h)
      for (int64_t i = 0; i < p.seqQ; ++i)
        for (int64_t j = 0; j < p.seqK; ++j) {
          double s = 0;
          for (int64_t d = 0; d < p.headDim; ++d)
            s += in.q.at({b, h, i, d}) *
                 in.k.at({b, h / (p.headsQ / p.headsKV), j, d});
          maxAbs = std::max(maxAbs, std::abs(s * scale));
        }
  double factor = target / maxAbs;
  for (double &x : in.q.data)
    x = roundTo(x * factor, p.elementType);
}

/// The problems both tiled numerics tests run: sequence lengths that are and
/// are not multiples of the blocks, Nq != Nk, D in {32, 64, 128}, blocks
/// 16..128, causal, windows, GQA/MQA, softcap, scale, dynamic shapes, f16 and
/// bf16.
inline std::vector<TiledCase> sharedTiledCases() {
  return {
      // No mask: decode, Nq < Nk, Nq > Nk, a single key, exact multiples,
      // tails on both sides.
      C(1, 339, 64).blocks(16, 128),
      C(17, 1, 32).blocks(16, 16),
      C(64, 113, 128).blocks(64, 32),
      C(339, 64, 32).blocks(128, 64).heads(2, 2),
      C(113, 17, 64).blocks(32, 16).dv(32),
      // Causal, bottom-right aligned: query blocks that see nothing (Nq >
      // Nk), key blocks seen by few rows (Nq < Nk).
      C(113, 64, 64).blocks(16, 16).causal(),
      C(17, 339, 32).blocks(16, 64).causal(),
      C(339, 113, 128).blocks(64, 128).causal().dv(64),
      C(64, 17, 32).blocks(32, 16).causal().batch(2),
      // Sliding windows: left only, right only, both, causal + left, and
      // windows narrower than a block (most blocks skipped).
      C(339, 113, 64).blocks(32, 32).window(20, -1),
      C(113, 339, 32).blocks(64, 16).window(-1, 7),
      C(113, 64, 32).blocks(16, 48).window(5, 3),
      C(339, 113, 64).blocks(48, 64).causal().window(40, 0),
      C(64, 113, 128).blocks(16, 16).window(0, 0),
      // The same sizes only known at run time (-1 unbounded at run time).
      C(339, 113, 64).blocks(32, 32).runtimeWindow(20, -1),
      C(113, 64, 32).blocks(16, 48).runtimeWindow(5, 3),
      C(339, 113, 64).blocks(48, 64).causal().runtimeWindow(40, 0),
      C(17, 113, 32).blocks(16, 32).runtimeWindow(-1, 7).shapes(dynSeq),
      // GQA and MQA: dK/dV sum over the group.
      C(17, 64, 64).blocks(16, 32).heads(4, 2).causal(),
      C(113, 339, 32).blocks(32, 128).heads(4, 1).window(32, -1),
      C(1, 113, 128).blocks(16, 64).heads(8, 2).batch(2),
      // Softcap (tanh in the chain rule), explicit scale.
      C(113, 17, 32).blocks(32, 16).softcap(2.5f),
      C(339, 113, 64).blocks(64, 64).heads(4, 2).causal().softcap(5.0f),
      C(17, 64, 128).blocks(128, 128).scale(0.3f),
      C(113, 64, 64)
          .blocks(16, 32)
          .heads(3, 1)
          .window(40, 2)
          .softcap(3.0f)
          .scale(0.2f),
      // Scale and softcap only known at run time (f32 arguments): the same
      // numbers as the constant cases above.
      C(17, 64, 128).blocks(128, 128).scale(0.3f).runtimeScalars(),
      C(113, 17, 32).blocks(32, 16).softcap(2.5f).runtimeScalars(),
      C(113, 64, 64)
          .blocks(16, 32)
          .heads(3, 1)
          .window(40, 2)
          .softcap(3.0f)
          .scale(0.2f)
          .runtimeScalars(),
      C(64, 113, 32)
          .blocks(16, 64)
          .heads(4, 2)
          .causal()
          .softcap(5.0f)
          .type(f16)
          .shapes(dynSeq)
          .runtimeScalars(),
      // Dynamic shapes: tails only known at run time.
      C(17, 113, 32).blocks(16, 32).window(4, 4).softcap(4.0f).shapes(dynSeq),
      C(113, 64, 64).blocks(32, 16).heads(4, 2).causal().shapes(dynAll),
      C(64, 339, 32).blocks(64, 64).heads(4, 1).batch(2).shapes(dynAll),
      // Half precision: P and dS rounded before their GEMMs.
      C(113, 64, 64).blocks(32, 32).type(f16),
      C(64, 113, 32)
          .blocks(16, 64)
          .heads(4, 2)
          .causal()
          .softcap(5.0f)
          .type(f16),
      C(17, 339, 128)
          .blocks(16, 128)
          .window(20, 3)
          .dv(64)
          .shapes(dynAll)
          .type(f16),
      C(113, 17, 64).blocks(32, 16).type(bf16),
      C(339, 113, 32).blocks(64, 32).heads(4, 1).causal().type(bf16),
  };
}

} // namespace mlir::fa::numerics

#endif // FA_UNITTESTS_NUMERICS_TILEDCASE_H
