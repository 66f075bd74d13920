#!/usr/bin/env python3
"""Mutation fuzzer for fa-opt and fa-compile (Python 3 standard library only).

Seeds are the lit inputs (test/**/*.mlir split on `// -----`), examples/ and
scripts/fuzz/seeds/, plus the tiled forms fa-opt makes of them. Iteration i
draws everything from Random(seed, i): a seed, a few text mutations (edge
numbers, shapes, element and result types, fa op keywords, operands, nested
modules, tokens, lines, splices) and either an fa-opt pipeline of passes from
`fa-opt --help` with random options, or fa-compile with random flags (and a
mutated input file half of the time). Same binaries + same seed = same runs.

A finding is a crash (signal, "Stack dump", "LLVM ERROR", "Assertion",
"UNREACHABLE", exit code > 1), a timeout (in CPU seconds), a pass whose
output only fails the verifier (exit 1 that --verify-each=0 turns into 0),
or an exit 0 whose result is wrong: output that does not parse back, a
pipeline that leaves the ops it lowers, a manifest over the chip's shared
memory, PTX ptxas rejects (--ptxas). Exit 1 with a diagnostic is fine.
Findings are deduplicated by signature (the assertion or error text, else
stack frames); the first of each is reduced and saved as
OUT/<kind>-<hash>/{input,reduced}.mlir, repro.sh, stderr.txt. Signatures
matching a regex of --allow FILE are reported as known and do not fail the
run. docs/FUZZING.md has the details.
"""

import argparse
import concurrent.futures as futures
import hashlib
import json
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Dynamic shared memory per block, opt-in maximum (CUDA occupancy tables).
SMEM_LIMIT = {"sm_80": 166912, "sm_90": 232448, "sm_90a": 232448}

#===----------------------------------------------------------------------===#
# Seeds
#===----------------------------------------------------------------------===#


def read_seeds(seed_dir=None):
    """The lit inputs, examples and extra seeds (or the .mlir files of
    `seed_dir`), split and without comments."""
    if seed_dir:
        files = sorted(Path(seed_dir).glob("*.mlir"))
    else:
        files = sorted(ROOT.glob("test/**/*.mlir")) + sorted(
            ROOT.glob("examples/**/*.mlir")) + sorted(
                ROOT.glob("scripts/fuzz/seeds/*.mlir"))
    seeds = []
    for path in files:
        for chunk in re.split(r"^// -----\s*$", path.read_text(), flags=re.M):
            lines = [l for l in chunk.splitlines()
                     if l.strip() and not l.lstrip().startswith("//")]
            if lines:
                seeds.append("\n".join(lines) + "\n")
    return seeds


def derive_seeds(tools, seeds, pool):
    """The tiled forms of the seeds: inputs for the tile-level passes."""
    jobs = []
    for text in seeds:
        for op, pass_ in (("fa.attention ", "--fa-tile-attention"),
                          ("fa.attention_varlen ", "--fa-tile-attention"),
                          ("fa.attention_paged ", "--fa-tile-attention"),
                          ("fa.attention_backward ",
                           "--fa-tile-attention-backward"),
                          ("fa.attention_varlen_backward ",
                           "--fa-tile-attention-backward")):
            if op in text:
                jobs.append(pool.submit(run_tool, [tools.opt, pass_], text,
                                        20))
    derived = []
    for job in jobs:
        r = job.result()
        if r.rc == 0 and len(r.out) < 30000:
            # Without the printed `module {}`, so that splices stay flat.
            m = re.match(r"((?:[#!].*\n)*)module \{\n(.*)\}\n$", r.out, re.S)
            derived.append(m.group(1) + m.group(2) if m else r.out)
    return derived


#===----------------------------------------------------------------------===#
# Mutations: each takes (rng, text, seeds) and returns new text
#===----------------------------------------------------------------------===#

EDGE_INTS = ["0", "1", "-1", "2", "16", "2147483647", "2147483648",
             "-2147483648", "4294967296", "9223372036854775807",
             "-9223372036854775808"]
# Hex literals are the bits of an f32: NaN, +inf, -inf.
EDGE_FLOATS = ["0.0", "-0.0", "1.0", "30.0", "-1.0", "1.0e-30", "1.0e+30",
               "0x7FC00000", "0x7F800000", "0xFF800000"]
EDGE_DIMS = ["0", "1", "2", "3", "15", "16", "17", "32", "63", "64", "65",
             "127", "128", "129", "256", "1024", "?", "?", "2147483648",
             "9223372036854775807"]
ELEMENT_TYPES = ["f16", "bf16", "f32", "i8", "f64"]
EDGE_WINDOW = ["-1", "0", "1", "16", "128", "-2", "2147483647",
               "9223372036854775807", "-9223372036854775808"]

NUMBER = re.compile(
    r"(?<![\w%#@$.])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w.])")
SHAPED = re.compile(r"\b(tensor|memref)<((?:[0-9?]+x)*)([a-z]\w*)\b")
FA_OP = re.compile(r"\bfa\.\w+")
SSA = re.compile(r"%[\w$.-]+(?:#\d+)?")
TOKEN = re.compile(r'%[\w$.#-]+|@[\w$.-]+|[A-Za-z_][\w.$-]*|-?\d[\w.+-]*'
                   r'|"[^"\n]*"|\S')
# The optional keywords of the fa ops, in the order their assembly formats
# print them.
KEYWORDS = [("masked", r" masked\([^)]*\)"),
            ("mask", r" mask(?:<[^>]*>|\s#[^\s(]+)(?:\([^)]*\))?"),
            ("softcap", r" softcap [^\s:]+"), ("scale", r" scale [^\s:]+"),
            ("exp2", r" exp2\b"), ("deterministic", r" deterministic\b")]
