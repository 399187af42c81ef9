"""Alternative CPU kernels: siblings of the `numpy` defaults that trade speed, precision or caps.

Registered after the default families, so the precise `numpy` kernel stays sibling 0 (what
`lookup_with_caps` and an unconstrained table lookup return); the picker ranks these against it.
Every claim is verified by tests/runtime/kernels/test_cpu_alternatives.py. Families, by
`kernel_source`:

* `numpy-fast` - transcendentals evaluated natively in f32 (numpy's SIMD routines, no f64
  detour), f16/bf16 composites in f32 instead of f64: 1.2-35x faster, looser ULP bounds.
* `numpy-f64acc` - float reductions, f32 matmul, rms_norm and attention computed in f64 and
  rounded once: slower, and tighter (an f16 sum is correctly rounded; f32/bf16 errors shrink by
  2^29 but cancellation still defeats any static relative bound, so their ulp and relative
  errors are measured on the verification probes: within 1 ulp there). What a `--precision
  ulp=N` floor picks for matmul and attention.
* `numpy-einsum` - matmul through `np.einsum(optimize=False)`: numpy's own product-sum loop,
  ~10-15x slower than BLAS, so the picker has a slower candidate to rank below it.
* `numpy-contig` - transpose/reshape that assume C-contiguous inputs (`strided_input=False`):
  large 2-D transposes are copied in row bands (~3x faster on 4096^2 f32 than a strided copy).
* `numpy-bcast-row` - add f32 with its second operand baked as a row over the last dim
  (`requires_broadcast=True`): dense lookups never pick it; it raises on a dense operand.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from runtime import special
from runtime.binding_table import Kernel, KernelBindingTable, KernelCaps
from runtime.contracts.entry import kernel_entry
from runtime.cost import CostEstimate, CostFn
from runtime.kernels.cpu._common import (
    ALL,
    CAPS,
    F32,
    F64,
    OVERHEAD_NS,
    Arrays,
    Params,
    Shapes,
    add,
    compute_kernel,
    copy_cost,
    exact,
    measured,
    numel,
    operand_bytes,
    per_element_cost,
    ulp,
)
from runtime.kernels.cpu.linalg import matmul_cost
from runtime.kernels.cpu.nn import _attention, _compute, _mask, _rms_norm, _sdpa, attention_cost
from runtime.precision import PrecisionGuarantee
from runtime.rounding import REVISION_CODE, apply_into, narrow, store

F16 = np.dtype(np.float16)
FAST, F64ACC, EINSUM, CONTIG, BCAST_ROW = (
    "numpy-fast",
    "numpy-f64acc",
    "numpy-einsum",
    "numpy-contig",
    "numpy-bcast-row",
)


def _register(
    table: KernelBindingTable,
    op: str,
    dtypes: Sequence[str],
    kernel: Kernel,
    claim: PrecisionGuarantee,
    cost: CostFn,
    source: str,
    *,
    caps: KernelCaps = CAPS,
    also: Sequence[Callable[..., object]] = (),
    direct: Callable[..., object] | None = None,
) -> None:
    """`_common.add` under this sibling's provenance tag (and caps)."""
    add(table, op, dtypes, kernel, claim, cost, also=also, direct=direct, source=source, caps=caps)


# -- numpy-fast: f32-native transcendentals ----------------------------------------------------

FAST_UFUNCS: dict[str, tuple[np.ufunc, int, int]] = {
    # op: (ufunc, claimed ulp, worst measured on the AVX-512 reference host)
    "exp": (np.exp, 6, 3),  # numpy documents <= 2.52 ulp for its AVX2/AVX-512 f32 exp
    "log": (np.log, 6, 3),  # ... and <= 3.83 for log; glibc expf/logf elsewhere (< 1 ulp)
    "tanh": (np.tanh, 4, 1),  # SVML on AVX-512, numpy's own SIMD or libm elsewhere
    "sin": (np.sin, 2, 1),
    "cos": (np.cos, 2, 1),
}
"""f32 ufuncs called on f32 directly. Measured over 8M random inputs + the precision tests'
probe set (scaled normals, random bit patterns, edges) against long double; doubled like
`F64_ULP` (other CPUs dispatch other SIMD code paths)."""

