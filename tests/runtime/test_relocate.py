"""Outputs handed over uncopied (`runtime.relocate`): a run gives the caller the executor's own
buffer of each large output, and moves the schedule off any buffer the caller still holds
before it writes again, so what the caller keeps is never overwritten."""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

from frontends.builder import GraphBuilder
from passes.optimize import optimize_graph
from runtime import native
from runtime.executor import MOVE_BYTES, Executor
from runtime.module import FuelModule
from runtime.relocate import census

# -- census and move on a hand-made schedule ---------------------------------------------------


def _ptr(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def test_census_finds_views_pointers_and_words_and_move_rewrites_them() -> None:
    raw = np.zeros(4096, np.uint8)
    f = raw[:1024].view(np.float32).reshape(16, 16)
    t = raw[1024:2048].view(np.float32).reshape(16, 16).T  # a strided view
    args = [[f, 7, "x"], {"out": t}, _ptr(raw) + 1024]
    ptrs = (ctypes.c_void_p * 2)(_ptr(raw) + 64, 5)
    words = np.array([3, _ptr(raw) + 2048, 9, _ptr(raw)], np.int64)
    rel = census(raw, [args, ptrs], [words])
    assert rel is not None
    assert len(rel.views) == 2 and len(rel.ints) == 2 and len(rel.words) == 1
    assert rel.held()  # this test's own names for the buffer and its views
    old = _ptr(raw)
    del raw, f, t
    assert not rel.held()
    rel.move()
    new = rel.raw
    assert _ptr(new) != old and rel.spare
    assert _ptr(args[0][0]) == _ptr(new) and args[0][0].shape == (16, 16)
    assert args[1]["out"].strides == (4, 64) and _ptr(args[1]["out"]) == _ptr(new) + 1024
    assert args[2] == _ptr(new) + 1024 and ptrs[0] == _ptr(new) + 64 and ptrs[1] == 5
    assert words.tolist() == [3, _ptr(new) + 2048, 9, _ptr(new)]
    assert args[0][1:] == [7, "x"]


def test_a_reference_that_cannot_be_rewritten_pins_the_buffer() -> None:
    raw = np.zeros(256, np.uint8)
    view = raw[:64].view(np.float32)
    assert census(raw, [[(view, 1)]], []) is None  # in a tuple
    assert census(raw, [[(_ptr(raw), 1)]], []) is None  # a pointer in a tuple

    def kernel() -> np.ndarray:
        return view

    assert census(raw, [[(kernel, [])]], []) is None  # in a closure
    assert census(raw, [[(len, [view])]], []) is not None


def test_held_sees_the_callers_views_and_move_reuses_dropped_spares() -> None:
    raw = np.zeros(256, np.uint8)
    args = [raw[:64].view(np.float32)]
    rel = census(raw, [args], [])
    first_ptr = _ptr(raw)
    del raw
    assert rel is not None and not rel.held()
    kept = args[0].view()[1:]  # a view of a view: its base is the buffer
    assert rel.held()
    rel.move()
    second_ptr = _ptr(rel.raw)
    assert not rel.held() and np.shares_memory(kept, rel.spare[0])
    held = args[0].view()
    rel.move()  # the spare is still held (kept): a new buffer
    assert _ptr(rel.raw) not in (first_ptr, second_ptr)
    del kept, held
    gc.collect()
    rel.move()  # the buffers moved off are free again: the oldest is reused
    assert _ptr(rel.raw) == first_ptr and len(rel.spare) == 2


# -- the executor ------------------------------------------------------------------------------

needs_native = pytest.mark.skipif(not native.enabled(), reason="no C compiler (or FUEL_NATIVE=0)")

H, S, D, N = 4, 96, 64, 256  # heads, cache length, head dim, rows


def step() -> FuelModule:
    """A decode-like step: the cache grows by one row (concat) and is read by the attention,
    a product on a weight makes a large output that a layer norm reads in the same program."""
    g = GraphBuilder(seed=0)
    x = g.input("x", (N, D))
    k = g.input("k", (1, H, S, D))
    v = g.input("v", (1, H, S, D))
    q = g.input("q", (1, H, 1, D))
    kn, vn = g.input("kn", (1, H, 1, D)), g.input("vn", (1, H, 1, D))
    k2, v2 = g.concat([k, kn], axis=2), g.concat([v, vn], axis=2)
    a = g.attention(q, k2, v2, scale=0.125)
    y = g.matmul(x, g.weight("w", (D, 2 * D)))
    z = g.layer_norm(y, g.weight("lw", (2 * D,)), g.weight("lb", (2 * D,)))
    return g.build({"k_out": k2, "v_out": v2, "a": a, "y": y, "z": z})


def step_feeds(seed: int, k: np.ndarray | None = None, v: np.ndarray | None = None) -> dict:
    rng = np.random.default_rng(seed)

    def r(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    return {
        "x": r(N, D),
        "k": r(1, H, S, D) if k is None else k[:, :, 1:],
        "v": r(1, H, S, D) if v is None else v[:, :, 1:],
        "q": r(1, H, 1, D),
        "kn": r(1, H, 1, D),
        "vn": r(1, H, 1, D),
    }


def optimized_step() -> FuelModule:
    m = step()
    optimize_graph(m.op)
    return m


@pytest.fixture(scope="module")
def reference() -> Executor:
    """The same module, every output copied (its moves turned off)."""
    ex = Executor(optimized_step())
    ex._moves = [None] * len(ex._moves)
    ex._movers = []
    return ex


def _same(got: dict, want: dict) -> bool:
    return all(got[k].tobytes() == want[k].tobytes() for k in want)


@needs_native
def test_large_outputs_are_handed_over_uncopied_and_reused_once_dropped(
    reference: Executor,
) -> None:
    ex = Executor(optimized_step())
    movable = {n for n, m in zip(ex.output_names, ex._moves, strict=True) if m is not None}
    assert movable == {"k_out", "v_out", "y", "z"}  # "a" is below MOVE_BYTES
    assert H * 1 * D * 4 < MOVE_BYTES
    assert any(rel.words for rel in ex._movers)  # a native program reads one of them
    f = step_feeds(0)
    ptrs = set()
    for _ in range(3):
        got = ex.run(f)
        assert _same(got, reference.run(f))
        ptrs.add(got["y"].ctypes.data)
        del got
    assert len(ptrs) == 1  # dropped each time: the same buffer every run, never copied


@needs_native
def test_an_output_the_caller_keeps_is_never_overwritten(reference: Executor) -> None:
    ex = Executor(optimized_step())
    f0, f1, f2 = step_feeds(0), step_feeds(1), step_feeds(2)
    r0 = ex.run(f0)
    w0 = {k: a.copy() for k, a in r0.items()}
    part = ex.run(f1)["z"][3:]  # only a view of one output kept
    r2 = ex.run(f2)
    assert _same(r0, w0)
    assert part.tobytes() == reference.run(f1)["z"][3:].tobytes()
    assert _same(r2, reference.run(f2))
    for k in r0:
        assert not np.shares_memory(r0[k], r2[k])


@needs_native
def test_a_decode_loop_feeding_the_cache_back(reference: Executor) -> None:
    ex = Executor(optimized_step())
    f = g = step_feeds(0)
    for i in range(6):
        got, want = ex.run(f), reference.run(g)
        assert _same(got, want)
        f = step_feeds(10 + i, got["k_out"], got["v_out"])
        g = step_feeds(10 + i, want["k_out"], want["v_out"])


@needs_native
def test_profiling_never_writes_into_a_kept_output() -> None:
    ex = Executor(optimized_step())
    kept = ex.run(step_feeds(0))
    want = {k: a.copy() for k, a in kept.items()}
    ex.profile_items(step_feeds(1), runs=2)
    assert _same(kept, want)


def chain() -> FuelModule:
    """An elementwise chain over a large tensor: one generated C kernel writes the output."""
    g = GraphBuilder(seed=0)
    x = g.input("x", (128, 256))
    y = g.tanh(g.add(g.mul(x, 2.0), 1.0))
    return g.build({"y": g.mul(y, x)})


@needs_native
def test_a_generated_c_kernels_pointer_array_moves_too(tmp_path) -> None:  # noqa: ANN001
    from lowering.bundle import load_bundle, write_bundle
    from runtime.loaders.c import find_compiler

    if find_compiler() is None:
        pytest.skip("no C compiler")
    path = write_bundle(chain(), tmp_path / "chain", options={"cpu": {"codegen": "c"}})
    ex = load_bundle(path).executor()
    assert any("c_launch" in n for n in ex.op_names), ex.op_names
    (rel,) = ex._movers
    assert rel.ints  # the kernel's pointer array
    xs = [np.random.default_rng(i).standard_normal((128, 256)).astype(np.float32) for i in range(3)]
    kept = [ex.run({"x": x})["y"] for x in xs]  # each run while the earlier outputs are held
    for x, y in zip(xs, kept, strict=True):
        want = np.tanh(x * np.float32(2) + np.float32(1)) * x
        np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
    assert len({y.ctypes.data for y in kept}) == 3
