"""Generated C for fusion groups with reductions over the last axis: one row-wise kernel.

A group (`lowering.fusion.fusion_groups` with reductions admitted) over the space
`(..., N)` whose reductions all reduce the last axis of a value over the whole space, keeping
it (`keepdim`), is one kernel: a loop over the rows (the leading dims), and per row

    phase 0: one pass over j < N computing the elementwise ops the first reductions read,
             accumulating them; then the per-row values (the reductions' results and the ops
             on them alone, e.g. sqrt(var + eps)), computed once;
    phase 1: the next pass, computing what depends on those (exp(x - max)), accumulating ...
    last:    the outputs over the row.

Every member value is a *row* value (last dim N) or a *per-row* value (last dim 1). A row value
a later phase needs is recomputed there (same operations, same bits) rather than buffered. Its
level is the number of reductions on its longest path from the inputs; a row value of level p
is computed in phase p, a reduction of a level-p row value accumulates in phase p and gives a
level p + 1 per-row value.

Numerics (checked against float64 in tests/lowering/test_cpu_codegen_rows.py): f32 sums and means
accumulate in double on 8 interleaved lanes (j mod 8), combined pairwise in a fixed order and
rounded once (the mean: the double sum divided by N, rounded once), so each is within 1 ulp of
the exact result of its f32 terms for N < 2^20, where numpy's pairwise f32 sum can lose ~log2 N
bits; max and min are exact and propagate NaN (a tie of -0 and +0 may give either). The
elementwise ops are `lowering.cpu.codegen`'s, including its `c-vecmath` functions. Those are
not numpy's bits, so `convert-fuel-to-c` forms these groups only when no precision floor is
stated, like the `c-vecmath` replacements.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue

from fuel_dialect.dtypes import dtype_name, shape_of
from fuel_dialect.ops_nn import ReduceMaxOp, ReduceMeanOp, ReduceMinOp, ReduceOp, ReduceSumOp
from lowering.fusion import FusionGroup, op_key

LANES = 16
"""Interleaved accumulators per reduction (fixed: the summation order is part of the kernel)."""
REDUCE_DTYPES = ("f32",)
BUFFER = 8192
"""Longest row whose expensive values are kept in a stack buffer (32 KiB of f32 each)."""
EXPENSIVE = (
    "exp",
    "log",
    "tanh",
    "sin",
    "cos",
    "sigmoid",
    "silu",
    "erf",
    "gelu",
    "gelu_tanh",
    "pow",
)
"""Ops worth a buffer store and load rather than a second evaluation."""


def row_reduction(op: Operation) -> bool:
    """A reduction a row kernel computes: f32 sum/mean/max/min over the last axis (of rank >= 1
    and size > 1), keeping it."""
    if not isinstance(op, ReduceSumOp | ReduceMeanOp | ReduceMaxOp | ReduceMinOp):
        return False
    s = shape_of(op.input.type)
    return (
        dtype_name(op.input.type) in REDUCE_DTYPES
        and len(s) >= 1
        and s[-1] > 1
        and op.keepdim is not None
        and op.norm_axes() == (len(s) - 1,)
    )


@dataclass
class RowPlan:
    """Which member values are row values, their levels, and what each phase computes."""

    group: FusionGroup
    level: dict[SSAValue, int] = field(default_factory=dict)
    row: set[SSAValue] = field(default_factory=set)
    phases: int = 0
    buffered: list[SSAValue] = field(default_factory=list)
    """Row values of an expensive op that later passes read from a per-row buffer (`BUFFER`)
    instead of computing them again."""

    def is_row(self, v: SSAValue) -> bool:
        return v in self.row

    def loop_ops(self, p: int) -> list[Operation]:
        """The elementwise ops phase `p`'s loop computes (in group order): the row values the
        level-p reductions and the level-p row outputs read, transitively."""
        need: set[Operation] = set()
        for v in self.wanted(p):
            op = v.owner
            if v not in self.row or not isinstance(op, Operation) or op in need:
                continue
            if v in self.buffered and self.level[v] < p:
                continue
            if op not in self.group.ops or isinstance(op, ReduceOp):
                continue
            need.add(op)
        return [op for op in self.group.ops if op in need]

    def wanted(self, p: int) -> list[SSAValue]:
        """Every value phase `p` reads or writes, transitively down to what is available."""
        todo = [op.input for op in self.reductions(p)]
        todo += [v for v in self.group.outputs if v in self.row and self.level[v] == p]
        todo += [v for v in self.buffered if self.level[v] == p]
        seen: list[SSAValue] = []
        while todo:
            v = todo.pop()
            if v in seen:
                continue
            seen.append(v)
            op = v.owner
            if v not in self.row or not isinstance(op, Operation) or op not in self.group.ops:
                continue
            if isinstance(op, ReduceOp) or (v in self.buffered and self.level[v] < p):
                continue
            todo.extend(op.operands)
        return seen

    def loads(self, p: int) -> list[SSAValue]:
        """Buffered values of earlier passes that phase `p` reads."""
        return [v for v in self.buffered if self.level[v] < p and v in self.wanted(p)]

    def reductions(self, p: int) -> list[ReduceOp]:
        return [
            op for op in self.group.ops if isinstance(op, ReduceOp) and self.level[op.input] == p
        ]

    def row_scalar_ops(self, p: int) -> list[Operation]:
        """Per-row elementwise ops of level `p` (computed once per row before phase p)."""
        return [
            op
            for op in self.group.ops
            if not isinstance(op, ReduceOp)
            and op.results[0] not in self.row
            and self.level[op.results[0]] == p
        ]


def row_plan(group: FusionGroup) -> RowPlan | None:
    """The row plan of `group`, or None when it is not a row group: no reduction, one that
    `row_reduction` refuses, one whose input does not cover the whole space, or a space whose
    last dim is 1."""
    reds = [op for op in group.ops if isinstance(op, ReduceOp)]
    space = group.space
    if not reds or not space or space[-1] == 1:
        return None
    plan = RowPlan(group)
    n, rank = space[-1], len(space)

    def last(v: SSAValue) -> int:
        s = shape_of(v.type)
        return s[-1] if s and len(s) == rank else (s[-1] if s else 1)

    for v in (*group.inputs, *group.splats):
        plan.level[v] = 0
        if last(v) == n:
            plan.row.add(v)
    for op in group.ops:
        if isinstance(op, ReduceOp):
            if not row_reduction(op) or shape_of(op.input.type) != space:
                return None
            plan.level[op.result] = plan.level[op.input] + 1
            continue
        lv = max((plan.level[v] for v in op.operands), default=0)
        plan.level[op.results[0]] = lv
        if last(op.results[0]) == n:
            plan.row.add(op.results[0])
    plan.phases = 1 + max(plan.level[v] for v in plan.row)
    if n <= BUFFER:
        plan.buffered = [
            op.results[0]
            for op in group.ops
            if op_key(op) in EXPENSIVE
            and op.results[0] in plan.row
            and any(
                op.results[0] in plan.wanted(q)
                for q in range(plan.level[op.results[0]] + 1, plan.phases)
            )
        ]
    return plan


def row_op_count(plan: RowPlan) -> dict[str, int]:
    """op key -> how many times per point the kernel computes it (recomputation included),
    "reduce": the reductions, "pass": the passes over the row: what
    `lowering.cpu.codegen.c_pays_off` prices."""
    out: dict[str, int] = {"reduce": 0, "pass": plan.phases}
    for p in range(plan.phases):
        for op in plan.loop_ops(p):
            out[op_key(op)] = out.get(op_key(op), 0) + 1
        out["reduce"] += len(plan.reductions(p))
    return out
