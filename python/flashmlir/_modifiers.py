"""Score and mask modifiers written in Python (FlexAttention's `score_mod`
and `mask_mod`), traced into the fa dialect's regions.

    def alibi(score, b, h, q_idx, kv_idx):
        return score + slopes[h] * (kv_idx - q_idx)

    def document(b, h, q_idx, kv_idx):
        return doc_ids[q_idx] == doc_ids[kv_idx]

`trace(score_mod, mask_mod)` calls the functions once on symbolic values
and records every operation as MLIR (arith, math, tensor.extract of the
captured tensors): the regions of `fa.attention` (docs/ARCHITECTURE.md,
"Score and mask modifiers"). The same functions evaluated on torch index
tensors are the CPU reference (`_reference.attention_modified`); the
custom ops, which get the traced key instead of the functions (_ops.py),
evaluate the traced regions on those tensors (`from_key`,
`Traced.functions`). Under torch.compile, dynamo traces `trace` itself.

Supported: + - * / // % and unary -, comparisons, & | ^ ~ on booleans,
abs(), Python int / float / bool constants, torch.where, torch.maximum /
minimum / clamp, torch.tanh / exp / exp2 / log / log2 / sqrt / rsqrt /
sigmoid / sin / cos / abs, and indexing a tensor defined outside the
function with the indices (a capture). `if`, `int()`, loops over symbolic
values and other torch functions raise UnsupportedError naming them.
"""

from __future__ import annotations

import hashlib
import math
import operator
import re
import struct
import threading
import weakref
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch.overrides import TorchFunctionMode

from ._errors import UnsupportedError

# Element types of captured tensors, and how a region reads them.
_CAPTURE_TYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
                  torch.int32: "i32", torch.int64: "i64", torch.bool: "i1"}
_INTS = ("index", "i32", "i64")


class _Tracer:
    """The ops of one region, in order, and the captures both regions share."""

    def __init__(self, captures: List[torch.Tensor]):
        self.lines: List[str] = []
        self.count = 0
        self.captures = captures

    def emit(self, text: str, type_: str) -> "Sym":
        name = f"%v{self.count}"
        self.count += 1
        self.lines.append(f"{name} = {text}")
        return Sym(self, name, type_)

    def const(self, value, type_: str) -> "Sym":
        value = _python_number(value)
        if type_ == "i1":
            return self.emit(f"arith.constant {'true' if value else 'false'}", "i1")
        if type_ == "f32":
            v = float(value)
            if math.isinf(v):
                return self.emit(f"arith.constant {'0xFF800000' if v < 0 else '0x7F800000'} : f32",
                                 "f32")
            if math.isnan(v):
                return self.emit("arith.constant 0x7FC00000 : f32", "f32")
            return self.emit(f"arith.constant {v!r} : f32", "f32")
        return self.emit(f"arith.constant {int(value)} : {type_}", type_)

    def capture(self, t: torch.Tensor) -> int:
        for n, c in enumerate(self.captures):
            if c is t:
                return n
        if t.dtype not in _CAPTURE_TYPES:
            raise UnsupportedError(f"a modifier reads a {t.dtype} tensor; captures may be "
                                   f"{', '.join(str(d) for d in _CAPTURE_TYPES)}")
        if t.dim() == 0:
            raise UnsupportedError("a modifier reads a 0-d tensor: pass a Python number or "
                                   "index a 1-element tensor")
        self.captures.append(t)
        return len(self.captures) - 1


def _python_number(x):
    """x, a Python bool, int or float, as a constant of a region. Under
    torch.compile (whose dynamo traces this module, see _ops.py) sizes and
    numbers the compiled code receives may be symbolic (SymInt, SymFloat),
    and str() of one does not trace: operator.index and as_integer_ratio
    make dynamo specialize it, guarding on its value (a kernel builds its
    constants in, so another value is another kernel anyway)."""
    if isinstance(x, bool):
        return x
    if isinstance(x, int):
        return operator.index(x)
    if x != x or x in (math.inf, -math.inf):   # (no integer ratio)
        return float(x)
    n, d = x.as_integer_ratio()
    return n / d


def capture_type(t: torch.Tensor) -> str:
    """A capture's MLIR type; its sizes specialized under torch.compile (see
    _python_number: a kernel is compiled for the captures' shapes)."""
    return ("tensor<" + "x".join(str(operator.index(d)) for d in t.shape) + "x"
            + _CAPTURE_TYPES[t.dtype] + ">")


def _unsupported(what: str, hint: str = ""):
    raise UnsupportedError(f"score_mod / mask_mod: {what} is not supported in a traced "
                           f"modifier{hint}")


