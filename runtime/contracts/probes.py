"""Probe inputs for verifying kernel claims: edge values, random values, ragged shapes.

Every float probe set holds the edges that break kernels: signed zeros, infinities, NaN, the
smallest subnormals and normals, the largest finite values, exp/log overflow thresholds and
large magnitudes; then scaled normals over many decades and random bit patterns. 16-bit float
unary ops see all 65536 bit patterns (exhaustive). Shapes are ragged (lengths that are not
multiples of a SIMD width, 2-D tails) and binary/where probes broadcast.

`PROBES` maps an op to its builder; an op without one cannot be verified yet (its claims get
`no_probe` records and stay unproven).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

from runtime.dtypes import FLOAT_DTYPES, NUMPY_DTYPES


@dataclass(frozen=True)
class Probe:
    """One kernel invocation: inputs, params, and the output's shape and dtype."""

    inputs: list[np.ndarray]
    out_shape: tuple[int, ...]
    out_dtype: str
    params: Mapping[str, Any] = field(default_factory=dict)
    label: str = ""


Builder = Callable[[str, tuple[str, ...]], list[Probe]]


def edges(dtype: str) -> np.ndarray:
    """The edge values of a float dtype (see the module docstring)."""
    fi = ml_dtypes.finfo(NUMPY_DTYPES[dtype])
    big, tiny, sub = float(fi.max), float(fi.smallest_normal), float(fi.smallest_subnormal)
    lnmax, lnsub = math.log(big), math.log(sub)
    vals = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, 2.0, math.pi, -math.pi / 2]
    vals += [big, -big, tiny, -tiny, sub, -sub, 3 * sub, lnmax, -lnmax, lnsub, lnsub - 1.0]
    vals += [lnmax * (1 + 1e-3), lnmax * (1 - 1e-3), 1e-8, -1e-8, 700.0, -745.0, 1e22, -1e300]
    with np.errstate(over="ignore"):
        return np.array(vals, np.float64).astype(NUMPY_DTYPES[dtype])


