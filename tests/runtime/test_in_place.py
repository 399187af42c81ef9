"""In-place `fuel.index_copy` (runtime/in_place.py): a KV-cache write into a donated input or a
dying planned buffer writes the rows only; anything else keeps the functional copy.

Every written cache is compared exactly with a numpy reference (the op copies values); sums
over it within 1e-6."""

from __future__ import annotations

import statistics
import time

import numpy as np
import pytest

from frontends.builder import GraphBuilder
from runtime.compiled import ExecutionError, InputError
from runtime.executor import Executor
from runtime.module import FuelModule

RNG = np.random.default_rng(7)


def cache_step(slots: int, donate: bool = True, reread: bool = False) -> FuelModule:
    """A two-layer stacked cache `(2, 1, 2, slots, 8)`: row `pos` of each layer written (the
    second layer's row is k * k), and a sum over the updated cache (or, `reread`, over the
    cache as it came in, read after the writes)."""
    g = GraphBuilder()
    c = g.input("cache", (2, 1, 2, slots, 8), "f32", donate=donate)
    k = g.input("k", (1, 1, 2, 1, 8), "f32")
    pos = g.input("pos", (1,), "i64")
    c1 = g.index_copy(c, k, pos, 3, [0, 0, 0, 0, 0])
    c2 = g.index_copy(c1, g.mul(k, k), pos, 3, [1, 0, 0, 0, 0])
    s = g.reduce_sum(c if reread else c2, axes=[3])
    return g.build({"s": s, "cache": c2})


def want(cache: np.ndarray, k: np.ndarray, pos: int) -> np.ndarray:
    out = cache.copy()
    out[0, :, :, pos] = k[0, :, :, 0]
    out[1, :, :, pos] = (k * k)[0, :, :, 0]
    return out


def feeds(slots: int, pos: int) -> dict[str, np.ndarray]:
    return {
        "cache": RNG.standard_normal((2, 1, 2, slots, 8)).astype(np.float32),
        "k": RNG.standard_normal((1, 1, 2, 1, 8)).astype(np.float32),
        "pos": np.array([pos]),
    }


def test_a_donated_cache_is_written_in_place_and_handed_back() -> None:
    ex = Executor(cache_step(16))
    assert ex.in_place == ["fuel.index_copy"] * 2 and ex.donated_outputs == [False, True]
    f = feeds(16, 5)
    before = f["cache"].copy()
    out = ex.run(f)  # copy_outputs=True: still the caller's array, not a copy
    assert out["cache"] is f["cache"]
    np.testing.assert_array_equal(out["cache"], want(before, f["k"], 5))
    ref = want(before, f["k"], 5).sum(axis=3)
    np.testing.assert_allclose(out["s"], ref, rtol=1e-6, atol=1e-6)


def test_without_donation_or_with_a_later_read_it_copies() -> None:
    """Not donated: the caller's array is never written. Donated but the old cache is read
    after the writes: the first write copies (the old value stays readable)."""
    for module, reread in (
        (cache_step(16, donate=False), False),
        (cache_step(16, True, reread=True), True),
    ):
        ex = Executor(module)
        f = feeds(16, 15)
        before = f["cache"].copy()
        out = ex.run(f)
        np.testing.assert_array_equal(out["cache"], want(before, f["k"], 15))
        ref = (before if reread else out["cache"]).sum(axis=3)
        np.testing.assert_allclose(out["s"], ref, rtol=1e-6, atol=1e-6)
        if not reread:
            np.testing.assert_array_equal(f["cache"], before)
        assert ex.in_place == ["fuel.index_copy"]  # the second write: its dest is planned


def test_a_dying_planned_buffer_is_written_in_place() -> None:
    g = GraphBuilder()
    x = g.input("x", (4, 6), "f32")
    rows = g.input("rows", (4, 2), "f32")
    idx = g.input("idx", (2,), "i32")
    y = g.index_copy(g.add(x, x), rows, idx, 1)
    ex = Executor(g.build({"y": y}))
    assert ex.in_place == ["fuel.index_copy"]
    f = {
        "x": RNG.standard_normal((4, 6)).astype(np.float32),
        "rows": RNG.standard_normal((4, 2)).astype(np.float32),
        "idx": np.array([4, 1], np.int32),
    }
    ref = f["x"] + f["x"]
    ref[:, [4, 1]] = f["rows"]
    np.testing.assert_array_equal(ex.run(f)["y"], ref)


def cache_writes_only(slots: int) -> FuelModule:
    g = GraphBuilder()
    c = g.input("cache", (2, 1, 2, slots, 8), "f32", donate=True)
    k = g.input("k", (1, 1, 2, 1, 8), "f32")
    pos = g.input("pos", (1,), "i64")
    c1 = g.index_copy(c, k, pos, 3, [0, 0, 0, 0, 0])
    return g.build({"cache": g.index_copy(c1, k, pos, 3, [1, 0, 0, 0, 0]), "k2": g.mul(k, k)})


def test_a_decode_step_costs_the_same_for_any_cache_length() -> None:
    """The write touches one row per layer: 64 slots or 65536 (an 8 MiB cache, which a copy
    would take milliseconds to stream) run in about the same time."""

    def median_s(slots: int) -> float:
        ex = Executor(cache_writes_only(slots))
        assert len(ex.in_place) == 2
        f = feeds(slots, slots - 1)
        ts = []
        for _ in range(15):
            t = time.perf_counter()
            ex.run(f, copy_outputs=False)
            ts.append(time.perf_counter() - t)
        return statistics.median(ts)

    small, big = median_s(64), median_s(65536)
    assert big < 4 * small + 2e-4, (small, big)


def test_bad_donated_input_and_index_are_clear_errors() -> None:
    ex = Executor(cache_writes_only(8))
    f = feeds(8, 2)
    f["cache"].flags.writeable = False
    with pytest.raises(InputError, match="input 'cache' is donated .* writable C-contiguous"):
        ex.run(f)
    with pytest.raises(ExecutionError, match=r"index_copy: index \[8\] out of range .* 0 \.\. 7"):
        ex.run(feeds(8, 8))