class Sym:
    """A symbolic scalar of a modifier: an SSA value of type f32, index, an
    integer type of a captured tensor, or i1."""

    __slots__ = ("tr", "name", "type")

    def __init__(self, tr: _Tracer, name: str, type_: str):
        self.tr, self.name, self.type = tr, name, type_

    # Conversions between the region's types.
    def to(self, type_: str) -> "Sym":
        if self.type == type_:
            return self
        t = self.tr
        if self.type == "i1":
            _unsupported(f"using a boolean as {type_}")
        if type_ == "f32":
            if self.type in ("f16", "bf16"):
                return t.emit(f"arith.extf {self.name} : {self.type} to f32", "f32")
            x = self if self.type != "index" else t.emit(
                f"arith.index_cast {self.name} : index to i64", "i64")
            return t.emit(f"arith.sitofp {x.name} : {x.type} to f32", "f32")
        if type_ == "index" and self.type in ("i32", "i64"):
            return t.emit(f"arith.index_cast {self.name} : {self.type} to index", "index")
        _unsupported(f"using a {self.type} value as {type_}")

    def _lift(self, other) -> "Sym":
        if isinstance(other, Sym):
            if other.tr is not self.tr:
                _unsupported("mixing values of the score_mod and the mask_mod")
            return other
        if isinstance(other, bool):
            return self.tr.const(other, "i1")
        if isinstance(other, int):
            return self.tr.const(other, self.type if self.type in _INTS else "f32")
        if isinstance(other, float):
            return self.tr.const(other, "f32")
        _unsupported(f"a {type(other).__name__} operand")

    def _common(self, other, floating=False) -> Tuple["Sym", "Sym"]:
        a, b = self, self._lift(other)
        if floating or "f32" in (a.type, b.type) or a.type in ("f16", "bf16") or \
                b.type in ("f16", "bf16"):
            return a.to("f32"), b.to("f32")
        if a.type != b.type:
            if "i1" in (a.type, b.type):
                _unsupported("mixing booleans and numbers")
            return a.to("index"), b.to("index")
        return a, b

    def _arith(self, other, iop: str, fop: str, reverse=False) -> "Sym":
        a, b = self._common(other)
        if reverse:
            a, b = b, a
        if a.type == "i1":
            _unsupported(f"arithmetic ({iop}) on booleans")
        op = fop if a.type == "f32" else iop
        return self.tr.emit(f"arith.{op} {a.name}, {b.name} : {a.type}", a.type)

    def __add__(self, o): return self._arith(o, "addi", "addf")
    def __radd__(self, o): return self._arith(o, "addi", "addf", True)
    def __sub__(self, o): return self._arith(o, "subi", "subf")
    def __rsub__(self, o): return self._arith(o, "subi", "subf", True)
    def __mul__(self, o): return self._arith(o, "muli", "mulf")
    def __rmul__(self, o): return self._arith(o, "muli", "mulf", True)

    def __truediv__(self, o, reverse=False):
        a, b = self._common(o, floating=True)
        if reverse:
            a, b = b, a
        return self.tr.emit(f"arith.divf {a.name}, {b.name} : f32", "f32")

    def __rtruediv__(self, o): return self.__truediv__(o, True)

    def __floordiv__(self, o, reverse=False):
        a, b = self._common(o)
        if reverse:
            a, b = b, a
        if a.type == "f32":
            q = self.tr.emit(f"arith.divf {a.name}, {b.name} : f32", "f32")
            return self.tr.emit(f"math.floor {q.name} : f32", "f32")
        return self.tr.emit(f"arith.floordivsi {a.name}, {b.name} : {a.type}", a.type)

    def __rfloordiv__(self, o): return self.__floordiv__(o, True)

    def __mod__(self, o, reverse=False):
        a, b = self._common(o)
        if reverse:
            a, b = b, a
        if a.type == "f32":
            _unsupported("% on floating-point values")
        # Python's modulo has the divisor's sign: a - floor(a / b) * b.
        q = a.tr.emit(f"arith.floordivsi {a.name}, {b.name} : {a.type}", a.type)
        m = a.tr.emit(f"arith.muli {q.name}, {b.name} : {a.type}", a.type)
        return a.tr.emit(f"arith.subi {a.name}, {m.name} : {a.type}", a.type)

    def __rmod__(self, o): return self.__mod__(o, True)

    def __neg__(self):
        if self.type == "f32" or self.type in ("f16", "bf16"):
            x = self.to("f32")
            return self.tr.emit(f"arith.negf {x.name} : f32", "f32")
        return self.tr.const(0, self.type if self.type != "i1" else "index") - self

    def __pos__(self): return self

    def __abs__(self):
        if self.type in _INTS:
            return torch.where(self < 0, -self, self)
        return _math("absf", self)

    def _compare(self, other, ipred: str, fpred: str) -> "Sym":
        a, b = self._common(other)
        if a.type == "f32":
            return self.tr.emit(f"arith.cmpf {fpred}, {a.name}, {b.name} : f32", "i1")
        if a.type == "i1" and ipred not in ("eq", "ne"):
            _unsupported("ordering booleans")
        return self.tr.emit(f"arith.cmpi {ipred}, {a.name}, {b.name} : {a.type}", "i1")

    def __lt__(self, o): return self._compare(o, "slt", "olt")
    def __le__(self, o): return self._compare(o, "sle", "ole")
    def __gt__(self, o): return self._compare(o, "sgt", "ogt")
    def __ge__(self, o): return self._compare(o, "sge", "oge")
    def __eq__(self, o): return self._compare(o, "eq", "oeq")
    def __ne__(self, o): return self._compare(o, "ne", "une")
    __hash__ = None

    def _logic(self, other, op: str, reverse=False) -> "Sym":
        a, b = self, self._lift(other)
        if reverse:
            a, b = b, a
        if a.type != b.type or a.type == "f32":
            _unsupported(f"{op} of {a.type} and {b.type}")
        return self.tr.emit(f"arith.{op} {a.name}, {b.name} : {a.type}", a.type)

    def __and__(self, o): return self._logic(o, "andi")
    def __rand__(self, o): return self._logic(o, "andi", True)
    def __or__(self, o): return self._logic(o, "ori")
    def __ror__(self, o): return self._logic(o, "ori", True)
    def __xor__(self, o): return self._logic(o, "xori")
    def __rxor__(self, o): return self._logic(o, "xori", True)

    def __invert__(self):
        if self.type != "i1":
            _unsupported("~ of a number")
        return self ^ True

    def __bool__(self):
        _unsupported("Python control flow on a traced value (`if`, `and`, `or`, `not`, "
                     "chained comparisons)", " (use torch.where, &, | and ~)")

    def __index__(self):
        _unsupported("using a traced value as a Python int")

    def __int__(self):
        _unsupported("int() of a traced value")

    def __float__(self):
        _unsupported("float() of a traced value")

    def __iter__(self):
        _unsupported("iterating over a traced value")

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        handler = _TORCH.get(func)
        if handler is None:
            name = getattr(func, "__name__", str(func))
            _unsupported(f"torch.{name}")
        return handler(*args, **kwargs)


