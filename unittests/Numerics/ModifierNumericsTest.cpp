//===- ModifierNumericsTest.cpp - score_mod / mask_mod on the CPU ---------===//
//
// fa.attention with user-defined modifier regions through the reference CPU
// pipeline (fa-lower-to-reference), against a float64 implementation that
// takes the modifiers as C++ functions: ALiBi (slopes captured per head),
// relative-position biases (a [Nq + Nk - 1] table and a [Hq, Nq, Nk] one),
// document masks over per-token ids, prefix-LM, rows that see no key; odd
// sizes and GQA. The built-in causal and window masks and the softcap,
// written as modifiers, must give bitwise the results of the attributes on
// the same inputs.
//
//===----------------------------------------------------------------------===//

#include "AttentionHarness.h"

#include "fa/Pipelines/Pipelines.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <limits>
#include <random>

using namespace mlir::fa::numerics;

namespace {

/// A captured tensor: f32 values, or i32 ones (`ints`).
struct Capture {
  HostTensor values;
  bool ints = false;

  std::string body() const {
    std::string s;
    for (int64_t d : values.shape)
      s += std::to_string(d) + "x";
    return s + (ints ? "i32" : "f32");
  }
};

using ScoreFn =
    std::function<double(double s, int64_t b, int64_t h, int64_t i, int64_t j)>;
using MaskFn = std::function<bool(int64_t b, int64_t h, int64_t i, int64_t j)>;

/// One case: the problem (shapes and attributes), the captures, the bodies
/// of the modifier regions (empty: none) and the same modifiers in C++.
struct ModifierCase {
  std::string name;
  AttentionProblem problem;
  std::vector<Capture> captures;
  /// Region bodies: they read %s (score_mod only), %b, %h, %i, %j and the
  /// captures %cap0, %cap1, ... and end with fa.yield.
  std::string scoreMod, maskMod;
  ScoreFn score;
  MaskFn mask;
  /// fa.attention's key_ranges [B, Hq, ceil(Nq / rows), 2] (ints), when
  /// keyRangeRows > 0.
  Capture keyRanges;
  int64_t keyRangeRows = 0;
  /// fa.attention_backward's query_ranges [B, Hkv, ceil(Nk / rows), 2]
  /// (ints), when queryRangeRows > 0 (the backward module only).
  Capture queryRanges;
  int64_t queryRangeRows = 0;
};

void PrintTo(const ModifierCase &c, std::ostream *os) { *os << c.name; }

/// ` mask<...> softcap C scale S` for the problem's attributes.
std::string attributeText(const AttentionProblem &p) {
  std::string s;
  llvm::raw_string_ostream os(s);
  auto side = [](int64_t w) {
    return w < 0 ? std::string("inf") : std::to_string(w);
  };
  if (p.window)
    os << " mask<window " << side((*p.window)[0]) << ", "
       << (p.causal ? std::string("0") : side((*p.window)[1])) << ">";
  else if (p.causal)
    os << " mask<causal>";
  if (p.softcap)
    os << " softcap " << llvm::formatv("{0:e9}", double(*p.softcap));
  if (p.scale)
    os << " scale " << llvm::formatv("{0:e9}", double(*p.scale));
  if (p.deterministic)
    os << " deterministic";
  return s;
}

/// The shaped-type body of an attention tensor ([B, H, N(, D)]) with the
/// problem's dynamic dimensions as `?` (the captures stay static).
std::string dims(const AttentionProblem &p, llvm::ArrayRef<int64_t> shape) {
  std::string s;
  for (auto [i, d] : llvm::enumerate(shape)) {
    bool dynamic = (p.shapes == ShapeKind::DynamicAll && i < 3) ||
                   (p.shapes == ShapeKind::DynamicSeq && i == 2);
    s += (dynamic ? std::string("?") : std::to_string(d)) + "x";
  }
  return s + "f32";
}

/// The text of the case's ` captures(...) score_mod(...) {...}
/// mask_mod(...) {...}` after the op's attributes.
std::string modifierText(const ModifierCase &c) {
  std::string s;
  llvm::raw_string_ostream os(s);
  std::string regionCaptures;
  if (!c.captures.empty()) {
    os << " captures(";
    for (size_t n = 0; n < c.captures.size(); ++n) {
      os << (n ? ", " : "") << "%a" << n << "_t";
      regionCaptures += ", %cap" + std::to_string(n) + ": tensor<" +
                        c.captures[n].body() + ">";
    }
    os << ")";
  }
  if (!c.scoreMod.empty())
    os << "\n    score_mod(%s: f32, %b: index, %h: index, %i: index, "
          "%j: index"
       << regionCaptures << ") {\n"
       << c.scoreMod << "\n    }";
  if (!c.maskMod.empty())
    os << "\n    mask_mod(%b: index, %h: index, %i: index, %j: index"
       << regionCaptures << ") {\n"
       << c.maskMod << "\n    }";
  return s;
}

/// `func.func @attention(ins..., outs...)` over static memrefs (name and
/// shaped-type body of each), applying `op` (whose operands are the inputs
/// as tensors, `%<name>_t`, and whose results are `%r#0...`) and storing
/// its results into `outs`.
using Arg = std::pair<std::string, std::string>;
std::string wrapInFunction(llvm::ArrayRef<Arg> ins, llvm::ArrayRef<Arg> outs,
                           const std::string &op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "func.func @attention(";
  llvm::ListSeparator args;
  for (llvm::ArrayRef<Arg> group : {ins, outs})
    for (auto &[name, body] : group)
      os << args << "%" << name << ": memref<" << body << ">";
  os << ") attributes {llvm.emit_c_interface} {\n";
  for (auto &[name, body] : ins)
    os << "  %" << name << "_t = bufferization.to_tensor %" << name
       << " restrict : memref<" << body << "> to tensor<" << body << ">\n";
  os << "  %r:" << outs.size() << " = " << op << "\n    : (";
  llvm::ListSeparator types;
  for (auto &[name, body] : ins)
    os << types << "tensor<" << body << ">";
  os << ") -> (";
  llvm::ListSeparator results;
  for (auto &[name, body] : outs)
    os << results << "tensor<" << body << ">";
  os << ")\n";
  for (auto [n, out] : llvm::enumerate(outs))
    os << "  bufferization.materialize_in_destination %r#" << n
       << " in restrict writable %" << out.first << " : (tensor<" << out.second
       << ">, memref<" << out.second << ">) -> ()\n";
  os << "  return\n}\n";
  return s;
}

/// The inputs q, k, v (and for the backward out, lse, dout), then the
/// captures.
std::vector<Arg> inputArgs(const ModifierCase &c, bool backward) {
  const AttentionProblem &p = c.problem;
  std::vector<Arg> ins = {{"q", dims(p, p.qShape())},
                          {"k", dims(p, p.kShape())},
                          {"v", dims(p, p.vShape())}};
  if (backward) {
    ins.push_back({"out", dims(p, p.outShape())});
    ins.push_back(
        {"lse", dims(p, std::vector<int64_t>{p.batch, p.headsQ, p.seqQ})});
    ins.push_back({"dout", dims(p, p.outShape())});
  }
  if (backward && c.queryRangeRows > 0)
    ins.push_back({"qr", c.queryRanges.body()});
  if (c.keyRangeRows > 0)
    ins.push_back({"kr", c.keyRanges.body()});
  for (auto [n, cap] : llvm::enumerate(c.captures))
    ins.push_back({"a" + std::to_string(n), cap.body()});
  return ins;
}

/// ` key_ranges(%kr_t rows G)` when the case has them.
std::string keyRangesText(const ModifierCase &c) {
  if (c.keyRangeRows <= 0)
    return "";
  return " key_ranges(%kr_t rows " + std::to_string(c.keyRangeRows) + ")";
}

/// ` query_ranges(%qr_t rows G)` when the case has them.
std::string queryRangesText(const ModifierCase &c) {
  if (c.queryRangeRows <= 0)
    return "";
  return " query_ranges(%qr_t rows " + std::to_string(c.queryRangeRows) + ")";
}

/// The forward: fa.attention with the case's attributes and regions.
std::string modifierModule(const ModifierCase &c) {
  const AttentionProblem &p = c.problem;
  return wrapInFunction(
      inputArgs(c, /*backward=*/false),
      {{"o", dims(p, p.outShape())},
       {"l", dims(p, std::vector<int64_t>{p.batch, p.headsQ, p.seqQ})}},
      "fa.attention %q_t, %k_t, %v_t" + attributeText(p) + keyRangesText(c) +
          modifierText(c));
}

/// The backward: fa.attention_backward with the same attributes and regions
/// (the pipeline derives the score_mod_grad).
std::string backwardModifierModule(const ModifierCase &c) {
  const AttentionProblem &p = c.problem;
  return wrapInFunction(inputArgs(c, /*backward=*/true),
                        {{"dq", dims(p, p.qShape())},
                         {"dk", dims(p, p.kShape())},
                         {"dv", dims(p, p.vShape())}},
                        "fa.attention_backward %q_t, %k_t, %v_t, %out_t, "
                        "%lse_t, %dout_t" +
                            attributeText(p) + queryRangesText(c) +
                            keyRangesText(c) + modifierText(c));
}

/// Memref arguments for the captures: f32 ones as KernelBuffers, i32 ones
/// as I32Buffers.
struct CaptureBuffers {
  std::vector<std::unique_ptr<KernelBuffer>> floats;
  std::vector<std::unique_ptr<I32Buffer>> ints;

