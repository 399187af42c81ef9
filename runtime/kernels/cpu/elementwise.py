"""Elementwise kernels: unary math, binary arithmetic, comparisons and `where`.

Semantics are numpy's ufuncs, with numpy broadcasting between the inputs (the output has the
broadcast shape and is written in place through `out=`). Integer arithmetic wraps modulo 2^bits;
`max`/`min` propagate NaN and order -0 below +0 (IEEE 754-2019, `extrema.py`). Compute dtypes (see
`_common.WIDE`, `F64_COMPUTE`): f16/bf16 compute + - * / sqrt in f32 and round once, which is exact
(f32 has >= 2p + 2 bits, so the double rounding is innocuous); f32, f16 and bf16 transcendentals
compute in f64 so only the final rounding is left (f32: faithful, <= 1 ulp; f16/bf16: correctly
rounded, checked on all 65,536 inputs, as no 16-bit result lies within 2^-40 of a rounding
midpoint); f64 uses numpy's f64 routines, with bounds measured against long double. Every f16/bf16
result is written by `runtime.rounding` (one correct rounding; a NaN result is the dtype's positive
quiet NaN).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from runtime import special
from runtime.binding_table import Kernel, KernelBindingTable
from runtime.kernels.cpu._common import (
    ALL,
    F64_COMPUTE,
    SI,
    WIDE,
    Arrays,
    F,
    I,
    Params,
    add,
    compute_kernel,
    exact,
    per_element_cost,
    ulp,
)
from runtime.kernels.cpu.extrema import settle_zero_ties
from runtime.precision import PrecisionGuarantee
from runtime.rounding import apply_into

_TRANSCENDENTAL_FLOPS = 10.0

UNARY_UFUNCS: dict[str, np.ufunc] = {
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "recip": np.reciprocal,
    "tanh": np.tanh,
    "sin": np.sin,
    "cos": np.cos,
}
UNARY_COMPOSITES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "rsqrt": lambda x: np.divide(1.0, np.sqrt(x)),
    "sigmoid": special.sigmoid,
    "silu": special.silu,
}
BINARY_UFUNCS: dict[str, np.ufunc] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "max": np.maximum,
    "min": np.minimum,
    "pow": np.power,
}
BINARY_DTYPES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("add", "sub", "mul", "max", "min"), (*F, *I)),
    "div": F,
    "pow": F,
}
COMPARE_UFUNCS: dict[str, np.ufunc] = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}

# -- precision claims -----------------------------------------------------------------------

_CORRECTLY_ROUNDED = {"sqrt", "recip", "add", "sub", "mul", "div"}
"""IEEE basic ops: correctly rounded in f32/f64, and in f16/bf16 via f32 (p' >= 2p + 2)."""

F64_ULP: dict[str, tuple[int, int]] = {
    # op: (claimed, worst measured on the x86-64 AVX-512 reference host)
    "exp": (2, 1),
    "log": (2, 1),
    "tanh": (2, 1),
    "sin": (2, 1),
    "cos": (2, 1),
    "pow": (2, 1),
    "rsqrt": (2, 1),
    "sigmoid": (4, 2),
    "silu": (6, 3),
    "gelu": (10, 5),  # erf form 5 (fuel's erfcx), tanh form 3 (double-double argument)
    "erf": (4, 2),  # vs 50-digit mpmath over 75k inputs: the series edge near |x| = 1
}
"""f64 ULP bounds, measured against long double (gelu: 45-digit decimal) over ~10^6 random,
random-bit-pattern and edge inputs (tests/runtime/kernels/test_cpu_precision.py re-checks
~10^5), then doubled: numpy dispatches other SIMD code paths on other CPUs, and the long double
reference is itself within ~0.5 ulp of the f64 rounding."""


def elementwise_claim(op: str, dtype: str) -> PrecisionGuarantee:
    """The precision claim of a unary/binary float op at `dtype` (integers are exact)."""
    if op in ("neg", "abs", "relu", "max", "min") or dtype not in F:
        return exact("exact: sign/select or wrapping integer arithmetic")
    if op in _CORRECTLY_ROUNDED:
        return exact("IEEE correctly rounded (f16/bf16 via f32: double rounding innocuous)")
    if dtype == "f64":
        claimed, measured = F64_ULP[op]
        return ulp(claimed, f"f64: measured {measured} ulp vs long double/decimal; x2 margin")
    return ulp(1, "computed in f64 (f16/bf16: f32; gelu: f64) and rounded once: faithful")


# -- kernel factories -----------------------------------------------------------------------


def _unary(uf: np.ufunc, cdt: np.dtype | None) -> Kernel:
    if cdt is None:

        def unary(inputs: Arrays, outputs: Arrays, params: Params) -> None:
            uf(inputs[0], out=outputs[0])

        return unary

    def unary_wide(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        apply_into(uf, (inputs[0],), outputs[0], dtype=cdt)

    return unary_wide


def _binary(uf: np.ufunc, cdt: np.dtype | None) -> Kernel:
    if cdt is None:

        def binary(inputs: Arrays, outputs: Arrays, params: Params) -> None:
            uf(inputs[0], inputs[1], out=outputs[0])

        return binary

    def binary_wide(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        apply_into(uf, (inputs[0], inputs[1]), outputs[0], dtype=cdt)

    return binary_wide


def _sign_bits(uf: np.ufunc, mask: int) -> Kernel:
    """neg/abs of a 16-bit float on its bits: flip or clear the sign (exact, NaN-safe)."""
    m = np.uint16(mask)

    def sign_bits(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        uf(inputs[0].view(np.uint16), m, out=outputs[0].view(np.uint16))

    return sign_bits


def _extremum(uf: np.ufunc, cdt: np.dtype | None) -> Kernel:
    """Float max/min: numpy's selection (in `cdt`), then IEEE's sign on ties of zeros."""
    select = _binary(uf, cdt)

    def extremum(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        select(inputs, outputs, params)
        settle_zero_ties(uf, inputs[0], inputs[1], outputs[0])

    return extremum


def binary_kernel(op: str, uf: np.ufunc, t: str, cdt: np.dtype | None) -> Kernel:
    """The kernel of binary `op` at dtype `t`: float max/min settle zero ties (`_extremum`)."""
    return _extremum(uf, cdt) if op in ("max", "min") and t in F else _binary(uf, cdt)


def _relu(cdt: np.dtype | None) -> Kernel:
    if cdt is None:

        def relu(inputs: Arrays, outputs: Arrays, params: Params) -> None:
            np.maximum(inputs[0], 0, out=outputs[0])

        return relu

    def relu_wide(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        apply_into(np.maximum, (inputs[0], 0), outputs[0], dtype=cdt)

    return relu_wide


def _gelu(cdt: np.dtype | None) -> Kernel:
    """gelu in f64; params {"approximate": "none" (erf form) | "tanh"}."""
    if cdt is None:  # f64 results
        erf, tanh = special.gelu_erf, special.gelu_tanh_f64
    else:
        erf, tanh = special.gelu_erf_narrow, special.gelu_tanh_narrow
    forms = {"none": compute_kernel(erf, cdt), "tanh": compute_kernel(tanh, cdt)}

    def gelu(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        forms[params.get("approximate", "none")](inputs, outputs, params)

    return gelu


def _compare(uf: np.ufunc, cdt: np.dtype | None) -> Kernel:
    if cdt is None:

        def compare(inputs: Arrays, outputs: Arrays, params: Params) -> None:
            uf(inputs[0], inputs[1], out=outputs[0])

        return compare

    sig = (cdt, cdt, np.dtype(np.bool_))

    def compare_wide(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        uf(inputs[0], inputs[1], out=outputs[0], signature=sig, casting="unsafe")

    return compare_wide


def _where_axis(cond: np.ndarray, out: np.ndarray) -> int | None:
    """The one axis of `out` along which `cond` varies (every other cond dim is 1), when out
    holds at least 8 elements per cond element; else None."""
    n = cond.size  # > 1 and its largest dim: every other dim is 1
    if n < 2 or n != max(cond.shape) or out.size < 8 * n:
        return None
    return out.ndim - cond.ndim + cond.shape.index(n)


def _where() -> Kernel:
    def where(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        cond, a, b = inputs
        out = outputs[0]
        np.copyto(out, b)
        axis = _where_axis(cond, out)
        picked = [] if axis is None else cond.reshape(-1).nonzero()[0].tolist()
        if axis is None or len(picked) > 4:
            np.copyto(out, a, where=cond)
            return
        # cond selects a few positions along one axis (a KV-cache update): copy a's blocks
        # there instead of testing the broadcast mask at every element
        lead = (slice(None),) * axis
        if a.ndim < out.ndim:
            a = a.reshape((1,) * (out.ndim - a.ndim) + a.shape)
        for i in picked:
            at = (*lead, slice(i, i + 1))
            np.copyto(out[at], a if a.shape[axis] == 1 else a[at])

    return where


NARROW_FORMS = (special.tiny_half_sum, special.silu_narrow)
"""The narrow-result forms a kernel's revision covers with silu and gelu."""


def composite_for(op: str, dtype: str) -> Callable[[np.ndarray], np.ndarray]:
    """The composite body of `op` for `dtype` results (silu: its narrow form below f64)."""
    if op == "silu" and dtype != "f64":
        return special.silu_narrow
    return UNARY_COMPOSITES[op]


def _half_wide(dtype: str) -> np.dtype | None:
    """f32 for the 16-bit floats, else compute in the dtype itself (exact or IEEE ops)."""
    return WIDE[dtype] if dtype in ("f16", "bf16") else None


# -- registration ---------------------------------------------------------------------------


def register_elementwise(table: KernelBindingTable) -> None:
    """Register unary, binary, compare and where kernels for every documented dtype."""
    cheap, transcendental = per_element_cost(1.0), per_element_cost(_TRANSCENDENTAL_FLOPS)
    composite = per_element_cost(_TRANSCENDENTAL_FLOPS + 4.0, "composite")
    for op, uf in UNARY_UFUNCS.items():
        basic = op in _CORRECTLY_ROUNDED
        cost = cheap if basic else transcendental
        for t in F:
            cdt = _half_wide(t) if basic else F64_COMPUTE[t]
            direct = uf if cdt is None else None
            add(table, op, (t, t), _unary(uf, cdt), elementwise_claim(op, t), cost, direct=direct)
    for op, fn in UNARY_COMPOSITES.items():
        for t in F:
            fn = composite_for(op, t)
            kernel = compute_kernel(fn, F64_COMPUTE[t])
            add(table, op, (t, t), kernel, elementwise_claim(op, t), composite, also=(fn,))
    erf_cost = per_element_cost(_TRANSCENDENTAL_FLOPS + 50.0, "gelu")  # series + erfcx + 2 exp
    for t in F:
        kernel, claim = compute_kernel(special.erf, F64_COMPUTE[t]), elementwise_claim("erf", t)
        add(table, "erf", (t, t), kernel, claim, erf_cost, also=(special.erf,))
    gelu_forms = (special.gelu_erf, special.gelu_tanh, special.gelu_tanh_f64, *NARROW_FORMS)
    gelu_cost = per_element_cost(2 * _TRANSCENDENTAL_FLOPS + 60.0, "gelu")  # 2 exp + erfcx
    for t in F:
        claim = elementwise_claim("gelu", t)
        add(table, "gelu", (t, t), _gelu(F64_COMPUTE[t]), claim, gelu_cost, also=gelu_forms)
    for t in (*F, *SI):
        half = t in ("f16", "bf16")
        neg = _sign_bits(np.bitwise_xor, 0x8000) if half else _unary(np.negative, None)
        absk = _sign_bits(np.bitwise_and, 0x7FFF) if half else _unary(np.absolute, None)
        d_neg, d_abs = (None, None) if half else (np.negative, np.absolute)
        add(table, "neg", (t, t), neg, elementwise_claim("neg", t), cheap, direct=d_neg)
        add(table, "abs", (t, t), absk, elementwise_claim("abs", t), cheap, direct=d_abs)
        add(table, "relu", (t, t), _relu(_half_wide(t)), elementwise_claim("relu", t), cheap)
    for op, uf in BINARY_UFUNCS.items():
        cost = transcendental if op == "pow" else cheap
        for t in BINARY_DTYPES[op]:
            cdt = F64_COMPUTE[t] if op == "pow" else _half_wide(t)
            # np.maximum/minimum deprecate a positional `out`: no direct form for them
            direct = uf if cdt is None and op not in ("max", "min") else None
            claim = elementwise_claim(op, t)
            kernel = binary_kernel(op, uf, t, cdt)
            also = (_binary, settle_zero_ties) if kernel.__name__ == "extremum" else ()
            add(table, op, (t, t, t), kernel, claim, cost, direct=direct, also=also)
    for op, uf in COMPARE_UFUNCS.items():
        dtypes = (*F, *I, "i1") if op in ("eq", "ne") else (*F, *I)
        for t in dtypes:
            cdt = _half_wide(t)
            direct = uf if cdt is None else None
            kernel = _compare(uf, cdt)
            add(table, op, (t, t, "i1"), kernel, exact("exact comparison"), cheap, direct=direct)
    for t in ALL:
        add(
            table,
            "where",
            ("i1", t, t, t),
            _where(),
            exact("exact selection"),
            cheap,
            also=(_where_axis,),
        )
