"""Shape rules: every result dim of an op as an expression of its operands' dims.

A dim is an `int` or a `DimExpr` over the function's dim symbols (`fuel_dialect.dims`). The
rules are written once over both: run on symbols they give each value's shape as expressions
(`symbolic_shapes`), run on the ints a run binds they give the concrete shapes that
specialise the function (`infer_shapes`, `runtime.shape_specialize`). Where a rule can only
be checked at run time (a `?` broadcast against 4 must be 1 or 4; a slice of a `?` dim), the
symbolic form keeps an opaque term (`bcast`, `slice`, `div`) evaluated when the symbols bind,
and the concrete form raises `ShapeError` when the bound shapes do not fit.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Block, Operation, SSAValue

from fuel_dialect.base import fail
from fuel_dialect.dims import arg_symbols, function_dims
from fuel_dialect.dtypes import DYNAMIC, normalize_axis
from fuel_dialect.ops_elementwise import BinaryOp, UnaryOp
from fuel_dialect.ops_nn import ReduceOp

Atom = Union[str, tuple]  # noqa: UP007  a symbol name, or (kind, *args) evaluated at run time
Monomial = tuple[Atom, ...]


class ShapeError(ValueError):
    """Shapes that do not fit an op's rule (found when a run binds the dim symbols)."""


