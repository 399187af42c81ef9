"""`fuel.branch`: competing arms that reconverge, and the `fuel.yield` that ends each arm.

A branch holds one region per **arm**; every arm computes the same result types and ends in
`fuel.yield`. Arm 0 is the safe reference that runs when nothing else is chosen. Arms may read
values from the enclosing block, never each other's. Two kinds:

* `variant` — different kernels on one device (e.g. decomposed vs fused); baked at optimize
  time by `fuel-bake-variants`, so none survives optimization but those gated on a `?` dim.
* `placement` — the same work on different devices; left for the runtime picker.

An arm after arm 0 may carry a **gate**, a predicate the executor evaluates per run over the
branch's operands (`$0`, `$1`, ...): `dim($0, 2) == 1`, `value($1) <= 4096`, joined by `&&`.
A gated arm whose gate fails falls back to arm 0. A gate testing a `?` dim (a dim symbol's
size: `fuel-emit-dim-branches`) is decided per input shape: a shape's specialisation collapses
the branch to the arm its sizes select (`static_choice`), and `fuel-bake-variants` leaves it.

    %o = fuel.branch variant (%q, %n : tensor<1x8x1x64xf32>, tensor<i64>) -> tensor<1x8x1x64xf32>
      arm {
        %a = fuel.attention %q, %k, %v scale = 0.125 : ... -> tensor<1x8x1x64xf32>
        fuel.yield %a : tensor<1x8x1x64xf32>
      }
      arm if "dim($0, 2) == 1" {
        ...
      }
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, StringAttr
from xdsl.ir import Attribute, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    prop_def,
    traits_def,
    var_operand_def,
    var_region_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.printer import Printer
from xdsl.rewriter import InsertPoint
from xdsl.traits import HasCanonicalizationPatternsTrait, IsTerminator, OpTrait, Pure
from xdsl.utils.exceptions import VerifyException

from fuel_dialect.base import fail

BRANCH_KINDS = ("variant", "placement")
PICKED_ATTR = "fuel.picked"
"""Discardable attribute: the arm index a route picker chose (default 0)."""

_TERM = re.compile(
    r"\s*(dim\(\$(\d+),\s*(\d+)\)|value\(\$(\d+)\))\s*(==|!=|<=|>=|<|>)\s*(-?\d+)\s*"
)


def parse_gate(text: str) -> list[tuple[str, int, int, str, int]]:
    """`dim($0, 2) == 1 && value($1) <= 4096` -> [(kind, operand, axis, cmp, constant)]."""
    terms = []
    for part in text.split("&&"):
        m = _TERM.fullmatch(part)
        if m is None:
            raise ValueError(
                f"bad gate term '{part.strip()}' (expected dim($i, axis) or "
                "value($i) compared with an integer)"
            )
        if m.group(2) is not None:
            terms.append(("dim", int(m.group(2)), int(m.group(3)), m.group(5), int(m.group(6))))
        else:
            terms.append(("value", int(m.group(4)), 0, m.group(5), int(m.group(6))))
    return terms


class BranchCanonicalization(HasCanonicalizationPatternsTrait):
    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        return (CollapseSingleArmBranch(),)


YIELD_PARENTS = ("fuel.branch", "fuel.c_kernel", "fuel.triton_kernel")
"""The ops whose regions `fuel.yield` ends: a branch's arms and a generated kernel's body."""


class InYieldParent(OpTrait):
    """`HasParent` over `YIELD_PARENTS`, by name: the kernel ops import this module."""

    def verify(self, op: Operation) -> None:
        parent = op.parent_op()
        if parent is not None and parent.name not in YIELD_PARENTS:
            names = ", ".join(f"'{n}'" for n in YIELD_PARENTS)
            raise VerifyException(f"'{op.name}' expects parent op to be one of {names}")


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Ends a branch arm, handing its results to the branch, or a generated kernel's body
    (`fuel.c_kernel`, `fuel.triton_kernel`), naming the values it stores.

    Example: `%r = fuel.branch variant -> tensor<4xf32> arm { fuel.yield %x : tensor<4xf32> }`
    """

    name = "fuel.yield"
    values = var_operand_def()
    traits = traits_def(IsTerminator(), InYieldParent(), Pure())
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, *values: SSAValue):
        super().__init__(operands=[list(values)])


