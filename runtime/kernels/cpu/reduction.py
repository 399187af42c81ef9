"""Reduction kernels (`reduce_sum`, `reduce_mean`, `reduce_max`, `reduce_min`) and `softmax`.

Reductions take params {"axes": sorted unique non-negative ints, "keepdim": bool}; `axes=()`
reduces nothing. Integer `sum` wraps like numpy with dtype=T; `max`/`min` propagate NaN and
order -0 below +0 (IEEE 754-2019, whatever numpy's lane order: `extrema.py`). Float
sums start from -0.0, IEEE addition's identity (x + -0 = x for every x, +0 included): a sum of
only -0.0 is -0.0 as IEEE arithmetic gives it, where numpy's default start (+0.0) made it +0.0.
f16/bf16 accumulate in f32. Float accumulations read a C-contiguous copy of a strided input, so
the summation order (numpy's pairwise sum) depends only on the shape: results are byte-identical
for equal values whatever the input layout.

`softmax` (params {"axis": int}) subtracts the row max and normalises; f32/f16/bf16 compute in
f64, where the only errors are a relative (n + |x - max|) 2^-53 before the final rounding, so the
result is faithful (<= 1 ulp) for rows below 2^28 elements. f64 has no wider numpy type.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from runtime.binding_table import Kernel, KernelBindingTable
from runtime.cost import CostEstimate
from runtime.dtypes import to_numpy
from runtime.kernels.cpu._common import (
    F64_COMPUTE,
    OVERHEAD_NS,
    WIDE,
    Arrays,
    F,
    I,
    Params,
    Shapes,
    add,
    exact,
    half,
    measured,
    operand_bytes,
    per_element_cost,
    ulp,
)
from runtime.kernels.cpu.extrema import settle_zero_extrema
from runtime.precision import PrecisionGuarantee
from runtime.rounding import apply_into, store

REDUCE_UFUNCS: dict[str, np.ufunc] = {
    "reduce_sum": np.add,
    "reduce_max": np.maximum,
    "reduce_min": np.minimum,
}
REDUCE_DTYPES: dict[str, tuple[str, ...]] = {
    "reduce_sum": (*F, *I),
    "reduce_max": (*F, *I),
    "reduce_min": (*F, *I),
    "reduce_mean": F,
}
_SOFTMAX_FLOPS = 14.0  # max, subtract, exp (~10), sum, divide


def reduction_claim(op: str, dtype: str) -> PrecisionGuarantee:
    """max/min select (exact); integer sums wrap exactly; float sums cancel (no bound)."""
    if op in ("reduce_max", "reduce_min") or dtype not in F:
        return exact("exact: selection, or wrapping integer sum")
    return measured("float sums cancel: normwise relative error measured", with_ulp=half(dtype))


def softmax_claim(dtype: str) -> PrecisionGuarantee:
    """Faithful when computed in f64 for a narrower result; f64 itself has no wider type."""
    if dtype == "f64":
        return measured("f64 in f64: error grows with |x - max| and row length", with_ulp=True)
    return ulp(1, "computed in f64, positive terms (no cancellation): faithful, rows < 2^28")


FLOAT_SUM_START = {"initial": -0.0}
"""The start of every float sum: -0.0, IEEE addition's identity (see the module docstring)."""


def _reduce(
    uf: np.ufunc, native: np.dtype, cdt: np.dtype | None, contiguous: bool, floats: bool
) -> Kernel:
    start = FLOAT_SUM_START if floats and uf is np.add else {}
    settle = floats and uf is not np.add  # max/min: IEEE's sign on zero extrema (extrema.py)
    if cdt is None:

        def reduce(inputs: Arrays, outputs: Arrays, params: Params) -> None:
            x = np.ascontiguousarray(inputs[0]) if contiguous else inputs[0]
            axes, keep, out = params["axes"], params["keepdim"], outputs[0]
            uf.reduce(x, axes, native, out, keep, **start)
            if settle:
                settle_zero_extrema(uf, x, axes, keep, out)

        return reduce

    def reduce_wide(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        x = np.ascontiguousarray(inputs[0])
        axes, keep, out = params["axes"], params["keepdim"], outputs[0]
        store(out, uf.reduce(x, axes, cdt, keepdims=keep, **start))
        if settle:
            settle_zero_extrema(uf, x, axes, keep, out)

    return reduce_wide


def _mean(cdt: np.dtype | None) -> Kernel:
    def mean(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        x = np.ascontiguousarray(inputs[0])
        axes, keep = params["axes"], params["keepdim"]
        acc = np.add.reduce(x, axes, x.dtype if cdt is None else cdt, None, keep, -0.0)
        count = math.prod(x.shape[a] for a in axes)
        apply_into(np.divide, (acc, count), outputs[0])

    return mean


def _softmax(cdt: np.dtype | None) -> Kernel:
    def softmax(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        axis = params["axis"]
        x = inputs[0].astype(cdt) if cdt is not None else np.ascontiguousarray(inputs[0])
        e = np.subtract(x, np.max(x, axis=axis, keepdims=True))
        np.exp(e, out=e)
        apply_into(np.divide, (e, np.add.reduce(e, axis=axis, keepdims=True)), outputs[0])

    return softmax


def _reduce_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """One flop per input element; every operand moved once."""
    flops = float(math.prod(shapes[0]))
    return CostEstimate(flops, operand_bytes(shapes, dtypes), OVERHEAD_NS["ufunc"])


def _make_reduce(op: str, dtype: str) -> Kernel:
    cdt = WIDE[dtype] if dtype in ("f16", "bf16") else None
    if op == "reduce_mean":
        return _mean(cdt)
    ordered = op == "reduce_sum" and dtype in F  # only float sums depend on the order
    return _reduce(REDUCE_UFUNCS[op], to_numpy(dtype), cdt, ordered, dtype in F)


def register_reduction(table: KernelBindingTable) -> None:
    """Register reduce_sum/mean/max/min for their dtypes and softmax for F."""
    for op, dtypes in REDUCE_DTYPES.items():
        for t in dtypes:
            kernel, claim = _make_reduce(op, t), reduction_claim(op, t)
            add(table, op, (t, t), kernel, claim, _reduce_cost, also=(settle_zero_extrema,))
    softmax_cost = per_element_cost(_SOFTMAX_FLOPS, "composite")
    for t in F:
        add(table, "softmax", (t, t), _softmax(F64_COMPUTE[t]), softmax_claim(t), softmax_cost)