  void append(const std::vector<Capture> &captures,
              std::vector<void *> &descriptors) {
    for (const Capture &cap : captures) {
      if (cap.ints) {
        std::vector<int32_t> values(cap.values.data.begin(),
                                    cap.values.data.end());
        ints.push_back(std::make_unique<I32Buffer>(values, cap.values.shape));
        descriptors.push_back(ints.back()->descriptorPtr());
      } else {
        floats.push_back(std::make_unique<KernelBuffer>(
            "capture", ElementType::F32, cap.values.shape));
        floats.back()->write(cap.values);
        descriptors.push_back(floats.back()->descriptorPtr());
      }
    }
  }
};

llvm::Error invoke(mlir::ExecutionEngine &engine,
                   std::vector<void *> descriptors) {
  std::vector<void *> packed;
  for (void *&d : descriptors)
    packed.push_back(&d);
  return engine.invokePacked("_mlir_ciface_attention", packed);
}

template <typename Shape> std::vector<int64_t> vec(const Shape &shape) {
  return std::vector<int64_t>(shape.begin(), shape.end());
}

/// The tiled CPU pipeline (fa-tile-attention with the modifiers in
/// fa.online_attention, fa-decompose-online-attention inlining them) with
/// blocks of 16 x 16: several key blocks, padded rows and keys.
PipelineBuilder tiledModifierPipeline() {
  return [](mlir::OpPassManager &pm) {
    mlir::fa::TiledCPUPipelineOptions options;
    options.blockQ = 16;
    options.blockKV = 16;
    mlir::fa::buildTiledCPUPipeline(pm, options);
  };
}

/// Compiles the case's module with `pipeline` (default: the reference CPU
/// pipeline) and runs it.
llvm::Expected<ForwardResult> runModifierCase(
    const ModifierCase &c, const AttentionInputs &in,
    const PipelineBuilder &pipeline = mlir::fa::buildReferenceCPUPipeline) {
  const AttentionProblem &p = c.problem;
  auto engine = compileModule(modifierModule(c), pipeline, c.name);
  if (!engine)
    return engine.takeError();
  KernelBuffer qb("q", ElementType::F32, vec(p.qShape()));
  KernelBuffer kb("k", ElementType::F32, vec(p.kShape()));
  KernelBuffer vb("v", ElementType::F32, vec(p.vShape()));
  KernelBuffer ob("out", ElementType::F32, vec(p.outShape()));
  KernelBuffer lb("lse", ElementType::F32, {p.batch, p.headsQ, p.seqQ});
  qb.write(in.q);
  kb.write(in.k);
  vb.write(in.v);
  ob.poison();
  lb.poison();
  std::vector<void *> descriptors = {qb.descriptorPtr(), kb.descriptorPtr(),
                                     vb.descriptorPtr()};
  CaptureBuffers captures;
  if (c.keyRangeRows > 0)
    captures.append({c.keyRanges}, descriptors);
  captures.append(c.captures, descriptors);
  descriptors.push_back(ob.descriptorPtr());
  descriptors.push_back(lb.descriptorPtr());
  if (llvm::Error err = invoke(**engine, descriptors))
    return std::move(err);
  auto out = ob.read();
  if (!out)
    return out.takeError();
  auto lse = lb.read();
  if (!lse)
    return lse.takeError();
  return ForwardResult{*out, *lse};
}

/// The backward of the case through the reference CPU pipeline, given the
/// forward's `fwd` (out rounded to f32 on the way in).
llvm::Expected<BackwardResult> runBackwardModifierCase(
    const ModifierCase &c, const AttentionInputs &in, const ForwardResult &fwd,
    const PipelineBuilder &pipeline = mlir::fa::buildReferenceCPUPipeline) {
  const AttentionProblem &p = c.problem;
  auto engine = compileModule(backwardModifierModule(c), pipeline, c.name);
  if (!engine)
    return engine.takeError();
  std::vector<KernelBuffer> buffers;
  buffers.reserve(9);
  buffers.emplace_back("q", ElementType::F32, vec(p.qShape()));
  buffers.emplace_back("k", ElementType::F32, vec(p.kShape()));
  buffers.emplace_back("v", ElementType::F32, vec(p.vShape()));
  buffers.emplace_back("out", ElementType::F32, vec(p.outShape()));
  buffers.emplace_back("lse", ElementType::F32,
                       std::vector<int64_t>{p.batch, p.headsQ, p.seqQ});
  buffers.emplace_back("dout", ElementType::F32, vec(p.outShape()));
  const HostTensor *inputs[] = {&in.q,    &in.k,    &in.v,
                                &fwd.out, &fwd.lse, &in.dout};
  std::vector<void *> descriptors;
  for (auto [buffer, t] : llvm::zip(buffers, inputs)) {
    buffer.write(*t);
    descriptors.push_back(buffer.descriptorPtr());
  }
  CaptureBuffers captures;
  if (c.queryRangeRows > 0)
    captures.append({c.queryRanges}, descriptors);
  if (c.keyRangeRows > 0)
    captures.append({c.keyRanges}, descriptors);
  captures.append(c.captures, descriptors);
  buffers.emplace_back("dq", ElementType::F32, vec(p.qShape()));
  buffers.emplace_back("dk", ElementType::F32, vec(p.kShape()));
  buffers.emplace_back("dv", ElementType::F32, vec(p.vShape()));
  for (size_t n = 6; n < 9; ++n) {
    buffers[n].poison();
    descriptors.push_back(buffers[n].descriptorPtr());
  }
  if (llvm::Error err = invoke(**engine, descriptors))
    return std::move(err);
  BackwardResult r;
  HostTensor *grads[] = {&r.dq, &r.dk, &r.dv};
  for (auto [n, t] : llvm::enumerate(grads)) {
    auto read = buffers[6 + n].read();
    if (!read)
      return read.takeError();
    *t = *read;
  }
  return r;
}

/// Attention in float64 with the modifiers as C++ functions, from the
/// op's documented order: scale, score_mod, softcap, then the mask
/// attribute AND the mask_mod. Shares nothing with the passes; the
/// attribute's visibility is the harness's float64IsVisible.
ForwardResult float64WithModifiers(const ModifierCase &c,
                                   const AttentionInputs &in) {
  const AttentionProblem &p = c.problem;
  const double inf = std::numeric_limits<double>::infinity();
  ForwardResult r{HostTensor(p.outShape()),
                  HostTensor(std::vector<int64_t>{p.batch, p.headsQ, p.seqQ})};
  double scale = float64Scale(p);
  int64_t group = p.headsQ / p.headsKV;
  std::vector<double> s(p.seqK);
  std::vector<bool> seen(p.seqK);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.headsQ; ++h)
      for (int64_t i = 0; i < p.seqQ; ++i) {
        double m = -inf;
        for (int64_t j = 0; j < p.seqK; ++j) {
          double dot = 0.0;
          for (int64_t d = 0; d < p.headDim; ++d)
            dot += in.q.at({b, h, i, d}) * in.k.at({b, h / group, j, d});
          double x = scale * dot;
          if (c.score)
            x = c.score(x, b, h, i, j);
          if (p.softcap)
            x = *p.softcap * std::tanh(x / *p.softcap);
          s[j] = x;
          seen[j] =
              float64IsVisible(p, i, j) && (!c.mask || c.mask(b, h, i, j));
          if (seen[j])
            m = std::max(m, x);
        }
        if (m == -inf) {
          r.lse.at({b, h, i}) = inf;
          continue; // out stays 0
        }
        double sum = 0.0;
        for (int64_t j = 0; j < p.seqK; ++j)
          if (seen[j])
            sum += std::exp(s[j] - m);
        for (int64_t j = 0; j < p.seqK; ++j) {
          if (!seen[j])
            continue;
          double w = std::exp(s[j] - m) / sum;
          for (int64_t e = 0; e < p.valueHeadDim; ++e)
            r.out.at({b, h, i, e}) += w * in.v.at({b, h / group, j, e});
        }
        r.lse.at({b, h, i}) = m + std::log(sum);
      }
  return r;
}

