"""One thread pool per process (issue 15): every multithreaded CPU kernel a plan runs is on
fuel's native pool; numpy's BLAS and torch run on the calling thread inside fuel's calls."""

from __future__ import annotations

import numpy as np
import pytest

from frontends.builder import GraphBuilder
from passes.optimize import optimize_graph
from runtime import native
from runtime.binding_table import KernelBindingTable
from runtime.compiled import compile_op
from runtime.executor import Executor
from runtime.kernels import global_bindings
from runtime.kernels.cpu import torch_blas
from runtime.native import blas

H, S, HD, D, F = 8, 128, 64, 512, 256  # the zoo Llama's attention shapes; a narrower MLP


def decode_block() -> object:
    """One token through a written-out attention (batched products the pattern pass leaves
    alone: [1, 8, 1, 64] x [1, 8, 64, 128]) and a SiLU-gated MLP, as an unknown export."""
    g = GraphBuilder(seed=0)
    x = g.input("x", (1, D))
    kt = g.input("kt", (1, H, HD, S))
    v = g.input("v", (1, H, S, HD))
    q = g.reshape(g.matmul(x, g.weight("wq", (D, D))), (1, H, 1, HD))
    p = g.softmax(g.matmul(q, kt), axis=-1)
    a = g.reshape(g.matmul(p, v), (1, D))
    h = g.add(x, g.matmul(a, g.weight("wo", (D, D))))
    up = g.mul(g.silu(g.matmul(h, g.weight("wg", (D, F)))), g.matmul(h, g.weight("wu", (D, F))))
    return g.build({"y": g.add(h, g.matmul(up, g.weight("wd", (F, D))))})


def test_every_cpu_kernel_is_on_fuels_pool_or_the_callers() -> None:
    """No CPU kernel source names a pool of its own: the cost model has none to choose."""
    table = global_bindings()
    pools = {
        blas.pool_of(e.kernel_source)
        for (_, _, backend), entries in table._rows.items()
        if backend == "cpu"
        for e in entries
    }
    assert pools <= {blas.POOL_FUEL, blas.POOL_CALLER}


@pytest.mark.skipif(not native.enabled(), reason="no C compiler (or FUEL_NATIVE=0)")
def test_a_plans_products_all_run_on_fuels_pool() -> None:
    """The picker gives every product of an unknown export (the batched attention products
    included) to fuel's native kernels, never to torch-blas or numpy's BLAS."""
    m = decode_block()
    optimize_graph(m.op)
    table = global_bindings()
    products = {"matmul", "gated_mlp", "matmul_bias_act", "attention"}
    pools = {}
    for op in m.function().walk():
        if getattr(op, "name", "").removeprefix("fuel.") in products:
            pools[op.name, str(op.results[0].type)] = blas.pool_of(
                compile_op(op, table, "cpu").entry.kernel_source
            )
    assert pools and set(pools.values()) == {blas.POOL_FUEL}, pools
    ex = Executor(m)
    g = np.random.default_rng(0)
    feeds = {
        "x": g.standard_normal((1, D)).astype(np.float32),
        "kt": g.standard_normal((1, H, HD, S)).astype(np.float32),
        "v": g.standard_normal((1, H, S, HD)).astype(np.float32),
    }
    m_ref = decode_block()
    ref = Executor(m_ref).run(feeds)["y"]  # unoptimized: numpy kernels
    got = ex.run(feeds)["y"]
    assert np.abs(got - ref).max() <= 1e-4 * max(1.0, np.abs(ref).max())


def test_numpy_blas_runs_on_one_thread_inside_a_run() -> None:
    """A kernel the executor calls sees numpy's OpenBLAS on one thread; the caller's setting
    is back after the run."""
    seen: list[list[int]] = []

    def probe(inputs, outputs, params) -> None:  # noqa: ANN001 - the kernel protocol
        seen.append(blas.openblas_threads())
        np.matmul(inputs[0], inputs[1], out=outputs[0])

    table = KernelBindingTable()
    table.register("matmul", ("f64",) * 3, "cpu", probe)
    table.finalize()
    g = GraphBuilder(seed=0)
    x = g.input("x", (4, 8), "f64")
    module = g.build({"y": g.matmul(x, g.weight("w", (8, 3), "f64"))})
    before = blas.openblas_threads()
    Executor(module, table).run({"x": np.ones((4, 8))})
    assert seen and all(n == 1 for n in seen[0]), seen
    assert blas.openblas_threads() == before


@pytest.mark.skipif(not torch_blas.available(), reason="torch is not installed")
def test_torch_blas_products_run_on_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = torch_blas._torch()
    threads: list[int] = []
    matmul = torch.matmul

    def spy(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - torch.matmul's signature
        threads.append(torch.get_num_threads())
        return matmul(*args, **kwargs)

    monkeypatch.setattr(torch, "matmul", spy)
    before = torch.get_num_threads()
    a, b = np.ones((1, 8, 16, 64), np.float32), np.ones((1, 8, 64, 32), np.float32)
    out = np.empty((1, 8, 16, 32), np.float32)
    torch_blas._matmul_torch([a, b], [out], {})
    assert threads == [1] and torch.get_num_threads() == before
    assert (out == 64.0).all()
