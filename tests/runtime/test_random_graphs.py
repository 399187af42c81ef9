"""Hypothesis: random graphs of elementwise, matmul and reduction ops, executed by fuel and
compared with a plain float64 numpy evaluation of the same graph."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frontends.builder import GraphBuilder
from runtime.executor import Executor

UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "neg": np.negative,
    "abs": np.abs,
    "relu": lambda v: np.maximum(v, 0),
    "tanh": np.tanh,
    "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
    "silu": lambda v: v / (1 + np.exp(-v)),
    "sin": np.sin,
    "cos": np.cos,
}
BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
}
REDUCE: dict[str, Callable[..., np.ndarray]] = {
    "reduce_sum": np.sum,
    "reduce_mean": np.mean,
    "reduce_max": np.max,
    "reduce_min": np.min,
}


@st.composite
def graphs(draw: st.DrawFn) -> tuple[GraphBuilder, list, dict[str, np.ndarray], str]:
    """Build a random graph; track each value's float64 reference alongside it."""
    dtype = draw(st.sampled_from(["f32", "f64"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    g = GraphBuilder()
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    feeds: dict[str, np.ndarray] = {}
    pool: list[tuple[object, np.ndarray]] = []
    for i in range(draw(st.integers(1, 3))):
        # inputs broadcast against each other: some dims collapsed to 1
        s = tuple(d if draw(st.booleans()) else 1 for d in shape)
        arr = rng.standard_normal(s).astype(np.float32 if dtype == "f32" else np.float64)
        feeds[f"x{i}"] = arr
        pool.append((g.input(f"x{i}", s, dtype), arr.astype(np.float64)))
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "reduce", "matmul"]))
        v, ref = pool[draw(st.integers(0, len(pool) - 1))]
        if kind == "unary":
            name = draw(st.sampled_from(sorted(UNARY)))
            pool.append((getattr(g, name)(v), UNARY[name](ref)))
        elif kind == "binary":
            w, wref = pool[draw(st.integers(0, len(pool) - 1))]
            try:
                np.broadcast_shapes(ref.shape, wref.shape)
            except ValueError:
                continue
            name = draw(st.sampled_from(sorted(BINARY)))
            pool.append((getattr(g, name)(v, w), BINARY[name](ref, wref)))
        elif kind == "reduce" and ref.ndim >= 1:
            name = draw(st.sampled_from(sorted(REDUCE)))
            axis = draw(st.integers(-ref.ndim, ref.ndim - 1))
            keep = draw(st.booleans()) or ref.ndim == 1
            out = getattr(g, name)(v, [axis], keepdim=keep)
            pool.append((out, REDUCE[name](ref, axis=axis, keepdims=keep)))
        elif kind == "matmul" and ref.ndim >= 2:
            # x @ x^T over the last two dims always contracts
            perm = [*range(ref.ndim - 2), ref.ndim - 1, ref.ndim - 2]
            t = g.transpose(v, perm)
            pool.append((g.matmul(v, t), ref @ ref.transpose(perm)))
    outs = [pool[-1], pool[draw(st.integers(0, len(pool) - 1))]]
    return g, outs, feeds, dtype


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_random_graph_matches_numpy(case: tuple[GraphBuilder, list, dict, str]) -> None:
    g, outs, feeds, dtype = case
    module = g.build(outputs={f"o{i}": v for i, (v, _) in enumerate(outs)})
    got = Executor(module).run(feeds)
    rtol = 1e-4 if dtype == "f32" else 1e-10
    for i, (_, ref) in enumerate(outs):
        r = got[f"o{i}"]
        assert r.shape == ref.shape and r.dtype == (np.float32 if dtype == "f32" else np.float64)
        scale = max(1.0, float(np.abs(ref).max(initial=0)))
        np.testing.assert_allclose(r, ref, rtol=rtol, atol=rtol * scale)
