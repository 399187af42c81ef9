"""`matmul`: numpy matmul semantics for operands of rank >= 2, batch dims broadcast.

f32/f64 go to numpy's BLAS (OpenBLAS); f16/bf16 are widened to f32, multiplied with f32
accumulation and rounded once; i64/i32 use numpy's integer loop, exact modulo 2^bits. Operands
are made C-contiguous first so the BLAS path, hence the accumulation order and the bits, depend
only on the shapes and values, not on the input strides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from runtime.binding_table import Kernel, KernelBindingTable
from runtime.cost import CostEstimate
from runtime.kernels.cpu._common import (
    OVERHEAD_NS,
    WIDE,
    Arrays,
    F,
    Params,
    Shapes,
    add,
    exact,
    half,
    measured,
    operand_bytes,
)
from runtime.precision import PrecisionGuarantee
from runtime.rounding import store

MATMUL_DTYPES = (*F, "i64", "i32")


def matmul_claim(dtype: str) -> PrecisionGuarantee:
    if dtype in F:
        return measured(
            "dot products cancel: normwise relative error measured; bits fixed per BLAS "
            "build/threads",
            with_ulp=half(dtype),
        )
    return exact("integer matmul wraps modulo 2^bits exactly")


def _matmul(cdt: np.dtype | None) -> Kernel:
    if cdt is None:

        def matmul(inputs: Arrays, outputs: Arrays, params: Params) -> None:
            a, b = inputs
            np.matmul(np.ascontiguousarray(a), np.ascontiguousarray(b), out=outputs[0])

        return matmul

    def matmul_wide(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        a, b = inputs
        store(outputs[0], np.matmul(a.astype(cdt), b.astype(cdt)))

    return matmul_wide


def matmul_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """2 m n k flops per batch element (batch = the broadcast output batch dims)."""
    a, out = shapes[0], shapes[-1]
    flops = 2.0 * math.prod(out) * a[-1]
    return CostEstimate(flops, operand_bytes(shapes, dtypes), OVERHEAD_NS["matmul"])


def register_linalg(table: KernelBindingTable) -> None:
    """Register matmul for F and the 64/32-bit signed integers."""
    for t in MATMUL_DTYPES:
        cdt = WIDE[t] if t in ("f16", "bf16") else None
        add(table, "matmul", (t, t, t), _matmul(cdt), matmul_claim(t), matmul_cost)
