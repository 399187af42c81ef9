"""`lowering.cpu.specialize`: a shape's specialised clone lowered as a static compile is (rope
fused once its tables are weights, generated C), in `fuel run`, a bundle and its manifest."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from frontends.builder import GraphBuilder
from fuel_dialect.shapes import DimExpr
from lowering.bundle import compile_module, load_bundle, write_bundle
from lowering.cpu.specialize import shape_finisher
from runtime import native
from runtime.module import FuelModule
from runtime.shape_specialize import make_executor

END = 2**62
INV_FREQ = np.array([1.0, 0.1, 0.01, 0.001], np.float32)

pytestmark = pytest.mark.skipif(not native.enabled(), reason="needs a C compiler")


def rope_block(seq: int | tuple[int, int]) -> FuelModule:
    """x (1, 2, seq, 8) -> tanh(exp(rope(x)) / 2), rope's tables computed from the positions
    (an iota of the dim symbol, or constants at a static length), as exporters write them."""
    g = GraphBuilder(seed=0)
    s = g.dim("seq", *seq) if isinstance(seq, tuple) else seq
    x = g.input("x", (1, 2, s, 8))
    if isinstance(seq, tuple):
        pos = g.iota([DimExpr.sym("seq"), 1], "f32", axis=0)
    else:
        pos = g.constant(np.arange(seq, dtype=np.float32).reshape(seq, 1))
    f = g.mul(pos, g.constant(INV_FREQ))
    emb = g.concat([f, f], axis=-1)
    lo, hi = g.slice(x, [0, 0, 0, 0], [1, 2, END, 4]), g.slice(x, [0, 0, 0, 4], [1, 2, END, 8])
    rot = g.concat([g.neg(hi), lo], axis=-1)
    y = g.add(g.mul(x, g.cos(emb)), g.mul(rot, g.sin(emb)))
    return g.build(outputs={"y": g.tanh(g.mul(g.exp(y), 0.5))})


def reference(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    f = np.arange(x.shape[2])[:, None] * INV_FREQ.astype(np.float64)
    emb = np.concatenate([f, f], axis=-1)
    rot = np.concatenate([-x[..., 4:], x[..., :4]], axis=-1)
    return np.tanh(np.exp(x * np.cos(emb) + rot * np.sin(emb)) * 0.5)


def test_a_specialised_shape_fuses_rope_and_generates_c() -> None:
    plan, _ = compile_module(rope_block((1, 64)))
    finished, plain = make_executor(plan, finish=shape_finisher()), make_executor(plan)
    for n in (3, 17):
        x = np.random.default_rng(n).standard_normal((1, 2, n, 8)).astype(np.float32)
        got = finished.run({"x": x})["y"]
        np.testing.assert_allclose(got, reference(x), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(plain.run({"x": x})["y"], got, rtol=1e-5, atol=1e-6)
        names = list(finished.op_names)
        assert "fuel.rope" in names and any(s.startswith("fuel.c_launch") for s in names)
        assert len(finished) < len(plain)  # plain: library kernels, no rope
    assert [env for env, _ in finished.specializations] == [(("seq", 3),), (("seq", 17),)]


def test_a_bundle_declares_what_its_shapes_pick(tmp_path: Path) -> None:
    """The bundle of a module with dim symbols declares the kernels a specialisation at the
    hints stamps (rope here), so its shapes run them; a static bundle of a shape runs no
    fewer items."""
    write_bundle(rope_block((1, 64)), tmp_path / "sym")
    bundle = load_bundle(tmp_path / "sym")
    assert any(k.startswith("rope[") for k in bundle.kernel_ids)
    ex = bundle.executor()
    n = 9
    x = np.random.default_rng(n).standard_normal((1, 2, n, 8)).astype(np.float32)
    np.testing.assert_allclose(ex.run({"x": x})["y"], reference(x), rtol=1e-5, atol=1e-6)
    write_bundle(rope_block(n), tmp_path / "static")
    static = load_bundle(tmp_path / "static").executor()
    assert "fuel.rope" in list(ex.op_names) and len(ex) <= len(static)
