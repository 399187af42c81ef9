"""Triton rms_norm, layer_norm and rope vs float64 numpy."""

from __future__ import annotations

import numpy as np
import pytest
from triton_helpers import check, check_stable, entry, quantize, run

DTYPES = ["f32", "f16", "bf16"]


def _data(shape: tuple, dtype: str, seed: int, n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    x = quantize(rng.normal(0.5, 2, size=shape), dtype)
    return [x, *(quantize(rng.normal(1, 0.5, size=shape[-1]), dtype) for _ in range(n))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 5, 70), (2, 2500)])
def test_rms_norm(dtype: str, shape: tuple) -> None:
    x, w = _data(shape, dtype, 0, 1)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    ref = x64 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + 1e-6) * w64
    e = entry("rms_norm", (dtype,) * 3)
    got = run(e, [x, w], shape, dtype, {"eps": 1e-6})
    check(got, ref, e.precision, dtype, scale=float(np.abs(ref).max()))
    check_stable(e, [x, w], shape, dtype, {"eps": 1e-6}, got)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 5, 70), (2, 2500)])
def test_layer_norm(dtype: str, shape: tuple) -> None:
    x, w, b = _data(shape, dtype, 1, 2)
    x64 = x.astype(np.float64)
    xc = x64 - x64.mean(axis=-1, keepdims=True)
    ref = xc / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + 1e-5)
    ref = ref * w.astype(np.float64) + b.astype(np.float64)
    e = entry("layer_norm", (dtype,) * 4)
    got = run(e, [x, w, b], shape, dtype, {"eps": 1e-5})
    check(got, ref, e.precision, dtype, scale=float(np.abs(ref).max()))
    check_stable(e, [x, w, b], shape, dtype, {"eps": 1e-5}, got)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_of_a_constant_row_is_the_bias(dtype: str) -> None:
    """The corrected two-pass mean is exactly a constant row's value: the bias, bit for bit."""
    x = quantize(np.array([0.1, 3.3, -1234.567, 1e-3])[:, None].repeat(100, 1), dtype)
    _, w, b = _data((4, 100), dtype, 2, 2)
    got = run(entry("layer_norm", (dtype,) * 4), [x, w, b], x.shape, dtype, {"eps": 1e-5})
    np.testing.assert_array_equal(got, np.broadcast_to(b, x.shape))


def _rope64(x: np.ndarray, c: np.ndarray, s: np.ndarray, interleaved: bool) -> np.ndarray:
    x, c, s = (t.astype(np.float64) for t in (x, c, s))
    out = np.empty_like(x)
    h = x.shape[-1] // 2
    sl = (slice(0, None, 2), slice(1, None, 2)) if interleaved else (slice(0, h), slice(h, None))
    a, b = x[..., sl[0]], x[..., sl[1]]
    out[..., sl[0]], out[..., sl[1]] = a * c - b * s, b * c + a * s
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("interleaved", [False, True])
def test_rope(dtype: str, interleaved: bool) -> None:
    rng = np.random.default_rng(3)
    x = quantize(rng.normal(size=(2, 3, 6, 20)), dtype)  # D/2 = 10: not a power of two
    ang = np.arange(6)[:, None] * (1e4 ** (-np.arange(10) / 10))[None, :]
    c, s = quantize(np.cos(ang), dtype), quantize(np.sin(ang), dtype)
    params = {"interleaved": interleaved}
    e = entry("rope", (dtype,) * 4)
    got = run(e, [x, c, s], x.shape, dtype, params)
    check(got, _rope64(x, c, s, interleaved), e.precision, dtype, scale=float(np.abs(x).max()))
    check_stable(e, [x, c, s], x.shape, dtype, params, got)
