"""Triton elementwise kernels vs float64 numpy: unary math, broadcasting binary ops, cast."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
import torch
from triton_helpers import check, check_stable, entry, quantize, run, to_numpy, to_torch

DTYPES = ("f32", "f16", "bf16")
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


UNARY_REF = {
    "neg": np.negative,
    "abs": np.abs,
    "relu": lambda x: np.maximum(x, 0.0),
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "recip": lambda x: 1.0 / x,
    "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "sin": np.sin,
    "cos": np.cos,
    "erf": _erf,
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
}
POSITIVE = {"log", "sqrt", "rsqrt"}

BINARY_REF = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "max": np.maximum,
    "min": np.minimum,
    "pow": np.power,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}
COMPARES = {"eq", "ne", "lt", "le", "gt", "ge"}


def _unary_input(op: str, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(f"{op}{dtype}".encode()))
    x = rng.normal(0.0, 2.0, shape)
    if op in POSITIVE:
        x = np.abs(x) * 3 + 1e-3
    if op == "exp":
        x = np.clip(x * 2, -10, 10)  # e^11 overflows f16
    if op == "tanh":  # both branches (|x| < 0.55 polynomial) and tiny arguments
        half = x.size // 2
        x = np.concatenate([x.ravel()[:half], np.geomspace(1e-6, 0.6, x.size - half)])
        x = x.reshape(shape)
    if op not in POSITIVE:  # signed zeros: Triton's unary minus (0 - x) loses -0.0 on a GPU
        x.flat[:2] = (0.0, -0.0)
    return quantize(x, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", sorted(UNARY_REF))
def test_unary_matches_float64(op: str, dtype: str) -> None:
    x = _unary_input(op, dtype, (3, 37))
    e = entry(op, (dtype, dtype))
    got = run(e, [x], x.shape, dtype)
    with np.errstate(all="ignore"):
        ref = UNARY_REF[op](x.astype(np.float64))
    check(got, ref, e.precision, dtype, scale=max(1.0, float(np.abs(ref).max())))
    check_stable(e, [x], x.shape, dtype, {}, got)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_gelu_tanh_form(dtype: str) -> None:
    x = _unary_input("gelu", dtype, (5, 19))
    e = entry("gelu", (dtype, dtype))
    got = run(e, [x], x.shape, dtype, {"approximate": "tanh"})
    check(got, _gelu_tanh(x.astype(np.float64)), e.precision, dtype, scale=float(np.abs(x).max()))


def test_unary_reads_strided_views() -> None:
    x = _unary_input("exp", "f32", (6, 10))
    xt = to_torch(x).t()  # (10, 6), non-contiguous
    e = entry("exp", ("f32", "f32"))
    got = run(e, [xt], (10, 6), "f32")
    check(got, np.exp(x.T.astype(np.float64)), e.precision, "f32", scale=float(np.exp(10)))


def _binary_inputs(op: str, dtype: str, sa: tuple, sb: tuple) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(zlib.crc32(f"{op}{dtype}".encode()))
    a, b = rng.normal(0, 3, sa), rng.normal(0, 3, sb)
    if op == "pow":  # positive bases, plus negative bases with integer exponents
        a = np.abs(a) + 0.1
        a.ravel()[::3] *= -1
        b = np.round(np.clip(b, -4, 4) * 2) / 2
        b.ravel()[::2] = np.round(b.ravel()[::2])
        b.ravel()[::3] = np.round(b.ravel()[::3])
    if op in COMPARES:
        b = np.round(b)  # some ties
        a = np.round(a)
    if op == "div":
        b = np.where(np.abs(b) < 0.1, 0.5, b)
    return quantize(a, dtype), quantize(b, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", sorted(BINARY_REF))
def test_binary_broadcasts_and_matches_float64(op: str, dtype: str) -> None:
    a, b = _binary_inputs(op, dtype, (4, 1, 6), (5, 1))
    out_dtype = "i1" if op in COMPARES else dtype
    e = entry(op, (dtype, dtype, out_dtype))
    got = run(e, [a, b], (4, 5, 6), out_dtype)
    with np.errstate(all="ignore"):
        ref = BINARY_REF[op](a.astype(np.float64), b.astype(np.float64))
    if op in COMPARES:
        assert np.array_equal(got, ref)
        return
    check(got, ref, e.precision, dtype, scale=max(1.0, float(np.abs(ref[np.isfinite(ref)]).max())))
    check_stable(e, [a, b], (4, 5, 6), dtype, {}, got)


def test_max_min_propagate_nan() -> None:
    a = np.array([1.0, np.nan, 3.0, np.nan], np.float32)
    b = np.array([np.nan, 2.0, 1.0, np.nan], np.float32)
    for op, uf in (("max", np.maximum), ("min", np.minimum)):
        got = run(entry(op, ("f32",) * 3), [a, b], (4,), "f32")
        np.testing.assert_array_equal(got, uf(a, b))


def test_rank6_broadcast_falls_back_to_materialised_inputs() -> None:
    rng = np.random.default_rng(0)
    a = quantize(rng.normal(size=(2, 1, 3, 1, 5, 1)), "f32")
    b = quantize(rng.normal(size=(1, 4, 1, 2, 1, 3)), "f32")
    out = np.broadcast_shapes(a.shape, b.shape)
    got = run(entry("mul", ("f32",) * 3), [a, b], out, "f32")
    np.testing.assert_array_equal(got, (a * b).astype(np.float32))


def test_non_contiguous_output_is_written() -> None:
    x = quantize(np.random.default_rng(1).normal(size=(4, 6)), "f16")
    out = torch.empty((6, 4), dtype=torch.float16).t()
    entry("neg", ("f16", "f16")).kernel([to_torch(x)], [out], {})
    np.testing.assert_array_equal(to_numpy(out, "f16"), -x)


@pytest.mark.parametrize("src", DTYPES)
@pytest.mark.parametrize("dst", DTYPES)
def test_cast_is_correctly_rounded(src: str, dst: str) -> None:
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.normal(0, 1e3, 200), rng.normal(0, 1e-3, 200), [0.0, -0.0, np.inf]])
    x = quantize(x, src)
    e = entry("cast", (src, dst))
    got = run(e, [x], x.shape, dst)
    check(got, x.astype(np.float64), e.precision, dst)


def test_scalar_and_size_one_operands() -> None:
    a = quantize(np.array(2.5), "f32")
    b = quantize(np.arange(6.0).reshape(1, 6, 1), "f32")
    got = run(entry("mul", ("f32",) * 3), [a, b], (1, 6, 1), "f32")
    np.testing.assert_array_equal(got, a * b)
    one = run(entry("exp", ("f32", "f32")), [quantize(np.array([[0.0]]), "f32")], (1, 1), "f32")
    assert one.item() == 1.0


def test_aot_spec_rank_for_dense_operands() -> None:
    e = entry("add", ("f16",) * 3)
    (dense,) = e.kernel.launches([(64, 32), (64, 32), (64, 32)], ("f16",) * 3, {})
    (row,) = e.kernel.launches([(64, 32), (32,), (64, 32)], ("f16",) * 3, {})
    assert dense.constexprs["NDIM"] == 1 and row.constexprs["NDIM"] == 2
    assert dense.launch_grid() == (2,) and dense.constexprs["BIG"] is False


def test_bf16_conversions_match_torch_bit_for_bit() -> None:
    """f32 -> bf16 is RNE for every class (subnormals, ties, overflow, NaN), and bf16 -> f32
    widens exactly: checked on random bit patterns against torch's conversion."""
    bits = np.random.default_rng(0).integers(0, 2**32, 50_000, dtype=np.uint64).astype(np.uint32)
    bits[:6] = [0x00008000, 0x00018000, 0x7F7F8000, 0x7F7FFFFF, 0x80008000, 0x00000001]
    x = torch.from_numpy(bits.view(np.float32).copy())
    y = torch.empty(x.shape, dtype=torch.bfloat16)
    entry("cast", ("f32", "bf16")).kernel([x], [y], {})
    ref = x.to(torch.bfloat16)
    nan = torch.isnan(ref)
    assert torch.equal(y.view(torch.int16)[~nan], ref.view(torch.int16)[~nan])
    assert bool(torch.isnan(y)[nan].all())
    back = torch.empty(x.shape)
    entry("cast", ("bf16", "f32")).kernel([ref], [back], {})
    assert torch.equal(back[~nan], ref.float()[~nan])
