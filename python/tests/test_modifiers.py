"""flashmlir.attention's score_mod / mask_mod (FlexAttention's modifiers) on
the CPU: the tracer (python/flashmlir/_modifiers.py) against the functions
it traces, the traced IR through fa-opt's verifier and tiled CPU pipeline,
and the reference's numerics against float64, forward and backward
(gradients of captured tensors included)."""

import math
import os
import re
import subprocess

import pytest

torch = pytest.importorskip("torch")

import flashmlir  # noqa: E402
from flashmlir import UnsupportedError, _modifiers  # noqa: E402

torch.manual_seed(0)
B, H, HKV, NQ, NK, D = 2, 4, 2, 13, 21, 32

SLOPES = torch.tensor([0.5, 0.25, 0.125, 0.0625])
TABLE = torch.randn(NQ + NK - 1)
DOC = torch.tensor([0] * 7 + [1] * 9 + [2] * 5, dtype=torch.int32)   # per key; queries: last NQ


def alibi(s, b, h, i, j):
    return s + SLOPES[h] * (j - i)


def rel_bias(s, b, h, i, j):
    return s + TABLE[i - j + NK - 1]


def tanh_cap(s, b, h, i, j):
    return 7.0 * torch.tanh(s / 7.0)


def causal(b, h, i, j):
    return j <= i + (NK - NQ)


def window(b, h, i, j):
    d = i + (NK - NQ)
    return (j <= d) & (j >= d - 5)


def prefix_lm(b, h, i, j):
    return (j < 4) | (j <= i + (NK - NQ))


def document(b, h, i, j):
    return DOC[i + (NK - NQ)] == DOC[j]


def odd_math(s, b, h, i, j):
    # floor division and modulo of negative values (Python's semantics),
    # where, max / min, mixed index / float arithmetic
    r = (j - i) // 3 + (i - j) % 4
    x = torch.where(r > 0, s * 0.5, -s) + torch.maximum(s, r * 0.1)
    return torch.clamp(x, max=50.0) - abs(i - j) / 8 + torch.exp(-torch.abs(s)) * 0.25 + (b + h)


SCORE_MODS = {"alibi": alibi, "rel_bias": rel_bias, "tanh_cap": tanh_cap, "odd_math": odd_math}
MASK_MODS = {"causal": causal, "window": window, "prefix_lm": prefix_lm, "document": document}


# -- a small evaluator of the traced regions (MLIR semantics, vectorized) ----------------

def evaluate_region(text, args, captures):
    """Runs a traced region on torch tensors: `args` the block arguments by
    name (%s, %b, %h, %i, %j), captures %c0, %c1, ...; returns the yield."""
    env = dict(args)
    env.update({f"%c{n}": t for n, t in enumerate(captures)})
    fl = lambda x: x.double() if torch.is_tensor(x) else float(x)
    for line in text.splitlines()[1:-1]:
        line = line.strip()
        m = re.match(r"fa\.yield (%\w+)", line)
        if m:
            return env[m.group(1)]
        name, rhs = line.split(" = ", 1)
        op, rest = rhs.split(" ", 1)
        ops = re.findall(r"%\w+", rest.split(" : ")[0])
        v = [env[o] for o in ops if o in env]
        if op == "arith.constant":
            lit = rest.split(" : ")[0].strip()
            table = {"true": True, "false": False, "0xFF800000": -math.inf,
                     "0x7F800000": math.inf}
            env[name] = table[lit] if lit in table else (float(lit) if "." in lit or "e" in lit
                                                          else int(lit))
            continue
        if op == "tensor.extract":
            t = env[ops[0]]
            env[name] = t[tuple(torch.as_tensor(x).long() for x in v[1:])]
            continue
        if op in ("arith.cmpi", "arith.cmpf"):
            pred = rest.split(",")[0]
            a, b = v
            f = {"slt": torch.lt, "sle": torch.le, "sgt": torch.gt, "sge": torch.ge,
                 "eq": torch.eq, "ne": torch.ne, "olt": torch.lt, "ole": torch.le,
                 "ogt": torch.gt, "oge": torch.ge, "oeq": torch.eq, "une": torch.ne}[pred]
            env[name] = f(torch.as_tensor(a), torch.as_tensor(b))
            continue
        unary = {"arith.negf": lambda a: -fl(a), "math.tanh": lambda a: torch.tanh(fl(a)),
                 "math.exp": lambda a: torch.exp(fl(a)), "math.absf": lambda a: fl(a).abs(),
                 "math.floor": lambda a: torch.floor(fl(a)),
                 "arith.index_cast": lambda a: a, "arith.sitofp": fl, "arith.extf": fl}
        binary = {"arith.addi": torch.add, "arith.subi": torch.sub, "arith.muli": torch.mul,
                  "arith.floordivsi": lambda a, b: torch.div(a, b, rounding_mode="floor"),
                  "arith.addf": lambda a, b: fl(a) + fl(b),
                  "arith.subf": lambda a, b: fl(a) - fl(b),
                  "arith.mulf": lambda a, b: fl(a) * fl(b),
                  "arith.divf": lambda a, b: fl(a) / fl(b),
                  "arith.maximumf": lambda a, b: torch.maximum(fl(a), torch.as_tensor(fl(b))),
                  "arith.minimumf": lambda a, b: torch.minimum(fl(a), torch.as_tensor(fl(b))),
                  "arith.andi": torch.logical_and, "arith.ori": torch.logical_or,
                  "arith.xori": torch.logical_xor}
        if op in unary:
            env[name] = unary[op](v[0])
        elif op in binary:
            a, b = (torch.as_tensor(x) for x in v)
            env[name] = binary[op](a, b)
        elif op == "arith.select":
            env[name] = torch.where(torch.as_tensor(v[0]), torch.as_tensor(v[1]),
                                    torch.as_tensor(v[2]))
        else:
            raise AssertionError(f"evaluator: no rule for {op}")
    raise AssertionError("no fa.yield")


