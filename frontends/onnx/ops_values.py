"""Value-producing ops folded at import time (Constant, Shape, Size, ConstantOfShape, Range,
EyeLike), pass-throughs (Identity, inference-mode Dropout), Cast / CastLike and OneHot.

Shape, Size and EyeLike only read static shapes, so they fold even on traced inputs; Range
folds when its inputs are constants and is unsupported otherwise (its length would depend on
run-time values).
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from frontends.emit import (
    Tensor,
    Unsupported,
    dims_of,
    dtype_of,
    is_symbolic,
    shape_of_t,
    static_if_possible,
    sym_shape_t,
)
from frontends.onnx.dtypes import to_array
from frontends.onnx.ops_elementwise import cast, cmp
from frontends.onnx.registry import Node, onnx_op
from runtime.dtypes import to_numpy

_LISTS = {
    "value_float": np.float32,
    "value_floats": np.float32,
    "value_int": np.int64,
    "value_ints": np.int64,
}


@onnx_op(
    "Constant",
    attrs="value sparse_value value_float value_floats value_int value_ints "
    "value_string value_strings",
)
def constant(n: Node) -> Tensor:
    if len(n.proto.attribute) != 1:
        raise Unsupported("needs exactly one value attribute")
    kind = n.proto.attribute[0].name
    v = n.attr(kind)
    if kind == "value":
        return to_array(v, "the constant")
    if kind == "sparse_value":
        return _densify(v)
    if kind in _LISTS:
        return np.asarray(v, _LISTS[kind])
    raise Unsupported(f"{kind} constants are not supported (fuel has no string dtype)")


def _densify(sp: onnx.SparseTensorProto) -> np.ndarray:
    values = to_array(sp.values, "the sparse constant's values")
    idx = np.asarray(to_array(sp.indices, "the sparse constant's indices"), np.int64)
    dims = tuple(sp.dims)
    out = np.zeros(math.prod(dims), values.dtype)
    flat = idx if idx.ndim == 1 else np.ravel_multi_index(tuple(idx.T), dims)
    out[flat] = values
    return out.reshape(dims)


@onnx_op("Shape", attrs="start end")
def shape(n: Node) -> Tensor:
    """Static dims fold to int64; a `?` dim is its dim-symbol expression (an object array that
    folds on through shape arithmetic, `emit._fold_symbolic`)."""
    s = sym_shape_t(n.em, n.x())
    return static_if_possible(np.array(s[n.attr("start", 0) : n.attr("end", len(s))], object))


@onnx_op("Size")
def size(n: Node) -> Tensor:
    total: object = 1
    for d in sym_shape_t(n.em, n.x()):
        total = total * d
    return static_if_possible(np.array(total, object))


@onnx_op("ConstantOfShape", attrs="value")
def constant_of_shape(n: Node) -> Tensor:
    c = n.const(0, "shape")
    dims = [] if c is None else dims_of(c)
    v = n.attr("value")
    fill = to_array(v, "the fill value") if v is not None else np.zeros(1, np.float32)
    if is_symbolic(c):  # a shape of dim symbols: a fill a run folds once they bind
        value = fill.reshape(-1)[0].item()
        return n.em.at(n.em.b.iota(dims, dtype_of(fill), start=value, step=0.0))
    return np.full(dims, fill.reshape(-1)[0], fill.dtype)


@onnx_op("Range")
def range_(n: Node) -> Tensor:
    start, limit, delta = (n.const(i, w) for i, w in enumerate(("start", "limit", "delta")))
    if start is None or limit is None or delta is None or delta == 0:
        raise Unsupported("start, limit and a non-zero delta are required")
    if any(is_symbolic(t) for t in (start, limit, delta)):  # arange(seq): folded per run
        if is_symbolic(delta) or delta.item() != 1:
            raise Unsupported("a Range over dim symbols needs delta 1")
        count = limit.item() - start.item()
        return n.em.at(n.em.b.iota([count], dtype_of(start), start=start.item(), step=1.0))
    count = max(math.ceil((limit.item() - start.item()) / delta.item()), 0)
    return (start + np.arange(count, dtype=start.dtype) * delta).astype(start.dtype)


@onnx_op("EyeLike", attrs="dtype k")
def eye_like(n: Node) -> Tensor:
    s = shape_of_t(n.x())
    if len(s) != 2:
        raise Unsupported(f"input must have rank 2, got {list(s)}")
    dtype = n.dtype_attr("dtype") if n.has_attr("dtype") else dtype_of(n.x())
    return np.eye(s[0], s[1], int(n.attr("k", 0)), dtype=to_numpy(dtype))


@onnx_op("Identity")
def identity(n: Node) -> Tensor:
    return n.x()


@onnx_op("Dropout", attrs="ratio seed")
def dropout(n: Node) -> tuple[Tensor, Tensor | None]:
    """Inference (or training with ratio 0): the input itself, and an all-true mask."""
    x = n.x()
    training = n.const(2, "training_mode") if n.opset >= 12 else None
    if training is not None and bool(training.reshape(-1)[0]):
        ratio = n.const(1, "ratio")  # absent: 0.5
        if ratio is None or float(ratio.reshape(-1)[0]) != 0.0:
            raise Unsupported("training_mode=true is not supported (fuel imports for inference)")
    return x, (np.ones(shape_of_t(x), bool) if n.wants(1) else None)


@onnx_op("Cast", attrs="to saturate round_mode")
def cast_(n: Node) -> Tensor:
    """`saturate` and `round_mode` only concern float8/float4 targets, which fuel rejects."""
    return cast(n.em, n.x(), n.dtype_attr("to"))


@onnx_op("CastLike", attrs="saturate round_mode")
def cast_like(n: Node) -> Tensor:
    return cast(n.em, n.x(0), dtype_of(n.x(1)))


@onnx_op("OneHot", attrs="axis")
def one_hot(n: Node) -> Tensor:
    """values[1] where the (wrapped) index equals the position along `axis`, else values[0]."""
    em, idx = n.em, n.x(0)
    depth = n.const(1, "depth")
    if depth is None:
        raise Unsupported("depth is required")
    d, values = int(depth.reshape(-1)[0]), n.x(2)
    s = shape_of_t(idx)
    axis = int(n.attr("axis", -1))
    axis = axis + len(s) + 1 if axis < 0 else axis
    ids = cast(em, idx, "i64")
    if n.opset >= 11:  # negative indices count from the end (before 11: out of range)
        ids = em.op("where", cmp(em, "lt", ids, np.array(0)), em.op("add", ids, np.array(d)), ids)
    ids = em.op("reshape", ids, shape=(*s[:axis], 1, *s[axis:]))
    pos = np.arange(d, dtype=np.int64).reshape([d if i == axis else 1 for i in range(len(s) + 1)])
    off, on = (em.op("gather", values, np.array(k), axis=0) for k in (0, 1))
    return em.op("where", cmp(em, "eq", ids, pos), on, off)
