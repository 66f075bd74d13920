//===- SequenceFormsNumericsTest.cpp - Varlen and paged attention, CPU ----===//
//
// fa.attention_varlen and its backward (packed sequences of different
// lengths) and
// fa.attention_paged (keys and values in a paged cache) through the
// reference and the tiled CPU pipelines, against the float64 implementation
// applied to each sequence on its own: odd lengths, empty and one-token
// sequences, partly filled pages in shuffled order, causal and windowed
// masks aligned per sequence, GQA, softcap, f32 and bf16.
//
//===----------------------------------------------------------------------===//

#include "AttentionHarness.h"
#include "TiledCase.h"

#include "fa/Pipelines/Pipelines.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <numeric>
#include <random>

using namespace mlir::fa::numerics;

namespace {

/// The attributes every case shares with fa.attention (constants only).
struct Attributes {
  bool causal = false;
  std::optional<std::array<int64_t, 2>> window;
  std::optional<float> softcap;
  ElementType type = ElementType::F32;
  int64_t headsQ = 1, headsKV = 1, headDim = 32, valueHeadDim = 32;

  /// The problem of one sequence of `nq` queries and `nk` keys.
  AttentionProblem problem(int64_t nq, int64_t nk) const {
    AttentionProblem p;
    p.headsQ = headsQ;
    p.headsKV = headsKV;
    p.seqQ = nq;
    p.seqK = nk;
    p.headDim = headDim;
    p.valueHeadDim = valueHeadDim;
    p.elementType = type;
    p.causal = causal;
    p.window = window;
    p.softcap = softcap;
    return p;
  }

  /// ` mask<...> softcap ...` in the ops' assembly.
  std::string text() const {
    std::string s;
    llvm::raw_string_ostream os(s);
    auto side = [](int64_t w) {
      return w < 0 ? std::string("inf") : std::to_string(w);
    };
    if (window)
      os << " mask<window " << side((*window)[0]) << ", "
         << (causal ? std::string("0") : side((*window)[1])) << ">";
    else if (causal)
      os << " mask<causal>";
    if (softcap)
      os << " softcap " << llvm::formatv("{0:e9}", double(*softcap));
    return s;
  }

  const char *elt() const {
    return type == ElementType::F32   ? "f32"
           : type == ElementType::F16 ? "f16"
                                      : "bf16";
  }
};

/// `n` normal values (never zero) rounded to `type`.
HostTensor randomTensor(std::vector<int64_t> shape, double stddev,
                        ElementType type, std::mt19937_64 &rng) {
  HostTensor t(std::move(shape));
  std::normal_distribution<double> dist(0.0, stddev);
  for (double &x : t.data) {
    do
      x = roundTo(dist(rng), type);
    while (x == 0.0);
  }
  return t;
}

/// Rows [start, start + len) of every head of `t` ([H, T, D] or, with
/// `batch`, [B, H, N, D] at batch `batch`) as a [1, H, len, D] tensor.
HostTensor rows(const HostTensor &t, int64_t start, int64_t len,
                std::optional<int64_t> batch = std::nullopt) {
  size_t r = t.shape.size();
  int64_t heads = t.shape[r - 3], d = t.shape[r - 1];
  HostTensor out(std::vector<int64_t>{1, heads, len, d});
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < len; ++i)
      for (int64_t e = 0; e < d; ++e)
        out.at({0, h, i, e}) =
            batch ? t.at({*batch, h, start + i, e}) : t.at({h, start + i, e});
  return out;
}

/// Writes a [1, H, len, X] (or [1, H, len]) result into rows [start, ...)
/// of `dst` ([H, T, X] / [H, T], or [B, H, N, X] / [B, H, N] at `batch`).
void place(const HostTensor &src, HostTensor &dst, int64_t start,
           std::optional<int64_t> batch = std::nullopt) {
  bool hasCols = src.shape.size() == 4;
  int64_t heads = src.shape[1], len = src.shape[2],
          cols = hasCols ? src.shape[3] : 1;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < len; ++i)
      for (int64_t e = 0; e < cols; ++e) {
        double x = hasCols ? src.at({0, h, i, e}) : src.at({0, h, i});
        if (batch && hasCols)
          dst.at({*batch, h, start + i, e}) = x;
        else if (batch)
          dst.at({*batch, h, start + i}) = x;
        else if (hasCols)
          dst.at({h, start + i, e}) = x;
        else
          dst.at({h, start + i}) = x;
      }
}

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

