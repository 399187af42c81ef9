"""The optimize driver and its passes: fork-placements, converge-frontier, lock-step order,
the equivalence gate, idempotence and numerics of `fuel-optimize` on the decoder block."""

from __future__ import annotations

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from examples.decoder_block import BlockConfig, build_decoder_block
from frontends.builder import GraphBuilder
from fuel_dialect.attrs import DEVICE_ATTR
from fuel_dialect.branch import BranchOp
from passes.converge_frontier import converge
from passes.fork_placements import fork_placements
from passes.optimize import (
    OptimizationContext,
    OptimizePass,
    PassRegistry,
    default_registry,
    optimize_graph,
    run_lockstep,
)
from passes.picker_support import PickerOptions
from runtime.binding_table import KernelBindingTable
from runtime.cost import CostEstimate
from runtime.executor import Executor
from runtime.plan import PlanOptions, compile_plan, is_decision_point
from runtime.precision import PrecisionGuarantee
from runtime.topology import Device, SystemTopology

CPU = Device("cpu", "cpu", ("cpu",), 1.0, 4.0)
GPU = Device("cuda:0", "cuda", ("cuda",), 30.0, 40.0)
CPU_ONLY = PickerOptions(judge="none")


def _copy(ins, outs, params) -> None:  # noqa: ANN001
    outs[0][...] = ins[0]


def table(costs: dict[str, float], twice: bool = False) -> KernelBindingTable:
    """exp and tanh on each backend at a fixed cost; `twice` binds the cuda kernel two times
    under one source and revision (a re-registration), so two candidates share one route."""
    t = KernelBindingTable()
    for op in ("exp", "tanh"):
        for backend, ns in costs.items():
            for _ in range(2 if twice and backend == "cuda" else 1):
                t.register(op, ("f32", "f32"), backend, _copy, kernel_source=backend, revision=7,
                           cost=lambda s, d, p, ns=ns: CostEstimate(overhead_ns=ns),
                           precision=PrecisionGuarantee(bit_stable=True, max_ulp=0))  # fmt: skip
    return t


def chain() -> ModuleOp:
    g = GraphBuilder()
    y = g.tanh(g.exp(g.input("x", (64,))))
    return g.build(outputs=[y]).op


def branches(m: ModuleOp) -> list[BranchOp]:
    return [op for op in m.walk() if isinstance(op, BranchOp)]


def test_cpu_only_topology_forks_nothing() -> None:
    m = chain()
    plan = compile_plan(m, PlanOptions(SystemTopology.cpu_only(), table=table({"cpu": 10})))
    assert fork_placements(plan) == [] and not branches(m)


def test_runner_up_on_the_gpu_becomes_arm_1_with_its_copies() -> None:
    m = chain()
    t = table({"cpu": 10, "cuda": 1_000})
    plan = compile_plan(m, PlanOptions(SystemTopology(devices=(CPU, GPU)), table=t))
    made = fork_placements(plan)
    m.verify()
    assert len(made) == 2 and all(b.kind.data == "placement" for b in made)
    arm1 = [op.name for op in made[0].arms[1].block.ops]
    assert arm1 == ["fuel.copy", "fuel.exp", "fuel.copy", "fuel.yield"]  # in, run, back
    assert made[0].arms[1].block.first_op.target.data == "cuda:0"
    assert [op.name for op in made[0].arms[0].block.ops] == ["fuel.exp", "fuel.yield"]
    assert made[0].arms[0].block.first_op.attributes[DEVICE_ATTR].data == "cpu"
    assert fork_placements(compile_plan(m, PlanOptions(SystemTopology(devices=(CPU, GPU)),
                                                       table=t))) == []  # fmt: skip


def test_fan_out_is_not_forked() -> None:
    g = GraphBuilder()
    a = g.exp(g.input("x", (64,)))
    m = g.build(outputs=[g.tanh(a), a]).op
    t = table({"cpu": 10, "cuda": 1_000})
    plan = compile_plan(m, PlanOptions(SystemTopology(devices=(CPU, GPU)), table=t))
    made = fork_placements(plan)
    assert [b.arms[0].block.first_op.name for b in made] == ["fuel.tanh"]


def test_converge_merges_the_duplicate_runner_ups_fork_emits() -> None:
    m = chain()
    t = table({"cpu": 10, "cuda": 1_000}, twice=True)
    plan = compile_plan(m, PlanOptions(SystemTopology(devices=(CPU, GPU)), table=t))
    made = fork_placements(plan, limit=2)
    assert [len(b.arms) for b in made] == [3, 3]  # two cuda runner-ups with one route
    assert converge(m) == 2
    m.verify()
    assert [len(b.arms) for b in branches(m)] == [2, 2]
    assert converge(m) == 0  # idempotent; the last route is never removed


def test_converge_collapses_a_branch_whose_arms_are_one_route() -> None:
    m = chain()
    t = table({"cpu": 10, "cuda": 1_000})
    plan = compile_plan(m, PlanOptions(SystemTopology(devices=(CPU, GPU)), table=t))
    for b in fork_placements(plan):  # make arm 1 run exactly as arm 0 does
        inner = [op for op in b.arms[1].block.ops if is_decision_point(op)][0]
        ref = b.arms[0].block.first_op
        inner.attributes.update({k: ref.attributes[k] for k in ("fuel.device", "fuel.kernel")})
    assert converge(m) == 2 and not branches(m)
    m.verify()


