"""Elementwise ONNX ops: unary math, arithmetic, variadic Max/Min/Sum/Mean, comparisons, boolean
logic, Where, Clip, IsNaN/IsInf and Mod.

Integer Div, Mod and Pow have no fuel op of their own; they go through f64 where that is exact:
Div and Mod of i32/i8/u8 (|a| < 2^53, so the correctly rounded quotient never crosses an
integer and the truncating cast gives ONNX's truncated quotient), Pow of i32/i8/u8 bases (every
result the type holds is below 2^53). On i64 they fold exactly when the operands are constants
and are unsupported otherwise.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from frontends.emit import (
    Emitter,
    Tensor,
    Unsupported,
    dtype_of,
    is_symbolic,
    scalar,
    shape_of_t,
    static_if_possible,
)
from frontends.onnx.registry import Node, onnx_op
from fuel_dialect.dtypes import FLOAT_NAMES

UNARY: dict[str, str] = {
    "Relu": "relu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Erf": "erf",
    "Sqrt": "sqrt",
    "Reciprocal": "recip",
    "Neg": "neg",
    "Abs": "abs",
    "Exp": "exp",
    "Log": "log",
    "Sin": "sin",
    "Cos": "cos",
}
"""ONNX unary op -> GraphBuilder method."""

ARITH = {"Add": "add", "Sub": "sub", "Mul": "mul"}
VARIADIC = {"Max": "max", "Min": "min", "Sum": "add", "Mean": "add"}
COMPARE = {
    "Equal": "eq",
    "Less": "lt",
    "LessOrEqual": "le",
    "Greater": "gt",
    "GreaterOrEqual": "ge",
}
_F64_EXACT_DIV = ("i32", "i8", "u8")
_WIDTH = {"bf16": 1, "f16": 1, "f32": 2, "f64": 3}


def cmp(em: Emitter, kind: str, a: Tensor, b: Tensor) -> Tensor:
    """`a <kind> b` as an i1 tensor (kind: eq, ne, lt, le, gt, ge)."""
    return em.apply(lambda g, x, y: g.compare(kind, x, y), a, b)


def cast(em: Emitter, x: Tensor, dtype: str) -> Tensor:
    return x if dtype_of(x) == dtype else em.op("cast", x, dtype=dtype)


def _unary(method: str) -> Callable[[Node], Tensor]:
    def unary(n: Node) -> Tensor:
        x = n.x()
        if dtype_of(x) == "u8" and method in ("abs", "relu"):  # identities on unsigned values
            return x
        if dtype_of(x) == "u8" and method == "neg":
            return n.em.op("sub", scalar(0, "u8"), x)  # wraps modulo 256, like ONNX
        return n.em.op(method, x)

    return unary


for _op_type, _method in UNARY.items():
    onnx_op(_op_type)(_unary(_method))


@onnx_op("Gelu", attrs="approximate")
def gelu(n: Node) -> Tensor:
    """Gelu (opset 20): the exact erf form, or `approximate="tanh"`."""
    approximate = n.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise Unsupported(f"approximate='{approximate}' is not supported (none or tanh)")
    return n.em.op("gelu", n.x(), approximate=approximate)


@onnx_op("Add", "Sub", "Mul")
def arith(n: Node) -> Tensor:
    return n.em.op(ARITH[n.op_type], n.x(0), n.x(1))


@onnx_op("Div")
def div(n: Node) -> Tensor:
    """Float division, or truncated integer division (see the module docstring)."""
    a, b, t, em = n.x(0), n.x(1), dtype_of(n.x(0)), n.em
    if t in FLOAT_NAMES:
        return em.op("div", a, b)
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        if (b == 0).any():
            raise Unsupported("integer division by zero in constants")
        if is_symbolic(a) or is_symbolic(b):  # dims are >= 0: truncation is floor division
            return static_if_possible(np.asarray(a // b, object))
        q = np.abs(a.astype(object)) // np.abs(b.astype(object))
        return np.asarray(q * np.sign(a) * np.sign(b)).astype(a.dtype)
    if t not in _F64_EXACT_DIV:
        raise Unsupported(f"integer division on {t} is not supported (only on constants)")
    return cast(em, em.op("div", cast(em, a, "f64"), cast(em, b, "f64")), t)


@onnx_op("Pow")
def pow_(n: Node) -> Tensor:
    """Base dtype T, exponent dtype T1: computed in the wider float (f64 for integer bases:
    exact for every result an i32 holds; i64 bases only fold, with numpy's integer power)."""
    a, b, em = n.x(0), n.x(1), n.em
    ta, tb = dtype_of(a), dtype_of(b)
    if ta not in FLOAT_NAMES and isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        if tb not in FLOAT_NAMES and (b < 0).any():
            raise Unsupported("negative integer exponents of integers")
        return np.power(a, b).astype(a.dtype)
    if ta == "i64":
        raise Unsupported("Pow of run-time i64 bases is not supported (only on constants)")
    work = ta if ta in FLOAT_NAMES else "f64"
    if tb in FLOAT_NAMES and _WIDTH[tb] > _WIDTH[work]:
        work = tb
    r = em.op("pow", cast(em, a, work), cast(em, b, work))
    return cast(em, r, ta)


@onnx_op("Max", "Min", "Sum", "Mean")
def variadic(n: Node) -> Tensor:
    """Pairwise left fold of the inputs (Mean divides the Sum by the input count)."""
    xs = [n.x(i) for i in range(len(n.inputs))]
    acc = xs[0]
    for x in xs[1:]:
        acc = n.em.op(VARIADIC[n.op_type], acc, x)
    if n.op_type == "Mean":
        acc = n.em.op("div", acc, scalar(len(xs), dtype_of(acc)))
    return acc


@onnx_op("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual")
def compare(n: Node) -> Tensor:
    return cmp(n.em, COMPARE[n.op_type], n.x(0), n.x(1))


@onnx_op("And", "Or", "Xor", "Not")
def logic(n: Node) -> Tensor:
    """Boolean logic as selects and compares: a and b = a ? b : false, a or b = a ? true : b."""
    em, a = n.em, n.x(0)
    if n.op_type == "Not":
        return cmp(em, "eq", a, scalar(False, "i1"))
    b = n.x(1)
    if n.op_type == "Xor":
        return cmp(em, "ne", a, b)
    if n.op_type == "And":
        return em.op("where", a, b, scalar(False, "i1"))
    return em.op("where", a, scalar(True, "i1"), b)


@onnx_op("Where")
def where(n: Node) -> Tensor:
    return n.em.op("where", n.x(0), n.x(1), n.x(2))


@onnx_op("Clip", attrs="min max")
def clip(n: Node) -> Tensor:
    """min(max(x, lo), hi): NaN propagates, and lo > hi gives hi, as ONNX specifies."""
    x, em = n.x(), n.em
    t = dtype_of(x)
    if n.opset >= 11:
        lo, hi = n.input(1), n.input(2)
    else:
        lo, hi = (None if n.attr(k) is None else scalar(n.attr(k), t) for k in ("min", "max"))
    if lo is not None:
        x = em.op("max", x, lo)
    if hi is not None:
        x = em.op("min", x, hi)
    return x


@onnx_op("IsNaN")
def is_nan(n: Node) -> Tensor:
    return cmp(n.em, "ne", n.x(), n.x())


@onnx_op("IsInf", attrs="detect_negative detect_positive")
def is_inf(n: Node) -> Tensor:
    x, em = n.x(), n.em
    t = dtype_of(x)
    pos = cmp(em, "eq", x, scalar(np.inf, t)) if n.attr("detect_positive", 1) else None
    neg = cmp(em, "eq", x, scalar(-np.inf, t)) if n.attr("detect_negative", 1) else None
    if pos is not None and neg is not None:
        return em.op("where", pos, scalar(True, "i1"), neg)
    if pos is None and neg is None:
        return np.zeros(shape_of_t(x), bool)
    return pos if neg is None else neg


@onnx_op("Mod", attrs="fmod")
def mod(n: Node) -> Tensor:
    """fmod=1: the remainder has the dividend's sign (C fmod); fmod=0 (integers): the
    divisor's sign (Python %). Run-time integer operands go through the exact f64 quotient of
    `div`; float Mod folds on constants only (a - trunc(a/b) b is not exact in floats)."""
    a, b, em = n.x(0), n.x(1), n.em
    t, fmod = dtype_of(a), bool(n.attr("fmod", 0))
    if t in FLOAT_NAMES and not fmod:
        raise Unsupported("fmod=0 is invalid for float operands")
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        with np.errstate(all="ignore"):
            return (np.fmod(a, b) if fmod else np.mod(a, b)).astype(a.dtype)
    if t not in _F64_EXACT_DIV:
        raise Unsupported(f"Mod on run-time {t} values is not supported (only on constants)")
    q = cast(em, em.op("div", cast(em, a, "f64"), cast(em, b, "f64")), t)
    r = em.op("sub", a, em.op("mul", q, b))
    if fmod:
        return r
    zero = scalar(0, t)
    wrong_sign = cmp(em, "ne", cmp(em, "lt", r, zero), cmp(em, "lt", b, zero))
    fix = em.op("where", cmp(em, "ne", r, zero), wrong_sign, scalar(False, "i1"))
    return em.op("where", fix, em.op("add", r, b), r)
