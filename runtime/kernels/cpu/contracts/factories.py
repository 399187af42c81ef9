"""Contract factories for the numpy CPU kernels: `factory(dtypes, **entry_args) -> kernel`.

Every factory is declared with `@kernel_factory`: only declared functions are entry points.
The kernel bodies live in `runtime.kernels.cpu` (unchanged); these adapters turn a contract's
plain `entry_args` (a ufunc *name*, a compute-dtype *policy*) into the objects those factories
take, pick the compute dtype from the dtype key, and return the executor's positional fast
path (`direct`) exactly where the hand registration gives one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from runtime import special
from runtime.contracts.entry import BuiltKernel, kernel_factory
from runtime.dtypes import compute_dtype
from runtime.kernels.cpu import alternatives as _alt
from runtime.kernels.cpu import cast as _cast
from runtime.kernels.cpu import flash as _flash
from runtime.kernels.cpu import movement as _movement
from runtime.kernels.cpu import nn as _nn
from runtime.kernels.cpu import reduction as _reduction
from runtime.kernels.cpu._common import F64, F64_COMPUTE, WIDE, compute_kernel
from runtime.kernels.cpu.elementwise import (
    NARROW_FORMS,
    _binary,
    _compare,
    _gelu,
    _half_wide,
    _relu,
    _sign_bits,
    _unary,
    _where,
    _where_axis,
    binary_kernel,
    composite_for,
)
from runtime.kernels.cpu.extrema import settle_zero_extrema, settle_zero_ties
from runtime.kernels.cpu.linalg import _matmul
from runtime.rounding import REVISION_CODE

Dtypes = Sequence[str]

COMPUTE: dict[str, Callable[[str], np.dtype | None]] = {
    "self": lambda t: None,  # compute in the dtype itself
    "half_wide": _half_wide,  # f16/bf16 in f32 (IEEE basic ops: one rounding is exact)
    "f64": lambda t: F64_COMPUTE[t],  # every float in f64
}
"""Compute-dtype policies a contract names in `entry_args.compute`."""

_NO_DIRECT = {np.maximum, np.minimum}
"""numpy deprecates a positional `out` for maximum/minimum: no positional fast path."""


def _ufunc(name: str) -> np.ufunc:
    uf = getattr(np, name, None)
    if not isinstance(uf, np.ufunc):
        raise ValueError(f"'{name}' is not a numpy ufunc")
    return uf


@kernel_factory
def unary(dtypes: Dtypes, ufunc: str, compute: str) -> BuiltKernel:
    """`ufunc(x)` computed per the `compute` policy and rounded once into the output."""
    uf, cdt = _ufunc(ufunc), COMPUTE[compute](dtypes[0])
    return BuiltKernel(_unary(uf, cdt), direct=uf if cdt is None else None)


@kernel_factory
def composite(dtypes: Dtypes, fn: str) -> BuiltKernel:
    """A composite unary (`rsqrt`, `sigmoid`, `silu`) evaluated in f64, rounded once."""
    body = composite_for(fn, dtypes[0])
    return BuiltKernel(
        compute_kernel(body, F64_COMPUTE[dtypes[0]]), depends_on=(body, *REVISION_CODE)
    )


@kernel_factory
def gelu(dtypes: Dtypes) -> BuiltKernel:
    """gelu in f64, both forms (`approximate: none | tanh`)."""
    forms = (special.gelu_erf, special.gelu_tanh, special.gelu_tanh_f64, *NARROW_FORMS)
    return BuiltKernel(_gelu(F64_COMPUTE[dtypes[0]]), depends_on=forms)


@kernel_factory
def sign(dtypes: Dtypes, op: str) -> BuiltKernel:
    """neg / abs: on the sign bit for 16-bit floats (exact, NaN-safe), a ufunc otherwise."""
    uf = {"neg": np.negative, "abs": np.absolute}[op]
    if dtypes[0] in ("f16", "bf16"):
        mask = {"neg": (np.bitwise_xor, 0x8000), "abs": (np.bitwise_and, 0x7FFF)}[op]
        return BuiltKernel(_sign_bits(*mask))
    return BuiltKernel(_unary(uf, None), direct=uf)


@kernel_factory
def relu(dtypes: Dtypes) -> BuiltKernel:
    """max(x, 0); f16/bf16 select in f32."""
    return BuiltKernel(_relu(_half_wide(dtypes[0])))


@kernel_factory
def binary(dtypes: Dtypes, ufunc: str, compute: str) -> BuiltKernel:
    """`ufunc(a, b)` with numpy broadcasting, computed per `compute`, rounded once."""
    uf, cdt = _ufunc(ufunc), COMPUTE[compute](dtypes[0])
    direct = uf if cdt is None and uf not in _NO_DIRECT else None
    return BuiltKernel(_binary(uf, cdt), direct=direct)


@kernel_factory
def extremum(dtypes: Dtypes, ufunc: str, compute: str) -> BuiltKernel:
    """max/min (`maximum` / `minimum`): numpy's selection; floats then order -0 below +0."""
    uf, cdt = _ufunc(ufunc), COMPUTE[compute](dtypes[0])
    op = {"maximum": "max", "minimum": "min"}[ufunc]
    kernel = binary_kernel(op, uf, dtypes[0], cdt)
    return BuiltKernel(kernel, depends_on=(_binary, settle_zero_ties))


