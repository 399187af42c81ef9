"""Linear algebra and normalisation: MatMul, Gemm, CumSum, Softmax/LogSoftmax,
LayerNormalization, RMSNormalization and onnxruntime's SimplifiedLayerNormalization.

The norms normalise over all dims from `axis` on, which equals fuel's last-dim norm of the
input reshaped to (leading dims..., product of the normalised dims); scale and bias are
broadcast to the normalised shape and flattened the same way.
"""

from __future__ import annotations

import math

from onnx import TensorProto

from frontends.emit import Tensor, Unsupported, cumulative_sum, dtype_of, scalar, shape_of_t
from frontends.onnx.registry import Node, onnx_op
from fuel_dialect.dtypes import FLOAT_NAMES, normalize_axis


def axis_of(n: Node, default: int, rank: int) -> int:
    """The `axis` attribute mapped into [0, rank)."""
    a = n.attr("axis", default)
    norm = normalize_axis(int(a), rank)
    if norm is None:
        raise Unsupported(f"axis {a} is out of range for rank {rank}")
    return norm


@onnx_op("MatMul")
def matmul(n: Node) -> Tensor:
    """numpy matmul: a 1-D operand gets a unit dim (prepended / appended), removed after."""
    a, b, em = n.x(0), n.x(1), n.em
    sa, sb = shape_of_t(a), shape_of_t(b)
    if len(sa) == 1:
        a = em.op("reshape", a, shape=(1, *sa))
    if len(sb) == 1:
        b = em.op("reshape", b, shape=(*sb, 1))
    y = em.op("matmul", a, b)
    s = list(shape_of_t(y))
    if len(sb) == 1:
        s.pop(-1)
    if len(sa) == 1:
        s.pop(-2 if len(sb) != 1 else -1)
    return y if len(s) == len(shape_of_t(y)) else em.op("reshape", y, shape=s)


@onnx_op("Gemm", attrs="alpha beta transA transB")
def gemm(n: Node) -> Tensor:
    """alpha * A' B' + beta * C, C broadcast to (M, N); C is skipped when beta = 0 (as ONNX)."""
    a, b, c, em = n.x(0), n.x(1), n.input(2), n.em
    if n.attr("transA", 0):
        a = em.op("transpose", a, perm=[1, 0])
    if n.attr("transB", 0):
        b = em.op("transpose", b, perm=[1, 0])
    y = em.op("matmul", a, b)
    t, mn = dtype_of(y), shape_of_t(y)
    alpha, beta = float(n.attr("alpha", 1.0)), float(n.attr("beta", 1.0))
    if t not in FLOAT_NAMES and not (alpha.is_integer() and beta.is_integer()):
        raise Unsupported(f"non-integer alpha/beta on {t} operands")
    if alpha != 1.0:
        y = em.op("mul", y, scalar(alpha, t))
    if c is not None and beta != 0.0:
        y = em.op("add", y, c if beta == 1.0 else em.op("mul", c, scalar(beta, t)))
        if shape_of_t(y) != mn:
            raise Unsupported(f"C of shape {list(shape_of_t(c))} does not broadcast to {list(mn)}")
    return y


@onnx_op("Softmax", "LogSoftmax", attrs="axis")
def softmax(n: Node) -> Tensor:
    """Along `axis` (opset >= 13); before 13, over the input coerced to 2-D at `axis`."""
    x, em = n.x(), n.em
    s = shape_of_t(x)
    if n.opset >= 13:
        return _softmax_along(n, x, axis_of(n, -1, len(s)))
    axis = axis_of(n, 1, len(s))
    flat = em.op("reshape", x, shape=(math.prod(s[:axis]), math.prod(s[axis:])))
    return em.op("reshape", _softmax_along(n, flat, 1), shape=s)


def _softmax_along(n: Node, x: Tensor, axis: int) -> Tensor:
    em = n.em
    if n.op_type == "Softmax":
        return em.op("softmax", x, axis=axis)
    shifted = em.op("sub", x, em.op("reduce_max", x, axes=[axis], keepdim=True))
    total = em.op("reduce_sum", em.op("exp", shifted), axes=[axis], keepdim=True)
    return em.op("sub", shifted, em.op("log", total))


def _check_stash(n: Node, x: Tensor) -> None:
    stash = int(n.attr("stash_type", TensorProto.FLOAT))
    if stash != TensorProto.FLOAT and not (stash == TensorProto.DOUBLE and dtype_of(x) == "f64"):
        raise Unsupported(
            f"stash_type {stash} is not supported (fuel computes in f32, f64 for f64 inputs)"
        )


def normalize(
    n: Node, kind: str, x: Tensor, axis: int, eps: float, params: list[Tensor | None]
) -> Tensor:
    """fuel.<kind> over dims `axis`.. of x; a None param (absent bias) is zeros."""
    em, s = n.em, shape_of_t(x)
    tail, lead = s[axis:], s[:axis]
    d = math.prod(tail)
    if not eps > 0:
        raise Unsupported(f"epsilon must be positive, got {eps}")
    flat = []
    for p in params:
        if p is None:
            flat.append(scalar(0, dtype_of(x)).repeat(d))
            continue
        if len(shape_of_t(p)) > len(tail):
            raise Unsupported(
                f"scale/bias of shape {list(shape_of_t(p))} has more dims than "
                f"the normalised shape {list(tail)}"
            )
        if shape_of_t(p) != tail:
            p = em.op("broadcast", p, shape=tail)
        flat.append(p if len(tail) == 1 else em.op("reshape", p, shape=(d,)))
    xf = x if len(tail) == 1 else em.op("reshape", x, shape=(*lead, d))
    y = em.op(kind, xf, *flat, eps=eps)
    return y if len(tail) == 1 else em.op("reshape", y, shape=s)