FAST_COMPOSITE_ULP: dict[str, tuple[int, int]] = {
    # op: (f32 claim, worst f32 measured); f16/bf16 results are faithful (see _HALF_NOTE)
    "rsqrt": (2, 1),  # proved: < 1 ulp before the last rounding, 2 across a binade edge
    "sigmoid": (8, 4),
    "silu": (6, 3),
    "gelu": (12, 6),  # erf form 6 (erfcx's degree-27 Horner in f32), tanh form 4
}
"""f32 composites: measured over 8M random/edge inputs against long double (gelu: f64 erfc),
doubled like the f32 ufuncs. Their error is the exp's plus a few roundings."""

_HALF_NOTE = (
    "computed in f32 (error <= the f32 claim, < 2^-19 relative, << half a 16-bit ulp) and "
    "rounded once: faithful; measured on all 65536 inputs: <= 1 ulp"
)

_DEEP = 87.0
"""Below v = -87, e^-v nears f32 overflow (88.7) and sigmoid(v) ~ e^v reaches the subnormals."""
_SHIFT, _UNSHIFT = 64.0, np.float32(math.exp(-64.0))
"""e^v = e^(v + 64) e^-64: for v <= -64 the shift is exact and both factors are normal f32s
(e^-64 rounded once: half an ulp), so only the last product can round to a subnormal."""
_GELU_FAR = 64.0
"""|x| past which gelu(x) = relu(x) in f32 (the tail is below e^-2048): clamps the tail input."""
_LOW12 = np.int32(~0xFFF)  # clears 12 of 23 fraction bits: x_hi has 12 bits, x_hi^2 is exact
_TANH_K0 = 2.0 * math.sqrt(2.0 / math.pi)  # gelu_tanh(x) = x * sigmoid(x (K0 + K1 x^2))
_TANH_K1 = _TANH_K0 * 0.044715


def sigmoid_f32(x: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-x) in f32; where e^-x would overflow (x < -87) the result is e^x itself."""
    out = np.divide(1.0, 1.0 + np.exp(np.negative(x)))
    deep = x < -_DEEP
    if deep.any():
        out[deep] = np.exp(x[deep])
    return out


def x_sigmoid_f32(x: np.ndarray, v: np.ndarray, v_lo: np.ndarray | None = None) -> np.ndarray:
    """x * sigmoid(v + v_lo) in f32 as x / (1 + e^-v); in the deep tail (v < -87) as
    (x e^(v + 64)) e^-64, so a subnormal result is rounded once. x = -inf gives -0.0."""
    e = np.exp(np.negative(v))
    if v_lo is not None:
        e *= 1.0 - v_lo  # e^-(v + lo) = e^-v (1 - lo) + O(lo^2), |lo| <= 2^-24 |v|
    out = np.divide(x, 1.0 + e)
    deep = v < -_DEEP
    if deep.any():
        e_deep = np.exp(v[deep] + _SHIFT)
        if v_lo is not None:
            e_deep *= 1.0 + v_lo[deep]
        xd = x[deep]
        out[deep] = np.where(np.isneginf(xd), -0.0, (xd * e_deep) * _UNSHIFT)
    return out


def silu_f32(x: np.ndarray) -> np.ndarray:
    """x * sigmoid(x) in f32."""
    return x_sigmoid_f32(x, x)


def gelu_tanh_f32(x: np.ndarray) -> np.ndarray:
    """The tanh form as x * sigmoid(v), v = x (K0 + K1 x^2). v is formed in f64 and split into
    f32 hi + lo: an f32 v would carry ~|v| 3 ulp of error into e^-v (hundreds of ulps at |v| ~
    80); everything after (exp, divide) stays in f32."""
    x64 = x.astype(F64)
    v64 = x64 * (_TANH_K0 + _TANH_K1 * (x64 * x64))
    v = v64.astype(F32)
    lo = (v64 - v).astype(F32)
    lo[~np.isfinite(lo)] = 0.0
    return x_sigmoid_f32(x, v, lo)


def gelu_erf_f32(x: np.ndarray) -> np.ndarray:
    """`special.gelu_erf` in f32: relu(x) - 0.5 |x| erfcx(|x|/sqrt 2) e^(-x_hi^2/2) e^(-(x - x_hi)
    (x + x_hi)/2), with x_hi^2 exact (12-bit x_hi) and erfcx's polynomial evaluated in f32."""
    ax = np.minimum(np.abs(x), _GELU_FAR)  # NaN stays NaN; +-inf and huge |x| get a zero tail
    hi = (ax.view(np.int32) & _LOW12).view(np.float32)
    tail = 0.5 * ax * special.erfcx(ax * np.float32(math.sqrt(0.5)))
    tail *= np.exp(-0.5 * ((ax - hi) * (ax + hi)))
    tail *= np.exp(-0.5 * (hi * hi))
    out = np.maximum(x, 0.0) - tail
    out[np.isneginf(x)] = -0.0  # the limit's sign (elsewhere an underflowed tail gives +0.0)
    return out