/// The pipelines every case runs: the reference, and the tiled one with
/// the case's blocks.
std::vector<std::pair<std::string, PipelineBuilder>>
pipelines(int64_t blockQ, int64_t blockKV) {
  return {{"reference", mlir::fa::buildReferenceCPUPipeline},
          {"tiled", tiledPipeline(blockQ, blockKV)}};
}

void expectClose(const std::string &what, const ForwardResult &got,
                 const ForwardResult &want, ElementType type) {
  double tol = tiledTolerance(type);
  EXPECT_TRUE(allClose(what + " out", got.out, want.out, tol));
  EXPECT_TRUE(allClose(what + " lse", got.lse, want.lse, tol));
}

/// A memref argument of the generated function: its name and the body of
/// its shaped type.
struct Arg {
  std::string name, body;
};

/// `func.func @attention` over the memrefs `ins`, then `outs`, then the
/// index arguments `indices`: applies `op` (its name, operands and
/// attributes; the inputs as tensors are `%<in>_t`, the index arguments
/// themselves) and stores its results into `outs`.
std::string wrapInFunction(llvm::ArrayRef<Arg> ins, llvm::ArrayRef<Arg> outs,
                           llvm::ArrayRef<std::string> indices,
                           const std::string &op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "func.func @attention(";
  llvm::ListSeparator args;
  for (llvm::ArrayRef<Arg> group : {ins, outs})
    for (const Arg &a : group)
      os << args << "%" << a.name << ": memref<" << a.body << ">";
  for (const std::string &i : indices)
    os << args << "%" << i << ": index";
  os << ") attributes {llvm.emit_c_interface} {\n";
  for (const Arg &a : ins)
    os << "  %" << a.name << "_t = bufferization.to_tensor %" << a.name
       << " restrict : memref<" << a.body << "> to tensor<" << a.body << ">\n";
  os << "  ";
  llvm::interleaveComma(outs, os,
                        [&](const Arg &a) { os << "%" << a.name << "_t"; });
  os << " = " << op << " : (";
  llvm::ListSeparator types;
  for (const Arg &a : ins)
    os << types << "tensor<" << a.body << ">";
  for (size_t i = 0; i < indices.size(); ++i)
    os << types << "index";
  os << ") -> (";
  llvm::interleaveComma(
      outs, os, [&](const Arg &a) { os << "tensor<" << a.body << ">"; });
  os << ")\n";
  for (const Arg &a : outs)
    os << "  bufferization.materialize_in_destination %" << a.name
       << "_t in restrict writable %" << a.name << " : (tensor<" << a.body
       << ">, memref<" << a.body << ">) -> ()\n";
  os << "  return\n}\n";
  return s;
}

/// Calls the generated function with the memref descriptors (in its
/// argument order) and the index arguments.
llvm::Error invoke(mlir::ExecutionEngine &engine,
                   std::vector<void *> descriptors,
                   std::vector<int64_t> indices = {}) {
  std::vector<void *> packed;
  for (void *&d : descriptors)
    packed.push_back(&d);
  for (int64_t &i : indices)
    packed.push_back(&i);
  return engine.invokePacked("_mlir_ciface_attention", packed);
}

//===----------------------------------------------------------------------===//
// fa.attention_varlen
//===----------------------------------------------------------------------===//

struct VarlenCase {
  Attributes attrs;
  /// Query and key counts of each sequence.
  std::vector<int64_t> seqQ, seqK;
  int64_t blockQ = 16, blockKV = 16;
  std::string name;
  /// Rows of no sequence before the first and after the last (the offsets
  /// start at `pad`): the backward must give them zero gradients.
  int64_t pad = 0;
};

void PrintTo(const VarlenCase &c, std::ostream *os) { *os << c.name; }

/// The shaped-type bodies of a packed case's tensors (token counts dynamic,
/// as a serving engine's are).
struct PackedTypes {
  std::string q, k, v, o, l;
  explicit PackedTypes(const Attributes &a) {
    auto t = [&](int64_t heads, int64_t d) {
      return std::to_string(heads) + "x?x" + std::to_string(d) + "x" + a.elt();
    };
    q = t(a.headsQ, a.headDim);
    k = t(a.headsKV, a.headDim);
    v = t(a.headsKV, a.valueHeadDim);
    o = t(a.headsQ, a.valueHeadDim);
    l = std::to_string(a.headsQ) + "x?xf32";
  }
};

