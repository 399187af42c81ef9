"""`fuel-converge-frontier`: merge forward-identical arms, drop routes arm 0 already is."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from fuel_dialect.attrs import DEVICE_ATTR, KERNEL_ATTR
from fuel_dialect.branch import PICKED_ATTR, BranchOp, collapse_branch
from fuel_dialect.dispatch import CopyOp
from runtime.plan import is_decision_point


def arm_key(arm: Region) -> tuple:
    """The arm's forward computation with SSA names normalized: each op as (name, operands,
    result types, properties, attributes); an operand is a position inside the arm or the
    identity of an outer value, so two arms match only if they read the same values."""
    local: dict[SSAValue, int] = {}
    key = []
    for op in arm.walk():
        for region in op.regions:
            for block in region.blocks:
                local.update((a, len(local)) for a in block.args)
        refs = tuple(("in", local[v]) if v in local else ("out", id(v)) for v in op.operands)
        attrs = tuple(sorted((k, str(a)) for k, a in {**op.properties, **op.attributes}.items()))
        key.append((op.name, refs, tuple(str(r.type) for r in op.results), attrs))
        local.update((r, len(local)) for r in op.results)
    return tuple(key)


def route(arm: Region) -> tuple | None:
    """Where, with what and on which data each decision point of the arm runs: its (op,
    device, kernel, inputs) with copies looked through; None if any decision point is unstamped
    (its kernel is not yet decided, so two such arms cannot be called the same route)."""
    points = [op for op in arm.walk() if is_decision_point(op)]
    index = {r: i for i, op in enumerate(points) for r in op.results}
    out = []
    for op in points:
        if KERNEL_ATTR not in op.attributes:
            return None
        srcs = []
        for v in op.operands:
            while isinstance(v.owner, CopyOp):
                v = v.owner.input
            srcs.append(("in", index[v]) if v in index else ("out", id(v)))
        out.append((op.name, str(op.attributes.get(DEVICE_ATTR)), str(op.attributes[KERNEL_ATTR]),
                    tuple(srcs)))  # fmt: skip
    return tuple(out)


def survivors(branch: BranchOp) -> list[int]:
    """The arms to keep, arm 0 always first: a later arm goes when it is forward-identical to a
    kept arm with the same gate, or when it runs every decision point exactly as arm 0 does."""
    keys = [arm_key(a) for a in branch.arms]
    ref_route = route(branch.arms[0])
    kept = [0]
    for j in range(1, len(branch.arms)):
        twin = any(keys[j] == keys[i] and branch.gate(j) == branch.gate(i) for i in kept)
        same_route = ref_route is not None and route(branch.arms[j]) == ref_route
        if twin or keys[j] == keys[0] or same_route:
            continue
        kept.append(j)
    return kept


def rebuild(branch: BranchOp, kept: list[int]) -> None:
    """Replace `branch` by one with only the `kept` arms (a lone arm is inlined); a picked
    arm that was dropped falls back to arm 0, whose route it duplicated or shadowed."""
    if len(kept) == 1:
        collapse_branch(branch, 0)
        return
    regions = [branch.arms[i] for i in kept]
    for r in regions:
        branch.detach_region(r)
    gates = [branch.gate(i) for i in kept]
    new = BranchOp(branch.kind.data, regions, [r.type for r in branch.outs], gates,
                   list(branch.gate_operands))  # fmt: skip
    new.attributes.update(branch.attributes)
    picked = branch.attributes.get(PICKED_ATTR)
    if isinstance(picked, IntegerAttr):
        index = kept.index(picked.value.data) if picked.value.data in kept else 0
        new.attributes[PICKED_ATTR] = IntegerAttr(index, i64)
    Rewriter.insert_op(new, InsertPoint.before(branch))
    Rewriter.replace_op(branch, [], list(new.outs))


def converge(module: ModuleOp) -> int:
    """Converge every branch of `module`, inner branches first; the number of arms removed."""
    removed = 0
    for branch in reversed([b for b in module.walk() if isinstance(b, BranchOp)]):
        kept = survivors(branch)
        if len(kept) < len(branch.arms):
            removed += len(branch.arms) - len(kept)
            rebuild(branch, kept)
    return removed


@dataclass(frozen=True)
class ConvergeFrontierPass(ModulePass):
    """On every `fuel.branch`, drop arm j > 0 when it is forward-identical (same ops, same
    operands, same attributes; SSA names normalized) to a lower kept arm with the same gate, or
    when every decision point in it is stamped (`fuel.device`, `fuel.kernel`) as in arm 0 — it
    offers no route arm 0 is not already. Arm 0 is never removed, so a route always remains; a
    branch left with one arm is inlined. `fuel.picked` is renumbered.

    Pre: verified fuel IR. Post: no branch holds two equivalent routes. Idempotent; no DCE.
    """

    name = "fuel-converge-frontier"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        converge(op)
