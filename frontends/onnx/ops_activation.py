"""ONNX activations without a fuel op of their own, written as compositions of fuel ops with the
formulas of the ONNX specification (so NaN propagates the same way). Those whose formula
cancels (exp(x) - 1, log(1 + exp(x))) are evaluated in f64 and rounded once."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from frontends.emit import Emitter, Tensor, Unsupported, dtype_of, scalar
from frontends.onnx.ops_elementwise import cast, cmp
from frontends.onnx.registry import Node, onnx_op
from fuel_dialect.dtypes import FLOAT_NAMES


def _float(n: Node) -> tuple[Tensor, str]:
    x = n.x()
    t = dtype_of(x)
    if t not in FLOAT_NAMES:
        raise Unsupported(f"{n.op_type} on {t} is not supported (float only)")
    return x, t


@onnx_op("LeakyRelu", attrs="alpha")
def leaky_relu(n: Node) -> Tensor:
    """x < 0 ? alpha x : x."""
    x, t = _float(n)
    em = n.em
    neg = em.op("mul", x, scalar(n.attr("alpha", 0.01), t))
    return em.op("where", cmp(em, "lt", x, scalar(0, t)), neg, x)


@onnx_op("PRelu")
def prelu(n: Node) -> Tensor:
    """x < 0 ? slope x : x, the slope broadcast to x."""
    x, t = _float(n)
    em = n.em
    return em.op("where", cmp(em, "lt", x, scalar(0, t)), em.op("mul", x, n.x(1)), x)


@onnx_op("ThresholdedRelu", attrs="alpha")
def thresholded_relu(n: Node) -> Tensor:
    """x > alpha ? x : 0."""
    x, t = _float(n)
    em = n.em
    return em.op("where", cmp(em, "gt", x, scalar(n.attr("alpha", 1.0), t)), x, scalar(0, t))


def hard_sigmoid_of(n: Node, x: Tensor, t: str, alpha: float, beta: float) -> Tensor:
    """max(0, min(1, alpha x + beta))."""
    em = n.em
    y = em.op("add", em.op("mul", x, scalar(alpha, t)), scalar(beta, t))
    return em.op("max", em.op("min", y, scalar(1, t)), scalar(0, t))


@onnx_op("HardSigmoid", attrs="alpha beta")
def hard_sigmoid(n: Node) -> Tensor:
    x, t = _float(n)
    return hard_sigmoid_of(n, x, t, n.attr("alpha", 0.2), n.attr("beta", 0.5))


@onnx_op("HardSwish")
def hard_swish(n: Node) -> Tensor:
    """x * HardSigmoid(x) with alpha = 1/6, beta = 0.5."""
    x, t = _float(n)
    return n.em.op("mul", x, hard_sigmoid_of(n, x, t, 1 / 6, 0.5))


@onnx_op("Softsign")
def softsign(n: Node) -> Tensor:
    """x / (1 + |x|)."""
    x, t = _float(n)
    em = n.em
    return em.op("div", x, em.op("add", em.op("abs", x), scalar(1, t)))


@onnx_op("Softplus")
def softplus(n: Node) -> Tensor:
    """log(exp(x) + 1), in f64."""
    return _wide(n, lambda em, x: em.op("log", em.op("add", em.op("exp", x), _f64(1))))


@onnx_op("Swish", attrs="alpha")
def swish(n: Node) -> Tensor:
    """x * sigmoid(alpha x); fuel.silu when alpha = 1."""
    x, t = _float(n)
    alpha = n.attr("alpha", 1.0)
    if alpha == 1.0:
        return n.em.op("silu", x)
    return n.em.op("mul", x, n.em.op("sigmoid", n.em.op("mul", x, scalar(alpha, t))))


def _f64(v: float) -> np.ndarray:
    return scalar(v, "f64")


def _wide(n: Node, body: Callable[[Emitter, Tensor], Tensor]) -> Tensor:
    """`body(x)` evaluated in f64 and rounded once to x's dtype: exp(x) - 1 and log(1 + exp(x))
    cancel when evaluated in the input's own precision (f32: ~1e-2 relative error near 0)."""
    x, t = _float(n)
    return cast(n.em, body(n.em, cast(n.em, x, "f64")), t)