def _math(op: str, x) -> Sym:
    if not isinstance(x, Sym):
        _unsupported(f"math.{op} of a constant (compute it in Python)")
    x = x.to("f32")
    return x.tr.emit(f"math.{op} {x.name} : f32", "f32")


def _where(cond, a, b):
    anchor = next((x for x in (cond, a, b) if isinstance(x, Sym)), None)
    if anchor is None:
        _unsupported("torch.where of constants")
    c = anchor._lift(cond)
    if c.type != "i1":
        _unsupported("torch.where with a non-boolean condition")
    if isinstance(a, Sym):
        x, y = a._common(b)
    elif isinstance(b, Sym):
        y, x = b._common(a)
    else:
        kind = "f32" if isinstance(a, float) or isinstance(b, float) else "index"
        x, y = anchor.tr.const(a, kind), anchor.tr.const(b, kind)
    return c.tr.emit(f"arith.select {c.name}, {x.name}, {y.name} : {x.type}", x.type)


def _extremum(iop: str, fop: str):
    def f(a, b=None, **kw):
        if b is None:
            b = kw.pop("other", None)
        if b is None:
            _unsupported("a reduction (torch.max / min of one value)")
        s = a if isinstance(a, Sym) else b
        x, y = s._common(b if s is a else a)
        op = fop if x.type == "f32" else iop
        return s.tr.emit(f"arith.{op} {x.name}, {y.name} : {x.type}", x.type)
    return f


def _clamp(x, min=None, max=None):
    # (The handlers directly: torch's own argument parsing refuses numbers.)
    if min is not None:
        x = _TORCH[torch.maximum](x, min)
    if max is not None:
        x = _TORCH[torch.minimum](x, max)
    return x


def _sigmoid(x):
    return 1.0 / (1.0 + torch.exp(-x))


