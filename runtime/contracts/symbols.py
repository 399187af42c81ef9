"""Shape symbols of cost expressions and shape constraints, bound from operand shapes.

Every operand `x` (inputs then outputs, as the contract names them) offers `x.numel`,
`x.bytes` (numel x bytes per element of its dtype), `x.rank` and `x.dim[i]` (negative `i`
counts from the end). Generic symbols: `n` (elements of the first output), `b` (bytes per
element of the first output), `io_bytes` (every operand once). An op may add geometry symbols
(`GEOMETRY`), which shadow the generic ones: matmul binds `m`, `n`, `k` and `batch`. A bare
name is always a symbol and an operand is always followed by an attribute, so operands may be
called `a`, `b` or `n` without ambiguity.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from runtime.contracts.expr import Accessor, Expr, ExprError, Ref, Resolver, compile_expr
from runtime.cost import dtype_bytes

Shapes = Sequence[Sequence[int]]
Dtypes = Sequence[str]


def _numel(shape: Sequence[int]) -> int:
    return math.prod(int(d) for d in shape)


def _matmul_geometry(first: int, out: int) -> dict[str, Accessor]:
    """`(..., m, k) x (..., k, n)`: batch is the product of the output's batch dims."""
    return {
        "m": lambda s, d: s[first][-2],
        "k": lambda s, d: s[first][-1],
        "n": lambda s, d: s[out][-1],
        "batch": lambda s, d: _numel(s[out][:-2]),
    }


GEOMETRY: Mapping[str, Callable[[int, int], dict[str, Accessor]]] = {
    "matmul": _matmul_geometry,
}
"""op -> (index of the first input, index of the first output) -> geometry symbols."""

OPERAND_ATTRS = ("numel", "bytes", "rank", "dim")


def operand_accessor(index: int, ref: Ref) -> Accessor | None:
    """`x.numel | x.bytes | x.rank | x.dim[i]` of the operand at `index`; None if malformed."""
    match ref:
        case ("numel",):
            return lambda s, d: _numel(s[index])
        case ("bytes",):
            return lambda s, d: _numel(s[index]) * dtype_bytes(d[index])
        case ("rank",):
            return lambda s, d: len(s[index])
        case ("dim", int(i)):
            return lambda s, d: s[index][i]
    return None


def make_resolver(op: str, operands: Sequence[str], n_inputs: int) -> Resolver:
    """A resolver over the named operands (inputs first) plus the generic and op symbols."""
    index = {name: i for i, name in enumerate(operands)}
    out = n_inputs
    names: dict[str, Accessor] = {
        "n": lambda s, d: _numel(s[out]),
        "b": lambda s, d: dtype_bytes(d[out]),
        "io_bytes": lambda s, d: sum(_numel(x) * dtype_bytes(t) for x, t in zip(s, d, strict=True)),
    }
    if op in GEOMETRY:
        names.update(GEOMETRY[op](0, out))

    def resolve(ref: Ref) -> Accessor | None:
        # Syntactic: a bare name is a shape symbol, an operand always carries an attribute
        # (`b` is bytes per element even when an operand is named `b`; that one is `b.bytes`).
        head, rest = ref[0], ref[1:]
        if not isinstance(head, str):
            return None
        if rest:
            return operand_accessor(index[head], rest) if head in index else None
        return names.get(head)

    return resolve


# -- shape constraints -------------------------------------------------------------------------

_NAMED = re.compile(r"^(?P<kind>same_as|broadcasts_to)\s*=\s*(?P<name>[A-Za-z_]\w*)$")
ShapeCheck = Callable[[Shapes, Dtypes], bool]


@dataclass(frozen=True)
class ShapeConstraint:
    """One constraint on an input's shape, as written, and its compiled check."""

    source: str
    check: ShapeCheck


def compile_constraint(
    source: str, subject: int, operands: Sequence[str], resolve: Resolver
) -> ShapeConstraint:
    """`same_as=NAME`, `broadcasts_to=NAME` or `EXPR == EXPR`; `ExprError` otherwise."""
    m = _NAMED.match(source.strip())
    if m:
        if m.group("name") not in operands:
            raise ExprError(f"unknown operand '{m.group('name')}' in '{source}'", unknown=True)
        other = list(operands).index(m.group("name"))
        if m.group("kind") == "same_as":
            return ShapeConstraint(source, lambda s, d: tuple(s[subject]) == tuple(s[other]))
        return ShapeConstraint(source, lambda s, d: _broadcasts(s[subject], s[other]))
    left, sep, right = source.partition("==")
    if not sep or "==" in right:
        raise ExprError(f"a constraint is same_as=X, broadcasts_to=X or A == B, got '{source}'")
    a, b = compile_expr(left.strip(), resolve), compile_expr(right.strip(), resolve)
    return ShapeConstraint(source, lambda s, d: _equal(a, b, s, d))


def _broadcasts(shape: Sequence[int], target: Sequence[int]) -> bool:
    try:
        return np.broadcast_shapes(tuple(shape), tuple(target)) == tuple(target)
    except ValueError:
        return False


def _equal(a: Expr, b: Expr, s: Shapes, d: Dtypes) -> bool:
    try:
        return a(s, d) == b(s, d)
    except (IndexError, ZeroDivisionError, OverflowError):
        return False