def float_values(dtype: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Edges, then scaled normals over 8 decades, then random bit patterns."""
    dt = NUMPY_DTYPES[dtype]
    scaled = rng.standard_normal(n) * 10.0 ** rng.integers(-4, 5, n)
    bits = np.frombuffer(rng.bytes(dt.itemsize * n), dt)
    with np.errstate(over="ignore"):
        return np.concatenate([edges(dtype), scaled.astype(dt), bits])


def int_values(dtype: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """The extremes (min, max, 0, 1, -1), then uniform values over the whole range."""
    if dtype == "i1":
        return rng.random(n) < 0.5
    info = np.iinfo(NUMPY_DTYPES[dtype])
    extremes = np.array([info.min, info.max, 0, 1, info.max - 1], NUMPY_DTYPES[dtype])
    extremes = np.concatenate([extremes, np.array([-1], np.int64).astype(NUMPY_DTYPES[dtype])])
    body = rng.integers(info.min, info.max, n, dtype=NUMPY_DTYPES[dtype], endpoint=True)
    return np.concatenate([extremes, body])


def values(dtype: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """`float_values` or `int_values` by dtype."""
    return float_values(dtype, n, rng) if dtype in FLOAT_DTYPES else int_values(dtype, n, rng)


def _ragged(x: np.ndarray) -> list[tuple[np.ndarray, str]]:
    """The whole vector, and a 2-D (k, 13) block of its head (a ragged row length)."""
    k = min(x.size // 13, 7)
    out = [(x, "flat")]
    if k:
        out.append((np.ascontiguousarray(x[: k * 13].reshape(k, 13)), "2d"))
    return out


def unary(op: str, dtypes: tuple[str, ...]) -> list[Probe]:
    """All 16-bit patterns, or edges + scaled + random bits; flat and 2-D; gelu in both forms."""
    t = dtypes[0]
    rng = np.random.default_rng(101)
    if t in ("f16", "bf16"):
        x = np.arange(65536, dtype=np.uint16).view(NUMPY_DTYPES[t])
    elif op == "gelu" and t == "f64":  # its reference is 45-digit decimal: fewer, aimed values
        x = np.concatenate([values(t, 150, rng), _gelu_tail(rng)])
    else:
        x = values(t, 3000 if t == "f64" else 12_000, rng)
    params = [{"approximate": "none"}, {"approximate": "tanh"}] if op == "gelu" else [{}]
    return [
        Probe([a], a.shape, dtypes[-1], p, f"{label} {dict(p)}".strip())
        for p in params
        for a, label in _ragged(x)
    ]


def _gelu_tail(rng: np.random.Generator) -> np.ndarray:
    """Where gelu is hard: the deep negative tail (1 + erf cancels), the transition, tiny x."""
    return np.concatenate(
        [
            rng.uniform(-39, -5, 120),
            rng.uniform(-5, 5, 120),
            rng.uniform(5, 40, 20),
            np.exp(rng.uniform(-40, 0, 30)) * rng.choice([-1.0, 1.0], 30),
            [-38.6, -37.6],
        ]
    )


def _pairs(t: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of edges, then independent random values."""
    if t not in FLOAT_DTYPES:
        return values(t, n, rng), values(t, n, rng)
    e = edges(t)
    ea, eb = (a.ravel() for a in np.meshgrid(e, e))
    return np.concatenate([ea, values(t, n, rng)]), np.concatenate([eb, values(t, n, rng)])


def _take(t: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """n values of `t`: random ones with the edges mixed in."""
    pool = values(t, n, rng)
    return rng.permutation(pool)[:n]


def binary(op: str, dtypes: tuple[str, ...]) -> list[Probe]:
    """Edge pairs and random pairs (ties for comparisons), then two broadcasting probes."""
    t = dtypes[0]
    rng = np.random.default_rng(202)
    a, b = _pairs(t, 1500 if t == "f64" else 6000, rng)
    if op == "pow" and t in FLOAT_DTYPES:  # the claim covers all inputs; add the useful range
        dt = NUMPY_DTYPES[t]
        base = np.exp(rng.uniform(-8, 8, 2000)).astype(dt)
        expo = rng.uniform(-30, 30, 2000).astype(dt)
        a, b = (
            np.concatenate([a, base, -base[:200]]),
            np.concatenate([b, expo, np.round(expo[:200])]),
        )
    if op in ("eq", "ne", "lt", "le", "gt", "ge"):
        b = b.copy()
        b[::3] = a[::3]  # plenty of ties
    out = [Probe([a, b], a.shape, dtypes[-1], {}, "flat")]
    m, row, col = (_take(t, n, rng) for n in (7 * 13, 13, 7))
    m, col = m.reshape(7, 13), col.reshape(7, 1)
    out.append(Probe([m, row], (7, 13), dtypes[-1], {}, "broadcast row"))
    out.append(Probe([col, row.reshape(1, 13)], (7, 13), dtypes[-1], {}, "outer broadcast"))
    return out


def where(op: str, dtypes: tuple[str, ...]) -> list[Probe]:
    """All three operands broadcast to a (5, 6, 7) output."""
    t = dtypes[1]
    rng = np.random.default_rng(303)
    cond = rng.random((5, 1, 7)) < 0.5
    a, b = _take(t, 5 * 6 * 7, rng).reshape(5, 6, 7), _take(t, 6, rng).reshape(6, 1)
    return [Probe([cond, a, b], (5, 6, 7), dtypes[-1], {}, "broadcast")]


MATMUL_SHAPES = (
    ((2, 1, 3, 4), (3, 4, 5)),
    ((4, 6), (6, 3)),
    ((1, 7, 16), (2, 16, 1)),
    ((2, 9, 33), (33, 17)),
    ((40, 64), (64, 24)),
    ((2, 12, 40), (1, 40, 36)),
)
"""Batched, plain, broadcast-batch; then products by a 2-D weight with 18 and 40 rows (kernels
that switch from GEMV to a blocked GEMM above a few rows take the blocked path; ragged sizes),
and a broadcast batch of 12-row matrices (the blocked path per matrix)."""


def matmul(op: str, dtypes: tuple[str, ...]) -> list[Probe]:
    """Batched, plain and broadcast-batch products, and blocked ones (`MATMUL_SHAPES`)."""
    t = dtypes[0]
    rng = np.random.default_rng(404)
    out = []
    for sa, sb in MATMUL_SHAPES:
        if t in FLOAT_DTYPES:
            a = rng.standard_normal(sa).astype(NUMPY_DTYPES[t])
            b = rng.standard_normal(sb).astype(NUMPY_DTYPES[t])
        else:
            a, b = (_take(t, math.prod(s), rng).reshape(s) for s in (sa, sb))
        shape = np.broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1])
        out.append(Probe([a, b], shape, dtypes[-1], {}, f"{sa}x{sb}"))
    return out


