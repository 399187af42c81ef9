"""fuel dtype names <-> numpy dtypes (bf16 through ml_dtypes)."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

NUMPY_DTYPES: dict[str, np.dtype] = {
    "f64": np.dtype(np.float64),
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "i64": np.dtype(np.int64),
    "i32": np.dtype(np.int32),
    "i8": np.dtype(np.int8),
    "u8": np.dtype(np.uint8),
    "i1": np.dtype(np.bool_),
}
"""Every fuel element type, by its IR spelling."""

TORCH_NAMES: dict[str, str] = {
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
"""Every fuel element type -> the name of its torch dtype (`torch_dtype` imports torch)."""

FLOAT_DTYPES = ("f64", "f32", "f16", "bf16")
INT_DTYPES = ("i64", "i32", "i8", "u8")
SIGNED_INT_DTYPES = ("i64", "i32", "i8")
ALL_DTYPES = (*FLOAT_DTYPES, *INT_DTYPES, "i1")

_BY_NUMPY = {v: k for k, v in NUMPY_DTYPES.items()}


def to_numpy(name: str) -> np.dtype:
    """The numpy dtype of a fuel dtype name; KeyError names the unknown dtype."""
    try:
        return NUMPY_DTYPES[name]
    except KeyError:
        raise KeyError(f"unknown fuel dtype '{name}' (known: {', '.join(NUMPY_DTYPES)})") from None


def from_numpy(dtype: np.dtype | type) -> str:
    """The fuel dtype name of a numpy dtype."""
    dt = np.dtype(dtype)
    try:
        return _BY_NUMPY[dt]
    except KeyError:
        raise KeyError(f"numpy dtype {dt} has no fuel equivalent") from None


def compute_dtype(name: str) -> np.dtype:
    """The dtype a kernel computes in: f16/bf16 widen to f32, everything else is itself."""
    return np.dtype(np.float32) if name in ("f16", "bf16") else NUMPY_DTYPES[name]


def torch_dtype(name: str) -> Any:
    """The torch dtype of a fuel dtype name."""
    import torch  # lazy: torch is an optional dependency of the runtime

    return getattr(torch, TORCH_NAMES[name])


def tensor_to_numpy(t: Any) -> np.ndarray:
    """A copy of a torch tensor's values in numpy, same dtype (bf16: ml_dtypes' bfloat16)."""
    import torch  # lazy: torch is an optional dependency of the runtime

    t = t.detach().cpu().contiguous()
    names = {getattr(torch, v): k for k, v in TORCH_NAMES.items()}
    if t.dtype not in names:
        raise KeyError(
            f"torch dtype {t.dtype} has no fuel dtype (known: {', '.join(NUMPY_DTYPES)})"
        )
    out = np.empty(tuple(t.shape), NUMPY_DTYPES[names[t.dtype]])
    torch.from_numpy(out.reshape(-1).view(np.uint8)).copy_(t.reshape(-1).view(torch.uint8))
    return out


def numpy_to_tensor(a: np.ndarray) -> Any:
    """A torch CPU tensor holding a copy of `a`, same dtype (bf16 from ml_dtypes' bfloat16)."""
    import torch  # lazy: torch is an optional dependency of the runtime

    a = np.ascontiguousarray(a)
    t = torch.empty(a.shape, dtype=torch_dtype(from_numpy(a.dtype)))
    t.reshape(-1).view(torch.uint8).copy_(torch.from_numpy(a.reshape(-1).view(np.uint8)))
    return t
