"""Triton tiled matmul (every tile-config sibling) vs float64 numpy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from triton_helpers import entry, quantize, run, table, to_numpy, to_torch

from runtime.kernels.triton.matmul import CONFIGS

SOURCES = ["triton", *(f"triton-{c.tag}" for c in CONFIGS[1:])]
UNIT = {"f32": 2.0**-24, "f16": 2.0**-11, "bf16": 2.0**-8}


def _operands(sa: tuple, sb: tuple, dtype: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return quantize(rng.normal(size=sa), dtype), quantize(rng.normal(size=sb), dtype)


def _check(got: np.ndarray, a: np.ndarray, b: np.ndarray, dtype: str) -> float:
    """|c - ab| <= 2 K u32 (|a||b|) + u_out |ab|: f32 accumulation, one output rounding."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref, mag = a64 @ b64, np.abs(a64) @ np.abs(b64)
    k = a.shape[-1]
    bound = 2 * k * 2.0**-24 * mag + UNIT[dtype] * np.abs(ref) + 1e-30
    err = np.abs(got.astype(np.float64) - ref)
    assert np.all(err <= bound), f"worst error/bound {float((err / bound).max()):.3g}"
    return float(err.max())


def test_variants_are_siblings_at_one_key() -> None:
    for t in ("f32", "f16", "bf16"):
        got = [e.kernel_source for e in table().lookup_alternatives("matmul", (t,) * 3, "cuda")]
        assert got == SOURCES


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_matmul_non_power_of_two(source: str, dtype: str) -> None:
    a, b = _operands((37, 50), (50, 29), dtype)
    e = entry("matmul", (dtype,) * 3, source)
    got = run(e, [a, b], (37, 29), dtype)
    _check(got, a, b, dtype)
    assert run(e, [a, b], (37, 29), dtype).tobytes() == got.tobytes()  # bit-stable claim


@pytest.mark.parametrize("source", SOURCES)
def test_matmul_broadcast_batch(source: str) -> None:
    a, b = _operands((2, 1, 19, 70), (3, 70, 21), "f32", seed=1)
    got = run(entry("matmul", ("f32",) * 3, source), [a, b], (2, 3, 19, 21), "f32")
    _check(got, a, b, "f32")


def test_matmul_strided_operands_and_output() -> None:
    a, bt = _operands((33, 40), (17, 40), "bf16", seed=2)
    a_cm = to_torch(a).t().contiguous().t()  # (33, 40) column-major
    b_view = to_torch(bt).t()  # (40, 17) transposed view
    out = torch.empty((17, 33), dtype=torch.bfloat16).t()  # (33, 17) non-contiguous
    entry("matmul", ("bf16",) * 3).kernel([a_cm, b_view], [out], {})
    _check(to_numpy(out, "bf16"), a, bt.T, "bf16")


def test_matmul_batch_needing_materialisation() -> None:
    a, b = _operands((2, 1, 3, 5, 9), (1, 4, 1, 9, 6), "f16", seed=3)
    got = run(entry("matmul", ("f16",) * 3), [a, b], (2, 4, 3, 5, 6), "f16")
    _check(got, a, b, "f16")


def test_matmul_empty_contraction_is_zero() -> None:
    a, b = np.zeros((3, 0), np.float32), np.zeros((0, 4), np.float32)
    got = run(entry("matmul", ("f32",) * 3), [a, b], (3, 4), "f32")
    np.testing.assert_array_equal(got, np.zeros((3, 4), np.float32))
