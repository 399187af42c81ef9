"""Row kernels: generated C for groups with reductions over the last axis (a longhand softmax
or norm as one kernel), checked against the same graph in float64 (lowering/cpu/codegen_rows)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import func

from frontends.builder import GraphBuilder
from lowering.cpu.convert_fuel_to_c import ConvertFuelToCPass
from lowering.kernel_source import check_kernel_sources
from runtime import native
from runtime.executor import Executor
from runtime.module import FuelModule

pytestmark = pytest.mark.skipif(not native.enabled(), reason="needs a C compiler")

Graph = Callable[[GraphBuilder, object, tuple[int, ...], str], dict]


def _vec(g: GraphBuilder, n: int, dt: str, seed: int) -> object:
    v = np.random.default_rng(seed).uniform(0.5, 1.5, n).astype(np.float32)  # f32 values
    return g.constant(v, dt)


def log_softmax(g: GraphBuilder, x: object, s: tuple[int, ...], dt: str) -> dict:
    d = g.sub(x, g.reduce_max(x, -1, keepdim=True))
    return {"y": g.sub(d, g.log(g.reduce_sum(g.exp(d), -1, keepdim=True)))}


def softmax_temperature(g: GraphBuilder, x: object, s: tuple[int, ...], dt: str) -> dict:
    t = g.mul(x, 0.7)
    e = g.exp(g.sub(t, g.reduce_max(t, -1, keepdim=True)))
    return {"y": g.div(e, g.reduce_sum(e, -1, keepdim=True))}


def norm_and_stats(g: GraphBuilder, x: object, s: tuple[int, ...], dt: str) -> dict:
    """Layer norm with eps outside the sqrt and a weight; the mean and std are outputs too."""
    mu = g.reduce_mean(x, -1, keepdim=True)
    d = g.sub(x, mu)
    sd = g.sqrt(g.reduce_mean(g.mul(d, d), -1, keepdim=True))
    y = g.mul(g.div(d, g.add(sd, 1e-5)), _vec(g, s[-1], dt, 1))
    return {"y": y, "mu": mu, "sd": sd}


def l2_min(g: GraphBuilder, x: object, s: tuple[int, ...], dt: str) -> dict:
    n = g.sqrt(g.reduce_sum(g.mul(x, x), -1, keepdim=True))
    lo = g.reduce_min(x, -1, keepdim=True)
    return {"y": g.sub(g.div(x, g.max(n, 1e-12)), lo)}


def build(graph: Graph, shape: tuple[int, ...], dt: str) -> FuelModule:
    g = GraphBuilder()
    x = g.input("x", shape, dt)
    return g.build(graph(g, x, shape, dt))


def converted(m: FuelModule, **options: object) -> FuelModule:
    out = FuelModule(m.op.clone(), dict(m.weights))
    ConvertFuelToCPass(**options).apply(Context(), out.op)  # type: ignore[arg-type]
    return out


def top_ops(m: FuelModule) -> list[str]:
    f = next(op for op in m.op.ops if isinstance(op, func.FuncOp))
    return [op.name for op in f.body.block.ops if op.name not in ("fuel.constant", "func.return")]


@pytest.mark.parametrize(
    ("graph", "shape"),
    [(log_softmax, (6, 100)), (softmax_temperature, (1000,)), (norm_and_stats, (2, 3, 37))]
    + [(l2_min, (5, 16))],
)
def test_one_kernel_within_a_few_ulp_of_float64(graph: Graph, shape: tuple[int, ...]) -> None:
    """Each longhand graph is one kernel; per row, its error is a few f32 ulps of the row's
    largest value (numpy's f32 op-by-op run for scale)."""
    x = (np.random.default_rng(5).standard_normal(shape) * 3).astype(np.float32)
    m = build(graph, shape, "f32")
    c = converted(m, cost_model=False)
    assert top_ops(c) == ["fuel.c_launch"]
    got = Executor(c).run({"x": x})
    ref = Executor(build(graph, shape, "f64")).run({"x": x.astype(np.float64)})
    lib = Executor(m).run({"x": x})
    for k, r in ref.items():
        scale = np.abs(r).max(axis=-1, keepdims=True)
        err = np.abs(got[k] - r).max() / scale.max()
        assert err <= 4 * np.finfo(np.float32).eps, (k, err)
        assert err <= 2 * np.abs(lib[k] - r).max() / scale.max() + np.finfo(np.float32).eps


def test_nan_and_inf_rows_match_numpy() -> None:
    x = np.random.default_rng(1).standard_normal((4, 40)).astype(np.float32)
    x[1, 7], x[2, 39], x[3, 0] = np.nan, np.inf, -np.inf
    for graph in (log_softmax, l2_min):
        m = build(graph, (4, 40), "f32")
        with np.errstate(all="ignore"):
            got = Executor(converted(m, cost_model=False)).run({"x": x})["y"]
            want = Executor(m).run({"x": x})["y"]
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want))


def test_a_stated_floor_keeps_reductions_on_numpy() -> None:
    m = converted(build(log_softmax, (6, 100), "f32"), cost_model=False, precision="ulp=1")
    assert "fuel.reduce_max" in top_ops(m) and "fuel.reduce_sum" in top_ops(m)


def test_reductions_not_over_the_last_axis_stay_on_numpy() -> None:
    g = GraphBuilder()
    x = g.input("x", (8, 16))
    m = g.build({"y": g.sub(x, g.reduce_max(g.exp(x), 0, keepdim=True))})
    assert "fuel.reduce_max" in top_ops(converted(m, cost_model=False))


def test_row_kernel_source_regenerates_from_its_body() -> None:
    m = converted(build(norm_and_stats, (2, 3, 37), "f32"))
    assert check_kernel_sources(m.op, "m") == 1
    source = next(op.source.data for op in m.op.walk() if op.name == "fuel.c_kernel")
    assert "acc" in source and "fuel.reduce_mean" in source