def _gelu_forms(
    forms: dict[str, Callable[[np.ndarray], np.ndarray]], cdt: np.dtype | None
) -> Kernel:
    """gelu by params {"approximate": "none" | "tanh"}, each form chunked by `compute_kernel`."""
    kernels = {name: compute_kernel(fn, cdt) for name, fn in forms.items()}

    def gelu_fast(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        kernels[params.get("approximate", "none")](inputs, outputs, params)

    return gelu_fast


def _ufunc_fast(uf: np.ufunc) -> Kernel:
    def unary_fast(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        uf(inputs[0], out=outputs[0])

    return unary_fast


def _rsqrt_fast(inputs: Arrays, outputs: Arrays, params: Params) -> None:
    """1 / sqrt(x) in f32: two correctly rounded steps into the output."""
    out = outputs[0]
    np.sqrt(inputs[0], out=out)
    np.divide(1.0, out, out=out)


def _softmax_fast(inputs: Arrays, outputs: Arrays, params: Params) -> None:
    """softmax in f32 (16-bit inputs widened to f32, exactly). The shifted exponentials land in
    a fresh C-ordered buffer, so a last-axis row sum is numpy's pairwise sum whatever the input
    layout; other axes are added row by row by numpy, so those accumulate in f64."""
    x = inputs[0]
    axis = params["axis"] % x.ndim
    if x.dtype == F32:
        e = np.empty(x.shape, F32)
        np.subtract(x, np.max(x, axis=axis, keepdims=True), out=e)
    else:  # one SIMD conversion first: numpy's f16 max/subtract loops are scalar
        e = x.astype(F32, order="C")
        e -= np.max(e, axis=axis, keepdims=True)
    np.exp(e, out=e)
    acc = None if axis == x.ndim - 1 else F64
    total = np.add.reduce(e, axis=axis, dtype=acc, keepdims=True)
    apply_into(np.divide, (e, total), outputs[0], dtype=F32)


def _softmax_claim(dtype: str) -> PrecisionGuarantee:
    if dtype != "f32":
        return ulp(
            1,
            "f32 compute: relative error < (|x - max| + 84) 2^-24 << half an ulp of "
            "f16/bf16 before the final rounding: faithful, rows < 2^24",
        )
    return PrecisionGuarantee(
        bit_stable=True,
        max_absolute=2.0**-17,
        measured=("max_relative",),
        notes="f32: x - max rounds (|x - max| u relative in exp), exp <= 6 ulp (12u), the "
        "weighted mean of |x - max| <= ln n, row sum pairwise (depth <= 42) or in f64: |err| "
        "<= p (|x - max| + 84) u <= 85u, u = 2^-24, for rows < 2^24; no ULP bound",
    )


def _f16_rounded(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """`fn` with its f32 result rounded to f16 in the slice (the kernel then copies f16)."""

    def f16_result(x: np.ndarray) -> np.ndarray:
        return narrow(fn(x), "f16", result=True)

    return f16_result


def _composite_fast(op: str, dtype: str) -> Kernel:
    """The `numpy-fast` kernel of a composite at `dtype` (f16/bf16 widen to f32 exactly)."""
    if op == "rsqrt":
        return _rsqrt_fast
    wrap = _f16_rounded if dtype == "f16" else (lambda fn: fn)
    cdt = None if dtype == "f32" else F32
    if op == "gelu":
        return _gelu_forms({"none": wrap(gelu_erf_f32), "tanh": wrap(gelu_tanh_f32)}, cdt)
    return compute_kernel(wrap({"sigmoid": sigmoid_f32, "silu": silu_f32}[op]), cdt)


FAST_COST: dict[str, tuple[float, str]] = {
    # op: (flops per element, overhead): the default sibling's formula (10 per transcendental,
    # 14 per composite, 80 for gelu) times the measured fast/default time on 1M f32 elements.
    "exp": (3.0, "ufunc"),
    "log": (2.5, "ufunc"),
    "tanh": (1.5, "ufunc"),
    "sin": (0.4, "ufunc"),
    "cos": (0.4, "ufunc"),
    "rsqrt": (3.0, "ufunc"),
    "sigmoid": (2.7, "composite"),
    "silu": (2.2, "composite"),
    "gelu": (40.0, "gelu"),
    "softmax": (4.2, "composite"),
}
_FAST_HELPERS = (sigmoid_f32, x_sigmoid_f32, gelu_erf_f32, gelu_tanh_f32, *REVISION_CODE)


def _register_fast(table: KernelBindingTable) -> None:
    def cost(op: str) -> CostFn:
        return per_element_cost(*FAST_COST[op])

    for op, (uf, claimed, seen) in FAST_UFUNCS.items():
        claim = ulp(claimed, f"f32-native numpy SIMD: measured {seen} ulp; >= x2 margin")
        _register(table, op, ("f32", "f32"), _ufunc_fast(uf), claim, cost(op), FAST, direct=uf)
    for op, (claimed, seen) in FAST_COMPOSITE_ULP.items():
        f32_claim = ulp(claimed, f"computed in f32: measured {seen} ulp; x2 margin")
        for t in ("f32",) if op == "rsqrt" else ("f32", "f16", "bf16"):
            claim = f32_claim if t == "f32" else ulp(1, _HALF_NOTE)
            kernel = _composite_fast(op, t)
            _register(table, op, (t, t), kernel, claim, cost(op), FAST, also=_FAST_HELPERS)
    for t in ("f32", "f16", "bf16"):
        claim = _softmax_claim(t)
        _register(
            table,
            "softmax",
            (t, t),
            _softmax_fast,
            claim,
            cost("softmax"),
            FAST,
            also=REVISION_CODE,
        )


# -- numpy-f64acc: float64 accumulation, one rounding -------------------------------------------

_F16_BLOCK = 1 << 13
"""f16 values are multiples of 2^-24 below 2^16: any partial sum of 2^13 of them is a multiple
of 2^-24 below 2^29, 53 bits, so an f64 block sum is exact in any order."""
_F16_SCALE = 2.0**24


def _rows(x: np.ndarray, axes: Sequence[int]) -> np.ndarray:
    """`x` as a C-contiguous (kept, reduced) matrix: the reduced axes moved last, in order."""
    kept = [a for a in range(x.ndim) if a not in axes]
    moved = np.ascontiguousarray(np.transpose(x, (*kept, *axes)))
    return moved.reshape(math.prod(x.shape[a] for a in kept), math.prod(x.shape[a] for a in axes))


def exact_f16_sum(x: np.ndarray, axes: Sequence[int]) -> np.ndarray:
    """The exact sum of f16 values as one f64 per kept position (exact below 2^53 * 2^-24 =
    2^29; anything larger overflows f16 whatever its rounding, and IEEE specials propagate)."""
    m = _rows(x, axes)
    full = m.shape[1] // _F16_BLOCK * _F16_BLOCK
    parts = [np.add.reduce(m[:, :full].reshape(m.shape[0], -1, _F16_BLOCK), 2, F64, initial=-0.0)]
    if full < m.shape[1] or full == 0:
        parts.append(np.add.reduce(m[:, full:], 1, F64, keepdims=True, initial=-0.0))
    blocks = np.concatenate(parts, axis=1)
    if blocks.shape[1] == 1:
        return blocks[:, 0]  # one block: already exact
    finite = np.isfinite(blocks)
    scaled = (np.where(finite, blocks, 0.0) * _F16_SCALE).astype(np.int64)  # < 2^53: exact
    if scaled.shape[1] < 1 << 10:  # int64 sums of < 2^10 terms below 2^53 cannot wrap
        total = scaled.sum(axis=1).astype(F64)  # int -> float rounds to nearest (RNE)
    else:  # Python ints; CPython's int -> float is correctly rounded too
        total = np.array([float(v) for v in scaled.astype(object).sum(axis=1)], F64)
    total /= _F16_SCALE
    # an exact zero is +0.0 unless every term is -0.0 (IEEE RNE): then each block sum (started
    # from -0.0, IEEE addition's identity) is -0.0 too
    all_negative_zero = ((blocks == 0) & np.signbit(blocks)).all(axis=1)
    total = np.where(all_negative_zero, -0.0, total)
    return np.where(finite.all(axis=1), total, np.add.reduce(blocks, axis=1, initial=-0.0))


def _into(out: np.ndarray, acc: np.ndarray) -> None:
    """Round the f64 `acc` once into `out` (`runtime.rounding` for f16/bf16)."""
    store(out, acc.reshape(out.shape))


def _sum_f64(dtype: str, mean: bool) -> Kernel:
    def reduce_f64acc(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        x, axes = inputs[0], tuple(params["axes"])
        if dtype == "f16":
            acc = exact_f16_sum(x, axes)
        else:
            acc = np.add.reduce(np.ascontiguousarray(x), axes, F64, initial=-0.0)
        if mean:
            acc = acc / math.prod(x.shape[a] for a in axes)
        _into(outputs[0], np.asarray(acc))

    return reduce_f64acc


_F64ACC_SUM_NOTE = (
    "f64 accumulation, one rounding: |err| <= 0.5 ulp + n 2^-53 sum|x|, so within 1 ulp while "
    "sum|x| / |sum| <= 2^28 / n; cancellation beyond that leaves no relative bound"
)
F64ACC_CLAIMS: dict[tuple[str, str], PrecisionGuarantee] = {
    ("reduce_sum", "f16"): exact(
        "f16 sums are exact in f64 blocks of 2^13, blocks summed in "
        "integers: one rounding, correctly rounded"
    ),
    ("reduce_mean", "f16"): ulp(1, "exact f16 sum, f64 divide, then f16 rounding: faithful"),
    **{
        (op, t): measured(_F64ACC_SUM_NOTE, with_ulp=True)
        for op in ("reduce_sum", "reduce_mean")
        for t in ("f32", "bf16")
    },
}


def _f64acc_reduce_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """Widen each element and add in f64: two flops per input element."""
    flops = 2.0 * numel(shapes[0])
    return CostEstimate(flops, operand_bytes(shapes, dtypes), OVERHEAD_NS["composite"])


@kernel_entry
def _matmul_f64acc(inputs: Arrays, outputs: Arrays, params: Params) -> None:
    """f32 products are exact in f64; the f64 BLAS sum is rounded once into the f32 output."""
    a, b = (np.ascontiguousarray(v, dtype=F64) for v in inputs)
    store(outputs[0], np.matmul(a, b))


def _matmul_f64acc_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """An f64 GEMM (half the f32 rate: flops x2) plus the f64 copies of both operands."""
    base = matmul_cost(shapes, dtypes, params)
    copies = 8.0 * (2 * numel(shapes[0]) + 2 * numel(shapes[1]) + numel(shapes[2]))
    return CostEstimate(2.0 * base.flops, base.bytes_moved + copies, base.overhead_ns)


def _register_f64acc(table: KernelBindingTable) -> None:
    for (op, t), claim in F64ACC_CLAIMS.items():
        kernel = _sum_f64(t, op == "reduce_mean")
        _register(
            table,
            op,
            (t, t),
            kernel,
            claim,
            _f64acc_reduce_cost,
            F64ACC,
            also=(exact_f16_sum, _rows, _into),
        )
    claim = measured(
        "f32 products exact in f64, f64 sums rounded once: |err| <= 0.5 ulp + k 2^-53 "
        "sum|a||b|; ulp and rel measured; bits fixed per BLAS build/threads",
        with_ulp=True,
    )
    _register(table, "matmul", ("f32",) * 3, _matmul_f64acc, claim, _matmul_f64acc_cost, F64ACC)
    t = "f32"
    norm = measured("f32 values in f64, rounded once: ulp and rel measured", with_ulp=True)
    _register(table, "rms_norm", (t,) * 3, _rms_norm(F64), norm, f64acc_rms_cost, F64ACC)
    attn = measured(_F64ACC_ATTENTION_NOTE, with_ulp=True)
    for key, kv_len in (((t,) * 4, False), ((t, t, t, "i64", t), True)):
        kernel = _attention(F64, kv_len)
        also = (_sdpa, _mask, _compute)
        _register(table, "attention", key, kernel, attn, f64acc_attention_cost, F64ACC, also=also)


_F64ACC_ATTENTION_NOTE = (
    "f32 values in f64 (scores, softmax and the weighted sum), rounded once: cancellation only "
    "2^-53-relative before the rounding; ulp and rel measured"
)


def f64acc_attention_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """Attention in f64: twice the FLOP time of f32, plus the f64 copies of q, k, v and out."""
    base = attention_cost(shapes, dtypes, params)
    q, k, v, out = shapes[0], shapes[1], shapes[2], shapes[-1]
    copies = 8.0 * (numel(q) + numel(k) + numel(v) + numel(out))
    return CostEstimate(2.0 * base.flops, base.bytes_moved + copies, base.overhead_ns)


def f64acc_rms_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """rms_norm in f64: 8 FLOPs per element (4 at half rate), plus the f64 copies of x and w and
    the f64 product."""
    x, w = shapes[0], shapes[1]
    copies = 8.0 * (2 * numel(x) + numel(w))
    flops = 8.0 * numel(x)
    return CostEstimate(flops, operand_bytes(shapes, dtypes) + copies, OVERHEAD_NS["composite"])


# -- numpy-einsum: numpy's own product-sum loop -------------------------------------------------

EINSUM_SLOWDOWN = 12.0
"""np.einsum(optimize=False) time / BLAS time on 256^3, measured ~10 (f64) to ~15 (f32)."""


@kernel_entry
def _matmul_einsum(inputs: Arrays, outputs: Arrays, params: Params) -> None:
    """Contiguous operands first: einsum's inner loop (and so its bits) depends on strides."""
    a, b = (np.ascontiguousarray(v) for v in inputs)
    np.einsum("...ij,...jk->...ik", a, b, out=outputs[0], optimize=False)


def _einsum_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    base = matmul_cost(shapes, dtypes, params)
    return CostEstimate(base.flops * EINSUM_SLOWDOWN, base.bytes_moved, base.overhead_ns)


def _register_einsum(table: KernelBindingTable) -> None:
    claim = measured(
        "single-threaded einsum loop on contiguous operands: dot products cancel, normwise "
        "relative error measured; bits fixed by shapes and values"
    )
    for t in ("f32", "f64"):
        _register(table, "matmul", (t, t, t), _matmul_einsum, claim, _einsum_cost, EINSUM)


# -- numpy-contig: contiguous-only movement ----------------------------------------------------

CONTIG_CAPS = KernelCaps(strided_input=False)
BAND_ROWS = 128
"""Rows per band of a large transposed copy: a band of 128 input rows is read once, in order."""
BAND_MIN_BYTES = 4 << 20
"""Matrices below this fit the caches well enough that one strided copy is as fast."""


def _require_contiguous(x: np.ndarray, op: str) -> None:
    if not x.flags.c_contiguous:
        raise ValueError(f"{CONTIG} {op} needs a C-contiguous input (caps: strided_input=False)")


@kernel_entry
def _transpose_contig(inputs: Arrays, outputs: Arrays, params: Params) -> None:
    """A swap of the last two dims of a large matrix goes in row bands; else one copyto."""
    x, out, perm = inputs[0], outputs[0], tuple(params["perm"])
    _require_contiguous(x, "transpose")
    n = x.ndim
    swap_last = n >= 2 and perm == (*range(n - 2), n - 1, n - 2)
    small = not swap_last or x.shape[-1] * x.shape[-2] * x.itemsize < BAND_MIN_BYTES
    if small or not out.flags.c_contiguous:
        np.copyto(out, x.transpose(perm))
        return
    rows, cols = x.shape[-2:]
    xs, outs = x.reshape(-1, rows, cols), out.reshape(-1, cols, rows)
    for m in range(xs.shape[0]):
        for i in range(0, rows, BAND_ROWS):
            np.copyto(outs[m, :, i : i + BAND_ROWS], xs[m, i : i + BAND_ROWS].T)


@kernel_entry
def _reshape_contig(inputs: Arrays, outputs: Arrays, params: Params) -> None:
    """One flat memcpy (C order is the reshape order)."""
    x, out = inputs[0], outputs[0]
    _require_contiguous(x, "reshape")
    if out.flags.c_contiguous:
        np.copyto(out.reshape(-1), x.reshape(-1))
    else:
        out[...] = x.reshape(out.shape)


def _register_contig(table: KernelBindingTable) -> None:
    claim = exact("exact copy")
    for t in ALL:
        for op, kernel in (("transpose", _transpose_contig), ("reshape", _reshape_contig)):
            _register(table, op, (t, t), kernel, claim, copy_cost, CONTIG, caps=CONTIG_CAPS)


# -- numpy-bcast-row: a baked row broadcast ----------------------------------------------------

BCAST_ROW_CAPS = KernelCaps(strided_input=True, requires_broadcast=True)


@kernel_entry
def _add_bias_row(inputs: Arrays, outputs: Arrays, params: Params) -> None:
    """out = a + row, the row read as exactly out.shape[-1] values (a dense operand raises)."""
    a, row = inputs
    out = outputs[0]
    np.add(a, row.reshape(out.shape[-1]), out=out)


def _register_bcast_row(table: KernelBindingTable) -> None:
    claim = exact("IEEE correctly rounded add")
    _register(
        table,
        "add",
        ("f32",) * 3,
        _add_bias_row,
        claim,
        per_element_cost(1.0),
        BCAST_ROW,
        caps=BCAST_ROW_CAPS,
    )


def register_alternatives(table: KernelBindingTable) -> None:
    """Register every alternative sibling; call after `register_cpu_kernels`' families."""
    _register_fast(table)
    _register_f64acc(table)
    _register_einsum(table)
    _register_contig(table)
    _register_bcast_row(table)
