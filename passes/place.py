"""`fuel-place`: choose one device per decision point with the placement DP."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from passes.environment import environment
from passes.picker.support import (
    PickerOptions,
    clear_decisions,
    decisions,
    plan_module,
    stamp_device,
    verdicts,
    write_alternatives,
)


@dataclass(frozen=True)
class PlacePass(ModulePass, PickerOptions):
    """Stamp `fuel.device` on every decision point as chosen by the carry-forward placement
    DP (transfers priced by the topology, outputs priced back to the default device), and
    rewrite `fuel.alternatives` with inbound transfer costs and verdicts (`winner`, `kept`,
    `pruned:frontier`, `other-device`, `rejected:<filter>`). `fuel.pin` ops never move.

    Pre: verified fuel IR. Post: `fuel.device` + `fuel.alternatives` on every kernel op.
    """

    name = "fuel-place"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        plans = plan_module(op, self, environment(ctx))
        clear_decisions(op)
        for node, d in decisions(plans):
            stamp_device(node, d.device)
            write_alternatives(node, verdicts(d))
