"""Executor views: single-index gathers and slices read their input in place, and a concat's
producers write straight into its output (a decode step's KV-cache update)."""

from __future__ import annotations

import numpy as np
import pytest

from frontends.builder import GraphBuilder
from runtime.compiled import ExecutionError
from runtime.executor import Executor
from runtime.loaders.c import find_compiler
from runtime.module import FuelModule

L, H, S, D = 3, 2, 16, 8  # layers, kv heads, cache length, head dim


def kv_update() -> FuelModule:
    """Per layer: take the layer's cache (gather at a constant index), write the new row at
    `pos` (where), read the updated cache (the attention's role) and stack the layers again
    (concat along axis 0): the llama decode step's data movement."""
    g = GraphBuilder(seed=0)
    cache = g.input("cache", (L, 1, H, S, D))
    pos = g.input("pos", (1,), "i64")
    new = g.input("new", (1, H, 1, D))
    hit = g.reshape(
        g.compare("eq", g.weight("arange", (S,), "i64", np.arange(S)), pos), (1, 1, S, 1)
    )
    layers, reads = [], []
    for i in range(L):
        sel = g.gather(cache, g.constant(i, "i64"), axis=0)
        upd = g.where(hit, g.mul(new, float(i + 1)), sel)
        reads.append(g.neg(upd))
        layers.append(g.reshape(upd, (1, 1, H, S, D)))
    return g.build({"cache_out": g.concat(layers, axis=0), "read": g.concat(reads, axis=1)})


