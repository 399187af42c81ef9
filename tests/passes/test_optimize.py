"""The optimize driver and its passes: fork-placements, converge-frontier, lock-step order,
the equivalence gate, idempotence and numerics of `fuel-optimize` on the decoder block."""

from __future__ import annotations

from pathlib import Path

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
from passes.picker.plan import PlanOptions, compile_plan, is_decision_point
from passes.picker.support import PickerOptions
from runtime.binding_table import KernelBindingTable
from runtime.cost import CostEstimate
from runtime.executor import Executor
from runtime.precision import PrecisionGuarantee
from runtime.topology import Device, SystemTopology
from runtime.topology_file import load_file

CPU = Device("cpu", "cpu", ("cpu",), 1.0, 4.0)
GPU = Device("cuda:0", "cuda", ("cuda",), 30.0, 40.0)
CPU_ONLY = PickerOptions(judge="none")
CPU_2GPU = Path(__file__).resolve().parents[2] / "examples" / "topologies" / "cpu_2gpu.toml"


def _copy(ins, outs, params) -> None:  # noqa: ANN001
    outs[0][...] = ins[0]


def table(costs: dict[str, float], twice: bool = False) -> KernelBindingTable:
    """exp and tanh on each backend at a fixed cost; `twice` binds the cuda kernel two times
    under one source and revision (a re-registration), so two candidates share one route."""
    t = KernelBindingTable()
    for op in ("exp", "tanh"):
        for backend, ns in costs.items():
            for _ in range(2 if twice and backend == "cuda" else 1):
                t.register(
                    op,
                    ("f32", "f32"),
                    backend,
                    _copy,
                    kernel_source=backend,
                    revision=7,
                    cost=lambda s, d, p, ns=ns: CostEstimate(overhead_ns=ns),
                    precision=PrecisionGuarantee(bit_stable=True, max_ulp=0),
                )
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
    assert (
        fork_placements(compile_plan(m, PlanOptions(SystemTopology(devices=(CPU, GPU)), table=t)))
        == []
    )


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
    # the pass each runs: also its stage name in dumps and timings (passes.instrument)
    assert names == [
        "fuel-fork-placements",
        "fuel-emit-decode-flash",
        "fuel-fuse-patterns",
        "fuel-converge-frontier",
    ]


def test_equivalence_gate_branchless_order_is_the_plan_order() -> None:
    m = build_decoder_block(BlockConfig())
    graph = optimize_graph(m.op, CPU_ONLY)
    assert graph.branch_count() == 0
    # The gate compares against a plan of the graph as optimized: fusion changes the op set.
    plan = compile_plan(m.op, CPU_ONLY.plan_options())
    want = [op.name for op in plan.order if op in plan.decisions]
    ran = [n for n in Executor(m).call_names if n != "fuel.reshape"]
    # the executor runs them in plan order, less the transposes it reads as views (the
    # attention's operands: `ViewPlanner.transpose_view`)
    left = iter(ran)
    skipped = []
    nxt = next(left, None)
    for n in want:
        if n == nxt:
            nxt = next(left, None)
        else:
            skipped.append(n)
    assert nxt is None and set(skipped) <= {"fuel.transpose"}, (ran, want)
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


