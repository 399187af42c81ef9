"""aten data movement and constant makers: view/reshape, permute, expand, (un)squeeze, cat,
stack, slice, select, split, index_select, embedding, index; arange, full, zeros, ones, tril.

Shapes and indices are Python values in an exported program: ints, or sizes over dim symbols
(`DimExpr`s: a `sym_size` and the arithmetic on it). Every op here is a `fuel` movement op or
folds to a constant; a constant maker over dim symbols (`arange(seq)`, `ones(seq, seq)`) is a
`fuel.iota` that a run folds once the symbols bind.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from frontends.emit import (
    Tensor,
    Unsupported,
    dtype_of,
    elements_gather,
    expand_to,
    gather_block,
    positions,
    shape_of_t,
    sym_shape_t,
)
from frontends.torch_export.aten_ops import Cx, Value, aten, axis, cast, dim_expr, reshape
from fuel_dialect.shapes import TO_END, DimExpr
from runtime.dtypes import to_numpy


@aten("view.default", "reshape.default", "_unsafe_view.default")
def view(cx: Cx, x: Tensor, shape: Sequence[Value]) -> Tensor:
    """To the shape as written (sizes from `sym_size` arithmetic as expressions of the dim
    symbols), its -1 the recorded dim: `x.view(n // 2, 6)` keeps `n // 2`, where torch's
    recorded shape may hold a longer equivalent expression."""
    rec = cx.shape
    want = [r if isinstance(d, int) and d == -1 else d for d, r in zip(shape, rec, strict=True)]
    return reshape(cx, x, want)


@aten(
    "flatten.using_ints",
    "unflatten.int",
    "squeeze.dim",
    "squeeze.dims",
    "squeeze.default",
    "unsqueeze.default",
)
def same_data(cx: Cx, x: Tensor, *args: Value) -> Tensor:
    """Ops that only reinterpret the shape: the recorded result shape says it all."""
    return reshape(cx, x, cx.shape)


@aten("permute.default")
def permute(cx: Cx, x: Tensor, dims: Sequence[int]) -> Tensor:
    rank = len(shape_of_t(x))
    perm = [axis(d, rank) for d in dims]
    return x if perm == list(range(rank)) else cx.op("transpose", x, perm=perm)


@aten("transpose.int")
def transpose(cx: Cx, x: Tensor, d0: int, d1: int) -> Tensor:
    rank = len(shape_of_t(x))
    perm = list(range(rank))
    a, b = axis(d0, rank), axis(d1, rank)
    perm[a], perm[b] = perm[b], perm[a]
    return permute(cx, x, perm)


@aten("t.default", "numpy_T.default")
def t(cx: Cx, x: Tensor) -> Tensor:
    return permute(cx, x, list(range(len(shape_of_t(x))))[::-1])


@aten("expand.default")
def expand(cx: Cx, x: Tensor, *args: Value, **kw: Value) -> Tensor:
    return expand_to(cx.em, x, cx.shape)


@aten("repeat.default")
def repeat(cx: Cx, x: Tensor, repeats: Sequence[int]) -> Tensor:
    """Each dim d becomes (r, d) by broadcast, then merged."""
    s = (1,) * (len(repeats) - len(shape_of_t(x))) + shape_of_t(x)
    pairs = [v for d in s for v in (1, d)]
    wide = [v for r, d in zip(repeats, s, strict=True) for v in (r, d)]
    y = cx.op("broadcast", reshape(cx, x, pairs), shape=wide)
    return reshape(cx, y, cx.shape)


@aten("cat.default")
def cat(cx: Cx, xs: Sequence[Tensor], dim: int = 0) -> Tensor:
    # drop empty pieces (a `?` dim is negative: not empty)
    xs = [cast(cx.em, x, cx.dtype) for x in xs if 0 not in shape_of_t(x) or len(xs) == 1]
    if len(xs) == 1:
        return xs[0]
    d = axis(dim, len(cx.shape))
    return cx.em.apply(lambda g, *vs: g.concat(list(vs), d), *xs)


@aten("stack.default")
def stack(cx: Cx, xs: Sequence[Tensor], dim: int = 0) -> Tensor:
    d = axis(dim, len(cx.shape))
    parts = []
    for x in xs:
        s = list(shape_of_t(x))
        parts.append(reshape(cx, cast(cx.em, x, cx.dtype), (*s[:d], 1, *s[d:])))
    return (
        parts[0] if len(parts) == 1 else cx.em.apply(lambda g, *vs: g.concat(list(vs), d), *parts)
    )


@aten("slice.Tensor")
def slice_node(
    cx: Cx, x: Tensor, dim: int = 0, start: Value = None, end: Value = None, step: int = 1
) -> Tensor:
    """`x[start:end:step]` in the shape torch recorded (`x[:, :1]` of a `?` dim is 1)."""
    return reshape(cx, slice_(cx, x, dim, start, end, step), cx.shape)


def slice_(
    cx: Cx, x: Tensor, dim: int = 0, start: Value = None, end: Value = None, step: int = 1
) -> Tensor:
    """`x[start:end:step]` along `dim`. A `?` dim keeps constant bounds as written (numpy's
    clamping when a run binds it); a bound over dim symbols (`pos[:, :seq]`) gathers the
    positions `fuel.iota` counts from `start` (a run folds them)."""
    s = sym_shape_t(cx.em, x)
    d = axis(dim, len(s))
    n = s[d]
    if isinstance(start, DimExpr) or isinstance(end, DimExpr):
        start, end = 0 if start is None else start, n if end is None else end
        if end == n and start == 0 and step == 1:
            return x
        if step != 1 or not (isinstance(start, DimExpr) or start >= 0):
            raise Unsupported(f"slice from {start} to {end} step {step} over dim symbols")
        return positions(cx.em, x, d, start, end - start)
    if isinstance(n, DimExpr):
        lo, hi = 0 if start is None else start, TO_END if end is None else min(end, TO_END)
        if lo < 0 or hi < 0 or step < 1:
            raise Unsupported(f"slice of a dim over symbols ({n}) from {lo} to {hi} step {step}")
    else:
        lo, hi, step = slice(start, end, step).indices(n)
        hi = max(hi, lo)
    starts = [0] * len(s)
    limits = [d_ if isinstance(d_, int) else TO_END for d_ in s]
    steps = [1] * len(s)
    if (lo, hi, step) == (0, limits[d], 1):
        return x
    starts[d], limits[d], steps[d] = lo, hi, step
    return cx.op("slice", x, starts=starts, limits=limits, steps=steps)


@aten("select.int")
def select(cx: Cx, x: Tensor, dim: int, index: int) -> Tensor:
    s = shape_of_t(x)
    d = axis(dim, len(s))
    i = index % s[d] if -s[d] <= index < s[d] else None
    if i is None:
        raise Unsupported(f"index {index} is out of range for dim {dim} of size {s[d]}")
    return reshape(cx, slice_(cx, x, d, i, i + 1), cx.shape)


def _pieces(cx: Cx, x: Tensor, d: int, sizes: list[int]) -> tuple[Tensor, ...]:
    """Consecutive slices of `sizes` along `d`, each shaped as torch recorded."""
    outs, start = [], 0
    for n, v in zip(sizes, cx.val, strict=True):
        part = slice_(cx, x, d, start, start + n)
        outs.append(reshape(cx, part, tuple(dim_expr(k, cx.em.symbols) for k in v.shape)))
        start += n
    return tuple(outs)


@aten("split.Tensor", "split_with_sizes.default", "chunk.default")
def split(cx: Cx, x: Tensor, size: Value = 1, dim: int = 0) -> tuple[Tensor, ...]:
    d = axis(dim, len(shape_of_t(x)))
    return _pieces(cx, x, d, [int(v.shape[d]) for v in cx.val])


@aten("unbind.int")
def unbind(cx: Cx, x: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    d = axis(dim, len(shape_of_t(x)))
    return _pieces(cx, x, d, [1] * shape_of_t(x)[d])


@aten("index_select.default")
def index_select(cx: Cx, x: Tensor, dim: int, index: Tensor) -> Tensor:
    return cx.op("gather", x, index, axis=axis(dim, len(shape_of_t(x))))


@aten("embedding.default")
def embedding(cx: Cx, weight: Tensor, indices: Tensor, *args: Value) -> Tensor:
    return cx.op("gather", weight, indices, axis=0)


@aten("gather.default")
def gather(cx: Cx, x: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    """torch.gather: ONNX's GatherElements."""
    return elements_gather(cx.em, x, dim, index)


