//===- TiledCase.h - Test cases for the tiled pipelines ---------*- C++ -*-===//
//
// A problem plus the block sizes of the tiling passes, and a fluent builder
// so parameter lists read like tables.
//
//===----------------------------------------------------------------------===//

#ifndef FA_UNITTESTS_NUMERICS_TILEDCASE_H
#define FA_UNITTESTS_NUMERICS_TILEDCASE_H

#include "AttentionHarness.h"

#include <functional>
#include <ostream>
#include <string>

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
  operator TiledCase() const { return c; }
};

} // namespace mlir::fa::numerics

#endif // FA_UNITTESTS_NUMERICS_TILEDCASE_H