@irdl_op_definition
class BranchOp(IRDLOperation):
    """Competing arms with identical result types; arm 0 is the reference (see module doc).

    Example: `%r = fuel.branch variant -> tensor<4xf32> arm { fuel.yield %x : tensor<4xf32> }`
    """

    name = "fuel.branch"
    gate_operands = var_operand_def()
    arms = var_region_def()
    outs = var_result_def()
    kind = prop_def(StringAttr)
    gates = prop_def(ArrayAttr[StringAttr])
    traits = traits_def(BranchCanonicalization())

    def __init__(
        self,
        kind: str,
        arms: Sequence[Region],
        result_types: Sequence[Attribute],
        gates: Sequence[str] | None = None,
        gate_operands: Sequence[SSAValue] = (),
    ):
        gates = list(gates) if gates is not None else [""] * len(arms)
        super().__init__(
            operands=[list(gate_operands)],
            regions=[list(arms)],
            result_types=[list(result_types)],
            properties={
                "kind": StringAttr(kind),
                "gates": ArrayAttr([StringAttr(g) for g in gates]),
            },
        )

    def gate(self, i: int) -> str:
        return self.gates.data[i].data

    def yielded(self, i: int) -> YieldOp:
        term = self.arms[i].block.last_op
        assert isinstance(term, YieldOp)
        return term

    def verify_(self) -> None:
        if self.kind.data not in BRANCH_KINDS:
            raise fail(
                self, f"kind must be one of {', '.join(BRANCH_KINDS)}, got '{self.kind.data}'"
            )
        if not self.arms:
            raise fail(self, "needs at least one arm")
        if len(self.gates.data) != len(self.arms):
            raise fail(self, f"has {len(self.arms)} arms but {len(self.gates.data)} gates")
        if self.gate(0):
            raise fail(self, "arm 0 is the reference and cannot be gated")
        want = [r.type for r in self.outs]
        for i, arm in enumerate(self.arms):
            term = arm.block.last_op if arm.blocks else None
            if not isinstance(term, YieldOp):
                raise fail(self, f"arm {i} must end with fuel.yield")
            got = [v.type for v in term.values]
            if got != want:
                raise fail(
                    self,
                    f"arm {i} yields ({', '.join(map(str, got))}) but the branch "
                    f"results are ({', '.join(map(str, want))})",
                )
            if self.gate(i):
                self._verify_gate(i)
        self._verify_independent()

    def _verify_gate(self, i: int) -> None:
        try:
            terms = parse_gate(self.gate(i))
        except ValueError as e:
            raise fail(self, f"arm {i}: {e}") from None
        for _, operand, _, _, _ in terms:
            if operand >= len(self.gate_operands):
                raise fail(
                    self,
                    f"arm {i} gate reads ${operand} but the branch has "
                    f"{len(self.gate_operands)} gate operands",
                )

    def _verify_independent(self) -> None:
        owner = {}
        for i, arm in enumerate(self.arms):
            for op in arm.walk():
                for r in op.results:
                    owner[r] = i
        for i, arm in enumerate(self.arms):
            for op in arm.walk():
                for v in op.operands:
                    if owner.get(v, i) != i:
                        where = f"arm {i} reads a value defined in arm {owner[v]}"
                        raise fail(self, f"arms must be independent: {where}")

    @classmethod
    def parse(cls, parser: Parser) -> BranchOp:
        kind = parser.parse_identifier()
        operands: list[SSAValue] = []
        if parser.parse_optional_punctuation("(") is not None:
            names: list[UnresolvedOperand] = parser.parse_comma_separated_list(
                parser.Delimiter.NONE, parser.parse_unresolved_operand
            )
            parser.parse_punctuation(":")
            types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
            parser.parse_punctuation(")")
            operands = parser.resolve_operands(names, types, parser.pos)
        parser.parse_punctuation("->")
        result_types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        arms: list[Region] = []
        gates: list[str] = []
        while parser.parse_optional_keyword("arm") is not None:
            gate = ""
            if parser.parse_optional_keyword("if") is not None:
                gate = parser.parse_str_literal()
            gates.append(gate)
            arms.append(parser.parse_region())
        attrs = parser.parse_optional_attr_dict()
        op = cls(kind, arms, result_types, gates, operands)
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.kind.data}")
        if self.gate_operands:
            printer.print_string(" (")
            printer.print_list(self.gate_operands, printer.print_operand)
            printer.print_string(" : ")
            printer.print_list([v.type for v in self.gate_operands], printer.print_attribute)
            printer.print_string(")")
        printer.print_string(" -> ")
        printer.print_list([r.type for r in self.outs], printer.print_attribute)
        for i, arm in enumerate(self.arms):
            printer.print_string(" arm ")
            if self.gate(i):
                printer.print_string("if ")
                printer.print_string_literal(self.gate(i))
                printer.print_string(" ")
            printer.print_region(arm)
        printer.print_op_attributes(self.attributes)


