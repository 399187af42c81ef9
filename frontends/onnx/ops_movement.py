"""Shape and data movement: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split,
Slice, Gather, GatherElements, GatherND, Expand, Tile and Trilu.

Shapes, axes, starts/ends and repeats must be constants (fuel shapes are static). Slice follows
numpy's clamping, which is ONNX's; a negative step becomes a `fuel.gather` of the selected
indices (fuel.slice steps are positive). Expand and Tile use `fuel.broadcast` (Tile: reshape
each dim d to (1, d), broadcast to (repeats, d), merge).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from frontends.emit import (
    Emitter,
    Tensor,
    Unsupported,
    dims_of,
    dtype_of,
    elements_gather,
    expand_to,
    gather_block,
    is_symbolic,
    positions,
    reshape_to,
    scalar,
    shape_of_t,
    sym_shape_t,
)
from frontends.onnx.registry import Node, onnx_op
from fuel_dialect.dtypes import broadcast_shapes, normalize_axis
from fuel_dialect.shapes import TO_END, DimExpr, ShapeError
from fuel_dialect.shapes import broadcast as sym_broadcast


def _axis(a: int, rank: int) -> int:
    norm = normalize_axis(int(a), rank)
    if norm is None:
        raise Unsupported(f"axis {a} is out of range for rank {rank}")
    return norm


@onnx_op("Reshape", attrs="allowzero shape")
def reshape(n: Node) -> Tensor:
    """0 copies the input dim (unless `allowzero`), one -1 is inferred."""
    x = n.x()
    s = sym_shape_t(n.em, x)
    if n.opset >= 5:
        c = n.const(1, "shape")
        target = None if c is None else dims_of(c)
    else:
        target = n.attr("shape")
    if target is None:
        raise Unsupported("the target shape is missing")
    allowzero = n.attr("allowzero", 0)
    dims = [s[i] if _is(d, 0) and not allowzero and i < len(s) else d for i, d in enumerate(target)]
    holes = [i for i, d in enumerate(dims) if _is(d, -1)]
    if len(holes) > 1 or any(isinstance(d, int) and d < -1 for d in dims):
        raise Unsupported(f"invalid target shape {[str(d) for d in target]}")
    total = _prod(s)
    if holes:
        known = _prod(d for i, d in enumerate(dims) if i != holes[0])
        dims[holes[0]] = _exact_div(total, known, target, s)
    if isinstance(total, int) and _prod(dims) != total:
        raise Unsupported(f"cannot reshape {list(s)} to {target}")
    return reshape_to(n.em, x, dims)


def _is(d: Any, v: int) -> bool:
    return isinstance(d, int) and d == v


def _prod(dims: Any) -> Any:
    out: Any = 1
    for d in dims:
        out = out * d
    return out


def _exact_div(total: Any, known: Any, target: Any, s: Any) -> Any:
    """`total / known` for dims that may be expressions (a monomial divides term by term)."""
    bad = Unsupported(
        f"cannot infer the -1 in {[str(d) for d in target]} for input shape {[str(d) for d in s]}"
    )
    if isinstance(known, int):
        if known == 0 or (isinstance(total, int) and total % known):
            raise bad
        return total // known
    if len(known.terms) != 1:
        raise bad
    (mono, c), out = known.terms[0], {}
    for m, k in _terms(total):
        rest = list(m)
        for a in mono:
            if a not in rest:
                raise bad
            rest.remove(a)
        if k % c:
            raise bad
        out[tuple(rest)] = out.get(tuple(rest), 0) + k // c
    return DimExpr.make(out)


def _terms(d: Any) -> Any:
    return d.terms if isinstance(d, DimExpr) else (((), d),)


@onnx_op("Flatten", attrs="axis")
def flatten(n: Node) -> Tensor:
    x = n.x()
    s = sym_shape_t(n.em, x)
    axis = n.attr("axis", 1)
    axis = axis + len(s) if axis < 0 else axis
    if not 0 <= axis <= len(s):
        raise Unsupported(f"axis {n.attr('axis')} is out of range for rank {len(s)}")
    return reshape_to(n.em, x, (_prod(s[:axis]), _prod(s[axis:])))


def _axes_arg(n: Node) -> list[int] | None:
    return n.ints(1, "axes") if n.opset >= 13 else n.attr("axes")


@onnx_op("Squeeze", attrs="axes")
def squeeze(n: Node) -> Tensor:
    x = n.x()
    s = shape_of_t(x)
    given = _axes_arg(n)
    axes = {_axis(a, len(s)) for a in given} if given else {i for i, d in enumerate(s) if d == 1}
    if any(s[a] != 1 for a in axes):
        raise Unsupported(f"cannot squeeze axes {given} of shape {list(s)} (size is not 1)")
    return reshape_to(n.em, x, [d for i, d in enumerate(s) if i not in axes])


@onnx_op("Unsqueeze", attrs="axes")
def unsqueeze(n: Node) -> Tensor:
    x = n.x()
    s = shape_of_t(x)
    given = _axes_arg(n) or []
    rank = len(s) + len(given)
    axes = {_axis(a, rank) for a in given}
    if len(axes) != len(given):
        raise Unsupported(f"axes {given} repeat a dimension")
    rest = iter(s)
    return reshape_to(n.em, x, [1 if i in axes else next(rest) for i in range(rank)])


@onnx_op("Transpose", attrs="perm")
def transpose(n: Node) -> Tensor:
    x = n.x()
    rank = len(shape_of_t(x))
    perm = list(n.attr("perm") or range(rank - 1, -1, -1))
    if perm == list(range(rank)):
        return x
    return n.em.op("transpose", x, perm=perm)


@onnx_op("Concat", attrs="axis")
def concat(n: Node) -> Tensor:
    """Inputs empty along the axis are dropped (they add nothing)."""
    xs = [t for t in n.inputs if t is not None]
    if n.attr("axis") is None:
        raise Unsupported("attribute 'axis' is required")
    axis = _axis(n.attr("axis"), len(shape_of_t(xs[0])))
    kept = [t for t in xs if shape_of_t(t)[axis] != 0] or xs[:1]
    if len(kept) == 1:
        return kept[0]
    return n.em.apply(lambda g, *vs: g.concat(list(vs), axis), *kept)


@onnx_op("Split", attrs="axis split num_outputs")
def split(n: Node) -> list[Tensor]:
    """Sizes from `split` (input from opset 13), else `num_outputs` chunks (the last smaller),
    else one equal chunk per output."""
    x = n.x()
    s = shape_of_t(x)
    axis = _axis(n.attr("axis", 0), len(s))
    d, k = s[axis], len(n.proto.output)
    sizes = n.ints(1, "split") if n.opset >= 13 else n.attr("split")
    if not sizes:
        chunk = -(-d // k) if n.has_attr("num_outputs") else d // k
        if not n.has_attr("num_outputs") and d % k:
            raise Unsupported(f"dim {d} does not split evenly into {k} outputs")
        sizes = [chunk] * (k - 1) + [d - chunk * (k - 1)]
    if sum(sizes) != d or len(sizes) != k or min(sizes) < 0:
        raise Unsupported(f"split sizes {list(sizes)} do not cover dim {d} with {k} outputs")
    outs, start = [], 0
    for size in sizes:
        ranges = [range(e) for e in s]
        ranges[axis] = range(start, start + size)
        outs.append(take(n.em, x, ranges))
        start += size
    return outs


def take(em: Emitter, x: Tensor, ranges: list[range]) -> Tensor:
    """x restricted to one index range per dim: a fuel.slice for the positive steps, then a
    fuel.gather per negative-step dim. A `?` dim (negative in the static shape) is taken
    whole: its range is `range(d)` of that negative size."""
    s = shape_of_t(x)
    pos = [r if r.step > 0 else range(0, d) for r, d in zip(ranges, s, strict=True)]
    if any(r != range(0, d) for r, d in zip(pos, s, strict=True)):
        x = em.op(
            "slice",
            x,
            starts=[r.start for r in pos],
            limits=[TO_END if d < 0 else r.stop for r, d in zip(pos, s, strict=True)],
            steps=[r.step for r in pos],
        )
    for axis, r in enumerate(ranges):
        if r.step < 0:
            x = em.op("gather", x, np.array(list(r), np.int64), axis=axis)
    return x


@onnx_op("Slice", attrs="starts ends axes")
def slice_(n: Node) -> Tensor:
    x = n.x()
    s = shape_of_t(x)
    if n.opset >= 10 and _symbolic_slice(n, x):
        return _slice_dims(n, x)
    if n.opset >= 10:
        starts, ends = n.ints(1, "starts"), n.ints(2, "ends")
        axes, steps = n.ints(3, "axes"), n.ints(4, "steps")
    else:
        starts, ends, axes, steps = n.attr("starts"), n.attr("ends"), n.attr("axes"), None
    if starts is None or ends is None or len(starts) != len(ends):
        raise Unsupported("starts and ends must be given, one per sliced axis")
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    ranges = [range(d) for d in s]
    for a, st, en, sp in zip(axes, starts, ends, steps, strict=True):
        if sp == 0:
            raise Unsupported("slice steps must not be 0")
        a = _axis(a, len(s))
        ranges[a] = range(*slice(st, en, sp).indices(s[a]))
    return take(n.em, x, ranges)


def _symbolic_slice(n: Node, x: Tensor) -> bool:
    """A slice of a `?` dim, or with bounds that are dim expressions."""
    return any(isinstance(d, DimExpr) for d in sym_shape_t(n.em, x)) or any(
        is_symbolic(n.input(i)) for i in (1, 2)
    )


def _slice_dims(n: Node, x: Tensor) -> Tensor:
    """Slice where dims or bounds are dim expressions: a `?` dim keeps its bounds as written
    (numpy's clamping happens when a run binds it); a limit equal to the dim is "to the end";
    positive steps and constant starts only."""
    s = sym_shape_t(n.em, x)
    starts, ends = (dims_of(n.const(i, w)) for i, w in ((1, "starts"), (2, "ends")))
    axes, steps = n.ints(3, "axes"), n.ints(4, "steps")
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    lo, hi, step = [0] * len(s), [TO_END] * len(s), [1] * len(s)
    spans: list[tuple[int, Any, Any]] = []
    for a, st, en, sp in zip(axes, starts, ends, steps, strict=True):
        a = _axis(a, len(s))
        d = s[a]
        if isinstance(en, DimExpr) and en == d:
            en = TO_END
        if isinstance(en, DimExpr) and sp == 1 and not isinstance(st, DimExpr) and st >= 0:
            spans.append((a, st, en - st))  # `pos[:, :seq]`: positions st .. en - 1
            continue
        if isinstance(st, DimExpr) or isinstance(en, DimExpr) or sp <= 0:
            raise Unsupported(
                f"slice of dim {a} ({d}) from {st} to {en} step {sp}: over dim symbols, "
                "constant starts, positive steps and ends from a start of 0 or more only"
            )
        lo[a], hi[a], step[a] = (
            slice(st, en, sp).indices(d) if isinstance(d, int) else (st, min(en, TO_END), sp)
        )
    full = all(
        (a, b, c) == ((0, d, 1) if isinstance(d, int) else (0, TO_END, 1))
        for a, b, c, d in zip(lo, hi, step, s, strict=True)
    )
    y = x if full else n.em.op("slice", x, starts=lo, limits=hi, steps=step)
    for a, st, length in spans:  # an end over dim symbols: gather the positions (n.b.: the
        # end must not pass the dim at run time, where numpy would clamp)
        y = positions(n.em, y, a, st, length)
    return y


@onnx_op("Gather", attrs="axis")
def gather(n: Node) -> Tensor:
    return n.em.op("gather", n.x(0), n.x(1), axis=n.attr("axis", 0))


@onnx_op("GatherElements", attrs="axis")
def gather_elements(n: Node) -> Tensor:
    return elements_gather(n.em, n.x(0), n.attr("axis", 0), n.x(1))


@onnx_op("GatherND", attrs="batch_dims")
def gather_nd(n: Node) -> Tensor:
    """out[i..] = data[indices[i.., 0], ..., indices[i.., k-1], ...] (batch_dims 0): a gather of
    the data with its first k dims merged, at the linear index of each k-tuple."""
    data, em = n.x(0), n.em
    if n.attr("batch_dims", 0) != 0:
        raise Unsupported("batch_dims other than 0")
    s, ishape = shape_of_t(data), shape_of_t(n.x(1))
    k = ishape[-1] if ishape else 0
    if not ishape or not 1 <= k <= len(s):
        raise Unsupported(f"indices of shape {list(ishape)} do not index data {list(s)}")
    last = len(ishape) - 1
    cols = [em.op("gather", n.x(1), scalar(j, "i64"), axis=last) for j in range(k)]
    return gather_block(em, data, 0, cols)


@onnx_op("Expand")
def expand(n: Node) -> Tensor:
    """Bidirectional broadcast of x with the given shape."""
    x, em = n.x(), n.em
    c = n.const(1, "shape")
    s, shape = sym_shape_t(em, x), [] if c is None else dims_of(c)
    try:
        out = sym_broadcast(s, tuple(shape))
    except ShapeError:
        out = None
    if out is None or (
        all(isinstance(d, int) for d in (*s, *shape)) and broadcast_shapes(s, shape) is None
    ):
        raise Unsupported(f"shape {[str(d) for d in s]} does not broadcast with {shape}")
    return expand_to(em, x, out)


@onnx_op("Tile")
def tile(n: Node) -> Tensor:
    x, em = n.x(), n.em
    s, reps = shape_of_t(x), n.ints(1, "repeats") or []
    if len(reps) != len(s) or min(reps, default=1) < 0:
        raise Unsupported(f"repeats {reps} must be one non-negative count per dim of {list(s)}")
    if all(r == 1 for r in reps):
        return x
    pairs = reshape_to(em, x, [v for d in s for v in (1, d)])
    wide = em.op(
        "broadcast", pairs, shape=[v for d, r in zip(s, reps, strict=True) for v in (r, d)]
    )
    return reshape_to(em, wide, [d * r for d, r in zip(s, reps, strict=True)])


@onnx_op("Trilu", attrs="upper")
def trilu(n: Node) -> Tensor:
    """Keep the triangle (j - i >= k upper, <= k lower) of the last two dims, zero the rest."""
    x = n.x()
    s = shape_of_t(x)
    k = (n.ints(1, "k") or [0])[0]
    if len(s) < 2:
        raise Unsupported(f"input must have rank >= 2, got {list(s)}")
    diff = np.arange(s[-1])[None, :] - np.arange(s[-2])[:, None]
    mask = diff >= k if n.attr("upper", 1) else diff <= k
    return n.em.op("where", mask, x, scalar(0, dtype_of(x)))
