"""Triton elementwise kernels: unary math, broadcasting binary arithmetic and compares, cast.

One flat 1-D grid over the output's elements. Operands are read through strides, so numpy
broadcasting costs nothing: each input is viewed at the output shape (`broadcast_to`, stride 0
on broadcast dims), then dims every operand can merge are collapsed (`collapse_dims`) to at
most `MAX_DIMS`; past that the broadcast inputs are materialised first (rare, and still right).
Float math runs in f32 (f16/bf16 widen on load, round once on store); the op is a constexpr
code, so each (op, dtype) compiles to its own straight-line kernel.

Accuracy: + - * / (`div_rn`), sqrt (`sqrt_rn`) are IEEE correctly rounded in f32, and for
f16/bf16 one f32 op then one rounding is exact (24 >= 2p + 2). recip and rsqrt use `div_rn`
(rsqrt rounds twice: <= 1 ulp). exp/log/sin/cos/erf map to the GPU's fast math (approximate),
tanh is a Taylor polynomial below |x| = 0.55 and (1 - e^-2|x|)/(1 + e^-2|x|) above.
"""

from collections.abc import Sequence

import torch
import triton
import triton.language as tl

from runtime.kernels.triton._common import f32, flat_index, offset4, to_out
from runtime.kernels.triton.spec import (
    TRITON_PTR,
    Params,
    Shapes,
    TritonKernelSpec,
    finish,
    out_target,
    signature,
)

MAX_DIMS = 4
BLOCK = 1024

UNARY_CODES = {
    "neg": 0,
    "abs": 1,
    "relu": 2,
    "exp": 3,
    "log": 4,
    "sqrt": 5,
    "rsqrt": 6,
    "recip": 7,
    "tanh": 8,
    "sigmoid": 9,
    "silu": 10,
    "sin": 11,
    "cos": 12,
    "erf": 13,
    "gelu": 14,
    "gelu_tanh": 15,
}
"""Unary op -> constexpr code (`gelu_tanh` is gelu with params approximate="tanh")."""

BINARY_CODES = {
    "add": 0,
    "sub": 1,
    "mul": 2,
    "div": 3,
    "pow": 4,
    "max": 5,
    "min": 6,
    "eq": 10,
    "ne": 11,
    "lt": 12,
    "le": 13,
    "gt": 14,
    "ge": 15,
}
"""Binary op -> constexpr code; codes >= 10 are compares (i1 result)."""


@triton.jit
def _tanh(v):
    a = tl.abs(v)
    t = tl.exp(-2.0 * a)
    big = tl.div_rn(1.0 - t, 1.0 + t)
    big = tl.where(v < 0, -big, big)
    x2 = v * v
    p = 9.691537956929451e-05 * x2 - 0.00023912911424355248
    p = p * x2 + 0.000590027440945586
    p = p * x2 - 0.0014558343870513183
    p = p * x2 + 0.003592128036572481
    p = p * x2 - 0.008863235529902197
    p = p * x2 + 0.021869488536155203
    p = p * x2 - 0.05396825396825397
    p = p * x2 + 0.13333333333333333
    p = p * x2 - 0.3333333333333333
    small = v + v * (x2 * p)
    return tl.where(a < 0.55, small, big)


@triton.jit
def _unary(v, OP: tl.constexpr):
    if OP == 0:
        r = v * -1.0  # not -v: Triton lowers unary minus to 0 - v, which makes -(+0.0) +0.0
    elif OP == 1:
        r = tl.abs(v)
    elif OP == 2:
        r = tl.where(v <= 0.0, 0.0, v)  # like numpy's maximum(x, 0): NaN stays, -0.0 -> 0.0
    elif OP == 3:
        r = tl.exp(v)
    elif OP == 4:
        r = tl.log(v)
    elif OP == 5:
        r = tl.sqrt_rn(v)
    elif OP == 6:
        r = tl.div_rn(1.0, tl.sqrt_rn(v))
    elif OP == 7:
        r = tl.div_rn(1.0, v)
    elif OP == 8:
        r = _tanh(v)
    elif OP == 9:
        r = tl.div_rn(1.0, 1.0 + tl.exp(-v))
    elif OP == 10:
        r = tl.div_rn(v, 1.0 + tl.exp(-v))
    elif OP == 11:
        r = tl.sin(v)
    elif OP == 12:
        r = tl.cos(v)
    elif OP == 13:
        r = tl.erf(v)
    elif OP == 14:
        r = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))
    else:
        r = 0.5 * v * (1.0 + _tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))
    return r


