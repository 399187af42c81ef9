"""`fuel-fix-dtypes`: lossless promotion casts for kernel ops no candidate backend serves."""

from __future__ import annotations

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
from xdsl.utils.exceptions import DiagnosticException

from fuel_dialect.attrs import DEVICE_ATTR, KERNEL_ATTR
from fuel_dialect.base import KernelOp
from fuel_dialect.dispatch import ALTERNATIVES_ATTR, PIN_ATTR
from fuel_dialect.dtypes import dtype_name, element_type
from fuel_dialect.ops_elementwise import CastOp
from passes.environment import environment, table_or_default
from passes.fuse_casts import is_exact_rewrite
from passes.picker.plan import PlanOptions
from passes.picker.support import PickerOptions, candidate_backends
from runtime.binding_table import KernelBindingTable
from runtime.topology import SystemTopology

WIDENS_TO = {
    "f16": ("f32", "f64"),
    "bf16": ("f32", "f64"),
    "f32": ("f64",),
    "i8": ("i32", "i64"),
    "u8": ("i32", "i64"),
    "i32": ("i64",),
}
"""dtype -> the dtypes it promotes to losslessly, nearest first (the only promotions tried)."""
_TARGETS = ("i32", "i64", "f32", "f64")
"""Promotion targets, narrowest first: the first one some candidate backend serves wins."""


def _retype(v: SSAValue, target: str) -> str:
    d = dtype_name(v.type)
    return target if target in WIDENS_TO.get(d, ()) else d


def _with_dtype(t: object, dtype: str) -> TensorType:
    assert isinstance(t, TensorType)
    return TensorType(element_type(dtype), t.get_shape())


class PromoteUnsupportedKernel(RewritePattern):
    """`op@A(x)` with no kernel at A on the op's candidate backends becomes
    `cast(op@T(cast(x: A -> T)): T -> A)` for the narrowest lossless widening T that a candidate
    backend serves; the back-cast only where the result dtype changes and that is exact."""

    def __init__(self, table: KernelBindingTable, topology: SystemTopology):
        self.table, self.topology = table, topology

    def supported(self, kernel: str, dtypes: tuple[str, ...], backends: set[str]) -> bool:
        return any(self.table.backend_supports(kernel, dtypes, b) for b in backends)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if not isinstance(op, KernelOp) or isinstance(op, CastOp):
            return
        backends = candidate_backends(op, self.topology)
        if not backends or self.supported(op.KERNEL_OP, op.kernel_dtypes(), backends):
            return
        for target in _TARGETS:
            p = self.promoted(op, target, backends)
            if p is not None:
                return self.commit(op, p, rewriter)

    def promoted(self, op: Operation, target: str, backends: set[str]) -> _Promotion | None:
        """Detached casts and a copy of `op` whose widenable operands and results use `target`;
        None when nothing widens, the key or a needed cast is unserved, a back-cast would be
        inexact, or the copy does not verify."""
        assert isinstance(op, KernelOp)
        ins = tuple(_retype(v, target) for v in op.operands)
        outs = tuple(_retype(r, target) for r in op.results)
        if ins == tuple(dtype_name(v.type) for v in op.operands):
            return None  # no input widens to `target`
        if not self.supported(op.KERNEL_OP, (*ins, *outs), backends):
            return None
        for v, d in zip(op.operands, ins, strict=True):
            if d != dtype_name(v.type) and not self.supported(
                "cast", (dtype_name(v.type), d), backends
            ):
                return None
        for r, d in zip(op.results, outs, strict=True):
            a = dtype_name(r.type)
            if (
                a != d
                and r.uses
                and not (
                    self.supported("cast", (d, a), backends)
                    and is_exact_rewrite(op.KERNEL_OP, a, d)
                )
            ):
                return None
        return _Promotion.build(op, ins, outs)

    def commit(self, op: Operation, p: _Promotion, rw: PatternRewriter) -> None:
        place = {k: v for k, v in op.attributes.items() if k in (PIN_ATTR, DEVICE_ATTR)}
        for cast in p.casts:
            cast.attributes.update(place)
            rw.insert(cast, InsertPoint.before(op))
        rw.insert(p.op, InsertPoint.before(op))
        results: list[SSAValue] = []
        for old_r, new_r in zip(op.results, p.op.results, strict=True):
            if old_r.type == new_r.type or not old_r.uses:
                results.append(new_r)
                continue
            back = CastOp.create(
                operands=[new_r], result_types=[old_r.type], attributes=dict(place)
            )
            rw.insert(back, InsertPoint.after(p.op))
            results.append(back.result)
        rw.replace(op, [], results)