OP_KEYWORDS = {
    "fa.attention": ["mask", "softcap", "scale"],
    "fa.attention_backward": ["mask", "softcap", "scale", "deterministic"],
    "fa.attention_varlen": ["mask", "softcap", "scale"],
    "fa.attention_paged": ["mask", "softcap", "scale"],
    "fa.attention_varlen_backward": ["mask", "softcap", "scale",
                                     "deterministic"],
    "fa.online_attention": ["masked", "mask", "softcap", "scale", "exp2"],
    "fa.online_attention_finalize": ["exp2"],
    "fa.attention_backward_step": ["masked", "mask", "softcap", "scale"],
}
ATTR_DICTS = ["mask = #fa.mask<causal>", "deterministic", "exp2",
              "fa.dq_accumulation", "mask = #fa.mask<window ?, 2>",
              "mask = array<i64: 1>",
              "scale = 0.5 : f32", "scale = 1.0 : f64", "softcap = 0.0 : f32",
              "mask = 1 : i64"]
WRAPPERS = ["module {\n%s}\n", "module @inner {\n%s}\n",
            "module {\nmodule {\n%s}\n}\n", "gpu.module @kernels {\n%s}\n",
            "module attributes {gpu.container_module} {\n%s}\n"]


def replace_span(text, m, new):
    return text[:m.start()] + new + text[m.end():]


def mutate_number(rng, text, seeds):
    """An integer or float literal to an edge value of its kind (rarely of
    the other kind)."""
    matches = list(NUMBER.finditer(text))
    if not matches:
        return text
    m = rng.choice(matches)
    is_float = re.search(r"[.e]", m.group(0)) is not None
    if rng.random() < 0.1:
        is_float = not is_float
    return replace_span(text, m, rng.choice(EDGE_FLOATS if is_float
                                            else EDGE_INTS))


def mutate_shape(rng, text, seeds):
    """A dim to an edge value or ?, a dim added or dropped, or a new element
    type; in one type or in every copy of it (which keeps types agreeing)."""
    matches = list(SHAPED.finditer(text))
    if not matches:
        return text
    m = rng.choice(matches)
    dims = m.group(2).split("x")[:-1]
    elt = m.group(3)
    action = rng.randrange(4)
    if action == 0 and dims:
        dims[rng.randrange(len(dims))] = rng.choice(EDGE_DIMS)
    elif action == 1:
        dims.insert(rng.randrange(len(dims) + 1), rng.choice(EDGE_DIMS))
    elif action == 2 and dims:
        del dims[rng.randrange(len(dims))]
    else:
        elt = rng.choice(ELEMENT_TYPES)
    new = "%s<%s%s" % (m.group(1), "".join(d + "x" for d in dims), elt)
    if rng.random() < 0.8:
        pattern = re.escape(m.group(0)) + r"\b"
        return re.sub(pattern, lambda _: new, text)
    return replace_span(text, m, new)


def mutate_result_type(rng, text, seeds):
    """Makes a static dim of an fa.attention(_backward) result dynamic, in
    the op, its function's results and its return: results and operands no
    longer have the same types."""
    ops = list(re.finditer(r"= fa\.attention(?:_backward)? ", text))
    if not ops:
        return text
    op = rng.choice(ops)
    func = text.rfind("func.func", 0, op.start())
    body = text.find("{\n", func)
    arrow = text.find("->", op.end())
    ret = text.find("return ", op.end())
    if min(func, body, arrow, ret) < 0:
        return text
    results = list(SHAPED.finditer(text, arrow, text.find("\n", text.find(
        ")", arrow))))
    if not results:
        return text
    r = rng.choice(results)
    dims = r.group(2).split("x")[:-1]
    static = [i for i, d in enumerate(dims) if d != "?"]
    if not static:
        return text
    dims[rng.choice(static)] = "?"
    new = "%s<%s%s" % (r.group(1), "".join(d + "x" for d in dims), r.group(3))
    relax = lambda t: re.sub(re.escape(r.group(0)) + r"\b", lambda _: new, t)
    func_results = text.rfind("->", func, body)
    ret_end = text.find("}", ret)
    if min(func_results, ret_end) < 0:
        return text
    return (text[:func_results] + relax(text[func_results:body]) +
            text[body:r.start()] + new + text[r.end():ret] +
            relax(text[ret:ret_end]) + text[ret_end:])


def keyword_text(rng, name, text):
    if name == "mask":
        form = rng.choice(["causal", "none", "window", "window", "runtime"])
        if form in ("causal", "none"):
            return " mask<%s>" % form
        sides = EDGE_WINDOW + ["inf", "?"]
        if form == "window":
            return " mask<window %s, %s>" % (rng.choice(sides),
                                             rng.choice(sides))
        # Run-time sizes: i64 values of the function, or none (an error).
        names = re.findall(r"(%[\w]+)(?: = arith\.constant -?\d+|): i64",
                           text) or ["%fz"]
        right = rng.choice(["?", "0"])
        n = 1 + (right == "?")
        return " mask<window ?, %s>(%s)" % (
            right, ", ".join(rng.choice(names) for _ in range(n)))
    if name in ("softcap", "scale"):
        return " %s %s" % (name, rng.choice(EDGE_FLOATS))
    if name == "masked":
        names = re.findall(r"(%[\w]+)(?: = arith\.constant -?\d+|): index",
                           text)
        names += re.findall(r"scf\.for (%\w+) =", text)
        names = names or ["%fz"]
        return " masked(%s)" % ", ".join(rng.choice(names) for _ in range(4))
    return " " + name


