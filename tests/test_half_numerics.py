"""fuel's own 16-bit numerics against exact references, on every input.

`runtime.rounding` rounds into f16/bf16 itself (RNE once; conversions keep a NaN's sign, computed
NaNs are the positive quiet NaN), and the numpy kernels compute the 16-bit transcendentals in
double and round once. Here both are compared with references that depend on neither fuel nor a
numpy or ml_dtypes release: the exact midpoint rounding of `references.round_exact` (every value
of the format, compared in float64) applied to Python's `math` (the C library's double
routines), after checking that each reference is *decisive*: no farther than 2^-40 relative from
a rounding midpoint, so that any double routine within 2^-50 rounds the same way. The generated
C is compared with the numpy kernels bit for bit in tests/lowering/test_cpu_codegen.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest

from runtime.constants import dense_array
from runtime.contracts.references import _HALF_GRID, round_exact
from runtime.dtypes import NUMPY_DTYPES
from runtime.kernels.cpu.library import hand_registered_table
from runtime.module import FuelModule
from runtime.rounding import FORMATS, narrow, narrow_into, widen_into

HALF = ("f16", "bf16")
TABLE = hand_registered_table()
MARGIN = 2.0**-40


@pytest.fixture(autouse=True)
def _quiet_fp() -> object:
    """References and edge inputs overflow and make NaNs on purpose."""
    with np.errstate(all="ignore"):
        yield


def every_half(dtype: str) -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(NUMPY_DTYPES[dtype])


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint16)


def expected_bits(ref64: np.ndarray, dtype: str, *, result: bool) -> np.ndarray:
    """The 16-bit patterns fuel promises for exact values `ref64` (NaN per the rules)."""
    r = round_exact(ref64, dtype).astype(NUMPY_DTYPES[dtype])  # exact: r is on the grid
    b = bits(r).copy()
    nan = np.isnan(ref64)
    sign = np.where(np.signbit(ref64) & ~result, 0x8000, 0).astype(np.uint16)
    b[nan] = (FORMATS[dtype].nan_bits | sign)[nan]
    return b


def assert_decisive(ref64: np.ndarray, dtype: str, x: np.ndarray, known: np.ndarray) -> None:
    """Every finite reference lies farther than MARGIN (relative) from a rounding midpoint,
    except those `known` to be exact enough by an argument of their own."""
    grid = _HALF_GRID[dtype]
    mag = np.abs(ref64)
    fin = np.isfinite(mag) & (mag < grid[-2])
    idx = np.clip(np.searchsorted(grid, mag), 1, len(grid) - 1)
    mid = (grid[idx - 1] + grid[idx]) / 2
    close = fin & ~known & (np.abs(mag - mid) <= MARGIN * mag) & (mag != grid[idx])
    assert not close.any(), f"{dtype}: undecidable inputs {x[close][:5]}"


def assert_bits(got: np.ndarray, want: np.ndarray, x: np.ndarray, what: str) -> None:
    bad = np.flatnonzero(bits(got).reshape(-1) != want.reshape(-1))
    first = ", ".join(
        f"x={float(x.reshape(-1)[i])!r}: 0x{int(bits(got).reshape(-1)[i]):04x} != "
        f"0x{int(want.reshape(-1)[i]):04x}"
        for i in bad[:4]
    )
    assert not bad.size, f"{what}: {bad.size} differ ({first})"


# -- references: the C library's double routines, overflow-safe --------------------------------


def _exp(v: float) -> float:
    try:
        return math.exp(v)
    except OverflowError:
        return math.inf


def _sigmoid(v: float) -> float:
    return 1.0 / (1.0 + _exp(-v))


def _gelu_tanh(v: float) -> float:
    if math.isinf(v):
        return v if v > 0 else -0.0
    z = math.sqrt(2.0 / math.pi) * (v + 0.044715 * v * v * v)
    return v / (1.0 + _exp(-2.0 * z))  # 0.5 v (1 + tanh z), without the cancellation


def _log(v: float) -> float:
    return math.log(v) if v > 0 else (-math.inf if v == 0 else math.nan)


def _rsqrt(v: float) -> float:
    if v == 0:
        return math.copysign(math.inf, v)
    return 1.0 / math.sqrt(v) if v > 0 else math.nan


def _nan_safe(fn: Callable[[float], float]) -> Callable[[float], float]:
    def safe(v: float) -> float:
        if math.isnan(v):
            return math.nan
        try:
            return fn(v)
        except ValueError:  # sin(inf), cos(inf)
            return math.nan

    return safe


REFERENCES: dict[str, Callable[[float], float]] = {
    "exp": _exp,
    "log": _log,
    "sqrt": lambda v: math.sqrt(v) if v >= 0 else math.nan,
    "rsqrt": _rsqrt,
    "recip": lambda v: 1.0 / v if v else math.copysign(math.inf, v),
    "tanh": math.tanh,
    "sin": math.sin,
    "cos": math.cos,
    "sigmoid": _sigmoid,
    "silu": lambda v: v * _sigmoid(v) if not math.isinf(v) else max(v, 0.0),
    "erf": math.erf,
    "gelu": lambda v: 0.5 * v * math.erfc(-v / math.sqrt(2.0)) if v != -math.inf else -0.0,
    "gelu_tanh": _gelu_tanh,
}


TINY_HALF_SUM = ("silu", "gelu", "gelu_tanh")
"""For 0 < |x| < 2^-60 these are x/2 plus a positive term below 2^-61 |x/2| (their Taylor
series), which double drops: the next double above x/2 stands for the exact value there (no
16-bit grid point or midpoint lies between the two)."""


def reference(op: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The double reference of `op` on `x`, and where it was set by the tiny-x argument."""
    fn = _nan_safe(REFERENCES[op])
    x64 = x.astype(np.float64)
    ref = np.array([fn(v) for v in x64.tolist()], np.float64)
    tiny = (np.abs(x64) < 2.0**-60) & (x64 != 0) & (op in TINY_HALF_SUM)
    ref[tiny] = np.nextafter(0.5 * x64[tiny], np.inf)
    return ref, tiny


