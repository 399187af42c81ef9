"""Passes take the binding table and topology from their context (`passes.environment`)."""

from __future__ import annotations

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from frontends.builder import GraphBuilder
from fuel_dialect.attrs import DEVICE_ATTR, KERNEL_ATTR, DeviceAttr, KernelRefAttr
from fuel_dialect.dispatch import ALTERNATIVES_ATTR
from passes.enumerate_alternatives import EnumerateAlternativesPass
from passes.environment import FuelContext, PassEnvironment, environment, pass_context
from passes.optimize import OptimizePass
from passes.place import PlacePass
from passes.rank_alternatives import RankAlternativesPass
from passes.select import SelectPass
from runtime.binding_table import KernelBindingTable
from runtime.cost import CostEstimate
from runtime.kernels import bindings_generation, global_bindings
from runtime.precision import PrecisionGuarantee
from runtime.topology import Device, SystemTopology

CPU = Device("cpu", "cpu", ("cpu",), 1.0, 4.0)
GPU = Device("cuda:0", "cuda", ("cuda",), 30.0, 40.0)


def _copy(ins, outs, params) -> None:  # noqa: ANN001
    outs[0][...] = ins[0]


def table(source: str, costs: dict[str, float]) -> KernelBindingTable:
    """exp and tanh bound under `source` on each backend of `costs` at that fixed cost."""
    t = KernelBindingTable()
    for op in ("exp", "tanh"):
        for backend, ns in costs.items():
            t.register(
                op,
                ("f32", "f32"),
                backend,
                _copy,
                kernel_source=source,
                revision=3,
                cost=lambda s, d, p, ns=ns: CostEstimate(overhead_ns=ns),
                precision=PrecisionGuarantee(bit_stable=True, max_ulp=0),
            )
    return t


def chain() -> ModuleOp:
    g = GraphBuilder()
    return g.build(outputs=[g.tanh(g.exp(g.input("x", (64,))))]).op


def stamps(m: ModuleOp) -> list[KernelRefAttr]:
    return [op.attributes[KERNEL_ATTR] for op in m.walk() if KERNEL_ATTR in op.attributes]  # type: ignore[misc]


def devices(m: ModuleOp) -> list[str]:
    out = []
    for op in m.walk():
        attr = op.attributes.get(DEVICE_ATTR)
        if isinstance(attr, DeviceAttr):
            out.append(attr.data)
    return out


def test_optimize_stamps_from_the_context_table_and_leaves_the_process_table_alone() -> None:
    before, generation = global_bindings(), bindings_generation()
    m = chain()
    env = PassEnvironment(bindings=table("mine", {"cpu": 10}), topology=SystemTopology.cpu_only())
    OptimizePass(judge="none").apply(pass_context(env), m)
    got = stamps(m)
    assert len(got) == 2 and {s.kernel_source.data for s in got} == {"mine"}
    assert global_bindings() is before and bindings_generation() == generation


def test_a_plain_context_plans_with_the_process_table() -> None:
    m = chain()
    OptimizePass(judge="none", topology="").apply(Context(), m)
    got = {s.kernel_source.data for s in stamps(m)}
    assert got and "mine" not in got
    known = {
        e.kernel_source
        for op in ("exp", "tanh")
        for e in global_bindings().lookup_alternatives(op, ("f32", "f32"), "cpu")
    }
    assert got <= known


@pytest.mark.parametrize("cls", [EnumerateAlternativesPass, RankAlternativesPass, SelectPass])
def test_each_picker_stage_reads_the_context_table(cls: type[ModulePass]) -> None:
    m = chain()
    env = PassEnvironment(bindings=table("mine", {"cpu": 10}), topology=SystemTopology.cpu_only())
    cls(judge="none").apply(pass_context(env), m)  # type: ignore[call-arg]
    written = [
        str(op.attributes[ALTERNATIVES_ATTR])
        for op in m.walk()
        if ALTERNATIVES_ATTR in op.attributes
    ]
    assert len(written) == 2 and all('"mine"' in w for w in written)


def test_the_context_topology_places_ops_on_its_devices() -> None:
    m = chain()
    env = PassEnvironment(
        bindings=table("mine", {"cpu": 1e6, "cuda": 10}),
        topology=SystemTopology(devices=(CPU, GPU)),
    )
    PlacePass(judge="none").apply(pass_context(env), m)
    assert devices(m) == ["cuda:0", "cuda:0"]


def test_a_table_without_the_op_fails_the_pass_naming_it() -> None:
    env = PassEnvironment(bindings=table("mine", {"cuda": 10}), topology=SystemTopology.cpu_only())
    with pytest.raises(PassFailedException, match="exp"):
        SelectPass(judge="none").apply(pass_context(env), chain())


def test_clone_keeps_the_environment() -> None:
    env = PassEnvironment(topology=SystemTopology.cpu_only())
    ctx = pass_context(env)
    copy = ctx.clone()
    assert isinstance(copy, FuelContext) and environment(copy) is env
    assert copy.get_optional_op("fuel.exp") is not None
    assert environment(Context()) == PassEnvironment()