std::string varlenModule(const VarlenCase &c) {
  PackedTypes t(c.attrs);
  return wrapInFunction({{"q", t.q},
                         {"k", t.k},
                         {"v", t.v},
                         {"cu_q", "?xi32"},
                         {"cu_k", "?xi32"}},
                        {{"out", t.o}, {"lse", t.l}}, {"max_q"},
                        "fa.attention_varlen %q_t, %k_t, %v_t "
                        "seqlens(%cu_q_t, %cu_k_t) max_seqlen_q(%max_q)" +
                            c.attrs.text());
}

/// The offsets of a packed case: [pad, pad + len_0, ...], with `pad` rows
/// of no sequence after the last.
struct Offsets {
  std::vector<int32_t> q, k;
  int64_t maxQ = 0, maxK = 0, pad = 0;
  explicit Offsets(const VarlenCase &c) : pad(c.pad) {
    q.push_back(pad);
    k.push_back(pad);
    for (size_t b = 0; b < c.seqQ.size(); ++b) {
      q.push_back(q.back() + c.seqQ[b]);
      k.push_back(k.back() + c.seqK[b]);
      maxQ = std::max(maxQ, c.seqQ[b]);
      maxK = std::max(maxK, c.seqK[b]);
    }
  }
  int64_t tq() const { return q.back() + pad; }
  int64_t tk() const { return k.back() + pad; }
};

/// Sets the rows of no sequence of an [H, T, ...] tensor to `value`.
void fillOrphanRows(HostTensor &t, const std::vector<int32_t> &cu,
                    double value) {
  int64_t heads = t.shape[0], total = t.shape[1];
  int64_t width = t.shape.size() > 2 ? t.shape[2] : 1;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t r = 0; r < total; ++r)
      if (r < cu.front() || r >= cu.back())
        for (int64_t x = 0; x < width; ++x)
          t.data[(h * total + r) * width + x] = value;
}

class VarlenNumerics : public ::testing::TestWithParam<VarlenCase> {};

TEST_P(VarlenNumerics, EachSequenceMatchesFloat64) {
  const VarlenCase &c = GetParam();
  const Attributes &a = c.attrs;
  ASSERT_EQ(c.seqQ.size(), c.seqK.size());
  Offsets cu(c);
  const std::vector<int32_t> &cuQ = cu.q, &cuK = cu.k;
  int64_t tq = cu.tq(), tk = cu.tk();
  std::mt19937_64 rng(std::hash<std::string>{}(c.name));
  HostTensor q = randomTensor({a.headsQ, tq, a.headDim}, 1.5, a.type, rng);
  HostTensor k = randomTensor({a.headsKV, tk, a.headDim}, 1.5, a.type, rng);
  HostTensor v =
      randomTensor({a.headsKV, tk, a.valueHeadDim}, 1.0, a.type, rng);

  // Each sequence on its own, in float64.
  ForwardResult want{
      HostTensor(std::vector<int64_t>{a.headsQ, tq, a.valueHeadDim}),
      HostTensor(std::vector<int64_t>{a.headsQ, tq})};
  for (size_t b = 0; b < c.seqQ.size(); ++b) {
    AttentionProblem p = a.problem(c.seqQ[b], c.seqK[b]);
    ForwardResult seq =
        float64Forward(p, rows(q, cuQ[b], c.seqQ[b]),
                       rows(k, cuK[b], c.seqK[b]), rows(v, cuK[b], c.seqK[b]));
    place(seq.out, want.out, cuQ[b]);
    place(seq.lse, want.lse, cuQ[b]);
  }

  for (auto &[what, pipeline] : pipelines(c.blockQ, c.blockKV)) {
    SCOPED_TRACE(what);
    auto engine = compileModule(varlenModule(c), pipeline, c.name);
    ASSERT_TRUE(!!engine) << llvm::toString(engine.takeError());
    KernelBuffer qb("q", a.type, q.shape), kb("k", a.type, k.shape),
        vb("v", a.type, v.shape),
        ob("out", a.type, {a.headsQ, tq, a.valueHeadDim}),
        lb("lse", ElementType::F32, {a.headsQ, tq});
    qb.write(q);
    kb.write(k);
    vb.write(v);
    ob.poison();
    lb.poison();
    I32Buffer cq(cuQ, {int64_t(cuQ.size())}), ck(cuK, {int64_t(cuK.size())});
    std::vector<void *> descriptors = {qb.descriptorPtr(), kb.descriptorPtr(),
                                       vb.descriptorPtr(), cq.descriptorPtr(),
                                       ck.descriptorPtr(), ob.descriptorPtr(),
                                       lb.descriptorPtr()};
    llvm::Error err = invoke(**engine, descriptors, {cu.maxQ});
    ASSERT_FALSE(!!err) << llvm::toString(std::move(err));
    // Rows of no sequence are unspecified (NaN, say): not compared.
    auto out = ob.read(/*allowNaN=*/c.pad > 0);
    ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
    auto lse = lb.read(/*allowNaN=*/c.pad > 0);
    ASSERT_TRUE(!!lse) << llvm::toString(lse.takeError());
    fillOrphanRows(*out, cuQ, 0.0);
    fillOrphanRows(*lse, cuQ, 0.0);
    expectClose(what, ForwardResult{*out, *lse}, want, a.type);
  }
}

