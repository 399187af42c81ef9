"""Shared pieces of the numpy kernel families: dtype groups, registration, cost formulas.

Every CPU kernel is registered through `add`, which fixes the backend (`"cpu"`), the provenance
tag (`"numpy"`) and the caps (numpy walks any strides, including the stride 0 of a broadcast
view). Cost functions are built here from small per-family formulas (see `CostFn`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from runtime.binding_table import Kernel, KernelBindingTable, KernelCaps, digest64, revision_hash
from runtime.cost import CostEstimate, CostFn, numel
from runtime.dtypes import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, NUMPY_DTYPES, SIGNED_INT_DTYPES
from runtime.precision import PrecisionGuarantee
from runtime.rounding import CHUNK, HALF, REVISION_CODE, store

Arrays = Sequence[np.ndarray]
Params = Mapping[str, Any]
Shapes = Sequence[tuple[int, ...]]

BACKEND = "cpu"
KERNEL_SOURCE = "numpy"
CAPS = KernelCaps(strided_input=True)

F = FLOAT_DTYPES
I = INT_DTYPES  # noqa: E741 - the integer group, named like F and SI
SI = SIGNED_INT_DTYPES
ALL = ALL_DTYPES

F64 = np.dtype(np.float64)
F32 = np.dtype(np.float32)

WIDE: dict[str, np.dtype | None] = {"f64": None, "f32": F64, "f16": F32, "bf16": F32}
"""Compute dtype of the correctly-rounded families: f16/bf16 widen to f32 (p' = 24 >= 2p + 2, so
one op then one rounding is exact for + - * / sqrt), f32 widens to f64 for transcendentals so the
only error left is the final rounding. None means "compute in the dtype itself"."""

F64_COMPUTE: dict[str, np.dtype | None] = {"f64": None, "f32": F64, "f16": F64, "bf16": F64}
"""Compute dtype for ops that need f64 for their claim (gelu, rope, softmax)."""

_ITEMSIZE = {name: dt.itemsize for name, dt in NUMPY_DTYPES.items()}

# Fixed per-call host overhead of a numpy kernel, measured on the reference x86 host with tiny
# operands: one ufunc call ~0.5-1 us; composites (sigmoid, softmax, norms) make 5-15 calls, gelu
# ~60 (its erfcx polynomial), attention ~25.
OVERHEAD_NS = {
    "ufunc": 800.0,
    "composite": 10_000.0,
    "gelu": 50_000.0,
    "matmul": 3_000.0,
    "attention": 40_000.0,
}


def add(
    table: KernelBindingTable,
    op: str,
    dtypes: Sequence[str],
    kernel: Kernel,
    precision: PrecisionGuarantee,
    cost: CostFn,
    *,
    also: Sequence[Callable[..., Any]] = (),
    direct: Callable[..., Any] | None = None,
    source: str = KERNEL_SOURCE,
    caps: KernelCaps = CAPS,
    code: str = "",
) -> None:
    """Register one kernel for (op, dtypes) on the CPU backend. `also` lists the helper
    functions a generic kernel closure calls, mixed into its revision hash, and `code` any
    other code it runs (e.g. C source); `direct` is the ufunc when the kernel is exactly one
    positional ufunc call (the executor's fast path); `source` and `caps` default to the
    precise numpy library's."""
    revision = None
    if any(d in HALF for d in dtypes):  # their results are written by runtime.rounding
        also = (*also, *REVISION_CODE)
    if also or code:
        text = " ".join(str(revision_hash(f, source)) for f in (kernel, *also)) + code
        revision = digest64(text)
    table.register(
        op,
        tuple(dtypes),
        BACKEND,
        kernel,
        caps=caps,
        precision=precision,
        cost=cost,
        kernel_source=source,
        revision=revision,
        direct=direct,
    )


def operand_bytes(shapes: Sequence[Sequence[int]], dtypes: Sequence[str]) -> float:
    """Bytes of every operand read or written once (inputs then outputs)."""
    return float(sum(numel(s) * _ITEMSIZE[d] for s, d in zip(shapes, dtypes, strict=True)))


def per_element_cost(flops_per_elem: float, overhead: str = "ufunc") -> CostFn:
    """Elementwise-style cost: `flops_per_elem` per element of the largest operand."""
    overhead_ns = OVERHEAD_NS[overhead]

    def cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
        n = max((numel(s) for s in shapes), default=0)
        return CostEstimate(n * flops_per_elem, operand_bytes(shapes, dtypes), overhead_ns)

    return cost


def copy_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """Data movement: no flops; the output is written once and as many bytes are read."""
    out_bytes = numel(shapes[-1]) * _ITEMSIZE[dtypes[-1]]
    extra = operand_bytes(shapes[1:-1], dtypes[1:-1])  # indices of gather, extra concat inputs
    return CostEstimate(0.0, 2.0 * out_bytes + extra, OVERHEAD_NS["ufunc"])


def compute_kernel(fn: Callable[[np.ndarray], np.ndarray], cdt: np.dtype | None) -> Kernel:
    """A unary kernel that evaluates the composite `fn` on the input converted to `cdt` (None:
    as is) and rounds once into the output (`runtime.rounding.store`). `fn` sees flat slices of
    CHUNK elements (elementwise, so the layout is free) and runs under errstate(all="ignore"):
    its intermediate inf * 0 or overflow are by design and fixed up inside `fn`."""

    def composite(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        x, out = inputs[0], outputs[0]
        work = x.dtype if cdt is None else cdt
        flat_in = x.reshape(-1)
        flat_out = out.reshape(-1) if out.flags.c_contiguous else np.empty(x.size, out.dtype)
        with np.errstate(all="ignore"):
            for i in range(0, x.size, CHUNK):
                part = flat_in[i : i + CHUNK].astype(work, copy=False)
                store(flat_out[i : i + CHUNK], fn(part))
        if not out.flags.c_contiguous:
            np.copyto(out, flat_out.reshape(out.shape))

    return composite


def exact(notes: str) -> PrecisionGuarantee:
    """Bit-stable and correctly rounded (or exact): the REFERENCE claim with a reason."""
    return PrecisionGuarantee(bit_stable=True, max_ulp=0, notes=notes)


def ulp(bound: int, notes: str) -> PrecisionGuarantee:
    """Bit-stable with a verified ULP bound, and the relative error measured on the probes (a
    1-ulp bound is a relative one only per dtype: the ledger gives its value)."""
    return PrecisionGuarantee(bit_stable=True, max_ulp=bound, notes=notes, measured=REL)


REL = ("max_relative",)
ULP_REL = ("max_ulp", "max_relative")


def measured(notes: str, *, with_ulp: bool = False) -> PrecisionGuarantee:
    """Bit-stable with the relative error (normwise for matmul, attention, norms and sums) and,
    `with_ulp`, the ulp error measured on the probes: no static bound survives cancellation,
    so the bound is the worst case of the stated probe set, read from the ledger. `with_ulp`
    where the ulp error means something: a result rounded once from a wider computation (f16,
    bf16 in f32; f64 accumulation), or one without cancellation (rms_norm)."""
    return PrecisionGuarantee(bit_stable=True, notes=notes, measured=ULP_REL if with_ulp else REL)


def half(dtype: str) -> bool:
    """f16 / bf16: computed in f32 and rounded once, where an ulp bound is meaningful."""
    return dtype in ("f16", "bf16")
