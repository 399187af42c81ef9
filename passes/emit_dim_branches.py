"""`fuel-emit-dim-branches`: where an op's best kernel changes across a dim symbol's range, a
branch whose gate tests the dim."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from fuel_dialect.attrs import DEVICE_ATTR, KERNEL_ATTR, DeviceAttr, KernelRefAttr
from fuel_dialect.base import KernelOp
from fuel_dialect.branch import PICKED_ATTR, BranchOp, YieldOp
from fuel_dialect.dims import function_dims, is_symbolic
from fuel_dialect.shapes import (
    DimExpr,
    Shape,
    ShapeError,
    evaluate,
    symbol_hints,
    symbolic_shapes,
    unknown_hints,
)
from passes.emit_decode_flash import inside_branch
from passes.environment import environment
from passes.picker.plan import PlanError, PlanOptions, is_decision_point, ranked_at
from passes.picker.ranker import Candidate
from passes.picker.support import PickerOptions

Winner = tuple[str, str, str]
"""(device, backend, kernel_source) of a ranked winner."""


def gate_dim(op: Operation, shapes: Mapping[SSAValue, Shape]) -> tuple[str, int, int] | None:
    """(symbol, operand index, axis) when every `?` dim of `op`'s values is an expression of
    one symbol that some operand has as a dim of its own (what a gate can test), else None."""
    syms: set[str] = set()
    for v in (*op.operands, *op.results):
        for d in shapes.get(v, ()):
            if isinstance(d, DimExpr):
                syms |= {a for m, _ in d.terms for a in m if isinstance(a, str)}
                if any(not isinstance(a, str) for m, _ in d.terms for a in m):
                    return None  # an opaque term (a slice, a broadcast): no plain dim to test
    if len(syms) != 1:
        return None
    (sym,) = syms
    for i, v in enumerate(op.operands):
        for axis, d in enumerate(shapes.get(v, ())):
            if d == DimExpr.sym(sym):
                return sym, i, axis
    return None


@dataclass
class DimProbe:
    """Prices one op with one symbol at any size (the others at their hints)."""

    op: Operation
    sym: str
    shapes: Mapping[SSAValue, Shape]
    hints: Mapping[str, int]
    options: PlanOptions

    def best(self, n: int) -> Candidate | None:
        env = {**self.hints, self.sym: n}
        try:
            at = {
                v: tuple(evaluate(d, env) for d in self.shapes[v])
                for v in (*self.op.operands, *self.op.results)
                if v in self.shapes
            }
            ranked = ranked_at(self.op, at, self.options)
        except (ShapeError, PlanError):
            return None
        return ranked[0] if ranked else None


def _key(c: Candidate | None) -> Winner | None:
    return None if c is None else (c.device, c.backend, c.kernel_source)


def stamped(op: Operation) -> Winner | None:
    """The (device, backend, kernel_source) the picker stamped on `op`, if it did."""
    k, d = op.attributes.get(KERNEL_ATTR), op.attributes.get(DEVICE_ATTR)
    if isinstance(k, KernelRefAttr) and isinstance(d, DeviceAttr):
        return d.data, k.backend.data, k.kernel_source.data
    return None


def crossover(probe: DimProbe, lo: int, hint: int) -> tuple[int, Candidate, Candidate] | None:
    """(t, low winner, hint winner): the largest size t < hint at which the winner at `lo` still
    wins (a binary search: winners are taken to change once), or None when one kernel wins
    at both ends (the hint's winner: the op's stamp where the picker stamped it)."""
    if hint <= lo:
        return None
    low, high = probe.best(lo), probe.best(hint)
    reference = stamped(probe.op) or _key(high)
    if low is None or high is None or _key(low) == reference:
        return None
    a, b = lo, hint
    while b - a > 1:
        mid = (a + b) // 2
        if _key(probe.best(mid)) == _key(low):
            a = mid
        else:
            b = mid
    return a, low, high


def _arm(op: Operation, c: Candidate) -> Region:
    arm_op = op.clone()
    assert isinstance(arm_op, KernelOp)
    arm_op.attributes[KERNEL_ATTR] = KernelRefAttr.get(
        arm_op.KERNEL_OP, arm_op.kernel_dtypes(), c.backend, c.kernel_source, c.entry.revision_hash
    )
    arm_op.attributes[DEVICE_ATTR] = DeviceAttr(c.device)
    return Region(Block([arm_op, YieldOp(*arm_op.results)]))


def branch_function(f: func.FuncOp, options: PlanOptions, placements: bool) -> int:
    """Wrap each op of `f` whose winner at its symbol's low end differs from its winner at the
    hint (see `EmitDimBranchesPass`); returns how many were wrapped."""
    shapes = symbolic_shapes(f)
    hints = symbol_hints(f, dict(options.hints))
    ranges = function_dims(f)
    made = 0
    for op in list(f.body.block.ops):
        if not is_decision_point(op) or inside_branch(op) or len(op.results) != 1:
            continue
        found = gate_dim(op, shapes)
        if found is None:
            continue
        sym, index, axis = found
        probe = DimProbe(op, sym, shapes, hints, options)
        cross = crossover(probe, ranges[sym][0], hints[sym])
        if cross is None:
            continue
        t, low, high = cross
        device = (stamped(op) or _key(high) or ("",))[0]
        if low.device != device and not placements:
            continue
        kind = "variant" if low.device == device else "placement"
        reference = op.clone() if stamped(op) else None
        arm0 = Region(Block([reference, YieldOp(*reference.results)])) if reference else None
        arms = [arm0 or _arm(op, high), _arm(op, low)]
        gates = ["", f"dim($0, {axis}) <= {t}"]
        branch = BranchOp(kind, arms, [r.type for r in op.results], gates, [op.operands[index]])
        branch.attributes[PICKED_ATTR] = IntegerAttr(1, i64)
        f.body.block.insert_op_before(branch, op)
        op.results[0].replace_all_uses_with(branch.results[0])
        op.detach()
        op.erase()
        made += 1
    return made


@dataclass(frozen=True)
class EmitDimBranchesPass(ModulePass, PickerOptions):
    """In a function with dim symbols, wrap each op whose best kernel at its symbol's low end
    (the range's `lo`) is not its best at the hint (`hint` option, else 64, clamped) in a
    `fuel.branch`: arm 0 the op stamped with the hint's winner (the reference), arm 1 stamped
    with the low end's, gated `dim($i, axis) <= t` on an operand holding the symbol, `t` the
    largest size at which the low end's winner still wins; `fuel.picked = 1`, so a run whose
    size passes the gate takes arm 1 (a shape's specialisation collapses the branch to the arm
    its size selects: `runtime.shape_specialize`). Arms on one device make a `variant`
    branch, which `fuel-bake-variants` leaves to the run; on two devices a `placement` one
    (`placements`).

    Precondition (static facts only): the op's `?` dims are expressions of one symbol, which
    an operand has as a plain dim; an op with two symbols, or with only opaque terms (a slice
    of a `?` dim), is left alone, as are ops inside branches (so the pass is idempotent).
    """

    name = "fuel-emit-dim-branches"

    placements: bool = True
    """Also branch where the two ends' winners run on different devices."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        options = self.plan_options(environment(ctx))
        functions = [f for f in op.ops if isinstance(f, func.FuncOp)]
        if (why := unknown_hints(functions, dict(options.hints))) is not None:
            raise PassFailedException(why)
        for f in functions:
            if is_symbolic(f):
                branch_function(f, options, self.placements)
