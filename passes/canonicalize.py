"""`fuel-canonicalize`: bring exporter variants to the one form the fused-op matchers know.

Small, idempotent rewrites (MLIR's canonicalize, fuel's own ops), run by `fuel-optimize` before
the picker and `fuel-fuse-patterns`:

* `div(1, sqrt(y))` and `recip(sqrt(y))` -> `rsqrt(y)`; `div(x, sqrt(y))` -> `mul(x, rsqrt(y))`.
  The ONNX exporters write RMSNorm's `torch.rsqrt` as Sqrt + Div or Reciprocal; the rms_norm
  and layer_norm matchers look for `rsqrt`. The sqrt must have no other user (it goes).
* `pow(x, c)` for c in {1, 2, 3, 0.5, -0.5, -1} -> x, x*x, x*x*x, sqrt, rsqrt, recip
  (`passes.canonical.powers`, with what each does to the value).
* GELU (erf and tanh forms) -> `fuel.gelu`, `x * sigmoid(x)` -> `fuel.silu`, an activation
  moved above a reshape (`passes.canonical.activations`).
* transpose of transpose, reshape of reshape, identity ones (`passes.canonical.movement`).
* `x * 1`, `x / 1`, `x + (-0.0)`, `x - 0` -> x, exactly (`passes.canonical.identities`).
* `reduce_sum(v) / N` and `* (1/N)` -> `reduce_mean(v)` (`passes.canonical.reductions`).
* a product by a constant matrix read only through column slices -> one product per slice, by
  the weight's columns (`passes.canonical.products`: Phi-3's fused gate-up projection).

Each rewrite keeps the value's meaning: rsqrt is computed in a wider type and rounded once, so
it is at least as accurate as the two roundings of 1 / sqrt it replaces.

    %s = fuel.sqrt %y : tensor<4x1xf32>
    %r = fuel.div %one, %s : tensor<f32>, tensor<4x1xf32> -> tensor<4x1xf32>
  becomes
    %r = fuel.rsqrt %y : tensor<4x1xf32>
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from fuel_dialect.ops_elementwise import DivOp, MulOp, RecipOp, RsqrtOp, SqrtOp
from passes.canonical.activations import FoldGelu, FoldMulSigmoid, HoistActivationAboveReshape
from passes.canonical.identities import FoldIdentityArithmetic
from passes.canonical.movement import FoldReshapeOfReshape, FoldTransposeOfTranspose
from passes.canonical.powers import SpellPowByConstant
from passes.canonical.products import SliceProductByColumns
from passes.canonical.reductions import FoldSumByCountToMean
from passes.fused.patterns import scalar_constant


def _lone_sqrt(v: SSAValue) -> SqrtOp | None:
    """The `fuel.sqrt` defining `v` when `v` has exactly one user, else None."""
    if not isinstance(v, OpResult) or not isinstance(v.owner, SqrtOp):
        return None
    return v.owner if v.has_one_use() else None


def _rsqrt(sqrt: SqrtOp) -> RsqrtOp:
    return RsqrtOp.create(operands=[sqrt.operands[0]], result_types=[sqrt.results[0].type])


class RecipSqrtToRsqrt(RewritePattern):
    """recip(sqrt(y)) -> rsqrt(y)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: RecipOp, rewriter: PatternRewriter) -> None:
        sqrt = _lone_sqrt(op.operands[0])
        if sqrt is None or op.results[0].type != sqrt.results[0].type:
            return
        rewriter.replace(op, _rsqrt(sqrt))
        rewriter.erase(sqrt)


class DivSqrtToMulRsqrt(RewritePattern):
    """div(1, sqrt(y)) -> rsqrt(y); div(x, sqrt(y)) -> mul(x, rsqrt(y))."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: DivOp, rewriter: PatternRewriter) -> None:
        sqrt = _lone_sqrt(op.rhs)
        if sqrt is None:
            return
        rsqrt = _rsqrt(sqrt)
        new: list[Operation] = [rsqrt]
        one = scalar_constant(op.lhs) == 1.0 and op.results[0].type == rsqrt.results[0].type
        if not one:
            new.append(
                MulOp.create(operands=[op.lhs, rsqrt.results[0]], result_types=[op.results[0].type])
            )
        rewriter.replace(op, new, [new[-1].results[0]])
        rewriter.erase(sqrt)


PATTERNS: tuple[type[RewritePattern], ...] = (
    FoldIdentityArithmetic,
    RecipSqrtToRsqrt,
    DivSqrtToMulRsqrt,
    SpellPowByConstant,
    FoldGelu,
    FoldMulSigmoid,
    HoistActivationAboveReshape,
    FoldTransposeOfTranspose,
    FoldReshapeOfReshape,
    FoldSumByCountToMean,
    SliceProductByColumns,
)
"""Every rewrite, in the order tried on each op."""


def canonicalize_patterns() -> list[RewritePattern]:
    """Fresh instances of `PATTERNS` (MLIR's populate*Patterns), for another pass to reuse."""
    return [p() for p in PATTERNS]


def canonicalize(module: ModuleOp) -> None:
    """Apply every rewrite of this module's docstring until none applies."""
    walker = PatternRewriteWalker(GreedyRewritePatternApplier(canonicalize_patterns()))
    walker.rewrite_module(module)


@dataclass(frozen=True)
class CanonicalizePass(ModulePass):
    """`fuel-canonicalize`: see the module docstring."""

    name = "fuel-canonicalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        canonicalize(op)
