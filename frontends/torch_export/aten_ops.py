"""The aten op table of the torch.export importer: `"aten.<op>.<overload>" -> handler`.

A handler gets the op's context (`Cx`: the emitter, the FX node, what torch recorded for its
result) and the node's arguments with every FX node replaced by its importer value (a numpy
constant or an IR value); it returns one value or a tuple (None for an output it does not make).
Computations on constants fold at import time (see `frontends.emit`), so `arange`, masks
and parameter transposes never reach the IR as ops. Dtypes follow torch's promotion
(`torch.result_type`); every result is checked against torch's recorded shape and dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import fx

from frontends.emit import (
    Emitter,
    Tensor,
    Unsupported,
    dtype_of,
    is_symbolic,
    reshape_to,
    scalar,
    shape_of_t,
)
from fuel_dialect.dtypes import FLOAT_NAMES, normalize_axis
from fuel_dialect.shapes import DimExpr

TORCH_TO_FUEL: dict[torch.dtype, str] = {
    torch.float64: "f64",
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.bool: "i1",
}
FUEL_TO_TORCH = {v: k for k, v in TORCH_TO_FUEL.items()}

Value = Any  # a Tensor, a Python scalar or list, None
Handler = Callable[..., Any]


def fuel_dtype(dt: torch.dtype) -> str:
    if dt not in TORCH_TO_FUEL:
        raise Unsupported(f"dtype {dt} is not supported")
    return TORCH_TO_FUEL[dt]


@dataclass
class Cx:
    """One node's import: the emitter, the node, and its recorded result type."""

    em: Emitter
    node: fx.Node
    weights: dict[str, np.ndarray]
    transposed: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    @property
    def val(self) -> Any:
        return self.node.meta.get("val")

    @property
    def dtype(self) -> str:
        """The fuel dtype torch recorded for the (first) result."""
        v = self.val[0] if isinstance(self.val, list | tuple) else self.val
        return fuel_dtype(v.dtype)

    @property
    def shape(self) -> tuple[Any, ...]:
        """The recorded result shape; a symbolic dim as its dim-symbol expression."""
        symbols = getattr(self.em, "symbols", {})
        return tuple(d if isinstance(d, int) else dim_expr(d, symbols) for d in self.val.shape)

    def op(self, method: str, *xs: Tensor, **kw: object) -> Tensor:
        return self.em.op(method, *xs, **kw)


ATEN: dict[str, Handler] = {}
"""`str(OpOverload)` (e.g. `aten.add.Tensor`) -> handler."""


