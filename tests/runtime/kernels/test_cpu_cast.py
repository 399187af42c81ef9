"""`cast` semantics: correct rounding (no double rounding), truncation, bool, wraparound.

The sweep over all 81 pairs against exact references lives in test_cpu_precision.py; here are
the named edge cases and a property test of round-to-nearest-even against exact rationals.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.dtypes import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, NUMPY_DTYPES
from runtime.kernels.cpu.library import hand_registered_table

BF16 = ml_dtypes.bfloat16


TABLE = hand_registered_table()


def cast(x: np.ndarray, src: str, dst: str) -> np.ndarray:
    out = np.empty(np.shape(x), NUMPY_DTYPES[dst])
    with np.errstate(all="ignore"):
        TABLE.lookup_with_caps("cast", (src, dst), "cpu").kernel([x], [out], {})
    return out


def test_f64_to_bf16_rounds_once() -> None:
    """1 + 2^-8 + 2^-30 lies above the midpoint 1 + 2^-8: it rounds up. Rounding through f32
    first (as ml_dtypes 0.6 did) would make it that midpoint, a tie, and round it down to 1.0."""
    x = np.array([1 + 2**-8 + 2**-30, -(1 + 2**-8 + 2**-30), 1 + 2**-8, 1 + 3 * 2**-8])
    got = cast(x, "f64", "bf16").astype(np.float64)
    np.testing.assert_array_equal(got, [1 + 2**-7, -(1 + 2**-7), 1.0, 1 + 2**-6])


@pytest.mark.parametrize(
    ("src", "value", "want"),
    [
        ("i64", 2**62 + 2**54 + 1, 2**62 + 2**55),
        ("i64", -(2**62 + 2**54 + 1), -(2**62 + 2**55)),
        ("i64", 2**62 + 2**54, 2**62),
        ("i64", -(2**63), -(2**63)),
        ("i64", 2**63 - 1, 2**63),
        ("i32", 2**30 + 2**22 + 1, 2**30 + 2**23),
        ("i32", 257, 256),
        ("i32", 259, 260),
    ],
)
def test_int_to_bf16_rounds_once(src: str, value: int, want: int) -> None:
    got = cast(np.array([value], NUMPY_DTYPES[src]), src, "bf16")
    assert float(got[0]) == float(want)


def test_f16_overflow_boundary() -> None:
    x = np.array([65519.99, 65520.0, -65520.0, 65504.0, 6e-8, 2.9e-8])
    got = cast(x, "f64", "f16").astype(np.float64)
    np.testing.assert_array_equal(got, [65504, np.inf, -np.inf, 65504, 2**-24, 0])


@pytest.mark.parametrize("src", FLOAT_DTYPES)
@pytest.mark.parametrize("dst", INT_DTYPES)
def test_float_to_int_truncates(src: str, dst: str) -> None:
    x = np.array([-2.75, -0.5, -0.0, 0.5, 0.99, 2.75, 100.5]).astype(NUMPY_DTYPES[src])
    if dst == "u8":
        x = np.abs(x)
    got = cast(x, src, dst)
    np.testing.assert_array_equal(got, np.trunc(x.astype(np.float64)).astype(np.int64))


@pytest.mark.parametrize("src", [d for d in ALL_DTYPES if d != "i1"])
def test_to_bool_is_nonzero(src: str) -> None:
    vals = [0, 1, 3, 0, 2] if src not in FLOAT_DTYPES else [0.0, -0.0, np.nan, 1e-30, -np.inf]
    x = np.array(vals).astype(NUMPY_DTYPES[src])
    want = (
        [False, True, True, False, True]
        if src not in FLOAT_DTYPES
        else [False, False, True, src != "f16", True]
    )  # 1e-30 underflows to 0 in f16
    np.testing.assert_array_equal(cast(x, src, "i1"), want)


@pytest.mark.parametrize("dst", ALL_DTYPES)
def test_from_bool_is_zero_one(dst: str) -> None:
    got = cast(np.array([True, False, True]), "i1", dst)
    np.testing.assert_array_equal(got.astype(np.float64), [1, 0, 1])


def test_int_to_int_wraps() -> None:
    assert cast(np.array([300, -129], np.int64), "i64", "i8").tolist() == [44, 127]
    assert cast(np.array([200], np.uint8), "u8", "i8").tolist() == [-56]
    assert cast(np.array([-1], np.int8), "i8", "u8").tolist() == [255]
    assert cast(np.array([2**40 + 5], np.int64), "i64", "i32").tolist() == [5]


@pytest.mark.parametrize("t", ALL_DTYPES)
def test_same_dtype_is_a_bitwise_copy_of_strided_input(t: str) -> None:
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 256, (6, 40), dtype=np.uint8)
    x = (raw % 2 == 0) if t == "i1" else raw.view(NUMPY_DTYPES[t])
    got = cast(x.T, t, t)
    assert got.tobytes() == np.ascontiguousarray(x.T).tobytes()  # NaN payloads included


def _bf16_neighbours(r: float) -> tuple[Fraction, Fraction]:
    """The bf16 values just below and above the finite or infinite bf16 value r (exact)."""
    bits = int(np.array(abs(r), BF16).view(np.uint16))
    lo = np.array(bits - 1, np.uint16).view(BF16) if bits else 0.0
    hi = np.array(bits + 1, np.uint16).view(BF16)
    hi_f = Fraction(2**128) if math.isinf(float(hi)) or math.isinf(r) else Fraction(float(hi))
    return Fraction(float(lo)), hi_f


def assert_rne_bf16(exact: Fraction, got: float) -> None:
    """`got` is the bf16 value nearest to `exact`, ties to an even bit pattern."""
    mag = abs(exact)
    r = abs(got)
    lo, hi = _bf16_neighbours(r)
    rf = Fraction(2**128) if math.isinf(r) else Fraction(r)
    assert (rf + lo) / 2 <= mag, (exact, got)
    if not math.isinf(r):
        assert mag <= (rf + hi) / 2, (exact, got)
    bits = int(np.array(r, BF16).view(np.uint16))
    if mag in ((rf + lo) / 2, (rf + hi) / 2):
        assert bits % 2 == 0, "tie not rounded to even"
    if exact != 0:
        assert math.copysign(1, got) == (1 if exact > 0 else -1)


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, width=64))
def test_f64_to_bf16_is_rne_property(x: float) -> None:
    got = float(cast(np.array([x]), "f64", "bf16")[0])
    assert_rne_bf16(Fraction(x), got)


@settings(max_examples=300, deadline=None)
@given(st.integers(-(2**63), 2**63 - 1) | st.integers(1, 2**20).map(lambda k: 2**62 + k * 2**38))
def test_i64_to_bf16_is_rne_property(n: int) -> None:
    got = float(cast(np.array([n], np.int64), "i64", "bf16")[0])
    assert_rne_bf16(Fraction(n), got)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 2**20).flatmap(lambda k: st.sampled_from([k, -k])))
def test_f64_bf16_midpoints_property(k: int) -> None:
    """Exact midpoints between bf16 neighbours, and one f64 ulp either side of them."""
    bits = k % 0x7F7F
    a = float(np.array(bits, np.uint16).view(BF16))
    b = float(np.array(bits + 1, np.uint16).view(BF16))
    mid = (a + b) / 2 * (1 if k > 0 else -1)
    for x in (mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf)):
        got = float(cast(np.array([x]), "f64", "bf16")[0])
        assert_rne_bf16(Fraction(float(x)), got)