class CollapseSingleArmBranch(RewritePattern):
    """A branch with one arm is no choice: inline the arm (canonicalization)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: BranchOp, rewriter: PatternRewriter) -> None:
        if len(op.arms) != 1:
            return
        term = op.yielded(0)
        values = list(term.values)
        rewriter.erase(term)
        rewriter.inline_block(op.arms[0].block, InsertPoint.before(op))
        rewriter.replace(op, [], values)


def collapse_branch(branch: BranchOp, index: int) -> None:
    """Replace `branch` by arm `index` (a baked or single-arm branch): the arm's ops move
    before the branch, its yielded values replace the results, the other arms are dropped."""
    from xdsl.rewriter import Rewriter

    term = branch.yielded(index)
    values = list(term.values)
    Rewriter.erase_op(term)
    Rewriter.inline_block(branch.arms[index].block, InsertPoint.before(branch))
    Rewriter.replace_op(branch, [], values)


GATE_COMPARE = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    ">": lambda a, b: a > b,
}
"""A gate term's comparison by its text (the executor's gate walk uses it too)."""


def _gate_dims(branch: BranchOp, i: int) -> list[tuple[int, str, int]] | None:
    """Arm `i`'s gate as (dim size, comparison, constant) per term (-1: a `?` dim), or None
    when a term reads a value (known only at run time)."""
    out = []
    for kind, j, axis, cmp, const in parse_gate(branch.gate(i)) if branch.gate(i) else []:
        t = branch.gate_operands[j].type
        if kind != "dim" or not hasattr(t, "get_shape"):
            return None
        out.append((t.get_shape()[axis], cmp, const))  # pyright: ignore[reportAttributeAccessIssue]
    return out


def has_dynamic_gate(branch: BranchOp) -> bool:
    """Does a gate of `branch` test a `?` dim (a size only a run, or a shape's
    specialisation, knows)?"""
    return any(d < 0 for i in range(1, len(branch.arms)) for d, _, _ in _gate_dims(branch, i) or [])


def static_choice(branch: BranchOp, picked: int) -> int | None:
    """The arm a run takes when arm `picked` is picked and its gate tests only static dims:
    `picked` if the gate holds, else arm 0; None when the gate reads a value or a `?` dim."""
    terms = _gate_dims(branch, picked)
    if terms is None or any(d < 0 for d, _, _ in terms):
        return None
    return picked if all(GATE_COMPARE[cmp](d, c) for d, cmp, c in terms) else 0
