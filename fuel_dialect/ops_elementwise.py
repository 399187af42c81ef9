"""Elementwise fuel ops: unary math, broadcasting binary arithmetic, compares, where, cast."""

from __future__ import annotations

from typing import Any, ClassVar

from xdsl.dialects.builtin import TensorType, UnitAttr
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

from fuel_dialect.base import (
    _CONSTS,
    KernelOp,
    check_ranked,
    elem,
    fail,
    require_float,
    require_not_bool,
    require_same_elem,
    require_shape,
    shape,
)
from fuel_dialect.dtypes import broadcast_shapes, fmt_shape

# -- unary -----------------------------------------------------------------------------------


class UnaryOp(IRDLOperation, KernelOp):
    """Base of `%y = fuel.<op> %x : tensor<...>`: same type in and out."""

    T: ClassVar[VarConstraint[TensorType]] = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($result)"

    FLOAT_ONLY: ClassVar[bool] = True

    def verify_(self) -> None:
        check_ranked(self)
        if self.FLOAT_ONLY:
            require_float(self, self.input)
        else:
            require_not_bool(self, self.input)


def _unary(op_name: str, summary: str, float_only: bool = True) -> type[UnaryOp]:
    """Define one unary op class; the docstring carries the summary and an example."""
    short = op_name.removeprefix("fuel.")
    doc = f"{summary}\n\nExample: `%y = {op_name} %x : tensor<4x8xf32>`"
    cls = type(
        f"{short.title().replace('_', '')}Op",
        (UnaryOp,),
        {
            "name": op_name,
            "KERNEL_OP": short,
            "FLOAT_ONLY": float_only,
            "__doc__": doc,
            "__module__": __name__,  # else `abc`: type() is called from ABCMeta
            "__annotations__": _CONSTS,
        },
    )
    return irdl_op_definition(cls)


NegOp = _unary("fuel.neg", "Elementwise negation.", float_only=False)
AbsOp = _unary("fuel.abs", "Elementwise absolute value.", float_only=False)
ReluOp = _unary("fuel.relu", "Elementwise max(x, 0).", float_only=False)
ExpOp = _unary("fuel.exp", "Elementwise e**x.")
LogOp = _unary("fuel.log", "Elementwise natural logarithm.")
SqrtOp = _unary("fuel.sqrt", "Elementwise square root.")
RsqrtOp = _unary("fuel.rsqrt", "Elementwise 1/sqrt(x).")
RecipOp = _unary("fuel.recip", "Elementwise reciprocal 1/x.")
TanhOp = _unary("fuel.tanh", "Elementwise hyperbolic tangent.")
SigmoidOp = _unary("fuel.sigmoid", "Elementwise logistic 1/(1+e**-x).")
SiluOp = _unary("fuel.silu", "Elementwise x*sigmoid(x) (swish).")
SinOp = _unary("fuel.sin", "Elementwise sine.")
CosOp = _unary("fuel.cos", "Elementwise cosine.")
ErfOp = _unary("fuel.erf", "Elementwise Gauss error function (2/sqrt(pi)) int_0^x exp(-t**2) dt.")


@irdl_op_definition
class GeluOp(UnaryOp):
    """Elementwise GELU: x*Phi(x) with the exact erf form, or the tanh approximation when
    `tanh` is given.

    Example: `%y = fuel.gelu %x tanh : tensor<4x8xf32>`
    """

    name = "fuel.gelu"
    KERNEL_OP: ClassVar[str] = "gelu"
    tanh = opt_prop_def(UnitAttr)
    assembly_format = "$input (`tanh` $tanh^)? attr-dict `:` type($result)"

    def kernel_params(self) -> dict[str, Any]:
        return {"approximate": "tanh" if self.tanh is not None else "none"}


UNARY_OPS: tuple[type[UnaryOp], ...] = (
    NegOp,
    AbsOp,
    ReluOp,
    ExpOp,
    LogOp,
    SqrtOp,
    RsqrtOp,
    RecipOp,
    TanhOp,
    SigmoidOp,
    SiluOp,
    SinOp,
    CosOp,
    ErfOp,
    GeluOp,
)

# -- binary ----------------------------------------------------------------------------------