@triton.jit
def _pow(a, b):
    """a ** b like numpy for real results: negative bases need an integer exponent."""
    r = tl.exp2(b * tl.log2(tl.abs(a)))
    b_int = tl.floor(b) == b
    odd = b_int & (tl.abs(b - 2.0 * tl.floor(0.5 * b)) == 1.0)
    neg = tl.where(odd, r * -1.0, r)
    r = tl.where(a < 0.0, tl.where(b_int, neg, float("nan")), r)
    return tl.where(b == 0.0, 1.0, r)


@triton.jit
def _binary(a, b, OP: tl.constexpr):
    nan = (a != a) | (b != b)
    if OP == 0:
        r = a + b
    elif OP == 1:
        r = a - b
    elif OP == 2:
        r = a * b
    elif OP == 3:
        r = tl.div_rn(a, b)
    elif OP == 4:
        r = _pow(a, b)
    elif OP == 5:
        r = tl.where(nan, a + b, tl.where(a > b, a, b))
    elif OP == 6:
        r = tl.where(nan, a + b, tl.where(a < b, a, b))
    elif OP == 10:
        r = a == b
    elif OP == 11:
        r = a != b
    elif OP == 12:
        r = a < b
    elif OP == 13:
        r = a <= b
    elif OP == 14:
        r = a > b
    else:
        r = a >= b
    return r


@triton.jit
def unary_kernel(
    x,
    y,
    n,
    S1,
    S2,
    S3,
    xs0,
    xs1,
    xs2,
    xs3,
    OP: tl.constexpr,
    NDIM: tl.constexpr,
    BIG: tl.constexpr,
    BLOCK: tl.constexpr,
):
    i = flat_index(BLOCK, BIG)
    m = i < n
    v = tl.load(x + offset4(i, S1, S2, S3, xs0, xs1, xs2, xs3, NDIM), mask=m, other=1.0)
    r = _unary(f32(v), OP)
    tl.store(y + i, to_out(r, y.dtype.element_ty), mask=m)


@triton.jit
def binary_kernel(
    a,
    b,
    y,
    n,
    S1,
    S2,
    S3,
    as0,
    as1,
    as2,
    as3,
    bs0,
    bs1,
    bs2,
    bs3,
    OP: tl.constexpr,
    NDIM: tl.constexpr,
    BIG: tl.constexpr,
    BLOCK: tl.constexpr,
):
    i = flat_index(BLOCK, BIG)
    m = i < n
    va = tl.load(a + offset4(i, S1, S2, S3, as0, as1, as2, as3, NDIM), mask=m, other=1.0)
    vb = tl.load(b + offset4(i, S1, S2, S3, bs0, bs1, bs2, bs3, NDIM), mask=m, other=1.0)
    r = _binary(f32(va), f32(vb), OP)
    tl.store(y + i, to_out(r, y.dtype.element_ty), mask=m)


@triton.jit
def cast_kernel(
    x,
    y,
    n,
    S1,
    S2,
    S3,
    xs0,
    xs1,
    xs2,
    xs3,
    NDIM: tl.constexpr,
    BIG: tl.constexpr,
    BLOCK: tl.constexpr,
):
    i = flat_index(BLOCK, BIG)
    m = i < n
    v = tl.load(x + offset4(i, S1, S2, S3, xs0, xs1, xs2, xs3, NDIM), mask=m)
    tl.store(y + i, to_out(v, y.dtype.element_ty), mask=m)  # one RNE rounding from the source


