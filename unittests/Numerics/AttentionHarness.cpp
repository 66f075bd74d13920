//===- AttentionHarness.cpp - CPU numerics harness for fa ops -------------===//
//
// IR generation, JIT compilation and execution, and the comparisons of the
// harness declared in AttentionHarness.h. The float64 reference lives in
// Float64Attention.cpp.
//
//===----------------------------------------------------------------------===//

#include "AttentionHarness.h"

#include "fa/Dialect/FA/IR/FADialect.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <sstream>
#include <variant>

using namespace mlir;
using namespace mlir::fa::numerics;

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

//===----------------------------------------------------------------------===//
// Problem and tensors
//===----------------------------------------------------------------------===//

static const char *elementTypeName(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return "f32";
  case ElementType::F16:
    return "f16";
  case ElementType::BF16:
    return "bf16";
  }
  llvm_unreachable("unknown element type");
}

/// `-1` -> `m1`, `0.25` -> `0p25`: identifier-safe numbers.
static std::string safeNumber(double x) {
  std::ostringstream ss;
  ss << x;
  std::string s = ss.str();
  for (char &c : s) {
    if (c == '-')
      c = 'm';
    else if (c == '.')
      c = 'p';
    else if (c == '+')
      c = 'P';
  }
  return s;
}

void mlir::fa::numerics::PrintTo(const AttentionProblem &problem,
                                 std::ostream *os) {
  *os << problem.name();
}

std::string AttentionProblem::name() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "b" << batch << "_h" << headsQ << "x" << headsKV << "_q" << seqQ << "_k"
     << seqK << "_d" << headDim << "x" << valueHeadDim << "_"
     << elementTypeName(elementType);
  if (causal)
    os << "_causal";
  if (window)
    os << "_win" << safeNumber((*window)[0]) << "_" << safeNumber((*window)[1])
       << (runtimeWindow ? "_rt" : "");
  if (softcap)
    os << "_cap" << safeNumber(*softcap);
  if (scale)
    os << "_scale" << safeNumber(*scale);
  if (shapes == ShapeKind::DynamicSeq)
    os << "_dynseq";
  else if (shapes == ShapeKind::DynamicAll)
    os << "_dynall";
  if (deterministic)
    os << "_det";
  if (runtimeScalars)
    os << "_rtscalars";
  return s;
}

HostTensor::HostTensor(std::vector<int64_t> shapeIn, double fill)
    : shape(std::move(shapeIn)) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  data.assign(n, fill);
}

int64_t HostTensor::offset(std::initializer_list<int64_t> index) const {
  assert(index.size() == shape.size() && "rank mismatch");
  int64_t flat = 0;
  for (auto [i, d] : llvm::zip(index, shape)) {
    assert(i >= 0 && i < d && "index out of bounds");
    flat = flat * d + i;
  }
  return flat;
}

static const llvm::fltSemantics &semanticsOf(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return llvm::APFloat::IEEEsingle();
  case ElementType::F16:
    return llvm::APFloat::IEEEhalf();
  case ElementType::BF16:
    return llvm::APFloat::BFloat();
  }
  llvm_unreachable("unknown element type");
}

static llvm::APFloat toAPFloat(double x, ElementType type) {
  llvm::APFloat f(x);
  bool losesInfo;
  f.convert(semanticsOf(type), llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  return f;
}

static double toDouble(llvm::APFloat f) {
  bool losesInfo;
  f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
            &losesInfo);
  return f.convertToDouble();
}

double mlir::fa::numerics::roundTo(double x, ElementType type) {
  return toDouble(toAPFloat(x, type));
}