@dataclass
class _Promotion:
    """The detached input casts and promoted copy of one op, verified, not yet inserted."""

    casts: list[CastOp]
    op: Operation

    @staticmethod
    def build(op: Operation, ins: tuple[str, ...], outs: tuple[str, ...]) -> _Promotion | None:
        casts: list[CastOp] = []
        operands: list[SSAValue] = []
        for v, d in zip(op.operands, ins, strict=True):
            if d == dtype_name(v.type):
                operands.append(v)
                continue
            casts.append(CastOp.create(operands=[v], result_types=[_with_dtype(v.type, d)]))
            operands.append(casts[-1].result)
        new = type(op).create(
            operands=operands,
            result_types=[_with_dtype(r.type, d) for r, d in zip(op.results, outs, strict=True)],
            properties=dict(op.properties),
            attributes=dict(op.attributes),
        )
        for stale in (KERNEL_ATTR, ALTERNATIVES_ATTR):  # decisions made for the old dtypes
            new.attributes.pop(stale, None)
        try:
            new.verify()
        except DiagnosticException:
            new.erase()
            for c in casts:
                c.erase()
            return None
        return _Promotion(casts, new)


def fix_dtypes_patterns(table: KernelBindingTable, topo: SystemTopology) -> list[RewritePattern]:
    return [PromoteUnsupportedKernel(table, topo)]


def fix_dtypes(module: ModuleOp, plan: PlanOptions) -> None:
    """Run the pass on `module` in-process with explicit `PlanOptions` (its `table`, when set,
    replaces the process-wide binding table; its `topology`, the detected one)."""
    table = table_or_default(plan.table)
    topo = plan.topology or SystemTopology.cpu_only()
    applier = GreedyRewritePatternApplier(fix_dtypes_patterns(table, topo), dce_enabled=False)
    PatternRewriteWalker(applier, apply_recursively=False).rewrite_module(module)


@dataclass(frozen=True)
class FixDtypesPass(ModulePass, PickerOptions):
    """Dtype reconciliation (`insert_dtype_fixups`): lossless promotion casts.

    For each kernel op (not `fuel.cast`) whose key `(op, dtypes, backend)` no candidate backend
    serves (the backends of its stamped or pinned device, else of every device in the topology;
    kernels on other backends never count), try the targets i32, i64, f32, f64 in that order:
    every operand and result whose dtype widens losslessly to the target (f16/bf16 -> f32/f64,
    f32 -> f64, i8/u8 -> i32/i64, i32 -> i64) is moved to it, the others (i1 conditions,
    index operands) keep theirs. The first target with a served key, served casts and, where a
    result's dtype changed, an exact back-cast (`fuse_casts.is_exact_rewrite`: movement ops,
    neg/abs/relu/max/min, compares) wins: `fuel.cast`s are inserted on the widened inputs and
    back on the changed results (carrying the op's pin/device), and the op's stale
    `fuel.kernel`/`fuel.alternatives` are dropped. Otherwise the op is left alone (the planner
    reports it). Never applies when a candidate backend serves the native key.

    Pre: verified fuel IR. Post: function types unchanged; running twice equals once (a
    promoted op is served natively). Surgical: one sweep, `dce_enabled=False`.
    """

    name = "fuel-fix-dtypes"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fix_dtypes(op, self.plan_options(environment(ctx)))