@kernel_factory
def compare(dtypes: Dtypes, ufunc: str) -> BuiltKernel:
    """A comparison into i1; 16-bit floats compare in f32 (exact)."""
    uf, cdt = _ufunc(ufunc), _half_wide(dtypes[0])
    return BuiltKernel(_compare(uf, cdt), direct=uf if cdt is None else None)


@kernel_factory
def where(dtypes: Dtypes) -> BuiltKernel:
    """`out = b`, then `a` where `cond`."""
    return BuiltKernel(_where(), depends_on=(_where_axis,))


@kernel_factory
def matmul(dtypes: Dtypes) -> BuiltKernel:
    """numpy matmul; f16/bf16 widen to f32 with f32 accumulation and round once."""
    t = dtypes[0]
    return BuiltKernel(_matmul(WIDE[t] if t in ("f16", "bf16") else None))


# -- cast, reductions, softmax, nn, movement, erf -------------------------------------------


@kernel_factory
def cast(dtypes: Dtypes) -> BuiltKernel:
    """A copy (S -> S), fuel's own rounding into or out of f16/bf16 (`runtime.rounding`), or
    numpy's conversion (exact or IEEE correctly rounded) between the other dtypes."""
    src, dst = dtypes
    return BuiltKernel(_cast.make_cast(src, dst), depends_on=REVISION_CODE)


@kernel_factory
def reduce(dtypes: Dtypes, op: str) -> BuiltKernel:
    """reduce_sum/mean/max/min: f16/bf16 accumulate in f32; float sums read a contiguous copy."""
    kernel = _reduction._make_reduce(op, dtypes[0])
    return BuiltKernel(kernel, depends_on=(settle_zero_extrema,))


@kernel_factory
def softmax(dtypes: Dtypes) -> BuiltKernel:
    """Max-subtracted softmax, f32/f16/bf16 computed in f64."""
    return BuiltKernel(_reduction._softmax(F64_COMPUTE[dtypes[0]]))


@kernel_factory
def norm(dtypes: Dtypes, op: str) -> BuiltKernel:
    """rms_norm / layer_norm in `runtime.dtypes.compute_dtype` (f32 for f16/bf16)."""
    make = {"rms_norm": _nn._rms_norm, "layer_norm": _nn._layer_norm}[op]
    return BuiltKernel(make(compute_dtype(dtypes[0])), depends_on=(_nn._compute,))


@kernel_factory
def rope(dtypes: Dtypes) -> BuiltKernel:
    """rope computed in f64 for every dtype."""
    return BuiltKernel(_nn._rope(F64))


