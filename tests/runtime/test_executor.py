"""The executor: schedules, memory plan, views, input checking, kernel stamps, compile_node."""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest

from examples.decoder_block import BlockConfig, build_decoder_block, reference
from frontends.builder import GraphBuilder
from fuel_dialect.attrs import KERNEL_ATTR, KernelRefAttr
from runtime.binding_table import KernelBindingTable, NoKernelForOp
from runtime.compiled import (
    READY,
    CompletionHandle,
    ExecutionError,
    InputError,
    Pending,
    StaleKernelStamp,
    compile_node,
    compile_op,
    dispatched_kernel_source,
    execute_compiled,
)
from runtime.executor import Executor
from runtime.kernels import global_bindings
from runtime.module import FuelModule


def mlp(seed: int = 0) -> tuple[FuelModule, np.ndarray]:
    g = GraphBuilder(seed=seed)
    x = g.input("x", (4, 8))
    h = g.relu(g.add(g.matmul(x, g.weight("w1", (8, 16))), g.weight("b1", (16,))))
    y = g.matmul(h, g.weight("w2", (16, 3)))
    m = g.build(outputs={"y": y})
    return m, np.random.default_rng(seed).standard_normal((4, 8)).astype(np.float32)


def test_mlp_matches_numpy() -> None:
    m, x = mlp()
    w = {k: v.astype(np.float64) for k, v in m.weights.items()}
    ref = np.maximum(x @ w["w1"] + w["b1"], 0) @ w["w2"]
    got = Executor(m).run({"x": x})["y"]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_runs_many_times_with_fresh_outputs() -> None:
    m, x = mlp()
    ex = Executor(m)
    a = ex.run({"x": x})["y"]
    b = ex.run({"x": x * 2})["y"]
    c = ex.run([x])["y"]
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, b)  # the first result was not overwritten by the second run


def test_decoder_block_matches_float64_reference() -> None:
    cfg = BlockConfig()
    m = build_decoder_block(cfg)
    x = np.random.default_rng(3).standard_normal((1, cfg.seq, cfg.hidden)).astype(np.float32)
    got = Executor(m).run({"x": x})["y"]
    np.testing.assert_allclose(got, reference(cfg, m.weights, x), rtol=1e-4, atol=1e-4)


def test_memory_plan_reuses_buffers_after_last_use() -> None:
    g = GraphBuilder()
    v = g.input("x", (256,))
    for _ in range(20):
        v = g.exp(g.neg(v))
    ex = Executor(g.build(outputs=[v]))
    assert ex.memory.naive_bytes == 40 * 256 * 4
    assert ex.memory.buffers <= 3  # a chain needs two buffers in flight (+ the output)
    x = np.linspace(-1, 1, 256, dtype=np.float32)
    ref = x.astype(np.float64)
    for _ in range(20):
        ref = np.exp(-ref)
    np.testing.assert_allclose(ex.run({"x": x})["out"], ref, rtol=1e-6)


def test_reshape_is_a_view_and_keeps_its_buffer_alive() -> None:
    g = GraphBuilder()
    x = g.input("x", (2, 8))
    e = g.exp(x)
    r = g.reshape(e, (4, 4))  # view of e's buffer
    n = g.neg(g.neg(g.neg(x)))  # would reuse e's buffer if the view did not hold it
    out = g.add(r, g.reshape(n, (4, 4)))
    ex = Executor(g.build(outputs=[out, g.reshape(x, (16,))]))
    assert ex.op_names.count("fuel.reshape") == 1  # only the view of the graph input is per-run
    xs = np.arange(16, dtype=np.float32).reshape(2, 8) / 16
    res = ex.run({"x": xs})
    np.testing.assert_allclose(res["out0"], (np.exp(xs) - xs).reshape(4, 4), rtol=1e-6)
    np.testing.assert_array_equal(res["out1"], xs.reshape(16))


def test_output_that_is_an_input_or_weight() -> None:
    g = GraphBuilder()
    x = g.input("x", (3,))
    w = g.weight("w", (3,), value=np.array([1, 2, 3]))
    ex = Executor(g.build(outputs={"x": x, "w": w}))
    res = ex.run({"x": np.ones(3, np.float32)})
    np.testing.assert_array_equal(res["x"], np.ones(3))
    res["w"][0] = 100  # a copy: does not corrupt the weight
    np.testing.assert_array_equal(ex.run({"x": np.ones(3, np.float32)})["w"], [1, 2, 3])