/// Normal f32 values (never zero).
HostTensor randomTensor(std::vector<int64_t> shape, double stddev,
                        uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist(0.0, stddev);
  HostTensor t(std::move(shape));
  for (double &x : t.data) {
    do
      x = roundTo(dist(rng), ElementType::F32);
    while (x == 0.0);
  }
  return t;
}

AttentionProblem problem(int64_t nq, int64_t nk, int64_t hq, int64_t hkv,
                         int64_t batch = 1) {
  AttentionProblem p;
  p.batch = batch;
  p.headsQ = hq;
  p.headsKV = hkv;
  p.seqQ = nq;
  p.seqK = nk;
  p.headDim = p.valueHeadDim = 16;
  return p;
}

// The region bodies share these: the signed distance j - i as f32.
constexpr const char *kDistance = R"(
      %dist = arith.subi %j, %i : index
      %di = arith.index_cast %dist : index to i64
      %df = arith.sitofp %di : i64 to f32)";

ModifierCase alibi() {
  ModifierCase c;
  c.name = "alibi_gqa_causal";
  c.problem = problem(17, 33, 4, 2, /*batch=*/2);
  c.problem.causal = true;
  HostTensor slopes(std::vector<int64_t>{4});
  for (int64_t h = 0; h < 4; ++h)
    slopes.data[h] = std::pow(2.0, -2.0 * (h + 1)); // 2^(-8h/H), H = 4
  c.captures = {{slopes}};
  c.scoreMod = std::string(kDistance) + R"(
      %slope = tensor.extract %cap0[%h] : tensor<4xf32>
      %bias = arith.mulf %slope, %df : f32
      %r = arith.addf %s, %bias : f32
      fa.yield %r : f32)";
  c.score = [slopes](double s, int64_t, int64_t h, int64_t i, int64_t j) {
    return s + slopes.data[h] * double(j - i);
  };
  return c;
}

/// ALiBi with every size but the head dims known only at run time (the
/// group size a value inside the score generic).
ModifierCase alibiDynamic() {
  ModifierCase c = alibi();
  c.name = "alibi_gqa_causal_dynamic";
  c.problem.shapes = ShapeKind::DynamicAll;
  return c;
}

/// Two captures: a bias per relative distance j - i ([Nq + Nk - 1], at
/// j - i + Nq - 1) and one per (head, query, key) ([Hq, Nq, Nk]); with a
/// softcap attribute.
ModifierCase relativeBias() {
  ModifierCase c;
  c.name = "relative_bias_tables_softcap";
  c.problem = problem(17, 33, 3, 1);
  c.problem.scale = 0.3f;
  // The softcap applies to the modified score.
  c.problem.softcap = 4.0f;
  HostTensor rel = randomTensor({17 + 33 - 1}, 1.0, 11);
  HostTensor full = randomTensor({3, 17, 33}, 0.5, 12);
  c.captures = {{rel}, {full}};
  c.scoreMod = R"(
      %c16 = arith.constant 16 : index
      %d = arith.subi %j, %i : index
      %at = arith.addi %d, %c16 : index
      %rb = tensor.extract %cap0[%at] : tensor<49xf32>
      %fb = tensor.extract %cap1[%h, %i, %j] : tensor<3x17x33xf32>
      %x = arith.addf %s, %rb : f32
      %r = arith.addf %x, %fb : f32
      fa.yield %r : f32)";
  c.score = [rel, full](double s, int64_t, int64_t h, int64_t i, int64_t j) {
    return s + rel.data[j - i + 16] + full.at({h, i, j});
  };
  return c;
}