class BinaryOp(IRDLOperation, KernelOp):
    """Base of `%z = fuel.<op> %x, %y : tx, ty -> tz` with numpy broadcasting."""

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    FLOAT_ONLY: ClassVar[bool] = False
    RESULT_IS_BOOL: ClassVar[bool] = False

    def verify_(self) -> None:
        check_ranked(self)
        require_same_elem(self, self.lhs, self.rhs)
        if self.FLOAT_ONLY:
            require_float(self, self.lhs)
        elif not self.RESULT_IS_BOOL:
            require_not_bool(self, self.lhs)
        want = "i1" if self.RESULT_IS_BOOL else elem(self.lhs)
        if elem(self.result) != want:
            raise fail(self, f"result element type must be {want}, got {elem(self.result)}")
        out = broadcast_shapes(shape(self.lhs), shape(self.rhs))
        if out is None:
            raise fail(
                self,
                f"operands are not broadcast-compatible: {fmt_shape(shape(self.lhs))} vs "
                f"{fmt_shape(shape(self.rhs))}",
            )
        require_shape(self, shape(self.result), out, "result")


def _binary(op_name: str, summary: str, float_only: bool = False, cmp: bool = False):
    short = op_name.removeprefix("fuel.")
    t_out = "tensor<4x8xi1>" if cmp else "tensor<4x8xf32>"
    doc = (
        f"{summary}\n\nBroadcasts like numpy.\n\nExample: "
        f"`%z = {op_name} %x, %y : tensor<4x8xf32>, tensor<8xf32> -> {t_out}`"
    )
    cls = type(
        f"{short.title()}Op",
        (BinaryOp,),
        {
            "name": op_name,
            "KERNEL_OP": short,
            "FLOAT_ONLY": float_only,
            "RESULT_IS_BOOL": cmp,
            "__annotations__": _CONSTS,
            "__doc__": doc,
            "__module__": __name__,  # else `abc`: type() is called from ABCMeta
        },
    )
    return irdl_op_definition(cls)


AddOp = _binary("fuel.add", "Elementwise sum.")
SubOp = _binary("fuel.sub", "Elementwise difference.")
MulOp = _binary("fuel.mul", "Elementwise product.")
DivOp = _binary("fuel.div", "Elementwise float quotient.", float_only=True)
PowOp = _binary("fuel.pow", "Elementwise x**y.", float_only=True)
MaxOp = _binary("fuel.max", "Elementwise maximum (NaN propagates).")
MinOp = _binary("fuel.min", "Elementwise minimum (NaN propagates).")
EqOp = _binary("fuel.eq", "Elementwise x == y.", cmp=True)
NeOp = _binary("fuel.ne", "Elementwise x != y.", cmp=True)
LtOp = _binary("fuel.lt", "Elementwise x < y.", cmp=True)
LeOp = _binary("fuel.le", "Elementwise x <= y.", cmp=True)
GtOp = _binary("fuel.gt", "Elementwise x > y.", cmp=True)
GeOp = _binary("fuel.ge", "Elementwise x >= y.", cmp=True)

BINARY_OPS = (AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp)
COMPARE_OPS = (EqOp, NeOp, LtOp, LeOp, GtOp, GeOp)


@irdl_op_definition
class WhereOp(IRDLOperation, KernelOp):
    """Elementwise select: `cond ? lhs : rhs`, all three broadcast together.

    Example: `%z = fuel.where %c, %x, %y : tensor<4x8xi1>, tensor<4x8xf32>, tensor<f32>
    -> tensor<4x8xf32>`
    """

    name = "fuel.where"
    KERNEL_OP: ClassVar[str] = "where"
    cond = operand_def(TensorType)
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$cond `,` $lhs `,` $rhs attr-dict `:` type($cond) `,` type($lhs) `,` type($rhs)"
        " `->` type($result)"
    )

    def verify_(self) -> None:
        check_ranked(self)
        if elem(self.cond) != "i1":
            raise fail(self, f"condition must have element type i1, got {elem(self.cond)}")
        require_same_elem(self, self.lhs, self.rhs, self.result)
        out = broadcast_shapes(shape(self.cond), shape(self.lhs), shape(self.rhs))
        if out is None:
            shapes = ", ".join(fmt_shape(shape(v)) for v in (self.cond, self.lhs, self.rhs))
            raise fail(self, f"operands are not broadcast-compatible: {shapes}")
        require_shape(self, shape(self.result), out, "result")


@irdl_op_definition
class CastOp(IRDLOperation, KernelOp):
    """Elementwise conversion between element types (same shape).

    Float to int truncates toward zero; anything to i1 is `x != 0`; narrowing float casts round
    to nearest even.

    Example: `%y = fuel.cast %x : tensor<4xf32> to tensor<4xf16>`
    """

    name = "fuel.cast"
    KERNEL_OP: ClassVar[str] = "cast"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `to` type($result)"

    def verify_(self) -> None:
        check_ranked(self)
        require_shape(self, shape(self.result), shape(self.input), "result")