std::string varlenBackwardModule(const VarlenCase &c) {
  PackedTypes t(c.attrs);
  return wrapInFunction(
      {{"q", t.q},
       {"k", t.k},
       {"v", t.v},
       {"out", t.o},
       {"lse", t.l},
       {"dout", t.o},
       {"cu_q", "?xi32"},
       {"cu_k", "?xi32"}},
      {{"dq", t.q}, {"dk", t.k}, {"dv", t.v}}, {"max_q", "max_k"},
      "fa.attention_varlen_backward %q_t, %k_t, %v_t, %out_t, %lse_t, "
      "%dout_t seqlens(%cu_q_t, %cu_k_t) max_seqlen_q(%max_q) "
      "max_seqlen_k(%max_k)" +
          c.attrs.text());
}

/// The gradients of each sequence on its own, in float64, against both
/// pipelines; out and lse are the float64 forward's (rounded as a kernel
/// would store them).
TEST_P(VarlenNumerics, BackwardOfEachSequenceMatchesFloat64) {
  const VarlenCase &c = GetParam();
  const Attributes &a = c.attrs;
  Offsets cu(c);
  const std::vector<int32_t> &cuQ = cu.q, &cuK = cu.k;
  int64_t tq = cu.tq(), tk = cu.tk();
  std::mt19937_64 rng(std::hash<std::string>{}(c.name + "_backward"));
  HostTensor q = randomTensor({a.headsQ, tq, a.headDim}, 1.5, a.type, rng);
  HostTensor k = randomTensor({a.headsKV, tk, a.headDim}, 1.5, a.type, rng);
  HostTensor v =
      randomTensor({a.headsKV, tk, a.valueHeadDim}, 1.0, a.type, rng);
  HostTensor dout =
      randomTensor({a.headsQ, tq, a.valueHeadDim}, 1.0, a.type, rng);
  HostTensor out(std::vector<int64_t>{a.headsQ, tq, a.valueHeadDim}),
      lse(std::vector<int64_t>{a.headsQ, tq});
  BackwardResult want{HostTensor(q.shape), HostTensor(k.shape),
                      HostTensor(v.shape)};
  for (size_t b = 0; b < c.seqQ.size(); ++b) {
    AttentionProblem p = a.problem(c.seqQ[b], c.seqK[b]);
    HostTensor qs = rows(q, cuQ[b], c.seqQ[b]), ks = rows(k, cuK[b], c.seqK[b]),
               vs = rows(v, cuK[b], c.seqK[b]);
    ForwardResult f = float64Forward(p, qs, ks, vs);
    for (double &x : f.out.data)
      x = roundTo(x, a.type);
    place(f.out, out, cuQ[b]);
    place(f.lse, lse, cuQ[b]);
    BackwardResult g =
        float64Backward(p, qs, ks, vs, rows(dout, cuQ[b], c.seqQ[b]));
    place(g.dq, want.dq, cuQ[b]);
    place(g.dk, want.dk, cuK[b]);
    place(g.dv, want.dv, cuK[b]);
  }
  // Rows of no sequence hold NaN in out and lse: reading them would show.
  fillOrphanRows(out, cuQ, std::numeric_limits<double>::quiet_NaN());
  fillOrphanRows(lse, cuQ, std::numeric_limits<double>::quiet_NaN());
  // Rows of a sequence without keys have lse = +inf; the packed lse tensor
  // holds exactly what the forward stores.
  for (auto &[what, pipeline] : pipelines(c.blockQ, c.blockKV)) {
    SCOPED_TRACE(what);
    auto engine = compileModule(varlenBackwardModule(c), pipeline, c.name);
    ASSERT_TRUE(!!engine) << llvm::toString(engine.takeError());
    std::vector<KernelBuffer> buffers;
    buffers.emplace_back("q", a.type, q.shape);
    buffers.emplace_back("k", a.type, k.shape);
    buffers.emplace_back("v", a.type, v.shape);
    buffers.emplace_back("out", a.type, out.shape);
    buffers.emplace_back("lse", ElementType::F32, lse.shape);
    buffers.emplace_back("dout", a.type, dout.shape);
    const HostTensor *inputs[] = {&q, &k, &v, &out, &lse, &dout};
    for (auto [buffer, t] : llvm::zip(buffers, inputs))
      buffer.write(*t);
    for (auto [name, shape] :
         {std::pair<const char *, std::vector<int64_t>>{"dq", q.shape},
          {"dk", k.shape},
          {"dv", v.shape}}) {
      buffers.emplace_back(name, a.type, shape);
      buffers.back().poison();
    }
    I32Buffer cq(cuQ, {int64_t(cuQ.size())}), ck(cuK, {int64_t(cuK.size())});
    std::vector<void *> descriptors;
    for (int i = 0; i < 6; ++i)
      descriptors.push_back(buffers[i].descriptorPtr());
    descriptors.push_back(cq.descriptorPtr());
    descriptors.push_back(ck.descriptorPtr());
    for (int i = 6; i < 9; ++i)
      descriptors.push_back(buffers[i].descriptorPtr());
    llvm::Error err = invoke(**engine, descriptors, {cu.maxQ, cu.maxK});
    ASSERT_FALSE(!!err) << llvm::toString(std::move(err));
    double tol = tiledTolerance(a.type);
    const HostTensor *expected[] = {&want.dq, &want.dk, &want.dv};
    const char *names[] = {"dq", "dk", "dv"};
    for (int i = 0; i < 3; ++i) {
      auto got = buffers[6 + i].read();
      ASSERT_TRUE(!!got) << llvm::toString(got.takeError());
      EXPECT_TRUE(allClose(what + " " + names[i], *got, *expected[i], tol));
    }
  }
}