/// Documents of 7, 10 and 12 tokens packed into one sequence, causal
/// within each; the ids are an i32 capture.
ModifierCase documentMask() {
  ModifierCase c;
  c.name = "document_causal";
  c.problem = problem(29, 29, 2, 2);
  c.problem.causal = true;
  HostTensor doc(std::vector<int64_t>{29});
  for (int64_t t = 0; t < 29; ++t)
    doc.data[t] = t < 7 ? 0 : t < 17 ? 1 : 2;
  c.captures = {{doc, /*ints=*/true}};
  c.maskMod = R"(
      %di = tensor.extract %cap0[%i] : tensor<29xi32>
      %dj = tensor.extract %cap0[%j] : tensor<29xi32>
      %same = arith.cmpi eq, %di, %dj : i32
      fa.yield %same : i1)";
  c.mask = [doc](int64_t, int64_t, int64_t i, int64_t j) {
    return doc.data[i] == doc.data[j];
  };
  return c;
}

/// Prefix-LM: every query sees the first 10 keys, the rest causally.
ModifierCase prefixLM() {
  ModifierCase c;
  c.name = "prefix_lm";
  c.problem = problem(33, 33, 2, 1);
  c.maskMod = R"(
      %prefix = arith.constant 10 : index
      %in = arith.cmpi ult, %j, %prefix : index
      %causal = arith.cmpi ule, %j, %i : index
      %v = arith.ori %in, %causal : i1
      fa.yield %v : i1)";
  c.mask = [](int64_t, int64_t, int64_t i, int64_t j) {
    return j < 10 || j <= i;
  };
  return c;
}

/// Rows that see no key (query i with i mod 4 = 1, and every row of head 1
/// in batch 1) give out = 0 and lse = +inf; with a score_mod too.
ModifierCase emptyRows() {
  ModifierCase c;
  c.name = "empty_rows";
  c.problem = problem(13, 21, 2, 2, /*batch=*/2);
  c.problem.window = {{4, 2}};
  c.scoreMod = R"(
      %half = arith.constant 0.5 : f32
      %r = arith.mulf %s, %half : f32
      fa.yield %r : f32)";
  c.maskMod = R"(
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %rem = arith.remui %i, %c4 : index
      %hidden = arith.cmpi eq, %rem, %c1 : index
      %bh = arith.andi %b, %h : index
      %dead = arith.cmpi eq, %bh, %c1 : index
      %no = arith.ori %hidden, %dead : i1
      %true = arith.constant true
      %v = arith.xori %no, %true : i1
      fa.yield %v : i1)";
  c.score = [](double s, int64_t, int64_t, int64_t, int64_t) {
    return s * 0.5;
  };
  c.mask = [](int64_t b, int64_t h, int64_t i, int64_t) {
    return i % 4 != 1 && !(b == 1 && h == 1);
  };
  return c;
}

class ModifierNumerics : public ::testing::TestWithParam<ModifierCase> {};

TEST_P(ModifierNumerics, MatchesFloat64) {
  const ModifierCase &c = GetParam();
  AttentionInputs in =
      makeRandomInputs(c.problem, std::hash<std::string>{}(c.name));
  auto got = runModifierCase(c, in);
  ASSERT_TRUE(!!got) << llvm::toString(got.takeError());
  ForwardResult want = float64WithModifiers(c, in);
  EXPECT_TRUE(allClose("out", got->out, want.out, 2e-5));
  EXPECT_TRUE(allClose("lse", got->lse, want.lse, 2e-5));
}

INSTANTIATE_TEST_SUITE_P(
    ReferenceCPU, ModifierNumerics,
    ::testing::Values(alibi(), alibiDynamic(), relativeBias(), documentMask(),
                      prefixLM(), emptyRows()),
    [](const ::testing::TestParamInfo<ModifierCase> &info) {
      return info.param.name;
    });

ModifierCase headBandMaskMod(bool deterministic);
ModifierCase documentsWithRanges(int64_t rows, bool causal, bool full = false);

/// Documents AND a causal conjunct in the mask_mod, no ranges: the band
/// bound comes from the readable conjunct (kv_idx <= q_idx), the document
/// compare only hides more.
ModifierCase documentCausalConjunct() {
  ModifierCase c = documentsWithRanges(16, /*causal=*/false, /*full=*/false);
  c.name = "document_causal_conjunct";
  c.keyRangeRows = c.queryRangeRows = 0;
  c.maskMod = R"(
      %di = tensor.extract %cap0[%b, %i] : tensor<2x150xi32>
      %dj = tensor.extract %cap0[%b, %j] : tensor<2x150xi32>
      %same = arith.cmpi eq, %di, %dj : i32
      %causal = arith.cmpi sle, %j, %i : index
      %v = arith.andi %same, %causal : i1
      fa.yield %v : i1)";
  MaskFn doc = c.mask;
  c.mask = [doc](int64_t b, int64_t h, int64_t i, int64_t j) {
    return doc(b, h, i, j) && j <= i;
  };
  return c;
}

/// A band the tiled pipelines bound without a scan (fa-specialize-masks'
/// band ranges): the key bounds linear in the row with slope 2 and 1, a
/// head term and a batch term (i - 40 - 3h <= j <= 2i - 30 + b), over
/// several 16 x 16 blocks, GQA, Nq != Nk; the first rows see no key.
ModifierCase linearBand() {
  ModifierCase c;
  c.name = "linear_band";
  c.problem = problem(70, 90, 4, 2, /*batch=*/2);
  c.maskMod = R"(
      %c0 = arith.constant 0 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c30 = arith.constant 30 : index
      %c40 = arith.constant 40 : index
      %i2 = arith.muli %c2, %i : index
      %hi0 = arith.subi %i2, %c30 : index
      %hi = arith.addi %hi0, %b : index
      %le = arith.cmpi sle, %j, %hi : index
      %h3 = arith.muli %h, %c3 : index
      %lo0 = arith.subi %i, %c40 : index
      %lo = arith.subi %lo0, %h3 : index
      %jn = arith.subi %j, %lo : index
      %ge = arith.cmpi sge, %jn, %c0 : index
      %v = arith.andi %le, %ge : i1
      fa.yield %v : i1)";
  c.mask = [](int64_t b, int64_t h, int64_t i, int64_t j) {
    return j <= 2 * i - 30 + b && j >= i - 40 - 3 * h;
  };
  return c;
}

/// The same cases through the tiled pipeline: the modifiers applied per
/// tile at global positions, against float64 (the online softmax's
/// rescaling and exp2 cost a little more than the reference's rounding).
class TiledModifierNumerics : public ::testing::TestWithParam<ModifierCase> {};

