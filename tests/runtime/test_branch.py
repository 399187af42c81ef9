"""fuel.branch: independence check, single-arm canonicalization, executor gates and picks,
and fuel-bake-variants' choice rules."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, i64
from xdsl.ir import Block, Region
from xdsl.utils.exceptions import VerifyException

from fuel_dialect import ops_elementwise as ew
from fuel_dialect.branch import PICKED_ATTR, BranchOp, YieldOp, parse_gate
from fuel_dialect.dtypes import tensor_type
from passes.bake_variants import BakeVariantsPass
from runtime.executor import Executor
from runtime.module import FuelModule
from runtime.work_items import gate_holds

T4 = "tensor<4xf32>"

BRANCHY = f"""
func.func @main(%x: {T4}, %n: tensor<i64>) -> {T4} {{
  %r = fuel.branch placement (%x, %n : {T4}, tensor<i64>) -> {T4} arm {{
    %a = fuel.exp %x : {T4}
    fuel.yield %a : {T4}
  }} arm if "value($1) <= 16" {{
    %b = fuel.exp %x : {T4}
    %c = fuel.neg %b : {T4}
    fuel.yield %c : {T4}
  }}
  %s = fuel.add %r, %x : {T4}, {T4} -> {T4}
  func.return %s : {T4}
}}
"""


def run(m: FuelModule, n: int) -> np.ndarray:
    x = np.arange(4, dtype=np.float32)
    return Executor(m).run({"x": x, "n": np.array(n)})["out0"]


def test_executor_runs_arm0_unless_an_arm_is_picked_and_its_gate_holds() -> None:
    m = FuelModule.parse(BRANCHY)
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(run(m, 3), np.exp(x) + x, rtol=1e-6)
    branch = next(op for op in m.op.walk() if isinstance(op, BranchOp))
    branch.attributes[PICKED_ATTR] = IntegerAttr(1, i64)
    ex = Executor(m)
    np.testing.assert_allclose(
        ex.run({"x": x, "n": np.array(3)})["out0"], -np.exp(x) + x, rtol=1e-6
    )
    # the same compiled executor falls back to arm 0 when the gate fails at run time
    np.testing.assert_allclose(
        ex.run({"x": x, "n": np.array(99)})["out0"], np.exp(x) + x, rtol=1e-6
    )


def test_gates() -> None:
    terms = parse_gate("dim($0, 2) == 1 && value($1) <= 4096")
    q1, q5 = np.zeros((1, 8, 1, 64)), np.zeros((1, 8, 5, 64))
    assert gate_holds(terms, [q1, np.array(100)])
    assert not gate_holds(terms, [q5, np.array(100)])
    assert not gate_holds(terms, [q1, np.array(5000)])
    with pytest.raises(ValueError, match="bad gate term"):
        parse_gate("q.seq == 1")


def test_arms_must_be_independent() -> None:
    x_block = Block(arg_types=[tensor_type((4,), "f32")])
    x = x_block.args[0]
    a0 = Block()
    neg = ew.NegOp.create(operands=[x], result_types=[x.type])
    a0.add_ops([neg, YieldOp(neg.results[0])])
    a1 = Block()
    a1.add_op(YieldOp(neg.results[0]))  # reads arm 0's value
    branch = BranchOp("variant", [Region(a0), Region(a1)], [x.type])
    x_block.add_op(branch)
    with pytest.raises(VerifyException, match="arms must be independent: arm 1 reads a value"):
        branch.verify()


def test_single_arm_branch_canonicalizes_away() -> None:
    from xdsl.transforms.canonicalize import CanonicalizePass

    m = FuelModule.parse(f"""
func.func @main(%x: {T4}) -> {T4} {{
  %r = fuel.branch placement -> {T4} arm {{
    %a = fuel.neg %x : {T4}
    fuel.yield %a : {T4}
  }}
  func.return %r : {T4}
}}""")
    CanonicalizePass().apply(Context(), m.op)
    assert [op.name for op in m.entry.body.block.ops] == ["fuel.neg", "func.return"]


def softmax_variant(n: int, extra_arm: str = "") -> str:
    t = f"tensor<{n}x{n}xf32>"
    r = f"tensor<{n}x1xf32>"
    return f"""
func.func @main(%x: {t}) -> {t} {{
  %r = fuel.branch variant -> {t} arm {{
    %m = fuel.reduce_max %x axes = [1] keepdim : {t} -> {r}
    %s = fuel.sub %x, %m : {t}, {r} -> {t}
    %e = fuel.exp %s : {t}
    %z = fuel.reduce_sum %e axes = [1] keepdim : {t} -> {r}
    %y = fuel.div %e, %z : {t}, {r} -> {t}
    fuel.yield %y : {t}
  }} arm {{
    %f = fuel.softmax %x axis = 1 : {t} -> {t}
    fuel.yield %f : {t}
  }}{extra_arm}
  func.return %r : {t}
}}"""


def bake(text: str) -> FuelModule:
    m = FuelModule.parse(text)
    BakeVariantsPass(judge="none").apply(Context(), m.op)
    m.op.verify()
    return m


def test_bake_picks_the_strictly_cheaper_arm_and_keeps_results() -> None:
    before = FuelModule.parse(softmax_variant(256))
    x = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    ref = Executor(before).run({"x": x})["out0"]
    m = bake(softmax_variant(256))
    names = [op.name for op in m.entry.body.block.ops]
    assert names == ["fuel.softmax", "func.return"]
    np.testing.assert_allclose(Executor(m).run({"x": x})["out0"], ref, rtol=1e-5, atol=1e-7)


def test_bake_keeps_arm0_on_a_tie() -> None:
    t = "tensor<256x256xf32>"  # a size where softmax beats the decomposition
    tie = f""" arm {{
    %g = fuel.softmax %x axis = 1 : {t} -> {t}
    fuel.yield %g : {t}
  }}"""
    m = bake(softmax_variant(256, tie))  # arms 1 and 2 cost the same: no unique winner
    assert [op.name for op in m.entry.body.block.ops][0] == "fuel.reduce_max"


def test_bake_leaves_placement_branches_alone() -> None:
    m = bake(softmax_variant(256).replace("variant", "placement"))
    assert any(isinstance(op, BranchOp) for op in m.op.walk())