def collapse_dims(
    shape: Sequence[int], strides: Sequence[Sequence[int]]
) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge adjacent dims every operand walks contiguously together.

    `strides` holds one stride list per operand, all viewed at `shape`. Returns the merged shape
    and strides (possibly longer than `MAX_DIMS`; the caller decides).
    """
    dims = [(int(d), [int(s[i]) for s in strides]) for i, d in enumerate(shape) if d != 1]
    merged: list[tuple[int, list[int]]] = []
    for d, st in dims:
        if merged:
            pd, pst = merged[-1]
            if all(ps == s * d for ps, s in zip(pst, st, strict=True)):
                merged[-1] = (pd * d, st)
                continue
        merged.append((d, st))
    return [d for d, _ in merged], [[st[k] for _, st in merged] for k in range(len(strides))]


def strided_layout(
    out: torch.Tensor, ins: Sequence[torch.Tensor]
) -> tuple[list[torch.Tensor], int, list[int], list[list[int]]]:
    """Inputs viewed at `out`'s shape; the collapsed rank; the (S0..S3) walk; per-input strides.

    The walk and the strides are padded in front to `MAX_DIMS` (size 1, stride 0).
    """
    views = [x.broadcast_to(out.shape) for x in ins]
    strides = [list(v.stride()) for v in views] + [list(out.stride())]
    shape, merged = collapse_dims(out.shape, strides)
    if len(shape) > MAX_DIMS:
        views = [v.contiguous() for v in views]
        strides = [list(v.stride()) for v in views] + [list(out.stride())]
        shape, merged = collapse_dims(out.shape, strides)
    pad = MAX_DIMS - len(shape)
    return views, len(shape), [1] * pad + shape, [[0] * pad + s for s in merged[:-1]]


def dense_rank(shapes: Shapes) -> int:
    """Collapsed rank of contiguous inputs broadcast to the output `shapes[-1]` (what a launch
    on freshly allocated operands walks; AOT specs assume it)."""
    out = tuple(int(d) for d in shapes[-1])
    views = [torch.empty(tuple(s), device="meta").broadcast_to(out) for s in shapes[:-1]]
    dense = torch.empty(out, device="meta")
    dims, _ = collapse_dims(out, [list(v.stride()) for v in (*views, dense)])
    return len(dims) if len(dims) <= MAX_DIMS else 1  # past MAX_DIMS inputs are materialised


class ElementwiseKernel:
    """`unary`, `binary` or `cast` kernel for one op code, as a fuel Kernel on torch tensors."""

    family = "elementwise"

    def __init__(self, kind: str, op: str) -> None:
        self.kind, self.op = kind, op
        self.__qualname__ = f"triton_{op}"

    def _code(self, params: Params) -> int | None:
        if self.kind == "cast":
            return None
        if self.op == "gelu" and params.get("approximate") == "tanh":
            return UNARY_CODES["gelu_tanh"]
        return (UNARY_CODES if self.kind == "unary" else BINARY_CODES)[self.op]

    def launches(
        self, shapes: Shapes, dtypes: Sequence[str], params: Params, ndim: int | None = None
    ) -> tuple[TritonKernelSpec, ...]:
        """The one launch; `ndim` is the collapsed rank (default: dense operands')."""
        fn = {"unary": unary_kernel, "binary": binary_kernel, "cast": cast_kernel}[self.kind]
        names = ["x"] if self.kind != "binary" else ["a", "b"]
        types = {nm: TRITON_PTR[dt] for nm, dt in zip([*names, "y"], dtypes, strict=True)}
        types |= {"n": "i64", "S1": "i64", "S2": "i64", "S3": "i64"}
        types |= {f"{nm[0]}s{k}": "i64" for nm in names for k in range(MAX_DIMS)}
        n = 1
        for d in shapes[-1]:
            n *= int(d)
        rank = dense_rank(shapes) if ndim is None else ndim
        const: dict[str, int | float | bool] = {"NDIM": rank, "BIG": n >= 2**31, "BLOCK": BLOCK}
        code = self._code(params)
        if code is not None:
            const["OP"] = code
        name = f"{self.op}_{'_'.join(dtypes)}"
        grid = (f"cdiv(N, {BLOCK})",)
        return (TritonKernelSpec(name, fn, signature(fn, types), const, grid, {"N": n}),)

    def __call__(
        self, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor], params: Params
    ) -> None:
        out = outputs[0]
        if out.numel() == 0:
            return
        y = out_target(out)
        views, rank, shape, strides = strided_layout(y, inputs)
        shapes = [tuple(v.shape) for v in views] + [tuple(y.shape)]
        (spec,) = self.launches(shapes, ["f32"] * (len(inputs) + 1), params, ndim=rank)
        flat = [s for st in strides for s in st]
        spec.launch(*views, y, y.numel(), *shape[1:], *flat)
        finish(out, y)