TEST_P(TiledModifierNumerics, MatchesFloat64) {
  const ModifierCase &c = GetParam();
  AttentionInputs in =
      makeRandomInputs(c.problem, std::hash<std::string>{}(c.name));
  auto got = runModifierCase(c, in, tiledModifierPipeline());
  ASSERT_TRUE(!!got) << llvm::toString(got.takeError());
  ForwardResult want = float64WithModifiers(c, in);
  EXPECT_TRUE(allClose("out", got->out, want.out, 5e-5));
  EXPECT_TRUE(allClose("lse", got->lse, want.lse, 5e-5));
}

INSTANTIATE_TEST_SUITE_P(
    TiledCPU, TiledModifierNumerics,
    ::testing::Values(alibi(), alibiDynamic(), relativeBias(), documentMask(),
                      prefixLM(), emptyRows(), linearBand(),
                      headBandMaskMod(false), documentCausalConjunct()),
    [](const ::testing::TestParamInfo<ModifierCase> &info) {
      return info.param.name;
    });

//===----------------------------------------------------------------------===//
// The backward: the score_mod's derivative from fa-differentiate-score-mod
//===----------------------------------------------------------------------===//

/// The gradients of sum(dout * out) by central differences of the float64
/// forward with the modifiers: independent of every formula of the
/// backward, the derivative of the score_mod included.
BackwardResult finiteDifferences(const ModifierCase &c,
                                 const AttentionInputs &in) {
  AttentionInputs x = in;
  auto loss = [&] { return lossOf(float64WithModifiers(c, x).out, x.dout); };
  BackwardResult g{HostTensor(in.q.shape), HostTensor(in.k.shape),
                   HostTensor(in.v.shape)};
  for (auto [t, grad] : {std::pair<HostTensor *, HostTensor *>{&x.q, &g.dq},
                         {&x.k, &g.dk},
                         {&x.v, &g.dv}}) {
    for (int64_t n = 0; n < t->numElements(); ++n) {
      double orig = t->data[n];
      double h = 1e-5 * std::max(1.0, std::abs(orig));
      t->data[n] = orig + h;
      double plus = loss();
      t->data[n] = orig - h;
      double minus = loss();
      t->data[n] = orig;
      grad->data[n] = (plus - minus) / (2 * h);
    }
  }
  return g;
}

/// Small problems (the differences cost two forwards per input element).
ModifierCase backwardAlibi() {
  ModifierCase c = alibi();
  c.name = "alibi_gqa_causal";
  c.problem = problem(9, 13, 4, 2);
  c.problem.causal = true;
  return c;
}

ModifierCase backwardAlibiDynamic() {
  ModifierCase c = backwardAlibi();
  c.name = "alibi_gqa_causal_dynamic";
  c.problem.shapes = ShapeKind::DynamicAll;
  return c;
}

/// A nonlinear score_mod under a softcap attribute: 3 tanh((s + bias) / 3)
/// + 0.1 s^2 with a relative bias table, and a document mask.
ModifierCase backwardNonlinear() {
  ModifierCase c;
  c.name = "tanh_square_bias_document_softcap";
  c.problem = problem(11, 11, 2, 1);
  c.problem.softcap = 5.0f;
  c.problem.scale = 0.4f;
  HostTensor rel = randomTensor({21}, 0.5, 21);
  HostTensor doc(std::vector<int64_t>{11});
  for (int64_t t = 0; t < 11; ++t)
    doc.data[t] = t < 4 ? 7 : 9;
  c.captures = {{rel}, {doc, /*ints=*/true}};
  c.scoreMod = R"(
      %c10 = arith.constant 10 : index
      %three = arith.constant 3.0 : f32
      %tenth = arith.constant 0.1 : f32
      %d = arith.subi %j, %i : index
      %at = arith.addi %d, %c10 : index
      %bias = tensor.extract %cap0[%at] : tensor<21xf32>
      %x = arith.addf %s, %bias : f32
      %y = arith.divf %x, %three : f32
      %t = math.tanh %y : f32
      %capped = arith.mulf %three, %t : f32
      %sq = arith.mulf %s, %s : f32
      %q = arith.mulf %tenth, %sq : f32
      %r = arith.addf %capped, %q : f32
      fa.yield %r : f32)";
  c.maskMod = R"(
      %di = tensor.extract %cap1[%i] : tensor<11xi32>
      %dj = tensor.extract %cap1[%j] : tensor<11xi32>
      %same = arith.cmpi eq, %di, %dj : i32
      fa.yield %same : i1)";
  c.score = [rel](double s, int64_t, int64_t, int64_t i, int64_t j) {
    return 3.0 * std::tanh((s + rel.data[j - i + 10]) / 3.0) + 0.1 * s * s;
  };
  c.mask = [doc](int64_t, int64_t, int64_t i, int64_t j) {
    return doc.data[i] == doc.data[j];
  };
  return c;
}

ModifierCase backwardEmptyRows() {
  ModifierCase c = emptyRows();
  c.problem = problem(7, 11, 2, 2, /*batch=*/2);
  c.problem.window = {{4, 2}};
  return c;
}

//===----------------------------------------------------------------------===//
// key_ranges: where a data-dependent mask's keys lie, given at run time
//===----------------------------------------------------------------------===//

