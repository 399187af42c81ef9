"""`fuel-converge-frontier`'s cost-dominance pruning: which arms go, which never do, where a
pick goes, that the result computes what arm 0 does, and idempotence."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.parser import Parser

from fuel_dialect import fuel_context
from fuel_dialect.branch import PICKED_ATTR, BranchOp
from passes.converge_frontier import ArmCost, arm_cost, converge, dominates
from passes.picker.plan import PlanOptions
from runtime.executor import Executor
from runtime.kernels import global_bindings
from runtime.module import FuelModule


def stamp(source: str) -> str:
    """The `fuel.kernel` stamp of the f32 CPU matmul kernel from `source`."""
    (e,) = [
        e
        for e in global_bindings().lookup_alternatives("matmul", ("f32",) * 3, "cpu")
        if e.kernel_source == source
    ]
    return (
        f'{{fuel.device = #fuel.device<"cpu">, fuel.kernel = #fuel.kernel<"matmul", '
        f'[f32, f32, f32], "cpu", "{source}", "{e.revision_hash:016x}">}}'
    )


def matmul_variants(picked: int | None) -> FuelModule:
    """One matmul, three kernel variants on the CPU: numpy (arm 0), einsum, f64-accumulate."""
    arms = " arm ".join(
        f"{{\n    %y{i} = fuel.matmul %a, %b {stamp(src)} : tensor<32x32xf32>, tensor<32x32xf32>"
        f" -> tensor<32x32xf32>\n    fuel.yield %y{i} : tensor<32x32xf32>\n  }}"
        for i, src in enumerate(("numpy", "numpy-einsum", "numpy-f64acc"))
    )
    attrs = "" if picked is None else f" {{fuel.picked = {picked} : i64}}"
    text = f"""func.func @main(%a: tensor<32x32xf32>, %b: tensor<32x32xf32>) -> tensor<32x32xf32> {{
  %r = fuel.branch variant -> tensor<32x32xf32> arm {arms}{attrs}
  func.return %r : tensor<32x32xf32>
}}"""
    op = Parser(fuel_context(), text).parse_module()
    op.verify()
    return FuelModule(op, {})


def only_branch(m: FuelModule) -> BranchOp | None:
    found = [op for op in m.op.walk() if isinstance(op, BranchOp)]
    return found[0] if found else None


def test_dominance_needs_every_component_and_strict_time() -> None:
    cpu = frozenset({"cpu"})
    a: ArmCost = (cpu, 10.0, 10.0, 10.0, 100.0)
    assert dominates(a, (cpu, 10.0, 10.0, 10.0, 101.0))  # equal work, strictly slower
    assert not dominates(a, (cpu, 10.0, 10.0, 10.0, 100.0))  # a tie is no dominance
    assert not dominates(a, (cpu, 9.0, 99.0, 99.0, 999.0))  # b does less of something
    assert not dominates(a, (frozenset({"cuda:0"}), 99.0, 99.0, 99.0, 999.0))  # other devices
    assert not dominates(None, a) and not dominates(a, None)  # unpriced: never compared


def test_stamped_kernel_variants_the_reference_dominates_are_pruned() -> None:
    m = matmul_variants(picked=None)
    costs = [arm_cost(arm, PlanOptions()) for arm in only_branch(m).arms]  # pyright: ignore
    assert dominates(costs[0], costs[1]) and dominates(costs[0], costs[2])
    assert converge(m.op) == 2
    assert only_branch(m) is None  # one arm left: inlined
    (mm,) = [op for op in m.op.walk() if op.name == "fuel.matmul"]
    assert '"numpy",' in str(mm.attributes["fuel.kernel"])


def test_a_pruned_pick_moves_to_its_dominator_and_results_match_arm_0() -> None:
    rng = np.random.default_rng(0)
    ins = {n: rng.standard_normal((32, 32)).astype(np.float32) for n in ("a", "b")}
    m = matmul_variants(picked=None)
    ref = Executor(m).run(ins)
    ref = ref[next(iter(ref))]
    m = matmul_variants(picked=2)
    converge(m.op)
    m.op.verify()
    out = Executor(m).run(ins)
    np.testing.assert_allclose(out[next(iter(out))], ref, rtol=1e-5, atol=1e-5)


def test_arm_0_is_never_pruned_and_the_pass_is_idempotent() -> None:
    # arm 0 is the costliest variant: the cheaper arms both stay, arm 0 too
    text = """func.func @main(%x: tensor<64xf32>) -> tensor<64xf32> {
  %r = fuel.branch variant -> tensor<64xf32> arm {
    %a = fuel.neg %x : tensor<64xf32>
    %b = fuel.neg %a : tensor<64xf32>
    %c = fuel.exp %b : tensor<64xf32>
    fuel.yield %c : tensor<64xf32>
  } arm {
    %c = fuel.exp %x : tensor<64xf32>
    fuel.yield %c : tensor<64xf32>
  } {fuel.picked = 1 : i64}
  func.return %r : tensor<64xf32>
}"""
    op = Parser(fuel_context(), text).parse_module()
    assert converge(op) == 0
    (b,) = [o for o in op.walk() if isinstance(o, BranchOp)]
    assert len(b.arms) == 2 and b.attributes[PICKED_ATTR].value.data == 1  # pyright: ignore
    before = str(op)
    assert converge(op) == 0 and str(op) == before


@pytest.mark.parametrize("picked", [None, 1])
def test_converge_twice_changes_nothing(picked: int | None) -> None:
    m = matmul_variants(picked)
    converge(m.op)
    once = str(m.op)
    assert converge(m.op) == 0 and str(m.op) == once
