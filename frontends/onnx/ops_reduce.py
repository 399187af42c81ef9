"""Reductions: ReduceSum/Mean/Max/Min, the composite ReduceL1/L2/SumSquare/LogSum/LogSumExp, and
GlobalAveragePool/GlobalMaxPool.

`axes` is an attribute before opset 18 (ReduceSum: 13) and a constant input after. Empty or
absent axes reduce everything, unless `noop_with_empty_axes`, which reduces over no axis (the
composite's elementwise parts still apply, as in the ONNX reference). Reducing an empty tensor
gives the reduction's identity as a constant (sum 0, max -inf / the dtype's minimum, ...).
"""

from __future__ import annotations

import math

import numpy as np

from frontends.emit import Emitter, Tensor, Unsupported, dtype_of, scalar, shape_of_t
from frontends.onnx.ops_elementwise import cmp
from frontends.onnx.registry import Node, onnx_op
from fuel_dialect.dtypes import FLOAT_NAMES, normalize_axis
from runtime.dtypes import to_numpy

PRIMITIVE = {
    "ReduceSum": "reduce_sum",
    "ReduceMean": "reduce_mean",
    "ReduceMax": "reduce_max",
    "ReduceMin": "reduce_min",
}
COMPOSITE = ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")
FLOAT_ONLY = ("ReduceMean", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp")


def _empty_value(op_type: str, dtype: str) -> float | int | bool:
    """What reducing an empty set gives (the ONNX reference's constants)."""
    if op_type in ("ReduceMax", "ReduceMin"):
        sign = -1 if op_type == "ReduceMax" else 1
        if dtype == "i1":
            return op_type == "ReduceMin"
        if dtype in FLOAT_NAMES:
            return sign * np.inf
        info = np.iinfo(to_numpy(dtype))
        return int(info.min if sign < 0 else info.max)
    return {"ReduceMean": np.nan, "ReduceLogSum": -np.inf, "ReduceLogSumExp": -np.inf}.get(
        op_type, 0
    )


def _axes(n: Node, rank: int) -> list[int]:
    since = 13 if n.op_type == "ReduceSum" else 18
    axes = n.ints(1, "axes") if n.opset >= since else n.attr("axes")
    if not axes:
        return [] if n.attr("noop_with_empty_axes", 0) else list(range(rank))
    norm = [normalize_axis(int(a), rank) for a in axes]
    if any(a is None for a in norm) or len(set(norm)) != len(norm):
        raise Unsupported(f"axes {list(axes)} are out of range or repeat for rank {rank}")
    return sorted(a for a in norm if a is not None)


@onnx_op(*PRIMITIVE, *COMPOSITE, attrs="axes keepdims noop_with_empty_axes")
def reduce(n: Node) -> Tensor:
    x, em = n.x(), n.em
    s, t = shape_of_t(x), dtype_of(x)
    axes, keep = _axes(n, len(s)), bool(n.attr("keepdims", 1))
    if t not in FLOAT_NAMES and n.op_type in FLOAT_ONLY:
        raise Unsupported(f"{n.op_type} on {t} is not supported (float only)")
    if math.prod(s) == 0:
        out = [1 if i in axes else d for i, d in enumerate(s) if keep or i not in axes]
        return np.full(out, _empty_value(n.op_type, t), to_numpy(t))
    if n.op_type == "ReduceLogSumExp":
        return _log_sum_exp(em, x, axes, keep)
    if n.op_type in PRIMITIVE and t == "i1":  # max = any, min = all: through u8
        r = em.op(PRIMITIVE[n.op_type], em.op("cast", x, dtype="u8"), axes=axes, keepdim=keep)
        return em.op("cast", r, dtype="i1")
    if n.op_type in ("ReduceL1",):
        x = em.op("abs", x)
    elif n.op_type in ("ReduceL2", "ReduceSumSquare"):
        x = em.op("mul", x, x)
    r = em.op(PRIMITIVE.get(n.op_type, "reduce_sum"), x, axes=axes, keepdim=keep)
    if n.op_type == "ReduceL2":
        r = em.op("sqrt", r)
    elif n.op_type == "ReduceLogSum":
        r = em.op("log", r)
    return r


def _log_sum_exp(em: Emitter, x: Tensor, axes: list[int], keep: bool) -> Tensor:
    """log(sum(exp(x - m))) + m with m the max over the finite-or--inf entries (ONNX's)."""
    t = dtype_of(x)
    finite = em.op(
        "where", cmp(em, "eq", em.op("abs", x), scalar(np.inf, t)), scalar(-np.inf, t), x
    )
    m = em.op("reduce_max", finite, axes=axes, keepdim=True)
    total = em.op("reduce_sum", em.op("exp", em.op("sub", x, m)), axes=axes, keepdim=True)
    r = em.op("add", em.op("log", total), m)
    if keep:
        return r
    s = shape_of_t(x)
    return em.op("reshape", r, shape=[d for i, d in enumerate(s) if i not in axes])


@onnx_op("GlobalAveragePool", "GlobalMaxPool")
def global_pool(n: Node) -> Tensor:
    """Mean / max over the spatial dims (2..), kept as size-1 dims."""
    x = n.x()
    axes = list(range(2, len(shape_of_t(x))))
    method = "reduce_mean" if n.op_type == "GlobalAveragePool" else "reduce_max"
    return n.em.op(method, x, axes=axes, keepdim=True)