def mutate_keyword(rng, text, seeds):
    """Drops, duplicates or inserts (in format order) an fa op keyword, or
    adds an attribute dictionary."""
    ops = list(FA_OP.finditer(text))
    if not ops:
        return text
    op = rng.choice(ops)
    start = op.end()
    end = text.find(" : ", start)
    if end < 0:
        return text
    head = text[start:end]
    present = [(i, m) for i, (_, p) in enumerate(KEYWORDS)
               for m in re.finditer(p, head)]
    action = rng.choices(["drop", "repeat", "insert", "dict"], [3, 1, 5, 1])[0]
    kw = ""
    if action == "drop" and present:
        _, m = rng.choice(present)
        head = head[:m.start()] + head[m.end():]
    elif action == "repeat" and present:
        _, m = rng.choice(present)
        head = head[:m.end()] + m.group(0) + head[m.end():]
    elif action == "dict":
        head += " {%s}" % rng.choice(ATTR_DICTS)
    else:
        names = [k for k, _ in KEYWORDS]
        if rng.random() < 0.8:
            names = [k for k in OP_KEYWORDS.get(op.group(0), names)
                     if k not in [KEYWORDS[j][0] for j, _ in present]]
        if not names:
            return text
        i = [k for k, _ in KEYWORDS].index(rng.choice(names))
        later = [m.start() for j, m in present if j > i]
        at = min(later) if later else (
            head.find(" {") if " {" in head else len(head))
        kw = keyword_text(rng, KEYWORDS[i][0], text)
        head = head[:at] + kw + head[at:]
    text = text[:start] + head + text[end:]
    if "%fz" in kw:
        # masked(...) needs index values: define one in the function.
        text = re.sub(r"(func\.func[^{]*\{\n)", lambda m: m.group(1) +
                      "  %%fz = arith.constant %s : index\n" % rng.choice(
                          ["0", "1", "-1", "64", "2147483648"]), text, count=1)
    return text


def mutate_operands(rng, text, seeds):
    """Swaps two operands of an op, or replaces one by another SSA value."""
    lines = text.splitlines(keepends=True)
    candidates = [i for i, l in enumerate(lines) if " = " in l]
    if not candidates:
        return text
    i = rng.choice(candidates)
    line = lines[i]
    lhs, rhs = line.split(" = ", 1)
    uses = list(SSA.finditer(rhs.split(" : ")[0]))
    if not uses:
        return text
    a = rng.choice(uses)
    if len(uses) > 1 and rng.random() < 0.5:
        b = rng.choice([u for u in uses if u is not a])
        first, second = sorted([a, b], key=lambda m: m.start())
        rhs = (rhs[:first.start()] + second.group(0) +
               rhs[first.end():second.start()] + first.group(0) +
               rhs[second.end():])
    else:
        rhs = replace_span(rhs, a, rng.choice(SSA.findall(text)))
    lines[i] = lhs + " = " + rhs
    return "".join(lines)


def mutate_wrap(rng, text, seeds):
    """Nests the functions in modules; aliases stay at the top level."""
    aliases = re.match(r"(?:[#!][\w.$-]+ = .*\n)*", text).group(0)
    return aliases + rng.choice(WRAPPERS) % text[len(aliases):]


def mutate_token(rng, text, seeds):
    tokens = list(TOKEN.finditer(text))
    if not tokens:
        return text
    m = rng.choice(tokens)
    if rng.random() < 0.5:
        return replace_span(text, m, "")
    return replace_span(text, m, m.group(0) + " " + m.group(0))


def mutate_line(rng, text, seeds):
    lines = text.splitlines(keepends=True)
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    action = rng.randrange(3)
    if action == 0:
        del lines[i]
    elif action == 1:
        lines.insert(j, lines[i])
    else:
        lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines)


def mutate_splice(rng, text, seeds):
    """Appends another seed, its symbols and aliases renamed."""
    other = re.sub(r"@([\w$.-]+)", r"@\1_x", rng.choice(seeds))
    other = re.sub(r"([#!][A-Za-z_]\w*)(?![\w.$<-])", r"\1_x", other)
    return text + other


# Weighted towards the mutations that keep the IR parsable.
MUTATIONS = 3 * [mutate_number, mutate_shape, mutate_keyword] + [
    mutate_result_type, mutate_operands, mutate_wrap, mutate_token,
    mutate_line, mutate_splice]


def mutate(rng, text, seeds, count):
    for _ in range(count):
        text = rng.choice(MUTATIONS)(rng, text, seeds)
    return text


#===----------------------------------------------------------------------===#
# Commands
#===----------------------------------------------------------------------===#

BLOCKS = ["16", "32", "64", "128"]
OPTION_EDGES = ["0", "1", "-1", "3", "24", "48", "256", "512", "4096",
                "2147483647", "2147483648", "-2147483648",
                "9223372036854775807"]
OPTION_VALUES = {
    "block-q": BLOCKS, "block-kv": BLOCKS, "warps": ["1", "2", "4", "8"],
    "stages": ["1", "2"], "chip": ["sm_80", "sm_90a", "sm_90", "sm_70",
                                   "sm_100a", "bogus"],
    "format": ["isa", "isa", "bin"],
    "features": ["+ptx80", "+ptx81", "+ptx60", ""],
    "splits": ["0", "1", "3", "7"], "kv-splits": ["0", "-1", "4"],
    "multiprocessors": ["0", "1", "132"],
}
SKIPPED_OPTIONS = {"toolkit"}

COMPILE_FLAGS = {
    # flag: (usual values, edge values); None for a boolean flag.
    "kind": (["forward", "backward"], ["sideways", ""]),
    "head-dim": (["64", "128"], ["32", "16", "96", "256", "0", "-64", "100",
                                 "8", "512"]),
    "value-head-dim": (["64", "128"], ["32", "96", "256", "0", "-1", "8"]),
    "dtype": (["f16", "bf16"], ["f32", "f64", "i8"]),
    "causal": None, "deterministic": None, "emit-mlir": None,
    "window": (["-1,-1", "64,16", "-1,8"],
               ["0,0", "1,-1", "9223372036854775807,0",
                "0,-9223372036854775808", "-2,3", "5", "a,b"]),
    "softcap": (["30", "50"], ["0", "-1", "1e-30", "nan", "inf"]),
    "scale": (["0.125", "0.25"], ["0", "-1", "1e-30", "nan", "inf", "1e30"]),
    "chip": (["sm_80", "sm_90a"], ["sm_90", "sm_70", "sm_86", "sm_100a"]),
    "block-q": (["64", "128"], ["32", "16", "256", "0", "-1", "48", "8",
                                "512"]),
    "block-kv": (["32", "64", "128"], ["16", "256", "0", "-1", "48", "8",
                                       "512"]),
    "warps": (["0", "4", "8"], ["1", "2", "16", "3", "-1", "32"]),
    "stages": (["1", "2"], ["3", "0", "-1", "4"]),
    "mma": (["auto", "mma.sync", "wgmma"], ["tensor"]),
    "pipeline": (["fa-gpu-forward", "fa-gpu-backward"],
                 ["fa-tiled-cpu", "canonicalize", "bogus"]),
    "kv-splits": (["none", "auto", "3"], ["0", "-1", "1025", "x"]),
    "tile-scheduler": (["auto", "grid", "persistent", "dynamic"], ["atomic", ""]),
    "form": (["dense", "varlen", "paged"], ["ragged", ""]),
    "page-size": (["16", "64", "256"], ["0", "24", "8", "-16", "8192", "x"]),
}


