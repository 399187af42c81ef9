"""aten writes into a tensor at positions: `index_copy`, `index_put` (one index tensor),
`select_scatter`, `slice_scatter`, each one `fuel.index_copy`.

They are what a KV-cache write becomes once torch.export functionalizes it: HF's static cache
writes `k_cache.index_copy_(2, cache_position, k)`, a stacked cache
`cache[i].index_copy_(2, pos, k)`, which functionalizes to
`select_scatter(cache, index_copy(select(cache, 0, i), 2, pos, k), 0, i)`. That nest is one
`fuel.index_copy` on the whole cache (layer `i` as a static offset): a write of `k`'s rows, which
the executor runs in the cache's own buffer (`runtime.in_place`). The inner index_copy it
replaces, read by nothing else, is dropped with the other dead ops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from torch import fx

from frontends.emit import Tensor, Unsupported, dtype_of, expand_to, shape_of_t
from frontends.torch_export.aten_ops import Cx, aten, axis, cast, reshape

_COPIES = "_index_copies"
"""Emitter attribute: each imported aten.index_copy FX node -> (source, index, axis), read by a
select_scatter that folds it."""


def _index(cx: Cx, index: Tensor) -> Tensor:
    if dtype_of(index) not in ("i64", "i32") or len(shape_of_t(index)) != 1:
        raise Unsupported(f"the index must be a 1-D i64/i32 tensor, got {dtype_of(index)}")
    return index


@aten("index_copy.default")
def index_copy(cx: Cx, x: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    d = axis(dim, len(shape_of_t(x)))
    source = cast(cx.em, source, dtype_of(x))
    getattr(cx.em, _COPIES, None) or setattr(cx.em, _COPIES, {})
    getattr(cx.em, _COPIES)[cx.node] = (source, _index(cx, index), d)
    return cx.op("index_copy", x, source, index, axis=d)


@aten("index_put.default")
def index_put(
    cx: Cx, x: Tensor, indices: Sequence[Tensor | None], values: Tensor, accumulate: bool = False
) -> Tensor:
    """`x[..., idx, ...] = values` with one 1-D index tensor and values of the indexed shape."""
    given = [(i, t) for i, t in enumerate(indices) if t is not None]
    if accumulate or len(given) != 1:
        raise Unsupported("index_put with accumulate or several index tensors")
    d, idx = given[0]
    want = list(shape_of_t(x))
    want[d] = shape_of_t(_index(cx, idx))[0]
    if list(shape_of_t(values)) != want:
        raise Unsupported(f"index_put values of shape {list(shape_of_t(values))}, not {want}")
    return cx.op("index_copy", x, cast(cx.em, values, dtype_of(x)), idx, axis=d)


@aten("select_scatter.default")
def select_scatter(cx: Cx, base: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """`base` with `src` as its slice `index` along `dim`; a nested index_copy of that very
    slice (a layer of a stacked KV cache) folds into one row write."""
    s = shape_of_t(base)
    d = axis(dim, len(s))
    i = index % s[d] if -s[d] <= index < s[d] else None
    if i is None:
        raise Unsupported(f"index {index} is out of range for dim {dim} of size {s[d]}")
    offsets = [0] * len(s)
    offsets[d] = i
    folded = _nested_copy(cx, d, i)
    if folded is not None:
        rows, idx, a = folded
        a = a + (a >= d)  # the axis of the slice, in base's dims
        shape = list(shape_of_t(rows))
        rows = reshape(cx, rows, (*shape[:d], 1, *shape[d:]))
        return cx.op("index_copy", base, rows, idx, axis=a, offsets=offsets)
    rows = reshape(cx, cast(cx.em, src, dtype_of(base)), (*s[:d], 1, *s[d + 1 :]))
    offsets[d] = 0
    return cx.op("index_copy", base, rows, np.array([i], np.int64), axis=d, offsets=offsets)


@aten("slice_scatter.default")
def slice_scatter(
    cx: Cx,
    base: Tensor,
    src: Tensor,
    dim: int = 0,
    start: int | None = None,
    end: int | None = None,
    step: int = 1,
) -> Tensor:
    """`base` with `src` as its slice `start:end:step` along `dim` (static bounds)."""
    s = shape_of_t(base)
    d = axis(dim, len(s))
    if not all(isinstance(v, int | None) for v in (start, end, step)):
        raise Unsupported("slice_scatter bounds computed at run time")
    rows = np.arange(*slice(start, end, step).indices(s[d]), dtype=np.int64)
    if rows.size == s[d]:
        return cast(cx.em, src, dtype_of(base))
    return cx.op("index_copy", base, cast(cx.em, src, dtype_of(base)), rows, axis=d)


def _nested_copy(cx: Cx, d: int, i: int) -> tuple[Tensor, Tensor, int] | None:
    """(source, index, axis) of the index_copy that `cx`'s src is, when it writes into
    `select(base, d, i)` of this very base; else None."""
    base_node, src_node = cx.node.args[0], cx.node.args[1]
    copies: dict[fx.Node, Any] = getattr(cx.em, _COPIES, None) or {}
    if not isinstance(src_node, fx.Node) or src_node not in copies:
        return None
    sel = src_node.args[0]
    if not (isinstance(sel, fx.Node) and str(sel.target) == "aten.select.int"):
        return None
    shape = cx.node.meta["val"].shape
    rank, n = len(shape), shape[d]
    s_base, s_dim, s_index = sel.args[:3]
    if s_base is not base_node or axis(s_dim, rank) != d or int(s_index) % n != i:
        return None
    return copies[src_node]


@aten("copy.default")
def copy(cx: Cx, x: Tensor, src: Tensor, non_blocking: bool = False) -> Tensor:
    """`x.copy_(src)` as a value: `src` broadcast to `x`'s shape, in `x`'s dtype (HF's static
    cache sets its `cumulative_length` from `cache_position[0]` this way)."""
    return expand_to(cx.em, cast(cx.em, src, dtype_of(x)), cx.shape)
