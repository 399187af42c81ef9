"""fuel-fix-dtypes: numerics against the unrewritten module, idempotence, per-node coverage."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context

from frontends.builder import GraphBuilder
from fuel_dialect.attrs import DeviceAttr
from fuel_dialect.dispatch import PIN_ATTR
from fuel_dialect.dtypes import dtype_name
from fuel_dialect.ops_elementwise import CastOp, ReluOp
from passes.fix_dtypes import FixDtypesPass, fix_dtypes
from passes.picker.plan import PlanOptions
from runtime.binding_table import KernelBindingTable
from runtime.executor import Executor
from runtime.kernels import global_bindings
from runtime.module import FuelModule
from runtime.topology import Device, SystemTopology

CPU = Device("cpu", "cpu", ("cpu",), 1.0, 4.0)
GPU = Device("cuda:0", "cuda", ("cuda",), 30.0, 40.0)


def table_without(op: str, dtype: str, native_on: str | None = None) -> KernelBindingTable:
    """The global CPU table minus `op` at `dtype`; that key re-registered on `native_on`."""
    t = KernelBindingTable()
    for (o, d, b), e in global_bindings().iter_entries():
        backends = [b] if (o, d[0]) != (op, dtype) else [x for x in (native_on,) if x]
        for be in backends:
            facts = {"caps": e.caps, "precision": e.precision, "cost": e.cost}
            t.register(
                o,
                d,
                be,
                e.kernel,
                kernel_source=e.kernel_source,
                revision=e.revision_hash,
                direct=e.direct,
                **facts,
            )
    return t.freeze()


def chain(dtype: str, pin: str | None = None) -> FuelModule:
    g = GraphBuilder()
    h = g.input("x", (16,), dtype)
    for _ in range(3):
        h = g.relu(g.neg(h))
        if pin is not None:
            h.owner.attributes[PIN_ATTR] = DeviceAttr(pin)
    return g.build([h])


def fixed(m: FuelModule, plan: PlanOptions) -> FuelModule:
    out = FuelModule(m.op.clone(), dict(m.weights))
    fix_dtypes(out.op, plan)
    out.op.verify()
    return out


def relu_dtypes(m: FuelModule) -> list[str]:
    return [dtype_name(op.result.type) for op in m.op.walk() if isinstance(op, ReluOp)]


def casts(m: FuelModule) -> int:
    return sum(isinstance(op, CastOp) for op in m.op.walk())


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_promoted_chain_matches_original(dtype: str) -> None:
    """relu@f16 missing: relu runs at f32 between casts, bit-identical to the f16 reference."""
    plan = PlanOptions(topology=SystemTopology((CPU,)), table=table_without("relu", dtype))
    m = chain(dtype)
    r = fixed(m, plan)
    assert relu_dtypes(r) == ["f32"] * 3 and casts(r) == 6
    ref_exec = Executor(m)
    x = (np.random.default_rng(0).standard_normal(16) * 10).astype(ref_exec.input_specs[0][0])
    ref = ref_exec.run({"x": x})["out"]
    got = Executor(r, plan.table).run({"x": x})["out"]
    np.testing.assert_array_equal(got, ref)


def test_idempotent() -> None:
    plan = PlanOptions(topology=SystemTopology((CPU,)), table=table_without("relu", "f16"))
    once = fixed(chain("f16"), plan)
    assert str(fixed(once, plan).op) == str(once.op)


def test_never_when_a_candidate_serves_the_native_key() -> None:
    plan = PlanOptions(topology=SystemTopology((CPU,)), table=table_without("relu", "f16", "cpu"))
    r = fixed(chain("f16"), plan)
    assert relu_dtypes(r) == ["f16"] * 3 and casts(r) == 0


@pytest.mark.parametrize(("pin", "promoted"), [("cpu", True), ("cuda:0", False), (None, False)])
def test_coverage_is_the_nodes_own_backends(pin: str | None, promoted: bool) -> None:
    """relu@f16 only on `cuda`: it serves nodes that may run there, never a CPU-pinned one."""
    topo = SystemTopology((CPU, GPU))
    plan = PlanOptions(topology=topo, table=table_without("relu", "f16", "cuda"))
    r = fixed(chain("f16", pin), plan)
    assert relu_dtypes(r) == (["f32"] * 3 if promoted else ["f16"] * 3)


def test_integer_widening_matches_original() -> None:
    """The global table has no relu@u8 (the original cannot run): promoted through i32."""
    g = GraphBuilder()
    x = g.input("x", (16,), "u8")
    m = g.build([g.relu(x)])
    r = FuelModule(m.op.clone(), dict(m.weights))
    FixDtypesPass(judge="none").apply(Context(), r.op)
    assert relu_dtypes(r) == ["i32"] and casts(r) == 2
    xs = np.arange(240, 256, dtype=np.uint8)
    np.testing.assert_array_equal(Executor(r).run({"x": xs})["out"], xs)