def test_lockstep_runs_every_optimizer_after_each_pathfinder() -> None:
    log: list[str] = []

    class Finder:
        def __init__(self, name: str) -> None:
            self.name = name

        def propose(self, module: ModuleOp, ctx: OptimizationContext) -> None:
            log.append(self.name)

    class Pruner(Finder):
        def prune(self, module: ModuleOp, ctx: OptimizationContext) -> None:
            log.append(self.name)

    reg = PassRegistry([Finder("p1"), Finder("p2")], [Pruner("o1"), Pruner("o2")])
    run_lockstep(chain(), OptimizationContext([], CPU_ONLY, PlanOptions()), reg)
    assert log == ["p1", "o1", "o2", "p2", "o1", "o2"]
    names = [p.name for p in default_registry().pathfinders + default_registry().optimizers]
    assert names == ["fork-placements", "emit-decode-flash", "fuse-patterns", "converge-frontier"]


def test_equivalence_gate_branchless_order_is_the_plan_order() -> None:
    m = build_decoder_block(BlockConfig())
    graph = optimize_graph(m.op, CPU_ONLY)
    assert graph.branch_count() == 0
    # The gate compares against a plan of the graph as optimized: fusion changes the op set.
    plan = compile_plan(m.op, CPU_ONLY.plan_options())
    want = [op.name for op in plan.order if op in plan.decisions]
    ran = [n for n in Executor(m).op_names if n != "fuel.reshape"]
    assert ran == want
    assert [op.name for op in graph.dispatch_order() if is_decision_point(op)] == want


def test_optimize_twice_changes_nothing_the_second_time() -> None:
    m = build_decoder_block(BlockConfig())
    OptimizePass(judge="none").apply(Context(), m.op)
    once = str(m.op)
    OptimizePass(judge="none").apply(Context(), m.op)
    assert str(m.op) == once


def test_optimized_decoder_block_matches_the_unoptimized_run() -> None:
    m = build_decoder_block(BlockConfig())
    x = np.random.default_rng(3).standard_normal((1, 16, 64)).astype(np.float32)
    before = Executor(m).run({"x": x})["y"]
    optimize_graph(m.op, CPU_ONLY)
    m.op.verify()
    np.testing.assert_allclose(Executor(m).run({"x": x})["y"], before, rtol=1e-5, atol=1e-5)


def test_optimized_module_text_reads_back_and_runs() -> None:
    """Everything fuel-optimize writes (stamps, candidates incl. infeasible ones) parses again."""
    import numpy as np
    from xdsl.context import Context

    from examples.decoder_block import BlockConfig, build_decoder_block
    from passes.optimize import OptimizePass
    from runtime.executor import Executor
    from runtime.module import FuelModule

    m = build_decoder_block(BlockConfig())
    OptimizePass(judge="none").apply(Context(), m.op)
    again = FuelModule.parse(str(m.op))
    again.weights = m.weights
    x = np.ones((1, 16, 64), np.float32)
    np.testing.assert_allclose(
        Executor(again).run({"x": x})["y"], Executor(m).run({"x": x})["y"], rtol=0, atol=0
    )


def softmax_module(shape: tuple[int, ...]):  # noqa: ANN201
    """A softmax over axis 1 spelled in primitives: reduce_max, sub, exp, reduce_sum, div."""
    g = GraphBuilder()
    x = g.input("x", shape)
    e = g.exp(g.sub(x, g.reduce_max(x, 1, keepdim=True)))
    return g.build({"y": g.div(e, g.reduce_sum(e, 1, keepdim=True))})


def test_optimize_fuses_a_decomposed_softmax_and_stays_correct() -> None:
    """fuse-patterns moves the primitives into arm 0 (same op objects, so the plans still stamp
    them); bake then picks `fuel.softmax` at 64x1024 and keeps the primitives at 4x8."""
    m = softmax_module((64, 1024))
    x = np.random.default_rng(5).standard_normal((64, 1024)).astype(np.float32)
    before = Executor(m).run({"x": x})["y"]
    OptimizePass(judge="none").apply(Context(), m.op)
    m.op.verify()
    names = [op.name for op in m.entry.body.block.ops]
    assert "fuel.softmax" in names and "fuel.exp" not in names
    assert not branches(m.op)
    np.testing.assert_allclose(Executor(m).run({"x": x})["y"], before, rtol=1e-5, atol=1e-6)
    once = str(m.op)
    OptimizePass(judge="none").apply(Context(), m.op)
    assert str(m.op) == once

    small = softmax_module((4, 8))
    xs = np.random.default_rng(6).standard_normal((4, 8)).astype(np.float32)
    ref = Executor(small).run({"x": xs})["y"]
    OptimizePass(judge="none").apply(Context(), small.op)
    small.op.verify()
    names = [op.name for op in small.entry.body.block.ops]
    assert "fuel.softmax" not in names
    assert {"fuel.reduce_max", "fuel.exp", "fuel.reduce_sum", "fuel.div"} <= set(names)
    np.testing.assert_allclose(Executor(small).run({"x": xs})["y"], ref, rtol=1e-5, atol=1e-6)
