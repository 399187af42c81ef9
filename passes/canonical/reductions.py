"""A sum divided by its element count is a mean.

`div(reduce_sum(v), N)` and `mul(reduce_sum(v), 1/N)` (either order), N the number of elements
each sum adds, become `reduce_mean(v)` over the same axes: how norms written as `sum / N` reach
the rms_norm / layer_norm matchers, which look for `reduce_mean`. The mean kernel is the same
sum divided by N (one rounding), so `div` keeps its value and `mul` by the rounded 1/N (two
roundings) can only get closer to the mean. The sum must be read only here (it goes).
"""

from __future__ import annotations

import math

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from fuel_dialect.dtypes import FLOAT_NAMES, dtype_name, shape_of
from fuel_dialect.ops_elementwise import DivOp, MulOp
from fuel_dialect.ops_nn import ReduceMeanOp, ReduceSumOp
from passes.fused.patterns import close_to, producer, scalar_constant


def _count(red: ReduceSumOp) -> int:
    s = shape_of(red.input.type)
    return math.prod(s[a] for a in red.norm_axes())


def _sum_over(v: SSAValue, scale: float | None, divide: bool) -> ReduceSumOp | None:
    """The float reduce_sum defining `v`, read once, when `scale` (its divisor if `divide`,
    else its factor) is its element count N (or 1/N)."""
    red = producer(v, ReduceSumOp)
    if red is None or scale is None or not v.has_one_use():
        return None
    if dtype_name(v.type) not in FLOAT_NAMES or not red.norm_axes():
        return None
    n = _count(red)
    return red if (scale == n if divide else close_to(scale, 1.0 / n, v)) else None


class FoldSumByCountToMean(RewritePattern):
    """reduce_sum(v) / N or reduce_sum(v) * (1/N) -> reduce_mean(v), same axes and keepdim."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        red = None
        if isinstance(op, DivOp):
            red = _sum_over(op.lhs, scalar_constant(op.rhs), True)
        elif isinstance(op, MulOp):
            red = _sum_over(op.lhs, scalar_constant(op.rhs), False) or _sum_over(
                op.rhs, scalar_constant(op.lhs), False
            )
        if red is None or op.results[0].type != red.result.type:
            return
        mean = ReduceMeanOp.create(
            operands=[red.input], result_types=[red.result.type], properties=dict(red.properties)
        )
        rewriter.replace(op, mean)
