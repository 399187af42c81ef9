"""`convert-fuel-to-triton`: fusion groups become generated Triton kernels, the other kernel
ops become binding-table library calls on the `cuda` backend."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    SymbolRefAttr,
    i64,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from fuel_dialect.attrs import DEVICE_ATTR, KERNEL_ATTR, DeviceAttr, KernelRefAttr
from fuel_dialect.base import KernelOp
from fuel_dialect.branch import BranchOp
from fuel_dialect.dtypes import element_type
from fuel_dialect.ops_movement import ConstantOp, ReshapeOp
from fuel_dialect.ops_triton import LibraryCallOp, TritonKernelOp, TritonLaunchOp, encode_params
from lowering.triton.codegen import FUSIBLE, FusionGroup, fusion_groups, kernel_source

BACKEND = "cuda"


def eligible(op: Operation, placed_only: bool = False) -> bool:
    """Converted: ops placed on a cuda device; unplaced ops unless `placed_only`. Ops placed
    elsewhere, or stamped with another backend's kernel, stay for that backend."""
    dev = op.attributes.get(DEVICE_ATTR)
    if isinstance(dev, DeviceAttr):
        return dev.backend == BACKEND
    stamp = op.attributes.get(KERNEL_ATTR)
    if isinstance(stamp, KernelRefAttr) and stamp.backend.data != BACKEND:
        return False
    return not placed_only


def schedule(block: Block, nodes: list[list[Operation]]) -> list[int]:
    """A topological order of `nodes` (each a group of ops run as one), nearest to the block
    order: Kahn's algorithm taking the ready node whose first op comes earliest."""
    node_of = {op: i for i, ops in enumerate(nodes) for op in ops}
    first = {op: i for i, op in enumerate(block.ops)}
    deps: list[set[int]] = [set() for _ in nodes]
    for i, ops in enumerate(nodes):
        for op in ops:
            for inner in op.walk():
                for v in inner.operands:
                    j = node_of.get(v.owner)  # type: ignore[arg-type]
                    if j is not None and j != i:
                        deps[i].add(j)
    users: list[list[int]] = [[] for _ in nodes]
    for i, ds in enumerate(deps):
        for j in ds:
            users[j].append(i)
    pending = [len(ds) for ds in deps]
    ready = [(first[ops[0]], i) for i, ops in enumerate(nodes) if not pending[i]]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            pending[u] -= 1
            if not pending[u]:
                heapq.heappush(ready, (first[nodes[u][0]], u))
    if len(order) != len(nodes):
        raise AssertionError("convert-fuel-to-triton: fusion groups form a cycle")
    return order


def library_call(op: Operation) -> LibraryCallOp:
    """The `fuel.library_call` that runs `op`'s binding-table kernel on the cuda backend."""
    assert isinstance(op, KernelOp)
    props = {
        "callee": StringAttr(op.KERNEL_OP),
        "dtypes": ArrayAttr([element_type(d) for d in op.kernel_dtypes()]),
        "backend": StringAttr(BACKEND),
    }
    if params := op.kernel_params():
        props["params"] = encode_params(params)
    return LibraryCallOp.create(
        operands=list(op.operands),
        result_types=[r.type for r in op.results],
        properties=props,
        attributes=dict(op.attributes),
    )


@dataclass
class KernelSymbols:
    """A module's generated kernel symbols, one per distinct kernel: a group whose source
    (named "kernel") matches an earlier group's reuses its symbol. `make(group, name)` builds
    the module-level kernel op; new ones go before the first function."""

    module: ModuleOp
    prefix: str
    source: Callable[[FusionGroup, str], str]
    make: Callable[[FusionGroup, str], Operation]
    taken: set[str]
    by_source: dict[str, str] = field(default_factory=dict)

    def symbol(self, group: FusionGroup) -> str:
        canonical = self.source(group, "kernel")
        if canonical in self.by_source:
            return self.by_source[canonical]
        n = len(self.taken)
        while f"{self.prefix}{n}" in self.taken:
            n += 1
        name = f"{self.prefix}{n}"
        self.taken.add(name)
        self.by_source[canonical] = name
        funcs = [op for op in self.module.ops if isinstance(op, func.FuncOp)]
        Rewriter.insert_op(self.make(group, name), InsertPoint.before(funcs[0]))
        return name


def triton_kernel_op(group: FusionGroup, name: str, block_size: int) -> TritonKernelOp:
    """The `fuel.triton_kernel` symbol of `group`'s generated kernel."""
    ins, outs = [v.type for v in group.inputs], [v.type for v in group.outputs]
    return TritonKernelOp.create(
        properties={
            "sym_name": StringAttr(name),
            "space": DenseArrayBase.from_list(i64, group.space),
            "block": IntegerAttr(block_size, i64),
            "function_type": func.FunctionType.from_lists(ins, outs),
            "source": StringAttr(kernel_source(group, name)),
        }
    )


