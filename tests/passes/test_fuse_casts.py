"""fuel-fuse-casts: numerics against the unrewritten module, idempotence, per-node coverage."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context

from frontends.builder import GraphBuilder
from fuel_dialect.attrs import DeviceAttr
from fuel_dialect.dispatch import PIN_ATTR
from fuel_dialect.ops_elementwise import CastOp, NegOp
from passes.fuse_casts import FuseCastsPass, fuse_casts, holds_all, is_exact_rewrite
from passes.picker.plan import PlanOptions
from runtime.binding_table import KernelBindingTable
from runtime.executor import Executor
from runtime.module import FuelModule
from runtime.topology import Device, SystemTopology

EXACT_OPS = ("neg", "abs", "relu", "max", "min", "transpose", "where")
INEXACT_OPS = ("exp", "tanh", "add", "mul", "sigmoid")
DTYPES = ("f32", "f16", "bf16", "f64")


def random_graph(seed: int, ops: tuple[str, ...], layers: int = 8) -> FuelModule:
    """A chain of ops with casts to random float dtypes sprinkled before and after each."""
    rng = np.random.default_rng(seed)
    g = GraphBuilder(seed=seed)
    h = g.input("x", (4, 4), "f32")
    other = g.weight("w", (4, 4), "f32")
    for _ in range(layers):
        for _ in range(int(rng.integers(0, 3))):
            h = g.cast(h, str(rng.choice(DTYPES)))
        other_h = g.cast(other, _dtype(h))
        h = _apply(g, str(rng.choice(ops)), h, other_h)
    return g.build([g.cast(h, "f32")])


def _dtype(v) -> str:  # noqa: ANN001
    from fuel_dialect.dtypes import dtype_name

    return dtype_name(v.type)


def _apply(g: GraphBuilder, name: str, h, other):  # noqa: ANN001, ANN202
    if name in ("max", "min", "add", "mul"):
        return getattr(g, name)(h, other)
    if name == "transpose":
        return g.transpose(h, (1, 0))
    if name == "where":
        return g.where(g.compare("lt", other, h), h, other)
    return getattr(g, name)(h)


def rewritten(module: FuelModule, **opts: object) -> FuelModule:
    out = FuelModule(module.op.clone(), dict(module.weights))
    FuseCastsPass(judge="none", **opts).apply(Context(), out.op)  # type: ignore[arg-type]
    out.op.verify()
    return out


def run(module: FuelModule, x: np.ndarray) -> np.ndarray:
    return Executor(module).run({"x": x})["out"]


def casts(module: FuelModule) -> int:
    return sum(isinstance(op, CastOp) for op in module.op.walk())


@pytest.mark.parametrize("seed", range(12))
def test_exact_rewrites_are_bit_exact(seed: int) -> None:
    m = random_graph(seed, EXACT_OPS)
    r = rewritten(m)
    x = np.random.default_rng(seed).standard_normal((4, 4)).astype(np.float32) * 10
    np.testing.assert_array_equal(run(r, x), run(m, x))
    assert casts(r) <= casts(m)


@pytest.mark.parametrize("seed", range(12))
def test_semantic_rewrites_within_declared_precision(seed: int) -> None:
    m = random_graph(seed, EXACT_OPS + INEXACT_OPS)
    r = rewritten(m, allow_semantic_change=True, elide_round_trips="all")
    x = np.random.default_rng(seed).standard_normal((4, 4)).astype(np.float32)
    want, got = run(m, x), run(r, x)
    # the lowest-precision dtype of the graph bounds both: bf16 keeps 8 bits of mantissa
    np.testing.assert_allclose(got, want, rtol=0.1, atol=0.1)
    assert casts(r) <= casts(m)


@pytest.mark.parametrize(
    "opts",
    [
        {},
        {"allow_semantic_change": True},
        {"allow_semantic_change": True, "elide_round_trips": "all"},
    ],
)
@pytest.mark.parametrize("seed", range(6))
def test_idempotent(seed: int, opts: dict[str, object]) -> None:
    once = rewritten(random_graph(seed, EXACT_OPS + INEXACT_OPS), **opts)
    twice = rewritten(once, **opts)
    assert str(twice.op) == str(once.op)


def test_round_trip_counts() -> None:
    g = GraphBuilder()
    x = g.input("x", (8,), "f32")
    h = x
    for _ in range(4):  # f32 -> f16 -> relu -> f32: the f16->f32->f16 seams are exact
        h = g.cast(g.relu(g.cast(h, "f16")), "f32")
    m = g.build([h])
    assert (casts(m), casts(rewritten(m))) == (8, 2)


def test_exactness_tables() -> None:
    assert holds_all("f16", "f32") and holds_all("i1", "bf16") and holds_all("i8", "f16")
    assert not holds_all("f32", "f16") and not holds_all("f32", "i64")
    assert not holds_all("f64", "f32") and not holds_all("bf16", "f16")
    assert is_exact_rewrite("neg", "f32", "f16") and is_exact_rewrite("lt", "f16", "f32")
    assert not is_exact_rewrite("lt", "f32", "f16") and not is_exact_rewrite("exp", "f16", "f32")


# -- per-node candidate backends ---------------------------------------------------------------


def _k(ins, outs, params) -> None:  # noqa: ANN001
    outs[0][...] = ins[0]


def split_table() -> KernelBindingTable:
    """neg@f32 everywhere, but neg@f16 only on the `cuda` backend."""
    t = KernelBindingTable()
    for a, b in (("f16", "f32"), ("f32", "f16")):
        t.register("cast", (a, b), "cpu", _k)
        t.register("cast", (a, b), "cuda", _k)
    t.register("neg", ("f32", "f32"), "cpu", _k)
    t.register("neg", ("f32", "f32"), "cuda", _k)
    t.register("neg", ("f16", "f16"), "cuda", _k)
    return t.freeze()


def island(pin: str | None) -> FuelModule:
    g = GraphBuilder()
    x = g.input("x", (256, 256), "f16")
    n = g.neg(g.cast(x, "f32"))
    if pin is not None:
        n.owner.attributes[PIN_ATTR] = DeviceAttr(pin)
    return g.build([g.cast(n, "f16")])


@pytest.mark.parametrize(("pin", "fused"), [(None, True), ("cuda:0", True), ("cpu", False)])
def test_coverage_is_the_nodes_own_backends(pin: str | None, fused: bool) -> None:
    cpu = Device("cpu", "cpu", ("cpu",), 1.0, 4.0)
    gpu = Device("cuda:0", "cuda", ("cuda",), 30.0, 40.0)
    plan = PlanOptions(topology=SystemTopology((cpu, gpu)), table=split_table())
    m = island(pin)
    fuse_casts(m.op, plan)
    negs = [op for op in m.op.walk() if isinstance(op, NegOp)]
    assert [str(n.result.type.element_type) for n in negs] == (["f16"] if fused else ["f32"])
    assert casts(m) == (0 if fused else 2)


def test_cpu_only_topology_has_no_cuda_coverage() -> None:
    cpu = Device("cpu", "cpu", ("cpu",), 1.0, 4.0)
    m = island(None)
    fuse_casts(m.op, PlanOptions(topology=SystemTopology((cpu,)), table=split_table()))
    assert casts(m) == 2


def test_bad_option_fails() -> None:
    from xdsl.utils.exceptions import PassFailedException

    with pytest.raises(PassFailedException, match="elide_round_trips"):
        rewritten(island(None), elide_round_trips="some")
