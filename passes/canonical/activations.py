"""Activations written out as primitives -> the one op fuel has for them.

* GELU, erf and tanh forms in any operand order (`passes.fused.patterns.gelu_of`) ->
  `fuel.gelu` / `fuel.gelu tanh`. The gelu kernel is computed in f64 and rounded once
  (faithful), where the chain rounds ~6-8 times in f32: the value only gets closer to GELU.
* `x * sigmoid(x)` -> `fuel.silu`: again one rounding (the silu kernel is f64 inside) for two.
* `act(reshape(y))` -> `reshape(act(y))` for gelu, silu and relu: elementwise ops commute
  with a reshape (bit-identical), and the matmul + bias + activation matcher then finds the
  activation right on `add(matmul(x, w), b)` (GPT-2's Conv1D reshapes to 2-D and back).

Interior values must be read only inside the match (else the match would compute them twice);
the matched primitives become dead and go (the walker's DCE).
"""

from __future__ import annotations

from xdsl.dialects.builtin import UnitAttr
from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from fuel_dialect.ops_elementwise import DivOp, GeluOp, MulOp, ReluOp, SigmoidOp, SiluOp
from fuel_dialect.ops_movement import ReshapeOp
from passes.fused.patterns import gelu_of, producer


class FoldGelu(RewritePattern):
    """0.5 * y * (1 + erf(y / sqrt 2)) -> gelu(y); 0.5 * y * (1 + tanh(sqrt(2/pi) (y +
    0.044715 y^3))) -> gelu(y) tanh. The root is the outermost mul (or div by 2)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, MulOp | DivOp) or (found := gelu_of(op.result)) is None:
            return
        y, form, _ = found
        props = {"tanh": UnitAttr()} if form == "tanh" else {}
        rewriter.replace(op, GeluOp.create(operands=[y], result_types=[y.type], properties=props))


class FoldMulSigmoid(RewritePattern):
    """x * sigmoid(x) (either order) -> silu(x), the sigmoid read only here."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: MulOp, rewriter: PatternRewriter) -> None:
        for x, s in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            sig = producer(s, SigmoidOp)
            if sig is None or sig.input != x or not s.has_one_use() or op.result.type != x.type:
                continue
            rewriter.replace(op, SiluOp.create(operands=[x], result_types=[x.type]))
            return


class HoistActivationAboveReshape(RewritePattern):
    """act(reshape(y)) -> reshape(act(y)) for gelu / silu / relu, the reshape read only here."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, GeluOp | SiluOp | ReluOp):
            return
        r = producer(op.input, ReshapeOp)
        if r is None or not op.input.has_one_use():
            return
        y = r.input
        act = type(op).create(operands=[y], result_types=[y.type], properties=dict(op.properties))
        written = {"dims": r.dims} if r.dims is not None else {}  # the same result dims
        back = ReshapeOp.create(
            operands=[act.results[0]], result_types=[op.result.type], attributes=written
        )
        rewriter.replace(op, [act, back], [back.results[0]])