def _stats(n: Node, x: Tensor, axis: int, eps: float, centered: bool) -> tuple[Tensor, Tensor]:
    """(mean, 1/sqrt(var + eps)) over dims `axis`.., kept as size-1 dims (var: mean of x^2 when
    not `centered`), computed in f32 for 16-bit inputs and returned in x's dtype."""
    em, t = n.em, dtype_of(x)
    axes = list(range(axis, len(shape_of_t(x))))
    xw = em.op("cast", x, dtype="f32") if t in ("f16", "bf16") else x
    w = dtype_of(xw)
    mean = em.op("reduce_mean", xw, axes=axes, keepdim=True)
    dev = em.op("sub", xw, mean) if centered else xw
    var = em.op("reduce_mean", em.op("mul", dev, dev), axes=axes, keepdim=True)
    inv = em.op("rsqrt", em.op("add", var, scalar(eps, w)))
    back = [v if w == t else em.op("cast", v, dtype=t) for v in (mean, inv)]
    return back[0], back[1]


@onnx_op("LayerNormalization", attrs="axis epsilon stash_type")
def layer_norm(n: Node) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """Y = (x - mean) / sqrt(var + eps) * scale + bias; optional Mean, InvStdDev outputs."""
    x = n.x()
    _check_stash(n, x)
    axis, eps = axis_of(n, -1, len(shape_of_t(x))), float(n.attr("epsilon", 1e-5))
    y = normalize(n, "layer_norm", x, axis, eps, [n.x(1), n.input(2)])
    if not (n.wants(1) or n.wants(2)):
        return y, None, None
    return (y, *_stats(n, x, axis, eps, centered=True))


@onnx_op("RMSNormalization", attrs="axis epsilon stash_type")
def rms_norm(n: Node) -> Tensor:
    """Y = x / sqrt(mean(x^2) + eps) * scale (opset 23)."""
    x = n.x()
    _check_stash(n, x)
    axis, eps = axis_of(n, -1, len(shape_of_t(x))), float(n.attr("epsilon", 1e-5))
    return normalize(n, "rms_norm", x, axis, eps, [n.x(1)])


@onnx_op("SimplifiedLayerNormalization", attrs="axis epsilon stash_type", domain="com.microsoft")
@onnx_op("SimplifiedLayerNormalization", attrs="axis epsilon stash_type")  # onnxruntime's domain
def simplified_layer_norm(n: Node) -> tuple[Tensor, Tensor | None]:
    """onnxruntime's RMS norm (its transformer optimizer writes it in the standard domain; also
    accepted as com.microsoft): Y as RMSNormalization, optional inv_std_var output."""
    x = n.x()
    _check_stash(n, x)
    axis, eps = axis_of(n, -1, len(shape_of_t(x))), float(n.attr("epsilon", 1e-5))
    y = normalize(n, "rms_norm", x, axis, eps, [n.x(1)])
    return y, (_stats(n, x, axis, eps, centered=False)[1] if n.wants(1) else None)


@onnx_op("CumSum", attrs="exclusive reverse")
def cumsum(n: Node) -> Tensor:
    """`cumulative_sum` along `axis` (the second input)."""
    x = n.x()
    s = shape_of_t(x)
    axis = normalize_axis(int((n.ints(1, "axis") or [0])[0]), max(len(s), 1))
    if axis is None or not s:
        raise Unsupported(f"axis is out of range for shape {list(s)}")
    return cumulative_sum(n.em, x, axis, bool(n.attr("exclusive", 0)), bool(n.attr("reverse", 0)))


@onnx_op("BatchNormalization", attrs="epsilon momentum training_mode spatial")
def batch_norm(n: Node) -> Tensor:
    """Inference form: (x - mean) / sqrt(var + eps) * scale + bias, per channel (dim 1)."""
    x, em = n.x(), n.em
    if n.attr("training_mode", 0) or any(n.wants(k) for k in (1, 2)):
        raise Unsupported("training mode (running statistics outputs) is not supported")
    s, t = shape_of_t(x), dtype_of(x)
    if len(s) < 2 or not n.attr("spatial", 1):
        raise Unsupported(f"needs (N, C, ...) input and spatial=1, got {list(s)}")
    scale, bias, mean, var = (
        em.op("reshape", n.x(i), shape=(s[1], *[1] * (len(s) - 2))) for i in (1, 2, 3, 4)
    )
    std = em.op("sqrt", em.op("add", var, scalar(float(n.attr("epsilon", 1e-5)), t)))
    xn = em.op("div", em.op("sub", x, mean), std)
    return em.op("add", em.op("mul", scale, xn), bias)


@onnx_op("LpNormalization", attrs="axis p")
def lp_normalization(n: Node) -> Tensor:
    """x / ||x||_p along `axis` (p = 1 or 2); 0 where the norm is 0."""
    x, em = n.x(), n.em
    t, p = dtype_of(x), int(n.attr("p", 2))
    axis = axis_of(n, -1, len(shape_of_t(x)))
    if p not in (1, 2):
        raise Unsupported(f"p={p} is not supported (1 or 2)")
    mag = em.op("abs", x) if p == 1 else em.op("mul", x, x)
    norm = em.op("reduce_sum", mag, axes=[axis], keepdim=True)
    norm = norm if p == 1 else em.op("sqrt", norm)
    zero = scalar(0, t)
    return em.apply(
        lambda g, a, b, c, z: g.where(g.compare("eq", b, z), c, g.div(a, b)), x, norm, zero, zero
    )