def convert_function(f: func.FuncOp, kernels: KernelSymbols, placed_only: bool) -> None:
    """Rewrite one function body (see `ConvertFuelToTritonPass`)."""
    convert_block(f.body.block, kernels, placed_only)


def convert_block(block: Block, kernels: KernelSymbols, placed_only: bool) -> None:
    """Rewrite one block; then the arms of its branches, where only ops placed on a cuda device
    convert (an arm's placement is the picker's: its copies are already in the arm)."""
    for branch in [op for op in block.ops if isinstance(op, BranchOp)]:
        for arm in branch.arms:
            convert_block(arm.block, kernels, placed_only=True)
    groups = fusion_groups(block, lambda op: eligible(op, placed_only))
    grouped = {op for g in groups for op in g.ops}
    nodes: list[list[Operation]] = [g.ops for g in groups]
    nodes += [[op] for op in block.ops if op not in grouped and op is not block.last_op]
    term = block.last_op
    assert term is not None
    names = [kernels.symbol(g) if g.outputs else "" for g in groups]  # before any rewrite
    renamed: dict[SSAValue, SSAValue] = {}
    for i in schedule(block, nodes):
        if i < len(groups):
            launch(groups[i], names[i], renamed, term)
            continue
        op = nodes[i][0]
        op.detach()
        is_call = isinstance(op, KernelOp) and not isinstance(op, (*FUSIBLE, ReshapeOp))
        if is_call and eligible(op, placed_only):
            call = library_call(op)
            block.insert_op_before(call, term)
            for old, new in zip(op.results, call.results, strict=True):
                old.replace_all_uses_with(new)
                renamed[old] = new
            op.erase()
        else:
            block.insert_op_before(op, term)
    for g in groups:
        for op in reversed(g.ops):
            op.erase()
    inlined = {v.owner for g in groups for v in g.splats}
    for op in inlined:
        if isinstance(op, ConstantOp) and not op.result.uses:
            block.erase_op(op)


def launch(
    group: FusionGroup, name: str, renamed: dict[SSAValue, SSAValue], before: Operation
) -> None:
    """Launch `group`'s kernel `name` before `before`; readers outside the group read its
    results (recorded in `renamed`). The group's ops are detached (erased once every group is
    launched)."""
    for op in group.ops:
        op.detach()
    if not group.outputs:
        return
    attrs = {DEVICE_ATTR: DeviceAttr(group.device)} if group.device else {}
    call = TritonLaunchOp.create(
        operands=[renamed.get(v, v) for v in group.inputs],
        result_types=[v.type for v in group.outputs],
        properties={"kernel": SymbolRefAttr(name)},
        attributes=attrs,
    )
    before.parent_block().insert_op_before(call, before)  # type: ignore[union-attr]
    members = set(group.ops)
    for old, new in zip(group.outputs, call.results, strict=True):
        old.replace_uses_with_if(new, lambda use: use.operation not in members)
        renamed[old] = new


@dataclass(frozen=True)
class ConvertFuelToTritonPass(ModulePass):
    """Lower every function to the Triton level: each fusion group (`lowering.triton.codegen`:
    connected elementwise/broadcast/cast ops over one iteration space) becomes one
    `fuel.triton_launch` of a generated module-level `fuel.triton_kernel` (identical kernels are
    shared); every other kernel op becomes a `fuel.library_call` of its binding-table key on the
    `cuda` backend; views, weights, constants, copies and branches stay. Ops are reordered only
    as far as launching a group at once needs (a stable topological order).

    Which ops convert: those placed on a cuda device (`fuel.device = #fuel.device<"cuda:N">`),
    and unplaced ones unless `placed_only`; a group never mixes devices and its launch keeps the
    placement. Inside `fuel.branch` arms only ops placed on a cuda device convert (a placement
    arm carries its own copies), so each arm keeps running where the picker put it.

    Pre: verified fuel IR. Post: the same values; no fusible op is left in a converted position.
    Idempotent (launches and calls are not converted again). Splat constants read only by
    kernels are inlined into them and erased.
    """

    name = "convert-fuel-to-triton"

    block: int = 1024
    """BLOCK (elements per program) of the generated kernels; a power of two."""
    placed_only: bool = False
    """Convert only ops explicitly placed on a cuda device."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        existing = {k.sym_name.data for k in op.ops if isinstance(k, TritonKernelOp)}
        make = partial(triton_kernel_op, block_size=self.block)
        kernels = KernelSymbols(op, "fused_", kernel_source, make, existing)
        for f in [f for f in op.ops if isinstance(f, func.FuncOp)]:
            convert_function(f, kernels, self.placed_only)