def _getitem(t, index):
    if not isinstance(t, torch.Tensor):
        _unsupported("indexing a traced value")
    index = index if isinstance(index, tuple) else (index,)
    syms = [i for i in index if isinstance(i, Sym)]
    tr = syms[0].tr
    if len(index) != t.dim():
        _unsupported(f"indexing a {t.dim()}-d tensor with {len(index)} indices (one per "
                     "dimension)")
    idx = []
    for i in index:
        if isinstance(i, Sym):
            idx.append(i.to("index"))
        elif isinstance(i, int) and not isinstance(i, bool):
            idx.append(tr.const(i, "index"))
        else:
            _unsupported(f"a {type(i).__name__} index (slices, tensors)")
    n = tr.capture(t)
    elt = _CAPTURE_TYPES[t.dtype]
    return tr.emit(f"tensor.extract %c{n}[{', '.join(i.name for i in idx)}] : "
                   f"{capture_type(t)}", elt)


_TORCH: Dict[Callable, Callable] = {
    torch.where: _where,
    torch.maximum: _extremum("maxsi", "maximumf"),
    torch.minimum: _extremum("minsi", "minimumf"),
    torch.max: _extremum("maxsi", "maximumf"),
    torch.min: _extremum("minsi", "minimumf"),
    torch.clamp: _clamp,
    torch.sigmoid: _sigmoid,
    torch.Tensor.__getitem__: _getitem,
    operator.getitem: _getitem,   # (what strict torch.export's dynamo hands the mode)
    torch.abs: abs,
}
for _name, _op in (("tanh", "tanh"), ("exp", "exp"), ("exp2", "exp2"), ("log", "log"),
                   ("log2", "log2"), ("sqrt", "sqrt"), ("rsqrt", "rsqrt"), ("sin", "sin"),
                   ("cos", "cos"), ("floor", "floor"), ("ceil", "ceil")):
    _TORCH[getattr(torch, _name)] = (lambda op: lambda x: _math(op, x))(_op)


def _has_sym(args) -> bool:
    return any(isinstance(a, Sym) or (isinstance(a, (tuple, list)) and _has_sym(a))
               for a in args)


