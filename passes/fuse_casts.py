"""`fuel-fuse-casts`: elide cast round trips and let cast-fed consumers read the cast's source."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import DiagnosticException, PassFailedException

from fuel_dialect.attrs import DEVICE_ATTR, KERNEL_ATTR, DeviceAttr
from fuel_dialect.base import KernelOp
from fuel_dialect.dispatch import ALTERNATIVES_ATTR, PIN_ATTR
from fuel_dialect.dtypes import dtype_name, element_type
from fuel_dialect.ops_elementwise import CastOp
from passes.environment import environment, table_or_default
from passes.picker.plan import PlanError, PlanOptions, price_op
from passes.picker.support import PickerOptions, candidate_backends
from runtime.binding_table import KernelBindingTable
from runtime.topology import SystemTopology

# dtype -> the dtypes that hold every one of its values (cast there and back is the identity)
_HOLDS_ALL = {
    "f16": {"f32", "f64"},
    "bf16": {"f32", "f64"},
    "f32": {"f64"},
    "f64": set(),
    "i8": {"i32", "i64", "f16", "bf16", "f32", "f64"},
    "u8": {"i32", "i64", "f16", "bf16", "f32", "f64"},
    "i32": {"i64", "f64"},
    "i64": set(),
    "i1": {"f64", "f32", "f16", "bf16", "i64", "i32", "i8", "u8"},
}
_FLOATS = {"f64", "f32", "f16", "bf16"}
_EXACT_ANY_CAST = {"reshape", "transpose", "slice", "concat", "gather", "broadcast", "where"}
"""Ops that only move or select elements: they commute with every elementwise cast."""
_EXACT_ROUNDING = {"neg", "abs", "relu", "max", "min"}
"""Symmetric/monotone ops: commute with round-to-nearest between floats and with widening."""
_EXACT_WIDENING = {"eq", "ne", "lt", "le", "gt", "ge"}
"""Compares: exact only when the cast is a widening (a narrowing cast can merge values)."""


def holds_all(src: str, dst: str) -> bool:
    """Whether `dst` represents every value of `src` (so src -> dst -> src is the identity)."""
    return src == dst or dst in _HOLDS_ALL.get(src, set())


def dtype_of(v: SSAValue) -> str:
    return dtype_name(v.type)


def is_exact_rewrite(kernel_op: str, src: str, dst: str) -> bool:
    """Whether `op@dst(cast(x: src -> dst))` equals `cast(op@src(x))` bit for bit."""
    widening = holds_all(src, dst)
    if kernel_op in _EXACT_ANY_CAST:
        return True
    if kernel_op in _EXACT_ROUNDING:
        return widening or (src in _FLOATS and dst in _FLOATS)
    return kernel_op in _EXACT_WIDENING and widening


def round_trip_source(cast: CastOp, elide_all: bool) -> SSAValue | None:
    """The farthest value up the cast chain feeding `cast` that `cast`'s result may replace:
    same type, and every intermediate dtype holds all its values (or `elide_all`)."""
    want, found, seen = dtype_of(cast.result), None, []
    v = cast.input
    while isinstance(v.owner, CastOp):
        seen.append(dtype_of(v))
        v = v.owner.input
        if v.type == cast.result.type and (elide_all or all(holds_all(want, d) for d in seen)):
            found = v
    if found is None and cast.input.type == cast.result.type:
        found = cast.input  # an identity cast
    return found


def erase_dead_casts(rewriter: PatternRewriter, values: Iterable[SSAValue]) -> None:
    """Erase the casts producing `values` that lost every user, walking up their chains."""
    stack = list(values)
    while stack:
        v = stack.pop()
        if isinstance(v.owner, CastOp) and not v.uses and v.owner.parent is not None:
            stack.append(v.owner.input)
            rewriter.erase(v.owner)


@dataclass(frozen=True)
class _Context:
    """What the patterns need: planning options, the binding table, the elision settings."""

    plan: PlanOptions
    table: KernelBindingTable
    topology: SystemTopology
    semantic: bool
    elide_all: bool

    def cost(self, ops: Iterable[Operation], devices: set[str]) -> float:
        """The cheapest candidate device's summed best time of `ops` (inf if unpriceable)."""
        try:
            prices = [price_op(op, self.plan) for op in ops]
        except PlanError:
            return math.inf
        return min((sum(p.get(d, math.inf) for p in prices) for d in devices), default=math.inf)


