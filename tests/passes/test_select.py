"""fuel-select: copies on cross-device edges (host staging in two hops), picked modules run."""

from __future__ import annotations

import numpy as np

from examples.decoder_block import BlockConfig, build_decoder_block
from frontends.builder import GraphBuilder
from fuel_dialect.attrs import KERNEL_ATTR
from passes.picker.plan import PlanOptions, compile_plan
from passes.select import SelectPass, insert_copies
from runtime.binding_table import KernelBindingTable
from runtime.cost import CostEstimate
from runtime.executor import Executor
from runtime.precision import PrecisionGuarantee
from runtime.topology import Device, SystemTopology

CPU = Device("cpu", "cpu", ("cpu",), 1.0, 4.0)


def gpu(name: str) -> Device:
    return Device(name, "cuda", ("cuda",), 30.0, 40.0)


def table(costs: dict[str, dict[str, float]]) -> KernelBindingTable:
    t = KernelBindingTable()
    for op, per_backend in costs.items():
        for backend, ns in per_backend.items():

            def k(ins, outs, params):
                outs[0][...] = ins[0]

            t.register(
                op,
                ("f32", "f32"),
                backend,
                k,
                kernel_source=backend,
                cost=lambda s, d, p, ns=ns: CostEstimate(overhead_ns=ns),
                precision=PrecisionGuarantee(bit_stable=True, max_ulp=0),
            )
    return t


def copies(module) -> list[str]:
    return [op.target.data for op in module.walk() if op.name == "fuel.copy"]


def test_copies_in_and_out_of_the_gpu() -> None:
    topo = SystemTopology(devices=(CPU, gpu("cuda:0")))
    g = GraphBuilder()
    y = g.tanh(g.exp(g.input("x", (64,))))
    m = g.build(outputs=[y])
    t = table({"exp": {"cpu": 10_000_000, "cuda": 10}, "tanh": {"cpu": 10_000_000, "cuda": 10}})
    plan = compile_plan(m.op, PlanOptions(topo, table=t))
    insert_copies(plan, topo, "cpu")
    m.op.verify()
    assert copies(m.op) == ["cuda:0", "cpu"]  # once in, once back; nothing between the two ops
    ret = list(m.entry.body.block.ops)[-1]
    assert ret.operands[0].owner.name == "fuel.copy"


def test_host_staging_goes_through_the_cpu_in_two_hops() -> None:
    topo = SystemTopology(devices=(CPU, gpu("cuda:0"), gpu("cuda:1")))  # no peer access
    g = GraphBuilder()
    a = g.exp(g.input("x", (64,)))
    b = g.tanh(a)
    m = g.build(outputs=[b])
    t = table({"exp": {"cpu": 10_000_000, "cuda": 10}, "tanh": {"cpu": 10_000_000, "cuda": 10}})
    from fuel_dialect.attrs import DeviceAttr
    from fuel_dialect.dispatch import PIN_ATTR

    ops = [op for op in m.entry.body.block.ops if op.name in ("fuel.exp", "fuel.tanh")]
    ops[0].attributes[PIN_ATTR] = DeviceAttr("cuda:0")
    ops[1].attributes[PIN_ATTR] = DeviceAttr("cuda:1")
    plan = compile_plan(m.op, PlanOptions(topo, table=t))
    insert_copies(plan, topo, "cpu")
    m.op.verify()
    assert copies(m.op) == ["cuda:0", "cpu", "cuda:1", "cpu"]


def test_selected_decoder_block_runs_and_matches_the_unpicked_run() -> None:
    from xdsl.context import Context

    m = build_decoder_block(BlockConfig())
    x = np.random.default_rng(0).standard_normal((1, 16, 64)).astype(np.float32)
    before = Executor(m).run({"x": x})["y"]
    SelectPass(judge="none").apply(Context(), m.op)
    stamped = [op for op in m.op.walk() if KERNEL_ATTR in op.attributes]
    assert len(stamped) == 20  # every decision point (the 4 reshapes are views)
    assert not copies(m.op)
    after = Executor(m).run({"x": x})["y"]
    np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-5)
