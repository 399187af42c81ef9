"""Weights files: every shape and dtype fuel declares survives a save and a load."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from runtime.weights import WeightsError, load_weights, save_weights, weights_from_bytes

ARRAYS = {
    "scalar": np.array(3.5, np.float32),  # 0-d: ascontiguousarray alone would make it [1]
    "vector": np.arange(5, dtype=np.int64),
    "strided": np.arange(24, dtype=np.float64).reshape(4, 6)[:, ::2],
    "bf16": np.linspace(-2, 2, 6).astype(ml_dtypes.bfloat16).reshape(2, 3),
    "mask": np.array([[True, False]]),
}


def test_round_trip_keeps_shape_dtype_and_bytes(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    save_weights(path, ARRAYS)
    got = load_weights(path)
    assert set(got) == set(ARRAYS)
    for name, want in ARRAYS.items():
        assert got[name].shape == want.shape, name
        assert got[name].dtype == want.dtype, name
        np.testing.assert_array_equal(got[name], want)


def test_corrupt_bytes_name_the_file() -> None:
    with pytest.raises(WeightsError, match="corrupt weights file model.safetensors"):
        weights_from_bytes(b"\x10\x00not safetensors", "model.safetensors")