/// Attributes, fluently.
struct A {
  Attributes a;
  A(int64_t d) { a.headDim = a.valueHeadDim = d; }
  A &heads(int64_t hq, int64_t hkv) {
    a.headsQ = hq;
    a.headsKV = hkv;
    return *this;
  }
  A &causal() {
    a.causal = true;
    return *this;
  }
  A &window(int64_t left, int64_t right) {
    a.window = {{left, right}};
    return *this;
  }
  A &softcap(float cap) {
    a.softcap = cap;
    return *this;
  }
  A &dv(int64_t dv) {
    a.valueHeadDim = dv;
    return *this;
  }
  A &type(ElementType t) {
    a.type = t;
    return *this;
  }
  operator Attributes() const { return a; }
};

std::vector<VarlenCase> varlenCases() {
  return {
      // Odd lengths, a one-token sequence, an empty one, Nq != Nk.
      {A(32), {17, 1, 0, 40}, {33, 5, 7, 40}, 16, 16, "mixed"},
      // Causal per sequence, bottom-right aligned (Nq < Nk: decoding-like
      // rows; Nq > Nk: rows that see nothing), empty key sets.
      {A(32).causal(), {5, 33, 16, 3}, {37, 20, 16, 0}, 16, 16, "causal"},
      {A(64).causal().heads(4, 2),
       {1, 48, 17},
       {100, 48, 30},
       32,
       16,
       "causal_gqa"},
      // Sliding windows narrower than a block, both sides, per sequence.
      {A(32).window(6, 3), {40, 9}, {50, 9}, 16, 32, "window"},
      {A(32).causal().window(10, 0).heads(3, 1),
       {33, 20},
       {33, 64},
       16,
       16,
       "causal_window_mqa"},
      // Softcap, Dv != D, bf16.
      {A(64).softcap(4.0f).dv(32), {23, 9}, {31, 70}, 16, 16, "softcap_dv"},
      // Every row sees two keys or more: a row with one visible key has
      // dq = 0 exactly in float64, which a kernel reading its bf16 out
      // (delta = rowsum(dout * out)) only approaches.
      {A(64).causal().type(ElementType::BF16).heads(2, 1),
       {31, 64, 2},
       {40, 80, 5},
       32,
       32,
       "bf16_causal"},
      // One sequence: the same as fa.attention.
      {A(128), {64}, {64}, 64, 64, "single"},
      // Rows of no sequence before and after the sequences (zero
      // gradients), GQA, causal, a key set longer than any query set.
      {A(32).causal().heads(4, 2),
       {9, 0, 21},
       {12, 3, 50},
       16,
       16,
       "orphan_rows",
       5},
  };
}

