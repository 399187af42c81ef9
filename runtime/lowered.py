"""Running a module the Triton backend lowered: place its launches, insert the copies."""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.ir import Block, Operation, SSAValue

from fuel_dialect.attrs import DEVICE_ATTR, DeviceAttr
from fuel_dialect.dispatch import CopyOp, placed_device
from fuel_dialect.ops_movement import ConstantOp, ReshapeOp, WeightOp
from fuel_dialect.ops_triton import LibraryCallOp, TritonKernelOp, TritonLaunchOp
from runtime.module import FuelModule

HOST = "cpu"


def is_lowered(module: FuelModule) -> bool:
    """The module holds Triton-level ops (`convert-fuel-to-triton` ran on it)."""
    if any(isinstance(op, TritonKernelOp) for op in module.op.ops):
        return True
    return any(isinstance(op, LibraryCallOp) for op in module.entry.body.block.ops)


def place_lowered(module: FuelModule, device: str = "cuda:0") -> FuelModule:
    """A copy of a lowered module ready to run: every top-level `fuel.triton_launch` and
    `fuel.library_call` without a `#fuel.device` placed on `device`, and a `fuel.copy`
    inserted wherever a value is read on another device than the one holding it (graph inputs
    start on the host; weights and constants are resident everywhere; a reshape stays where
    its input is; a branch reads its outer values on the host). One copy per value and device.
    Results left on a device are read back by the executor."""
    out = FuelModule(module.op.clone(), module.weights)
    block = out.entry.body.block
    home: dict[SSAValue, str | None] = {a: HOST for a in block.args}  # None: anywhere
    moved: dict[tuple[SSAValue, str], SSAValue] = {}
    for op in list(block.ops):
        if isinstance(op, TritonLaunchOp | LibraryCallOp) and placed_device(op) is None:
            op.attributes[DEVICE_ATTR] = DeviceAttr(device)
        where = _lowered_home(op)
        if not isinstance(op, func.ReturnOp | CopyOp | ReshapeOp):
            want = where or HOST
            for user, i in _outer_uses(op):
                v = user.operands[i]
                at = home.get(v)
                if at is not None and at != want:
                    if (v, want) not in moved:
                        copy = CopyOp(v, want)
                        block.insert_op_before(copy, op)
                        moved[(v, want)] = copy.result
                    user.operands[i] = moved[(v, want)]
        for r in op.results:
            if isinstance(op, ReshapeOp):
                home[r] = home.get(op.input)
            elif isinstance(op, CopyOp):
                home[r] = None if home.get(op.input, HOST) is None else op.target.data
            else:
                home[r] = where
    return out


def _lowered_home(op: Operation) -> str | None:
    """Where `place_lowered` finds an op's results (None: resident everywhere, or a view)."""
    if isinstance(op, WeightOp | ConstantOp | ReshapeOp):
        return None
    return placed_device(op) or HOST


def _outer_uses(op: Operation) -> list[tuple[Operation, int]]:
    """(user, operand index) of every value `op` or an op nested in it reads from outside."""
    inner = list(op.walk())
    members = set(inner)
    uses = []
    for o in inner:
        for i, v in enumerate(o.operands):
            owner = v.owner.parent_op() if isinstance(v.owner, Block) else v.owner
            if owner not in members:
                uses.append((o, i))
    return uses
