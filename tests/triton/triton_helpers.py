"""Shared pieces of the Triton kernel tests: run a registered kernel on numpy data, check claims.

Kernels run under the Triton interpreter (tests/conftest.py) on torch CPU tensors. Inputs are
drawn in float64, rounded to the kernel's dtype first, and the float64 reference is computed
from those rounded values, so a measured error is the kernel's own.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import torch

from runtime.binding_table import BindingEntry, KernelBindingTable
from runtime.precision import ErrorReport, PrecisionGuarantee, measure_errors

NP = {
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "i64": np.dtype(np.int64),
    "i1": np.dtype(np.bool_),
}
TORCH = {
    "f32": torch.float32,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "i64": torch.int64,
    "i1": torch.bool,
}

TOLERANCE = {"f32": 2e-5, "f16": 2e-3, "bf16": 1.6e-2}
"""Relative tolerance (of the reference's scale) for claims that make no static bound."""


@functools.cache
def table() -> KernelBindingTable:
    """The Triton rows with their claims as declared (what these tests check under the
    interpreter; the registry's gate marks them unaudited until a GPU run proves them)."""
    from runtime.kernels.triton.registry import triton_kernel_table

    return triton_kernel_table(gate=False)


def entry(op: str, dtypes: Sequence[str], source: str = "triton") -> BindingEntry:
    """The entry at (op, dtypes, "cuda") with this kernel_source."""
    for e in table().lookup_alternatives(op, tuple(dtypes), "cuda"):
        if e.kernel_source == source:
            return e
    raise LookupError(f"no {source} kernel at ({op}, {dtypes})")


def quantize(x: np.ndarray, dtype: str) -> np.ndarray:
    """`x` rounded to `dtype` (as that numpy dtype)."""
    return np.asarray(x).astype(NP[dtype])


def to_torch(x: np.ndarray) -> torch.Tensor:
    if x.dtype == NP["bf16"]:
        return torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(x))


def to_numpy(t: torch.Tensor, dtype: str) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.float().numpy().astype(NP["bf16"])
    return t.numpy().copy()


def run(
    e: BindingEntry,
    inputs: Sequence[np.ndarray | torch.Tensor],
    out_shape: Sequence[int],
    out_dtype: str,
    params: Mapping[str, Any] | None = None,
) -> np.ndarray:
    """Run a kernel on numpy (or prepared torch) inputs; the output as numpy."""
    ins = [x if isinstance(x, torch.Tensor) else to_torch(x) for x in inputs]
    out = torch.empty(tuple(out_shape), dtype=TORCH[out_dtype])
    e.kernel(ins, [out], dict(params or {}))
    return to_numpy(out, out_dtype)


def no_bound(claim: PrecisionGuarantee) -> bool:
    """No numeric bound is claimed (a bit-stable claim may still hold none)."""
    return claim.max_ulp is None and claim.max_relative is None and claim.max_absolute is None


def check(
    got: np.ndarray, ref: np.ndarray, claim: PrecisionGuarantee, dtype: str, scale: float = 1.0
) -> ErrorReport:
    """Assert `claim` against the float64 `ref`; with no static bound, assert the dtype's
    tolerance relative to `scale` (the magnitude the errors are judged against)."""
    report = measure_errors(got, np.asarray(ref, dtype=np.float64))
    if no_bound(claim):
        err = np.abs(got.astype(np.float64) - ref)
        finite = np.isfinite(ref)
        assert np.array_equal(np.isnan(got.astype(np.float64)), np.isnan(ref))
        worst = float(err[finite].max(initial=0.0))
        assert worst <= TOLERANCE[dtype] * scale, f"max error {worst:g} (scale {scale:g})"
    else:
        assert report.satisfies(claim), f"{report} violates {claim.describe()}"
    return report


def check_stable(
    e: BindingEntry,
    inputs: Sequence[np.ndarray],
    out_shape: Sequence[int],
    out_dtype: str,
    params: Mapping[str, Any] | None,
    first: np.ndarray,
) -> None:
    """A bit-stable claim: a second run writes the same bytes."""
    if e.precision.bit_stable:
        again = run(e, inputs, out_shape, out_dtype, params)
        assert again.tobytes() == first.tobytes()
