"""Weights as safetensors (bf16 included), written atomically. No pickle anywhere."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from safetensors import SafetensorError, TensorSpec, deserialize, serialize

from runtime.dtypes import NUMPY_DTYPES
from runtime.fsutil import atomic_write_bytes

# safetensors header dtype tag <-> fuel dtype name
_TAGS = {
    "F64": "f64",
    "F32": "f32",
    "F16": "f16",
    "BF16": "bf16",
    "I64": "i64",
    "I32": "i32",
    "I8": "i8",
    "U8": "u8",
    "BOOL": "i1",
}
_SPEC_NAMES = {
    "f64": "float64",
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "i64": "int64",
    "i32": "int32",
    "i8": "int8",
    "u8": "uint8",
    "i1": "bool",
}


class WeightsError(Exception):
    """A weights file is missing, corrupt, or lacks a tensor the module needs."""


def _fuel_dtype(arr: np.ndarray) -> str:
    for name, dt in NUMPY_DTYPES.items():
        if arr.dtype == dt:
            return name
    raise WeightsError(f"cannot store numpy dtype {arr.dtype} in a fuel weights file")


def weights_to_bytes(
    weights: Mapping[str, np.ndarray], metadata: dict[str, str] | None = None
) -> bytes:
    """Serialize arrays to safetensors bytes."""
    # ascontiguousarray makes a 0-d array 1-d: keep the declared shape (scalar weights)
    keep = {k: np.ascontiguousarray(v).reshape(np.shape(v)) for k, v in weights.items()}
    specs = {
        k: TensorSpec(
            dtype=_SPEC_NAMES[_fuel_dtype(a)],
            shape=list(a.shape),
            data_ptr=a.ctypes.data,
            data_len=a.nbytes,
        )
        for k, a in keep.items()
    }
    return bytes(serialize(specs, metadata))


def save_weights(
    path: str | os.PathLike[str],
    weights: Mapping[str, np.ndarray],
    metadata: dict[str, str] | None = None,
) -> None:
    """Write `weights` to `path` atomically."""
    atomic_write_bytes(path, weights_to_bytes(weights, metadata))


def load_weights(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Read every tensor of a safetensors file; `WeightsError` for a missing or corrupt file."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise WeightsError(f"cannot read weights file {p}: {e.strerror}") from None
    return weights_from_bytes(raw, str(p))


def weights_from_bytes(raw: bytes, where: str) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors blob; `WeightsError` (naming `where`) if it is corrupt."""
    try:
        entries = deserialize(raw)
    except (SafetensorError, ValueError) as e:
        raise WeightsError(f"corrupt weights file {where}: {e}") from None
    out: dict[str, np.ndarray] = {}
    for name, info in entries:
        tag = info["dtype"]
        if tag not in _TAGS:
            raise WeightsError(f"{where}: tensor '{name}' has unsupported dtype {tag}")
        dt = NUMPY_DTYPES[_TAGS[tag]]
        out[name] = np.frombuffer(info["data"], dtype=dt).reshape(info["shape"])
    return out