INSTANTIATE_TEST_SUITE_P(Cases, VarlenNumerics,
                         ::testing::ValuesIn(varlenCases()),
                         [](const ::testing::TestParamInfo<VarlenCase> &info) {
                           return info.param.name;
                         });

//===----------------------------------------------------------------------===//
// fa.attention_paged
//===----------------------------------------------------------------------===//

struct PagedCase {
  Attributes attrs;
  int64_t seqQ;
  /// Keys of each batch in the cache.
  std::vector<int64_t> cacheLens;
  int64_t pageSize;
  int64_t blockQ = 16, blockKV = 16;
  std::string name;
};

void PrintTo(const PagedCase &c, std::ostream *os) { *os << c.name; }

std::string pagedModule(const PagedCase &c) {
  const Attributes &a = c.attrs;
  auto shape = [](std::initializer_list<int64_t> dims, const char *elt) {
    std::string t;
    for (int64_t d : dims)
      t += (d < 0 ? std::string("?") : std::to_string(d)) + "x";
    return t + elt;
  };
  // Batch and page counts dynamic, the page size static (as it must be).
  std::string q = shape({-1, a.headsQ, c.seqQ, a.headDim}, a.elt()),
              k = shape({-1, a.headsKV, c.pageSize, a.headDim}, a.elt()),
              v = shape({-1, a.headsKV, c.pageSize, a.valueHeadDim}, a.elt()),
              o = shape({-1, a.headsQ, c.seqQ, a.valueHeadDim}, a.elt()),
              l = shape({-1, a.headsQ, c.seqQ}, "f32");
  return wrapInFunction({{"q", q},
                         {"k", k},
                         {"v", v},
                         {"table", shape({-1, -1}, "i32")},
                         {"lens", shape({-1}, "i32")}},
                        {{"out", o}, {"lse", l}}, {},
                        "fa.attention_paged %q_t, %k_t, %v_t pages(%table_t) "
                        "seqlens(%lens_t)" +
                            a.text());
}

class PagedNumerics : public ::testing::TestWithParam<PagedCase> {};

