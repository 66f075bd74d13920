"""Grid/size expression evaluator (CPU only)."""

import pytest

from flashmlir import _expr
from flashmlir._errors import ExpressionError

ENV = {"B": 2, "Hq": 8, "Hkv": 2, "Nq": 1000, "Nk": 4097, "D": 128, "Dv": 64, "G": 4}


@pytest.mark.parametrize("text,value", [
    ("ceildiv(Nq, 128)", 8),
    ("ceildiv(1024, 128)", 8),
    ("ceildiv(1025, 128)", 9),
    ("cdiv(0, 128)", 0),
    ("Hq", 8),
    ("B*Hq", 16),
    ("B * Hq * ceildiv(Nq, 64)", 256),
    ("1 + 2 * 3", 7),
    ("(1 + 2) * 3", 9),
    ("10 - 2 - 3", 5),
    ("Nk / 128", 32),
    ("Nk // 128", 32),
    ("Nk % 128", 1),
    ("-3 + 5", 2),
    ("min(Nq, Nk)", 1000),
    ("max(Nq, Nk, 5000)", 5000),
    ("min(ceildiv(Nq,64), 132)", 16),
    ("  Hq  ", 8),
    ("G", 4),
    ("0.5 * 4", 2.0),
    (7, 7),
])
def test_values(text, value):
    assert _expr.evaluate(text, ENV) == value


def test_names_collected():
    e = _expr.parse("ceildiv(Nq, 128) * Hq + B")
    assert e.names == ("Nq", "Hq", "B")


@pytest.mark.parametrize("text,match", [
    ("", "empty"),
    ("Nq +", "end of expression"),
    ("ceildiv(Nq)", "takes 2 arguments"),
    ("foo(Nq, 1)", "unknown function"),
    ("Nq ** 2", "unexpected"),
    ("__import__('os').system('true')", "unknown function|unexpected"),
    ("Nq; B", "unexpected character"),
    ("(Nq", "expected"),
    ("Nq)", "unexpected"),
    ("lambda: 1", "unexpected"),
])
def test_syntax_errors(text, match):
    with pytest.raises(ExpressionError, match=match):
        _expr.evaluate(text, ENV)


def test_unknown_name_lists_known():
    with pytest.raises(ExpressionError, match=r"unknown name 'H'.*known: B, D, Dv"):
        _expr.evaluate("ceildiv(Nq, 128) * H", ENV)


def test_division_errors():
    with pytest.raises(ExpressionError, match="ceildiv by 0"):
        _expr.evaluate("ceildiv(Nq, 0)", ENV)
    with pytest.raises(ExpressionError, match="division by 0"):
        _expr.evaluate("Nq / (B - 2)", ENV)
    with pytest.raises(ExpressionError, match="needs integers"):
        _expr.evaluate("ceildiv(Nq, 0.5)", ENV)


def test_bad_types():
    with pytest.raises(ExpressionError):
        _expr.parse(True)
    with pytest.raises(ExpressionError):
        _expr.parse(["Nq"])
    with pytest.raises(ExpressionError, match="non-number"):
        _expr.evaluate("X", {"X": "1"})
    with pytest.raises(ExpressionError, match="longer"):
        _expr.parse("1+" * 300 + "1")


def test_no_eval_is_used():
    # A name that would be meaningful to Python's eval is just an unknown name.
    with pytest.raises(ExpressionError, match="unknown name"):
        _expr.evaluate("__builtins__", ENV)
