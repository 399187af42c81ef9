"""`fuel-fix-layouts`: check that kernels without strided support never read a strided view.

Why a check and not a rewrite: fuel has no strided producer today. Every kernel writes a fresh
C-contiguous buffer (destination passing, `runtime/executor.py` `alloc`), and the only views,
`fuel.reshape` and a host `fuel.copy`, view such buffers and so stay contiguous. A contiguize
would need a new op to express, and it would never fire. The executor already contiguizes
defensively anyway: `operand_list(..., contiguous=True)` for every kernel whose binding entry
lacks `strided_input`, which also covers caller-supplied arrays (graph inputs, weights) whose
layout the IR cannot know. So the pass checks the rule and stamps nothing. Once an op is added
that returns a strided alias (a view transpose, a strided slice), it goes in `STRIDED_VIEW_OPS`
and this pass reports every stamped kernel that would have to contiguize it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from fuel_dialect.attrs import KERNEL_ATTR, KernelRefAttr
from fuel_dialect.dispatch import CopyOp
from fuel_dialect.dtypes import dtype_name
from fuel_dialect.kernel_body import program_ops
from fuel_dialect.ops_movement import ReshapeOp
from passes.environment import environment, table_or_default
from runtime.binding_table import BindingEntry, KernelBindingTable

STRIDED_VIEW_OPS: frozenset[str] = frozenset()
"""Ops whose result may alias their input with non-C strides. None today (see module doc)."""
VIEW_OPS = (ReshapeOp, CopyOp)
"""Ops whose result views their input's bytes: as contiguous as the input."""


def strided_source(v: SSAValue) -> str | None:
    """The op that may make `v` a non-contiguous view (following views back), else None."""
    while isinstance(v.owner, VIEW_OPS):
        v = v.owner.operands[0]
    name = v.owner.name if isinstance(v.owner, Operation) else None
    return name if name in STRIDED_VIEW_OPS else None


def stamped_entry(op: Operation, table: KernelBindingTable) -> BindingEntry | None:
    """The binding entry `op`'s `fuel.kernel` names (by key and kernel_source), if any."""
    ref = op.attributes.get(KERNEL_ATTR)
    if not isinstance(ref, KernelRefAttr):
        return None
    dtypes = tuple(dtype_name(t) for t in ref.dtypes.data)
    for e in table.lookup_alternatives(ref.op.data, dtypes, ref.backend.data):
        if e.kernel_source == ref.kernel_source.data:
            return e
    return None


def layout_violations(module: ModuleOp, table: KernelBindingTable) -> list[str]:
    """One line per stamped kernel lacking `strided_input` that reads a maybe-strided value."""
    out = []
    for op in program_ops(module):
        entry = stamped_entry(op, table)
        if entry is None or entry.caps.strided_input:
            continue
        for i, v in enumerate(op.operands):
            src = strided_source(v)
            if src is not None:
                out.append(
                    f"'{op.name}' (kernel '{entry.kernel_source}', no strided_input) "
                    f"reads operand {i} from a strided view ('{src}')"
                )
    return out


def check_layouts(module: ModuleOp, table: KernelBindingTable | None = None) -> None:
    """Raise `PassFailedException` listing every violation (in-process entry point)."""
    found = layout_violations(module, table_or_default(table))
    if found:
        raise PassFailedException("layout fixups needed:\n  " + "\n  ".join(found))


@dataclass(frozen=True)
class FixLayoutsPass(ModulePass):
    """Layout fixups (`fix layouts` stage of `fuel-optimize`): a check, no rewrite.

    Fails when an op's stamped `fuel.kernel` lacks `strided_input` and one of its operands may
    be a strided view: produced by an op in `STRIDED_VIEW_OPS`, possibly through `fuel.reshape`
    / `fuel.copy`. fuel has no such producer today, so on current IR the pass always succeeds
    and changes nothing (see the module docstring for why, and for the executor's runtime
    contiguize of caller-supplied arrays). Unstamped ops and stamps not found in the binding
    table are skipped (the planner owns those).

    Pre: verified fuel IR, ideally after `fuel-select`. Post: IR unchanged.
    """

    name = "fuel-fix-layouts"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_layouts(op, environment(ctx).bindings)
