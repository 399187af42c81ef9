"""`fuel-rank-alternatives`: filter, price and rank every decision point's candidates."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from passes.environment import environment
from passes.picker.support import (
    PickerOptions,
    candidate_attr,
    clear_decisions,
    decisions,
    plan_module,
    write_alternatives,
)


@dataclass(frozen=True)
class RankAlternativesPass(ModulePass, PickerOptions):
    """Replace each decision point's `fuel.alternatives` with its candidates on every device,
    priced (Layer 1 on the device's rates, the Judge's figure where measured) and ranked
    time-first, rejected ones last with the filter that rejected them. No placement yet:
    transfer costs are 0 here; `fuel-place` adds them.

    Pre: verified fuel IR. Post: `fuel.alternatives` on every kernel op; nothing else moves.
    """

    name = "fuel-rank-alternatives"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        plans = plan_module(op, self, environment(ctx))
        clear_decisions(op)
        for node, d in decisions(plans):
            ranked = sorted(d.considered, key=lambda c: c.compute_ns)
            attrs = [candidate_attr(c, "ranked") for c in ranked]
            attrs += [candidate_attr(c) for c in d.alternatives.rejected]
            write_alternatives(node, attrs)
