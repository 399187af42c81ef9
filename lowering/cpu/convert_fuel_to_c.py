"""`convert-fuel-to-c`: host fusion groups become generated C kernels."""

from __future__ import annotations

from dataclasses import dataclass, field

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
from fuel_dialect.base import KernelOp
from fuel_dialect.dispatch import PIN_ATTR
from fuel_dialect.dtypes import dtype_name
from fuel_dialect.ops_cpu import CKernelOp, CLaunchOp
from fuel_dialect.ops_movement import ConstantOp
from lowering.cpu.codegen import c_groups, c_pays_off, c_source, uses_vecmath
from lowering.cpu.codegen_rows import row_reduction
from lowering.fusion import FusionGroup, KernelSymbols, kernel_body, op_key, schedule
from passes.environment import environment, table_or_default
from passes.picker.ranker import PrecisionRequirement
from runtime.binding_table import BindingEntry, KernelBindingTable
from runtime.kernels.cpu import vecmath

HOST = "cpu"
LIBRARY_SOURCE = "numpy"
"""The kernel source whose semantics the generated C reproduces; ops stamped with another
(faster, less precise) sibling keep the kernel the picker chose, unless `c-vecmath` replaces
it (`VecmathChoice`)."""
REPLACEABLE = (LIBRARY_SOURCE, "numpy-fast", vecmath.SOURCE)
"""Stamps a `c-vecmath` function replaces in a generated kernel when no precision floor is
stated: the numpy default (the picker ranks kernels one call each; inside a kernel the
vectorized function is the faster one) and the f32-native numpy siblings (looser claims)."""


def host_eligible(op: Operation, vec: VecmathChoice | None = None) -> bool:
    """Runs on the host (placed or pinned on `cpu`, or unplaced) and is unstamped, stamped
    with the precise numpy library kernel on the cpu backend, or will compute with its
    `c-vecmath` function (`vec`). An op with a `?` dim keeps its library kernel: generated C
    bakes its loop bounds (sizes passed at run time: not yet)."""
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
    if vec is not None and vec(op):
        return True
    stamp = op.attributes.get(KERNEL_ATTR)
    if isinstance(stamp, KernelRefAttr):
        return stamp.backend.data == HOST and stamp.kernel_source.data == LIBRARY_SOURCE
    return True


@dataclass
class VecmathChoice:
    """Which f32 transcendentals compute with their `c-vecmath` function (a polynomial the
    compiler vectorizes) instead of the numpy kernel's libm call: those stamped with it (the
    picker's choice), and, when no precision floor is stated (`floor` unconstrained: the
    fastest verified kernel), those stamped with a `REPLACEABLE` sibling or unstamped, where
    the `c-vecmath` entry is registered here with an audited claim. Under a stated floor the
    picker's stamps stand: numpy-stamped ops keep the C that reproduces numpy bit for bit."""

    floor: PrecisionRequirement
    table: KernelBindingTable
    """Where the `c-vecmath` entries (and their verified claims) come from: the context's."""
    entries: dict[tuple[str, tuple[str, ...]], BindingEntry | None] = field(default_factory=dict)

    def entry(self, op: Operation) -> BindingEntry | None:
        if not isinstance(op, KernelOp):
            return None
        key = (op.KERNEL_OP, op.kernel_dtypes())
        if key not in self.entries:
            alts = self.table.lookup_alternatives(key[0], key[1], HOST)
            found = [e for e in alts if e.kernel_source == vecmath.SOURCE]
            self.entries[key] = found[0] if found else None
        return self.entries[key]

    def __call__(self, op: Operation) -> bool:
        if uses_vecmath(op):
            return True
        if op_key(op) not in vecmath.FUNCTIONS or dtype_name(op.results[0].type) != "f32":
            return False
        stamp = op.attributes.get(KERNEL_ATTR)
        if isinstance(stamp, KernelRefAttr) and (
            stamp.backend.data != HOST or stamp.kernel_source.data not in REPLACEABLE
        ):
            return False
        if not self.floor.unconstrained():
            return False
        e = self.entry(op)
        return e is not None and e.precision.audited

    def stamp(self, op: Operation) -> None:
        """Stamp `op` with its `c-vecmath` entry (the kernel its generated C computes)."""
        e = self.entry(op)
        if e is None or uses_vecmath(op):
            return
        assert isinstance(op, KernelOp)
        op.attributes[KERNEL_ATTR] = KernelRefAttr.get(
            op.KERNEL_OP, op.kernel_dtypes(), HOST, vecmath.SOURCE, e.revision_hash
        )


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
    f: func.FuncOp,
    kernels: KernelSymbols,
    min_ops: int,
    cost_model: bool,
    vec: VecmathChoice | None = None,
    rows: bool = False,
) -> None:
    """Rewrite one function body (see `ConvertFuelToCPass`)."""
    block = f.body.block
    use_vec = vec if vec is not None else uses_vecmath
    reductions = (lambda op: row_reduction(op) and host_eligible(op)) if rows else None
    groups = [
        g
        for g in c_groups(block, lambda op: host_eligible(op, vec), reductions)
        if (len(g.ops) >= min_ops or any(uses_vecmath(op) for op in g.ops))
        and g.outputs
        and (not cost_model or c_pays_off(g, use_vec))
    ]
    if not groups:
        return
    if vec is not None:
        for op in (op for g in groups for op in g.ops if vec(op)):
            vec.stamp(op)
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
    stamped with the precise `numpy` cpu kernel (whose semantics the C reproduces) or with a
    `c-vecmath` one (`VecmathChoice`: with no floor stated, f32 transcendentals get it); an op
    the picker gave another sibling, or placed on a device, stays. With no floor stated, f32
    reductions over the last axis join groups too (`rows`: one row kernel for a longhand
    softmax or norm). A group holding a `c-vecmath` op converts even when smaller than
    `min_ops` (a bundle then ships it compiled). Ops inside `fuel.branch` arms are left alone.

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
    precision: str = ""
    """The picker's precision floor (`fuel compile --option precision=...`, its syntax). Empty
    (none stated: the fastest verified kernel): f32 transcendentals in a group compute with
    their vectorized `c-vecmath` function (1 ulp, verified) and are stamped with it. Stated:
    only ops the picker stamped `c-vecmath` do; numpy-stamped ones keep numpy's bits."""
    use_vecmath: bool = True
    """Allow `c-vecmath` replacements at all; false: only ops already stamped with it."""
    rows: bool = True
    """Where no precision floor is stated: f32 sum/mean/max/min over the last axis join their
    elementwise producers and consumers in one row-wise kernel (`lowering.cpu.codegen_rows`:
    a longhand softmax or norm is one kernel; double accumulation, not numpy's bits)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        existing = {k.sym_name.data for k in op.ops if isinstance(k, CKernelOp)}
        kernels = KernelSymbols(op, "c_fused_", c_source, c_kernel_op, existing)
        floor = PrecisionRequirement.parse(self.precision)
        table = table_or_default(environment(ctx).bindings)
        vec = VecmathChoice(floor, table) if self.use_vecmath else None
        rows = self.rows and floor.unconstrained()
        for f in [f for f in op.ops if isinstance(f, func.FuncOp)]:
            convert_function(f, kernels, self.min_ops, self.cost_model, vec, rows)