class ElideCastRoundTrip(RewritePattern):
    """`cast(cast(x: A -> B) -> A)` (or a longer chain) becomes `x` when exact."""

    def __init__(self, ctx: _Context):
        self.ctx = ctx

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if not isinstance(op, CastOp):
            return
        src = round_trip_source(op, self.ctx.elide_all)
        if src is None:
            return
        rewriter.replace_all_uses_with(op.result, src)
        erase_dead_casts(rewriter, [op.result])


class ReadCastSource(RewritePattern):
    """`op@B(cast(x: A -> B))` becomes `cast(op@A(x): A -> B)` when the op has a kernel at A on
    its candidate backends, the rewrite is exact (or semantic change is allowed), and it is not
    more expensive."""

    def __init__(self, ctx: _Context):
        self.ctx = ctx

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if not isinstance(op, KernelOp) or isinstance(op, CastOp) or len(op.results) != 1:
            return
        fed = [v for v in op.operands if isinstance(v.owner, CastOp)]
        for b in dict.fromkeys(dtype_of(v) for v in fed):  # e.g. where: cond and data casts
            a = dtype_of(next(v for v in fed if dtype_of(v) == b).owner.input)
            # every operand of dtype B must come from a cast out of A; others keep their dtype
            if any(
                dtype_of(v) == b and (v not in fed or dtype_of(v.owner.input) != a)
                for v in op.operands
            ):
                continue
            if not (self.ctx.semantic or is_exact_rewrite(op.KERNEL_OP, a, b)):
                continue
            new = self.retyped(op, a, b)
            if new is not None and self.worth_it(op, new, a, b):
                return self.commit(op, new, b, rewriter)
            if new is not None:
                new.erase()

    def retyped(self, op: Operation, a: str, b: str) -> Operation | None:
        """A detached copy of `op` reading the casts' sources, results of dtype B at A; None
        when no candidate backend has a kernel for it or it does not verify."""
        operands = [v.owner.input if dtype_of(v) == b else v for v in op.operands]
        results = [_with_dtype(r.type, a) if dtype_of(r) == b else r.type for r in op.results]
        new = type(op).create(
            operands=operands,
            result_types=results,
            properties=dict(op.properties),
            attributes=dict(op.attributes),
        )
        assert isinstance(new, KernelOp)
        for stale in (KERNEL_ATTR, ALTERNATIVES_ATTR):  # decisions made for the old dtypes
            new.attributes.pop(stale, None)
        backends = candidate_backends(op, self.ctx.topology)
        if not any(
            self.ctx.table.backend_supports(new.KERNEL_OP, new.kernel_dtypes(), be)
            for be in backends
        ):
            new.erase()
            return None
        try:
            new.verify()
        except DiagnosticException:
            new.erase()
            return None
        return new

    def worth_it(self, op: Operation, new: Operation, a: str, b: str) -> bool:
        """Price both forms on the op's candidate devices: before = op@B + the casts that die;
        after = op@A + the back-cast, unless every user is a cast B -> A that round-trip
        elision will remove anyway (then those casts count as dying too)."""
        devices = self._devices(op)
        dying = [
            v.owner
            for v in set(op.operands)
            if isinstance(v.owner, CastOp) and all(u.operation is op for u in v.uses)
        ]
        after: list[Operation] = [new]
        back = None
        if dtype_of(op.results[0]) == b:
            users = [u.operation for u in op.results[0].uses]
            if users and all(self._elided_user(u, a) for u in users):
                dying += users
            elif users:
                back = CastOp.create(operands=[new.results[0]], result_types=[op.results[0].type])
                after.append(back)
        try:
            return self.ctx.cost(after, devices) <= self.ctx.cost([op, *dying], devices)
        finally:
            if back is not None:
                back.erase()

    def _elided_user(self, user: Operation, a: str) -> bool:
        """A cast B -> A that the round-trip rule removes once the op produces A."""
        if not isinstance(user, CastOp) or dtype_of(user.result) != a:
            return False
        return self.ctx.elide_all or holds_all(a, dtype_of(user.input))

    def _devices(self, op: Operation) -> set[str]:
        for name in (DEVICE_ATTR, PIN_ATTR):
            attr = op.attributes.get(name)
            if isinstance(attr, DeviceAttr):
                return {attr.data}
        return {d.name for d in self.ctx.topology.devices}

    def commit(self, op: Operation, new: Operation, b: str, rw: PatternRewriter) -> None:
        fed = [v for v in op.operands if isinstance(v.owner, CastOp)]
        rw.insert(new, InsertPoint.before(op))
        result = new.results[0]
        if dtype_of(op.results[0]) == b and op.results[0].uses:
            pin = {k: v for k, v in op.attributes.items() if k in (PIN_ATTR, DEVICE_ATTR)}
            back = CastOp.create(
                operands=[result], result_types=[op.results[0].type], attributes=pin
            )
            rw.insert(back, InsertPoint.after(new))
            result = back.results[0]
        rw.replace(op, [], [result])
        erase_dead_casts(rw, fed)