def aten(*names: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for n in names:
            ATEN[f"aten.{n}"] = fn
        return fn

    return register


# -- helpers ------------------------------------------------------------------------------


def is_tensor(x: Value) -> bool:
    return isinstance(x, np.ndarray) or hasattr(x, "type")


def cast(em: Emitter, x: Tensor, dtype: str) -> Tensor:
    if is_symbolic(x) and dtype in FLOAT_NAMES:  # a size in float arithmetic: a fill
        if x.ndim:
            raise Unsupported(f"a float vector of dim expressions {x.tolist()}")
        return em.at(em.b.iota((), dtype, start=x.item(), step=0.0))
    return x if dtype_of(x) == dtype else em.op("cast", x, dtype=dtype)


def as_tensor(x: Value, dtype: str) -> Tensor:
    """A tensor of `dtype`: scalars become 0-d constants (a size over dim symbols, from
    `sym_size` arithmetic, a 0-d shape value: `cast` gives it the dtype)."""
    if isinstance(x, DimExpr):
        return np.array(x, object)
    return scalar(x, dtype) if not is_tensor(x) else x


def _proxy(x: Value) -> Any:
    if isinstance(x, DimExpr):
        return 1  # a size: a Python int to torch's promotion
    if not is_tensor(x):
        return x
    return torch.empty([1] if shape_of_t(x) else [], dtype=FUEL_TO_TORCH[dtype_of(x)])


def common_dtype(*xs: Value) -> str:
    """torch's promoted dtype of tensors (0-d ones weak) and Python scalars (weak)."""
    ps = [_proxy(x) for x in xs]
    out = ps[0] if is_tensor(xs[0]) else torch.tensor(ps[0])
    for p in ps[1:]:
        out = torch.empty([1] if out.dim() else [], dtype=torch.result_type(out, p))
    return TORCH_TO_FUEL[out.dtype]


def axis(a: int, rank: int) -> int:
    norm = normalize_axis(int(a), max(rank, 1))
    if norm is None:
        raise Unsupported(f"dim {a} is out of range for rank {rank}")
    return norm


def dim_expr(d: Any, symbols: dict[str, str]) -> Any:
    """A torch SymInt as a `DimExpr` over the function's dim symbols (sums, products and
    floor quotients of input `Dim`s; anything else is `Unsupported`)."""
    if isinstance(d, int):
        return d
    expr = getattr(getattr(d, "node", None), "expr", None)

    def conv(e: Any) -> Any:
        if e.is_Integer:
            return int(e)
        if e.is_Symbol and str(e) in symbols:
            return DimExpr.sym(symbols[str(e)])
        if e.is_Add or e.is_Mul:
            out = conv(e.args[0])
            for a in e.args[1:]:
                out = out + conv(a) if e.is_Add else out * conv(a)
            return out
        if type(e).__name__ == "FloorDiv":  # torch.utils._sympy.functions.FloorDiv
            return conv(e.args[0]) // conv(e.args[1])
        raise Unsupported(f"symbolic dim {e} is not a sum or product of input dims")

    if expr is None:
        raise Unsupported(f"dim {d!r} is neither an int nor a symbol")
    return conv(expr)


def reshape(cx: Cx, x: Tensor, shape: Sequence[Any]) -> Tensor:
    """`x` in `shape` (dims may be dim-symbol expressions: `emit.reshape_to`)."""
    return reshape_to(cx.em, x, shape)


# -- elementwise --------------------------------------------------------------------------

UNARY = {
    "neg": "neg",
    "rsqrt": "rsqrt",
    "sqrt": "sqrt",
    "exp": "exp",
    "log": "log",
    "tanh": "tanh",
    "sigmoid": "sigmoid",
    "silu": "silu",
    "relu": "relu",
    "erf": "erf",
    "cos": "cos",
    "sin": "sin",
    "abs": "abs",
    "reciprocal": "recip",
}
"""aten unary op -> GraphBuilder method (float ops compute in the result dtype)."""


def _unary(method: str) -> Handler:
    def unary(cx: Cx, x: Tensor) -> Tensor:
        return cx.op(method, cast(cx.em, x, cx.dtype))

    return unary


for _name, _method in UNARY.items():
    aten(f"{_name}.default")(_unary(_method))


@aten("gelu.default")
def gelu(cx: Cx, x: Tensor, approximate: str = "none") -> Tensor:
    return cx.op("gelu", x, approximate=approximate)


BINARY = {
    "add": "add",
    "sub": "sub",
    "mul": "mul",
    "div": "div",
    "maximum": "max",
    "minimum": "min",
}
BINARY_OVERLOADS = {"maximum": ("default",), "minimum": ("default",)}
"""Overloads per op (default: Tensor and Scalar)."""


def _binary(method: str) -> Handler:
    def binary(cx: Cx, a: Value, b: Value, *, alpha: Value = 1) -> Tensor:
        t = cx.dtype
        if alpha != 1:
            b = cx.op("mul", as_tensor(b, t), scalar(alpha, t)) if is_tensor(b) else b * alpha
        return cx.op(method, cast(cx.em, as_tensor(a, t), t), cast(cx.em, as_tensor(b, t), t))

    return binary


for _name, _method in BINARY.items():
    for _ov in BINARY_OVERLOADS.get(_name, ("Tensor", "Scalar")):
        aten(f"{_name}.{_ov}")(_binary(_method))
aten("max.other")(_binary("max"))  # torch.max(a, b) / torch.min(a, b): elementwise
aten("min.other")(_binary("min"))


@aten("rsub.Scalar", "rsub.Tensor")
def rsub(cx: Cx, a: Value, b: Value, alpha: Value = 1) -> Tensor:
    """b - alpha * a."""
    return (
        _binary("sub")(cx, b, a, alpha=1)
        if alpha == 1
        else _binary("sub")(cx, b, _binary("mul")(cx, a, alpha))
    )


@aten("div.Tensor_mode", "div.Scalar_mode")
def div_mode(cx: Cx, a: Value, b: Value, *, rounding_mode: str | None = None) -> Tensor:
    if rounding_mode is not None:
        raise Unsupported(f"division with rounding_mode='{rounding_mode}' is not supported")
    return _binary("div")(cx, a, b)


@aten("pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar")
def pow_(cx: Cx, a: Value, b: Value) -> Tensor:
    t = cx.dtype
    if t not in FLOAT_NAMES:
        raise Unsupported(f"pow on {t} is not supported (fuel.pow is float only)")
    return cx.op("pow", cast(cx.em, as_tensor(a, t), t), cast(cx.em, as_tensor(b, t), t))


CMP = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}


