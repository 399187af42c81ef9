"""fuel element types <-> builtin MLIR types, and small pure-Python shape rules."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
    TensorType,
)
from xdsl.ir import Attribute

ELEMENT_TYPES: dict[str, Attribute] = {
    "f64": Float64Type(),
    "f32": Float32Type(),
    "f16": Float16Type(),
    "bf16": BFloat16Type(),
    "i64": IntegerType(64),
    "i32": IntegerType(32),
    "i8": IntegerType(8),
    "u8": IntegerType(8, Signedness.UNSIGNED),
    "i1": IntegerType(1),
}
"""Every fuel element type by its short name; u8 is spelled `ui8` in IR."""

DYNAMIC = DYNAMIC_INDEX
"""A dynamic dim in a `TensorType` shape (printed `?`; xDSL stores it as INT64_MIN)."""

_NAMES = {v: k for k, v in ELEMENT_TYPES.items()}
FLOAT_NAMES = frozenset({"f64", "f32", "f16", "bf16"})
INT_NAMES = frozenset({"i64", "i32", "i8", "u8"})
INDEX_NAMES = frozenset({"i64", "i32"})


def dtype_name(t: Attribute) -> str:
    """Short fuel name of an element type, or of a tensor type's element type."""
    if isinstance(t, TensorType):
        t = t.element_type
    try:
        return _NAMES[t]
    except KeyError:
        raise ValueError(f"unsupported element type {t}") from None


def element_type(name: str) -> Attribute:
    try:
        return ELEMENT_TYPES[name]
    except KeyError:
        known = ", ".join(ELEMENT_TYPES)
        raise ValueError(f"unknown dtype '{name}' (known: {known})") from None


def tensor_type(shape: Sequence[int], dtype: str) -> TensorType:
    return TensorType(element_type(dtype), list(shape))


def shape_of(t: Attribute) -> tuple[int, ...]:
    assert isinstance(t, TensorType)
    return tuple(t.get_shape())


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...] | None:
    """numpy broadcasting of shapes; None when they are incompatible. A dynamic dim (negative,
    `DYNAMIC`) broadcasts against a static dim n > 1 to n (it must be 1 or n at run time),
    against 1 or another dynamic dim to `DYNAMIC`."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[int] = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0}
        dims.discard(1)
        static = {d for d in dims if d >= 0}
        if len(static) > 1:
            return None
        out.append(static.pop() if static else DYNAMIC if dims else 1)
    return tuple(out)


def fmt_shape(shape: Sequence[int]) -> str:
    return "x".join("?" if d < 0 else str(d) for d in shape) if shape else "scalar"


def normalize_axis(axis: int, rank: int) -> int | None:
    """`axis` in [-rank, rank) mapped to [0, rank); None when out of range."""
    if -rank <= axis < rank:
        return axis % rank if rank else 0
    return None


Signature = tuple[tuple[tuple[int, ...], str], ...]
"""(shape, dtype name) per operand of a generated kernel."""


def io_signature(function_type: Any) -> tuple[Signature, Signature]:
    """(inputs, outputs) of a kernel symbol's function type, as plain (shape, dtype) data."""

    def sig(types: Iterable[Any]) -> Signature:
        return tuple((shape_of(t), dtype_name(t)) for t in types)

    return sig(function_type.inputs.data), sig(function_type.outputs.data)