class _TracingMode(TorchFunctionMode):
    """Active while a modifier runs on traced values: a torch function given
    one anywhere in its arguments goes to the tracer's handlers (as through
    Sym.__torch_function__), others run. Under torch.compile, dynamo looks
    for __torch_function__ in the arguments but not inside tuples, so that
    `table[h, kv_idx]` reaches the tracer through the mode only."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _has_sym(args) or _has_sym(kwargs.values()):
            return Sym.__torch_function__(func, types, args, kwargs)
        return func(*args, **kwargs)


class Traced:
    """The traced regions (MLIR text) of a score_mod and / or a mask_mod and
    the tensors they read, in the order of the op's `captures(...)`."""

    def __init__(self, score_mod: Optional[str], mask_mod: Optional[str],
                 captures: List[torch.Tensor], key_range_rows: Optional[int] = None):
        self.score_mod, self.mask_mod, self.captures = score_mod, mask_mod, captures
        # The op's key_ranges(%r rows G) (None: none): a compile-time G, the
        # [B, Hq, ceil(Nq / G), 4] int32 tensor an argument of each call.
        self.key_range_rows = key_range_rows
        self._key = self._digest = None
        self._ranged: Dict[int, "Traced"] = {}
        self._base: Optional["Traced"] = None   # (with key_ranges: the one without)

    def with_key_ranges(self, rows: Optional[int]) -> "Traced":
        """These modifiers with key_ranges in groups of `rows` query rows
        (None: without); one object per rows, so its key is made once."""
        if rows == self.key_range_rows:
            return self
        if self.key_range_rows is not None and self._base is None:
            self._base = Traced(self.score_mod, self.mask_mod, self.captures)
        base = self._base or self
        if rows is None:
            return base
        hit = base._ranged.get(rows)
        if hit is None:
            hit = base._ranged[rows] = Traced(base.score_mod, base.mask_mod, base.captures, rows)
            hit._base = base
        return hit

    def regions(self) -> str:
        """`captures(...) score_mod(...) {...} mask_mod(...) {...}` for an
        fa.attention whose capture operands are %cap0, %cap1, ..."""
        return _regions(self.score_mod, self.mask_mod, len(self.captures))

    def capture_types(self) -> List[str]:
        return [capture_type(t) for t in self.captures]

    def capture_specs(self) -> List[Tuple[str, Tuple[int, ...]]]:
        """(element type, shape) of each capture, as a kernel manifest lists them."""
        return [(_CAPTURE_TYPES[t.dtype], tuple(t.shape)) for t in self.captures]

    def module(self, q_shape, k_shape, v_shape, elt: str = "f16", attrs: str = "") -> str:
        """A func.func applying fa.attention with these modifiers to q, k, v of
        the given [B, H, N, D] shapes (`attrs`: e.g. "mask<causal> softcap
        30.0"), the captures as trailing arguments: input for fa-opt and
        fa-compile."""
        t = lambda shape: "tensor<" + "x".join(str(d) for d in shape) + f"x{elt}>"
        o_shape = tuple(q_shape[:3]) + (v_shape[3],)
        out_t, lse_t = t(o_shape), "tensor<" + "x".join(str(d) for d in q_shape[:3]) + "xf32>"
        caps = self.capture_types()
        args = [f"%q: {t(q_shape)}", f"%k: {t(k_shape)}", f"%v: {t(v_shape)}"]
        ranges = []
        if self.key_range_rows is not None:
            groups = -(-q_shape[2] // self.key_range_rows)
            ranges = [f"tensor<{q_shape[0]}x{q_shape[1]}x{groups}x4xi32>"]
            args.append(f"%ranges: {ranges[0]}")
            attrs = f"{attrs} key_ranges(%ranges rows {self.key_range_rows})".strip()
        args += [f"%cap{n}: {c}" for n, c in enumerate(caps)]
        ins = ", ".join([t(q_shape), t(k_shape), t(v_shape)] + ranges + caps)
        body = "\n".join("    " + line for line in self.regions().splitlines())
        return (f"func.func @attention({', '.join(args)}) -> ({out_t}, {lse_t}) {{\n"
                f"  %o, %l = fa.attention %q, %k, %v {attrs}\n{body}\n"
                f"    : ({ins}) -> ({out_t}, {lse_t})\n"
                f"  return %o, %l : {out_t}, {lse_t}\n}}\n")

    def key(self) -> str:
        """The traced IR, the captures' types and the key ranges' rows: what
        a compiled kernel of these modifiers is cached by (the captures'
        and the ranges' values are arguments)."""
        if self._key is None:
            self._key = self.regions() + "|" + ",".join(self.capture_types())
            if self.key_range_rows is not None:
                self._key += f"|key_ranges rows {self.key_range_rows}"
        return self._key

    def op_key(self) -> str:
        """key() on one line (backslash and line break escaped as \\\\ and
        \\n): the custom ops' argument, which from_key also takes.
        Inductor's generated wrapper repeats a graph's arguments in
        comments, where the IR's line breaks would end the comment and
        leave MLIR as Python source (a SyntaxError in the compiled backward
        on CUDA). (str methods: dynamo traces them.)"""
        return self.key().replace("\\", "\\\\").replace("\n", "\\n")

    def digest(self) -> str:
        """sha256 (hex) of key(): the modifiers key of a kernel's manifest."""
        if self._digest is None:
            self._digest = hashlib.sha256(self.key().encode()).hexdigest()
        return self._digest

    def functions(self):
        """score_mod(s, b, h, q_idx, kv_idx), mask_mod(b, h, q_idx, kv_idx)
        and score_mod_grad(s, b, h, q_idx, kv_idx) -> (score, d score / d s)
        (None for an absent region): the traced regions evaluated on torch
        tensors, reading the captures. What the custom ops run for CPU
        tensors, where only the IR is at hand (see from_key); in the
        kernels' types (f32 math, index arithmetic in int64), the
        derivative by the chain rule over the region's operations."""
        env = {f"%c{n}": t for n, t in enumerate(self.captures)}

        def bound(text, score, grad):
            program = _program(text)
            names = ("%s", "%b", "%h", "%i", "%j") if score else ("%b", "%h", "%i", "%j")
            return lambda *args: _run(program, dict(env, **dict(zip(names, args))), grad)
        score, mask = self.score_mod, self.mask_mod
        return (score and bound(score, True, False), mask and bound(mask, False, False),
                score and bound(score, True, True))


def _regions(score_mod: Optional[str], mask_mod: Optional[str], captures: int) -> str:
    parts = []
    if captures:
        parts.append("captures(" + ", ".join(f"%cap{n}" for n in range(captures)) + ")")
    for text in (score_mod, mask_mod):
        if text is not None:
            parts.append(text)
    return "\n".join(parts)


def _region(fn, captures, score: bool) -> str:
    tr = _Tracer(captures)
    names = ["%b", "%h", "%i", "%j"]
    args = [Sym(tr, n, "index") for n in names]
    if score:
        args.insert(0, Sym(tr, "%s", "f32"))
    result = fn(*args)
    want = "f32" if score else "i1"
    if isinstance(result, Sym):
        if result.tr is not tr:
            _unsupported("returning a value of the other modifier")
        if score:
            if result.type == "i1":
                raise UnsupportedError("score_mod returns a boolean; a mask belongs in "
                                       "mask_mod")
            result = result.to("f32")
        elif result.type != "i1":
            raise UnsupportedError(f"mask_mod returns a {result.type} value, not a boolean "
                                   "(a comparison)")
    elif score and isinstance(result, (int, float)) and not isinstance(result, bool):
        result = tr.const(result, "f32")
    elif not score and isinstance(result, bool):
        result = tr.const(result, "i1")
    else:
        raise UnsupportedError(f"{'score_mod' if score else 'mask_mod'} returns a "
                               f"{type(result).__name__}, not a traced scalar")
    return tr, result, want


def trace(score_mod: Optional[Callable] = None,
          mask_mod: Optional[Callable] = None) -> Traced:
    """Traces score_mod(score, b, h, q_idx, kv_idx) -> score and
    mask_mod(b, h, q_idx, kv_idx) -> bool into fa.attention's regions."""
    captures: List[torch.Tensor] = []
    traced = []
    with _TracingMode():
        for fn, score in ((score_mod, True), (mask_mod, False)):
            if fn is None:
                traced.append(None)
                continue
            if not callable(fn):
                raise TypeError(f"{'score_mod' if score else 'mask_mod'} must be callable")
            traced.append(_region(fn, captures, score))
    texts = []
    for item, score in zip(traced, (True, False)):
        if item is None:
            texts.append(None)
            continue
        tr, result, want = item
        args = (["%s: f32"] if score else []) + ["%b: index", "%h: index", "%i: index",
                                                 "%j: index"]
        # Every region receives every capture (both modifiers' tensors).
        args += [f"%c{n}: {capture_type(t)}" for n, t in enumerate(captures)]
        body = "\n".join("  " + line for line in tr.lines)
        name = "score_mod" if score else "mask_mod"
        texts.append(f"{name}({', '.join(args)}) {{\n{body}\n  fa.yield {result.name} : "
                     f"{want}\n}}")
    return Traced(texts[0], texts[1], captures)


# The last Traced of each (score_mod, mask_mod): see traced().
_cache: Dict[Tuple[int, int], Tuple[object, object, Traced]] = {}
_cache_lock = threading.Lock()
_CACHE_SIZE = 256


def _ref(fn, slot):
    """A weak reference to `fn` that drops the cache entry `slot` with it
    (None for None); fn itself when it takes none."""
    if fn is None:
        return None

    def drop(ref):
        entry = _cache.get(slot)
        if entry is not None and any(ref is r for r in entry[:2]):
            _cache.pop(slot, None)   # (no lock: this may run inside a locked section)
    try:
        return weakref.ref(fn, drop)
    except TypeError:
        return fn


def _alive(ref, fn) -> bool:
    return (ref() if isinstance(ref, weakref.ref) else ref) is fn


def traced(score_mod: Optional[Callable] = None,
           mask_mod: Optional[Callable] = None) -> Traced:
    """trace(score_mod, mask_mod), returning the Traced of the previous call
    of the same function objects when the new trace is the same IR over the
    same tensor objects (so its key, digest and module are computed once).
    The functions are traced on every call: what they read (globals, closure
    cells, attributes, Python numbers that become constants) may change
    between calls, and only tracing sees it."""
    new = trace(score_mod, mask_mod)
    slot = (id(score_mod), id(mask_mod))
    with _cache_lock:
        hit = _cache.get(slot)
    if hit is not None:
        sref, mref, old = hit
        if (_alive(sref, score_mod) and _alive(mref, mask_mod) and old.key() == new.key()
                and len(old.captures) == len(new.captures)
                and all(a is b for a, b in zip(old.captures, new.captures))):
            return old
    with _cache_lock:
        if len(_cache) >= _CACHE_SIZE:
            _cache.clear()
        _cache[slot] = (_ref(score_mod, slot), _ref(mask_mod, slot), new)
    return new


def trace_modifiers(score_mod: Optional[Callable] = None,
                    mask_mod: Optional[Callable] = None) -> Traced:
    """flashmlir.trace_modifiers(score_mod=None, mask_mod=None): the fa
    dialect's regions of the modifiers (Traced.regions(), the captured
    tensors in Traced.captures); UnsupportedError for Python the tracer
    does not take."""
    return trace(score_mod, mask_mod)


def index_grids(b: int, h: int, nq: int, nk: int, device) -> Tuple[torch.Tensor, ...]:
    """b, h, q_idx, kv_idx as int64 tensors broadcasting to [B, H, Nq, Nk]:
    what the functions see in the reference."""
    def ar(n, dim):
        shape = [1, 1, 1, 1]
        shape[dim] = n
        return torch.arange(n, device=device).view(shape)
    return ar(b, 0), ar(h, 1), ar(nq, 2), ar(nk, 3)


# ---------------------------------------------------------------------------
# A Traced from its key, and its regions on torch tensors: the custom ops
# with modifiers (_ops.py) take the key, so the IR travels in the graph
# (a compiled or exported graph needs nothing registered at trace time).
# ---------------------------------------------------------------------------

_KEYS_CACHED = 256
_keys: Dict[str, tuple] = {}
# What key() appends for key_ranges(%r rows G).
_RANGES_SUFFIX = re.compile(r"\|key_ranges rows (\d+)$")


def _parse_key(key: str):
    """(score_mod region, mask_mod region, capture types, key ranges' rows
    or None) of a Traced.key()."""
    hit = _keys.get(key)
    if hit is not None:
        return hit
    body, rows = key, None
    ranged = _RANGES_SUFFIX.search(key)
    if ranged is not None:
        body, rows = key[:ranged.start()], int(ranged.group(1))
    regions, _, types = body.rpartition("|")
    lines = regions.splitlines()
    found = {}
    for n, line in enumerate(lines):
        for name in ("score_mod", "mask_mod"):
            if line.startswith(name + "(") and "}" in lines[n:]:
                found[name] = "\n".join(lines[n:lines.index("}", n) + 1])
    parsed = (found.get("score_mod"), found.get("mask_mod"),
              tuple(types.split(",")) if types else (), rows)
    if (not found or _regions(parsed[0], parsed[1], len(parsed[2])) != regions
            or (rows is not None and rows < 1)):
        raise ValueError(f"not the key of traced modifiers (Traced.key()): {key[:60]!r}...")
    with _cache_lock:
        if len(_keys) >= _KEYS_CACHED:
            _keys.clear()
        _keys[key] = parsed
    return parsed


def from_key(key: str, captures) -> Traced:
    """The Traced whose key() is `key`, reading `captures`; ValueError when
    they are not the tensors its regions read (number, dtypes, shapes:
    checked without their data, so for fake tensors too). `key` may be
    in op_key()'s form."""
    if "\n" not in key:   # (every key() has several lines)
        key = re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), key)
    score_mod, mask_mod, types, rows = _parse_key(key)
    got = tuple(capture_type(t) if t.dtype in _CAPTURE_TYPES else str(t.dtype)
                for t in captures)
    if got != types:
        raise ValueError(f"score_mod / mask_mod read {len(types)} tensor(s) of types "
                         f"{list(types)}, got {len(got)}: {list(got)}")
    traced = Traced(score_mod, mask_mod, list(captures), rows)
    traced._key = key
    return traced


