"""`fuel-canonicalize` numerics: every rewrite that changes a value is checked against float64
(the powers within the bounds `passes.canonical.powers` states; GELU and SiLU no further from
the float64 function than the f32 chains they replace); data movement is bit-identical."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from xdsl.dialects.builtin import IntegerAttr, i64

from frontends.builder import GraphBuilder, Value
from fuel_dialect.branch import PICKED_ATTR, BranchOp
from passes.canonicalize import canonicalize
from passes.fuse_patterns import fuse_patterns
from runtime.executor import Executor
from runtime.module import FuelModule

RNG = np.random.default_rng(7)


def names(m: FuelModule) -> list[str]:
    return [op.name for op in m.entry.body.block.ops]


def before_after(m: FuelModule, feeds: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The module's output as written, then after `canonicalize` (which must change it)."""
    before = Executor(m).run(feeds)["y"]
    text = str(m.op)
    canonicalize(m.op)
    m.op.verify()
    assert str(m.op) != text
    return before, Executor(m).run(feeds)["y"]


def ulps(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in units of the f32 spacing at `exact` (float64)."""
    return np.abs(got.astype(np.float64) - exact) / np.spacing(np.abs(exact).astype(np.float32))


POWER_ULPS = {1.0: 0.0, 2.0: 0.5, 3.0: 2.0, -1.0: 0.5, 0.5: 0.5, -0.5: 1.0}
"""The bound `passes.canonical.powers` states for each spelled power (f32, finite normal)."""


@pytest.mark.parametrize("c", sorted(POWER_ULPS))
def test_spelled_powers_against_float64(c: float) -> None:
    g = GraphBuilder()
    x = g.input("x", (4096,))
    m = g.build({"y": g.pow(x, g.constant(c))})
    xs = RNG.uniform(-30, 30, 4096).astype(np.float32)
    xs = np.abs(xs) if c != int(c) else xs  # half powers of negatives are NaN either way
    pow_f32, got = before_after(m, {"x": xs})
    assert "fuel.pow" not in names(m)
    exact = np.power(xs.astype(np.float64), c)
    assert ulps(got, exact).max() <= POWER_ULPS[c]
    assert ulps(pow_f32, exact).max() <= 1.0  # the pow kernel's own claim: faithful


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
@pytest.mark.parametrize("c", [2.0, 3.0, -1.0])
def test_integer_powers_keep_the_special_values(c: float) -> None:
    """inf, NaN and signed zeros come out as numpy's float64 power gives them."""
    g = GraphBuilder()
    x = g.input("x", (6,))
    m = g.build({"y": g.pow(x, g.constant(c))})
    xs = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, -2.5], dtype=np.float32)
    _, got = before_after(m, {"x": xs})
    want = np.power(xs.astype(np.float64), c).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    assert (np.signbit(got) == np.signbit(want)).all()


def gelu_erf_chain(g: GraphBuilder, v: Value) -> Value:
    """torch.onnx's erf GELU: (v * (1 + erf(v / sqrt 2))) * 0.5."""
    return g.mul(g.mul(v, g.add(g.erf(g.div(v, math.sqrt(2))), 1.0)), 0.5)


def gelu_tanh_chain(g: GraphBuilder, v: Value) -> Value:
    """GPT-2's NewGELU: 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 pow(v, 3))))."""
    inner = g.mul(g.add(v, g.mul(g.pow(v, g.constant(3.0)), 0.044715)), math.sqrt(2 / math.pi))
    return g.mul(g.mul(v, 0.5), g.add(g.tanh(inner), 1.0))


def silu_chain(g: GraphBuilder, v: Value) -> Value:
    return g.mul(v, g.sigmoid(v))


_erfc64 = np.vectorize(math.erfc, otypes=[np.float64])


