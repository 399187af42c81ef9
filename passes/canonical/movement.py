"""Reshapes and transposes that compose or cancel.

* transpose(transpose(x, p), q) -> transpose(x, p[q]), or x where that is the identity;
  a transpose by the identity permutation -> its input.
* reshape(reshape(x)) -> reshape(x), or x where the shapes agree; a reshape to its input's own
  shape -> the input; with `?` dims only where the shapes are provably one
  (`passes.fused.symbolic`): `?x?` to `?x?` may swap `seq` and `batch`.

Pure data movement: the values are bit-identical. The inner op goes when nothing else reads it
(the walker's DCE). fuel's matmul has no transpose attribute, so no transpose folds into one.
"""

from __future__ import annotations

from xdsl.dialects.builtin import DenseArrayBase, i64
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from fuel_dialect.ops_movement import ReshapeOp, TransposeOp
from passes.fused.patterns import producer
from passes.fused.symbolic import same_type


class FoldTransposeOfTranspose(RewritePattern):
    """transpose(transpose(x, p), q) -> transpose(x, p[q]); identity transposes -> x."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: TransposeOp, rewriter: PatternRewriter) -> None:
        q = tuple(op.perm.get_values())
        x, perm = op.input, q
        if (inner := producer(op.input, TransposeOp)) is not None:
            p = tuple(inner.perm.get_values())
            x, perm = inner.input, tuple(p[i] for i in q)
        if perm == tuple(range(len(perm))):
            rewriter.replace(op, [], [x])
        elif inner is not None:
            new = TransposeOp.create(
                operands=[x],
                result_types=[op.result.type],
                properties={"perm": DenseArrayBase.from_list(i64, perm)},
            )
            rewriter.replace(op, new)


class FoldReshapeOfReshape(RewritePattern):
    """reshape(reshape(x)) -> reshape(x); a reshape to its input's type -> the input."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: ReshapeOp, rewriter: PatternRewriter) -> None:
        inner = producer(op.input, ReshapeOp)
        x = inner.input if inner is not None else op.input
        if same_type(x, op.result):
            rewriter.replace(op, [], [x])
        elif inner is not None:
            written = {"dims": op.dims} if op.dims is not None else {}  # the result's, kept
            new = ReshapeOp.create(operands=[x], result_types=[op.result.type], attributes=written)
            rewriter.replace(op, new)