@aten("index.Tensor")
def index(cx: Cx, x: Tensor, indices: Sequence[Tensor | None]) -> Tensor:
    """`x[..., idx, ...]`: one index tensor is a gather along its dim; several on consecutive
    dims (broadcast together, numpy's advanced indexing) gather the merged dims."""
    given = [(i, t) for i, t in enumerate(indices) if t is not None]
    if not given or any(dtype_of(t) == "i1" for _, t in given):
        raise Unsupported("indexing with a bool mask (its result has a data-dependent shape)")
    dims = [d for d, _ in given]
    if dims != list(range(dims[0], dims[0] + len(dims))):
        raise Unsupported("index tensors on dims that are not consecutive")
    if len(given) == 1:
        return cx.op("gather", x, given[0][1], axis=dims[0])
    return gather_block(cx.em, x, dims[0], [t for _, t in given])


# -- constants ----------------------------------------------------------------------------


def _const(cx: Cx, fill: object) -> Tensor:
    """A fill of the recorded shape: a constant, or over dim symbols a `fuel.iota` fill."""
    if any(isinstance(d, DimExpr) for d in cx.shape):
        if not isinstance(fill, int | float | bool):
            raise Unsupported(f"a fill value of {type(fill).__name__} over dim symbols")
        return cx.em.at(cx.em.b.iota(cx.shape, cx.dtype, start=fill, step=0.0))
    return np.full(cx.shape, fill, dtype=to_numpy(cx.dtype))


