"""`convert-fuel-to-c`: host fusion groups become generated C kernels."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DenseArrayBase,
    ModuleOp,
    StringAttr,
    SymbolRefAttr,
    TensorType,
    i64,
)
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from fuel_dialect.attrs import DEVICE_ATTR, KERNEL_ATTR, DeviceAttr, KernelRefAttr
from fuel_dialect.dispatch import PIN_ATTR
from fuel_dialect.ops_cpu import CKernelOp, CLaunchOp
from fuel_dialect.ops_movement import ConstantOp
from lowering.cpu.codegen import c_groups, c_pays_off, c_source
from lowering.fusion import FusionGroup, KernelSymbols, kernel_body, schedule

HOST = "cpu"
LIBRARY_SOURCE = "numpy"
"""The kernel source whose semantics the generated C reproduces; ops stamped with another
(faster, less precise) sibling keep the kernel the picker chose."""


def host_eligible(op: Operation) -> bool:
    """Runs on the host (placed or pinned on `cpu`, or unplaced) and is unstamped or stamped
    with the precise numpy library kernel on the cpu backend. An op with a `?` dim keeps its
    library kernel: generated C bakes its loop bounds (sizes passed at run time: not yet)."""
    if any(
        isinstance(v.type, TensorType) and any(d < 0 for d in v.type.get_shape())
        for v in (*op.operands, *op.results)
    ):
        return False
    for name in (DEVICE_ATTR, PIN_ATTR):
        dev = op.attributes.get(name)
        if isinstance(dev, DeviceAttr):
            if dev.data != HOST:
                return False
            break
    stamp = op.attributes.get(KERNEL_ATTR)
    if isinstance(stamp, KernelRefAttr):
        return stamp.backend.data == HOST and stamp.kernel_source.data == LIBRARY_SOURCE
    return True


def c_kernel_op(group: FusionGroup, name: str) -> CKernelOp:
    """The `fuel.c_kernel` symbol of `group`'s generated C function, keeping the group's ops
    as its body (what a loader regenerates the source from)."""
    ins, outs = [v.type for v in group.inputs], [v.type for v in group.outputs]
    return CKernelOp.create(
        properties={
            "sym_name": StringAttr(name),
            "space": DenseArrayBase.from_list(i64, group.space),
            "function_type": func.FunctionType.from_lists(ins, outs),
            "source": StringAttr(c_source(group, name)),
        },
        regions=[kernel_body(group)],
    )


def convert_function(
    f: func.FuncOp, kernels: KernelSymbols, min_ops: int, cost_model: bool
) -> None:
    """Rewrite one function body (see `ConvertFuelToCPass`)."""
    block = f.body.block
    groups = [
        g
        for g in c_groups(block, host_eligible)
        if len(g.ops) >= min_ops and g.outputs and (not cost_model or c_pays_off(g))
    ]
    if not groups:
        return
    grouped = {op for g in groups for op in g.ops}
    nodes: list[list[Operation]] = [g.ops for g in groups]
    nodes += [[op] for op in block.ops if op not in grouped and op is not block.last_op]
    term = block.last_op
    assert term is not None
    names = [kernels.symbol(g) for g in groups]  # before any rewrite
    renamed: dict[SSAValue, SSAValue] = {}
    for i in schedule(block, nodes):
        if i < len(groups):
            launch(groups[i], names[i], renamed, term)
        else:
            op = nodes[i][0]
            op.detach()
            block.insert_op_before(op, term)
    for g in groups:
        for op in reversed(g.ops):
            op.erase()
    for op in {v.owner for g in groups for v in g.splats}:
        if isinstance(op, ConstantOp) and not op.result.uses:
            block.erase_op(op)


def launch(
    group: FusionGroup, name: str, renamed: dict[SSAValue, SSAValue], before: Operation
) -> None:
    """Launch `group`'s kernel `name` before `before`; readers outside the group read its
    results (recorded in `renamed`: a later group's inputs were taken before this rewrite).
    The group's ops are detached (erased once every group is launched)."""
    for op in group.ops:
        op.detach()
    dev = group.ops[0].attributes.get(DEVICE_ATTR)
    call = CLaunchOp.create(
        operands=[renamed.get(v, v) for v in group.inputs],
        result_types=[v.type for v in group.outputs],
        properties={"kernel": SymbolRefAttr(name)},
        attributes={DEVICE_ATTR: dev} if isinstance(dev, DeviceAttr) else {},
    )
    before.parent_block().insert_op_before(call, before)  # type: ignore[union-attr]
    members = set(group.ops)
    for old, new in zip(group.outputs, call.results, strict=True):
        old.replace_uses_with_if(new, lambda use: use.operation not in members)
        renamed[old] = new


@dataclass(frozen=True)
class ConvertFuelToCPass(ModulePass):
    """Lower host fusion groups to generated C: each group of at least `min_ops` connected
    elementwise/broadcast/cast ops over one iteration space (`lowering.fusion
    .fusion_groups`, restricted to ops with a C emitter: `lowering.cpu.codegen.c_eligible`)
    becomes one `fuel.c_launch` of a module-level `fuel.c_kernel` holding its C source
    (identical kernels are shared), when the cost model expects it to pay off (`cost_model`).
    Every other op stays as it is (the executor runs it from the binding table). Ops are
    reordered only as far as launching a group at once needs.

    Which ops convert: unplaced ones and those placed or pinned on `cpu`, when unstamped or
    stamped with the precise `numpy` cpu kernel (whose semantics the C reproduces); an op the
    picker gave another sibling, or placed on a device, stays. Ops inside `fuel.branch` arms
    are left alone.

    Pre: verified fuel IR. Post: the same values. Idempotent (launches are not converted
    again). Splat constants read only by kernels are inlined into them and erased. Nothing is
    compiled here: the executor compiles (or finds cached) each kernel when it loads the module.
    """

    name = "convert-fuel-to-c"

    min_ops: int = 2
    """Smallest group converted; a single op stays a library kernel (a numpy ufunc call costs
    about what a C call does, and needs no compiler)."""
    cost_model: bool = True
    """Convert only groups that `lowering.cpu.codegen.c_pays_off` expects to run faster as C
    (call overhead saved vs. libm's scalar transcendentals on large spaces); false: all."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        existing = {k.sym_name.data for k in op.ops if isinstance(k, CKernelOp)}
        kernels = KernelSymbols(op, "c_fused_", c_source, c_kernel_op, existing)
        for f in [f for f in op.ops if isinstance(f, func.FuncOp)]:
            convert_function(f, kernels, self.min_ops, self.cost_model)
