"""Triton data-movement kernels: transpose (tiled), slice, broadcast, concat (strided copies),
gather, where.

Every value is moved as raw bits: each operand is viewed as the unsigned/signed integer of its
width (f64/i64 -> i64, f32/i32 -> i32, f16/bf16 -> i16, i8/u8/i1 -> u8), so one kernel serves
all nine dtypes per width, copies are exact for every bit pattern (NaN payloads, subnormals,
-0.0) and the interpreter's bf16 conversions never run.

* `copy_kernel` is one flat 1-D grid over the output; each flat index is unravelled over a
  row-major walk of at most `MAX_DIMS` dims and dotted with the input's and the output's
  strides, plus an element offset per operand. transpose (the input's strides permuted), slice
  (offset `sum(start * stride)`, strides scaled by the steps; fuel's steps are >= 1), broadcast
  (stride 0 on broadcast dims) and concat (one launch per non-empty input, writing the output's
  slice along `axis`: offset and the output's strides) are all this one copy.
* `transpose_kernel` is the transpose whose innermost output axis is not the input's contiguous
  axis (`transpose_spec`): the collapsed walk read as a batched 2-D transpose [B, M, N], M the
  input's unit-stride axis, N the output's. A program moves one BLOCK_M x BLOCK_N tile, loaded
  with offsets contiguous along M and stored contiguous along N, so both sides coalesce (the
  compiler stages the tile through shared memory between the two layouts); up to four batch
  dims in any order are unravelled once per program. A strided copy there would read or write
  one element per 32-byte sector. Thin transposes (M or N < `MIN_TILE`), walks deeper than
  `MAX_DIMS` and inputs with no unit-stride axis stay strided copies.
* `where_kernel` is the same walk as the copy over four operands (cond, lhs, rhs, out), each
  broadcast to the output with stride 0.
* `gather_kernel` walks the output as (P, M, Q) = (dims before `axis`, the indices' elements,
  dims after `axis`), loads index j, adds the axis size when negative and reads
  `data[p, idx, q]` (masked: an out-of-range index never reads out of bounds). Out of range
  (outside -A .. A-1) is an `IndexError` like the CPU kernel's, detected by the kernel itself,
  with no host pass over the indices before the launch: each program atomically maxes
  `M - j` of its first bad position j into a one-element error buffer (zeroed next to the
  output), and the launcher reads that element back after the launch (on a GPU the call's one
  sync) and raises naming the axis, its size, the bad index and its position. An empty output
  reads no index, so checks none (as numpy's `take` with an empty dim before `axis`).

Walks are collapsed first (`collapse_dims`: size-1 dims dropped, dims every operand walks
contiguously together merged); a strided walk still deeper than `MAX_DIMS` is peeled: one launch
per index of its outermost dim, each with its own offsets. Every runtime integer argument is in
the spec's `sizes`, so a spec is a complete launch: pointers (in signature order) plus `sizes`.
The integer arguments are i32 unless an operand spans >= 2^31 elements (`BIG`: i64 indices).
"""

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl

from runtime.kernels.triton._common import flat_index
from runtime.kernels.triton.elementwise import collapse_dims
from runtime.kernels.triton.spec import (
    TRITON_PTR,
    Params,
    Shapes,
    TritonKernelSpec,
    finish,
    next_pow2,
    out_target,
    signature,
)

MAX_DIMS = 6
BLOCK = 1024
INT_BITS = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}
"""Element width (bytes) -> the integer dtype a movement kernel moves it as."""
BITS_PTR = {8: "*i64", 4: "*i32", 2: "*i16", 1: "*u8"}
WIDTH = {"f64": 8, "i64": 8, "f32": 4, "i32": 4, "f16": 2, "bf16": 2, "i8": 1, "u8": 1, "i1": 1}
"""fuel dtype -> element width in bytes."""
COPY_OPS = ("transpose", "slice", "broadcast", "concat")
TILE = 64
"""Largest side of a `transpose_kernel` tile (64 x 64: 32 elements per thread at 4 warps)."""
MIN_TILE = 16
"""Shortest M and N a tiled transpose takes: a thinner one wastes most of each tile's lanes,
and its strided copy touches few sectors per row anyway."""

