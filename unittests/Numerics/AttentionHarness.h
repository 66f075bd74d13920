//===- AttentionHarness.h - CPU numerics harness for fa ops -----*- C++ -*-===//
//
// Reusable pieces for checking the numbers that a pipeline computes for
// `fa.attention` / `fa.attention_backward` on the host:
//
//  - `AttentionProblem`: shapes, element type and attributes of one problem;
//  - `buildAttentionModule`: the MLIR text of a function over memrefs that
//    wraps one fa op (`llvm.emit_c_interface`);
//  - `AttentionJit`: compiles that module with a caller-supplied pipeline
//    (e.g. `mlir::fa::buildReferenceCPUPipeline`) and runs it through the
//    ExecutionEngine, poisoning outputs with NaN first and checking that every
//    element was written;
//  - `float64Forward` / `float64Backward`: an independent float64
//    implementation written straight from the math in FADialect.td (it shares
//    no code with the passes, not even the mask attribute);
//  - comparison helpers for GoogleTest.
//
// Typical use:
//
//   AttentionProblem p = ...;
//   AttentionInputs in = makeRandomInputs(p, /*seed=*/1);
//   auto jit = AttentionJit::compile(p, AttentionKind::Forward,
//                                    mlir::fa::buildReferenceCPUPipeline);
//   ForwardResult got = cantFail((*jit)->forward(in));
//   ForwardResult want = float64Forward(p, in.q, in.k, in.v);
//   EXPECT_TRUE(allClose("out", got.out, want.out, 1e-5));
//
//===----------------------------------------------------------------------===//

#ifndef FA_UNITTESTS_NUMERICS_ATTENTIONHARNESS_H
#define FA_UNITTESTS_NUMERICS_ATTENTIONHARNESS_H

#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace mlir {
class ExecutionEngine;
} // namespace mlir

namespace mlir::fa::numerics {

enum class ElementType { F32, F16, BF16 };

/// Which dimensions the generated function leaves dynamic (D and Dv are
/// always static, as the dialect requires).
enum class ShapeKind {
  Static,
  /// Nq and Nk dynamic.
  DynamicSeq,
  /// B, Hq, Hkv, Nq and Nk dynamic.
  DynamicAll,
};

/// One attention problem: shapes, element type and the op's attributes.
struct AttentionProblem {
  int64_t batch = 1;
  int64_t headsQ = 1;
  int64_t headsKV = 1;
  int64_t seqQ = 1;
  int64_t seqK = 1;
  int64_t headDim = 32;
  int64_t valueHeadDim = 32;
  ElementType elementType = ElementType::F32;
  /// Explicit `scale`; the op's default (1/sqrt(D)) when absent.
  std::optional<float> scale;
  bool causal = false;
  /// `mask<window left, right>` (with `causal`: right = 0), -1 = unbounded
  /// (`inf`) on that side.
  std::optional<std::array<int64_t, 2>> window;
  /// The window's sizes as i64 arguments of the function
  /// (`mask<window ?, ?>(%l, %r)`, known only at run time) instead of
  /// constants.
  bool runtimeWindow = false;
  std::optional<float> softcap;
  ShapeKind shapes = ShapeKind::Static;
  /// `deterministic` on the backward op.
  bool deterministic = false;
  /// The scale (explicit or 1/sqrt(D)) and the softcap as f32 arguments of
  /// the function, run-time operands of the op (`scale %s`), instead of
  /// attributes.
  bool runtimeScalars = false;

  std::array<int64_t, 4> qShape() const {
    return {batch, headsQ, seqQ, headDim};
  }
  std::array<int64_t, 4> kShape() const {
    return {batch, headsKV, seqK, headDim};
  }
  std::array<int64_t, 4> vShape() const {
    return {batch, headsKV, seqK, valueHeadDim};
  }
  std::array<int64_t, 4> outShape() const {
    return {batch, headsQ, seqQ, valueHeadDim};
  }