@aten("arange.default", "arange.start", "arange.start_step")
def arange(cx: Cx, *args: Value, **kw: Value) -> np.ndarray:
    """Static bounds: the constant torch recorded the shape of; bounds over dim symbols
    (`arange(seq)`): a `fuel.iota` a run folds once the symbols bind."""
    start, end, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    if any(isinstance(v, DimExpr) for v in (start, end, step)):
        if step != 1:
            raise Unsupported(f"arange over dim symbols with step {step} (only 1)")
        return cx.em.at(cx.em.b.iota(cx.shape, cx.dtype, start=start, step=1.0))
    out = np.arange(start, end, step, dtype=np.float64 if cx.dtype in ("f32", "f64") else None)
    return out.astype(to_numpy(cx.dtype)).reshape(cx.shape)


@aten("full.default", "new_full.default", "full_like.default")
def full(cx: Cx, *args: Value, **kw: Value) -> np.ndarray:
    """full(size, fill), full_like(x, fill), new_full(x, size, fill)."""
    fill = args[2] if str(cx.node.target) == "aten.new_full.default" else args[1]
    if not isinstance(fill, int | float | bool):
        raise Unsupported("a fill value computed at run time")
    return _const(cx, fill)


@aten("zeros.default", "zeros_like.default", "new_zeros.default")
def zeros(cx: Cx, *args: Value, **kw: Value) -> np.ndarray:
    return _const(cx, 0)


@aten("ones.default", "ones_like.default", "new_ones.default")
def ones(cx: Cx, *args: Value, **kw: Value) -> np.ndarray:
    return _const(cx, 1)


@aten("scalar_tensor.default")
def scalar_tensor(cx: Cx, value: Value, **kw: Value) -> np.ndarray:
    return _const(cx, value)


@aten("tril.default", "triu.default")
def tri(cx: Cx, x: Tensor, diagonal: int = 0) -> Tensor:
    *_, r, c = shape_of_t(x)
    rel = np.arange(c)[None, :] - np.arange(r)[:, None]  # j - i
    keep = rel <= diagonal if str(cx.node.target).startswith("aten.tril") else rel >= diagonal
    zero = np.zeros((), to_numpy(cx.dtype))
    return cx.op("where", keep, x, zero)