/// Packed documents of a batch of 2 (ids per batch and token, different
/// boundaries per batch) as a mask_mod; per group of `rows` query rows the
/// keys of the documents its rows are in, from the ids, as a caller (the
/// Python package) computes them. `causal` adds the causal attribute. (A
/// document starts at row 24: with groups of 8 the second group of the
/// block [16, 32) needs keys past the first group's.) With `full`, 4
/// columns: also the keys of the group's document when all its rows are in
/// one (the mask_mod shows them to every row; the causal attribute still
/// applies).
ModifierCase documentsWithRanges(int64_t rows, bool causal, bool full) {
  ModifierCase c;
  c.name = "documents_rows" + std::to_string(rows) + (causal ? "_causal" : "") +
           (full ? "_full" : "");
  const int64_t n = 150;
  c.problem = problem(n, n, 4, 2, /*batch=*/2);
  c.problem.causal = causal;
  HostTensor doc(std::vector<int64_t>{2, n});
  const int64_t ends[2][4] = {{24, 61, 130, n}, {9, 100, 101, n}};
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0, d = 0; t < n; ++t) {
      while (t >= ends[b][d])
        ++d;
      doc.data[b * n + t] = d;
    }
  c.captures = {{doc, /*ints=*/true}};
  c.maskMod = R"(
      %di = tensor.extract %cap0[%b, %i] : tensor<2x150xi32>
      %dj = tensor.extract %cap0[%b, %j] : tensor<2x150xi32>
      %same = arith.cmpi eq, %di, %dj : i32
      fa.yield %same : i1)";
  c.mask = [doc](int64_t b, int64_t, int64_t i, int64_t j) {
    return doc.data[b * 150 + i] == doc.data[b * 150 + j];
  };
  int64_t groups = llvm::divideCeil(n, rows);
  const int64_t columns = full ? 4 : 2;
  HostTensor r(std::vector<int64_t>{2, 4, groups, columns});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t g = 0; g < groups; ++g) {
        int64_t lo = n, hi = 0;
        int64_t first = g * rows, last = std::min(n, (g + 1) * rows) - 1;
        for (int64_t i = first; i <= last; ++i)
          for (int64_t j = 0; j < n; ++j)
            if (c.mask(b, h, i, j) && (!causal || j <= i)) {
              lo = std::min(lo, j);
              hi = std::max(hi, j + 1);
            }
        double *at = &r.data[((b * 4 + h) * groups + g) * columns];
        at[0] = lo;
        at[1] = hi;
        if (!full)
          continue;
        int64_t d = doc.data[b * n + first];
        bool one = doc.data[b * n + last] == d;
        int64_t f0 = 0, f1 = 0;
        for (int64_t j = 0; one && j < n; ++j)
          if (doc.data[b * n + j] == d) {
            f0 = f1 == 0 ? j : f0;
            f1 = j + 1;
          }
        at[2] = f0;
        at[3] = f1;
      }
  c.keyRanges = {r, /*ints=*/true};
  c.keyRangeRows = rows;
  // The backward's: per kv head and group of `rows` keys, the queries of
  // its query heads (2 each) that see one of them.
  HostTensor qr(std::vector<int64_t>{2, 2, groups, 2});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t kvh = 0; kvh < 2; ++kvh)
      for (int64_t g = 0; g < groups; ++g) {
        int64_t lo = n, hi = 0;
        for (int64_t h = 2 * kvh; h < 2 * kvh + 2; ++h)
          for (int64_t j = g * rows; j < std::min(n, (g + 1) * rows); ++j)
            for (int64_t i = 0; i < n; ++i)
              if (c.mask(b, h, i, j) && (!causal || j <= i)) {
                lo = std::min(lo, i);
                hi = std::max(hi, i + 1);
              }
        double *at = &qr.data[((b * 2 + kvh) * groups + g) * 2];
        at[0] = lo < hi ? lo : 0;
        at[1] = lo < hi ? hi : 0;
      }
  c.queryRanges = {qr, /*ints=*/true};
  c.queryRangeRows = rows;
  return c;
}

::testing::AssertionResult
bitwiseEqual(const std::string &what, const HostTensor &a, const HostTensor &b);

class KeyRangesNumerics : public ::testing::TestWithParam<ModifierCase> {};

/// The tiled pipeline visits only the key blocks of the ranges: bitwise the
/// results without them (a block the mask hides whole leaves the state as
/// it was), and right against float64. Row groups smaller than, equal to
/// and not dividing the 16-row blocks.
TEST_P(KeyRangesNumerics, TiledEqualsWithoutRanges) {
  const ModifierCase &c = GetParam();
  AttentionInputs in =
      makeRandomInputs(c.problem, std::hash<std::string>{}(c.name));
  ModifierCase without = c;
  without.keyRangeRows = 0;
  auto want = runModifierCase(without, in, tiledModifierPipeline());
  ASSERT_TRUE(!!want) << llvm::toString(want.takeError());
  auto got = runModifierCase(c, in, tiledModifierPipeline());
  ASSERT_TRUE(!!got) << llvm::toString(got.takeError());
  EXPECT_TRUE(bitwiseEqual("out", got->out, want->out));
  EXPECT_TRUE(bitwiseEqual("lse", got->lse, want->lse));
  ForwardResult exact = float64WithModifiers(c, in);
  EXPECT_TRUE(allClose("out", got->out, exact.out, 2e-5));
  // The reference ignores the ranges.
  auto ref = runModifierCase(c, in);
  ASSERT_TRUE(!!ref) << llvm::toString(ref.takeError());
  EXPECT_TRUE(allClose("out", ref->out, exact.out, 2e-5));
}

/// That the tiled pipeline's out is not float64's for `c` (whose ranges
/// were made wrong): the pipeline read them.
void expectTiledDiffers(const ModifierCase &c) {
  AttentionInputs in =
      makeRandomInputs(c.problem, std::hash<std::string>{}(c.name));
  auto got = runModifierCase(c, in, tiledModifierPipeline());
  ASSERT_TRUE(!!got) << llvm::toString(got.takeError());
  ForwardResult exact = float64WithModifiers(c, in);
  EXPECT_FALSE(allClose("out", got->out, exact.out, 2e-5));
}

/// The fully visible ranges are read: claimed for every key, the tiled
/// results take keys of other documents.
TEST(KeyRangesNumerics, FullRangesDropTheMaskMod) {
  ModifierCase c = documentsWithRanges(16, /*causal=*/false, /*full=*/true);
  for (size_t n = 0; n < c.keyRanges.values.data.size(); n += 4) {
    c.keyRanges.values.data[n + 2] = 0;
    c.keyRanges.values.data[n + 3] = 150;
  }
  expectTiledDiffers(c);
}

/// The ranges are read: narrowed by one key block at the start of every
/// group, the tiled results lose keys (so the equality above is not the
/// ranges being ignored).
TEST(KeyRangesNumerics, NarrowerRangesDropKeys) {
  ModifierCase c = documentsWithRanges(16, /*causal=*/false);
  for (size_t n = 0; n < c.keyRanges.values.data.size(); n += 2)
    c.keyRanges.values.data[n] += 16;
  expectTiledDiffers(c);
}

/// The tiled backward visits, per key block, only the query blocks of its
/// query_ranges (and deterministic, per query block of dQ, only the key
/// blocks of its key_ranges): bitwise the gradients without them, and
/// right against the reference lowering (which ignores them).
class BackwardRangesNumerics
    : public ::testing::TestWithParam<std::tuple<ModifierCase, bool>> {};

/// The backward of `c` through the tiled pipeline, given the forward's out
/// and lse (float64's, out rounded to f32).
llvm::Expected<BackwardResult> tiledBackward(const ModifierCase &c,
                                             const AttentionInputs &in) {
  ForwardResult fwd = float64WithModifiers(c, in);
  for (double &x : fwd.out.data)
    x = roundTo(x, ElementType::F32);
  return runBackwardModifierCase(c, in, fwd, tiledModifierPipeline());
}

TEST_P(BackwardRangesNumerics, TiledEqualsWithoutRanges) {
  auto [base, deterministic] = GetParam();
  ModifierCase c = base;
  c.problem.deterministic = deterministic;
  AttentionInputs in =
      makeRandomInputs(c.problem, std::hash<std::string>{}(c.name));
  ModifierCase without = c;
  without.keyRangeRows = without.queryRangeRows = 0;
  auto want = tiledBackward(without, in);
  ASSERT_TRUE(!!want) << llvm::toString(want.takeError());
  auto got = tiledBackward(c, in);
  ASSERT_TRUE(!!got) << llvm::toString(got.takeError());
  EXPECT_TRUE(bitwiseEqual("dq", got->dq, want->dq));
  EXPECT_TRUE(bitwiseEqual("dk", got->dk, want->dk));
  EXPECT_TRUE(bitwiseEqual("dv", got->dv, want->dv));
  ForwardResult fwd = float64WithModifiers(c, in);
  for (double &x : fwd.out.data)
    x = roundTo(x, ElementType::F32);
  auto ref = runBackwardModifierCase(c, in, fwd);
  ASSERT_TRUE(!!ref) << llvm::toString(ref.takeError());
  EXPECT_TRUE(allClose("dq", got->dq, ref->dq, 1e-5));
  EXPECT_TRUE(allClose("dk", got->dk, ref->dk, 1e-5));
  EXPECT_TRUE(allClose("dv", got->dv, ref->dv, 1e-5));
}

