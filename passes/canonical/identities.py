"""Arithmetic by an identity constant is its other operand.

Exporters write these: HF's rotary embedding multiplies its cos/sin tables by
`attention_scaling` (1.0 for default rope), which hides the tables from the rope matcher on a
module whose tables are computed at run time (a symbolic `seq`). Each rewrite is exact in IEEE
arithmetic, NaN and infinities included (a NaN stays a NaN; its payload is not kept):

| op | constant | becomes | why exact |
|---|---|---|---|
| `x * c`, `c * x` | every element 1 | x | x * 1 = x for every x, -0 included |
| `x / c` | every element 1 | x | x / 1 = x |
| `x + c`, `c + x` | all -0.0 (floats), 0 (integers) | x | x + (-0) = x; -0 + (+0) = +0 |
| `x - c` | all +0.0 (floats), 0 (integers) | x | x - (+0) = x; -0 - (-0) = +0 |

So a float `x + 0.0` stays: it turns x = -0 into +0. The constant is any splat `fuel.constant`
(a scalar or a tensor), and the result must have x's type and provably x's shape
(`passes.fused.symbolic.same_type`): a constant that broadcasts x to a wider shape, or one
whose values differ (a 1.0 and a 2.0), leaves the op alone.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from fuel_dialect.dtypes import FLOAT_NAMES, dtype_name
from fuel_dialect.ops_elementwise import AddOp, BinaryOp, DivOp, MulOp, SubOp
from passes.fused.patterns import constant_array
from passes.fused.symbolic import same_type


def _splat(c: SSAValue, want: float, negative_zero: bool | None = None) -> bool:
    """`c` is a constant whose every element is `want`; for a zero, `negative_zero` says
    which sign a float constant must have (integers have one zero)."""
    arr = constant_array(c)
    if arr is None or arr.size == 0 or not np.all(arr == want):
        return False
    if negative_zero is None or dtype_name(c.type) not in FLOAT_NAMES:
        return True
    return bool(np.all(np.signbit(arr) == negative_zero))


def _identity(op: BinaryOp) -> SSAValue | None:
    """The operand `op` returns unchanged by the table in the module docstring, or None."""
    sides = [(op.lhs, op.rhs)]
    if isinstance(op, MulOp | AddOp):
        sides.append((op.rhs, op.lhs))
    for x, c in sides:
        if isinstance(op, MulOp | DivOp):
            hit = _splat(c, 1.0)
        else:
            hit = _splat(c, 0.0, negative_zero=isinstance(op, AddOp))
        if hit and same_type(op.result, x):
            return x
    return None


class FoldIdentityArithmetic(RewritePattern):
    """`x * 1`, `1 * x`, `x / 1`, `x + (-0.0)`, `(-0.0) + x`, `x - (+0.0)` -> x."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: BinaryOp, rewriter: PatternRewriter) -> None:
        if not isinstance(op, MulOp | DivOp | AddOp | SubOp):
            return
        if (x := _identity(op)) is not None:
            rewriter.replace(op, [], [x])
