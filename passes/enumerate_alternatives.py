"""`fuel-enumerate-alternatives`: list every candidate kernel of every decision point."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from fuel_dialect.kernel_body import program_ops
from passes.environment import environment, table_or_default
from passes.picker.plan import is_decision_point
from passes.picker.ranker import enumerate_candidates
from passes.picker.support import PickerOptions, candidate_attr, clear_decisions, write_alternatives


@dataclass(frozen=True)
class EnumerateAlternativesPass(ModulePass, PickerOptions):
    """Attach `fuel.alternatives` to each kernel-bearing op: one `#fuel.candidate` per
    registered sibling kernel at (op, dtypes, backend) for every (backend, device) of the
    topology, in enumeration order, unpriced (`verdict "enumerated"`).

    Pre: verified fuel IR. Post: no other change; previous picker attributes are cleared.
    """

    name = "fuel-enumerate-alternatives"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        opts = self.plan_options(environment(ctx))
        table = table_or_default(opts.table)
        topo = opts.topology
        assert topo is not None
        clear_decisions(op)
        for node in program_ops(op):
            if is_decision_point(node):
                placements = [(b, d.name) for d in topo.devices for b in d.backends]
                cands = enumerate_candidates(
                    node.KERNEL_OP,
                    node.kernel_dtypes(),
                    placements,
                    table,  # type: ignore[attr-defined]
                )
                write_alternatives(node, [candidate_attr(c, "enumerated") for c in cands])