def grids():
    b, h, i, j = _modifiers.index_grids(B, H, NQ, NK, "cpu")
    return b, h, i, j


@pytest.mark.parametrize("name", sorted(SCORE_MODS))
def test_traced_score_mod_computes_the_function(name):
    fn = SCORE_MODS[name]
    tr = flashmlir.trace_modifiers(score_mod=fn)
    b, h, i, j = grids()
    s = torch.randn(B, H, NQ, NK, dtype=torch.float64) * 4
    got = evaluate_region(tr.score_mod, {"%s": s, "%b": b, "%h": h, "%i": i, "%j": j},
                          tr.captures)
    want = fn(s, b, h, i, j)
    torch.testing.assert_close(torch.broadcast_to(torch.as_tensor(got).double(), s.shape),
                               torch.broadcast_to(want.double(), s.shape), rtol=1e-6,
                               atol=1e-6)


@pytest.mark.parametrize("name", sorted(MASK_MODS))
def test_traced_mask_mod_computes_the_function(name):
    fn = MASK_MODS[name]
    tr = flashmlir.trace_modifiers(mask_mod=fn)
    b, h, i, j = grids()
    got = evaluate_region(tr.mask_mod, {"%b": b, "%h": h, "%i": i, "%j": j}, tr.captures)
    want = fn(b, h, i, j)
    shape = (B, H, NQ, NK)
    assert torch.equal(torch.broadcast_to(got, shape), torch.broadcast_to(want, shape))


def test_captures_are_shared_and_typed():
    tr = flashmlir.trace_modifiers(rel_bias, document)
    assert [c is t for c, t in zip(tr.captures, (TABLE, DOC))] == [True, True]
    assert tr.capture_types() == [f"tensor<{NQ + NK - 1}xf32>", f"tensor<{NK}xi32>"]
    assert tr.regions().startswith("captures(%cap0, %cap1)\n")
    # both regions receive both captures, as the dialect requires
    assert "%c0: tensor<33xf32>, %c1: tensor<21xi32>" in tr.score_mod
    assert "%c0: tensor<33xf32>, %c1: tensor<21xi32>" in tr.mask_mod
    assert "arith.cmpi eq" in tr.mask_mod and tr.key() != flashmlir.trace_modifiers(
        rel_bias).key()


def _fa_opt():
    path = os.path.join(os.environ.get("FA_BUILD_DIR", "build"), "bin", "fa-opt")
    if not os.path.exists(path):
        pytest.skip("fa-opt not built")
    return path


@pytest.mark.parametrize("score,mask", [("alibi", "causal"), ("rel_bias", "document"),
                                        ("tanh_cap", None), (None, "prefix_lm"),
                                        ("odd_math", "window")])
