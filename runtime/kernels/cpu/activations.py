"""The activations the fused matmul kernels apply to their f32 (or f64) products, evaluated by
the very composites the standalone kernels use (silu, gelu in f64, relu exact), so a fused
kernel rounds exactly where the op chain it replaces does. Shared by the numpy, torch-blas and
native fused kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np

from runtime import special
from runtime.kernels.cpu._common import F64_COMPUTE, WIDE, compute_kernel
from runtime.rounding import apply_into, store

_Act = Callable[[np.ndarray, np.ndarray], None]


def _activations(cdt: np.dtype) -> dict[str, _Act]:
    """act name -> (y, out): out = act(y), y in the compute dtype `cdt`."""
    key = "f64" if cdt == np.float64 else "f32"
    wide, f64 = WIDE[key], F64_COMPUTE[key]  # what the standalone silu / gelu kernels use

    def run(fn: Callable[[np.ndarray], np.ndarray], work: np.dtype | None) -> _Act:
        kernel = compute_kernel(fn, work)
        return lambda y, out: kernel([y], [out], {})

    return {
        "none": lambda y, out: store(out, y),
        "relu": lambda y, out: apply_into(np.maximum, (y, 0), out),
        "silu": run(special.silu, wide),
        "gelu": run(special.gelu_erf, f64),
        "gelu_tanh": run(special.gelu_tanh if f64 is not None else special.gelu_tanh_f64, f64),
    }


@cache
def f32_activations() -> dict[str, _Act]:
    """The f32 activations (the torch-blas fused siblings share them)."""
    return _activations(np.dtype(np.float32))