  /// A name usable as a GoogleTest parameter name ([A-Za-z0-9_]).
  std::string name() const;
};

/// GoogleTest prints parameters with this.
void PrintTo(const AttentionProblem &problem, std::ostream *os);

/// A dense row-major float64 tensor on the host.
struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<double> data;

  HostTensor() = default;
  HostTensor(std::vector<int64_t> shape, double fill = 0.0);
  template <size_t N>
  HostTensor(const std::array<int64_t, N> &shape, double fill = 0.0)
      : HostTensor(std::vector<int64_t>(shape.begin(), shape.end()), fill) {}

  int64_t numElements() const { return static_cast<int64_t>(data.size()); }
  /// Flat index of a row-major multi-index.
  int64_t offset(std::initializer_list<int64_t> index) const;
  double &at(std::initializer_list<int64_t> index) {
    return data[offset(index)];
  }
  double at(std::initializer_list<int64_t> index) const {
    return data[offset(index)];
  }
};

/// Rounds `x` to the nearest value of `type` (ties to even).
double roundTo(double x, ElementType type);

struct AttentionInputs {
  HostTensor q, k, v, dout;
};

/// Normally distributed inputs (q, k with a spread that makes the softmax
/// peaked, v and dout of unit variance), already rounded to the problem's
/// element type so the float64 reference sees exactly what the kernel sees.
/// Never zero.
AttentionInputs makeRandomInputs(const AttentionProblem &problem,
                                 uint64_t seed);

struct ForwardResult {
  HostTensor out; // [B, Hq, Nq, Dv]
  HostTensor lse; // [B, Hq, Nq]
};

struct BackwardResult {
  HostTensor dq, dk, dv;
};

//===----------------------------------------------------------------------===//
// Float64 reference
//===----------------------------------------------------------------------===//

/// The softmax scale in float64: the explicit one, else 1/sqrt(D).
double float64Scale(const AttentionProblem &problem);

/// Is key j visible from query i, straight from the dialect's documentation.
bool float64IsVisible(const AttentionProblem &problem, int64_t i, int64_t j);

ForwardResult float64Forward(const AttentionProblem &problem,
                             const HostTensor &q, const HostTensor &k,
                             const HostTensor &v);

/// Gradients of `sum(dout * out)` with respect to q, k and v, written from
/// the softmax Jacobian (dS = P * (dP - rowsum(P * dP))), without any saved
/// state from the forward.
BackwardResult float64Backward(const AttentionProblem &problem,
                               const HostTensor &q, const HostTensor &k,
                               const HostTensor &v, const HostTensor &dout);

/// `sum(dout * out)`: the scalar whose gradient the backward computes.
double lossOf(const HostTensor &out, const HostTensor &dout);

//===----------------------------------------------------------------------===//
// IR generation and JIT
//===----------------------------------------------------------------------===//

enum class AttentionKind { Forward, Backward };

/// The MLIR text of `func.func @<funcName>` over memrefs:
///   forward:  (q, k, v, out, lse)
///   backward: (q, k, v, out, lse, dout, dq, dk, dv)
/// Inputs are wrapped with `bufferization.to_tensor restrict`, the fa op is
/// applied, and its results are written into the output memrefs with
/// `bufferization.materialize_in_destination`.
std::string buildAttentionModule(const AttentionProblem &problem,
                                 AttentionKind kind,
                                 const std::string &funcName = "attention");

/// Fills `pm` with the passes that take the module above to the LLVM dialect.
using PipelineBuilder = std::function<void(OpPassManager &)>;

/// A compiled attention function, callable repeatedly.
class AttentionJit {
public:
  /// Parses the module for `problem`, runs `pipeline` on it and JIT-compiles
  /// the result (at -O2, with the MLIR C runner utils loaded for calls such
  /// as `memrefCopy`). Errors carry the diagnostics and the input IR.
  static llvm::Expected<std::unique_ptr<AttentionJit>>
  compile(const AttentionProblem &problem, AttentionKind kind,
          const PipelineBuilder &pipeline);