AttentionInputs mlir::fa::numerics::makeRandomInputs(const AttentionProblem &p,
                                                     uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto fill = [&](HostTensor t, double stddev) {
    std::normal_distribution<double> dist(0.0, stddev);
    for (double &x : t.data) {
      do
        x = roundTo(dist(rng), p.elementType);
      while (x == 0.0);
    }
    return t;
  };
  // q and k spread wider than 1 so that softmax rows are peaked rather than
  // nearly uniform (a flat softmax hides mistakes in the max/exp steps).
  AttentionInputs in;
  in.q = fill(HostTensor(p.qShape()), 1.5);
  in.k = fill(HostTensor(p.kShape()), 1.5);
  in.v = fill(HostTensor(p.vShape()), 1.0);
  in.dout = fill(HostTensor(p.outShape()), 1.0);
  return in;
}

//===----------------------------------------------------------------------===//
// IR generation
//===----------------------------------------------------------------------===//

namespace {
/// Writes the shaped-type body `AxBx...xelt` of a tensor whose leading dims
/// are (B, H, N[, D]), with the problem's dynamic dimensions as `?`.
std::string shapeBody(const AttentionProblem &p, std::vector<int64_t> shape,
                      const char *elt) {
  std::string s;
  llvm::raw_string_ostream os(s);
  for (auto [d, size] : llvm::enumerate(shape)) {
    bool dynamic = (p.shapes == ShapeKind::DynamicAll && d <= 2) ||
                   (p.shapes == ShapeKind::DynamicSeq && d == 2);
    if (dynamic)
      os << "?";
    else
      os << size;
    os << "x";
  }
  os << elt;
  return s;
}

/// An f32 attribute value that parses back to exactly `x` (MLIR float
/// literals need a '.').
std::string f32Literal(float x) {
  return llvm::formatv("{0:e9}", static_cast<double>(x)).str();
}
} // namespace

std::string
mlir::fa::numerics::buildAttentionModule(const AttentionProblem &p,
                                         AttentionKind kind,
                                         const std::string &funcName) {
  const char *elt = elementTypeName(p.elementType);
  auto vec = [](auto arr) {
    return std::vector<int64_t>(arr.begin(), arr.end());
  };
  std::string q = shapeBody(p, vec(p.qShape()), elt);
  std::string k = shapeBody(p, vec(p.kShape()), elt);
  std::string v = shapeBody(p, vec(p.vShape()), elt);
  std::string o = shapeBody(p, vec(p.outShape()), elt);
  std::string l = shapeBody(p, {p.batch, p.headsQ, p.seqQ}, "f32");

  std::string attrs;
  llvm::raw_string_ostream a(attrs);
  // The mask: causal is a right bound of 0; run-time sizes are operands (a
  // causal window takes only the left one).
  auto side = [](int64_t w) {
    return w < 0 ? std::string("inf") : std::to_string(w);
  };
  bool runtimeWindow = p.window && p.runtimeWindow;
  if (runtimeWindow && p.causal)
    a << " mask<window ?, 0>(%window_left)";
  else if (runtimeWindow)
    a << " mask<window ?, ?>(%window_left, %window_right)";
  else if (p.window)
    a << " mask<window " << side((*p.window)[0]) << ", "
      << (p.causal ? std::string("0") : side((*p.window)[1])) << ">";
  else if (p.causal)
    a << " mask<causal>";
  // Run-time scalars: f32 arguments after the memrefs, softcap first (the
  // op's operand order).
  std::vector<std::string> scalarTypes;
  if (p.softcap) {
    a << (p.runtimeScalars ? " softcap %softcap"
                           : " softcap " + f32Literal(*p.softcap));
    if (p.runtimeScalars)
      scalarTypes.push_back("softcap");
  }
  if (p.runtimeScalars) {
    a << " scale %scale";
    scalarTypes.push_back("scale");
  } else if (p.scale) {
    a << " scale " << f32Literal(*p.scale);
  }
  if (kind == AttentionKind::Backward && p.deterministic)
    a << " deterministic";

  // (name, shaped-type body) of each argument, inputs first.
  std::vector<std::pair<std::string, std::string>> ins = {
      {"q", q}, {"k", k}, {"v", v}};
  std::vector<std::pair<std::string, std::string>> outs;
  if (kind == AttentionKind::Forward) {
    outs = {{"out", o}, {"lse", l}};
  } else {
    ins.insert(ins.end(), {{"out", o}, {"lse", l}, {"dout", o}});
    outs = {{"dq", q}, {"dk", k}, {"dv", v}};
  }

  std::string s;
  llvm::raw_string_ostream os(s);
  os << "func.func @" << funcName << "(";
  llvm::interleaveComma(
      llvm::concat<std::pair<std::string, std::string>>(ins, outs), os,
      [&](const auto &arg) {
        os << "%" << arg.first << ": memref<" << arg.second << ">";
      });
  // The op's operand order: softcap, scale, then the window sizes.
  for (const std::string &name : scalarTypes)
    os << ", %" << name << ": f32";
  if (runtimeWindow)
    os << ", %window_left: i64, %window_right: i64";
  os << ") attributes {llvm.emit_c_interface} {\n";
  for (const auto &[name, body] : ins)
    os << "  %" << name << "_t = bufferization.to_tensor %" << name
       << " restrict : memref<" << body << "> to tensor<" << body << ">\n";
  os << "  ";
  llvm::interleaveComma(
      outs, os, [&](const auto &arg) { os << "%" << arg.first << "_t"; });
  os << (kind == AttentionKind::Forward ? " = fa.attention "
                                        : " = fa.attention_backward ");
  llvm::interleaveComma(
      ins, os, [&](const auto &arg) { os << "%" << arg.first << "_t"; });
  os << attrs << "\n      : (";
  llvm::interleaveComma(
      ins, os, [&](const auto &arg) { os << "tensor<" << arg.second << ">"; });
  for (size_t i = 0; i < scalarTypes.size(); ++i)
    os << ", f32";
  if (runtimeWindow)
    os << (p.causal ? ", i64" : ", i64, i64");
  os << ") -> (";
  llvm::interleaveComma(
      outs, os, [&](const auto &arg) { os << "tensor<" << arg.second << ">"; });
  os << ")\n";
  for (const auto &[name, body] : outs)
    os << "  bufferization.materialize_in_destination %" << name
       << "_t in restrict writable %" << name << " : (tensor<" << body
       << ">, memref<" << body << ">) -> ()\n";
  os << "  return\n}\n";
  return s;
}

