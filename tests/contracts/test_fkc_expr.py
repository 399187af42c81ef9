"""The cost-expression language: precedence, symbols, errors, and that nothing is eval'd."""

from __future__ import annotations

import pytest

from runtime.contracts.expr import ExprError, compile_expr
from runtime.contracts.symbols import compile_constraint, make_resolver

# operands: a (2, 3, 4) f32, b (4, 5) f32, out (2, 3, 5) f32 -- a matmul
SHAPES = [(2, 3, 4), (4, 5), (2, 3, 5)]
DTYPES = ["f32", "f32", "f32"]
NAMES = ["a", "b", "out"]
MATMUL = make_resolver("matmul", NAMES, 2)
GENERIC = make_resolver("add", NAMES, 2)


def ev(src: str | int | float, resolve=GENERIC) -> float:
    return compile_expr(src, resolve)(SHAPES, DTYPES)


@pytest.mark.parametrize(
    ("src", "want"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("2 ** 3 ** 2", 512),
        ("-2 ** 2", -4),
        ("7 // 2", 3),
        ("7 % 4", 3),
        ("7 / 2", 3.5),
        ("1e3 + 1_000", 2000),
        (".5 * 4", 2),
        ("min(3, 1, 2)", 1),
        ("max(2, n)", 30),
        ("- -3", 3),
        (12, 12),
        (0.25, 0.25),
    ],
)
def test_arithmetic_and_precedence(src: str | int | float, want: float) -> None:
    assert ev(src) == want


def test_shape_symbols() -> None:
    assert ev("n") == 30  # elements of the first output
    assert ev("b") == 4  # bytes per element of the first output (f32)
    assert ev("a.numel + b.numel") == 24 + 20
    assert ev("a.dim[0] * 100 + a.dim[-1]") == 204
    assert ev("a.rank + out.rank") == 6
    assert ev("a.bytes + b.bytes + out.bytes") == ev("io_bytes") == 4 * (24 + 20 + 30)
    assert ev("2 * batch * m * n * k", MATMUL) == 2 * 2 * 3 * 5 * 4  # matmul geometry


def test_operand_named_like_a_symbol_is_unambiguous() -> None:
    """`b` is bytes per element; operand b is always `b.<attribute>`."""
    assert ev("b * b.numel") == 4 * 20


@pytest.mark.parametrize(
    "src", ["", "1 +", "(1", "1 2", "a.dim[x]", "a.dim[1.5]", "a.", "$", "1 +* 2", "min()"]
)
def test_syntax_errors(src: str) -> None:
    with pytest.raises(ExprError) as info:
        compile_expr(src, GENERIC)
    assert not info.value.unknown


@pytest.mark.parametrize(
    "src", ["m", "k", "c.numel", "a.volume", "a.dim", "__import__", "open", "a.dim[0].x"]
)
def test_unknown_symbols(src: str) -> None:
    with pytest.raises(ExprError) as info:
        compile_expr(src, GENERIC)
    assert info.value.unknown


def test_no_python_evaluation() -> None:
    """Python syntax that is not in the grammar is a syntax error, never executed."""
    for src in (
        "__import__('os').system('false')",
        "[1, 2]",
        "a if b else c",
        "lambda: 1",
        "n.__class__",
        "'text'",
    ):
        with pytest.raises(ExprError):
            compile_expr(src, GENERIC)


def test_exponent_is_bounded() -> None:
    with pytest.raises(OverflowError):
        ev("10 ** 1000")


def test_refs_are_recorded_and_compiled_once() -> None:
    e = compile_expr("a.dim[-1] * n + max(b.numel, 1)", GENERIC)
    assert e.refs == (("a", "dim", -1), ("n",), ("b", "numel"))
    assert e(SHAPES, DTYPES) == 4 * 30 + 20
    assert e([(1, 1, 2), (2, 5), (1, 1, 5)], DTYPES) == 2 * 5 + 10


def test_shape_constraints() -> None:
    same = compile_constraint("same_as=out", 0, NAMES, GENERIC)
    assert not same.check(SHAPES, DTYPES)
    assert same.check([(3,), (3,), (3,)], DTYPES)
    bcast = compile_constraint("broadcasts_to = out", 1, NAMES, GENERIC)
    assert bcast.check([(2, 5), (5,), (2, 5)], DTYPES)
    assert not bcast.check([(2, 5), (3,), (2, 5)], DTYPES)
    inner = compile_constraint("a.dim[-1] == b.dim[-2]", 0, NAMES, MATMUL)
    assert inner.check(SHAPES, DTYPES)
    assert not inner.check([(2, 3, 4), (3, 5), (2, 3, 5)], DTYPES)
    assert not inner.check([(4,), (4,), (1,)], DTYPES)  # rank too small: false, not a crash
    for bad in ("same_as=nowhere", "a.dim[0] = 3", "a.dim[0] == 1 == 1", "close_to=out"):
        with pytest.raises(ExprError):
            compile_constraint(bad, 0, NAMES, GENERIC)
