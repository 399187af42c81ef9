"""`fuel-converge-frontier`: merge forward-identical arms, drop routes arm 0 already is, prune
arms another arm dominates on cost."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from fuel_dialect.attrs import DEVICE_ATTR, KERNEL_ATTR, DeviceAttr, KernelRefAttr
from fuel_dialect.branch import PICKED_ATTR, BranchOp, collapse_branch
from fuel_dialect.dispatch import CopyOp
from fuel_dialect.dtypes import dtype_name
from fuel_dialect.shapes import cost_shape
from passes.environment import environment, table_or_default
from passes.picker.plan import PlanError, PlanOptions, is_decision_point, price_op
from passes.picker.support import PickerOptions
from runtime.binding_table import KernelBindingTable
from runtime.cost import CostEstimate, dtype_bytes, layer1_cost, numel


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
        out.append(
            (
                op.name,
                str(op.attributes.get(DEVICE_ATTR)),
                str(op.attributes[KERNEL_ATTR]),
                tuple(srcs),
            )
        )
    return tuple(out)


ArmCost = tuple[frozenset[str], float, float, float, float]
"""(devices, flops, bytes moved, launch overhead ns, time ns) of one arm."""


def op_estimate(op: Operation, table: KernelBindingTable | None = None) -> CostEstimate:
    """Layer-1 work of one decision point: its stamped kernel's own cost function where it is
    stamped and bound, the op family's Layer-1 formula otherwise."""
    shapes = [cost_shape(v.type) for v in (*op.operands, *op.results)]
    dtypes, params = op.kernel_dtypes(), op.kernel_params()  # pyright: ignore
    stamp = op.attributes.get(KERNEL_ATTR)
    if isinstance(stamp, KernelRefAttr):
        for e in table_or_default(table).lookup_alternatives(*stamp.key()):
            if e.kernel_source == stamp.kernel_source.data and e.cost is not None:
                return e.cost(shapes, dtypes, params)
    return layer1_cost(op.KERNEL_OP, shapes, dtypes, params)  # pyright: ignore


def arm_cost(arm: Region, options: PlanOptions) -> ArmCost | None:
    """The arm's device set, summed work components and time (each decision point's best time
    on its device: the Judge's figure where measured, else Layer 1; a copy moves its bytes).
    None (never compared) when an op cannot be priced on its device or the arm nests a branch."""
    devices: set[str] = set()
    flops = moved = overhead = time = 0.0
    for op in arm.walk():
        if isinstance(op, BranchOp):
            return None
        if isinstance(op, CopyOp):
            moved += numel(cost_shape(op.result.type)) * dtype_bytes(dtype_name(op.result.type))
            devices.add(op.target.data)
        if not is_decision_point(op):
            continue
        device = op.attributes.get(DEVICE_ATTR)
        device = device.data if isinstance(device, DeviceAttr) else options.default_device
        try:
            est, ns = op_estimate(op, options.table), price_op(op, options).get(device)
        except PlanError:
            return None
        if ns is None:
            return None
        devices.add(device)
        flops, moved = flops + est.flops, moved + est.bytes_moved
        overhead, time = overhead + est.overhead_ns, time + ns
    return frozenset(devices), flops, moved, overhead, time


def dominates(a: ArmCost | None, b: ArmCost | None) -> bool:
    """Arm `a` makes arm `b` useless: same device set, no work component of `b` smaller, and
    `b` strictly slower where it runs (so no device rate and no measurement favours `b`)."""
    if a is None or b is None or a[0] != b[0]:
        return False
    return all(x <= y for x, y in zip(a[1:4], b[1:4], strict=True)) and a[4] < b[4]