//===----------------------------------------------------------------------===//
// Kernel buffers
//===----------------------------------------------------------------------===//

/// `[i, j, ...]`: the multi-index of flat element `flat` of `shape`.
static std::string formatFlatIndex(const std::vector<int64_t> &shape,
                                   int64_t flat) {
  std::vector<int64_t> index(shape.size());
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    index[i] = flat % shape[i];
    flat /= shape[i];
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleaveComma(index, os);
  os << "]";
  return s;
}

/// The row-major descriptor of `data` of `shape` (rank N).
template <typename T, int N>
static StridedMemRefType<T, N> makeDescriptor(T *data,
                                              ArrayRef<int64_t> shape) {
  StridedMemRefType<T, N> d;
  d.basePtr = d.data = data;
  d.offset = 0;
  int64_t stride = 1;
  for (int i = N - 1; i >= 0; --i) {
    d.sizes[i] = shape[i];
    d.strides[i] = stride;
    stride *= shape[i];
  }
  return d;
}

KernelBuffer::KernelBuffer(std::string name, ElementType type,
                           std::vector<int64_t> shape)
    : name(std::move(name)), type(type), shape(std::move(shape)) {
  int64_t n = 1;
  for (int64_t d : this->shape)
    n *= d;
  numElements = n;
  bytes.resize(n * elementSize());
  char *data = reinterpret_cast<char *>(bytes.data());
  switch (this->shape.size()) {
  case 1:
    descriptor = makeDescriptor<char, 1>(data, this->shape);
    break;
  case 2:
    descriptor = makeDescriptor<char, 2>(data, this->shape);
    break;
  case 3:
    descriptor = makeDescriptor<char, 3>(data, this->shape);
    break;
  default:
    assert(this->shape.size() == 4 && "ranks 1 to 4");
    descriptor = makeDescriptor<char, 4>(data, this->shape);
  }
}