ERR_DTYPE = {"*i32": torch.int32, "*i64": torch.int64}
"""gather's error-buffer pointer type -> the torch dtype to allocate it as."""

Layout = tuple[int, Sequence[int]]
"""One operand of a strided walk: (element offset, strides at the walk's shape)."""


@triton.jit
def _coords(i, S1, S2, S3, S4, S5, NDIM: tl.constexpr):
    """Coordinates (c0..c5) of flat index `i` in a row-major (S0..S5) walk. Only the last NDIM
    are meaningful (`_offset` ignores the rest), so a rank-r walk pays r - 1 divisions."""
    c5 = i
    c4 = i
    c3 = i
    c2 = i
    c1 = i
    c0 = i
    if NDIM >= 2:
        c5 = i % S5
        c4 = i // S5
    if NDIM >= 3:
        c3 = c4 // S4
        c4 = c4 % S4
    if NDIM >= 4:
        c2 = c3 // S3
        c3 = c3 % S3
    if NDIM >= 5:
        c1 = c2 // S2
        c2 = c2 % S2
    if NDIM >= 6:
        c0 = c1 // S1
        c1 = c1 % S1
    return c0, c1, c2, c3, c4, c5


@triton.jit
def _offset(c, s0, s1, s2, s3, s4, s5, NDIM: tl.constexpr):
    """Memory offset of coordinates `c` (from `_coords`) under strides s0..s5."""
    off = c[5] * s5
    if NDIM >= 2:
        off += c[4] * s4
    if NDIM >= 3:
        off += c[3] * s3
    if NDIM >= 4:
        off += c[2] * s2
    if NDIM >= 5:
        off += c[1] * s1
    if NDIM >= 6:
        off += c[0] * s0
    return off


@triton.jit
def copy_kernel(
    x,
    y,
    n,
    x_off,
    y_off,
    S1,
    S2,
    S3,
    S4,
    S5,
    xs0,
    xs1,
    xs2,
    xs3,
    xs4,
    xs5,
    ys0,
    ys1,
    ys2,
    ys3,
    ys4,
    ys5,
    NDIM: tl.constexpr,
    BIG: tl.constexpr,
    BLOCK: tl.constexpr,
):
    i = flat_index(BLOCK, BIG)
    m = i < n
    c = _coords(i, S1, S2, S3, S4, S5, NDIM)
    v = tl.load(x + x_off + _offset(c, xs0, xs1, xs2, xs3, xs4, xs5, NDIM), mask=m)
    tl.store(y + y_off + _offset(c, ys0, ys1, ys2, ys3, ys4, ys5, NDIM), v, mask=m)


