"""`fuel-fork-placements`: offer the best other-device runner-up as a placement arm."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from fuel_dialect.branch import BranchOp, YieldOp
from fuel_dialect.dispatch import CopyOp
from passes.environment import environment
from passes.picker.plan import ExecutionPlan
from passes.picker.ranker import Candidate
from passes.picker.support import PickerOptions, plan_module, stamp_device, stamp_kernel


def runners_up(plan: ExecutionPlan, op: Operation, limit: int) -> list[Candidate]:
    """The best `limit` candidates of `op` on devices other than its winner's, ranked."""
    d = plan.decisions[op]
    return [c for c in d.considered if c.device != d.device][:limit]


def forkable(op: Operation) -> bool:
    """One result with exactly one consumer (the reconverge point); a fan-out is not a fork."""
    return len(op.results) == 1 and op.results[0].has_one_use()


def stage_arm(op: Operation, device: str, plan: ExecutionPlan) -> list[Operation]:
    """`op` preceded by a `fuel.copy` to `device` of each input resident elsewhere; the
    copies live in the arm, so only the route that needs them pays for them."""
    ops: list[Operation] = []
    for i, v in enumerate(op.operands):
        src = plan.residency.get(v)
        if src is not None and src != device:
            copy = CopyOp(v, device)
            ops.append(copy)
            op.operands[i] = copy.result
    return [*ops, op]


def fork_op(op: Operation, plan: ExecutionPlan, alternates: list[Candidate]) -> BranchOp:
    """Wrap `op` in a placement branch: arm 0 the op itself (stamped with its winner), one arm
    per alternate candidate (a stamped clone, copied back to the winner's device)."""
    d = plan.decisions[op]
    result = op.results[0]
    home = plan.residency.get(result) or d.device
    arms = []
    for c in alternates:
        clone = op.clone()
        stamp_device(clone, c.device)
        stamp_kernel(clone, c)
        ops = stage_arm(clone, c.device, plan)
        out = clone.results[0]
        if c.device != home:  # the branch result is one tensor, resident where arm 0 puts it
            back = CopyOp(out, home)
            ops.append(back)
            out = back.result
        arms.append(Region(Block([*ops, YieldOp(out)])))
    arm0 = Block()
    branch = BranchOp("placement", [Region(arm0), *arms], [result.type])
    Rewriter.insert_op(branch, InsertPoint.before(op))
    result.replace_all_uses_with(branch.outs[0])
    op.detach()
    stamp_device(op, d.device)
    stamp_kernel(op, d.winner)
    arm0.add_ops([*stage_arm(op, d.device, plan), YieldOp(result)])
    plan.residency[branch.outs[0]] = home
    plan.order[plan.order.index(op)] = branch
    return branch


def fork_placements(plan: ExecutionPlan, limit: int = 1) -> list[BranchOp]:
    """Fork every single-consumer decision point that has a runner-up on another device.
    Updates `plan` (order, residency) so later stages see the branches."""
    made = []
    for op in list(plan.decisions):
        if op.parent_op() is None or isinstance(op.parent_op(), BranchOp) or not forkable(op):
            continue
        alternates = runners_up(plan, op, limit)
        if alternates:
            made.append(fork_op(op, plan, alternates))
    return made


@dataclass(frozen=True)
class ForkPlacementsPass(ModulePass, PickerOptions):
    """For every top-level decision point with exactly one consumer whose ranked candidates
    include a runner-up on another device, emit a `fuel.branch placement`: arm 0 is the op as
    planned (stamped with its winner), arms 1.. are clones stamped (`fuel.device`,
    `fuel.kernel`) with the best `runners_up` other-device candidates, in rank order. Each arm
    copies its inputs to its device and its result back to arm 0's device, so every route
    yields the same tensor in the same place. The branch is left for the runtime picker.

    Pre: verified fuel IR. Post: a CPU-only topology leaves the module unchanged (no runner-up
    lives elsewhere). Ops already inside a branch are skipped (idempotent). Surgical: no DCE.
    """

    name = "fuel-fork-placements"

    runners_up: int = 1
    """How many other-device candidates become arms (ranked; 2+ may repeat a route, which
    `fuel-converge-frontier` merges)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for plan in plan_module(op, self, environment(ctx)):
            fork_placements(plan, self.runners_up)