def kv_reference(cache: np.ndarray, pos: int, new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    out = cache.copy()
    for i in range(L):
        out[i, :, :, pos : pos + 1] = new * np.float32(i + 1)
    return out, np.concatenate([-out[i] for i in range(L)], axis=1)


def kv_feeds(seed: int, pos: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "cache": rng.standard_normal((L, 1, H, S, D)).astype(np.float32),
        "pos": np.array([pos], np.int64),
        "new": rng.standard_normal((1, H, 1, D)).astype(np.float32),
    }


def test_kv_update_is_exact_and_copies_nothing_twice() -> None:
    ex = Executor(kv_update())
    for seed, pos in ((0, 3), (1, S - 1), (2, 0)):
        f = kv_feeds(seed, pos)
        got = ex.run(f)
        want = kv_reference(f["cache"], pos, f["new"])
        assert got["cache_out"].tobytes() == want[0].tobytes()
        assert got["read"].tobytes() == want[1].tobytes()
    # the layer gathers are views and both concats are gone (each lands in contiguous blocks:
    # the dims before its axis are 1): their inputs were written into their outputs
    assert "fuel.concat" not in ex.op_names
    cache_bytes = L * H * S * D * 4
    assert ex.memory.planned_bytes < 2 * cache_bytes + 2 * cache_bytes // L


def test_kv_update_outputs_are_fresh_and_never_alias_inputs() -> None:
    ex = Executor(kv_update())
    f0, f1 = kv_feeds(0, 3), kv_feeds(1, 5)
    a = ex.run(f0)["cache_out"]
    b = ex.run(f1)["cache_out"]
    assert a.tobytes() == kv_reference(f0["cache"], 3, f0["new"])[0].tobytes()  # not overwritten
    assert b.tobytes() == kv_reference(f1["cache"], 5, f1["new"])[0].tobytes()
    own = ex.run(f0, copy_outputs=False)["cache_out"]
    assert not np.shares_memory(own, f0["cache"])


def take_module(index: int, shape: tuple[int, ...] = (4, 3, 5), axis: int = 0) -> FuelModule:
    g = GraphBuilder()
    x = g.input("x", shape)
    return g.build({"y": g.gather(x, g.constant(index, "i64"), axis=axis)})


@pytest.mark.parametrize(("index", "axis"), [(0, 0), (3, 0), (-1, 0), (2, 1), (-5, 2)])
def test_gather_at_a_constant_index_equals_take(index: int, axis: int) -> None:
    ex = Executor(take_module(index, axis=axis))
    for seed in (0, 1):
        x = np.random.default_rng(seed).standard_normal((4, 3, 5)).astype(np.float32)
        want = np.take(x, index, axis=axis)
        for copy in (True, False):
            y = ex.run({"x": x}, copy_outputs=copy)["y"]
            assert y.tobytes() == want.tobytes() and y.shape == want.shape
            assert not np.shares_memory(y, x)  # an output never aliases the caller's input


def test_gather_out_of_range_still_raises() -> None:
    ex = Executor(take_module(4))
    with pytest.raises(ExecutionError, match="gather: index out of range"):
        ex.run({"x": np.zeros((4, 3, 5), np.float32)})


def test_gather_view_of_a_planned_buffer_keeps_it_alive() -> None:
    """The view shares its source's buffer: values planned after the source's last use must
    not land in it while the view is still read."""
    g = GraphBuilder()
    x = g.input("x", (4, 64))
    row = g.gather(g.neg(x), g.constant(2, "i64"), axis=0)  # neg(x) dies here: only the view
    filler = g.add(g.mul(x, 3.0), 1.0)  # same size as neg(x): would reuse its buffer
    m = g.build({"y": g.add(row, row), "f": filler})
    ex = Executor(m)
    x_ = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    got = ex.run({"x": x_})
    assert got["y"].tobytes() == (-x_[2] + -x_[2]).tobytes()
    assert got["f"].tobytes() == (x_ * np.float32(3) + np.float32(1)).tobytes()
    assert "fuel.gather" not in ex.op_names  # a static view: no schedule item at all


def test_slices_become_views_where_their_readers_take_them() -> None:
    g = GraphBuilder()
    x = g.input("x", (4, 6, 8))
    h = g.neg(x)
    lead = g.slice(h, [1, 0, 0], [3, 6, 8])  # a contiguous block
    half = g.slice(h, [0, 0, 4], [4, 6, 8])  # strided: neg reads it as is
    bent = g.slice(h, [0, 0, 0], [4, 6, 4])  # strided and reshaped: stays a copy
    m = g.build({"a": g.neg(lead), "b": g.neg(half), "c": g.reshape(bent, (4, 24))})
    ex = Executor(m)
    for seed in (0, 1):
        x_ = np.random.default_rng(seed).standard_normal((4, 6, 8)).astype(np.float32)
        got = ex.run({"x": x_})
        assert got["a"].tobytes() == x_[1:3].tobytes()
        assert got["b"].tobytes() == np.ascontiguousarray(x_[:, :, 4:]).tobytes()
        assert got["c"].tobytes() == (-x_[:, :, :4]).reshape(4, 24).tobytes()
    assert ex.op_names.count("fuel.slice") == 1


def test_a_slice_reshaped_as_a_view_is_a_view() -> None:
    """A GPT-2 qkv split: a strided slice reshaped to heads (numpy makes that a view) read by
    a kernel that walks strides is a view; a reshape that would need a copy (merging a
    strided dim) keeps the slice's copy, not_applied."""
    g = GraphBuilder()
    x = g.input("x", (2, 6, 24))
    h = g.neg(x)
    heads = g.reshape(g.slice(h, [0, 0, 8], [2, 6, 16]), (2, 6, 2, 4))  # a view of h
    flat = g.reshape(g.slice(h, [0, 0, 0], [2, 6, 8]), (2, 48))  # merges strided dims: a copy
    ex = Executor(g.build({"a": g.neg(heads), "b": g.neg(flat)}))
    for seed in (0, 1):
        x_ = np.random.default_rng(seed).standard_normal((2, 6, 24)).astype(np.float32)
        got = ex.run({"x": x_})
        assert got["a"].tobytes() == x_[:, :, 8:16].reshape(2, 6, 2, 4).tobytes()
        assert got["b"].tobytes() == x_[:, :, :8].reshape(2, 48).tobytes()
    assert ex.op_names.count("fuel.slice") == 1


def test_a_constants_strided_slice_reshaped_with_a_copy_runs() -> None:
    """A constant's strided slice, reshaped in a way only a copy can (merging the strided
    dims): copied once at compile time, which a constant's data allows."""
    g = GraphBuilder()
    w = np.arange(4 * 6 * 8, dtype=np.float32).reshape(4, 6, 8)
    flat = g.reshape(g.slice(g.weight("w", (4, 6, 8), value=w), [0, 0, 0], [4, 6, 4]), (4, 24))
    x = g.input("x", (4, 24))
    ex = Executor(g.build({"y": g.add(x, flat)}))
    x_ = np.ones((4, 24), np.float32)
    assert ex.run({"x": x_})["y"].tobytes() == (x_ + w[:, :, :4].reshape(4, 24)).tobytes()


def test_concat_in_place_inputs_outlive_the_concat() -> None:
    """A concat input read again after the concat's last use keeps the buffer alive."""
    g = GraphBuilder()
    x0, x1 = g.input("x0", (2, 32)), g.input("x1", (2, 32))
    u0, u1 = g.neg(x0), g.neg(x1)
    c = g.concat([u0, u1], axis=0)
    cc = g.neg(c)  # c dies here
    filler = g.add(g.concat([x0, x1], axis=0), 1.0)  # would take c's buffer if released
    m = g.build({"cc": cc, "f": filler, "late": g.mul(u0, 3.0)})
    ex = Executor(m)
    rng = np.random.default_rng(0)
    f = {
        "x0": rng.standard_normal((2, 32)).astype(np.float32),
        "x1": rng.standard_normal((2, 32)).astype(np.float32),
    }
    got = ex.run(f)
    both = np.concatenate([f["x0"], f["x1"]])
    assert got["cc"].tobytes() == both.tobytes()
    assert got["f"].tobytes() == (both + np.float32(1)).tobytes()
    assert got["late"].tobytes() == (-f["x0"] * np.float32(3)).tobytes()
    assert ex.op_names.count("fuel.concat") == 1  # the first: its inputs were written in place


def test_concat_of_a_returned_value_is_not_elided() -> None:
    g = GraphBuilder()
    x = g.input("x", (2, 4))
    u = g.neg(x)
    m = g.build({"u": u, "c": g.concat([u, g.add(x, 1.0)], axis=0)})
    ex = Executor(m)
    x_ = np.arange(8, dtype=np.float32).reshape(2, 4)
    got = ex.run({"x": x_}, copy_outputs=False)
    assert not np.shares_memory(got["u"], got["c"])
    assert got["c"].tobytes() == np.concatenate([-x_, x_ + 1]).tobytes()


@pytest.mark.parametrize(
    ("shape", "perm", "view"),
    [
        ((1, 1, 8, 4), (0, 2, 1, 3), True),  # decode's heads transpose: only unit dims move
        ((2, 1, 3), (1, 0, 2), True),
        ((1, 2, 8, 4), (0, 2, 1, 3), False),  # 2 and 8 swap: a real transpose
        ((3, 4), (1, 0), False),
    ],
)
def test_transpose_of_unit_dims_is_a_view(
    shape: tuple[int, ...], perm: tuple[int, ...], view: bool
) -> None:
    g = GraphBuilder(seed=0)
    x = g.input("x", shape)
    m = g.build({"y": g.neg(g.transpose(g.neg(x), perm))})  # a planned buffer: no view step
    ex = Executor(m)
    assert ("fuel.transpose" in ex.op_names) != view
    for seed in (0, 1):
        x_ = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
        want = np.ascontiguousarray(np.transpose(x_, perm))
        assert ex.run({"x": x_})["y"].tobytes() == want.tobytes()


def test_returned_unit_transpose_of_an_input_does_not_alias_it() -> None:
    g = GraphBuilder(seed=0)
    x = g.input("x", (1, 1, 4))
    ex = Executor(g.build({"y": g.transpose(x, (1, 0, 2))}))
    x_ = np.arange(4, dtype=np.float32).reshape(1, 1, 4)
    y = ex.run({"x": x_}, copy_outputs=False)["y"]
    x_[...] = -1
    assert y.ravel().tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.skipif(find_compiler() is None, reason="no C compiler")
def test_generated_c_kernels_write_into_the_concat() -> None:
    """With the elementwise ops lowered to generated C (`convert-fuel-to-c`), the launches
    write the layers' caches straight into the stacked output: no concat copies them."""
    from xdsl.context import Context

    from lowering.cpu.convert_fuel_to_c import ConvertFuelToCPass

    m = kv_update()
    ConvertFuelToCPass().apply(Context(), m.op)
    assert "fuel.c_launch" in str(m.op)
    ex = Executor(m)
    assert "fuel.concat" not in ex.op_names, ex.op_names
    rng = np.random.default_rng(1)
    cache = rng.standard_normal((L, 1, H, S, D)).astype(np.float32)
    new = rng.standard_normal((1, H, 1, D)).astype(np.float32)
    for pos in (0, 5):
        got = ex.run({"cache": cache, "pos": np.array([pos]), "new": new})
        want_cache, want_read = kv_reference(cache, pos, new)
        assert got["cache_out"].tobytes() == want_cache.tobytes()
        assert got["read"].tobytes() == want_read.tobytes()
