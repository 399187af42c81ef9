"""Triton reductions and softmax vs float64 numpy."""

from __future__ import annotations

import numpy as np
import pytest
from triton_helpers import check, check_stable, entry, quantize, run

DTYPES = ["f32", "f16", "bf16"]
REF = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max, "reduce_min": np.min}
CASES = [
    ((3, 5, 7), (2,), False),
    ((3, 5, 7), (0, 2), True),
    ((4, 6), (0,), False),
    ((2, 2500), (1,), True),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", sorted(REF))
@pytest.mark.parametrize(("shape", "axes", "keep"), CASES)
def test_reduce_matches_float64(op: str, dtype: str, shape: tuple, axes: tuple, keep: bool) -> None:
    x = quantize(np.random.default_rng(len(shape) + len(axes)).normal(size=shape), dtype)
    ref = REF[op](x.astype(np.float64), axis=axes, keepdims=keep)
    params = {"axes": axes, "keepdim": keep}
    e = entry(op, (dtype, dtype))
    got = run(e, [x], ref.shape, dtype, params)
    scale = float(np.abs(x.astype(np.float64)).sum(axis=axes).max())  # sum |x|: sums' scale
    if op == "reduce_mean":
        scale /= x.size // ref.size
    check(got, ref, e.precision, dtype, scale=scale)
    check_stable(e, [x], ref.shape, dtype, params, got)


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
def test_max_min_propagate_nan(op: str) -> None:
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -6.0]], np.float32)
    got = run(entry(op, ("f32", "f32")), [x], (2,), "f32", {"axes": (1,), "keepdim": False})
    np.testing.assert_array_equal(got, REF[op](x, axis=1))


def _softmax64(x: np.ndarray, axis: int) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "axis"), [((3, 5, 7), 2), ((3, 5, 7), 1), ((2, 3000), 1)])
def test_softmax_matches_float64(dtype: str, shape: tuple, axis: int) -> None:
    x = quantize(np.random.default_rng(axis).normal(0, 3, size=shape), dtype)
    e = entry("softmax", (dtype, dtype))
    got = run(e, [x], shape, dtype, {"axis": axis})
    check(got, _softmax64(x, axis), e.precision, dtype)
    check_stable(e, [x], shape, dtype, {"axis": axis}, got)


def test_softmax_masked_entries() -> None:
    x = np.random.default_rng(5).normal(size=(4, 9)).astype(np.float32)
    x[:, ::2] = -np.inf  # masked keys, as attention scores use them
    e = entry("softmax", ("f32", "f32"))
    got = run(e, [x], x.shape, "f32", {"axis": 1})
    assert np.all(got[:, ::2] == 0.0)
    check(got, _softmax64(x, 1), e.precision, "f32")