def registered_passes(opt):
    """{pass or pipeline: [(option, type)]} for every --fa-* in --help."""
    help_text = subprocess.run([opt, "--help"], capture_output=True,
                               text=True).stdout
    passes, current = {}, None
    for line in help_text.splitlines():
        m = re.match(r"^      --(fa-[\w-]+)\s", line)
        if m:
            current = passes.setdefault(m.group(1), [])
            continue
        m = re.match(r"^        --([\w-]+)(?:=<(\w+)>)?\s", line)
        if m and current is not None:
            if m.group(1) not in SKIPPED_OPTIONS:
                current.append((m.group(1), m.group(2) or "bool"))
        elif not line.startswith("        "):
            current = None
    return passes


def option_value(rng, name, kind):
    if kind == "bool":
        return rng.choice(["true", "false"])
    if name in OPTION_VALUES and (kind == "string" or rng.random() < 0.8):
        return rng.choice(OPTION_VALUES[name])
    return rng.choice(OPTION_EDGES) if kind != "string" else None


# The passes that consume each fa op: most pipelines start with one of them.
CONSUMERS = {
    "fa.attention ": ["fa-tile-attention", "fa-lower-to-reference",
                      "fa-tiled-attention", "fa-tiled-cpu",
                      "fa-reference-cpu", "fa-gpu-forward"],
    "fa.attention_backward ": ["fa-tile-attention-backward",
                               "fa-lower-to-reference", "fa-tiled-attention",
                               "fa-tiled-cpu", "fa-reference-cpu",
                               "fa-gpu-backward"],
    "fa.attention_varlen ": ["fa-tile-attention", "fa-lower-to-reference",
                             "fa-tiled-attention", "fa-tiled-cpu",
                             "fa-reference-cpu", "fa-gpu-forward"],
    "fa.attention_varlen_backward ": ["fa-tile-attention-backward",
                                      "fa-lower-to-reference",
                                      "fa-tiled-attention", "fa-tiled-cpu",
                                      "fa-reference-cpu", "fa-gpu-backward"],
    "fa.attention_paged ": ["fa-tile-attention", "fa-lower-to-reference",
                            "fa-tiled-attention", "fa-tiled-cpu",
                            "fa-reference-cpu", "fa-gpu-forward"],
    "fa.online_attention ": ["fa-specialize-masks", "fa-use-exp2",
                             "fa-split-kv",
                             "fa-decompose-online-attention",
                             "fa-convert-tiled-attention-to-gpu"],
    "fa.attention_backward_step ": [
        "fa-specialize-masks", "fa-decompose-attention-backward-step",
        "fa-convert-tiled-attention-backward-to-gpu"],
    "fa.attention_merge ": ["fa-lower-to-reference", "fa-reference-cpu"],
    "fa.attention_merge_splits ": ["fa-lower-to-reference",
                                   "fa-convert-attention-merge-to-gpu"],
    "fagpu.channel_create ": ["fa-lower-channels", "fa-gpu-to-binary"],
    "fagpu.warp_specialize ": ["fa-lower-warp-specialize",
                               "fa-gpu-to-binary"],
    "faptx.": ["fa-convert-faptx-to-llvm", "fa-gpu-to-binary"],
}


def random_pipeline(rng, passes, text):
    names = sorted(passes)
    consumers = sorted(set(p for op, ps in CONSUMERS.items() if op in text
                           for p in ps if p in passes))
    args = []
    for n in range(rng.choice([1, 1, 1, 2, 2, 3])):
        name = rng.choice(names + ["canonicalize", "cse"])
        if n == 0 and consumers and rng.random() < 0.7:
            name = rng.choice(consumers)
        opts = ["%s=%s" % (o, v) for o, k in passes.get(name, [])
                if rng.random() < 0.3 and (v := option_value(rng, o, k))]
        args.append("--" + name + ("=" + " ".join(opts) if opts else ""))
    return args


def random_compile_flags(rng):
    flags = []
    for flag, values in COMPILE_FLAGS.items():
        if rng.random() >= (0.05 if flag == "pipeline" else 0.25):
            continue
        if values is None:
            flags.append("--" + flag)
        else:
            usual, edge = values
            pool = usual if rng.random() < 0.8 else edge
            flags.append("--%s=%s" % (flag, rng.choice(pool)))
    return flags


@dataclass
class Case:
    tool: str          # "opt" or "compile"
    args: list         # passes (opt) or flags (compile)
    text: str = None   # input file contents; None: fa-compile from flags


def make_case(seed, i, corpus, passes):
    rng = random.Random(seed * 1000003 + i)
    if rng.random() < 0.8:
        text = mutate(rng, rng.choice(corpus.all), corpus.all,
                      rng.choice([0, 1, 1, 2, 3]))
        return Case("opt", random_pipeline(rng, passes, text), text)
    flags = random_compile_flags(rng)
    if corpus.compile and rng.random() < 0.5:
        text = rng.choice(corpus.compile)
        return Case("compile", flags,
                    mutate(rng, text, corpus.all, rng.choice([0, 1, 1, 2])))
    return Case("compile", flags)


#===----------------------------------------------------------------------===#
# Running and classifying
#===----------------------------------------------------------------------===#