void *KernelBuffer::descriptorPtr() {
  return std::visit([](auto &d) -> void * { return &d; }, descriptor);
}

void KernelBuffer::write(const HostTensor &t) {
  assert(t.numElements() == numElements && "size mismatch");
  for (int64_t n = 0; n < numElements; ++n)
    store(n, toAPFloat(t.data[n], type));
}

void KernelBuffer::poison() {
  for (int64_t n = 0; n < numElements; ++n)
    store(n, llvm::APFloat::getQNaN(semanticsOf(type)));
}

llvm::Expected<HostTensor> KernelBuffer::read(bool allowNaN) const {
  HostTensor t(shape);
  for (int64_t n = 0; n < numElements; ++n) {
    t.data[n] = toDouble(load(n));
    if (!allowNaN && std::isnan(t.data[n]))
      return makeError(name + formatFlatIndex(shape, n) +
                       " is NaN: never written (the buffer was poisoned "
                       "with NaN) or computed as NaN");
  }
  return t;
}

size_t KernelBuffer::elementSize() const {
  return type == ElementType::F32 ? 4 : 2;
}

void KernelBuffer::store(int64_t n, const llvm::APFloat &f) {
  uint64_t bits = f.bitcastToAPInt().getZExtValue();
  std::memcpy(&bytes[n * elementSize()], &bits, elementSize());
}

I32Buffer::I32Buffer(std::vector<int32_t> values, std::vector<int64_t> shape)
    : data(std::move(values)), shape(std::move(shape)) {
  assert(this->shape.size() <= 2 && "ranks 1 and 2");
  if (this->shape.size() == 1)
    descriptor = makeDescriptor<int32_t, 1>(data.data(), this->shape);
  else
    descriptor = makeDescriptor<int32_t, 2>(data.data(), this->shape);
}

void *I32Buffer::descriptorPtr() {
  return std::visit([](auto &d) -> void * { return &d; }, descriptor);
}

llvm::APFloat KernelBuffer::load(int64_t n) const {
  uint64_t bits = 0;
  std::memcpy(&bits, &bytes[n * elementSize()], elementSize());
  return llvm::APFloat(semanticsOf(type), llvm::APInt(elementSize() * 8, bits));
}

namespace {
template <size_t N> std::vector<int64_t> vec(const std::array<int64_t, N> &a) {
  return std::vector<int64_t>(a.begin(), a.end());
}

/// The f32 arguments after the memrefs (buildAttentionModule's order).
std::vector<float> scalarArguments(const AttentionProblem &p) {
  std::vector<float> out;
  if (!p.runtimeScalars)
    return out;
  if (p.softcap)
    out.push_back(*p.softcap);
  out.push_back(p.scale ? *p.scale : static_cast<float>(float64Scale(p)));
  return out;
}

llvm::Error invoke(ExecutionEngine &engine, const AttentionProblem &p,
                   llvm::MutableArrayRef<KernelBuffer> buffers) {
  // The C interface takes a pointer to each descriptor, then the run-time
  // scalars and window sizes by value; the packed wrapper takes a pointer to
  // each of those arguments.
  std::vector<void *> descriptors, packed;
  for (KernelBuffer &b : buffers)
    descriptors.push_back(b.descriptorPtr());
  for (void *&d : descriptors)
    packed.push_back(&d);
  std::vector<float> scalars = scalarArguments(p);
  for (float &x : scalars)
    packed.push_back(&x);
  std::array<int64_t, 2> window = p.window.value_or(std::array<int64_t, 2>{});
  if (p.window && p.runtimeWindow)
    for (int64_t &w : window)
      packed.push_back(&w);
  return engine.invokePacked("_mlir_ciface_attention", packed);
}
} // namespace

//===----------------------------------------------------------------------===//
// AttentionJit
//===----------------------------------------------------------------------===//

