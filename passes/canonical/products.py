"""A product by a constant matrix read only through column slices: one product per slice.

Exporters of models that fuse projections (Phi-3's `gate_up_proj`, `qkv_proj`) write one
product by the concatenated weight, then slice its columns: `matmul(x, [wg | wu])[..., :F]`
and `[..., F:]`. The fused-op matchers know the unfused form (Llama's `gate_proj` and
`up_proj`: `gated_mlp`), so each slice becomes the product by the weight's columns it keeps:

    %p = fuel.matmul %x, %w : tensor<1x12x64xf32>, tensor<64x352xf32> -> tensor<1x12x352xf32>
    %g = fuel.slice %p starts = [0, 0, 0] limits = [1, 12, 176] steps = [1, 1, 1] : ...
  becomes
    %wg = fuel.slice %w starts = [0, 0] limits = [64, 176] steps = [1, 1] : ...
    %g = fuel.matmul %x, %wg : tensor<1x12x64xf32>, tensor<64x176xf32> -> tensor<1x12x176xf32>

Only where every reader of the product is such a slice (unit steps, every element of the other
dims) and the slices together take at most the weight's columns: no output is computed twice.
The weight's slice is a view of a constant (no copy at run time; a kernel that packs weights
packs each slice once). Each output element is the same dot product of a row of x and a column
of w as before: fuel's products compute one FMA chain per output in k order, so the values
are bit-identical. The whole product goes when its last slice is rewritten (the walker's DCE).
"""

from __future__ import annotations

from xdsl.dialects.builtin import DenseArrayBase, i64
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from fuel_dialect.dtypes import dtype_name, shape_of, tensor_type
from fuel_dialect.ops_movement import ConstantOp, SliceOp, WeightOp
from fuel_dialect.ops_nn import MatmulOp
from passes.fused.patterns import linear

_TO_THE_END = 2**31
"""A limit at least this large keeps a dynamic dim whole (exporters write INT64_MAX)."""


def columns(s: SliceOp) -> tuple[int, int] | None:
    """(start, stop) of the unit-step columns `s` keeps of its input's last dim, where it keeps
    every element of the other dims; else None."""
    lo, hi, steps = s.bounds()
    dims = shape_of(s.input.type)
    if dims[-1] < 0 or steps[-1] != 1:
        return None
    for a, b, c, d in zip(lo[:-1], hi[:-1], steps[:-1], dims[:-1], strict=True):
        if c != 1 or a != 0 or b < (d if d >= 0 else _TO_THE_END):
            return None
    return lo[-1], hi[-1]


def _column_slice(w: SSAValue, start: int, stop: int) -> SliceOp:
    k = shape_of(w.type)[0]
    bounds = {"starts": [0, start], "limits": [k, stop], "steps": [1, 1]}
    return SliceOp.create(
        operands=[w],
        result_types=[tensor_type([k, stop - start], dtype_name(w.type))],
        properties={key: DenseArrayBase.from_list(i64, v) for key, v in bounds.items()},
    )


class SliceProductByColumns(RewritePattern):
    """slice(matmul(x, w), columns) -> matmul(x, slice(w, columns)), w a constant matrix."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: SliceOp, rewriter: PatternRewriter) -> None:
        mm = linear(op.input)  # a float product by a matrix
        if mm is None or not isinstance(mm.rhs.owner, WeightOp | ConstantOp):
            return
        n = shape_of(mm.rhs.type)[1]
        taken = 0
        for use in mm.result.uses:
            user = use.operation
            cols = columns(user) if isinstance(user, SliceOp) else None
            if cols is None:
                return
            taken += cols[1] - cols[0]
        mine = columns(op)
        if mine is None or taken > n or mine == (0, n):
            return
        w = _column_slice(mm.rhs, *mine)
        product = MatmulOp.create(operands=[mm.lhs, w.result], result_types=[op.result.type])
        rewriter.replace(op, [w, product])
