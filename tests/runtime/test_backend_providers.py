"""Backends loaded on first need: `ensure_backend_kernels` and the `BACKEND_PROVIDERS` registry,
as the planner, `fuel explain` and the executor use them."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import runtime.kernels as bt
from frontends.builder import GraphBuilder
from fuel_dialect.attrs import DeviceAttr
from fuel_dialect.dispatch import PIN_ATTR
from passes.picker.plan import PlanError, PlanOptions, compile_plan
from runtime.compiled import ExecutionError
from runtime.executor import Executor
from runtime.module import FuelModule
from runtime.topology_file import load_file

CPU_2GPU = Path(__file__).resolve().parents[2] / "examples" / "topologies" / "cpu_2gpu.toml"
ON_CUDA = """
func.func @main(%x: tensor<4x8xf32> {fuel.name = "x"}) -> (tensor<4x8xf32> {fuel.name = "y"}) {
  %a = fuel.copy %x to "cuda:0" : tensor<4x8xf32>
  %b = fuel.exp %a {fuel.device = #fuel.device<"cuda:0">} : tensor<4x8xf32>
  %c = fuel.copy %b to "cpu" : tensor<4x8xf32>
  func.return %c : tensor<4x8xf32>
}
"""
MISSING = bt.BackendProvider("fuel_no_such_module:register", "the fuel_no_such_module package")


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> bt._GlobalState:
    """A process-wide table built anew (CPU kernels only), restored afterwards."""
    state = bt._GlobalState()
    monkeypatch.setattr(bt, "_STATE", state)
    return state


def _big_matmul():  # noqa: ANN202
    g = GraphBuilder(seed=0)
    y = g.matmul(g.input("x", (1024, 1024)), g.weight("w", (1024, 1024)))
    return g.build(outputs={"y": y})


def test_the_default_table_holds_only_cpu_kernels_until_a_backend_is_asked_for(
    fresh: bt._GlobalState,
) -> None:
    assert bt.global_bindings().backends() == ["cpu"]
    assert bt.ensure_backend_kernels(["cpu"]) == {}  # no provider: nothing to load
    assert bt.loaded_backends() == frozenset()


def test_loading_is_once_per_backend_even_from_many_threads(fresh: bt._GlobalState) -> None:
    from runtime.kernels.triton.registry import triton_kernel_table

    gen0 = bt.bindings_generation()
    bt.global_bindings()
    results: list[dict[str, str]] = []
    threads = [
        threading.Thread(target=lambda: results.append(bt.ensure_backend_kernels(["cuda"])))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [{}] * 8
    table = bt.global_bindings()
    cuda = [k for k in table.iter_entries() if k[0][2] == "cuda"]
    assert len(cuda) == len(triton_kernel_table())  # registered exactly once
    assert bt.bindings_generation() == gen0 + 2  # the CPU table, then one extension
    assert bt.ensure_backend_kernels(["cuda", "cpu"]) == {}
    assert bt.bindings_generation() == gen0 + 2 and "cuda" in bt.loaded_backends()


def test_a_gpu_topology_plans_onto_the_lazily_loaded_cuda_kernels(fresh: bt._GlobalState) -> None:
    m = _big_matmul()
    cpu_only = bt.global_bindings()  # a snapshot: it keeps what it held
    plan = compile_plan(m.op, PlanOptions(load_file(CPU_2GPU)))
    (d,) = plan.decisions.values()
    assert (d.device, d.winner.backend, plan.notes) == ("cuda:0", "cuda", [])
    # an explicit table is used as given: CPU kernels only, so the cpu
    assert cpu_only.backends() == ["cpu"]
    plan = compile_plan(m.op, PlanOptions(load_file(CPU_2GPU), table=cpu_only))
    assert [d.device for d in plan.decisions.values()] == ["cpu"]


def test_an_unavailable_backend_is_a_note_and_a_clear_error_when_pinned(
    fresh: bt._GlobalState, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(bt.BACKEND_PROVIDERS, "cuda", MISSING)
    m = _big_matmul()
    opts = PlanOptions(load_file(CPU_2GPU))
    plan = compile_plan(m.op, opts)
    assert [d.device for d in plan.decisions.values()] == ["cpu"]
    (note,) = plan.notes
    assert note.startswith("cuda:0, cuda:1: backend 'cuda' has no kernels")
    assert "No module named 'fuel_no_such_module'" in note and "fuel_no_such_module package" in note
    from tools.explain_text import explain_text

    assert f"note       {note}" in explain_text(plan, "big.mlir", opts)
    (op,) = plan.decisions
    op.attributes[PIN_ATTR] = DeviceAttr("cuda:0")
    with pytest.raises(PlanError, match="'fuel.matmul' is pinned to cuda:0, but backend 'cuda'"):
        compile_plan(m.op, opts)


def test_the_executor_loads_a_devices_backend_or_says_why_not(
    fresh: bt._GlobalState, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = FuelModule.parse(ON_CUDA)
    topo = load_file(CPU_2GPU)
    monkeypatch.setitem(bt.BACKEND_PROVIDERS, "cuda", MISSING)
    with pytest.raises(ExecutionError, match="cannot run on cuda:0: backend 'cuda' has no kernels"):
        Executor(m, topology=topo)
    monkeypatch.undo()  # the real provider, in a fresh state again
    monkeypatch.setattr(bt, "_STATE", bt._GlobalState())
    x = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)
    y = Executor(m, topology=topo).run({"x": x})["y"]  # the cuda kernels load on first use
    assert "cuda" in bt.loaded_backends()
    np.testing.assert_allclose(y, np.exp(x), rtol=1e-6)