AttentionJit::AttentionJit(const AttentionProblem &problem, AttentionKind kind,
                           std::unique_ptr<ExecutionEngine> engine)
    : problem(problem), kind(kind), engine(std::move(engine)) {}

AttentionJit::~AttentionJit() = default;

llvm::Expected<std::unique_ptr<ExecutionEngine>>
mlir::fa::numerics::compileModule(const std::string &source,
                                  const PipelineBuilder &pipeline,
                                  const std::string &what) {
  static std::once_flag nativeTargetInit;
  std::call_once(nativeTargetInit, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  registry.insert<fa::FADialect>();
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);

  std::string diagnostics;
  llvm::raw_string_ostream diagOs(diagnostics);
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    diagOs << diag.getLocation() << ": " << diag << "\n";
    return success();
  });

  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(source, &context, "attention.mlir");
  if (!module)
    return makeError("cannot parse the generated module:\n" + diagnostics +
                     "\n" + source);

  PassManager pm(&context);
  pipeline(pm);
  if (failed(pm.run(*module)))
    return makeError("the pipeline failed on " + what + ":\n" + diagnostics +
                     "\ninput:\n" + source);

  auto transformer = makeOptimizingTransformer(/*optLevel=*/2,
                                               /*sizeLevel=*/0,
                                               /*targetMachine=*/nullptr);
  ExecutionEngineOptions options;
  options.transformer = transformer;
  // Lowered code may call the C runner utils (memrefCopy for strided
  // copies). f16/bf16 extf/truncf need nothing extra on a host with F16C and
  // AVX512-BF16; elsewhere LLVM calls __truncsfhf2 (libgcc_s) and
  // __truncsfbf2 (mlir_float16_utils, which the runner utils load).
  llvm::StringRef sharedLibs[] = {FA_HARNESS_C_RUNNER_UTILS};
  options.sharedLibPaths = sharedLibs;
  auto engine = ExecutionEngine::create(*module, options);
  if (!engine)
    return llvm::joinErrors(
        makeError("cannot JIT-compile " + what + ":\n" + diagnostics),
        engine.takeError());
  return std::move(*engine);
}

llvm::Expected<std::unique_ptr<AttentionJit>>
AttentionJit::compile(const AttentionProblem &problem, AttentionKind kind,
                      const PipelineBuilder &pipeline) {
  auto engine = compileModule(buildAttentionModule(problem, kind), pipeline,
                              problem.name());
  if (!engine)
    return engine.takeError();
  return std::unique_ptr<AttentionJit>(
      new AttentionJit(problem, kind, std::move(*engine)));
}

/// q, k, v, out, lse: the forward's arguments, which the backward's start
/// with.
static std::vector<KernelBuffer> forwardBuffers(const AttentionProblem &p) {
  ElementType elt = p.elementType;
  std::vector<KernelBuffer> buffers;
  buffers.emplace_back("q", elt, vec(p.qShape()));
  buffers.emplace_back("k", elt, vec(p.kShape()));
  buffers.emplace_back("v", elt, vec(p.vShape()));
  buffers.emplace_back("out", elt, vec(p.outShape()));
  buffers.emplace_back("lse", ElementType::F32,
                       std::vector<int64_t>{p.batch, p.headsQ, p.seqQ});
  return buffers;
}

llvm::Expected<ForwardResult>
AttentionJit::forward(const AttentionInputs &inputs) {
  if (kind != AttentionKind::Forward)
    return makeError("forward() called on a backward function");
  std::vector<KernelBuffer> buffers = forwardBuffers(problem);
  buffers[0].write(inputs.q);
  buffers[1].write(inputs.k);
  buffers[2].write(inputs.v);
  buffers[3].poison();
  buffers[4].poison();
  if (llvm::Error err = invoke(*engine, problem, buffers))
    return std::move(err);
  ForwardResult result;
  for (auto [buffer, tensor] :
       llvm::zip(llvm::ArrayRef(buffers).drop_front(3),
                 std::array<HostTensor *, 2>{&result.out, &result.lse})) {
    llvm::Expected<HostTensor> t = buffer.read();
    if (!t)
      return t.takeError();
    *tensor = std::move(*t);
  }
  return result;
}