def survivors(branch: BranchOp, options: PlanOptions | None = None) -> dict[int, int]:
    """Every arm -> the arm that stands for it (itself if kept); arm 0 is always kept. A later
    arm goes when it is forward-identical to a kept arm with the same gate or runs every
    decision point exactly as arm 0 does; then any arm a kept arm dominates (`dominates`; the
    dominator ungated or under the same gate) goes, standing in for it a dominator nothing
    dominates (dominance is a strict order, so one exists)."""
    options = options if options is not None else PlanOptions()
    keys = [arm_key(a) for a in branch.arms]
    ref_route = route(branch.arms[0])
    stands: dict[int, int] = {0: 0}
    for j in range(1, len(branch.arms)):
        same = [i for i in stands if keys[j] == keys[i] and branch.gate(j) == branch.gate(i)]
        if keys[j] == keys[0] or (ref_route is not None and route(branch.arms[j]) == ref_route):
            same.append(0)
        stands[j] = (same + [j])[0]
    live = [i for i in stands if stands[i] == i]
    costs = {i: arm_cost(branch.arms[i], options) for i in live} if len(live) > 1 else {}

    def beats(i: int, j: int) -> bool:
        covers = branch.gate(i) in ("", branch.gate(j))
        return i != j and covers and dominates(costs[i], costs[j])

    pruned = {j for j in live if j > 0 and any(beats(i, j) for i in live)}
    for j in pruned:
        stands[j] = next(i for i in live if i not in pruned and beats(i, j))
    return stands


def rebuild(branch: BranchOp, stands: dict[int, int]) -> None:
    """Replace `branch` by one with only the arms standing for themselves in `stands` (a lone
    arm is inlined); a picked arm that was dropped is redirected to the arm that stands for it."""
    kept = [i for i in sorted(stands) if stands[i] == i]
    if len(kept) == 1:
        collapse_branch(branch, 0)
        return
    regions = [branch.arms[i] for i in kept]
    for r in regions:
        branch.detach_region(r)
    gates = [branch.gate(i) for i in kept]
    new = BranchOp(
        branch.kind.data, regions, [r.type for r in branch.outs], gates, list(branch.gate_operands)
    )
    new.attributes.update(branch.attributes)
    picked = branch.attributes.get(PICKED_ATTR)
    if isinstance(picked, IntegerAttr):
        new.attributes[PICKED_ATTR] = IntegerAttr(kept.index(stands.get(picked.value.data, 0)), i64)
    Rewriter.insert_op(new, InsertPoint.before(branch))
    Rewriter.replace_op(branch, [], list(new.outs))


def converge(module: ModuleOp, options: PlanOptions | None = None) -> int:
    """Converge every branch of `module`, inner branches first; the number of arms removed."""
    removed = 0
    for branch in reversed([b for b in module.walk() if isinstance(b, BranchOp)]):
        stands = survivors(branch, options)
        dropped = sum(1 for i, s in stands.items() if s != i)
        if dropped:
            removed += dropped
            rebuild(branch, stands)
    return removed


@dataclass(frozen=True)
class ConvergeFrontierPass(ModulePass, PickerOptions):
    """On every `fuel.branch`, drop arm j > 0 when it is forward-identical (same ops, same
    operands, same attributes; SSA names normalized) to a lower kept arm with the same gate,
    when every decision point in it is stamped (`fuel.device`, `fuel.kernel`) as in arm 0 — it
    offers no route arm 0 is not already — or when another kept arm (ungated, or under the same
    gate) on the same device set dominates it: no smaller FLOPs, bytes or launch overhead (the
    stamped kernels' cost functions, else Layer 1) and strictly slower on the options' topology
    (the Judge's figures where measured, else Layer 1). Arm 0 is never removed, so a route
    always remains and the reference semantics stay; a branch left with one arm is inlined.
    `fuel.picked` is redirected to the arm that stands for the dropped one.

    Pre: verified fuel IR. Post: no branch holds two equivalent routes. Idempotent; no DCE.
    """

    name = "fuel-converge-frontier"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        converge(op, self.plan_options(environment(ctx)))
