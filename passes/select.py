"""`fuel-select`: commit each decision point's winner and insert cross-device copies."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from fuel_dialect.dispatch import CopyOp
from passes.environment import environment
from passes.picker.plan import ExecutionPlan
from passes.picker.support import (
    PickerOptions,
    clear_decisions,
    decisions,
    plan_module,
    stamp_device,
    stamp_kernel,
    verdicts,
    write_alternatives,
)
from runtime.topology import SystemTopology, TransferPath


@dataclass(frozen=True)
class SelectPass(ModulePass, PickerOptions):
    """Place (as `fuel-place`) and commit: stamp the winner as `fuel.kernel` on every decision
    point, and insert `fuel.copy` wherever a value crosses devices (two hops via the host
    when the topology's path is host staging). Graph outputs are copied back to the default
    device. The executor then runs exactly the stamped kernels.

    Pre: verified fuel IR. Post: every kernel op stamped; every edge single-device.
    """

    name = "fuel-select"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        opts = self.plan_options(environment(ctx))
        plans = plan_module(op, self, environment(ctx))
        clear_decisions(op)
        for node, d in decisions(plans):
            stamp_device(node, d.device)
            stamp_kernel(node, d.winner)
            write_alternatives(node, verdicts(d))
        assert opts.topology is not None
        for plan in plans:
            insert_copies(plan, opts.topology, self.default_device)


def insert_copies(plan: ExecutionPlan, topo: SystemTopology, default: str) -> None:
    """One copy chain per (value, destination device), reused by every consumer there."""
    made: dict[tuple[SSAValue, str], SSAValue] = {}

    def moved(v: SSAValue, src: str, dst: str, before: Operation) -> SSAValue:
        if (v, dst) in made:
            return made[(v, dst)]
        hops = [dst]
        if topo.transfer_path(src, dst) is TransferPath.HOST_STAGING and "cpu" not in (src, dst):
            hops = ["cpu", dst]
        cur = v
        for hop in hops:
            copy = CopyOp(cur, hop)
            Rewriter.insert_op(copy, InsertPoint.before(before))
            cur = copy.result
        made[(v, dst)] = cur
        return cur

    for node, d in plan.decisions.items():
        for i, v in enumerate(node.operands):
            src = plan.residency.get(v)
            if src is not None and src != d.device:
                node.operands[i] = moved(v, src, d.device, node)
    ret = plan.order[-1]
    assert isinstance(ret, func.ReturnOp)
    for i, v in enumerate(ret.operands):
        src = plan.residency.get(v)
        if src is not None and src != default:
            ret.operands[i] = moved(v, src, default, ret)