@dataclass(frozen=True)
class DimExpr:
    """A polynomial with integer coefficients over atoms: dim symbols and opaque terms.

    `terms` maps each monomial (a sorted tuple of atoms) to its coefficient; equal
    expressions have equal terms, so `==` is structural equality of the canonical form.
    """

    terms: tuple[tuple[Monomial, int], ...]

    @staticmethod
    def sym(name: str) -> DimExpr:
        return DimExpr((((name,), 1),))

    @staticmethod
    def make(terms: Mapping[Monomial, int]) -> Dim:
        kept = tuple(sorted(((m, c) for m, c in terms.items() if c), key=repr))
        if not kept:
            return 0
        if len(kept) == 1 and kept[0][0] == ():
            return kept[0][1]
        return DimExpr(kept)

    def __add__(self, other: Dim) -> Dim:
        out = dict(self.terms)
        for m, c in _terms(other):
            out[m] = out.get(m, 0) + c
        return DimExpr.make(out)

    __radd__ = __add__

    def __mul__(self, other: Dim) -> Dim:
        out: dict[Monomial, int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in _terms(other):
                m = tuple(sorted((*m1, *m2), key=repr))
                out[m] = out.get(m, 0) + c1 * c2
        return DimExpr.make(out)

    __rmul__ = __mul__

    def __neg__(self) -> Dim:
        return self * -1

    def __sub__(self, other: Dim) -> Dim:
        return self + (-1) * other

    def __rsub__(self, other: Dim) -> Dim:
        return (-1) * self + other

    def __floordiv__(self, other: Dim) -> Dim:
        if not isinstance(other, DimExpr):
            other = operator.index(other)  # numpy integers too
        if isinstance(other, int) and other and all(c % other == 0 for _, c in self.terms):
            return DimExpr.make({m: c // other for m, c in self.terms})
        return opaque("floordiv", self, other)

    def __str__(self) -> str:
        parts = []
        for m, c in self.terms:
            names = "*".join(_atom_str(a) for a in m)
            parts.append(f"{c}" if not m else names if c == 1 else f"{c}*{names}")
        return " + ".join(parts)

    def evaluate(self, env: Mapping[str, int]) -> int:
        """The value at `env` (symbol -> int); `ShapeError` where an opaque term does not
        fit (a broadcast of unequal dims, a division that leaves a remainder)."""
        return sum(c * math.prod(_eval_atom(a, env) for a in m) for m, c in self.terms)


Dim = Union[int, DimExpr]  # noqa: UP007
Shape = tuple[Dim, ...]


def _terms(d: Dim) -> tuple[tuple[Monomial, int], ...]:
    return d.terms if isinstance(d, DimExpr) else (((), int(d)),)


def _atom_str(a: Atom) -> str:
    return a if isinstance(a, str) else f"{a[0]}({', '.join(map(str, a[1:]))})"


def evaluate(d: Dim, env: Mapping[str, int]) -> int:
    return d.evaluate(env) if isinstance(d, DimExpr) else d


def _eval_atom(a: Atom, env: Mapping[str, int]) -> int:
    if isinstance(a, str):
        return env[a]
    kind, *args = a
    vals = [evaluate(x, env) if isinstance(x, DimExpr | int) else x for x in args]
    return _OPAQUE[kind](*vals)


def opaque(kind: str, *args: Any) -> Dim:
    """`kind(*args)` now when every dim argument is an int, else a term evaluated later."""
    if all(not isinstance(x, DimExpr) for x in args):
        return _OPAQUE[kind](*args)
    if kind == "slice" and args[1] == 0 and args[3] == 1:
        d, limit = args[0], args[2]
        if limit == d or (isinstance(limit, int) and limit >= TO_END):
            return d  # x[0:] and x[0:len(x)] are all of x
    return DimExpr((((((kind, *args),)), 1),))


TO_END = 2**62
"""A slice limit at least this large means "to the end" of any dim fuel can hold."""


def _bcast(a: int, b: int) -> int:
    if a == b or b == 1:
        return a
    if a == 1:
        return b
    raise ShapeError(f"dims {a} and {b} do not broadcast")


def _div(a: int, b: int) -> int:
    if b == 0 or a % b:
        raise ShapeError(f"{a} elements do not split into parts of {b}")
    return a // b


def _slice_len(d: int, start: int, limit: int, step: int) -> int:
    return len(range(*slice(start, limit, step).indices(d)))


_OPAQUE: dict[str, Callable[..., int]] = {
    "bcast": _bcast,
    "div": _div,
    "floordiv": lambda a, b: a // b,
    "slice": _slice_len,
}
OPAQUE_TERMS = frozenset(_OPAQUE)
"""The function-like terms of a dim expression's text (`div(e, n)`...): not dim symbols."""


# -- rules ------------------------------------------------------------------------------------


def broadcast(*shapes: Shape) -> Shape:
    """numpy broadcasting over dims that may be expressions."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        d: Dim = 1
        for x in dims:
            d = x if d == 1 else d if (x == 1 or x == d) else opaque("bcast", d, x)
        out.append(d)
    return tuple(out)


def _declared(op: Operation, i: int = 0) -> Shape:
    t = op.results[i].type
    assert isinstance(t, TensorType)
    return tuple(t.get_shape())


def _same(op: Operation, ins: Sequence[Shape]) -> list[Shape]:
    return [ins[0]]


def _binary(op: Operation, ins: Sequence[Shape]) -> list[Shape]:
    return [broadcast(*ins)]


def _matmul(op: Operation, ins: Sequence[Shape]) -> list[Shape]:
    a, b = ins[0], ins[1]
    _require_equal(a[-1], b[-2], "matmul contraction dims")
    return [(*broadcast(a[:-2], b[:-2]), a[-2], b[-1])]


def _reduce(op: Any, ins: Sequence[Shape]) -> list[Shape]:
    s = ins[0]
    axes = {normalize_axis(a, len(s)) for a in op.axes.get_values()}
    keep = op.keepdim is not None
    return [tuple(1 if i in axes else d for i, d in enumerate(s) if keep or i not in axes)]


def _transpose(op: Any, ins: Sequence[Shape]) -> list[Shape]:
    return [tuple(ins[0][p] for p in op.perm.get_values())]


def _reshape(op: Operation, ins: Sequence[Shape]) -> list[Shape]:
    """The declared shape, its `?` dims solved from the element count: one `?` is the count
    over the static dims; several take the input's dynamic dims in order (those not ints, or
    `?` in its declared type once a run binds them) when the other dims of both sides have
    equal products."""
    src, out = ins[0], _declared(op)
    holes = [i for i, d in enumerate(out) if d < 0]
    known = math.prod(d for d in out if d >= 0)
    if not holes:
        _require_equal(_prod(src), known, "reshape element count")
        return [out]
    res: list[Dim] = list(out)
    if len(holes) == 1:
        res[holes[0]] = _split(_prod(src), known)
        return [tuple(res)]
    declared = _type_shape(op.operands[0])
    is_dyn = [
        not isinstance(d, int) or (len(declared) == len(src) and declared[k] < 0)
        for k, d in enumerate(src)
    ]
    dyn = [d for d, y in zip(src, is_dyn, strict=True) if y]
    static_in = math.prod(d for d, y in zip(src, is_dyn, strict=True) if not y)
    if len(dyn) != len(holes) or static_in != known:
        raise ShapeError(
            f"reshape to {_fmt(out)} has {len(holes)} dynamic dims the input {_fmt(src)} "
            "does not determine"
        )
    for i, d in zip(holes, dyn, strict=True):
        res[i] = d
    return [tuple(res)]


def _reshape_written(op: Any, src: Shape, env: Mapping[str, Dim]) -> Shape:
    """A reshape whose result dims are written in dim symbols (its `dims`), at `env`; the
    element counts must be equal (as expressions, or as ints once a run binds them)."""
    out: list[Dim] = []
    for e, d in zip(op.dims.data, _declared(op), strict=True):
        if d >= 0:
            out.append(d)
            continue
        try:
            out.append(substitute(parse_dim(e.data), env) if env else parse_dim(e.data))
        except KeyError as k:
            raise ShapeError(f"dim symbol {k} is not bound") from None
    _require_equal(_prod(src), _prod(out), "reshape element count")
    return tuple(out)


def _split(total: Dim, part: int) -> Dim:
    if isinstance(total, DimExpr) and all(c % part == 0 for _, c in total.terms):
        return DimExpr.make({m: c // part for m, c in total.terms})
    return opaque("div", total, part)


def _prod(s: Shape) -> Dim:
    out: Dim = 1
    for d in s:
        out = out * d
    return out


def _broadcast_to(op: Operation, ins: Sequence[Shape]) -> list[Shape]:
    """The declared shape; a `?` dim is the input's dim there, which must be `?` too (a
    static 1 cannot say how far it broadcasts: importers broadcast against a fill then)."""
    src, out = ins[0], _declared(op)
    src_type = tuple(op.operands[0].type.get_shape())  # type: ignore[attr-defined]
    off = len(out) - len(src)
    res: list[Dim] = []
    for i, d in enumerate(out):
        s = src[i - off] if i >= off else 1
        if d < 0:
            if i < off or src_type[i - off] >= 0:
                raise ShapeError(f"broadcast to {_fmt(out)}: dim {i} is dynamic, the input's 1")
            res.append(s)
        else:
            if s != 1:
                _require_equal(s, d, f"broadcast dim {i}")
            res.append(d)
    return [tuple(res)]


def _slice(op: Any, ins: Sequence[Shape]) -> list[Shape]:
    vals = [tuple(a.get_values()) for a in (op.starts, op.limits, op.steps)]
    return [tuple(opaque("slice", d, *b) for d, *b in zip(ins[0], *vals, strict=True))]


def _concat(op: Any, ins: Sequence[Shape]) -> list[Shape]:
    axis = normalize_axis(op.axis.value.data, len(ins[0]))
    assert axis is not None
    for s in ins[1:]:
        for i, (a, b) in enumerate(zip(ins[0], s, strict=True)):
            if i != axis:
                _require_equal(a, b, f"concat dim {i}")
    total: Dim = 0
    for s in ins:
        total = total + s[axis]
    return [tuple(total if i == axis else d for i, d in enumerate(ins[0]))]


def _gather(op: Any, ins: Sequence[Shape]) -> list[Shape]:
    d, idx = ins[0], ins[1]
    axis = normalize_axis(op.axis.value.data, len(d))
    assert axis is not None
    return [(*d[:axis], *idx, *d[axis + 1 :])]


def _index_copy(op: Any, ins: Sequence[Shape]) -> list[Shape]:
    d, s, ix = ins[0], ins[1], ins[2]
    axis = normalize_axis(op.axis.value.data, len(d))
    assert axis is not None
    _require_equal(s[axis], ix[0], "index_copy source rows and index length")
    for k, (o, a, b) in enumerate(zip(op.offsets.get_values(), s, d, strict=True)):
        if k != axis and isinstance(a, int) and isinstance(b, int) and o + a > b:
            raise ShapeError(f"index_copy source dim {k} ({a} at offset {o}) exceeds dest ({b})")
    return [tuple(d)]


def _attention(op: Operation, ins: Sequence[Shape]) -> list[Shape]:
    q, k, v = ins[0], ins[1], ins[2]
    _require_equal(k[2], v[2], "attention key and value lengths")
    return [(q[0], q[1], q[2], v[3])]


def _linear(op: Operation, ins: Sequence[Shape]) -> list[Shape]:
    x, w = ins[0], ins[1] if op.name == "fuel.matmul_bias_act" else ins[3]
    _require_equal(x[-1], ins[1][0], "input features and weight rows")
    return [(*x[:-1], w[-1])]


def _static(op: Operation, ins: Sequence[Shape]) -> list[Shape]:
    return [_declared(op, i) for i in range(len(op.results))]


def _require_equal(a: Dim, b: Dim, what: str) -> None:
    if isinstance(a, int) and isinstance(b, int) and a != b:
        raise ShapeError(f"{what} differ: {a} vs {b}")


def _fmt(s: Sequence[Any]) -> str:
    return "x".join("?" if isinstance(d, int) and d < 0 else str(d) for d in s)


_SAME = (
    "fuel.cast fuel.softmax fuel.rms_norm fuel.layer_norm fuel.rope fuel.copy fuel.evict "
    "fuel.reload"
)
RULES: dict[str, Callable[[Any, Sequence[Shape]], list[Shape]]] = {
    **dict.fromkeys(_SAME.split(), _same),
    "fuel.where": _binary,
    "fuel.matmul": _matmul,
    "fuel.transpose": _transpose,
    "fuel.reshape": _reshape,
    "fuel.broadcast": _broadcast_to,
    "fuel.slice": _slice,
    "fuel.concat": _concat,
    "fuel.gather": _gather,
    "fuel.index_copy": _index_copy,
    "fuel.attention": _attention,
    "fuel.matmul_bias_act": _linear,
    "fuel.gated_mlp": _linear,
    "fuel.constant": _static,
    "fuel.weight": _static,
}
"""Shape rule per op name; unary, binary, compare and reduce ops are added by family below."""


def rule_for(op: Operation) -> Callable[[Any, Sequence[Shape]], list[Shape]] | None:
    """The op's shape rule, or None (then only fully static result types are accepted)."""
    if op.name in RULES:
        return RULES[op.name]

    for base, fn in ((UnaryOp, _same), (BinaryOp, _binary), (ReduceOp, _reduce)):
        if isinstance(op, base):
            return fn
    return None


def infer(op: Operation, ins: Sequence[Shape], env: Mapping[str, Dim] | None = None) -> list[Shape]:
    """Result shapes of `op` from its operands' shapes (ints, expressions or both); `env`
    gives each dim symbol's value (an int, or `DimExpr.sym` for symbolic shapes) to ops whose
    shape is written in symbols (`fuel.iota`)."""
    if op.name == "fuel.iota":
        try:
            return [tuple(op.dims(env or {}))]  # type: ignore[attr-defined]
        except KeyError as e:
            raise ShapeError(f"dim symbol {e} is not bound") from None
    if op.name == "fuel.reshape" and op.attributes.get("dims") is not None:
        return [_reshape_written(op, ins[0], env or {})]
    rule = rule_for(op)
    if rule is not None:
        return rule(op, ins)
    declared = [_declared(op, i) for i in range(len(op.results))]
    if any(d < 0 for s in declared for d in s if isinstance(d, int)):
        raise ShapeError(f"'{op.name}' has dynamic result dims and no shape rule")
    return declared


def propagate(
    block: Block, shapes: dict[SSAValue, Shape], env: Mapping[str, Dim] | None = None
) -> dict[SSAValue, Shape]:
    """Fill `shapes` (seeded with the block's arguments) with every value defined in `block`,
    nested regions included; a region-holding op's results are its first region's yielded
    values (arm 0 of a `fuel.branch`: every arm yields the same types). Each result's
    shape is checked against its declared type's static dims (`ShapeError` naming the op)."""
    for op in block.ops:
        if op.regions:
            for r in op.regions:
                for b in r.blocks:
                    propagate(b, shapes, env)
            term = op.regions[0].blocks[0].last_op
            outs = [shapes[v] for v in term.operands] if term is not None else []
        elif not op.results:
            continue
        else:
            ins = [shapes[v] if v in shapes else _type_shape(v) for v in op.operands]
            try:
                outs = infer(op, ins, env)
            except ShapeError as e:
                raise ShapeError(f"'{op.name}': {e}") from None
        for r, s in zip(op.results, outs, strict=True):
            shapes[r] = _merge_declared(op, r, s)
    return shapes


def _type_shape(v: SSAValue) -> Shape:
    return tuple(v.type.get_shape()) if isinstance(v.type, TensorType) else ()


def _merge_declared(op: Operation, r: SSAValue, s: Shape) -> Shape:
    """`s` with the static dims of `r`'s declared type (a static dim is a fact the rest of
    the function may rely on); `ShapeError` where an int of `s` contradicts one."""
    want = _type_shape(r)
    if len(want) != len(s) or any(
        a >= 0 and isinstance(b, int) and a != b for a, b in zip(want, s, strict=True)
    ):
        raise ShapeError(f"'{op.name}' result is {_fmt(s)} here, its type says {_fmt(want)}")
    return tuple(a if a >= 0 else b for a, b in zip(want, s, strict=True))


def symbolic_shapes(f: Any) -> dict[SSAValue, Shape]:
    """Every value's shape in `f` (a `func.func`) over its dim symbols (`fuel_dialect.dims`)."""

    shapes: dict[SSAValue, Shape] = {}
    for a, syms in zip(f.body.block.args, arg_symbols(f), strict=True):
        shapes[a] = tuple(DimExpr.sym(d) if isinstance(d, str) else d for d in syms)
    env = {name: DimExpr.sym(name) for name in function_dims(f)}
    return propagate(f.body.block, shapes, env)


DIM_HINT = 64
"""The size a cost model assumes for a `?` dim whose symbol has no hint: a symbol's typical
value, clamped to its range (the picker prices kernels at one shape; where the best kernel
changes across a symbol's range, a later step branches on it)."""


def cost_shape(t: Any) -> tuple[int, ...]:
    """A tensor type's shape with each `?` dim at `DIM_HINT`: the shape costs are priced at
    where a value's symbols are unknown (`cost_shapes` prices each symbol at its hint)."""
    return tuple(d if d >= 0 else DIM_HINT for d in t.get_shape())


def symbol_hints(f: Any, given: Mapping[str, int] | None = None) -> dict[str, int]:
    """The size each dim symbol of `f` is priced at: `given[name]` (`--hint seq=128`) or
    `DIM_HINT`, clamped to the symbol's declared range (hints for symbols `f` does not
    declare are ignored: `unknown_hints` finds them)."""
    given = given or {}
    return {
        name: min(max(given.get(name, DIM_HINT), lo), hi)
        for name, (lo, hi) in function_dims(f).items()
    }


def unknown_hints(functions: Sequence[Any], given: Mapping[str, int]) -> str | None:
    """Why `given` names a symbol no function of `functions` declares, or None."""
    declared = {name for f in functions for name in function_dims(f)}
    unknown = sorted(set(given) - declared)
    if not unknown:
        return None
    known = ", ".join(sorted(declared)) or "none"
    return f"hint for undeclared dim symbol(s) {', '.join(unknown)} (declared: {known})"


def cost_shapes(f: Any, hints: Mapping[str, int] | None = None) -> dict[SSAValue, tuple[int, ...]]:
    """Every value's shape in `f` with its dim symbols at their hints (`symbol_hints`): the
    shapes a cost model prices. Empty for a function without symbols; a value whose shape
    rule cannot be evaluated at the hints (a broadcast that holds only at other sizes) is left
    out (`cost_shape` prices it)."""
    env = symbol_hints(f, hints)
    if not env:
        return {}
    out: dict[SSAValue, tuple[int, ...]] = {}
    for v, s in symbolic_shapes(f).items():
        try:
            out[v] = tuple(evaluate(d, env) for d in s)
        except (ShapeError, KeyError, ZeroDivisionError):
            continue
    return out


__all__ = [
    "DYNAMIC",
    "DimExpr",
    "Dim",
    "Shape",
    "ShapeError",
    "broadcast",
    "cost_shapes",
    "evaluate",
    "infer",
    "symbol_hints",
    "unknown_hints",
]


# -- dim expressions written as text (`fuel.iota`'s shape, `fuel.reshape`'s dims) -----------

_TOKEN = re.compile(r"\s*(-?\d+|[a-z_][a-z0-9_]*|[()*+,])")


def expr_symbols(text: str) -> set[str]:
    """The dim symbols a dim expression names."""
    return set(re.findall(r"[a-z_][a-z0-9_]*", text)) - OPAQUE_TERMS


def parse_dim(text: str, op: Any = None) -> Any:
    """An expression of dim symbols (`DimExpr.__str__`'s syntax: integers, names, `*`, `+`,
    and `div(e, n)`, `slice(e, a, b, c)`, `bcast(e, e)` terms) -> int or `DimExpr`."""

    tokens = [t for t in _TOKEN.findall(text)]
    if "".join(tokens) != re.sub(r"\s+", "", text) or not tokens:
        raise _bad(text, op)
    pos = 0

    def atom() -> Any:
        nonlocal pos
        tok = tokens[pos]
        pos += 1
        if re.fullmatch(r"-?\d+", tok):
            return int(tok)
        if pos < len(tokens) and tokens[pos] == "(":
            pos += 1
            args = [expr()]
            while tokens[pos] == ",":
                pos += 1
                args.append(expr())
            if tokens[pos] != ")":
                raise _bad(text, op)
            pos += 1
            return opaque(tok, *args)
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", tok):
            raise _bad(text, op)
        return DimExpr.sym(tok)

    def term() -> Any:
        nonlocal pos
        v = atom()
        while pos < len(tokens) and tokens[pos] == "*":
            pos += 1
            v = v * atom()
        return v

    def expr() -> Any:
        nonlocal pos
        v = term()
        while pos < len(tokens) and tokens[pos] == "+":
            pos += 1
            v = v + term()
        return v

    try:
        out = expr()
    except (IndexError, KeyError):
        raise _bad(text, op) from None
    if pos != len(tokens):
        raise _bad(text, op)
    return out


def substitute(d: Any, env: Mapping[str, Any]) -> Any:
    """`d` (int or `DimExpr`) with each symbol replaced by `env[name]` (int or `DimExpr`)."""

    if not isinstance(d, DimExpr):
        return d
    total: Any = 0
    for mono, c in d.terms:
        v: Any = c
        for a in mono:
            if isinstance(a, str):
                v = v * env[a]
            else:
                v = v * opaque(a[0], *(substitute(x, env) for x in a[1:]))
        total = total + v
    return total


def _bad(text: str, op: Any) -> Exception:
    msg = f"invalid dim expression '{text}'"
    return fail(op, msg) if op is not None else ValueError(msg)
