"""`pow(x, c)` with a constant exponent c in {1, 2, 3, 0.5, -0.5, -1} as the ops it spells.

Exporters write `x.pow(2)`, `pow(x, 3)` (GPT-2's GELU), `pow(x, 0.5)` for sqrt. fuel's `pow`
kernel is a generic float power (f64 `np.power` for f32): ~20x the cost of a product, and the
generated C has no vectorised emitter for it. What each rewrite does to the value (f32, u the
unit roundoff 2^-24; the pow kernel is faithful, <= 1 ulp):

| exponent | becomes | value |
|---|---|---|
| 1 | x | exact |
| 2 | x * x | correctly rounded (<= 0.5 ulp): at least as good |
| 3 | (x * x) * x | two roundings: relative error <= 2u + u^2, so <= 2 ulp where pow is <= 1 |
| -1 | recip(x) | correctly rounded: at least as good |
| 0.5 | sqrt(x) | correctly rounded; but sqrt(-0) = -0 where pow gives +0, sqrt(-inf) = NaN |
| -0.5 | rsqrt(x) | fuel's rsqrt is faithful; rsqrt(-0) = -inf where pow gives +inf, (-inf) NaN |

Over- and underflow happen where pow's do, up to the rounding above (x * x overflows only when
x^3 does too, for |x| > 1); the tensor tests check the table against float64.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from fuel_dialect.ops_elementwise import MulOp, PowOp, RecipOp, RsqrtOp, SqrtOp
from passes.fused.patterns import scalar_constant


def _mul(a: SSAValue, b: SSAValue) -> Operation:
    return MulOp.create(operands=[a, b], result_types=[a.type])


def _unary(cls: type[Operation]) -> Callable[[SSAValue], list[Operation]]:
    return lambda x: [cls.create(operands=[x], result_types=[x.type])]


def _cube(x: SSAValue) -> list[Operation]:
    sq = _mul(x, x)
    return [sq, _mul(sq.results[0], x)]


SPELLED: dict[float, Callable[[SSAValue], list[Operation]]] = {
    1.0: lambda x: [],
    2.0: lambda x: [_mul(x, x)],
    3.0: _cube,
    -1.0: _unary(RecipOp),
    0.5: _unary(SqrtOp),
    -0.5: _unary(RsqrtOp),
}
"""exponent -> the ops computing x ** exponent (the last one's value; none: x itself)."""


class SpellPowByConstant(RewritePattern):
    """pow(x, c) -> the ops of `SPELLED[c]` when c is a one-element constant there and the
    result has x's type (an exponent that broadcasts x up stays a pow)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: PowOp, rewriter: PatternRewriter) -> None:
        spell = SPELLED.get(scalar_constant(op.rhs))  # pyright: ignore[reportArgumentType]
        if spell is None or op.result.type != op.lhs.type:
            return
        new = spell(op.lhs)
        rewriter.replace(op, new, [new[-1].results[0] if new else op.lhs])