def _grid_midpoints(dtype: str, rng: np.random.Generator, n: int) -> np.ndarray:
    """Exact midpoints between random adjacent finite values of a 16-bit float grid."""
    top = 0x7C00 if dtype == "f16" else 0x7F80
    grid = np.arange(0, top, dtype=np.uint16).view(NUMPY_DTYPES[dtype]).astype(np.float64)
    i = rng.integers(0, len(grid) - 2, n)
    return (grid[i] + grid[i + 1]) / 2


def cast(op: str, dtypes: tuple[str, ...]) -> list[Probe]:
    """Edges, scaled and random values; from f64/f32 also the midpoints of the f16 and bf16
    grids and their neighbours (double-rounding traps); integer extremes and 2^24/2^53 + odd;
    into integers only finite in-range values (the claim's domain) and fractions to truncate."""
    src, dst = dtypes
    rng = np.random.default_rng(505)
    sdt = NUMPY_DTYPES[src]
    if src == "i1":
        x = np.array([True, False, True, False])
    elif src not in FLOAT_DTYPES:
        info = np.iinfo(sdt)
        odd = [2**24 + 1, 2**24 + 3, 65519, 65520, 2**53 + 1, -(2**53) - 3, 2**62 + 2**38 + 1]
        odd = [v for v in odd if info.min <= v <= info.max]
        x = np.concatenate([values(src, 600, rng), np.array(odd, sdt)])
    else:
        x = values(src, 600, rng)
        if src in ("f64", "f32"):
            mids = np.concatenate(
                [_grid_midpoints("bf16", rng, 200), _grid_midpoints("f16", rng, 200)]
            )
            m = np.concatenate([mids, -mids]).astype(sdt)
            x = np.concatenate([x, m, np.nextafter(m, np.inf), np.nextafter(m, -np.inf)])
        if dst not in FLOAT_DTYPES and dst != "i1":
            info = np.iinfo(NUMPY_DTYPES[dst])
            frac = np.array([0.5, -0.5, 0.99, -0.99, 1.5, -1.5, 2.75, -2.75]).astype(sdt)
            x = np.concatenate([x, frac])
            with np.errstate(all="ignore"):
                t = np.trunc(x.astype(np.float64))
                x = x[np.isfinite(t) & (t >= info.min) & (t <= info.max) & (np.abs(t) < 2.0**62)]
    return [Probe([a], a.shape, dst, {}, label) for a, label in _ragged(x)]


REDUCE_PARAMS = (((), False), ((0,), True), ((1, 2), False), ((0, 1, 2), True), ((2,), False))


