"""In-place updates for the executor: a `fuel.index_copy` writes its rows into `dest`'s buffer.

`InPlacePlanner` is a mixin of the executor's compiler (`runtime.executor._Compiler`), like
`runtime.views.ViewPlanner`. An index_copy runs in place when nothing reads `dest` (or a view of
it) after the op, and `dest`'s buffer may be written:

* a planned host buffer that no other value shares (its storage's only reference): the result
  takes over the buffer;
* a donated graph input (`fuel.donate`) or the in-place result of one: the result is the
  caller's array itself, bound per run like the input, and a returned one is handed back
  uncopied (`Executor.donated_outputs`).

The kernel then writes `source`'s rows only (it skips the copy when its output is its `dest`):
a decode step's KV-cache write costs one row, whatever the cache's length. Otherwise the op
runs as any kernel, into a fresh buffer (the functional semantics, a full copy of `dest`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.ir import Operation, SSAValue

from fuel_dialect.branch import BranchOp
from fuel_dialect.dispatch import CopyOp, placed_device
from fuel_dialect.ops_movement import GatherOp, IndexCopyOp, ReshapeOp, SliceOp, TransposeOp
from runtime.binding_table import BindingTableError
from runtime.compiled import ExecutionError, compile_op

HOST = "cpu"
_MAY_VIEW = (ReshapeOp, TransposeOp, SliceOp, GatherOp, CopyOp)
"""Ops whose result may be a view of their first operand (the executor makes views of these)."""


class InPlacePlanner:
    """In-place `fuel.index_copy` for `runtime.executor._Compiler` (see the module doc)."""

    table: Any
    backend: str
    static: dict
    storage: dict
    where: dict
    anywhere: set
    patches: dict
    items: list
    names: list
    arm_bytes: Any
    top_index: int
    donated: set
    in_place: list
    view_last: dict
    into: dict
    operand_list: Any

    def plan_in_place(self, ops: Sequence[Operation], last_use: dict[SSAValue, int]) -> None:
        """`view_last[v]`: the last top-level op reading `v` or a value that may view it."""
        self.view_last = dict(last_use)
        for op in reversed(ops):
            if isinstance(op, _MAY_VIEW) and op.results:
                src, r = op.operands[0], op.results[0]
                self.view_last[src] = max(self.view_last.get(src, -1), self.view_last.get(r, -1))

    def index_copy_in_place(self, op: IndexCopyOp) -> bool:
        """Schedule `op` writing into `dest`'s buffer; False: run it as any kernel."""
        dest = op.dest
        if (
            self.arm_bytes is not None  # inside a branch arm
            or placed_device(op) not in (None, HOST)
            or dest in self.where
            or dest in self.anywhere
            or op.result in self.into  # planned into a concat's block (`plan_concats`)
            or self.view_last.get(dest, -1) > self.top_index
            or any(isinstance(u.operation, BranchOp) for u in dest.uses)
        ):
            return False
        per_run = dest in self.donated
        st = self.storage.get(dest)
        if not per_run and (dest not in self.static or st is None or st.refs != 1 or st.pinned):
            return False
        try:
            node = compile_op(op, self.table, self.backend)
        except BindingTableError as e:
            raise ExecutionError(f"cannot compile '{op.name}': {e}") from None
        ins = self.operand_list(op.operands, False, HOST, op.name)
        outs: list[Any] = [None]
        if per_run:  # the caller's array: bound with the input, every run
            self.patches[op.result] = self.patches[dest]
            self.patches[dest].append((outs, 0, False))
            self.donated.add(op.result)
        else:  # the planned buffer passes to the result
            outs[0] = self.static[op.result] = self.static[dest]
            self.storage[op.result] = st
            st.refs += 1
        self.items.append((node.entry.kernel, [ins, outs, node.params]))
        self.names.append(op.name)
        self.in_place.append(op.name)
        return True