def run_kernel(op: str, x: np.ndarray) -> np.ndarray:
    key, params = ("gelu", {"approximate": "tanh"}) if op == "gelu_tanh" else (op, {})
    dt = {v: k for k, v in NUMPY_DTYPES.items()}[x.dtype]
    out = np.empty_like(x)
    with np.errstate(all="ignore"):
        TABLE.lookup_with_caps(key, (dt, dt), "cpu").kernel([x], [out], params)
    return out


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("op", sorted(REFERENCES))
def test_unary_kernel_is_correctly_rounded_on_every_input(op: str, dtype: str) -> None:
    x = every_half(dtype)
    ref, known = reference(op, x)
    assert_decisive(ref, dtype, x, known)
    want = expected_bits(ref, dtype, result=True)
    got = run_kernel(op, x)
    # the sign of a zero result is the kernel's own (gelu(-0), silu of a tiny negative)
    zero = (want & 0x7FFF) == 0
    want = np.where(zero, (bits(got) & 0x8000) | want & 0x7FFF, want)
    assert_bits(got, want, x, f"{op} {dtype}")


# -- conversions -----------------------------------------------------------------------------


def _traps(dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Midpoints of the format, one f64 ulp around them, and a 2^-30 relative nudge."""
    grid = _HALF_GRID[dtype][:-1]
    mids = (grid[:-1] + grid[1:]) / 2
    near = [np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf), mids * (1 + 2.0**-30)]
    edges = [65504.0, 65519.99, 65520.0, 2.0**-24, 2.0**-25, 2.0**-26, 3 * 2.0**-25, 2.0**-133]
    edges += [2.0**-134, 3.4e38, 3.3961e38, 3.3962e38, 1 + 2**-8 + 2**-30, 0.0, math.inf]
    rand = rng.standard_normal(20000) * np.exp2(rng.integers(-140, 128, 20000))
    x = np.concatenate([mids, *near, edges, rand])
    return np.concatenate([x, -x])


@pytest.mark.parametrize("dtype", HALF)
def test_narrowing_f64_and_f32_is_rne_once(dtype: str) -> None:
    x = _traps(dtype, np.random.default_rng(7))
    assert_bits(narrow(x, dtype), expected_bits(x, dtype, result=False), x, "f64")
    x32 = x.astype(np.float32)  # f32 midpoints stay midpoints for both formats
    ref = x32.astype(np.float64)
    assert_bits(narrow(x32, dtype), expected_bits(ref, dtype, result=False), ref, "f32")


def test_f64_to_bf16_rounds_once_not_through_f32() -> None:
    x = np.array([1 + 2**-8 + 2**-30, -(1 + 2**-8 + 2**-30)])
    np.testing.assert_array_equal(narrow(x, "bf16").astype(np.float64), [1 + 2**-7, -1 - 2**-7])


@pytest.mark.parametrize("dtype", HALF)
def test_narrowing_integers_is_rne_once(dtype: str) -> None:
    vals = [2**62 + 2**54 + 1, 2**62 + 2**54, 2**63 - 1, -(2**63), 2**53 + 1, 257, 259, 65519]
    vals += [65520, 2049, 2051, 4097, -4099, 0, 1, -1]
    x = np.array(vals + [-v for v in vals if v != -(2**63)], np.int64)
    exact = [float(v) for v in x.tolist()]  # float(int) is itself RNE; compare on int grids:
    want = np.array([_round_int_exact(int(v), dtype) for v in x.tolist()])
    got = narrow(x, dtype).astype(np.float64)
    np.testing.assert_array_equal(got, want, err_msg=str(exact))
    for src in (np.int32, np.int8, np.uint8):
        small = np.array([v for v in vals if np.iinfo(src).min <= v <= np.iinfo(src).max], src)
        want = [_round_int_exact(int(v), dtype) for v in small.tolist()]
        np.testing.assert_array_equal(narrow(small, dtype).astype(np.float64), want)


def _round_int_exact(n: int, dtype: str) -> float:
    """RNE of an integer to the format by integer arithmetic alone."""
    p = 11 if dtype == "f16" else 8
    m, shift = abs(n), max(abs(n).bit_length() - p, 0)
    q, r = divmod(m, 1 << shift)
    half = (1 << shift) >> 1
    if shift and (r > half or (r == half and q & 1)):
        q += 1
    value = float(q << shift)
    if value > _HALF_GRID[dtype][-2]:
        value = math.inf
    return math.copysign(value, n) if n else 0.0


@pytest.mark.parametrize("dtype", HALF)
def test_nan_rules(dtype: str) -> None:
    """A converted NaN keeps its sign; a computed one is positive; both lose the payload."""
    fmt = FORMATS[dtype]
    nans = np.array([0x7FC00001, 0xFFC00001, 0x7F800001, 0xFF812345], np.uint32).view(np.float32)
    assert bits(narrow(nans, dtype)).tolist() == [fmt.nan_bits, fmt.nan_bits | 0x8000] * 2
    assert bits(narrow(nans, dtype, result=True)).tolist() == [fmt.nan_bits] * 4
    assert bits(narrow(nans.astype(np.float64), dtype))[1] == fmt.nan_bits | 0x8000
    half_nan = np.array([fmt.inf_bits | 1, 0x8000 | fmt.inf_bits | 3], np.uint16)
    wide = np.empty(2, np.float32)
    widen_into(half_nan.view(NUMPY_DTYPES[dtype]), wide)
    assert wide.view(np.uint32).tolist() == [0x7FC00000, 0xFFC00000]


def test_strided_and_broadcast_destinations() -> None:
    out = np.zeros((3, 4), NUMPY_DTYPES["bf16"])[:, ::2]
    narrow_into(np.array([1.0, 1 + 2**-8 + 2**-30]), out)
    assert out.astype(np.float64).tolist() == [[1.0, 1 + 2**-7]] * 3


def test_no_library_rounding_is_used_for_bf16() -> None:
    """The result does not depend on how this ml_dtypes release rounds f64 -> bf16."""
    x = np.array([1 + 2**-8 + 2**-30])
    library = float(x.astype(ml_dtypes.bfloat16)[0])  # 1.0 on ml_dtypes 0.6, 1.0078125 on 0.7
    assert library in (1.0, 1 + 2**-7)
    assert float(narrow(x, "bf16")[0]) == 1 + 2**-7


def test_ir_constant_literal_rounds_once() -> None:
    """A bf16 `fuel.constant` written as a decimal rounds once, from the literal's double."""
    text = """func.func @main(%x: tensor<2xbf16> {fuel.name = "x"})
    -> (tensor<2xbf16> {fuel.name = "y"}) {
  %c = fuel.constant dense<[1.0039062509313226, -1.0039062509313226]> : tensor<2xbf16>
  %y = fuel.add %x, %c : tensor<2xbf16>, tensor<2xbf16> -> tensor<2xbf16>
  func.return %y : tensor<2xbf16>
}"""
    module = FuelModule.parse(text)
    const = next(op for op in module.entry.body.block.ops if op.name == "fuel.constant")
    got = dense_array(const.value).astype(np.float64)
    assert got.tolist() == [1 + 2**-7, -1 - 2**-7]