def _block(t: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Random values of `t` (floats: normals x 4 with a NaN, an inf and a signed zero)."""
    if t not in FLOAT_DTYPES:
        return _take(t, math.prod(shape), rng).reshape(shape)
    x = (rng.standard_normal(shape) * 4).astype(NUMPY_DTYPES[t])
    x.flat[7], x.flat[20], x.flat[33] = np.nan, -np.inf, -0.0
    return x


def _reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keep: bool) -> tuple[int, ...]:
    if keep:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _signed_zeros(t: str) -> np.ndarray:
    """Rows of only -0.0 (IEEE: their sum is -0.0), mixed zeros (+0.0), only +0.0, and -0.0
    with a value that cancels (x + -x is +0.0)."""
    rows = [[-0.0] * 9, [-0.0, 0.0] * 4 + [-0.0], [0.0] * 9, [-0.0] * 7 + [1.5, -1.5]]
    return np.array(rows, NUMPY_DTYPES[t])


def reduce(op: str, dtypes: tuple[str, ...]) -> list[Probe]:
    """A (4, 5, 6) block with NaN, inf and -0 over five axis sets, a ragged (3, 1000) sum, and
    rows of signed zeros (floats)."""
    t = dtypes[0]
    rng = np.random.default_rng(606)
    out = []
    for axes, keep in REDUCE_PARAMS:
        x = _block(t, (4, 5, 6), rng)
        params = {"axes": axes, "keepdim": keep}
        out.append(Probe([x], _reduced_shape(x.shape, axes, keep), t, params, f"{axes} {keep}"))
    x = _block(t, (3, 1000), rng)
    out.append(Probe([x], (3,), t, {"axes": (1,), "keepdim": False}, "long rows"))
    if t in FLOAT_DTYPES:
        x = _signed_zeros(t)
        out.append(Probe([x], (4,), t, {"axes": (1,), "keepdim": False}, "signed zeros"))
    return out


def softmax(op: str, dtypes: tuple[str, ...]) -> list[Probe]:
    """Rows of spread 0..200 around random offsets, one with -inf entries; both axes."""
    t = dtypes[0]
    rng = np.random.default_rng(707)
    spreads = np.array([1.0, 30.0, 200.0, 0.0, 8.0])[:, None]
    x = rng.standard_normal((5, 37)) * spreads + rng.uniform(-50, 50, (5, 1))
    x[4, ::5] = -np.inf
    x = x.astype(NUMPY_DTYPES[t])
    xt = np.ascontiguousarray(x.T)
    return [
        Probe([x], x.shape, t, {"axis": 1}, "rows"),
        Probe([xt], xt.shape, t, {"axis": 0}, "columns"),
        Probe([x[:, :13]], (5, 13), t, {"axis": -1}, "ragged rows"),
    ]


def _normal(t: str, shape: tuple[int, ...], rng: np.random.Generator, scale: float = 1.0):
    return (rng.standard_normal(shape) * scale).astype(NUMPY_DTYPES[t])


def norm(op: str, dtypes: tuple[str, ...]) -> list[Probe]:
    """(3, 4, 16) and a ragged (2, 37) with per-column weights (and biases)."""
    t = dtypes[0]
    rng = np.random.default_rng(808)
    out = []
    for shape in ((3, 4, 16), (2, 37)):
        x = _normal(t, shape, rng, 3.0) + np.asarray(5.0 if op == "layer_norm" else 0.0).astype(
            NUMPY_DTYPES[t]
        )
        params = [_normal(t, shape[-1:], rng) for _ in range(len(dtypes) - 2)]
        out.append(Probe([x, *params], shape, t, {"eps": 1e-5}, str(shape)))
    return out


def rope(op: str, dtypes: tuple[str, ...]) -> list[Probe]:
    """x (2, 3, 5, 8), angles over [-10, 10], both pairings."""
    t = dtypes[0]
    rng = np.random.default_rng(909)
    x = _normal(t, (2, 3, 5, 8), rng, 2.0)
    ang = rng.uniform(-10, 10, (5, 4))
    c, s = np.cos(ang).astype(x.dtype), np.sin(ang).astype(x.dtype)
    return [
        Probe([x, c, s], x.shape, t, {"interleaved": inter}, f"interleaved={inter}")
        for inter in (False, True)
    ]


def _attention_mask(t: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """An additive mask: 0, moderate negatives and -inf, with one row fully -inf (zeros out)."""
    keep = rng.uniform(-3, 0, shape) * (rng.random(shape) < 0.5)
    m = np.where(rng.random(shape) < 0.3, -np.inf, keep)
    if m.ndim >= 2 and shape[-2] > 1:
        m[..., 0, :] = -np.inf
    return m.astype(NUMPY_DTYPES[t])


def attention(op: str, dtypes: tuple[str, ...]) -> list[Probe]:
    """Grouped-query (4 query heads on 2 kv heads), causal or not, kv_len down to 0; the mask
    key form: an additive mask broadcast over heads, or per head."""
    t = dtypes[0]
    rng = np.random.default_rng(1010)
    if len(dtypes) == 5 and dtypes[3] != "i64":
        return _masked_attention(t, rng)
    out = []
    for sq, causal, kv_len in (
        (3, True, 6),
        (3, False, 4),
        (1, True, 5),
        (4, True, 2),
        (2, True, 0),
    ):
        q, k = _normal(t, (2, 4, sq, 8), rng), _normal(t, (2, 2, 6, 8), rng)
        v = _normal(t, (2, 2, 6, 5), rng)
        extra = [np.array(kv_len, np.int64)] if len(dtypes) == 5 else []
        params = {"causal": causal, "scale": 0.35}
        out.append(Probe([q, k, v, *extra], (2, 4, sq, 5), t, params, f"sq={sq} {causal} {kv_len}"))
    # decode (one query) over a longer cache: several key chunks of a split-KV (flash decoding)
    # kernel plus a ragged tail; the only probes a `q.dim[2] == 1` contract accepts besides sq=1
    for causal, kv_len in ((True, 517), (False, 600)):
        q, k = _normal(t, (1, 4, 1, 8), rng), _normal(t, (1, 2, 600, 8), rng)
        v = _normal(t, (1, 2, 600, 5), rng)
        extra = [np.array(kv_len, np.int64)] if len(dtypes) == 5 else []
        params = {"causal": causal, "scale": 0.35}
        out.append(Probe([q, k, v, *extra], (1, 4, 1, 5), t, params, f"decode {causal} {kv_len}"))
    return out


def _masked_attention(t: str, rng: np.random.Generator) -> list[Probe]:
    out = []
    for sq, sk, causal, mshape in (
        (3, 6, True, (2, 1, 3, 6)),
        (4, 6, False, (2, 4, 4, 6)),
        (3, 3, False, (3,)),
        (1, 600, False, (1, 1, 1, 600)),
    ):
        b = 1 if sk == 600 else 2
        q, k = _normal(t, (b, 4, sq, 8), rng), _normal(t, (b, 2, sk, 8), rng)
        v = _normal(t, (b, 2, sk, 5), rng)
        mask = _attention_mask(t, mshape, rng)
        params = {"causal": causal, "scale": 0.35}
        desc = f"mask {mshape} sq={sq} sk={sk} {causal}"
        out.append(Probe([q, k, v, mask], (b, 4, sq, 5), t, params, desc))
    return out


FUSED_SHAPES = (((4, 6), 5), ((2, 9, 33), 17), ((1, 3, 16), 40))
"""(x shape, n): rows by a 2-D weight, few and many (a GEMV and a blocked GEMM)."""
ACTS = ("none", "relu", "silu", "gelu", "gelu_tanh")


def matmul_bias_act(op: str, dtypes: tuple[str, ...]) -> list[Probe]:
    """act(x @ w + b) for every activation over `FUSED_SHAPES` (bias of the output's width)."""
    t = dtypes[0]
    rng = np.random.default_rng(1212)
    out = []
    for shape, n in FUSED_SHAPES:
        x, w = _normal(t, shape, rng), _normal(t, (shape[-1], n), rng, 0.3)
        b = _normal(t, (n,), rng)
        for act in ACTS:
            params = {"act": act}
            out.append(Probe([x, w, b], (*shape[:-1], n), t, params, f"{shape}x{n} {act}"))
    return out


def gated_mlp(op: str, dtypes: tuple[str, ...]) -> list[Probe]:
    """(silu(x @ wg) * (x @ wu)) @ wd over `FUSED_SHAPES` (hidden width n, back to d)."""
    t = dtypes[0]
    rng = np.random.default_rng(1313)
    out = []
    for shape, n in FUSED_SHAPES:
        d = shape[-1]
        x = _normal(t, shape, rng)
        wg, wu, wd = (_normal(t, s, rng, 0.3) for s in ((d, n), (d, n), (n, d)))
        out.append(Probe([x, wg, wu, wd], shape, t, {}, f"{shape} hidden {n}"))
    return out


def concat(op: str, dtypes: tuple[str, ...]) -> list[Probe]:
    """Two and three pieces of a (4, 5, 6) block of values with edges, along each axis."""
    t = dtypes[0]
    rng = np.random.default_rng(1414)
    x = _take(t, 120, rng).reshape(4, 5, 6)
    out = []
    for axis, cuts in ((0, (1,)), (1, (2, 3)), (2, (1, 5)), (-1, (3,))):
        pieces = [np.ascontiguousarray(a) for a in np.split(x, cuts, axis=axis)]
        label = f"{len(pieces)} pieces, axis {axis}"
        out.append(Probe(pieces, x.shape, t, {"axis": axis}, label))
    return out


def movement(op: str, dtypes: tuple[str, ...]) -> list[Probe]:
    """One or two probes per op over a (4, 5, 6) block of values with edges."""
    t = dtypes[0]
    rng = np.random.default_rng(1111)
    x = _take(t, 120, rng).reshape(4, 5, 6)
    if op == "reshape":
        # `shape` is for the reference (the kernel reads its output's shape)
        return [
            Probe([x], (10, 12), t, {"shape": (10, 12)}, "flat"),
            # a transposed block copied C-contiguous: contiguous-only siblings (numpy-contig)
            # accept it too; strided and offset views are the harness's own runs
            Probe([np.ascontiguousarray(x.T)], (30, 4), t, {"shape": (30, 4)}, "transposed"),
        ]
    if op == "transpose":
        return [Probe([x], (6, 4, 5), t, {"perm": (2, 0, 1)}, "perm")]
    if op == "broadcast":
        return [
            Probe([x[:1, :, 2:3]], (3, 4, 5, 6), t, {"shape": (3, 4, 5, 6)}, "new dim, repeats")
        ]
    if op == "slice":
        p = {"starts": (1, 0, 2), "limits": (4, 5, 6), "steps": (2, 1, 3)}
        return [Probe([x], (2, 5, 2), t, p, "steps")]
    idx = np.array([[0, -1, 3], [4, -5, 2]], NUMPY_DTYPES[dtypes[1]])
    return [Probe([x, idx], (4, 2, 3, 6), t, {"axis": 1}, "axis 1")]


def index_copy(op: str, dtypes: tuple[str, ...]) -> list[Probe]:
    """Rows written into a (4, 5, 6) block of values with edges: two rows along axis 1 (out of
    order), and one row of a block at offsets (a KV-cache write: layer 2, slot 4)."""
    t, ix = dtypes[0], NUMPY_DTYPES[dtypes[2]]
    rng = np.random.default_rng(1515)
    dest = _take(t, 120, rng).reshape(4, 5, 6)
    rows = _take(t, 48, rng).reshape(4, 2, 6)
    one = _take(t, 4, rng).reshape(1, 1, 4)
    return [
        Probe([dest, rows, np.array([3, 0], ix)], dest.shape, t, {"axis": 1, "offsets": (0,) * 3}),
        Probe([dest, one, np.array([4], ix)], dest.shape, t, {"axis": 1, "offsets": (2, 0, 1)}),
    ]


UNARY_OPS = (
    "exp",
    "log",
    "sqrt",
    "recip",
    "tanh",
    "sin",
    "cos",
    "rsqrt",
    "sigmoid",
    "silu",
    "gelu",
    "neg",
    "abs",
    "relu",
    "erf",
)
BINARY_OPS = ("add", "sub", "mul", "div", "max", "min", "pow", "eq", "ne", "lt", "le", "gt", "ge")

PROBES: Mapping[str, Builder] = {
    **dict.fromkeys(UNARY_OPS, unary),
    **dict.fromkeys(BINARY_OPS, binary),
    "where": where,
    "matmul": matmul,
    "cast": cast,
    **dict.fromkeys(("reduce_sum", "reduce_mean", "reduce_max", "reduce_min"), reduce),
    "softmax": softmax,
    "rms_norm": norm,
    "layer_norm": norm,
    "rope": rope,
    "attention": attention,
    "matmul_bias_act": matmul_bias_act,
    "gated_mlp": gated_mlp,
    "concat": concat,
    **dict.fromkeys(("reshape", "transpose", "broadcast", "slice", "gather"), movement),
    "index_copy": index_copy,
}
"""op -> probe builder."""


def probes_for(op: str, dtypes: Sequence[str]) -> list[Probe] | None:
    """The probes of (op, dtypes), or None when the op has no builder yet."""
    builder = PROBES.get(op)
    return None if builder is None else builder(op, tuple(dtypes))