def test_a_gpu_topology_plans_cuda_routes_that_run_emulated() -> None:
    """With cpu_2gpu the cuda devices load the Triton kernels: the decoder block gets placement
    branches whose cuda:0 arms copy in, run a Triton kernel, copy back. Under the Triton
    interpreter the route picker's run and a run forced onto every cuda arm match the host."""
    from xdsl.dialects.builtin import IntegerAttr

    from fuel_dialect.attrs import KERNEL_ATTR
    from fuel_dialect.branch import PICKED_ATTR
    from fuel_dialect.dispatch import CopyOp

    m = build_decoder_block(BlockConfig())
    x = np.random.default_rng(4).standard_normal((1, 16, 64)).astype(np.float32)
    want = Executor(m).run({"x": x})["y"]
    optimize_graph(m.op, PickerOptions(topology=str(CPU_2GPU), judge="none"))
    m.op.verify()
    stamps = [op.attributes[KERNEL_ATTR] for op in m.op.walk() if KERNEL_ATTR in op.attributes]
    assert any(s.backend.data == "cuda" for s in stamps)  # type: ignore[attr-defined]
    assert any(isinstance(op, CopyOp) and op.target.data == "cuda:0" for op in m.op.walk())
    topo = load_file(CPU_2GPU)
    np.testing.assert_allclose(
        Executor(m, topology=topo).run({"x": x})["y"], want, rtol=1e-4, atol=1e-4
    )
    placement = [b for b in branches(m.op) if b.kind.data == "placement"]
    assert placement
    for b in placement:
        b.attributes[PICKED_ATTR] = IntegerAttr(1, 64)
    ex = Executor(m, topology=topo)
    np.testing.assert_allclose(ex.run({"x": x})["y"], want, rtol=1e-4, atol=1e-4)
    assert ex.memory_peak_by_device()["cuda:0"] > 0


BUDGET_INPUT = Path(__file__).resolve().parents[1] / "filecheck/passes/Inputs/optimize_budget.mlir"


def _pinned_chain():  # noqa: ANN202
    """@evict_idle alone: five 1 KiB ops pinned to cuda:0 (peak 4 KiB there unbudgeted)."""
    from runtime.module import FuelModule

    m = FuelModule.parse(BUDGET_INPUT.read_text())
    for f in [f for f in m.op.ops if f.sym_name.data != "evict_idle"]:  # type: ignore[attr-defined]
        f.detach()
    return m


def test_a_budget_inserts_residency_copies_that_fit_and_run() -> None:
    """fuel-optimize{budget=...}: residency copies after the placement copies; the graph
    carries the report, and the emulated run stays within the budget and correct."""
    from passes.optimize import OptimizeOptions

    m = _pinned_chain()
    graph = optimize_graph(
        m.op, OptimizeOptions(topology=str(CPU_2GPU), judge="none", budget="cuda:0=3KiB")
    )
    report = graph.residency
    assert report is not None and report.fits
    cuda = report.device("cuda:0")
    assert (cuda.peak_before.bytes, cuda.peak_after.bytes) == (4096, 3072)
    assert [e.value for e in cuda.evictions] == ["%a (fuel.exp)"]
    roles = [
        op.attributes["fuel.residency"].data
        for op in m.op.walk()  # type: ignore[attr-defined]
        if "fuel.residency" in op.attributes
    ]
    assert roles == ["evict", "reload"]
    x = np.linspace(-1, 1, 256, dtype=np.float32)
    ex = Executor(m, topology=load_file(CPU_2GPU))
    b = np.tanh(np.exp(x))
    np.testing.assert_allclose(ex.run({"x": x})["out0"], np.exp(x) + (b - b), rtol=1e-6)
    assert ex.memory_peak_by_device()["cuda:0"] <= 3072
    no_budget = PickerOptions(topology=str(CPU_2GPU), judge="none")
    assert optimize_graph(_pinned_chain().op, no_budget).residency is None


def test_an_unreachable_or_malformed_budget_fails_the_pass() -> None:
    import pytest
    from xdsl.utils.exceptions import PassFailedException

    from passes.optimize import BudgetUnreachable, OptimizeOptions

    opts = OptimizeOptions(topology=str(CPU_2GPU), judge="none", budget="cuda:0=1.5KiB")
    with pytest.raises(BudgetUnreachable, match="a budget is unreachable") as info:
        optimize_graph(_pinned_chain().op, opts)
    assert not info.value.report.fits
    assert "nothing live at fuel.add %d" in str(info.value.report)
    for budget, why in (("cuda:0=3 parsecs", "bad memory size"), ("cuda:9=1GiB", "cuda:9")):
        with pytest.raises(PassFailedException, match=why):
            optimize_graph(
                _pinned_chain().op,
                OptimizeOptions(topology=str(CPU_2GPU), budget=budget, judge="none"),
            )
