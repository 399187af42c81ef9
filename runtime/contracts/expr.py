"""Cost and shape expressions: a tiny, safe arithmetic language compiled once to closures.

Grammar (Python precedence; `**` binds right, tighter than unary minus on its left):

    expr    := term (('+' | '-') term)*
    term    := unary (('*' | '/' | '//' | '%') unary)*
    unary   := ('-' | '+') unary | power
    power   := postfix ('**' unary)?
    postfix := atom ('.' NAME | '[' ['-'] INT ']')*
    atom    := NUMBER | NAME | ('min' | 'max') '(' expr (',' expr)* ')' | '(' expr ')'

Names are resolved at compile time through a `resolve(path)` callback that turns a reference
(`("n",)`, `("x", "dim", -1)`, `("a", "bytes")`) into an accessor of the operand shapes and
dtypes, or returns None for an unknown name. Nothing is ever passed to `eval`.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Shapes = Sequence[Sequence[int]]
Dtypes = Sequence[str]
Accessor = Callable[[Shapes, Dtypes], float]
Ref = tuple[str | int, ...]
Resolver = Callable[[Ref], Accessor | None]

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:_\d+)*(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)"
    r"|(?P<name>[A-Za-z_]\w*)|(?P<op>\*\*|//|[-+*/%().,\[\]]))"
)
MAX_EXPONENT = 64
"""Largest |exponent| of `**`: cost formulas need squares and cubes, not 10**10**10."""


class ExprError(ValueError):
    """A syntax error (`unknown` is False) or an unbound name (`unknown` is True)."""

    def __init__(self, message: str, unknown: bool = False) -> None:
        self.unknown = unknown
        super().__init__(message)


def _pow(a: float, b: float) -> float:
    if abs(b) > MAX_EXPONENT:
        raise OverflowError(f"exponent {b} exceeds {MAX_EXPONENT}")
    return a**b


_BINARY: dict[str, Callable[[float, float], float]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": _pow,
}
_FUNCS: dict[str, Callable[..., float]] = {"min": min, "max": max}


@dataclass(frozen=True)
class Expr:
    """A compiled expression: `source` as written, `refs` it reads, `fn` evaluates it."""

    source: str
    refs: tuple[Ref, ...]
    fn: Accessor

    def __call__(self, shapes: Shapes, dtypes: Dtypes) -> float:
        return self.fn(shapes, dtypes)


def compile_expr(source: str | int | float, resolve: Resolver) -> Expr:
    """Parse and compile `source`; `ExprError` on a syntax error or an unbound name."""
    if isinstance(source, bool):
        raise ExprError(f"expected an expression, got the boolean {source}")
    if isinstance(source, int | float):
        value = float(source)
        return Expr(str(source), (), lambda s, d: value)
    parser = _Parser(source, resolve)
    fn = parser.expr()
    if parser.peek() is not None:
        raise ExprError(f"unexpected '{parser.peek()}' in '{source}'")
    return Expr(source, tuple(parser.refs), fn)


class _Parser:
    def __init__(self, source: str, resolve: Resolver) -> None:
        self.source, self.resolve = source, resolve
        self.tokens = self._lex(source)
        self.pos = 0
        self.refs: list[Ref] = []

    @staticmethod
    def _lex(source: str) -> list[tuple[str, str]]:
        out, i = [], 0
        while i < len(source):
            if source[i:].strip() == "":
                break
            m = _TOKEN.match(source, i)
            if not m:
                raise ExprError(f"unexpected character '{source[i:].strip()[0]}' in '{source}'")
            kind = m.lastgroup or ""
            out.append((kind, m.group(kind)))
            i = m.end()
        if not out:
            raise ExprError("empty expression")
        return out

    def peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def take(self, want: str | None = None) -> tuple[str, str]:
        if self.pos >= len(self.tokens):
            raise ExprError(f"unexpected end of '{self.source}'")
        tok = self.tokens[self.pos]
        if want is not None and tok[1] != want:
            raise ExprError(f"expected '{want}', got '{tok[1]}' in '{self.source}'")
        self.pos += 1
        return tok

    def expr(self) -> Accessor:
        return self._chain(self.term, ("+", "-"))

    def term(self) -> Accessor:
        return self._chain(self.unary, ("*", "/", "//", "%"))

    def _chain(self, sub: Callable[[], Accessor], ops: tuple[str, ...]) -> Accessor:
        left = sub()
        while self.peek() in ops:
            left = _bin(_BINARY[self.take()[1]], left, sub())
        return left

    def unary(self) -> Accessor:
        if self.peek() in ("-", "+"):
            sign = self.take()[1]
            inner = self.unary()
            return (lambda s, d: -inner(s, d)) if sign == "-" else inner
        return self.power()

    def power(self) -> Accessor:
        base = self.postfix()
        if self.peek() == "**":
            self.take()
            return _bin(_pow, base, self.unary())
        return base

    def postfix(self) -> Accessor:
        kind, text = self.take()
        if kind == "num":
            value = float(text.replace("_", ""))
            return lambda s, d: value
        if text == "(":
            inner = self.expr()
            self.take(")")
            return inner
        if kind != "name":
            raise ExprError(f"unexpected '{text}' in '{self.source}'")
        if text in _FUNCS and self.peek() == "(":
            return self._call(_FUNCS[text])
        ref: list[str | int] = [text]
        while self.peek() in (".", "["):
            if self.take()[1] == ".":
                kind, attr = self.take()
                if kind != "name":
                    raise ExprError(f"expected a name after '.', got '{attr}' in '{self.source}'")
                ref.append(attr)
            else:
                ref.append(self._index())
        return self._resolve(tuple(ref))

    def _index(self) -> int:
        neg = self.peek() == "-"
        if neg:
            self.take()
        kind, text = self.take()
        if kind != "num" or not text.isdigit():
            raise ExprError(f"an index is an integer, got '{text}' in '{self.source}'")
        self.take("]")
        return -int(text) if neg else int(text)

    def _call(self, fn: Callable[..., float]) -> Accessor:
        self.take("(")
        args = [self.expr()]
        while self.peek() == ",":
            self.take()
            args.append(self.expr())
        self.take(")")
        return lambda s, d: fn(a(s, d) for a in args)

    def _resolve(self, ref: Ref) -> Accessor:
        accessor = self.resolve(ref)
        if accessor is None:
            spelled = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in ref)[1:]
            raise ExprError(f"unknown symbol '{spelled}' in '{self.source}'", unknown=True)
        self.refs.append(ref)
        return accessor


def _bin(fn: Callable[[float, float], float], a: Accessor, b: Accessor) -> Accessor:
    return lambda s, d: fn(a(s, d), b(s, d))