def _with_dtype(t: object, dtype: str) -> TensorType:
    assert isinstance(t, TensorType)
    return TensorType(element_type(dtype), t.get_shape())


def fuse_casts_patterns(ctx: _Context) -> list[RewritePattern]:
    return [ElideCastRoundTrip(ctx), ReadCastSource(ctx)]


def fuse_casts(
    module: ModuleOp, plan: PlanOptions, semantic: bool = False, elide_all: bool = False
) -> None:
    """Run the pass's rewrites on `module` in-process with explicit `PlanOptions` (its
    `table`, when set, replaces the process-wide binding table for coverage and prices)."""
    table = table_or_default(plan.table)
    topo = plan.topology or SystemTopology.cpu_only()
    ctx = _Context(plan, table, topo, semantic, elide_all)
    applier = GreedyRewritePatternApplier(fuse_casts_patterns(ctx), dce_enabled=False)
    PatternRewriteWalker(applier, apply_recursively=True).rewrite_module(module)


@dataclass(frozen=True)
class FuseCastsPass(ModulePass, PickerOptions):
    """Cast elision, judged against the binding table of each node's own candidate backends.

    Rewrites, to a fixpoint:
    1. round trips `cast(cast(x: A -> B) -> A)` (and longer chains back to A) become `x` when
       every intermediate dtype holds all of A's values (f16->f32->f16, i8->i32->i8,
       i1->any->i1; never f32->f16->f32 nor float->int->float); any round trip under
       `elide_round_trips="all"` (semantics-changing: drops the intermediate rounding);
    2. a consumer `op@B(cast(x: A -> B))` whose operands of dtype B all come from casts out of
       A becomes `cast(op@A(x): A -> B)` (the back-cast only where users remain) when a kernel
       for `op` at A exists on a backend of a device the op may run on (its stamp or pin, else
       every device of the topology), the rewrite is exact (movement ops and `where` always;
       neg/abs/relu/max/min between floats or on a widening cast; compares on a widening cast)
       or `allow_semantic_change` is set, and Layer 1/Judge prices say the rewritten form
       (op@A + back-cast) costs no more than the original (op@B + the casts that die).

    Pre: verified fuel IR. Post: no rewrite above applies (running twice equals once); types
    at function boundaries unchanged. Surgical (`dce_enabled=False`): only casts that lost
    every user through these rewrites are erased.
    """

    name = "fuel-fuse-casts"

    allow_semantic_change: bool = False
    """Allow consumer rewrites that change rounding (e.g. exp@f32 instead of exp@f16)."""
    elide_round_trips: str = "exact"
    """`exact`: only lossless round trips; `all`: every round trip (semantics-changing)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.elide_round_trips not in ("exact", "all"):
            raise PassFailedException(
                f"elide_round_trips must be 'exact' or 'all', got '{self.elide_round_trips}'"
            )
        fuse_casts(
            op,
            self.plan_options(environment(ctx)),
            self.allow_semantic_change,
            self.elide_round_trips == "all",
        )
