"""Fused-kernel registry: fused ops with a pattern over primitives (concepts doc sections 8, 12).

A `FusedEntry` names a fused op fuel has as one op (`fuel.softmax`, `fuel.rms_norm`, ...), a
**pattern** that recognises its decomposition in primitive IR rooted at one op, and a **build**
that emits the fused op for a match. `fuel-fuse-patterns` offers each match as a variant arm.

`register_fused` is for entries known at import time; `adopt` is for kernels registered at run
time: idempotent (the same entry twice is one registration) and serialized by one lock, with an
optional binding-table write published atomically in the same critical section.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, f64, i64
from xdsl.ir import Operation, OpResult, SSAValue

from fuel_dialect.dtypes import dtype_name, shape_of
from fuel_dialect.ops_elementwise import AddOp, DivOp, ExpOp, MulOp, RsqrtOp, SubOp
from fuel_dialect.ops_movement import ConstantOp
from fuel_dialect.ops_nn import (
    LayerNormOp,
    ReduceMaxOp,
    ReduceMeanOp,
    ReduceOp,
    ReduceSumOp,
    RmsNormOp,
    SoftmaxOp,
)
from runtime.cost import CostEstimate, fused_cost, io_bytes

UNTRACKED = 0
"""`KernelRevisionHash` of a kernel whose build is not tracked."""


@dataclass(frozen=True)
class PrecisionGuarantee:
    """What a fused kernel promises against its decomposition."""

    bit_stable_on_same_hardware: bool
    max_relative: float | None = None
    max_absolute: float | None = None
    notes: str = ""


@dataclass(frozen=True)
class FusedMatch:
    """A pattern hit: `ops` (program order, ending at `root`) compute `root`'s result from
    `inputs`; `params` are the fused op's properties read off the match (axis, eps)."""

    root: Operation
    ops: tuple[Operation, ...]
    inputs: tuple[SSAValue, ...]
    params: dict[str, Any] = field(default_factory=dict)


Pattern = Callable[[Operation], FusedMatch | None]
Build = Callable[[FusedMatch], Operation]


@dataclass(frozen=True)
class FusedEntry:
    """One fused op: its pattern over primitives, its builder, precision and revision.
    `cost` is the declared cost; None means "price me from my decomposition"."""

    name: str
    pattern: Pattern
    build: Build
    precision: PrecisionGuarantee
    revision: int = UNTRACKED
    cost: Callable[[FusedMatch], CostEstimate] | None = None


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
    return fused_cost(parts, io_bytes([shape_of(v.type) for v in bound],
                                      [dtype_name(v.type) for v in bound]))  # fmt: skip


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

    def adopt(self, entry: FusedEntry,
              bind: Callable[[Any], None] | None = None) -> bool:  # fmt: skip
        """Adopt a runtime kernel: register `entry` (superseding an older revision of the same
        name) and publish `bind` (a binding-table writer) atomically, unless this exact entry
        is already here. Returns whether anything was registered."""
        from runtime.binding_table import extend_global_bindings

        with self._lock:
            if self._entries.get(entry.name) == entry:
                return False
            if bind is not None:
                extend_global_bindings(bind)
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


# -- matching helpers ------------------------------------------------------------------------


def producer(v: SSAValue, cls: type[Operation]) -> Any:
    """The op of class `cls` defining `v`, or None."""
    return v.owner if isinstance(v, OpResult) and isinstance(v.owner, cls) else None


def either(op: Any, test: Callable[[SSAValue, SSAValue], Any]) -> Any:
    """`test(lhs, rhs)` or, if that fails, `test(rhs, lhs)` (commutative binary ops)."""
    if op is None:
        return None
    return test(op.lhs, op.rhs) or test(op.rhs, op.lhs)


def row_reduce(v: SSAValue, cls: type[ReduceOp]) -> Any:
    """A keepdim reduction of class `cls` over exactly one axis defining `v`, or None."""
    op = producer(v, cls)
    return op if op is not None and op.keepdim is not None and len(op.norm_axes()) == 1 else None


def scalar_constant(v: SSAValue) -> float | None:
    """The value of a one-element float `fuel.constant`, or None."""
    op = producer(v, ConstantOp)
    if op is None or len(vals := op.value.get_values()) != 1:
        return None
    return float(str(np.float32(vals[0])))  # the shortest decimal of the f32 kernels use


def last_axis(red: ReduceOp) -> bool:
    return red.norm_axes() == (len(shape_of(red.input.type)) - 1,)


def weight_of(w: SSAValue, x: SSAValue) -> bool:
    """`w` is a per-channel vector over `x`'s last dim (what the fused norms take)."""
    s = shape_of(x.type)
    return bool(s) and shape_of(w.type) == (s[-1],)


# -- patterns --------------------------------------------------------------------------------


