"""The executor's views: values that need no buffer and no work of their own.

`ViewPlanner` is the part of the executor's compiler (`runtime.executor._Compiler`) that turns
reshapes, transposes of size-1 dims, slices and single-index gathers into numpy views of their
input (and transposes that keep the last dim, for readers that take such strides in place),
lets a kernel that writes rows at any strides write a transpose's output directly, and lets
the producers of a concat's inputs write straight into its output (a decode step's KV
cache: the layers' updated caches become blocks of the stacked output, no copy). A view of a
planned buffer shares its storage; a view of a per-run value (a graph input) is remade each run
by a `view_item`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from fuel_dialect.base import KernelOp
from fuel_dialect.dispatch import CopyOp, placed_device
from fuel_dialect.dtypes import shape_of
from fuel_dialect.ops_cpu import CLaunchOp
from fuel_dialect.ops_movement import (
    ConcatOp,
    ConstantOp,
    GatherOp,
    ReshapeOp,
    SliceOp,
    TransposeOp,
    WeightOp,
)
from runtime.binding_table import BindingTableError, KernelCaps
from runtime.compiled import ExecutionError, compile_op
from runtime.work_items import view_item

HOST = "cpu"


class ViewPlanner:
    """Views and in-place concats for `runtime.executor._Compiler` (a mixin: it reads and
    writes the compiler's tables: `static`, `storage`, `where`, `patches`, `items`, ...)."""

    # the compiler's state this mixin works on (declared for readers and type checkers)
    table: Any
    backend: str
    static: dict
    anywhere: set
    storage: dict
    where: dict
    slots: dict
    patches: dict
    items: list
    names: list
    into: dict
    into_t: dict
    elided: set
    input_views: set
    alloc: Any
    operand_list: Any

    def select_view(self, op: GatherOp | SliceOp) -> bool:
        """Make a host `fuel.slice`, or a `fuel.gather` at one constant index, a view of its
        input (a basic numpy index: the same elements, no copy). False: run the kernel."""
        if placed_device(op) not in (None, HOST) or op.operands[0] in self.where:
            return False
        try:
            params = compile_op(op, self.table, self.backend).params
        except BindingTableError as e:
            raise ExecutionError(f"cannot compile '{op.name}': {e}") from None
        if isinstance(op, SliceOp):
            index = tuple(map(slice, params["starts"], params["limits"], params["steps"]))
            return self.reshape(op.input, op.result, index)
        ids = self.static.get(op.indices) if op.indices in self.anywhere else None
        n, axis = shape_of(op.data.type), params["axis"]
        if ids is None or ids.size != 1 or not -n[axis] <= int(ids.flat[0]) < n[axis]:
            return False  # a per-run index, several, or out of range (the kernel raises)
        i = int(ids.flat[0]) % n[axis]
        return self.reshape(op.data, op.result, (slice(None),) * axis + (slice(i, i + 1),))

    def plan_concats(self, ops: Sequence[Operation]) -> None:
        """Elide each host `fuel.concat` of `ops` whose inputs each land in a C-contiguous
        block of its output (every dim before the axis is 1) and are each (through reshapes)
        the only result of a distinct host kernel in the same block, not returned: those
        kernels write into the blocks (`into`), the concat copies nothing. The output buffer
        is allocated at the first producer; each input shares its storage, so the buffer
        lives until the last use of the output or of any input (an input may have readers
        other than the concat, e.g. a decode step's attention reading the updated cache)."""
        for op in ops:
            if not isinstance(op, ConcatOp) or placed_device(op) not in (None, HOST):
                continue
            shape, axis = shape_of(op.result.type), op.kernel_params()["axis"]
            made = [_sole_producer(v, op) for v in op.operands]
            if math.prod(shape[:axis]) != 1 or None in made or len(set(made)) != len(made):
                continue
            if any(r in self.into for r in made):  # already written into another concat
                continue
            off = 0
            for v, r in zip(op.operands, made, strict=True):
                assert r is not None
                n = shape_of(v.type)[axis]
                self.into[r] = (op.result, (slice(None),) * axis + (slice(off, off + n),))
                off += n
            self.elided.add(op)

    def plan_transposes(self, ops: Sequence[Operation]) -> None:
        """Elide each host `fuel.transpose` of `ops` that keeps the last dim and moves more
        than unit dims, whose input is the only result of a host kernel in the same block that
        writes its rows at any strides (`KernelCaps.strided_out_rows`: the attention), read by
        nothing else: that kernel writes into the transpose's output, seen through the inverse
        permutation (`into_t`); the transpose copies nothing."""
        for op in ops:
            if not isinstance(op, TransposeOp) or placed_device(op) not in (None, HOST):
                continue
            perm, v = tuple(op.perm.get_values()), op.input
            owner = v.owner
            if perm[-1] != len(perm) - 1 or moves_unit_dims(op) or op.result in self.into:
                continue
            if sum(1 for _ in v.uses) != 1 or v in self.into or v in self.into_t:
                continue
            if (
                not isinstance(owner, KernelOp)
                or isinstance(owner, _NOT_IN_PLACE)
                or owner.parent is not op.parent
                or len(owner.results) != 1
            ):
                continue
            caps = self.host_caps(owner)
            if caps is None or not caps.strided_out_rows:
                continue
            self.into_t[v] = (op.result, tuple(int(i) for i in np.argsort(perm)))
            self.elided.add(op)

    def strided_ok(self, v: SSAValue, arr: Any) -> bool:
        """Every reader of `v` (planned as the strided view `arr`) is a host kernel that walks
        any strides, or a host reshape numpy makes as a view of `arr` (a GPT-2 qkv split's
        slice to heads: [1, s, 3 h d] -> [1, s, h d] -> [1, s, h, d]) whose readers are."""
        for use in v.uses:
            user = use.operation
            if isinstance(user, ReshapeOp) and placed_device(user) in (None, HOST):
                view = _view_reshape(arr, shape_of(user.result.type))
                if view is None or not self.strided_ok(user.result, view):
                    return False
                continue
            caps = self.host_caps(user)
            if caps is None or not caps.strided_input:
                return False
        return True

    def host_caps(self, op: Operation) -> KernelCaps | None:
        """What the kernel of a host kernel op (not a reshape or a copy) can read and write,
        or None: another op, another device, or no kernel (reported when it is compiled)."""
        if not isinstance(op, KernelOp) or isinstance(op, ReshapeOp | CopyOp):
            return None
        if placed_device(op) not in (None, HOST):
            return None
        try:
            return compile_op(op, self.table, self.backend).entry.caps
        except BindingTableError:
            return None

    def transpose_view(self, op: TransposeOp) -> bool:
        """Make a host `fuel.transpose` that keeps the last dim last a view of its planned
        input when every reader reads such views in place (`KernelCaps.strided_rows`): an
        attention's q, k and v as exporters write them ([b, s, h, d] products transposed to
        [b, h, s, d]) are then read where the products left them. False: run the kernel."""
        src, perm = op.input, tuple(op.perm.get_values())
        if placed_device(op) not in (None, HOST) or src in self.where or src not in self.static:
            return False
        if perm[-1] != len(perm) - 1 or op.result in self.into:
            return False
        for use in op.result.uses:
            caps = self.host_caps(use.operation)
            if caps is None or not caps.strided_rows:
                return False
        for kind in (self.anywhere, self.input_views):
            if src in kind:
                kind.add(op.result)
        if src in self.slots:
            self.slots[op.result] = self.slots[src]
        self.static[op.result] = self.static[src].transpose(perm)
        if src in self.storage:  # share the storage: it lives while either value does
            self.storage[op.result] = st = self.storage[src]
            st.refs += 1
        return True

    def alloc_into(self, v: SSAValue) -> Any:
        """`v`'s host buffer: its block of a concat's output, or a transpose's output seen
        through the inverse permutation, if planned so, else its own."""
        if v in self.into_t:
            dst, inverse = self.into_t[v]
            if dst not in self.static:
                self.static[dst] = self.alloc(dst)
            self.storage[v] = st = self.storage[dst]  # it keeps the output alive
            st.refs += 1
            return self.static[dst].transpose(inverse)
        if v not in self.into:
            return self.alloc(v)
        dst, index = self.into[v]
        if dst not in self.static:
            self.static[dst] = self.alloc(dst)
        self.storage[v] = st = self.storage[dst]  # the block keeps the whole buffer alive
        st.refs += 1
        return self.static[dst][index].reshape(shape_of(v.type))

    def reshape(self, src: SSAValue, result: SSAValue, index: tuple | None = None) -> bool:
        """`result` is a view of `src`, first indexed by the basic `index` if any (static:
        now; per-run value: a view step). False (nothing done) where that view of a planned
        buffer is not C-contiguous and a reader could not take it as is: a contiguous copy
        (or a reshape's) would be made once, at compile time, not per run."""
        shape = shape_of(result.type)
        if index is not None and src in self.static and src not in self.anywhere:
            view = _view_reshape(self.static[src][index], shape)
            if view is None or not (view.flags.c_contiguous or self.strided_ok(result, view)):
                return False
        at = self.where.get(src)
        if at is not None:
            self.where[result] = at
        if src in self.slots:
            self.slots[result] = self.slots[src]
        if src in self.anywhere:
            self.anywhere.add(result)
        if src in self.input_views:
            self.input_views.add(result)
        if src in self.static:
            arr = self.static[src]
            view = _view_reshape(arr if index is None else arr[index], shape)
            if view is None and src not in self.anywhere:  # strided_ok admits only views
                raise ExecutionError(f"{result}: a reshape of a strided buffer needs a copy")
            if view is None:  # a constant's strided view: its one copy never goes stale
                view = np.ascontiguousarray(arr if index is None else arr[index]).reshape(shape)
            self.static[result] = view
            if src in self.storage:  # share the storage: it lives while either value does
                self.storage[result] = st = self.storage[src]
                st.refs += 1
            return True
        self.patches[result] = consumers = []
        args = self.operand_list([src], contiguous=False, device=None)
        self.items.append((view_item, [args, consumers, shape, index]))
        self.names.append(result.owner.name)  # type: ignore[union-attr]
        return True


def _view_reshape(arr: Any, shape: tuple[int, ...]) -> Any:
    """`arr` reshaped to `shape` as a view of it, or None where that takes a copy (numpy's
    reshape would copy silently: a planned buffer's copy made once would go stale). A device
    array (never strided here) reshapes by its own library."""
    if not isinstance(arr, np.ndarray):
        return arr.reshape(shape)
    try:
        return arr.reshape(shape, copy=False)
    except ValueError:
        return None


_NOT_IN_PLACE = (ReshapeOp, GatherOp, SliceOp, ConcatOp, CopyOp, WeightOp, ConstantOp)
"""Producers that may not get a planned buffer of their own (views, transfers, resident data)
or whose own output may be elided: never asked to write into a concat's output."""


def _sole_producer(v: SSAValue, concat: Operation) -> SSAValue | None:
    """The host kernel (or generated C kernel) result that `v` (a concat input) is, through
    reshapes, if neither it nor a reshape on the way is returned and its op runs in the
    concat's block."""
    while True:
        if any(isinstance(u.operation, func.ReturnOp) for u in v.uses):
            return None
        owner = v.owner
        if not isinstance(owner, ReshapeOp):
            break
        v = owner.input
    generated = isinstance(owner, CLaunchOp)  # a generated C kernel: one buffer per result
    if (
        not (isinstance(owner, KernelOp) or generated)
        or isinstance(owner, _NOT_IN_PLACE)
        or owner.parent is not concat.parent
        or (len(owner.results) != 1 and not generated)
        or placed_device(owner) not in (None, HOST)
    ):
        return None
    return v


def moves_unit_dims(op: TransposeOp) -> bool:
    """A host transpose that only moves size-1 dims (decode's (1, 1, H, D) -> (1, H, 1, D)):
    the elements keep their row-major order, so it is a reshape (a view, no item)."""
    if placed_device(op) not in (None, HOST):
        return False
    s, perm = shape_of(op.input.type), op.perm.get_values()
    kept = [p for p in perm if s[p] != 1]
    return kept == sorted(kept)