/// The ranges are read: query ranges that drop the first query block of
/// every key group change dK / dV; key ranges that drop the first key
/// block of every query group change the deterministic dQ.
TEST(BackwardRangesNumerics, NarrowerRangesDropBlocks) {
  for (bool keys : {false, true}) {
    ModifierCase c = documentsWithRanges(16, /*causal=*/false);
    c.problem.deterministic = keys;
    Capture &r = keys ? c.keyRanges : c.queryRanges;
    for (size_t n = 0; n < r.values.data.size(); n += 2)
      r.values.data[n] += 16;
    AttentionInputs in =
        makeRandomInputs(c.problem, std::hash<std::string>{}(c.name));
    auto got = tiledBackward(c, in);
    ASSERT_TRUE(!!got) << llvm::toString(got.takeError());
    ModifierCase without = c;
    without.keyRangeRows = without.queryRangeRows = 0;
    auto want = tiledBackward(without, in);
    ASSERT_TRUE(!!want) << llvm::toString(want.takeError());
    if (keys) {
      EXPECT_FALSE(allClose("dq", got->dq, want->dq, 1e-5));
    } else {
      EXPECT_FALSE(allClose("dk", got->dk, want->dk, 1e-5));
      EXPECT_FALSE(allClose("dv", got->dv, want->dv, 1e-5));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    TiledCPU, BackwardRangesNumerics,
    ::testing::Combine(::testing::Values(documentsWithRanges(16, false),
                                         documentsWithRanges(8, true),
                                         documentsWithRanges(24, false, true),
                                         documentsWithRanges(64, true)),
                       ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<ModifierCase, bool>> &info) {
      return std::get<0>(info.param).name +
             (std::get<1>(info.param) ? "_deterministic" : "");
    });

INSTANTIATE_TEST_SUITE_P(
    TiledCPU, KeyRangesNumerics,
    ::testing::Values(
        documentsWithRanges(16, false), documentsWithRanges(8, false),
        documentsWithRanges(8, true), documentsWithRanges(24, false),
        documentsWithRanges(64, true), documentsWithRanges(16, false, true),
        documentsWithRanges(8, true, true),
        documentsWithRanges(24, false, true)),
    [](const ::testing::TestParamInfo<ModifierCase> &info) {
      return info.param.name;
    });

class BackwardModifierNumerics : public ::testing::TestWithParam<ModifierCase> {
};

/// The backward's test, through `pipeline`.
void checkBackwardModifierCase(const ModifierCase &c,
                               const PipelineBuilder &pipeline) {
  AttentionInputs in =
      makeRandomInputs(c.problem, std::hash<std::string>{}(c.name));
  // out and lse as the forward stores them (f32).
  ForwardResult fwd = float64WithModifiers(c, in);
  for (double &x : fwd.out.data)
    x = roundTo(x, ElementType::F32);
  auto got = runBackwardModifierCase(c, in, fwd, pipeline);
  ASSERT_TRUE(!!got) << llvm::toString(got.takeError());
  BackwardResult want = finiteDifferences(c, in);
  EXPECT_TRUE(allClose("dq", got->dq, want.dq, 1e-4));
  EXPECT_TRUE(allClose("dk", got->dk, want.dk, 1e-4));
  EXPECT_TRUE(allClose("dv", got->dv, want.dv, 1e-4));
}

TEST_P(BackwardModifierNumerics, MatchesFiniteDifferences) {
  checkBackwardModifierCase(GetParam(), mlir::fa::buildReferenceCPUPipeline);
}

/// Through the tiled pipeline: fa-differentiate-score-mod, then the
/// modifiers in every fa.attention_backward_step (16 x 16 tiles).
TEST_P(BackwardModifierNumerics, TiledMatchesFiniteDifferences) {
  checkBackwardModifierCase(GetParam(), tiledModifierPipeline());
}

/// A band mask_mod whose left bound depends on the query head, over more
/// than 8 blocks of 16 each way: the tiled backward bounds each key block's
/// query loop (and, deterministic, each query block's key loop) by a scan of
/// the mask_mod's block verdicts, over the group's heads. Blocks dropped
/// wrongly, or a range taken from one head only, change the gradients; the
/// reference lowering has no blocks.
ModifierCase headBandMaskMod(bool deterministic) {
  ModifierCase c;
  c.name = deterministic ? "head_band_deterministic" : "head_band";
  c.problem = problem(150, 170, 4, 2);
  c.problem.deterministic = deterministic;
  c.maskMod = R"(
      %off = arith.constant 20 : index
      %w0 = arith.constant 24 : index
      %w1 = arith.constant 40 : index
      %diag = arith.addi %i, %off : index
      %wh = arith.muli %h, %w1 : index
      %w = arith.addi %w0, %wh : index
      %lo = arith.subi %diag, %w : index
      %ge = arith.cmpi sge, %j, %lo : index
      %le = arith.cmpi sle, %j, %diag : index
      %v = arith.andi %ge, %le : i1
      fa.yield %v : i1)";
  c.mask = [](int64_t, int64_t h, int64_t i, int64_t j) {
    int64_t diag = i + 20;
    return j <= diag && j >= diag - (24 + 40 * h);
  };
  return c;
}

class TiledBackwardMaskModRange
    : public ::testing::TestWithParam<ModifierCase> {};

TEST_P(TiledBackwardMaskModRange, EqualsReference) {
  const ModifierCase &c = GetParam();
  AttentionInputs in =
      makeRandomInputs(c.problem, std::hash<std::string>{}(c.name));
  ForwardResult fwd = float64WithModifiers(c, in);
  for (double &x : fwd.out.data)
    x = roundTo(x, ElementType::F32);
  auto want = runBackwardModifierCase(c, in, fwd);
  ASSERT_TRUE(!!want) << llvm::toString(want.takeError());
  auto got = runBackwardModifierCase(c, in, fwd, tiledModifierPipeline());
  ASSERT_TRUE(!!got) << llvm::toString(got.takeError());
  EXPECT_TRUE(allClose("dq", got->dq, want->dq, 1e-5));
  EXPECT_TRUE(allClose("dk", got->dk, want->dk, 1e-5));
  EXPECT_TRUE(allClose("dv", got->dv, want->dv, 1e-5));
}

INSTANTIATE_TEST_SUITE_P(
    TiledCPU, TiledBackwardMaskModRange,
    ::testing::Values(headBandMaskMod(false), headBandMaskMod(true),
                      linearBand(), documentCausalConjunct()),
    [](const ::testing::TestParamInfo<ModifierCase> &info) {
      return info.param.name;
    });

INSTANTIATE_TEST_SUITE_P(
    ReferenceCPU, BackwardModifierNumerics,
    ::testing::Values(backwardAlibi(), backwardAlibiDynamic(),
                      backwardNonlinear(), backwardEmptyRows()),
    [](const ::testing::TestParamInfo<ModifierCase> &info) {
      return info.param.name;
    });

//===----------------------------------------------------------------------===//
// The built-in masks and softcap, as modifiers: bitwise the same
//===----------------------------------------------------------------------===//

/// A modifier case and the problem whose attributes it stands for.
struct BuiltinCase {
  ModifierCase modified;
  AttentionProblem builtin;
};

void PrintTo(const BuiltinCase &c, std::ostream *os) { *os << c.modified.name; }

/// The bottom-right window i + off - left <= j <= i + off + right
/// (off = Nk - Nq), as index arithmetic; a negative side is unbounded.
std::string windowMaskMod(int64_t off, int64_t left, int64_t right) {
  std::string s = llvm::formatv(R"(
      %off = arith.constant {0} : index
      %diag = arith.addi %i, %off : index
      %true = arith.constant true)",
                                off);
  std::string result = "%true";
  if (left >= 0) {
    s += llvm::formatv(R"(
      %left = arith.constant {0} : index
      %lo = arith.subi %diag, %left : index
      %ge = arith.cmpi sge, %j, %lo : index)",
                       left);
    result = "%ge";
  }
  if (right >= 0) {
    s += llvm::formatv(R"(
      %right = arith.constant {0} : index
      %hi = arith.addi %diag, %right : index
      %le = arith.cmpi sle, %j, %hi : index)",
                       right);
    if (result == "%ge") {
      s += R"(
      %both = arith.andi %ge, %le : i1)";
      result = "%both";
    } else {
      result = "%le";
    }
  }
  return s + "\n      fa.yield " + result + " : i1";
}