@onnx_op("Elu", attrs="alpha")
def elu(n: Node) -> Tensor:
    """x < 0 ? alpha (exp(x) - 1) : x, in f64."""
    alpha = _f64(n.attr("alpha", 1.0))

    def body(em: Emitter, x: Tensor) -> Tensor:
        neg = em.op("mul", em.op("sub", em.op("exp", x), _f64(1)), alpha)
        return em.op("where", cmp(em, "lt", x, _f64(0)), neg, x)

    return _wide(n, body)


@onnx_op("Selu", attrs="alpha gamma")
def selu(n: Node) -> Tensor:
    """gamma (x > 0 ? x : alpha exp(x) - alpha), in f64."""
    alpha = _f64(n.attr("alpha", 1.67326319217681884765625))
    gamma = _f64(n.attr("gamma", 1.05070102214813232421875))

    def body(em: Emitter, x: Tensor) -> Tensor:
        neg = em.op("sub", em.op("mul", em.op("exp", x), alpha), alpha)
        return em.op("mul", em.op("where", cmp(em, "gt", x, _f64(0)), x, neg), gamma)

    return _wide(n, body)


@onnx_op("Celu", attrs="alpha")
def celu(n: Node) -> Tensor:
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1)), in f64."""
    alpha = _f64(n.attr("alpha", 1.0))

    def body(em: Emitter, x: Tensor) -> Tensor:
        e = em.op("mul", em.op("sub", em.op("exp", em.op("div", x, alpha)), _f64(1)), alpha)
        return em.op("add", em.op("max", x, _f64(0)), em.op("min", e, _f64(0)))

    return _wide(n, body)


@onnx_op("Mish")
def mish(n: Node) -> Tensor:
    """x tanh(log(1 + exp(x))), in f64."""

    def body(em: Emitter, x: Tensor) -> Tensor:
        softplus = em.op("log", em.op("add", em.op("exp", x), _f64(1)))
        return em.op("mul", x, em.op("tanh", softplus))

    return _wide(n, body)


@onnx_op("Shrink", attrs="bias lambd")
def shrink(n: Node) -> Tensor:
    """x > lambd ? x - bias : x < -lambd ? x + bias : 0."""
    x = n.x()
    t, em = dtype_of(x), n.em
    lambd, bias = float(n.attr("lambd", 0.5)), scalar(n.attr("bias", 0.0), t)
    low = em.op("where", cmp(em, "lt", x, scalar(-lambd, t)), em.op("add", x, bias), scalar(0, t))
    return em.op("where", cmp(em, "gt", x, scalar(lambd, t)), em.op("sub", x, bias), low)


@onnx_op("Sign")
def sign(n: Node) -> Tensor:
    """1, -1, or x itself (0, -0, NaN)."""
    x = n.x()
    t, em = dtype_of(x), n.em
    neg = em.op("where", cmp(em, "lt", x, scalar(0, t)), scalar(-1, t), x)
    return em.op("where", cmp(em, "gt", x, scalar(0, t)), scalar(1, t), neg)


@onnx_op("SwiGLU", attrs="alpha")
def swiglu(n: Node) -> Tensor:
    """Swish_alpha(A) * B (opset 28): fuel.silu times B when alpha = 1."""
    a, t = _float(n)
    em, alpha = n.em, n.attr("alpha", 1.0)
    gate = (
        em.op("silu", a)
        if alpha == 1.0
        else em.op("mul", a, em.op("sigmoid", em.op("mul", a, scalar(alpha, t))))
    )
    return em.op("mul", gate, n.x(1))
