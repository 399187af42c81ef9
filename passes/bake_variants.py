"""`fuel-bake-variants`: collapse each same-device variant branch to its cheapest arm."""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from fuel_dialect.branch import BranchOp, collapse_branch, has_dynamic_gate
from passes.environment import environment
from passes.picker.plan import PlanError, PlanOptions, is_decision_point, price_op
from passes.picker.support import PickerOptions, placed_device


def op_device(op: Operation, default: str) -> str:
    """Where an op runs: the picker's stamp, else the user's pin, else the default device."""
    return placed_device(op) or default


def arm_cost(branch: BranchOp, index: int, device: str, options: PlanOptions) -> float:
    """Sum over the arm's decision points of their best time on `device`; inf if any op has
    no admissible kernel there (an unknown cost can never win)."""
    total = 0.0
    for op in branch.arms[index].walk():
        if not is_decision_point(op):
            continue
        try:
            total += price_op(op, options).get(device, math.inf)
        except PlanError:
            return math.inf
    return total


def bake_choice(branch: BranchOp, options: PlanOptions) -> int | None:
    """The arm to keep, or None when the branch is not a same-device variant branch."""
    if branch.kind.data != "variant" or has_dynamic_gate(branch):
        return None  # a gate testing a `?` dim: the run (or the shape's specialisation) picks
    default = options.default_device
    devices = {
        op_device(op, default) for arm in branch.arms for op in arm.walk() if is_decision_point(op)
    }
    if len(devices) > 1:
        return None  # arms on different devices: a placement choice, not a variant
    device = devices.pop() if devices else default
    costs = [arm_cost(branch, i, device, options) for i in range(len(branch.arms))]
    best = min(costs[1:], default=math.inf)
    if not best < costs[0] or costs.count(best) > 1:
        return 0  # no arm strictly cheaper than the reference, or a tie: keep arm 0
    return costs.index(best)


@dataclass(frozen=True)
class BakeVariantsPass(ModulePass, PickerOptions):
    """For every `fuel.branch variant` whose arms all run on one device, price each arm (the
    Judge's measured figures first, Layer 1 otherwise, summed over the arm's interior) and
    collapse the branch to the unique arm strictly cheaper than arm 0 — or to arm 0 on ties
    and unknown costs. Placement branches, mixed-device variant branches and branches whose
    gates test a `?` dim (`fuel-emit-dim-branches`: a run's size decides) are untouched.

    Pre: verified fuel IR. Post: no same-device variant branch remains but those with a gate
    on a `?` dim. Surgical: no DCE.
    """

    name = "fuel-bake-variants"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        options = self.plan_options(environment(ctx))
        branches = [b for b in op.walk() if isinstance(b, BranchOp)]
        for branch in reversed(branches):  # inner branches first
            choice = bake_choice(branch, options)
            if choice is not None:
                collapse_branch(branch, choice)