def test_traced_ir_verifies_and_lowers(tmp_path, score, mask):
    """fa-opt parses and verifies the traced op, and lowers it through the
    tiled CPU pipeline (tiling, inlining into the tile steps, LLVM)."""
    tr = flashmlir.trace_modifiers(SCORE_MODS.get(score), MASK_MODS.get(mask))
    src = tmp_path / "m.mlir"
    src.write_text(tr.module((B, H, NQ, D), (B, HKV, NK, D), (B, HKV, NK, D), "f16",
                             "softcap 30.0"))
    fa_opt = _fa_opt()
    for args in ([], ["--fa-tiled-cpu=block-q=16 block-kv=16"]):
        r = subprocess.run([fa_opt, str(src)] + args, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr + src.read_text()


# -- numerics of the CPU path ------------------------------------------------------------

def inputs(dtype=torch.bfloat16, grad=False):
    q = torch.randn(B, H, NQ, D).to(dtype)
    k = torch.randn(B, HKV, NK, D).to(dtype)
    v = torch.randn(B, HKV, NK, D).to(dtype)
    if grad:
        for t in (q, k, v):
            t.requires_grad_(True)
    return q, k, v


def float64_attention(q, k, v, score_mod, mask_mod, causal_=False, softcap=None):
    """The definition, in float64, with explicit loops over the modifiers'
    inputs (no broadcasting tricks): s = scale q k^T, score_mod, softcap,
    masks, softmax; empty rows give 0."""
    g = q.shape[1] // k.shape[1]
    qd, kd, vd = q.double(), k.double().repeat_interleave(g, 1), v.double().repeat_interleave(g, 1)
    s = qd @ kd.transpose(-1, -2) / math.sqrt(D)
    out = torch.zeros(B, H, NQ, vd.shape[-1], dtype=torch.float64)
    rows = []
    for b in range(B):
        for h in range(H):
            for i in range(NQ):
                row = []
                for j in range(NK):
                    x = s[b, h, i, j]
                    idx = tuple(torch.tensor(n) for n in (b, h, i, j))
                    if score_mod is not None:
                        x = score_mod(x, *idx)
                    if softcap is not None:
                        x = softcap * torch.tanh(x / softcap)
                    ok = (not causal_ or j <= i + NK - NQ) and (
                        mask_mod is None or bool(mask_mod(*idx)))
                    row.append(x if ok else torch.tensor(-math.inf, dtype=torch.float64))
                rows.append(torch.stack([torch.as_tensor(x, dtype=torch.float64) for x in row]))
    s = torch.stack(rows).view(B, H, NQ, NK)
    seen = torch.isfinite(s).any(-1, keepdim=True)
    p = torch.softmax(s.masked_fill(~seen, 0.0), -1) * seen
    out = p @ vd
    return out


@pytest.mark.parametrize("score,mask", [("alibi", "causal"), ("rel_bias", None),
                                        ("odd_math", "document"), (None, "prefix_lm"),
                                        (None, "window")])
def test_forward_matches_float64(score, mask):
    q, k, v = inputs()
    sm, mm = SCORE_MODS.get(score), MASK_MODS.get(mask)
    got = flashmlir.attention(q, k, v, score_mod=sm, mask_mod=mm)
    want = float64_attention(q, k, v, sm, mm)
    assert (got.double() - want).abs().max().item() < 2e-2     # bf16 output
    assert got.dtype == torch.bfloat16 and got.shape == (B, H, NQ, D)


def test_softcap_bounds_the_modified_score():
    """The op's order: score_mod on the scaled score, then the softcap, then
    the masks (causal here from the attribute)."""
    q, k, v = inputs()
    got = flashmlir.attention(q, k, v, causal=True, softcap=2.0, score_mod=alibi)
    want = float64_attention(q, k, v, alibi, None, causal_=True, softcap=2.0)
    assert (got.double() - want).abs().max().item() < 2e-2


def test_modifiers_reproduce_the_builtins():
    q, k, v = inputs()
    for builtin, mods in ((dict(causal=True), dict(mask_mod=causal)),
                          (dict(causal=True, window=(5, 0)), dict(mask_mod=window)),
                          (dict(softcap=7.0), dict(score_mod=tanh_cap))):
        a, la = flashmlir.attention(q, k, v, return_lse=True, **builtin)
        b, lb = flashmlir.attention(q, k, v, return_lse=True, **mods)
        torch.testing.assert_close(a.float(), b.float(), rtol=0, atol=1e-2)
        torch.testing.assert_close(la, lb, rtol=1e-5, atol=1e-5)
    # causal written as a mask_mod: exactly the attribute's visibility
    a = flashmlir.attention(q, k, v, causal=True)
    b = flashmlir.attention(q, k, v, mask_mod=causal)
    assert torch.equal(a, b)


def test_gradients_including_captures():
    """q, k, v and a learned bias table: autograd of the reference against
    autograd of the float64 definition."""
    table = TABLE.clone().requires_grad_(True)
    slopes = SLOPES.clone().requires_grad_(True)

    def mod(s, b, h, i, j):
        return s + table[i - j + NK - 1] + slopes[h] * (j - i)

    q, k, v = inputs(torch.float16, grad=True)
    out = flashmlir.attention(q, k, v, score_mod=mod, mask_mod=prefix_lm)
    dout = torch.randn_like(out.float())
    grads = torch.autograd.grad(out.float(), (q, k, v, table, slopes), dout)

    q64, k64, v64 = (t.detach().double().requires_grad_(True) for t in (q, k, v))
    table64 = table.detach().double().requires_grad_(True)
    slopes64 = slopes.detach().double().requires_grad_(True)

    def mod64(s, b, h, i, j):
        return s + table64[i - j + NK - 1] + slopes64[h] * (j - i)

    want = float64_attention(q64, k64, v64, mod64, prefix_lm)
    wgrads = torch.autograd.grad(want, (q64, k64, v64, table64, slopes64), dout.double())
    for name, g, w in zip(("dq", "dk", "dv", "dtable", "dslopes"), grads, wgrads):
        err = (g.double() - w).abs().max().item()
        assert err < 3e-2 * max(1.0, w.abs().max().item()), (name, err)
    assert grads[3].abs().sum() > 0 and grads[4].abs().sum() > 0


def test_torch_compile_traces_the_modifiers():
    q, k, v = inputs()
    f = torch.compile(lambda q, k, v: flashmlir.attention(q, k, v, score_mod=alibi,
                                                          mask_mod=document),
                      backend="eager", fullgraph=True)
    assert torch.equal(f(q, k, v), flashmlir.attention(q, k, v, score_mod=alibi,
                                                        mask_mod=document))


def test_layout_out_and_lse():
    q, k, v = inputs()
    want, wl = flashmlir.attention(q, k, v, score_mod=alibi, return_lse=True)
    got = flashmlir.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                              score_mod=alibi, layout="bshd")
    assert torch.equal(got.transpose(1, 2), want)
    out, lse = torch.empty_like(want), torch.empty_like(wl)
    r = flashmlir.attention(q, k, v, score_mod=alibi, return_lse=True, out=out, lse=lse)
    assert r[0] is out and r[1] is lse and torch.equal(out, want) and torch.equal(lse, wl)