def _gelu_erf64(x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + erf(x / sqrt 2)) as 0.5 x erfc(-x / sqrt 2): no cancellation for x << 0."""
    return 0.5 * x * _erfc64(-x / math.sqrt(2))


def _gelu_tanh64(x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + tanh(z)) as x / (1 + exp(-2 z)): no cancellation for x << 0."""
    return x / (1 + np.exp(-2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


ACTIVATIONS: dict[str, tuple[Callable[..., Value], str, Callable[[np.ndarray], np.ndarray]]] = {
    "gelu_erf": (gelu_erf_chain, "fuel.gelu", _gelu_erf64),
    "gelu_tanh": (gelu_tanh_chain, "fuel.gelu", _gelu_tanh64),
    "silu": (silu_chain, "fuel.silu", lambda x: x / (1 + np.exp(-x))),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_folded_activation_is_no_further_from_float64(name: str) -> None:
    """The one op is within 1 ulp of the float64 function (its kernels round once from f64)
    and, normwise, no further from it than the f32 chain it replaces."""
    chain, op, f64 = ACTIVATIONS[name]
    g = GraphBuilder()
    m = g.build({"y": chain(g, g.input("x", (8192,)))})
    xs = np.concatenate([RNG.uniform(-12, 12, 8000), RNG.standard_normal(192) * 1e-3])
    xs = xs.astype(np.float32)
    chain_f32, got = before_after(m, {"x": xs})
    assert names(m) == [op, "func.return"]
    exact = f64(xs.astype(np.float64))
    err = np.abs(got - exact).max()
    assert err <= np.abs(chain_f32 - exact).max()
    tiny = np.abs(exact) < 1e-30  # the far negative tail: both are ~0 there
    assert ulps(got[~tiny], exact[~tiny]).max() <= 1.0


def test_reshape_and_transpose_pairs_are_bit_identical() -> None:
    g = GraphBuilder()
    x = g.input("x", (2, 3, 4))
    t = g.transpose(g.transpose(x, [0, 2, 1]), [1, 2, 0])
    r = g.reshape(g.reshape(t, (24,)), (4, 6))
    m = g.build({"y": g.gelu(g.reshape(g.reshape(r, (6, 4)), (3, 8)), "tanh")})
    xs = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    before, after = before_after(m, {"x": xs})
    assert names(m) == ["fuel.transpose", "fuel.gelu", "fuel.reshape", "func.return"]
    np.testing.assert_array_equal(before, after)


def test_longhand_rms_norm_reaches_the_matcher() -> None:
    """x / sqrt(sum(pow(x, 2)) * (1/N) + eps) * w: after canonicalize one rms_norm is offered,
    and its fused arm agrees with float64."""
    g = GraphBuilder(seed=2)
    x = g.input("x", (8, 64))
    ss = g.reduce_sum(g.pow(x, g.constant(2.0)), axes=[-1], keepdim=True)
    ms = g.add(g.mul(ss, 1 / 64), 1e-6)
    m = g.build({"y": g.mul(g.div(x, g.sqrt(ms)), g.weight("w", (64,)))})
    xs = RNG.standard_normal((8, 64)).astype(np.float32)
    canonicalize(m.op)
    assert fuse_patterns(m.op) == 1
    (b,) = [op for op in m.op.walk() if isinstance(op, BranchOp)]
    assert b.arms[1].block.first_op.name == "fuel.rms_norm"  # pyright: ignore
    b.attributes[PICKED_ATTR] = IntegerAttr(1, i64)
    got = Executor(m).run({"x": xs})["y"]
    x64, w = xs.astype(np.float64), m.weights["w"].astype(np.float64)
    want = x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_gelu_with_narrow_constants_folds(t: str) -> None:
    """The constants of an f16 / bf16 graph are rounded to it: still a GELU."""
    g = GraphBuilder()
    v = g.input("x", (8,), t)
    c = {k: g.constant(k, t) for k in (0.044715, math.sqrt(2 / math.pi), 0.5, 1.0, 3.0)}
    inner = g.mul(g.add(v, g.mul(g.pow(v, c[3.0]), c[0.044715])), c[math.sqrt(2 / math.pi)])
    m = g.build({"y": g.mul(g.mul(v, c[0.5]), g.add(g.tanh(inner), c[1.0]))})
    canonicalize(m.op)
    assert names(m) == ["fuel.gelu", "func.return"]


SPECIALS = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, -2.5, 1e-45, 3.4e38], dtype=np.float32)
"""Values where an identity that is not exact shows: signed zeros, infinities, NaN, subnormals."""


@pytest.mark.parametrize(
    ("op", "c", "folds"),
    [
        ("mul", 1.0, True),
        ("div", 1.0, True),
        ("add", -0.0, True),
        ("sub", 0.0, True),
        ("add", 0.0, False),  # -0 + 0 = +0
        ("sub", -0.0, False),  # -0 - -0 = +0
    ],
)
def test_identity_arithmetic_is_bit_exact(op: str, c: float, folds: bool) -> None:
    """Each folded identity gives x's bits (signs of zero included); the two that would not
    (x + 0.0, x - (-0.0)) stay, and the unfolded op does change -0."""
    g = GraphBuilder()
    x = g.input("x", (SPECIALS.size,))
    m = g.build({"y": getattr(g, op)(x, g.constant(c))})
    feeds = {"x": SPECIALS}
    before = Executor(m).run(feeds)["y"]
    text = str(m.op)
    canonicalize(m.op)
    assert (str(m.op) != text) == folds
    after = Executor(m).run(feeds)["y"]
    np.testing.assert_array_equal(after, before)
    assert (np.signbit(after) == np.signbit(before)).all()
    exact = np.array_equal(np.signbit(before), np.signbit(SPECIALS))
    assert exact == folds