@dataclass
class Result:
    rc: int
    out: str
    err: str
    timed_out: bool = False


def run_tool(cmd, text, timeout, cwd=None):
    """Runs cmd on `text` (appended as an input file unless None). The limit
    is CPU seconds (ulimit -t), so that the machine's load does not decide
    what times out; a wall clock of 5x + 60 s catches a tool that hangs."""
    with tempfile.TemporaryDirectory(prefix="fa-fuzz-") as tmp:
        if text is not None:
            path = os.path.join(tmp, "input.mlir")
            Path(path).write_text(text)
            cmd = cmd + [path]
        limited = ["sh", "-c", 'ulimit -t %d && exec "$@"' %
                   max(1, round(timeout)), "sh"] + cmd
        # A session of its own: the wall clock kills ptxas & co. too.
        proc = subprocess.Popen(limited, cwd=cwd or tmp,
                                stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=5 * timeout + 60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        timed_out = proc.returncode in (-signal.SIGKILL, -signal.SIGXCPU)
        return Result(proc.returncode, out.decode(errors="replace"),
                      err.decode(errors="replace"), timed_out)


def normalize(message):
    """A message without the details that differ between cases of one bug:
    types, numbers, SSA and symbol names, chips."""
    message = re.sub(r"\b(tensor|memref|vector)<[^'\"]*>", r"\1<...>", message)
    message = re.sub(r"0x[0-9a-fA-F]+", "H", message)
    message = re.sub(r"\bsm_\w+", "sm_X", message)
    message = re.sub(r"%[\w$.-]+", "%V", message)
    message = re.sub(r"@[\w$.-]+", "@S", message)
    return re.sub(r"\d+", "N", message).strip()[:160]


def first_error(err):
    m = re.search(r"error: (.*)", err)
    return normalize(m.group(1)) if m else "no diagnostic"


def function_name(symbol):
    """`ns::f<T>(int) const` -> `ns::f<T>`."""
    symbol = symbol.replace("(anonymous namespace)", "anon")
    depth = 0
    for i, ch in enumerate(symbol):
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == "(" and depth == 0:
            return symbol[:i]
    return symbol


def stack_frames(err):
    """[(name, ours)] of a stack dump below the signal handler; `ours` for
    frames of the fa tools (a source file or the tool's own binary)."""
    frames = []
    for rest in re.findall(r"^\s*#\d+ 0x[0-9a-f]+ ?(.*)$", err, flags=re.M):
        m = re.match(r"(.*?) ?\(([^()]*)\+(0x[0-9a-f]+)\)$", rest)
        if m:  # symbol (module+offset)
            symbol, module, offset = m.groups()
            ours = re.search(r"/fa-[\w-]+$", module) is not None
            name = function_name(symbol) or "%s+%s" % (
                os.path.basename(module), offset)
        else:  # symbol file:line:column
            m = re.match(r"(.*) (\S+):\d+:\d+$", rest)
            symbol, source = m.groups() if m else (rest, "")
            ours = not source.startswith(("./", "/usr"))
            name = function_name(symbol)
        if name.startswith("llvm::sys::") or not frames and (
                "libc.so" in rest or "libLLVM" in rest and not symbol):
            frames = []  # still in the signal handler
            continue
        frames.append((name, ours))
    return frames


def crash_signature(err, rc, crashing_pass=lambda: None):
    """The assertion or fatal-error text, else the top frame below the
    signal handler and the first frame of the fa code; without one, the
    pass that crashed (asked of `crashing_pass()`), else the top three
    frames. None: no crash."""
    for pattern in (r"Assertion `(.*)' failed", r"LLVM ERROR: (.*)",
                    r"UNREACHABLE executed at (.*)"):
        m = re.search(pattern, err)
        if m:
            return normalize(m.group(0))
    if "Stack dump:" not in err and 0 <= rc <= 1:
        return None
    frames = stack_frames(err)
    ours = [name for name, mine in frames[1:]
            if mine and name not in ("main", "_start")]
    if ours:
        where = "%s @ %s" % (frames[0][0], ours[0])
    elif (name := crashing_pass()):
        where = "pass " + name
    else:
        where = " < ".join(name for name, _ in frames[:3]) or "?"
    what = signal.Signals(-rc).name if rc < 0 else "exit %d" % rc
    return "%s in %s" % (what, where)


def out_of_range_dims(text):
    """`tensor.dim`/`memref.dim` ops whose index is a constant outside the
    rank. Their result is undefined behaviour, and several upstream MLIR 22
    folds index the shape with it unchecked (llvm-project #70183, #205073);
    a crash on such input is tagged so the allow list can name it."""
    consts = dict(re.findall(r"(%[\w$.-]+) = arith\.constant (-?\d+) : index",
                             text))
    # Type aliases (`!o = memref<...>`) stand for their shapes.
    aliases = dict(re.findall(r"^(![\w$.-]+) = (?:tensor|memref)<([^>]*)>",
                              text, flags=re.M))
    bad = []
    for m in re.finditer(r"\b(?:tensor|memref)\.dim %[\w$.#-]+, "
                         r"(%[\w$.-]+) : (?:(?:tensor|memref)<([^>]*)>"
                         r"|(![\w$.-]+))", text):
        index = consts.get(m.group(1))
        body = m.group(2) if m.group(2) is not None else aliases.get(m.group(3))
        if index is None or body is None:
            continue
        shape = body.split(",")[0]
        rank = shape.count("x")  # `?x?x64xbf16`: one `x` per dim
        if int(index) < 0 or int(index) >= rank:
            bad.append(m.group(0))
    return bad


def out_of_range_pads(text):
    """`tensor.pad` ops with a static low or high padding that is negative
    or past any tensor size (2^40). Upstream MLIR 22's verifier accepts
    them, and one-shot-bufferize turns such a pad into an insert_slice that
    does not verify; a verifier failure on such input is tagged so the allow
    list can name it."""
    bad = []
    for m in re.finditer(r"\btensor\.pad %[\w$.#-]+ low\[([^\]]*)\] high\[([^\]]*)\]",
                         text):
        for part in (m.group(1) + "," + m.group(2)).split(","):
            part = part.strip()
            if re.fullmatch(r"-?\d+", part) and not 0 <= int(part) < 1 << 40:
                bad.append(m.group(0))
                break
    return bad


def pass_names(args):
    return " ".join(a.split("=")[0] for a in args)


# What a pipeline run last must have lowered away when it exits 0.
LOWERED = "(?:func|fa|linalg|tensor|memref|bufferization|scf|arith|math|cf)"
ELIMINATES = {
    "--fa-tiled-attention": r"fa\.\w+",
    "--fa-tiled-cpu": LOWERED + r"\.\w+",
    "--fa-reference-cpu": LOWERED + r"\.\w+",
    "--fa-gpu-forward": r"fa\.attention\b",
    "--fa-gpu-backward": r"fa\.attention_backward\b",
}


def host_code(output):
    """`output` without the bodies of its gpu.modules: device code, which the
    CPU pipelines leave alone by contract (fa-host-only rejects fa ops there;
    the GPU pipelines compile it)."""
    kept, depth = [], 0
    for line in output.splitlines():
        if depth == 0 and re.match(r"^\s*gpu\.module\b", line):
            depth = line.count("{") - line.count("}")
            continue
        if depth > 0:
            depth += line.count("{") - line.count("}")
            continue
        kept.append(line)
    return "\n".join(kept)


def ops_left(pipeline, output):
    """The ops `pipeline` should have removed that are still in `output`."""
    if pipeline not in ELIMINATES:
        return []
    if pipeline in ("--fa-tiled-cpu", "--fa-reference-cpu"):
        output = host_code(output)
    op_line = r'^\s*(?:%%[^=]*= )?"?(%s)\b' % ELIMINATES[pipeline]
    return sorted(set(re.findall(op_line, output, flags=re.M)))


@dataclass
class Finding:
    kind: str
    signature: str
    case: Case
    err: str
    note: str = ""


class Fuzzer:
    def __init__(self, tools, options):
        self.tools = tools
        self.timeout = options.timeout
        self.gpu_timeout = options.gpu_timeout
        self.ptxas = options.ptxas

    def command(self, case):
        if case.tool == "opt":
            return [self.tools.opt, "--mlir-disable-threading",
                    "--mlir-print-op-on-diagnostic=false"] + case.args
        return [self.tools.compile] + case.args + ["-o", "out"]

    def time_limit(self, case):
        slow = case.tool == "compile" or any("gpu" in a for a in case.args)
        return self.gpu_timeout if slow else self.timeout

    def run(self, case, cwd=None):
        return run_tool(self.command(case), case.text, self.time_limit(case),
                        cwd)

    def evaluate(self, case):
        """Runs a case; returns (outcome, Finding or None)."""
        if case.tool == "compile":
            with tempfile.TemporaryDirectory(prefix="fa-fuzz-") as tmp:
                return self.evaluate_compile(case, tmp)
        cmd = self.command(case)
        r = self.run(case)
        finding = self.crash_or_timeout(case, r)
        if finding:
            return "finding", finding
        if r.rc == 1:
            # A verifier error after a pass: --verify-each=0 makes it pass.
            again = run_tool(cmd + ["--verify-each=0"], case.text,
                             self.time_limit(case))
            if again.rc == 0 and not again.timed_out:
                sig = ("fa-opt: a pass left IR that does not verify: "
                       + first_error(r.err))
                if out_of_range_pads(case.text):
                    sig += " (input has a tensor.pad with an out-of-range padding)"
                return "finding", Finding("invalid-ir", sig, case, r.err,
                                          "passes with --verify-each=0")
            return "error", None
        return self.check_output(case, r)

    def crash_or_timeout(self, case, r):
        tool = "fa-opt" if case.tool == "opt" else "fa-compile"
        if r.timed_out:
            passes = pass_names(case.args) if case.tool == "opt" else ""
            return Finding("timeout", ("%s: timeout %s" % (tool, passes))
                           .strip(), case, r.err)
        sig = crash_signature(r.err, r.rc, lambda: self.crashing_pass(case))
        if sig:
            if "@" not in sig and out_of_range_dims(case.text):
                sig += " (input has a dim op with an out-of-range index)"
            return Finding("crash", "%s: %s" % (tool, sig), case, r.err)
        if r.rc == 1 and not r.err.strip():
            return Finding("silent-failure", tool + ": exit 1 without a "
                           "diagnostic", case, r.err)
        return None

    def crashing_pass(self, case):
        """The pass MLIR's crash recovery names, for an fa-opt crash."""
        if case.tool != "opt":
            return None
        with tempfile.TemporaryDirectory(prefix="fa-fuzz-") as tmp:
            again = run_tool(self.command(case) + [
                "--mlir-pass-pipeline-crash-reproducer=" + tmp + "/r.mlir",
                "--mlir-pass-pipeline-local-reproducer"], case.text,
                self.time_limit(case))
        m = re.search(r"while executing \[?`([^`]+)`", again.err)
        return m.group(1) if m else None

    def check_output(self, case, r):
        # The output parses and verifies again.
        again = run_tool([self.tools.opt, "-o", os.devnull,
                          "--mlir-print-op-on-diagnostic=false"], r.out,
                         self.timeout)
        if again.rc != 0 or again.timed_out:
            sig = (crash_signature(again.err, again.rc) or
                   first_error(again.err))
            return "finding", Finding(
                "bad-output", "fa-opt: output does not parse back: " + sig,
                case, again.err, "the output of the passes, parsed by fa-opt")
        # A pipeline lowers away what it promises to.
        last = case.args[-1].split("=")[0] if case.args else ""
        left = ops_left(last, r.out)
        if left:
            # A function left whole is one finding, whatever it holds.
            what = "func.func" if "func.func" in left else ", ".join(left[:3])
            return "finding", Finding(
                "bad-output", "fa-opt %s: exit 0 but left %s" % (last, what),
                case, r.err, "exit 0, but the output still has " +
                ", ".join(left))
        return "ok", None

    def evaluate_compile(self, case, tmp):
        r = self.run(case, cwd=tmp)
        finding = self.crash_or_timeout(case, r)
        if finding:
            return "finding", finding
        if r.rc != 0:
            return "error", None
        for manifest in sorted(Path(tmp, "out").glob("*.json")):
            data = json.loads(manifest.read_text())
            smem = max(dynamic_smem(data), default=0)
            chip = data.get("chip", "")
            tag = "%s %s" % (data.get("kind"), data.get("mma"))
            if smem > SMEM_LIMIT.get(chip, smem):
                return "finding", Finding(
                    "bad-manifest", "fa-compile: %s on %s: dynamic shared "
                    "memory over the chip's limit" % (tag, chip), case, r.err,
                    "manifest: dynamic_shared_memory %d > %d" %
                    (smem, SMEM_LIMIT[chip]))
            ptx = manifest.with_suffix(".ptx")
            if self.ptxas and ptx.exists():
                p = run_tool([self.ptxas, "-arch=" + chip, str(ptx), "-o",
                              os.devnull], None, self.gpu_timeout)
                if p.rc != 0:
                    m = re.search(r"error\s*: (.*)", p.err)
                    return "finding", Finding(
                        "bad-ptx", "ptxas rejects %s on %s: %s" % (
                            tag, chip, normalize(m.group(1) if m else "")),
                        case, p.err, "ptxas -arch=%s on the PTX" % chip)
        return "ok", None


def dynamic_smem(data):
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "dynamic_shared_memory" and isinstance(value, int):
                yield value
            else:
                yield from dynamic_smem(value)
    elif isinstance(data, list):
        for value in data:
            yield from dynamic_smem(value)


#===----------------------------------------------------------------------===#
# Reduction and reports
#===----------------------------------------------------------------------===#


def fewer_args(case):
    """Less one pass or flag, one pass less an option, or fa-compile without
    its input file."""
    if case.tool == "compile" and case.text is not None:
        yield Case(case.tool, case.args)
    for i, arg in enumerate(case.args):
        yield Case(case.tool, case.args[:i] + case.args[i + 1:], case.text)
        name, _, options = arg.partition("=")
        if case.tool == "opt":
            for drop in options.split():
                rest = " ".join(o for o in options.split() if o != drop)
                args = (case.args[:i] + [name + ("=" + rest if rest else "")] +
                        case.args[i + 1:])
                yield Case(case.tool, args, case.text)


def fewer_functions(case):
    """Less one func.func (from its line to the line closing it)."""
    lines = case.text.splitlines(keepends=True)
    for start, line in enumerate(lines):
        if "func.func" not in line:
            continue
        depth = 0
        for end in range(start, len(lines)):
            depth += lines[end].count("{") - lines[end].count("}")
            if depth <= 0 and "{" in "".join(lines[start:end + 1]):
                yield Case(case.tool, case.args,
                           "".join(lines[:start] + lines[end + 1:]))
                break


def fewer_keywords(case):
    """Less one optional keyword of an fa op."""
    for _, pattern in KEYWORDS:
        for m in re.finditer(pattern, case.text):
            yield Case(case.tool, case.args, replace_span(case.text, m, ""))


def reduce(fuzzer, finding, runs, seconds):
    """Shrinks the case while the signature stays the same, within `runs`
    runs and about `seconds`; returns the finding of the smallest case."""
    deadline = time.monotonic() + seconds

    def same(case):
        nonlocal runs, finding
        if runs <= 0 or time.monotonic() > deadline:
            return False
        runs -= 1
        _, f = fuzzer.evaluate(case)
        if f is None or f.signature != finding.signature:
            return False
        finding = f
        return True

    def shrink(case, variants):
        """Takes the first variant that keeps the signature, until none
        does."""
        progress = True
        while progress:
            progress = False
            for variant in variants(case):
                if same(variant):
                    case, progress = variant, True
                    break
        return case

    case = shrink(finding.case, fewer_args)
    if case.text is None:
        return finding
    case = shrink(shrink(case, fewer_functions), fewer_keywords)
    # Chunks of lines, halves first, down to single lines.
    lines = case.text.splitlines(keepends=True)
    chunk = len(lines) // 2
    while chunk >= 1:
        i = 0
        while i < len(lines):
            candidate = lines[:i] + lines[i + chunk:]
            if candidate and same(Case(case.tool, case.args,
                                       "".join(candidate))):
                lines = candidate
            else:
                i += chunk
        chunk //= 2
    return finding


def repro_script(fuzzer, finding, case):
    cmd = " ".join(shlex.quote(c) for c in fuzzer.command(case))
    if case.text is not None:
        cmd += " reduced.mlir"
    lines = ["#!/bin/sh", "# " + finding.signature, "cd \"$(dirname \"$0\")\""]
    if finding.note:
        lines.append("# " + finding.note)
    if finding.kind == "invalid-ir":
        lines += [cmd, "# passes:", cmd + " --verify-each=0 > /dev/null"]
    elif finding.note.startswith("the output of the passes"):
        lines += [cmd + " -o out.mlir", shlex.quote(fuzzer.tools.opt) +
                  " out.mlir > /dev/null"]
    else:
        lines.append(cmd)
    return "\n".join(lines) + "\n"


def save(fuzzer, first, reduced, out_dir):
    """OUT/<kind>-<hash>/: the input as found and reduced, the commands, the
    reduced run's stderr."""
    folder = Path(out_dir, "%s-%s" % (first.kind, hashlib.sha1(
        first.signature.encode()).hexdigest()[:10]))
    folder.mkdir(parents=True, exist_ok=True)
    if first.case.text is not None:
        Path(folder, "input.mlir").write_text(first.case.text)
    if reduced.case.text is not None:
        Path(folder, "reduced.mlir").write_text(reduced.case.text)
    Path(folder, "repro.sh").write_text(
        repro_script(fuzzer, reduced, reduced.case))
    Path(folder, "original-command.txt").write_text(
        " ".join(shlex.quote(c) for c in fuzzer.command(first.case)) + "\n")
    Path(folder, "stderr.txt").write_text(
        "\n".join(reduced.err.splitlines()[:200]) + "\n")
    return folder


def read_allowances(path):
    if not path:
        return []
    return [re.compile(l.strip()) for l in Path(path).read_text().splitlines()
            if l.strip() and not l.lstrip().startswith("#")]


#===----------------------------------------------------------------------===#
# Driver
#===----------------------------------------------------------------------===#


@dataclass
class Tools:
    opt: str
    compile: str


@dataclass
class Corpus:
    all: list
    compile: list = field(default_factory=list)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build-dir", default=os.environ.get("FA_BUILD_DIR",
                                                         "build"),
                   help="build tree with bin/fa-opt and bin/fa-compile "
                   "(default: $FA_BUILD_DIR or build)")
    p.add_argument("--bin", help="folder holding fa-opt and fa-compile "
                   "(overrides --build-dir)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", default=None,
                   help="folder of .mlir seed files (default: the lit inputs, "
                        "examples and scripts/fuzz/seeds)")
    p.add_argument("--iterations", type=int, default=0,
                   help="number of cases (0: until --time runs out)")
    p.add_argument("--time", type=float, default=60,
                   help="seconds of fuzzing when --iterations is 0")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--timeout", type=float, default=5,
                   help="CPU seconds per fa-opt run")
    p.add_argument("--gpu-timeout", type=float, default=60,
                   help="CPU seconds per fa-compile run or GPU pipeline")
    p.add_argument("--ptxas", nargs="?", const="/usr/local/cuda/bin/ptxas",
                   help="also assemble fa-compile's PTX with this ptxas")
    p.add_argument("--reduce-runs", type=int, default=300,
                   help="most runs spent reducing each new finding")
    p.add_argument("--reduce-time", type=float, default=60,
                   help="about the most seconds spent reducing each")
    p.add_argument("--allow", help="file of regexes of known signatures")
    p.add_argument("--out", default="fuzz-out", help="folder for findings")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print each finding as it is found")
    return p.parse_args()