@pytest.mark.parametrize(
    ("feed", "message"),
    [
        ({}, "missing input(s) x"),
        ({"x": np.zeros((4, 8), np.float32), "z": np.zeros(1)}, "unknown input(s) z"),
        ({"x": np.zeros((4, 9), np.float32)}, "input 'x' must be float32[4, 8], got float32[4, 9]"),
        ({"x": np.zeros((4, 8), np.float64)}, "input 'x' must be float32[4, 8], got float64[4, 8]"),
        ({"x": [[0.0] * 8] * 4}, "input 'x' must be float32[4, 8], got list"),
    ],
)
def test_bad_inputs_are_clear_errors(feed: dict, message: str) -> None:
    m, _ = mlp()
    with pytest.raises(InputError, match=re.escape(message)):
        Executor(m).run(feed)


def test_kernel_failure_names_the_op() -> None:
    g = GraphBuilder()
    table = g.weight("table", (4, 2))
    idx = g.input("idx", (3,), "i64")
    m = g.build(outputs=[g.gather(table, idx)])
    with pytest.raises(ExecutionError, match="'fuel.gather'.*failed"):
        Executor(m).run({"idx": np.array([0, 1, 7])})


def test_missing_kernel_fails_at_compile_time() -> None:
    m, _ = mlp()
    with pytest.raises(ExecutionError, match="cannot compile 'fuel.matmul'.*no kernel"):
        Executor(m, table=KernelBindingTable())


def test_kernel_stamp_pins_the_kernel_and_rejects_a_stale_revision() -> None:
    m, x = mlp()
    table = global_bindings()
    mm = next(op for op in m.op.walk() if op.name == "fuel.matmul")
    entry = table.lookup_with_caps("matmul", ("f32", "f32", "f32"), "cpu")
    mm.attributes[KERNEL_ATTR] = KernelRefAttr.get(
        "matmul", ["f32", "f32", "f32"], "cpu", entry.kernel_source, entry.revision_hash
    )
    assert compile_op(mm, table).entry is entry
    Executor(m).run({"x": x})
    mm.attributes[KERNEL_ATTR] = KernelRefAttr.get(
        "matmul", ["f32", "f32", "f32"], "cpu", entry.kernel_source, entry.revision_hash ^ 1
    )
    with pytest.raises(StaleKernelStamp, match="re-run the picker"):
        compile_op(mm, table)
    with pytest.raises(ExecutionError, match="stamped"):
        Executor(m)


def test_compile_node_then_execute_add_f32() -> None:
    node = compile_node("add", ("f32", "f32", "f32"), "cpu", {}, global_bindings())
    a, b = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    out = np.empty(4, np.float32)
    handle = execute_compiled(node, [a, b], [out])
    assert handle is READY and handle.is_ready
    handle.wait()
    np.testing.assert_array_equal(out, a + 1)
    assert node.output_dtype() == "f32" and node.kernel_source == "numpy"


def test_compile_node_errors_on_missing_binding() -> None:
    with pytest.raises(NoKernelForOp, match="'add' with dtypes \\(i1, i1, i1\\)"):
        compile_node("add", ("i1", "i1", "i1"), "cpu", {}, global_bindings())


def test_completion_handle_pending_delegates_to_completion() -> None:
    class Flag:
        waited = 0

        def wait(self) -> None:
            Flag.waited += 1

    h = Pending(Flag())
    assert not h.is_ready
    h.wait()
    assert Flag.waited == 1
    CompletionHandle().wait()  # ready: a no-op


def test_dispatched_kernel_source() -> None:
    m, _ = mlp()
    mm = next(op for op in m.op.walk() if op.name == "fuel.matmul")
    want = "torch-blas" if importlib.util.find_spec("torch") else "numpy"  # vendor BLAS first
    assert dispatched_kernel_source(mm, global_bindings()) == want


def test_constants_that_would_not_survive_the_ir_text_become_weights() -> None:
    g = GraphBuilder()
    x = g.input("x", (3,))
    c = g.constant([np.nan, np.inf, 12572254.0])  # xDSL prints these in hex
    ok = g.constant([0.5, 1.0, 2.0])
    m = g.build(outputs=[g.add(g.mul(x, ok), c)])
    assert list(m.weights) == ["constant.0"]
    reloaded = type(m).parse(str(m.op))
    reloaded.weights = m.weights
    got = Executor(reloaded).run({"x": np.ones(3, np.float32)})["out"]
    np.testing.assert_array_equal(got, np.array([np.nan, np.inf, 12572256.0], np.float32))