def _compare(kind: str) -> Handler:
    def compare(cx: Cx, a: Value, b: Value) -> Tensor:
        t = common_dtype(a, b)
        a, b = (cast(cx.em, as_tensor(x, t), t) for x in (a, b))
        return cx.em.apply(lambda g, x, y: g.compare(kind, x, y), a, b)

    return compare


for _name, _kind in CMP.items():
    for _ov in ("Tensor", "Scalar"):
        aten(f"{_name}.{_ov}")(_compare(_kind))


def _bool_only(cx: Cx, *xs: Value) -> None:
    """Bitwise ops are logic only on bools (fuel has no integer bitwise ops)."""
    if "logical" not in str(cx.node.target) and any(
        not is_tensor(x) or dtype_of(x) != "i1" for x in xs
    ):
        raise Unsupported("bitwise ops on integers are not supported (only on bools)")


@aten("logical_not.default", "bitwise_not.default")
def logical_not(cx: Cx, x: Tensor) -> Tensor:
    _bool_only(cx, x)
    return _compare("eq")(cx, cast(cx.em, x, "i1"), False)


@aten(
    "logical_and.default",
    "logical_or.default",
    "bitwise_and.Tensor",
    "bitwise_or.Tensor",
    "__and__.Tensor",
    "__or__.Tensor",
)
def logical_binary(cx: Cx, a: Tensor, b: Tensor) -> Tensor:
    """a and b = a ? b : false; a or b = a ? true : b."""
    _bool_only(cx, a, b)
    a, b = cast(cx.em, a, "i1"), cast(cx.em, b, "i1")
    if "and" in str(cx.node.target):
        return cx.op("where", a, b, scalar(False, "i1"))
    return cx.op("where", a, scalar(True, "i1"), b)


@aten("where.self", "where.ScalarSelf", "where.ScalarOther", "where.Scalar")
def where(cx: Cx, cond: Tensor, a: Value, b: Value) -> Tensor:
    t = cx.dtype
    a, b = (cast(cx.em, as_tensor(x, t), t) for x in (a, b))
    return cx.op("where", cast(cx.em, cond, "i1"), a, b)


@aten("masked_fill.Scalar", "masked_fill.Tensor")
def masked_fill(cx: Cx, x: Tensor, mask: Tensor, value: Value) -> Tensor:
    return where(cx, mask, value, x)


@aten("clamp.default", "clamp_min.default", "clamp_max.default")
def clamp(cx: Cx, x: Tensor, lo: Value = None, hi: Value = None) -> Tensor:
    t, y = cx.dtype, cast(cx.em, x, cx.dtype)
    if str(cx.node.target).startswith("aten.clamp_max"):
        lo, hi = None, lo
    if lo is not None:
        y = cx.op("max", y, cast(cx.em, as_tensor(lo, t), t))
    if hi is not None:
        y = cx.op("min", y, cast(cx.em, as_tensor(hi, t), t))
    return y


@aten("_to_copy.default", "to.dtype", "to.dtype_layout", "to.device")
def to_copy(cx: Cx, x: Tensor, *args: Value, **kw: Value) -> Tensor:
    """A conversion to the node's result dtype; device, layout and memory format are the
    executor's business (a bundle places its tensors), so a `.to(device)` moves nothing."""
    return cast(cx.em, x, cx.dtype)


@aten("type_as.default")
def type_as(cx: Cx, x: Tensor, other: Tensor) -> Tensor:
    """`x.type_as(other)`: a conversion to `other`'s dtype (Gemma's scaled embedding)."""
    return cast(cx.em, x, cx.dtype)


@aten(
    "clone.default",
    "contiguous.default",
    "alias.default",
    "lift_fresh_copy.default",
    "detach_.default",
    "dropout.default",
    "_assert_tensor_metadata.default",
)
def identity(cx: Cx, x: Value, *args: Value, **kw: Value) -> Value:
    """Value-preserving ops (`detach_` only drops autograd history: in place, but no data
    changes); eval-mode dropout; metadata assertions make nothing."""
    if str(cx.node.target) == "aten.dropout.default" and args and args[1] and args[0] > 0:
        raise Unsupported("dropout in training mode (export the model in eval mode)")
    return None if str(cx.node.target).startswith("aten._assert") else x