_TORCH_TYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
                "index": torch.int64, "i64": torch.int64, "i32": torch.int32, "i1": torch.bool}
_UNARY = {"arith.negf": torch.neg, "math.tanh": torch.tanh, "math.exp": torch.exp,
          "math.exp2": torch.exp2, "math.log": torch.log, "math.log2": torch.log2,
          "math.sqrt": torch.sqrt, "math.rsqrt": torch.rsqrt, "math.sin": torch.sin,
          "math.cos": torch.cos, "math.floor": torch.floor, "math.ceil": torch.ceil,
          "math.absf": torch.abs}
_BINARY = {"arith.addi": torch.add, "arith.addf": torch.add, "arith.subi": torch.sub,
           "arith.subf": torch.sub, "arith.muli": torch.mul, "arith.mulf": torch.mul,
           "arith.divf": torch.div,
           "arith.floordivsi": lambda a, b: torch.div(a, b, rounding_mode="floor"),
           "arith.maxsi": torch.maximum, "arith.maximumf": torch.maximum,
           "arith.minsi": torch.minimum, "arith.minimumf": torch.minimum,
           "arith.andi": torch.bitwise_and, "arith.ori": torch.bitwise_or,
           "arith.xori": torch.bitwise_xor}
_PREDICATES = {"slt": torch.lt, "sle": torch.le, "sgt": torch.gt, "sge": torch.ge,
               "eq": torch.eq, "ne": torch.ne, "olt": torch.lt, "ole": torch.le,
               "ogt": torch.gt, "oge": torch.ge, "oeq": torch.eq, "une": torch.ne}