@pytest.mark.parametrize("fn,kind,message", [
    (lambda s, b, h, i, j: s if i > j else -s, "score", "Python control flow"),
    (lambda s, b, h, i, j: torch.erf(s), "score", "torch.erf"),
    (lambda s, b, h, i, j: s > 0, "score", "returns a boolean"),
    (lambda b, h, i, j: i * 1.0, "mask", "not a boolean"),
    (lambda s, b, h, i, j: s + TABLE[i, j], "score", "indexing a 1-d tensor with 2"),
    (lambda s, b, h, i, j: s + TABLE[0:i], "score", "as a Python int"),
    (lambda s, b, h, i, j: s + int(i), "score", "int()"),
    (lambda s, b, h, i, j: s % 2.0, "score", "% on floating-point"),
    (lambda s, b, h, i, j: "x", "score", "returns a str"),
])
def test_unsupported_python_is_named(fn, kind, message):
    with pytest.raises(UnsupportedError, match=re.escape(message)):
        if kind == "score":
            flashmlir.trace_modifiers(score_mod=fn)
        else:
            flashmlir.trace_modifiers(mask_mod=fn)


def test_captures_on_q_device_and_traced_first():
    # (CUDA tensors run the kernels: test_modifiers_fake.py, test_gpu_modifiers.py)
    q, k, v = (t.to("meta") for t in inputs())
    with pytest.raises(ValueError, match="read a tensor on cpu .* are on meta"):
        flashmlir.attention(q, k, v, score_mod=alibi)
    with pytest.raises(UnsupportedError, match="torch.erf"):    # traced first
        flashmlir.attention(*inputs(), score_mod=lambda s, b, h, i, j: torch.erf(s))
