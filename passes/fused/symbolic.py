"""Shape facts for the matchers: a value's dims as ints or expressions of the dim symbols.

A pattern that needs two values to have one shape (a norm's input and its result, rope's
table rows and x's, attention's key and value lengths) asks here rather than comparing types:
two `?` dims are one type but not one dim (`seq` and `batch` are both `?`). `dims_of` gives
each `?` its expression over the function's symbols (`fuel_dialect.shapes.symbolic_shapes`,
the argument's `fuel.dim_names` through the ops' shape rules); a `?` with no expression (a
value outside a function, a function whose shapes do not propagate) is a dim equal to no
other. So two dims are equal when both are the same int or their expressions are provably
equal (the canonical polynomial forms are equal); otherwise a pattern does not apply and the
op is left alone.
"""

from __future__ import annotations

import weakref
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from fuel_dialect.dims import arg_symbols, is_symbolic
from fuel_dialect.shapes import Dim, ShapeError, symbolic_shapes


class UnknownDim:
    """A `?` dim nothing is known about: equal only to itself (a fresh one per lookup)."""

    def __repr__(self) -> str:
        return "?"

    def _fresh(self, *_: Any) -> UnknownDim:
        return UnknownDim()

    __add__ = __radd__ = __mul__ = __rmul__ = __floordiv__ = __sub__ = __rsub__ = _fresh


_CACHE: weakref.WeakKeyDictionary[func.FuncOp, dict[SSAValue, tuple[Dim, ...]]] = (
    weakref.WeakKeyDictionary()
)
"""Per function, the symbolic shapes last computed; recomputed when a value is missing (one
made by a rewrite since). A value's shape never changes: rewrites keep result types."""


def _function(v: SSAValue) -> func.FuncOp | None:
    op: Operation | None = v.owner if isinstance(v.owner, Operation) else v.owner.parent_op()
    while op is not None and not isinstance(op, func.FuncOp):
        op = op.parent_op()
    return op


def _symbolic(v: SSAValue) -> tuple[Dim, ...] | None:
    f = _function(v)
    if f is None or not _all_named(f):
        return None
    shapes = _CACHE.get(f)
    if shapes is None or v not in shapes:
        try:
            shapes = symbolic_shapes(f)
        except (ShapeError, KeyError, TypeError, ValueError, AssertionError):
            shapes = {}
        _CACHE[f] = shapes
    return shapes.get(v)


def _all_named(f: func.FuncOp) -> bool:
    """Every `?` of `f`'s arguments names its symbol: an unnamed `?` says nothing (and
    `arg_symbols` would give every one the same placeholder name)."""
    return is_symbolic(f) and all("?" not in s for s in arg_symbols(f))


def dims_of(v: SSAValue) -> tuple[Any, ...]:
    """`v`'s shape: each static dim its int, each `?` its expression over the function's dim
    symbols, or an `UnknownDim` where none is known."""
    t = v.type
    assert isinstance(t, TensorType)
    shape = tuple(t.get_shape())
    if all(d >= 0 for d in shape):
        return shape
    sym = _symbolic(v)
    if sym is None or len(sym) != len(shape):
        return tuple(d if d >= 0 else UnknownDim() for d in shape)
    return tuple(d if d >= 0 else s for d, s in zip(shape, sym, strict=True))


def same_dims(a: SSAValue, b: SSAValue) -> bool:
    """`a` and `b` have provably one shape (`dims_of`); the same value always does."""
    return a is b or dims_of(a) == dims_of(b)


def same_type(a: SSAValue, b: SSAValue) -> bool:
    """`a` and `b` have one type and provably one shape: what `a.type == b.type` means to a
    pattern over static shapes."""
    return a.type == b.type and same_dims(a, b)