_CASTS = ("arith.extf", "arith.sitofp", "arith.index_cast")
_programs: Dict[str, tuple] = {}


def _constant(literal: str, type_: str) -> torch.Tensor:
    if not type_:
        return torch.tensor(literal == "true")
    if literal.startswith("0x"):   # (infinities and NaN: their f32 bits)
        value = struct.unpack(">f", bytes.fromhex(literal[2:]))[0]
    else:
        value = float(literal) if type_ == "f32" else int(literal)
    return torch.tensor(value, dtype=_TORCH_TYPES[type_])


def _program(text: str):
    """A region's operations as (result, op, operands, attribute, result
    dtype), and the name it yields (parsed once per region)."""
    hit = _programs.get(text)
    if hit is not None:
        return hit
    steps = []
    for line in text.splitlines()[1:-1]:
        line = line.strip()
        if line.startswith("fa.yield "):
            break
        name, rhs = line.split(" = ", 1)
        op, _, rest = rhs.partition(" ")
        body, _, type_ = rest.partition(" : ")
        attr = None
        if op == "arith.constant":
            attr = _constant(body, type_)
            type_ = type_ or "i1"
        elif op in ("arith.cmpi", "arith.cmpf"):
            attr, type_ = _PREDICATES[body.split(",")[0]], "i1"
        elif op == "tensor.extract":
            type_ = type_[:-1].rsplit("x", 1)[1]   # the element type of tensor<...xT>
        elif " to " in type_:
            type_ = type_.split(" to ")[1]
        steps.append((name, op, re.findall(r"%\w+", body), attr, _TORCH_TYPES[type_]))
    program = (steps, line.split()[1])
    with _cache_lock:
        if len(_programs) >= _KEYS_CACHED:
            _programs.clear()
        _programs[text] = program
    return program