def match_softmax(root: Operation) -> FusedMatch | None:
    """div(e, reduce_sum(e)) with e = exp(sub(x, reduce_max(x))), all over one keepdim axis."""
    if not isinstance(root, DivOp) or (s := row_reduce(root.rhs, ReduceSumOp)) is None:
        return None
    e = producer(root.lhs, ExpOp)
    if e is None or s.input != root.lhs or (d := producer(e.input, SubOp)) is None:
        return None
    m = row_reduce(d.rhs, ReduceMaxOp)
    if m is None or m.input != d.lhs or m.norm_axes() != s.norm_axes():
        return None
    if root.result.type != d.lhs.type:
        return None
    return FusedMatch(root, (m, d, e, s, root), (d.lhs,), {"axis": m.norm_axes()[0]})


def _rms_scale(v: SSAValue) -> tuple[Any, ...] | None:
    """rsqrt(mean(x*x, -1, keepdim) + eps) -> (ops, x, eps)."""
    r = producer(v, RsqrtOp)
    a = producer(r.input, AddOp) if r is not None else None

    def split(mean_v: SSAValue, eps_v: SSAValue) -> tuple[Any, ...] | None:
        mean, eps = row_reduce(mean_v, ReduceMeanOp), scalar_constant(eps_v)
        sq = producer(mean.input, MulOp) if mean is not None else None
        if sq is None or sq.lhs != sq.rhs or not last_axis(mean) or eps is None or eps <= 0:
            return None
        return (sq, mean, a, r), sq.lhs, eps

    return either(a, split)


def match_rms_norm(root: Operation) -> FusedMatch | None:
    """mul(mul(x, rsqrt(reduce_mean(x*x, -1, keepdim) + eps)), w), any operand orders."""
    if not isinstance(root, MulOp):
        return None

    def outer(n_v: SSAValue, w: SSAValue) -> FusedMatch | None:
        n = producer(n_v, MulOp)

        def inner(x: SSAValue, scale_v: SSAValue) -> FusedMatch | None:
            found = _rms_scale(scale_v)
            if found is None or found[1] != x or not weight_of(w, x):
                return None
            if root.results[0].type != x.type:
                return None
            return FusedMatch(root, (*found[0], n, root), (x, w), {"eps": found[2]})

        return either(n, inner)

    return either(root, outer)


def match_layer_norm(root: Operation) -> FusedMatch | None:
    """add(mul(mul(c, rsqrt(mean(c*c) + eps)), w), b) with c = x - mean(x), over the last dim."""
    if not isinstance(root, AddOp):
        return None

    def outer(scaled: SSAValue, b: SSAValue) -> FusedMatch | None:
        mw = producer(scaled, MulOp)

        def weighted(n_v: SSAValue, w: SSAValue) -> FusedMatch | None:
            n = producer(n_v, MulOp)

            def inner(c: SSAValue, scale_v: SSAValue) -> FusedMatch | None:
                found = _rms_scale(scale_v)
                sub = producer(c, SubOp)
                if found is None or found[1] != c or sub is None:
                    return None
                mu = row_reduce(sub.rhs, ReduceMeanOp)
                x = sub.lhs
                if mu is None or mu.input != x or not last_axis(mu):
                    return None
                if not (weight_of(w, x) and weight_of(b, x)) or root.results[0].type != x.type:
                    return None
                ops = (mu, sub, *found[0], n, mw, root)
                return FusedMatch(root, ops, (x, w, b), {"eps": found[2]})

            return either(n, inner)

        return either(mw, weighted)

    return either(root, outer)


# -- builders --------------------------------------------------------------------------------


def build_softmax(m: FusedMatch) -> Operation:
    return SoftmaxOp.create(operands=list(m.inputs), result_types=[m.root.results[0].type],
                            properties={"axis": IntegerAttr(m.params["axis"], i64)})  # fmt: skip


def _build_norm(cls: type[Operation]) -> Build:
    def build(m: FusedMatch) -> Operation:
        return cls.create(operands=list(m.inputs), result_types=[m.root.results[0].type],
                          properties={"eps": FloatAttr(m.params["eps"], f64)})  # fmt: skip

    return build


# Tolerances are the CPU kernels' measured agreement with the primitive chain in f32 (one
# reassociated row reduction); a fused kernel is never bit-identical to its decomposition.
_F32_ROW = PrecisionGuarantee(
    True, max_relative=1e-5, max_absolute=1e-6, notes="row reduction reassociated"
)

BUILTIN_ENTRIES: tuple[FusedEntry, ...] = (
    FusedEntry("softmax", match_softmax, build_softmax, _F32_ROW),
    FusedEntry("rms_norm", match_rms_norm, _build_norm(RmsNormOp), _F32_ROW),
    FusedEntry("layer_norm", match_layer_norm, _build_norm(LayerNormOp), _F32_ROW),
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