  ~AttentionJit();

  /// Runs a forward function on `inputs.q/k/v`.
  llvm::Expected<ForwardResult> forward(const AttentionInputs &inputs);

  /// Runs a backward function; `out` and `lse` play the forward's results
  /// (rounded to the element type, resp. f32, on the way in).
  llvm::Expected<BackwardResult> backward(const AttentionInputs &inputs,
                                          const HostTensor &out,
                                          const HostTensor &lse);

  const AttentionProblem &getProblem() const { return problem; }

private:
  AttentionJit(const AttentionProblem &problem, AttentionKind kind,
               std::unique_ptr<ExecutionEngine> engine);

  AttentionProblem problem;
  AttentionKind kind;
  std::unique_ptr<ExecutionEngine> engine;
};

/// Parses `source`, runs `pipeline` on it and JIT-compiles the result (what
/// AttentionJit::compile does for its own module); `what` names the module
/// in errors.
llvm::Expected<std::unique_ptr<ExecutionEngine>>
compileModule(const std::string &source, const PipelineBuilder &pipeline,
              const std::string &what);

/// A buffer in a kernel's float element type (rank 1 to 4, row-major) and
/// the memref descriptor that points at it (`StridedMemRefType` is the C
/// layout of a ranked memref).
class KernelBuffer {
public:
  KernelBuffer(std::string name, ElementType type, std::vector<int64_t> shape);

  /// The address to pass for this memref argument.
  void *descriptorPtr();
  /// Copies `t` in, rounding to the element type.
  void write(const HostTensor &t);
  /// Fills with NaN, so an element the kernel never writes is caught.
  void poison();
  /// Reads the buffer back; an error if any element is still NaN.
  /// The buffer's values; NaN is an error (an element never written)
  /// unless `allowNaN`.
  llvm::Expected<HostTensor> read(bool allowNaN = false) const;

private:
  size_t elementSize() const;
  void store(int64_t n, const llvm::APFloat &f);
  llvm::APFloat load(int64_t n) const;

  std::string name;
  ElementType type;
  std::vector<int64_t> shape;
  int64_t numElements;
  std::vector<uint8_t> bytes;
  std::variant<StridedMemRefType<char, 1>, StridedMemRefType<char, 2>,
               StridedMemRefType<char, 3>, StridedMemRefType<char, 4>>
      descriptor;
};

/// An i32 memref argument (sequence offsets, page tables), rank 1 or 2.
class I32Buffer {
public:
  I32Buffer(std::vector<int32_t> values, std::vector<int64_t> shape);
  void *descriptorPtr();

private:
  std::vector<int32_t> data;
  std::vector<int64_t> shape;
  std::variant<StridedMemRefType<int32_t, 1>, StridedMemRefType<int32_t, 2>>
      descriptor;
};

//===----------------------------------------------------------------------===//
// Comparisons
//===----------------------------------------------------------------------===//

/// Elementwise `|actual - expected| <= rtol * (|expected| + max|expected|)`
/// (a per-element relative bound plus a tensor-wide absolute floor, so that
/// elements near zero are judged against the tensor's magnitude), with
/// infinities required to match exactly, NaN never accepted, and an expected
/// exact zero (a row or column that sees nothing) required to be exactly 0.
::testing::AssertionResult allClose(const std::string &what,
                                    const HostTensor &actual,
                                    const HostTensor &expected, double rtol);

/// The largest `|actual - expected| / (|expected| + max|expected|)` over the
/// finite elements: what `allClose` compares against `rtol`.
double maxRelativeError(const HostTensor &actual, const HostTensor &expected);

} // namespace mlir::fa::numerics

#endif // FA_UNITTESTS_NUMERICS_ATTENTIONHARNESS_H
