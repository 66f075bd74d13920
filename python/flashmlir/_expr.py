"""A tiny, safe evaluator for the arithmetic of kernel manifests.

Grid entries such as ``"ceildiv(Nq, 128)"``, parameter dims such as
``"Hq"`` and scalar parameter values are written in this language:

    expr   := term (('+' | '-') term)*
    term   := unary (('*' | '/' | '//' | '%') unary)*
    unary  := '-' unary | atom
    atom   := INT | FLOAT | NAME | NAME '(' expr (',' expr)* ')' | '(' expr ')'

Functions: ``ceildiv(a, b)`` (alias ``cdiv``), ``min(a, ...)``,
``max(a, ...)``. ``/`` and ``//`` are both floor division and, like ``%``
and ``ceildiv``, need integers and a positive divisor. Names are looked up in
the environment given to `evaluate` (for a forward kernel: B, Hq, Hkv, Nq,
Nk, D, Dv, G). Nothing is ever passed to Python's `eval`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence, Tuple, Union

from ._errors import ExpressionError

Number = Union[int, float]

_TOKEN_RE = re.compile(
    r"\s*(?:(?P<float>\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+(?:[eE][+-]?\d+)?)"
    r"|(?P<int>\d+)|(?P<name>[A-Za-z_][A-Za-z_0-9]*)|(?P<op>//|[-+*/%(),]))")

_FUNCTIONS = {"ceildiv": 2, "cdiv": 2, "min": -1, "max": -1}

# AST nodes: ("num", value) | ("name", str) | ("neg", node)
#          | ("bin", op, lhs, rhs) | ("call", fname, [args])
Node = tuple

_MAX_LEN = 500


def _tokenize(text: str):
    pos = 0
    tokens = []
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m or m.end() == pos:
            raise ExpressionError(
                f"unexpected character {text[pos:].strip()[:1]!r} at offset "
                f"{pos} in expression {text!r}")
        pos = m.end()
        kind = m.lastgroup
        tokens.append((kind, m.group(kind)))
    return tokens


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else (None, None)

    def take(self, op=None):
        tok = self.peek()
        if tok[0] is None:
            raise ExpressionError(f"unexpected end of expression {self.text!r}")
        if op is not None and tok != ("op", op):
            raise ExpressionError(
                f"expected {op!r} but found {tok[1]!r} in expression {self.text!r}")
        self.i += 1
        return tok

    def parse(self) -> Node:
        if not self.tokens:
            raise ExpressionError("empty expression")
        node = self.expr()
        if self.i != len(self.tokens):
            raise ExpressionError(
                f"unexpected {self.tokens[self.i][1]!r} in expression {self.text!r}")
        return node

    def expr(self) -> Node:
        node = self.term()
        while self.peek() in (("op", "+"), ("op", "-")):
            op = self.take()[1]
            node = ("bin", op, node, self.term())
        return node

    def term(self) -> Node:
        node = self.unary()
        while self.peek() in (("op", "*"), ("op", "/"), ("op", "//"), ("op", "%")):
            op = self.take()[1]
            if op == "/":
                op = "//"
            node = ("bin", op, node, self.unary())
        return node

    def unary(self) -> Node:
        if self.peek() == ("op", "-"):
            self.take()
            return ("neg", self.unary())
        if self.peek() == ("op", "+"):
            self.take()
            return self.unary()
        return self.atom()

    def atom(self) -> Node:
        kind, val = self.take()
        if kind == "int":
            return ("num", int(val))
        if kind == "float":
            return ("num", float(val))
        if kind == "name":
            if self.peek() == ("op", "("):
                if val not in _FUNCTIONS:
                    raise ExpressionError(
                        f"unknown function {val!r} in expression {self.text!r} "
                        f"(known: {', '.join(sorted(_FUNCTIONS))})")
                self.take("(")
                args = [self.expr()]
                while self.peek() == ("op", ","):
                    self.take()
                    args.append(self.expr())
                self.take(")")
                arity = _FUNCTIONS[val]
                if arity >= 0 and len(args) != arity:
                    raise ExpressionError(
                        f"{val}() takes {arity} arguments, got {len(args)} in "
                        f"expression {self.text!r}")
                return ("call", val, args)
            return ("name", val)
        if (kind, val) == ("op", "("):
            node = self.expr()
            self.take(")")
            return node
        raise ExpressionError(f"unexpected {val!r} in expression {self.text!r}")


@dataclass(frozen=True)
class Expression:
    """A parsed expression; `names` are the variables it reads."""

    text: str
    node: Node
    names: Tuple[str, ...]

    def evaluate(self, env: Mapping[str, Number]) -> Number:
        return _eval(self.node, env, self.text)


def _collect_names(node: Node, out: list) -> None:
    tag = node[0]
    if tag == "name":
        if node[1] not in out:
            out.append(node[1])
    elif tag == "neg":
        _collect_names(node[1], out)
    elif tag == "bin":
        _collect_names(node[2], out)
        _collect_names(node[3], out)
    elif tag == "call":
        for a in node[2]:
            _collect_names(a, out)


def parse(text: Union[str, int, float]) -> Expression:
    """Parses an expression; a bare JSON number is accepted as a constant."""
    if isinstance(text, bool):
        raise ExpressionError(f"expected an expression or a number, got {text!r}")
    if isinstance(text, (int, float)):
        return Expression(repr(text), ("num", text), ())
    if not isinstance(text, str):
        raise ExpressionError(
            f"expected an expression string or a number, got {type(text).__name__}")
    if len(text) > _MAX_LEN:
        raise ExpressionError(f"expression longer than {_MAX_LEN} characters")
    node = _Parser(text).parse()
    names: list = []
    _collect_names(node, names)
    return Expression(text, node, tuple(names))


def _need_int(v, what, text):
    if isinstance(v, bool) or not isinstance(v, int):
        raise ExpressionError(f"{what} needs integers, got {v!r} in expression {text!r}")


def _eval(node: Node, env: Mapping[str, Number], text: str) -> Number:
    tag = node[0]
    if tag == "num":
        return node[1]
    if tag == "name":
        name = node[1]
        if name not in env:
            raise ExpressionError(
                f"unknown name {name!r} in expression {text!r} "
                f"(known: {', '.join(sorted(env)) or 'none'})")
        val = env[name]
        if isinstance(val, bool) or not isinstance(val, (int, float)):
            raise ExpressionError(f"name {name!r} is bound to a non-number {val!r}")
        return val
    if tag == "neg":
        return -_eval(node[1], env, text)
    if tag == "bin":
        op = node[1]
        a = _eval(node[2], env, text)
        b = _eval(node[3], env, text)
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        _need_int(a, op, text)
        _need_int(b, op, text)
        if b <= 0:
            raise ExpressionError(f"division by {b} in expression {text!r}")
        return a // b if op == "//" else a % b
    if tag == "call":
        fname, args = node[1], [_eval(a, env, text) for a in node[2]]
        if fname in ("ceildiv", "cdiv"):
            a, b = args
            _need_int(a, fname, text)
            _need_int(b, fname, text)
            if b <= 0:
                raise ExpressionError(f"ceildiv by {b} in expression {text!r}")
            return -((-a) // b)
        if fname == "min":
            return min(args)
        if fname == "max":
            return max(args)
    raise ExpressionError(f"internal: bad node {node!r}")  # pragma: no cover


def evaluate(text: Union[str, int, float], env: Mapping[str, Number]) -> Number:
    """Parses and evaluates `text` against `env` in one step."""
    return parse(text).evaluate(env)


def evaluate_all(texts: Sequence[Union[str, int]], env: Mapping[str, Number]):
    return [evaluate(t, env) for t in texts]
