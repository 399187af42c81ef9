"""Shared pieces of fuel ops: the kernel-op mixin and verifier helpers."""

from __future__ import annotations

from typing import Any, ClassVar

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

from fuel_dialect.dtypes import FLOAT_NAMES, dtype_name, fmt_shape, normalize_axis, shape_of

_CONSTS = {
    "KERNEL_OP": ClassVar[str],
    "FLOAT_ONLY": ClassVar[bool],
    "RESULT_IS_BOOL": ClassVar[bool],
}
"""Annotations for op classes made with `type()`: IRDL accepts only annotated ClassVar constants."""


class KernelOp:
    """Mixin of ops executed by a binding-table kernel.

    The kernel key is `(KERNEL_OP, kernel_dtypes(), backend)`; `kernel_params()` gives the op's
    extras as plain Python values (normalised: non-negative axes, tuples, floats).
    """

    KERNEL_OP: ClassVar[str]

    def kernel_dtypes(self) -> tuple[str, ...]:
        assert isinstance(self, Operation)
        return tuple(dtype_name(v.type) for v in (*self.operands, *self.results))

    def kernel_params(self) -> dict[str, Any]:
        return {}


def fail(op: Operation, message: str) -> VerifyException:
    return VerifyException(f"'{op.name}' {message}")


def tensor_types(op: Operation, dynamic: bool = False) -> list[TensorType]:
    """All operand and result types; every one must be a ranked tensor, statically shaped
    unless `dynamic` (then a dim may be `?`, a symbol's value known at run time)."""
    types: list[TensorType] = []
    for v in (*op.operands, *op.results):
        t = v.type
        if not isinstance(t, TensorType):
            raise fail(op, f"expects ranked tensors, got {t}")
        if not dynamic and any(d < 0 for d in t.get_shape()):
            raise fail(op, f"expects static shapes, got {t} (dynamic dimensions are unsupported)")
        dtype_name(t)  # rejects unsupported element types
        types.append(t)
    return types


def check_static(op: Operation) -> None:
    """Every operand and result a statically shaped tensor of a fuel element type."""
    try:
        tensor_types(op)
    except ValueError as e:
        raise fail(op, str(e)) from None


def check_ranked(op: Operation) -> None:
    """Every operand and result a ranked tensor of a fuel element type; dims may be `?`
    (what can be checked statically is, the rest when a run binds the dim symbols)."""
    try:
        tensor_types(op, dynamic=True)
    except ValueError as e:
        raise fail(op, str(e)) from None


def elem(v: SSAValue | Attribute) -> str:
    t = v.type if isinstance(v, SSAValue) else v
    return dtype_name(t)


def shape(v: SSAValue) -> tuple[int, ...]:
    return shape_of(v.type)


def require_float(op: Operation, v: SSAValue, what: str = "operand") -> None:
    if elem(v) not in FLOAT_NAMES:
        raise fail(op, f"expects a float element type for {what}, got {elem(v)}")


def require_not_bool(op: Operation, v: SSAValue) -> None:
    if elem(v) == "i1":
        raise fail(op, "does not accept i1 operands")


def require_same_elem(op: Operation, *values: SSAValue) -> None:
    kinds = [elem(v) for v in values]
    if len(set(kinds)) > 1:
        raise fail(op, f"expects one element type for all operands, got {', '.join(kinds)}")


def require_shape(op: Operation, got: tuple[int, ...], want: tuple[int, ...], what: str) -> None:
    """`got` is `want`, where a dynamic dim (negative) on either side matches any dim (checked
    again, static, once a run binds the symbols)."""
    if len(got) != len(want) or any(dims_differ(a, b) for a, b in zip(got, want, strict=True)):
        raise fail(op, f"{what} must have shape {fmt_shape(want)}, got {fmt_shape(got)}")


def dims_differ(a: int, b: int) -> bool:
    """Two dims known to differ: both static and unequal (a dynamic dim may be anything)."""
    return a >= 0 and b >= 0 and a != b


def axis_in_range(op: Operation, axis: int, rank: int) -> int:
    norm = normalize_axis(axis, rank)
    if norm is None:
        raise fail(op, f"axis {axis} is out of range for rank {rank}")
    return norm


def verify_launch(op: Any, kernel_cls: type[Operation]) -> None:
    """A launch of a kernel symbol (`fuel.triton_launch`, `fuel.c_launch`): static tensor types,
    and when the symbol resolves, a `kernel_cls` whose signature matches the launch's types. An
    unresolved symbol is left to whoever runs or compiles the module."""
    from xdsl.dialects.builtin import FunctionType
    from xdsl.traits import SymbolTable

    check_static(op)
    target = SymbolTable.lookup_symbol(op, op.kernel)
    if target is None:
        return
    if not isinstance(target, kernel_cls):
        raise fail(op, f"'@{op.kernel.string_value()}' is not a {kernel_cls.name}")
    want = target.function_type
    got = FunctionType.from_lists([a.type for a in op.args], [r.type for r in op.res])
    if got != want:
        raise fail(op, f"types {got} differ from kernel @{target.sym_name.data}: {want}")
