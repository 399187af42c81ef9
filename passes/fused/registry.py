"""Fused-kernel registry: fused ops with a pattern over primitives (concepts doc sections 8, 12).

A `FusedEntry` names a fused op fuel has as one op (`fuel.softmax`, `fuel.gated_mlp`, ...), a
**pattern** that recognises its decomposition in primitive IR rooted at one op
(`passes.fused.patterns`, `passes.fused.attention`), and a **build** that emits the fused
op for a match. `fuel-fuse-patterns` offers each match as a variant arm, where a kernel for the
fused op is bound.

`register_fused` is for entries known at import time; `adopt` is for kernels registered at run
time: it registers the entry and publishes its `FusedKernel`s in the process-wide binding table
(where the picker and the executor find them) in one critical section, each kernel only if that
exact function is not bound at its key yet. Adopting the same thing twice is one registration.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fuel_dialect.dtypes import dtype_name, shape_of
from fuel_dialect.ops_nn import LayerNormOp, RmsNormOp
from passes.fused.attention import build_attention, build_rope, match_attention, match_rope
from passes.fused.patterns import (
    Build,
    FusedMatch,
    Pattern,
    build_gated_mlp,
    build_matmul_bias_act,
    build_norm,
    build_softmax,
    match_gated_mlp,
    match_layer_norm,
    match_matmul_bias_act,
    match_rms_norm,
    match_softmax,
)
from runtime import precision as kernel_precision
from runtime.cost import CostEstimate, CostFn, fused_cost, io_bytes
from runtime.kernels import extend_global_bindings, global_bindings

UNTRACKED = 0
"""`KernelRevisionHash` of a kernel whose build is not tracked."""


@dataclass(frozen=True)
class DecompositionBound:
    """What a fused kernel promises against its decomposition (arm 0) in f32, normwise over
    the output: max|fused - decomposition| <= max_absolute + max_relative * max|decomposition|
    (an elementwise bound is ill-posed where a matmul or softmax output cancels to ~0).
    `bit_stable_on_same_hardware`: repeat runs give the same bits."""

    bit_stable_on_same_hardware: bool
    max_relative: float | None = None
    max_absolute: float | None = None
    notes: str = ""


@dataclass(frozen=True)
class FusedKernel:
    """A kernel of a fused op to publish at (`FusedEntry.kernel_op`, dtypes, backend)."""

    dtypes: tuple[str, ...]
    kernel: Callable[..., None]
    backend: str = "cpu"
    precision: kernel_precision.PrecisionGuarantee = kernel_precision.UNAUDITED
    cost: CostFn | None = None
    kernel_source: str = "runtime"


@dataclass(frozen=True)
class FusedEntry:
    """One fused op: its pattern over primitives, its builder, precision and revision.
    `cost` is the declared cost; None means "price me from my decomposition". `kernel_op` is
    the binding-table op its kernels are bound under (the built op's KERNEL_OP)."""

    name: str
    pattern: Pattern
    build: Build
    precision: DecompositionBound
    revision: int = UNTRACKED
    cost: Callable[[FusedMatch], CostEstimate] | None = None
    kernel_op: str = ""


def entry_cost(entry: FusedEntry, match: FusedMatch) -> CostEstimate:
    """Declared cost, else composed from the decomposition: the matched primitives' FLOPs, the
    boundary I/O (inputs + output) as bytes, one launch (concepts doc section 7)."""
    if entry.cost is not None:
        return entry.cost(match)
    parts = []
    for op in match.ops:
        if not hasattr(op, "KERNEL_OP"):
            continue  # constants are free
        shapes = [shape_of(v.type) for v in (*op.operands, *op.results)]
        dtypes = [dtype_name(v.type) for v in (*op.operands, *op.results)]
        parts.append((op.KERNEL_OP, shapes, dtypes, op.kernel_params()))  # pyright: ignore
    bound = [*match.inputs, match.root.results[0]]
    return fused_cost(
        parts, io_bytes([shape_of(v.type) for v in bound], [dtype_name(v.type) for v in bound])
    )


def _bound(table: Any, op: str, k: FusedKernel) -> bool:
    """This exact kernel function is bound at its key of `table`."""
    return any(e.kernel is k.kernel for e in table.lookup_alternatives(op, k.dtypes, k.backend))


def _publish(
    op: str, kernels: Sequence[FusedKernel], revision: int, bind: Callable[[Any], None] | None
) -> Callable[[Any], None]:
    """A binding-table writer registering each kernel not bound yet (checked again under the
    table's writer lock, so concurrent adoptions register it once), then running `bind`."""

    def write(table: Any) -> None:
        for k in kernels:
            if not _bound(table, op, k):
                table.register(
                    op,
                    k.dtypes,
                    k.backend,
                    k.kernel,
                    precision=k.precision,
                    cost=k.cost,
                    kernel_source=k.kernel_source,
                    revision=revision or None,
                )
        if bind is not None:
            bind(table)

    return write


class FusedKernelRegistry:
    """name -> FusedEntry; thread-safe. Registration order is the match order."""

    def __init__(self, entries: Sequence[FusedEntry] = ()):
        self._lock = threading.Lock()
        self._entries: dict[str, FusedEntry] = {}
        for e in entries:
            self.register_fused(e)

    def register_fused(self, entry: FusedEntry) -> bool:
        """Register a static entry; False if this exact entry is already registered.
        A different entry under a taken name is an error (use `adopt` to supersede)."""
        with self._lock:
            old = self._entries.get(entry.name)
            if old == entry:
                return False
            if old is not None:
                raise ValueError(f"fused op '{entry.name}' is already registered")
            self._entries[entry.name] = entry
            return True

    def adopt(
        self,
        entry: FusedEntry,
        kernels: Sequence[FusedKernel] = (),
        bind: Callable[[Any], None] | None = None,
    ) -> bool:
        """Adopt a runtime kernel: register `entry` (superseding an older revision of the same
        name) and publish its `kernels` under `entry.kernel_op` plus `bind` (any other
        binding-table writer) in one global-table write. Nothing happens when this exact entry
        is registered and every kernel is already bound. Returns whether anything changed."""
        if kernels and not entry.kernel_op:
            raise ValueError(f"fused op '{entry.name}': kernels need the entry's kernel_op")
        with self._lock:
            unbound = [k for k in kernels if not _bound(global_bindings(), entry.kernel_op, k)]
            if self._entries.get(entry.name) == entry and not unbound:
                return False
            if unbound or bind is not None:
                extend_global_bindings(_publish(entry.kernel_op, unbound, entry.revision, bind))
            self._entries[entry.name] = entry
            return True

    def entries(self) -> list[FusedEntry]:
        with self._lock:
            return list(self._entries.values())

    def lookup(self, name: str) -> FusedEntry | None:
        with self._lock:
            return self._entries.get(name)

    def __len__(self) -> int:
        return len(self.entries())


# Bounds are normwise, measured on the CPU kernels against the primitive chain in f32 with
# unit-normal inputs (tests/passes/test_fuse_patterns.py checks every pattern against them; the
# largest seen is ~1/10 of each bound): the norms and softmax reassociate one row reduction;
# rope rounds once in f64 where the chain rounds three times; attention masks with -inf and
# divides after PV; matmul + bias + act and the gated MLP run the chain's own numpy calls in
# f32 (bit-identical to it when silu is `fuel.silu`; `x * sigmoid(x)` rounds twice in the chain).
_F32_ROW = DecompositionBound(True, 1e-6, 1e-7, "row reduction reassociated")
_F32_ROPE = DecompositionBound(True, 1e-6, 1e-7, "one rounding instead of three")
_F32_ATTN = DecompositionBound(True, 1e-6, 1e-7, "-inf mask; softmax normalised after PV")
_F32_CHAIN = DecompositionBound(True, 1e-6, 0.0, "the chain's numpy calls, intermediates in f32")

BUILTIN_ENTRIES: tuple[FusedEntry, ...] = (
    FusedEntry("softmax", match_softmax, build_softmax, _F32_ROW, kernel_op="softmax"),
    FusedEntry("rms_norm", match_rms_norm, build_norm(RmsNormOp), _F32_ROW, kernel_op="rms_norm"),
    FusedEntry(
        "layer_norm", match_layer_norm, build_norm(LayerNormOp), _F32_ROW, kernel_op="layer_norm"
    ),
    FusedEntry("gated_mlp", match_gated_mlp, build_gated_mlp, _F32_CHAIN, kernel_op="gated_mlp"),
    FusedEntry(
        "matmul_bias_act",
        match_matmul_bias_act,
        build_matmul_bias_act,
        _F32_CHAIN,
        kernel_op="matmul_bias_act",
    ),
    FusedEntry("rope", match_rope, build_rope, _F32_ROPE, kernel_op="rope"),
    FusedEntry("attention", match_attention, build_attention, _F32_ATTN, kernel_op="attention"),
)
"""The fused ops fuel has as single ops, each recognised from its primitives."""

_DEFAULT: FusedKernelRegistry | None = None
_DEFAULT_LOCK = threading.Lock()


def default_fused_registry() -> FusedKernelRegistry:
    """The process-wide registry (built once with `BUILTIN_ENTRIES`); `adopt` extends it."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = FusedKernelRegistry(BUILTIN_ENTRIES)
        return _DEFAULT


__all__ = [
    "BUILTIN_ENTRIES",
    "FusedEntry",
    "FusedKernel",
    "FusedKernelRegistry",
    "FusedMatch",
    "DecompositionBound",
    "default_fused_registry",
    "entry_cost",
]
