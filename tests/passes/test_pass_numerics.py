"""Every `fuel-*` pass keeps the numbers: applied alone (with `judge="none"` where it has
that option) to a few random graphs, the executor's outputs match the unoptimized module's.

The pass list comes from the registry, so a new `fuel-*` pass without an entry in
`COVERED` fails `test_every_fuel_pass_is_covered` until it is added here.

Tolerance per dtype (relative, with a matching absolute floor for values near zero): f32 1e-5
(fused/re-ordered reductions and flash-style rescaling round differently, never by more);
integer outputs exactly. The graphs below are all f32 at their outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields

import numpy as np
import pytest
from xdsl.context import Context

from examples.decoder_block import BlockConfig, build_decoder_block
from frontends.builder import GraphBuilder
from passes import get_all_passes
from runtime.executor import Executor
from runtime.module import FuelModule

TOLERANCE = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-5}
"""Relative (and absolute) tolerance by output dtype; any other dtype must match exactly."""

COVERED = {
    "fuel-canonicalize",
    "fuel-enumerate-alternatives",
    "fuel-rank-alternatives",
    "fuel-place",
    "fuel-select",
    "fuel-fuse-casts",
    "fuel-fuse-patterns",
    "fuel-emit-decode-flash",
    "fuel-emit-dim-branches",
    "fuel-bake-variants",
    "fuel-fork-placements",
    "fuel-converge-frontier",
    "fuel-fix-dtypes",
    "fuel-fix-layouts",
    "fuel-optimize",
    "fuel-insert-residency",
}


def fuel_passes() -> list[str]:
    return sorted(n for n in get_all_passes() if n.startswith("fuel-"))


def mlp(seed: int) -> tuple[FuelModule, dict[str, np.ndarray]]:
    g = GraphBuilder(seed=seed)
    x = g.input("x", (8, 32))
    h = g.relu(g.add(g.matmul(x, g.weight("w1", (32, 64))), g.weight("b1", (64,))))
    y = g.tanh(g.matmul(h, g.weight("w2", (64, 16))))
    rng = np.random.default_rng(seed)
    return g.build({"y": y}), {"x": rng.standard_normal((8, 32)).astype(np.float32)}


def decoder(seed: int) -> tuple[FuelModule, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return build_decoder_block(BlockConfig(), seed=seed), {
        "x": rng.standard_normal((1, 16, 64)).astype(np.float32)
    }


def softmax(seed: int) -> tuple[FuelModule, dict[str, np.ndarray]]:
    g = GraphBuilder()
    x = g.input("x", (64, 1024))
    e = g.exp(g.sub(x, g.reduce_max(x, 1, keepdim=True)))
    rng = np.random.default_rng(seed)
    return g.build({"y": g.div(e, g.reduce_sum(e, 1, keepdim=True))}), {
        "x": rng.standard_normal((64, 1024)).astype(np.float32)
    }


def casts(seed: int) -> tuple[FuelModule, dict[str, np.ndarray]]:
    g = GraphBuilder()
    x = g.input("x", (16, 32))
    a = g.cast(g.cast(x, "f64"), "f32")
    b = g.cast(g.exp(g.cast(a, "f64")), "f32")
    y = g.cast(g.cast(g.mul(b, a), "f64"), "f32")
    rng = np.random.default_rng(seed)
    return g.build({"y": y}), {"x": rng.standard_normal((16, 32)).astype(np.float32)}


def decode_attention(seed: int) -> tuple[FuelModule, dict[str, np.ndarray]]:
    g = GraphBuilder()
    q, k, v = (
        g.input(n, s)
        for n, s in (("q", (1, 4, 1, 64)), ("k", (1, 4, 256, 64)), ("v", (1, 4, 256, 64)))
    )
    n = g.input("n", (), "i64")
    rng = np.random.default_rng(seed)
    feeds = {
        name: rng.standard_normal(s).astype(np.float32)
        for name, s in (("q", (1, 4, 1, 64)), ("k", (1, 4, 256, 64)), ("v", (1, 4, 256, 64)))
    }
    feeds["n"] = np.array(int(rng.integers(1, 257)), np.int64)
    return g.build({"y": g.attention(q, k, v, kv_len=n)}), feeds


def exported_rms_norm(seed: int) -> tuple[FuelModule, dict[str, np.ndarray]]:
    """RMSNorm as the ONNX exporters write it: x * (1 / sqrt(mean(x^2) + eps)) * w, and a
    second one as x / sqrt(...) (what `fuel-canonicalize` rewrites)."""
    g = GraphBuilder(seed=seed)
    x = g.input("x", (4, 64))
    ms = g.add(g.reduce_mean(g.mul(x, x), axes=-1, keepdim=True), 1e-6)
    a = g.mul(g.mul(x, g.div(1.0, g.sqrt(ms))), g.weight("w", (64,)))
    b = g.div(a, g.sqrt(g.add(g.reduce_mean(g.mul(a, a), axes=-1, keepdim=True), 1e-6)))
    rng = np.random.default_rng(seed)
    return g.build({"y": b}), {"x": rng.standard_normal((4, 64)).astype(np.float32)}


GRAPHS: dict[str, Callable[[int], tuple[FuelModule, dict[str, np.ndarray]]]] = {
    "mlp": mlp,
    "decoder": decoder,
    "softmax": softmax,
    "casts": casts,
    "decode_attention": decode_attention,
    "exported_rms_norm": exported_rms_norm,
}


def make(name: str):  # noqa: ANN201
    cls = get_all_passes()[name]()
    return cls(judge="none") if "judge" in {f.name for f in fields(cls)} else cls()


def test_every_fuel_pass_is_covered() -> None:
    assert set(fuel_passes()) == COVERED, "add the new fuel pass to COVERED (and check it passes)"


@pytest.mark.parametrize("graph", sorted(GRAPHS))
@pytest.mark.parametrize("name", fuel_passes())
def test_pass_keeps_the_numbers(name: str, graph: str) -> None:
    for seed in (0, 1):
        m, feeds = GRAPHS[graph](seed)
        ref = Executor(m).run(feeds)
        make(name).apply(Context(), m.op)
        m.op.verify()
        got = Executor(m).run(feeds)
        assert got.keys() == ref.keys()
        for k, want in ref.items():
            want = np.asarray(want)
            tol = TOLERANCE.get(want.dtype)
            if tol is None:
                np.testing.assert_array_equal(got[k], want)
            else:
                assert np.asarray(got[k]).dtype == want.dtype
                np.testing.assert_allclose(got[k], want, rtol=tol, atol=tol)