@kernel_factory
def attention(dtypes: Dtypes, kv_len: bool, mask: bool = False) -> BuiltKernel:
    """Grouped-query SDPA in `compute_dtype` (f32, f64 for f64); `kv_len`: the 5-operand key
    with a scalar i64 valid-key count; `mask`: the 5-operand key with an additive mask."""
    kernel = _nn._attention(compute_dtype(dtypes[0]), kv_len, with_mask=mask)
    return BuiltKernel(kernel, depends_on=(_nn._sdpa, _nn._mask, _nn._compute))


_MOVEMENT: dict[str, Callable[[], Callable[..., None]]] = {
    "reshape": _movement._reshape,
    "transpose": _movement._transpose,
    "broadcast": _movement._broadcast,
    "slice": _movement._slice,
    "concat": _movement._concat,
    "gather": _movement._gather,
    "index_copy": _movement._index_copy,
}


@kernel_factory
def movement(dtypes: Dtypes, op: str) -> BuiltKernel:
    """An exact copy kernel of `runtime.kernels.cpu.movement`."""
    return BuiltKernel(_MOVEMENT[op]())


@kernel_factory
def erf(dtypes: Dtypes) -> BuiltKernel:
    """`special.erf` (f64 series / erfcx form) evaluated in f64 in chunks, rounded once."""
    kernel = compute_kernel(special.erf, F64_COMPUTE[dtypes[0]])
    return BuiltKernel(kernel, depends_on=(special.erf,))


# -- alternative siblings (numpy-fast, numpy-f64acc, numpy-flashdecode) -----------------------
# The kernels stay in `runtime.kernels.cpu.alternatives` / `flash`; their contracts live in one
# folder per kernel_source under this package (`numpy-fast/`, ...).


@kernel_factory
def fast_unary(dtypes: Dtypes, ufunc: str) -> BuiltKernel:
    """numpy-fast: the f32 ufunc called on f32 directly; the ufunc is the fast path."""
    uf = _ufunc(ufunc)
    return BuiltKernel(_alt._ufunc_fast(uf), direct=uf)


@kernel_factory
def fast_composite(dtypes: Dtypes, op: str) -> BuiltKernel:
    """numpy-fast: rsqrt / sigmoid / silu / gelu in f32 (f16/bf16 widened, rounded once)."""
    return BuiltKernel(_alt._composite_fast(op, dtypes[0]), depends_on=_alt._FAST_HELPERS)


@kernel_factory
def fast_softmax(dtypes: Dtypes) -> BuiltKernel:
    """numpy-fast: softmax in f32, rounded once into f16/bf16 by `runtime.rounding`."""
    return BuiltKernel(_alt._softmax_fast, depends_on=REVISION_CODE)


@kernel_factory
def f64acc_reduce(dtypes: Dtypes, op: str) -> BuiltKernel:
    """numpy-f64acc: reduce_sum / reduce_mean accumulated in f64, rounded once."""
    kernel = _alt._sum_f64(dtypes[0], op == "reduce_mean")
    return BuiltKernel(kernel, depends_on=(_alt.exact_f16_sum, _alt._rows, _alt._into))


@kernel_factory
def flash_decode(dtypes: Dtypes, kv_len: bool) -> BuiltKernel:
    """numpy-flashdecode: split-KV attention of one query; `kv_len`: the 5-operand key form."""
    return BuiltKernel(_flash._kernel(kv_len), depends_on=(_flash.flash_decode, _flash._partial))


@kernel_factory
def f64acc_attention(dtypes: Dtypes, kv_len: bool) -> BuiltKernel:
    """numpy-f64acc: attention (f32 values) computed in f64, rounded once."""
    kernel = _nn._attention(F64, kv_len)
    return BuiltKernel(kernel, depends_on=(_nn._sdpa, _nn._mask, _nn._compute))


@kernel_factory
def f64acc_rms_norm(dtypes: Dtypes) -> BuiltKernel:
    """numpy-f64acc: rms_norm (f32 values) computed in f64, rounded once."""
    return BuiltKernel(_nn._rms_norm(F64))
