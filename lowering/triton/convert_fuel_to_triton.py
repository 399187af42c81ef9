"""`convert-fuel-to-triton`: fusion groups become generated Triton kernels, the other kernel
ops become binding-table library calls on the `cuda` backend."""

from __future__ import annotations

from dataclasses import dataclass
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

from fuel_dialect.attrs import DEVICE_ATTR, KERNEL_ATTR, DeviceAttr, KernelRefAttr
from fuel_dialect.base import KernelOp
from fuel_dialect.branch import BranchOp
from fuel_dialect.dtypes import element_type
from fuel_dialect.ops_movement import ConstantOp, ReshapeOp
from fuel_dialect.ops_triton import LibraryCallOp, TritonKernelOp, TritonLaunchOp, encode_params
from lowering.fusion import (
    FUSIBLE,
    FusionGroup,
    KernelSymbols,
    fusion_groups,
    kernel_body,
    schedule,
)
from lowering.triton.codegen import kernel_source

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


def triton_kernel_op(group: FusionGroup, name: str, block_size: int) -> TritonKernelOp:
    """The `fuel.triton_kernel` symbol of `group`'s generated kernel, keeping the group's ops
    as its body (what a loader regenerates the source from)."""
    ins, outs = [v.type for v in group.inputs], [v.type for v in group.outputs]
    return TritonKernelOp.create(
        properties={
            "sym_name": StringAttr(name),
            "space": DenseArrayBase.from_list(i64, group.space),
            "block": IntegerAttr(block_size, i64),
            "function_type": func.FunctionType.from_lists(ins, outs),
            "source": StringAttr(kernel_source(group, name)),
        },
        regions=[kernel_body(group)],
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