@triton.jit
def transpose_kernel(
    x,
    y,
    M,
    N,
    x_off,
    y_off,
    xn,
    ym,
    S2,
    S3,
    S4,
    S5,
    xs2,
    xs3,
    xs4,
    xs5,
    ys2,
    ys3,
    ys4,
    ys5,
    NDIM: tl.constexpr,
    BIG: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """y[b, m, n] = x[b, m, n] for one BLOCK_M x BLOCK_N tile of a batched [B, M, N] transpose:
    x has unit stride along m, y along n; the NDIM - 2 batch dims are the walk S2..S5 (S2 only
    sizes the grid). Programs run n-tiles fastest, so neighbours write neighbouring tiles."""
    pid = tl.program_id(0)
    if BIG:
        pid = pid.to(tl.int64)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles_m = tl.cdiv(M, BLOCK_M)
    rn = (pid % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    r = pid // tiles_n
    rm = (r % tiles_m) * BLOCK_M + tl.arange(0, BLOCK_M)
    c = _coords(r // tiles_m, 1, S2, S3, S4, S5, NDIM - 2)
    xb = x + x_off + _offset(c, 0, 0, xs2, xs3, xs4, xs5, NDIM - 2)
    yb = y + y_off + _offset(c, 0, 0, ys2, ys3, ys4, ys5, NDIM - 2)
    m = (rm < M)[:, None] & (rn < N)[None, :]
    v = tl.load(xb + rm[:, None] + rn[None, :] * xn, mask=m)
    tl.store(yb + rm[:, None] * ym + rn[None, :], v, mask=m)


@triton.jit
def where_kernel(
    c,
    a,
    b,
    y,
    n,
    c_off,
    a_off,
    b_off,
    y_off,
    S1,
    S2,
    S3,
    S4,
    S5,
    cs0,
    cs1,
    cs2,
    cs3,
    cs4,
    cs5,
    as0,
    as1,
    as2,
    as3,
    as4,
    as5,
    bs0,
    bs1,
    bs2,
    bs3,
    bs4,
    bs5,
    ys0,
    ys1,
    ys2,
    ys3,
    ys4,
    ys5,
    NDIM: tl.constexpr,
    BIG: tl.constexpr,
    BLOCK: tl.constexpr,
):
    i = flat_index(BLOCK, BIG)
    m = i < n
    k = _coords(i, S1, S2, S3, S4, S5, NDIM)
    t = tl.load(c + c_off + _offset(k, cs0, cs1, cs2, cs3, cs4, cs5, NDIM), mask=m, other=0) != 0
    va = tl.load(a + a_off + _offset(k, as0, as1, as2, as3, as4, as5, NDIM), mask=m & t)
    vb = tl.load(b + b_off + _offset(k, bs0, bs1, bs2, bs3, bs4, bs5, NDIM), mask=m & ~t)
    tl.store(
        y + y_off + _offset(k, ys0, ys1, ys2, ys3, ys4, ys5, NDIM), tl.where(t, va, vb), mask=m
    )


@triton.jit
def gather_kernel(d, ix, y, err, n, M, Q, A, ds0, ds1, ds2, BIG: tl.constexpr, BLOCK: tl.constexpr):
    """y[p, j, q] = d[p, ix[j], q]; `err[0]` is maxed with M - j for this program's first
    out-of-range position j (it stays 0 when every index is in range)."""
    i = flat_index(BLOCK, BIG)
    m = i < n
    q = i % Q
    r = i // Q
    j = r % M
    p = r // M
    k = tl.load(ix + j, mask=m, other=0)
    if BIG:
        k = k.to(tl.int64)
    k = tl.where(k < 0, k + A, k)
    ok = (k >= 0) & (k < A)
    v = tl.load(d + p * ds0 + k * ds1 + q * ds2, mask=m & ok, other=0)
    tl.store(y + i, v, mask=m)
    bad = tl.max(tl.where(m & ~ok, M - j, 0), axis=0)
    tl.atomic_max(err, bad, mask=bad > 0)


def bits(t: torch.Tensor) -> torch.Tensor:
    """`t` viewed (any strides) as the integer dtype of its width."""
    return t.view(INT_BITS[t.element_size()])


def _extent(layout: Layout, shape: Sequence[int]) -> int:
    off, st = layout
    return off + sum((d - 1) * abs(s) for d, s in zip(shape, st, strict=True)) + 1


def strided_specs(
    fn: Any, name: str, ptrs: dict[str, str], shape: Sequence[int], layouts: Sequence[Layout]
) -> list[TritonKernelSpec]:
    """The launches of a strided-walk kernel (`copy_kernel`, `where_kernel`) over `shape`.

    `ptrs` maps each pointer argument (in operand order, the output last) to its Triton type;
    `layouts` gives each operand's offset and strides. Deeper than `MAX_DIMS` after collapsing,
    the outermost dim is peeled into one launch per index.
    """
    if math.prod(shape) == 0:
        return []
    dims, strides = collapse_dims(shape, [st for _, st in layouts])
    if len(dims) > MAX_DIMS:
        out: list[TritonKernelSpec] = []
        for j in range(dims[0]):
            sub = [(off + j * st[0], st[1:]) for (off, _), st in zip(layouts, strides, strict=True)]
            out += strided_specs(fn, name, ptrs, dims[1:], sub)
        return [_renamed(s, f"{name}_{k}") for k, s in enumerate(out)]
    pad = MAX_DIMS - len(dims)
    walk = [1] * pad + dims
    n = math.prod(dims)
    big = max([n] + [_extent(lay, shape) for lay in layouts]) >= 2**31
    sizes = {"n": n}
    sizes |= {f"{p}_off": off for p, (off, _) in zip(ptrs, layouts, strict=True)}
    sizes |= {f"S{k}": walk[k] for k in range(1, MAX_DIMS)}
    for p, st in zip(ptrs, strides, strict=True):
        sizes |= {f"{p}s{k}": s for k, s in enumerate([0] * pad + st)}
    types = dict(ptrs) | dict.fromkeys(sizes, "i64" if big else "i32")
    const = {"NDIM": len(dims), "BIG": big, "BLOCK": BLOCK}
    grid = (f"cdiv(n, {BLOCK})",)
    return [TritonKernelSpec(name, fn, signature(fn, types), const, grid, sizes)]


def transpose_spec(
    name: str, ptr: str, shape: Sequence[int], layouts: Sequence[Layout]
) -> TritonKernelSpec | None:
    """The tiled launch (`transpose_kernel`) of the copy of `layouts[0]` into `layouts[1]` over
    `shape`, or None when the copy is not a wide transpose (see the module docstring)."""
    dims, (xs, ys) = collapse_dims(shape, [st for _, st in layouts])
    if math.prod(dims) == 0 or not 2 <= len(dims) <= MAX_DIMS:
        return None
    if ys[-1] != 1 or xs[-1] == 1 or 1 not in xs[:-1]:
        return None
    k = xs.index(1)
    m, n = dims[k], dims[-1]
    if min(m, n) < MIN_TILE:
        return None
    big = max([math.prod(dims)] + [_extent(lay, shape) for lay in layouts]) >= 2**31
    const = {
        "NDIM": len(dims),
        "BIG": big,
        "BLOCK_M": min(TILE, next_pow2(m)),
        "BLOCK_N": min(TILE, next_pow2(n)),
    }
    # the batch walk S2..S5: the other dims in order, padded in front with a size-1, stride-0
    # dim appended past the walk's end
    batch = [len(dims)] * (MAX_DIMS - len(dims)) + [d for d in range(len(dims) - 1) if d != k]
    sizes = {
        "M": m,
        "N": n,
        "x_off": layouts[0][0],
        "y_off": layouts[1][0],
        "xn": xs[-1],
        "ym": ys[k],
    }
    dims, xs, ys = [*dims, 1], [*xs, 0], [*ys, 0]
    sizes |= {f"S{j}": dims[d] for j, d in enumerate(batch, 2)}
    sizes |= {f"{p}s{j}": st[d] for p, st in (("x", xs), ("y", ys)) for j, d in enumerate(batch, 2)}
    types = {"x": ptr, "y": ptr} | dict.fromkeys(sizes, "i64" if big else "i32")
    tiles = f"cdiv(M, {const['BLOCK_M']}) * cdiv(N, {const['BLOCK_N']})"
    grid = (f"{tiles} * S2 * S3 * S4 * S5",)
    return TritonKernelSpec(
        name, transpose_kernel, signature(transpose_kernel, types), const, grid, sizes
    )


def _renamed(spec: TritonKernelSpec, name: str) -> TritonKernelSpec:
    return TritonKernelSpec(
        name,
        spec.fn,
        spec.signature,
        spec.constexprs,
        spec.grid,
        spec.sizes,
        spec.num_warps,
        spec.num_stages,
    )


def launch(spec: TritonKernelSpec, *ptrs: torch.Tensor) -> None:
    """Launch `spec` on `ptrs` (its pointer arguments, in order) and its own `sizes`."""
    scalars = [spec.sizes[a] for a, t in spec.signature.items() if t in ("i32", "i64")]
    spec.launch(*ptrs, *scalars)


def _layout(view: torch.Tensor, base: torch.Tensor) -> Layout:
    """`view` (of `base`'s storage) as an element offset from `base` and its strides."""
    return view.storage_offset() - base.storage_offset(), tuple(view.stride())


def _source_view(op: str, x: torch.Tensor, shape: Sequence[int], params: Params) -> torch.Tensor:
    """The strided view of `x` that transpose / slice / broadcast copies out."""
    if op == "transpose":
        return x.permute(*params["perm"])
    if op == "slice":
        lims = zip(params["starts"], params["limits"], params["steps"], strict=True)
        return x[tuple(slice(a, b, c) for a, b, c in lims)]
    return x.broadcast_to(tuple(shape))


def _meta(shape: Sequence[int]) -> torch.Tensor:
    return torch.empty(tuple(int(d) for d in shape), device="meta", dtype=torch.uint8)


class CopyKernel:
    """transpose, slice, broadcast or concat as strided copies (`copy_kernel`); a transpose
    that moves the innermost axis as tiles (`transpose_kernel`)."""

    family = "movement"

    def __init__(self, op: str) -> None:
        self.op = op
        self.__qualname__ = f"triton_{op}"

    def _plan(
        self, ins: Sequence[torch.Tensor], out: torch.Tensor, ptr: str, name: str, params: Params
    ) -> list[tuple[int, TritonKernelSpec]]:
        """(input index, launch) pairs; `ins` and `out` may be meta tensors (only strides and
        offsets are read)."""
        ptrs = {"x": ptr, "y": ptr}
        if self.op != "concat":
            v = _source_view(self.op, ins[0], out.shape, params)
            layouts = [_layout(v, ins[0]), (0, out.stride())]
            tiled = (
                transpose_spec(name, ptr, out.shape, layouts) if self.op == "transpose" else None
            )
            specs = [tiled] if tiled else strided_specs(copy_kernel, name, ptrs, out.shape, layouts)
            return [(0, s) for s in specs]
        axis, start, plan = params["axis"], 0, []
        for k, x in enumerate(ins):
            dst = out.narrow(axis, start, x.shape[axis])
            start += x.shape[axis]
            layouts = [(0, x.stride()), _layout(dst, out)]
            plan += [
                (k, s) for s in strided_specs(copy_kernel, f"{name}_{k}", ptrs, x.shape, layouts)
            ]
        return plan

    def launches(
        self, shapes: Shapes, dtypes: Sequence[str], params: Params
    ) -> tuple[TritonKernelSpec, ...]:
        """The launches for contiguous operands (concat: one per non-empty input)."""
        ins, out = [_meta(s) for s in shapes[:-1]], _meta(shapes[-1])
        name = f"{self.op}_{dtypes[-1]}"
        return tuple(s for _, s in self._plan(ins, out, BITS_PTR[WIDTH[dtypes[-1]]], name, params))

    def __call__(
        self, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor], params: Params
    ) -> None:
        y, xs = bits(outputs[0]), [bits(x) for x in inputs]
        for k, spec in self._plan(xs, y, BITS_PTR[y.element_size()], self.op, params):
            launch(spec, xs[k], y)


class WhereKernel:
    """`where(cond, lhs, rhs)` with numpy broadcasting (`where_kernel`)."""

    family = "elementwise"

    def __init__(self) -> None:
        self.__qualname__ = "triton_where"

    @staticmethod
    def _specs(
        ins: Sequence[torch.Tensor], out: torch.Tensor, ptr: str, name: str
    ) -> list[TritonKernelSpec]:
        views = [t.broadcast_to(out.shape) for t in ins]
        layouts = [_layout(v, t) for v, t in zip(views, ins, strict=True)] + [(0, out.stride())]
        ptrs = {"c": "*u8", "a": ptr, "b": ptr, "y": ptr}
        return strided_specs(where_kernel, name, ptrs, out.shape, layouts)

    def launches(
        self, shapes: Shapes, dtypes: Sequence[str], params: Params
    ) -> tuple[TritonKernelSpec, ...]:
        ins, out = [_meta(s) for s in shapes[:-1]], _meta(shapes[-1])
        name = f"where_{dtypes[-1]}"
        return tuple(self._specs(ins, out, BITS_PTR[WIDTH[dtypes[-1]]], name))

    def __call__(
        self, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor], params: Params
    ) -> None:
        y, ins = bits(outputs[0]), [bits(x) for x in inputs]
        for spec in self._specs(ins, y, BITS_PTR[y.element_size()], "where"):
            launch(spec, *ins, y)


def _gather_strides(data: torch.Tensor, axis: int) -> tuple[int, int, int] | None:
    """`data`'s strides as a (P, A, Q) walk, or None when the dims before or after `axis` do
    not merge into one (the caller copies `data` contiguous then)."""
    outer = []
    for dims in (range(axis), range(axis + 1, data.dim())):
        shape, (st,) = collapse_dims(
            [data.shape[d] for d in dims], [[data.stride(d) for d in dims]]
        )
        if len(shape) > 1:
            return None
        outer.append(st[0] if st else 0)
    return outer[0], data.stride(axis), outer[1]


class GatherKernel:
    """`gather(data, indices, axis)` like numpy `take` (`gather_kernel`)."""

    family = "movement"

    def __init__(self) -> None:
        self.__qualname__ = "triton_gather"

    @staticmethod
    def _spec(
        data: torch.Tensor,
        strides: Sequence[int],
        m: int,
        types: tuple[str, str],
        axis: int,
        name: str,
    ) -> TritonKernelSpec | None:
        shape = data.shape
        q, a = math.prod(shape[axis + 1 :]), shape[axis]
        n = math.prod(shape[:axis]) * m * q
        if n == 0:
            return None
        ds = dict(zip(("ds0", "ds1", "ds2"), strides, strict=True))
        big = max(n, _extent((0, data.stride()), shape)) >= 2**31
        sizes = {"n": n, "M": m, "Q": q, "A": a, **ds}
        ptrs = {"d": types[0], "ix": types[1], "y": types[0], "err": "*i64" if big else "*i32"}
        sig = signature(gather_kernel, ptrs | dict.fromkeys(sizes, "i64" if big else "i32"))
        const = {"BIG": big, "BLOCK": BLOCK}
        return TritonKernelSpec(name, gather_kernel, sig, const, (f"cdiv(n, {BLOCK})",), sizes)

    def launches(
        self, shapes: Shapes, dtypes: Sequence[str], params: Params
    ) -> tuple[TritonKernelSpec, ...]:
        """The launch for contiguous operands; its last pointer is the error buffer: one
        zeroed element of `ERR_DTYPE[signature["err"]]`, read back after the launch."""
        data, axis = _meta(shapes[0]), params["axis"]
        types = (BITS_PTR[WIDTH[dtypes[0]]], TRITON_PTR[dtypes[1]])
        strides = _gather_strides(data, axis)
        assert strides is not None  # a contiguous tensor's outer dims always merge
        spec = self._spec(
            data, strides, math.prod(shapes[1]), types, axis, f"gather_{dtypes[0]}_{dtypes[1]}"
        )
        return () if spec is None else (spec,)

    def __call__(
        self, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor], params: Params
    ) -> None:
        """Launch, then read the error buffer back and raise on an out-of-range index (the
        output then holds zeros at those positions); an empty output reads no index."""
        (data, indices), axis = inputs, params["axis"]
        d, ix, out = bits(data), indices.contiguous(), outputs[0]
        strides = _gather_strides(d, axis)
        if strides is None:
            d = d.contiguous()
            strides = _gather_strides(d, axis)
        assert strides is not None
        ptr = BITS_PTR[d.element_size()]
        ix_ptr = "*i64" if ix.dtype == torch.int64 else "*i32"
        spec = self._spec(d, strides, ix.numel(), (ptr, ix_ptr), axis, "gather")
        if spec is None:
            return
        y = out_target(out)
        err = torch.zeros(1, dtype=ERR_DTYPE[spec.signature["err"]], device=y.device)
        launch(spec, d, ix, bits(y), err)
        first = int(err.item())  # the one device -> host read of the call (module doc)
        if first:
            raise _out_of_range(ix, ix.numel() - first, axis, data.shape[axis])
        finish(out, y)


def _out_of_range(ix: torch.Tensor, j: int, axis: int, size: int) -> IndexError:
    """The CPU kernel's error for flat position `j` of the indices `ix` (read back: one
    element, only on this path)."""
    at = ", ".join(str(int(c)) for c in np.unravel_index(j, tuple(ix.shape)))
    bad = int(ix.reshape(-1)[j])
    return IndexError(
        f"gather: index out of range for axis {axis} of size {size} (valid: "
        f"-{size} .. {size - 1}): indices[{at}] = {bad}"
    )