def _run(program, env, grad: bool):
    """A region's yield on the tensors of `env` (block arguments and
    captures by name); with `grad`, and its derivative in %s (None: 0)."""
    steps, result = program
    tangents = {"%s": torch.ones(())} if grad else {}
    for name, op, operands, attr, dtype in steps:
        x = [env[o] for o in operands]
        if op == "arith.constant":
            y = attr
        elif op == "tensor.extract":
            y = x[0][tuple(x[1:])]
        elif attr is not None:
            y = attr(x[0], x[1])
        elif op == "arith.select":
            y = torch.where(x[0], x[1], x[2])
        elif op in _CASTS:
            y = x[0]
        elif op in _UNARY:
            y = _UNARY[op](x[0])
        else:
            y = _BINARY[op](x[0], x[1])
        env[name] = y = y.to(dtype)
        if grad and dtype == torch.float32:
            t = _tangent(op, x, [tangents.get(o) for o in operands], y)
            if t is not None:
                tangents[name] = t
    return (env[result], tangents.get(result)) if grad else env[result]


def _plus(a, b):
    return a if b is None else b if a is None else a + b


def _tangent(op, x, t, y):
    """The derivative of an f32 operation's result y from its operands x and
    theirs t (None: 0); None when 0."""
    if all(d is None for d in t):
        return None
    if op == "arith.addf":
        return _plus(t[0], t[1])
    if op == "arith.subf":
        return _plus(t[0], None if t[1] is None else -t[1])
    if op == "arith.mulf":
        return _plus(None if t[0] is None else t[0] * x[1],
                     None if t[1] is None else x[0] * t[1])
    if op == "arith.divf":
        return _plus(None if t[0] is None else t[0] / x[1],
                     None if t[1] is None else -y * t[1] / x[1])
    zero = torch.zeros(())
    if op in ("arith.maximumf", "arith.minimumf"):
        first = x[0] >= x[1] if op == "arith.maximumf" else x[0] <= x[1]
        return torch.where(first, _plus(t[0], zero), _plus(t[1], zero))
    if op == "arith.select":
        return torch.where(x[0], _plus(t[1], zero), _plus(t[2], zero))
    d = t[0]
    rules = {"arith.negf": lambda: -d, "math.tanh": lambda: (1 - y * y) * d,
             "math.exp": lambda: y * d, "math.exp2": lambda: y * math.log(2.0) * d,
             "math.log": lambda: d / x[0], "math.log2": lambda: d / (x[0] * math.log(2.0)),
             "math.sqrt": lambda: d / (2 * y), "math.rsqrt": lambda: -0.5 * y * y * y * d,
             "math.sin": lambda: torch.cos(x[0]) * d, "math.cos": lambda: -torch.sin(x[0]) * d,
             "math.absf": lambda: torch.sign(x[0]) * d}
    rule = rules.get(op)   # (floor and ceil: 0)
    return None if rule is None else rule()
