"""The `fuel` dialect object and a context loader."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects import arith, builtin, func
from xdsl.ir import Dialect

from fuel_dialect.attrs import BackendAttr, DeviceAttr, KernelRefAttr, PrecisionAttr
from fuel_dialect.branch import BranchOp, YieldOp
from fuel_dialect.dims import DimAttr, install_func_verifier
from fuel_dialect.dispatch import CandidateAttr, CopyOp
from fuel_dialect.ops_cpu import CPU_OPS
from fuel_dialect.ops_elementwise import BINARY_OPS, COMPARE_OPS, UNARY_OPS, CastOp, WhereOp
from fuel_dialect.ops_fused import FUSED_OPS
from fuel_dialect.ops_movement import (
    BroadcastOp,
    ConcatOp,
    ConstantOp,
    GatherOp,
    IndexCopyOp,
    ReshapeOp,
    SliceOp,
    TransposeOp,
    WeightOp,
)
from fuel_dialect.ops_nn import (
    REDUCE_OPS,
    AttentionOp,
    LayerNormOp,
    MatmulOp,
    RmsNormOp,
    RopeOp,
    SoftmaxOp,
)
from fuel_dialect.ops_shape import SHAPE_OPS
from fuel_dialect.ops_triton import TRITON_OPS
from fuel_dialect.xdsl_fixes import apply as _apply_xdsl_fixes

_apply_xdsl_fixes()
install_func_verifier()

OPS = [
    *UNARY_OPS,
    *BINARY_OPS,
    *COMPARE_OPS,
    WhereOp,
    CastOp,
    MatmulOp,
    *REDUCE_OPS,
    SoftmaxOp,
    RmsNormOp,
    LayerNormOp,
    RopeOp,
    AttentionOp,
    ReshapeOp,
    TransposeOp,
    BroadcastOp,
    SliceOp,
    ConcatOp,
    GatherOp,
    IndexCopyOp,
    ConstantOp,
    WeightOp,
    CopyOp,
    BranchOp,
    YieldOp,
    *FUSED_OPS,
    *TRITON_OPS,
    *CPU_OPS,
    *SHAPE_OPS,
]

Fuel = Dialect(
    "fuel", OPS, [BackendAttr, DeviceAttr, PrecisionAttr, KernelRefAttr, CandidateAttr, DimAttr]
)


def fuel_context() -> Context:
    """A context with the fuel, func, arith and builtin dialects loaded."""
    ctx = Context()
    for d in (builtin.Builtin, func.Func, arith.Arith, Fuel):
        ctx.load_dialect(d)
    return ctx