TEST_P(PagedNumerics, EachBatchMatchesFloat64) {
  const PagedCase &c = GetParam();
  const Attributes &a = c.attrs;
  int64_t batch = c.cacheLens.size(), s = c.pageSize;
  std::mt19937_64 rng(std::hash<std::string>{}(c.name));
  // Every batch's pages, in shuffled order, plus one page nobody uses.
  int64_t maxPages = 1, pages = 1;
  for (int64_t len : c.cacheLens) {
    maxPages = std::max(maxPages, (len + s - 1) / s + 1);
    pages += (len + s - 1) / s;
  }
  std::vector<int32_t> order(pages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  // Entries past a batch's pages are never read: point them far outside the
  // pool.
  std::vector<int32_t> table(batch * maxPages, int32_t(pages + 1000000));
  size_t next = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < (c.cacheLens[b] + s - 1) / s; ++j)
      table[b * maxPages + j] = order[next++];
  std::vector<int32_t> lens(c.cacheLens.begin(), c.cacheLens.end());

  HostTensor q =
      randomTensor({batch, a.headsQ, c.seqQ, a.headDim}, 1.5, a.type, rng);
  HostTensor kp =
      randomTensor({pages, a.headsKV, s, a.headDim}, 1.5, a.type, rng);
  HostTensor vp =
      randomTensor({pages, a.headsKV, s, a.valueHeadDim}, 1.0, a.type, rng);

  // Each batch on its own keys, gathered from the pages, in float64.
  ForwardResult want{
      HostTensor(std::vector<int64_t>{batch, a.headsQ, c.seqQ, a.valueHeadDim}),
      HostTensor(std::vector<int64_t>{batch, a.headsQ, c.seqQ})};
  for (int64_t b = 0; b < batch; ++b) {
    int64_t len = c.cacheLens[b];
    auto gather = [&](const HostTensor &pool) {
      int64_t d = pool.shape[3];
      HostTensor t(std::vector<int64_t>{1, a.headsKV, len, d});
      for (int64_t h = 0; h < a.headsKV; ++h)
        for (int64_t j = 0; j < len; ++j)
          for (int64_t e = 0; e < d; ++e)
            t.at({0, h, j, e}) =
                pool.at({table[b * maxPages + j / s], h, j % s, e});
      return t;
    };
    AttentionProblem p = a.problem(c.seqQ, len);
    ForwardResult r =
        float64Forward(p, rows(q, 0, c.seqQ, b), gather(kp), gather(vp));
    place(r.out, want.out, 0, b);
    place(r.lse, want.lse, 0, b);
  }

  // And split-KV: three chunks of each query block's keys, merged.
  auto all = pipelines(c.blockQ, c.blockKV);
  all.push_back({"tiled split-kv", tiledPipeline(c.blockQ, c.blockKV, 3)});
  for (auto &[what, pipeline] : all) {
    SCOPED_TRACE(what);
    auto engine = compileModule(pagedModule(c), pipeline, c.name);
    ASSERT_TRUE(!!engine) << llvm::toString(engine.takeError());
    KernelBuffer qb("q", a.type, q.shape), kb("k", a.type, kp.shape),
        vb("v", a.type, vp.shape), ob("out", a.type, want.out.shape),
        lb("lse", ElementType::F32, want.lse.shape);
    qb.write(q);
    kb.write(kp);
    vb.write(vp);
    ob.poison();
    lb.poison();
    I32Buffer tb(table, {batch, maxPages}), nb(lens, {batch});
    std::vector<void *> descriptors = {qb.descriptorPtr(), kb.descriptorPtr(),
                                       vb.descriptorPtr(), tb.descriptorPtr(),
                                       nb.descriptorPtr(), ob.descriptorPtr(),
                                       lb.descriptorPtr()};
    llvm::Error err = invoke(**engine, descriptors);
    ASSERT_FALSE(!!err) << llvm::toString(std::move(err));
    auto out = ob.read();
    ASSERT_TRUE(!!out) << llvm::toString(out.takeError());
    auto lse = lb.read();
    ASSERT_TRUE(!!lse) << llvm::toString(lse.takeError());
    expectClose(what, ForwardResult{*out, *lse}, want, a.type);
  }
}

std::vector<PagedCase> pagedCases() {
  return {
      // Decoding: one query, caches of odd lengths, a partly filled last
      // page, an empty cache, a one-key cache.
      {A(64).heads(4, 2), 1, {37, 0, 1, 64, 100}, 32, 16, 16, "decode_gqa"},
      // Several new tokens, causal, bottom-right per batch (the newest
      // queries see the whole cache).
      {A(32).causal(), 5, {3, 40, 17}, 16, 16, 16, "causal"},
      // A window over the cache, pages larger than the key block.
      {A(32).causal().window(20, 0).heads(2, 1),
       4,
       {90, 33},
       64,
       16,
       32,
       "window_mqa"},
      // Softcap, Dv != D, bf16.
      {A(64).softcap(5.0f).dv(32).type(ElementType::BF16),
       3,
       {50, 16},
       16,
       16,
       16,
       "softcap_bf16"},
      // Key blocks spanning pages: 64-key blocks over 16-key pages (the
      // last block's rows past the cache read no table entry), decoding
      // with GQA.
      {A(64).heads(4, 2), 1, {37, 0, 1, 64, 100}, 16, 16, 64, "span_decode"},
      // A page size no block size divides: 32-key blocks over parts of two
      // or three 24-key pages, causal with several queries.
      {A(32).causal(), 5, {3, 40, 77, 24}, 24, 16, 32, "span_odd_pages"},
      // Spanning, a window and Dv != D (V's rows shorter than K's).
      {A(64).causal().window(30, 0).dv(32).heads(2, 1),
       4,
       {90, 33},
       16,
       16,
       48,
       "span_window_dv"},
  };
}

INSTANTIATE_TEST_SUITE_P(Cases, PagedNumerics,
                         ::testing::ValuesIn(pagedCases()),
                         [](const ::testing::TestParamInfo<PagedCase> &info) {
                           return info.param.name;
                         });

} // namespace