def fuzz(fuzzer, corpus, passes, options, pool):
    """{i: (outcome, Finding or None)} for the cases of the budget; case i
    comes from (seed, i) alone, so the results do not depend on timing."""
    results, pending, i = {}, {}, 0
    deadline = time.monotonic() + options.time
    while True:
        more = (i < options.iterations if options.iterations
                else time.monotonic() < deadline)
        if more and len(pending) < 2 * options.jobs:
            case = make_case(options.seed, i, corpus, passes)
            pending[pool.submit(fuzzer.evaluate, case)] = i
            i += 1
            continue
        if not pending:
            return results
        done, _ = futures.wait(pending, return_when=futures.FIRST_COMPLETED)
        for job in done:
            n = pending.pop(job)
            results[n] = job.result()
            if results[n][1] and options.verbose:
                print("  case %d: %s" % (n, results[n][1].signature))


def main():
    options = parse_args()
    bin_dir = Path(options.bin or Path(options.build_dir, "bin")).resolve()
    tools = Tools(str(bin_dir / "fa-opt"), str(bin_dir / "fa-compile"))
    for tool in (tools.opt, tools.compile):
        if not os.access(tool, os.X_OK):
            sys.exit("fuzz: no %s (build first, or pass --bin)" % tool)
    if options.ptxas and not os.access(options.ptxas, os.X_OK):
        options.ptxas = None
    allowances = read_allowances(options.allow)
    fuzzer = Fuzzer(tools, options)
    passes = registered_passes(tools.opt)
    pool = futures.ThreadPoolExecutor(options.jobs)
    start = time.monotonic()

    seeds = read_seeds(options.seeds)
    corpus = Corpus(list(dict.fromkeys(seeds + derive_seeds(tools, seeds,
                                                            pool))))
    corpus.compile = [s for s in corpus.all if "bufferization.to_tensor" in s
                      and re.search(r"fa\.attention(_backward)? ", s)]
    print("fuzz: %d distinct seeds (%d for fa-compile), %d fa passes and "
          "pipelines, seed %d, %d jobs" % (
              len(corpus.all), len(corpus.compile), len(passes), options.seed,
              options.jobs))
    results = fuzz(fuzzer, corpus, passes, options, pool)
    fuzz_seconds = time.monotonic() - start

    # Group by signature; the earliest case stands for it and is reduced
    # unless it is known (or a timeout).
    groups, outcomes = {}, {}
    for n in sorted(results):
        outcome, finding = results[n]
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if finding:
            groups.setdefault(finding.signature, []).append(finding)
    known = {sig: any(a.search(sig) for a in allowances) for sig in groups}
    reductions = {sig: pool.submit(
        reduce, fuzzer, fs[0], 0 if known[sig] or fs[0].kind == "timeout"
        else options.reduce_runs, options.reduce_time)
        for sig, fs in groups.items()}
    folders = {sig: save(fuzzer, groups[sig][0], job.result(), options.out)
               for sig, job in reductions.items()}
    pool.shutdown()

    print("fuzz: %d cases in %.0f s (%.0f s with reduction): %s" % (
        len(results), fuzz_seconds, time.monotonic() - start, ", ".join(
            "%d %s" % (n, o) for o, n in sorted(outcomes.items()))))
    for sig in sorted(groups, key=lambda s: (known[s], s)):
        print("  %s %4dx  %s\n          %s" % (
            "known" if known[sig] else "NEW  ", len(groups[sig]), sig,
            folders[sig]))
    unseen = [a.pattern for a in allowances
              if not any(a.search(sig) for sig in groups)]
    if unseen:
        print("fuzz: %d allowed signatures not seen this run%s" % (
            len(unseen), ":\n  " + "\n  ".join(unseen) if options.verbose
            else " (-v lists them)"))
    new = [sig for sig in groups if not known[sig]]
    print("fuzz: %d distinct signatures, %d new" % (len(groups), len(new)))
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