llvm::Expected<BackwardResult>
AttentionJit::backward(const AttentionInputs &inputs, const HostTensor &out,
                       const HostTensor &lse) {
  if (kind != AttentionKind::Backward)
    return makeError("backward() called on a forward function");
  const AttentionProblem &p = problem;
  ElementType elt = p.elementType;
  std::vector<KernelBuffer> buffers = forwardBuffers(p);
  buffers.emplace_back("dout", elt, vec(p.outShape()));
  buffers.emplace_back("dq", elt, vec(p.qShape()));
  buffers.emplace_back("dk", elt, vec(p.kShape()));
  buffers.emplace_back("dv", elt, vec(p.vShape()));
  buffers[0].write(inputs.q);
  buffers[1].write(inputs.k);
  buffers[2].write(inputs.v);
  buffers[3].write(out);
  buffers[4].write(lse);
  buffers[5].write(inputs.dout);
  for (int i = 6; i < 9; ++i)
    buffers[i].poison();
  if (llvm::Error err = invoke(*engine, p, buffers))
    return std::move(err);
  BackwardResult result;
  for (auto [buffer, tensor] : llvm::zip(
           llvm::ArrayRef(buffers).drop_front(6),
           std::array<HostTensor *, 3>{&result.dq, &result.dk, &result.dv})) {
    llvm::Expected<HostTensor> t = buffer.read();
    if (!t)
      return t.takeError();
    *tensor = std::move(*t);
  }
  return result;
}

//===----------------------------------------------------------------------===//
// Comparisons
//===----------------------------------------------------------------------===//

static double maxAbsFinite(const HostTensor &t) {
  double m = 0.0;
  for (double x : t.data)
    if (std::isfinite(x))
      m = std::max(m, std::abs(x));
  return m;
}

double mlir::fa::numerics::maxRelativeError(const HostTensor &actual,
                                            const HostTensor &expected) {
  double floor = maxAbsFinite(expected), worst = 0.0;
  for (size_t n = 0; n < expected.data.size(); ++n) {
    double a = actual.data[n], e = expected.data[n];
    if (!std::isfinite(a) || !std::isfinite(e))
      continue;
    double denom = std::abs(e) + floor;
    if (denom > 0.0)
      worst = std::max(worst, std::abs(a - e) / denom);
  }
  return worst;
}

::testing::AssertionResult
mlir::fa::numerics::allClose(const std::string &what, const HostTensor &actual,
                             const HostTensor &expected, double rtol) {
  if (actual.shape != expected.shape)
    return ::testing::AssertionFailure() << what << ": shape mismatch";
  double floor = maxAbsFinite(expected);
  int64_t numBad = 0;
  std::ostringstream first;
  for (size_t n = 0; n < expected.data.size(); ++n) {
    double a = actual.data[n], e = expected.data[n];
    bool ok;
    if (std::isnan(a) || std::isnan(e))
      ok = false;
    else if (std::isinf(a) || std::isinf(e) || e == 0.0)
      ok = a == e; // +inf lse and exact zeros of rows that see nothing.
    else
      ok = std::abs(a - e) <= rtol * (std::abs(e) + floor);
    if (ok)
      continue;
    if (numBad++ < 5)
      first << "\n  " << what << formatFlatIndex(expected.shape, n) << " = "
            << llvm::formatv("{0:e9}", a).str() << ", expected "
            << llvm::formatv("{0:e9}", e).str();
  }
  if (numBad == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << numBad << " of " << expected.data.size()
         << " elements off (rtol " << rtol << ", max |expected| " << floor
         << ", worst relative error " << maxRelativeError(actual, expected)
         << ")" << first.str();
}
