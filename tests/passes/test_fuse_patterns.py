"""`fuel-fuse-patterns` and the fused-kernel registry: adoption idempotence, arm 1 vs arm 0
numerics on random inputs, cost from the decomposition, bake picking the fused op, idempotence."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from xdsl.dialects.builtin import IntegerAttr, i64

from frontends.builder import GraphBuilder
from fuel_dialect.branch import PICKED_ATTR, BranchOp
from passes.bake_variants import BakeVariantsPass
from passes.fuse_patterns import FUSED_ATTR, find_matches, fuse_patterns
from runtime.executor import Executor
from runtime.fused import (
    BUILTIN_ENTRIES,
    FusedEntry,
    FusedKernelRegistry,
    default_fused_registry,
    entry_cost,
)
from runtime.module import FuelModule

RNG = np.random.default_rng(3)


def softmax_graph(shape: tuple[int, ...]) -> FuelModule:
    g = GraphBuilder()
    x = g.input("x", shape)
    e = g.exp(g.sub(x, g.reduce_max(x, -1, keepdim=True)))
    return g.build([g.div(e, g.reduce_sum(e, -1, keepdim=True))])


def rms_graph(shape: tuple[int, ...], swap: bool = False) -> FuelModule:
    g = GraphBuilder()
    x, w = g.input("x", shape), g.input("w", shape[-1:])
    r = g.rsqrt(g.add(g.reduce_mean(g.mul(x, x), -1, keepdim=True), 1e-6))
    n = g.mul(r, x) if swap else g.mul(x, r)
    return g.build([g.mul(w, n) if swap else g.mul(n, w)])


def layer_norm_graph(shape: tuple[int, ...]) -> FuelModule:
    g = GraphBuilder()
    x, w, b = g.input("x", shape), g.input("w", shape[-1:]), g.input("b", shape[-1:])
    c = g.sub(x, g.reduce_mean(x, -1, keepdim=True))
    r = g.rsqrt(g.add(g.reduce_mean(g.mul(c, c), -1, keepdim=True), 1e-5))
    return g.build([g.add(g.mul(g.mul(c, r), w), b)])


GRAPHS = {"softmax": softmax_graph, "rms_norm": rms_graph, "layer_norm": layer_norm_graph}


def branches(m: FuelModule) -> list[BranchOp]:
    return [op for op in m.op.walk() if isinstance(op, BranchOp)]


def test_register_and_adopt_are_idempotent() -> None:
    reg = FusedKernelRegistry(BUILTIN_ENTRIES)
    assert len(reg) == 3 and not reg.register_fused(BUILTIN_ENTRIES[0])
    clash = FusedEntry("softmax", BUILTIN_ENTRIES[1].pattern, BUILTIN_ENTRIES[0].build,
                       BUILTIN_ENTRIES[0].precision)  # fmt: skip
    with pytest.raises(ValueError, match="already registered"):
        reg.register_fused(clash)
    calls: list[object] = []
    newer = FusedEntry(**{**BUILTIN_ENTRIES[0].__dict__, "revision": 7})
    results: list[bool] = []
    threads = [threading.Thread(target=lambda: results.append(reg.adopt(newer, calls.append)))
               for _ in range(8)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1 and len(calls) == 1  # one registration, one table write
    assert reg.lookup("softmax") is newer and len(reg) == 3
    assert default_fused_registry() is default_fused_registry()


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_fused_arm_matches_the_primitives(name: str) -> None:
    """Arm 1 (the fused kernel) agrees with arm 0 within the entry's declared precision."""
    m = GRAPHS[name]((6, 32))
    assert fuse_patterns(m.op) == 1
    (b,) = branches(m)
    fused = b.arms[1].block.first_op
    assert fused is not None and fused.attributes[FUSED_ATTR].data == name  # pyright: ignore
    ins = {a: RNG.standard_normal(s).astype(np.float32) for a, s in
           zip(("x", "w", "b"), ((6, 32), (32,), (32,)), strict=False)}  # fmt: skip
    ins = {k: v for k, v in ins.items() if k in Executor(m).input_names}
    ref = Executor(m).run(ins)["out"]
    b.attributes[PICKED_ATTR] = IntegerAttr(1, i64)
    got = Executor(m).run(ins)["out"]
    p = default_fused_registry().lookup(name).precision  # pyright: ignore
    np.testing.assert_allclose(got, ref, rtol=p.max_relative * 10, atol=p.max_absolute * 10)


def test_both_operand_orders_of_rms_norm_match() -> None:
    assert fuse_patterns(rms_graph((2, 8), swap=True).op) == 1
    assert fuse_patterns(rms_graph((2, 8), swap=False).op) == 1


def test_layer_norm_is_claimed_whole_not_as_an_inner_rms_norm() -> None:
    m = layer_norm_graph((2, 8))
    assert [e.name for e, _ in find_matches(m.op, default_fused_registry())] == ["layer_norm"]


def test_undeclared_cost_comes_from_the_decomposition() -> None:
    m = softmax_graph((64, 1024))
    ((entry, match),) = find_matches(m.op, default_fused_registry())
    assert entry.cost is None
    cost = entry_cost(entry, match)
    n = 64 * 1024
    # reduce_max + sub + exp (10) + reduce_sum + div: every primitive's FLOPs, counted once
    assert cost.flops == pytest.approx(n + n + 10 * n + n + n)
    assert cost.bytes_moved == 2 * n * 4  # boundary only: x in, y out
    declared = FusedEntry(**{**entry.__dict__, "cost": lambda _m: cost.__class__(flops=1.0)})
    assert entry_cost(declared, match).flops == 1.0


def test_bake_picks_the_fused_op_when_cheaper_and_results_match() -> None:
    m = softmax_graph((64, 1024))
    x = RNG.standard_normal((64, 1024)).astype(np.float32)
    ref = Executor(m).run({"x": x})["out"]
    fuse_patterns(m.op)
    BakeVariantsPass(judge="none").apply(None, m.op)  # pyright: ignore
    names = [op.name for op in m.entry.body.block.ops]
    assert names == ["fuel.softmax", "func.return"]
    np.testing.assert_allclose(Executor(m).run({"x": x})["out"], ref, rtol=1e-5, atol=1e-6)


def test_fuse_patterns_is_idempotent() -> None:
    m = rms_graph((4, 16))
    assert fuse_patterns(m.op) == 1
    text = str(m.op)
    assert fuse_patterns(m.op) == 0 and str(m.op) == text
    m.op.verify()
