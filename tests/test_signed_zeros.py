"""The sign of a zero is part of a result: the ulp metric counts it, and the kernels give the
sign IEEE 754 gives (a sum of only -0.0 is -0.0; max/min order -0 below +0, IEEE 754-2019), in
every float dtype and every registered sibling, the generated C kernels included."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context

from frontends.builder import GraphBuilder
from lowering.cpu.convert_fuel_to_c import ConvertFuelToCPass
from runtime.contracts.references import reference
from runtime.dtypes import FLOAT_DTYPES, NUMPY_DTYPES
from runtime.executor import Executor
from runtime.kernels import global_bindings
from runtime.module import FuelModule
from runtime.precision import measure_errors, signbit, ulp_distance

F = FLOAT_DTYPES
TABLE = global_bindings()


def test_plus_and_minus_zero_are_one_ulp_apart() -> None:
    got = np.array([0.0, -0.0, -0.0, 0.0, 1e-45], np.float32)
    ref = np.array([-0.0, 0.0, -0.0, 0.0, -1e-45])
    assert ulp_distance(got, ref).tolist() == [1, 1, 0, 0, 2]
    report = measure_errors(np.array([0.0], np.float16), np.array([-0.0]))
    assert report.max_ulp == 1 and not report.bit_exact


def _every(op: str, t: str):
    return TABLE.lookup_alternatives(op, (t, t), "cpu")


ROWS = [[-0.0] * 9, [-0.0, 0.0] * 4 + [-0.0], [0.0] * 9, [-0.0] * 7 + [1.5, -1.5]]


@pytest.mark.parametrize("t", F)
@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min"])
def test_reductions_of_signed_zeros(op: str, t: str) -> None:
    """Only -0.0 sums to -0.0; mixed zeros and x + -x to +0.0; max is -0 only without a +0,
    min is -0 with any -0. The float64 reference says the same."""
    x = np.array(ROWS, NUMPY_DTYPES[t])
    want = {
        "reduce_sum": [True, False, False, False],
        "reduce_mean": [True, False, False, False],
        "reduce_max": [True, False, False, True],
        "reduce_min": [True, True, False, True],
    }[op]
    params = {"axes": (1,), "keepdim": False}
    if op in ("reduce_max", "reduce_min"):  # the last row's extremum stays a -0
        x[3, 7:] = -1.5 if op == "reduce_max" else 1.5
    ref = reference(op, (t, t), [x], params)
    assert signbit(ref).tolist() == want
    for e in _every(op, t):
        out = np.full(4, 7, NUMPY_DTYPES[t])
        e.kernel([x], [out], params)
        assert (out.astype(np.float64) == 0).all() and signbit(out).tolist() == want, (
            e.kernel_source
        )


@pytest.mark.parametrize("t", F)
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_order_minus_zero_below_plus_zero(op: str, t: str) -> None:
    a = np.array([-0.0, 0.0, -0.0, 0.0, np.nan, -0.0], NUMPY_DTYPES[t])
    b = np.array([0.0, -0.0, -0.0, 0.0, -0.0, np.nan], NUMPY_DTYPES[t])
    negative = [False, False, True, False] if op == "max" else [True, True, True, False]
    for e in TABLE.lookup_alternatives(op, (t, t, t), "cpu"):
        out = np.full(6, 7, NUMPY_DTYPES[t])
        e.kernel([a, b], [out], {})
        assert signbit(out[:4]).tolist() == negative, e.kernel_source
        assert np.isnan(out[4:].astype(np.float64)).all(), e.kernel_source


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("op", ["max", "min"])
def test_generated_c_max_min_match_the_numpy_kernels_on_zero_ties(op: str, t: str) -> None:
    pytest.importorskip("ctypes")
    g = GraphBuilder()
    x, y = g.input("x", (4,), t), g.input("y", (4,), t)
    module = g.build({"z": g.add(getattr(g, op)(x, y), g.input("w", (4,), t))})
    feeds = {
        "x": np.array([-0.0, 0.0, -0.0, 0.0], NUMPY_DTYPES[t]),
        "y": np.array([0.0, -0.0, -0.0, 0.0], NUMPY_DTYPES[t]),
        "w": np.full(4, -0.0, NUMPY_DTYPES[t]),  # -0 + z keeps z's sign
    }
    lowered = FuelModule(module.op.clone(), dict(module.weights))
    ConvertFuelToCPass(min_ops=1, cost_model=False).apply(Context(), lowered.op)
    if not any(o.name == "fuel.c_launch" for o in lowered.op.walk()):
        pytest.skip("no C compiler: nothing was converted")
    want = Executor(module).run(feeds)["z"]
    got = Executor(lowered).run(feeds)["z"]
    assert signbit(got).tolist() == signbit(want).tolist()
    assert signbit(want).tolist() == (
        [False, False, True, False] if op == "max" else [True] * 3 + [False]
    )