BuiltinCase causalAsMaskMod() {
  BuiltinCase c;
  c.builtin = problem(17, 33, 4, 2);
  c.builtin.causal = true;
  c.modified.name = "causal";
  c.modified.problem = problem(17, 33, 4, 2);
  c.modified.maskMod = windowMaskMod(33 - 17, -1, 0);
  return c;
}

BuiltinCase windowAsMaskMod() {
  BuiltinCase c;
  c.builtin = problem(33, 19, 2, 1, /*batch=*/2);
  c.builtin.window = {{5, 3}};
  c.builtin.scale = 0.4f;
  c.modified.name = "window";
  c.modified.problem = c.builtin;
  c.modified.problem.window.reset();
  c.modified.maskMod = windowMaskMod(19 - 33, 5, 3);
  return c;
}

BuiltinCase softcapAsScoreMod() {
  BuiltinCase c;
  c.builtin = problem(17, 33, 2, 2);
  c.builtin.softcap = 2.5f;
  c.builtin.scale = 0.7f;
  c.builtin.causal = true;
  c.modified.name = "softcap";
  c.modified.problem = c.builtin;
  c.modified.problem.softcap.reset();
  c.modified.scoreMod = R"(
      %cap = arith.constant 2.500000e+00 : f32
      %x = arith.divf %s, %cap : f32
      %t = math.tanh %x : f32
      %r = arith.mulf %cap, %t : f32
      fa.yield %r : f32)";
  return c;
}

::testing::AssertionResult bitwiseEqual(const std::string &what,
                                        const HostTensor &a,
                                        const HostTensor &b) {
  if (a.shape != b.shape)
    return ::testing::AssertionFailure() << what << ": shapes differ";
  for (int64_t n = 0; n < a.numElements(); ++n)
    if (!(a.data[n] == b.data[n]))
      return ::testing::AssertionFailure()
             << what << "[" << n << "]: " << a.data[n]
             << " (modifier) != " << b.data[n] << " (attribute)";
  return ::testing::AssertionSuccess();
}

class BuiltinAsModifier : public ::testing::TestWithParam<BuiltinCase> {};

TEST_P(BuiltinAsModifier, BitwiseEqualToAttribute) {
  const BuiltinCase &c = GetParam();
  AttentionInputs in =
      makeRandomInputs(c.builtin, std::hash<std::string>{}(c.modified.name));
  auto jit = AttentionJit::compile(c.builtin, AttentionKind::Forward,
                                   mlir::fa::buildReferenceCPUPipeline);
  ASSERT_TRUE(!!jit) << llvm::toString(jit.takeError());
  auto want = (*jit)->forward(in);
  ASSERT_TRUE(!!want) << llvm::toString(want.takeError());
  auto got = runModifierCase(c.modified, in);
  ASSERT_TRUE(!!got) << llvm::toString(got.takeError());
  EXPECT_TRUE(bitwiseEqual("out", got->out, want->out));
  EXPECT_TRUE(bitwiseEqual("lse", got->lse, want->lse));
  // And both are right: the attribute form against float64.
  ForwardResult exact = float64Forward(c.builtin, in.q, in.k, in.v);
  EXPECT_TRUE(allClose("out", want->out, exact.out, 2e-5));
}

/// Through the tiled pipeline: the built-in mask's blocks are specialized
/// (skipped, unmasked interior) and the modifier's are not, which must not
/// change a bit of the causal and window results (a hidden block leaves
/// the state exactly as it was); the softcap written as a score_mod rounds
/// differently from the attribute's fused form (scale / softcap folded).
TEST_P(BuiltinAsModifier, TiledEqualToAttribute) {
  const BuiltinCase &c = GetParam();
  AttentionInputs in =
      makeRandomInputs(c.builtin, std::hash<std::string>{}(c.modified.name));
  auto jit = AttentionJit::compile(c.builtin, AttentionKind::Forward,
                                   tiledModifierPipeline());
  ASSERT_TRUE(!!jit) << llvm::toString(jit.takeError());
  auto want = (*jit)->forward(in);
  ASSERT_TRUE(!!want) << llvm::toString(want.takeError());
  auto got = runModifierCase(c.modified, in, tiledModifierPipeline());
  ASSERT_TRUE(!!got) << llvm::toString(got.takeError());
  if (c.builtin.softcap) {
    EXPECT_TRUE(allClose("out", got->out, want->out, 2e-5));
    EXPECT_TRUE(allClose("lse", got->lse, want->lse, 2e-5));
  } else {
    EXPECT_TRUE(bitwiseEqual("out", got->out, want->out));
    EXPECT_TRUE(bitwiseEqual("lse", got->lse, want->lse));
  }
}

INSTANTIATE_TEST_SUITE_P(ReferenceCPU, BuiltinAsModifier,
                         ::testing::Values(causalAsMaskMod(), windowAsMaskMod(),
                                           softcapAsScoreMod()),
                         [](const ::testing::TestParamInfo<BuiltinCase> &info) {
                           return info.param.modified.name;
                         });

} // namespace
