"""The `c-vecmath` f32 transcendentals: their ulp claim, the generated kernels that inline them,
and which precision floors get them (runtime/kernels/cpu/vecmath.py, convert-fuel-to-c)."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context

from frontends.builder import GraphBuilder
from lowering.bundle import compile_module
from lowering.cpu.convert_fuel_to_c import ConvertFuelToCPass
from lowering.cpu.vecmath_sweep import sweep
from lowering.kernel_source import KernelSourceError, check_kernel_sources
from runtime import native, special
from runtime.executor import Executor
from runtime.kernels import global_bindings
from runtime.kernels.cpu import vecmath
from runtime.module import FuelModule

pytestmark = pytest.mark.skipif(not native.enabled(), reason="needs a C compiler")

OPS = ("exp", "log", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh", "erf")


def inputs(op: str) -> np.ndarray:
    """Random normals, a log-uniform spread over the f32 range, and the edge values."""
    rng = np.random.default_rng(7)
    wide = np.exp(rng.uniform(-100, 88, 4000)) * rng.choice([-1, 1], 4000)
    edges = [0.0, -0.0, 1e-45, -1e-45, 1e-38, np.inf, -np.inf, np.nan, 88.72, -103.9, -200.5]
    x = np.concatenate([rng.standard_normal(4000) * 4, wide, edges]).astype(np.float32)
    return np.abs(x) if op == "log" else x


def reference(op: str, x: np.ndarray) -> np.ndarray:
    """float64 values (the numpy kernels' f64 algorithms), rounded to f32."""
    d = x.astype(np.float64)
    with np.errstate(all="ignore"):
        ref = {
            "exp": np.exp,
            "log": np.log,
            "tanh": np.tanh,
            "sigmoid": special.sigmoid,
            "silu": lambda v: special.x_sigmoid(v, v),
            "gelu": special.gelu_erf,
            "gelu_tanh": special.gelu_tanh_f64,
            "erf": special.erf,
        }[op](d)
        return ref.astype(np.float32)


def ulps(a: np.ndarray, b: np.ndarray) -> int:
    """Largest f32 ulp distance (ordered bits: +0 and -0 are 0 apart); NaN must face NaN."""
    assert (np.isnan(a) == np.isnan(b)).all()
    keep = ~np.isnan(a)
    ia, ib = (v[keep].view(np.int32).astype(np.int64) for v in (a, b))
    ia, ib = (np.where(v < 0, -(v & 0x7FFFFFFF), v) for v in (ia, ib))
    return int(np.abs(ia - ib).max())


def test_sweep_of_every_f32_range_is_within_one_ulp() -> None:
    """A coarse run of the sweep behind the claim (every exponent, both signs, the edges);
    `python -m lowering.cpu.vecmath_sweep --stride 7` is the dense one."""
    for r in sweep(65537):
        assert r.max_ulp <= 1 and r.nan_mismatches == 0, r


def gelu_module(op: str, n: int) -> FuelModule:
    g = GraphBuilder()
    x = g.input("x", (n,))
    if op in ("gelu", "gelu_tanh"):
        y = g.gelu(x, approximate="tanh" if op == "gelu_tanh" else "none")
    else:
        y = getattr(g, op)(x)
    return g.build({"y": g.mul(y, 1.0)})  # exact: the kernel's bits


@pytest.mark.parametrize("op", OPS)
def test_standalone_and_generated_kernels_agree_within_the_claim(op: str) -> None:
    x = inputs(op)
    key = "gelu" if op == "gelu_tanh" else op
    (entry,) = [
        e
        for e in global_bindings().lookup_alternatives(key, ("f32", "f32"), "cpu")
        if e.kernel_source == vecmath.SOURCE
    ]
    assert entry.precision.max_ulp == 1 and entry.precision.audited  # the ledger proves it
    alone = np.empty_like(x)
    entry.kernel([x], [alone], {"approximate": "tanh" if op == "gelu_tanh" else "none"})
    assert ulps(alone, reference(op, x)) <= 1
    m = gelu_module(op, x.size)
    ConvertFuelToCPass().apply(Context(), m.op)
    assert "fuel_vm_" in str(m.op)
    fused = Executor(m).run({"x": x})["y"]
    np.testing.assert_array_equal(fused.view(np.int32), alone.view(np.int32))


def chain(n: int = 256) -> FuelModule:
    g = GraphBuilder()
    x = g.input("x", (n,))
    c = np.linspace(0.5, 1.5, n, dtype=np.float32)
    y = g.tanh(g.mul(x, g.constant(c)))
    return g.build({"y": g.add(g.sigmoid(y), x)})


def sources(m: FuelModule) -> str:
    return "".join(op.source.data for op in m.op.walk() if op.name == "fuel.c_kernel")


@pytest.mark.parametrize("floor", ["", "bit_stable", "ulp=1"])
def test_default_gets_vecmath_a_stated_floor_keeps_the_picked_kernels(floor: str) -> None:
    """No floor: the fastest verified kernel, c-vecmath inside the generated kernel. A stated
    floor: the picker's kernels, and the generated C gives exactly their bits."""
    x = np.random.default_rng(3).standard_normal(256).astype(np.float32) * 3
    opts = {"precision": floor} if floor else {}
    fused, _ = compile_module(chain(), {**opts, "codegen": "c"})
    library, _ = compile_module(chain(), {**opts, "codegen": "none"})
    got, want = (Executor(m).run({"x": x})["y"] for m in (fused, library))
    assert ("fuel_vm_tanh" in sources(fused)) == (not floor)
    if floor:
        np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))
    else:
        d = x.astype(np.float64)
        ref = special.sigmoid(np.tanh(d * np.linspace(0.5, 1.5, 256, dtype=np.float32))) + d
        assert np.abs(got - ref).max() <= 2 * np.spacing(np.abs(ref).astype(np.float32)).max()


def test_kernel_source_regenerates_from_the_stamped_body() -> None:
    m = chain()
    ConvertFuelToCPass().apply(Context(), m.op)
    assert check_kernel_sources(m.op, "m") == 1
    for op in m.op.walk():
        if op.name == "fuel.tanh":
            del op.attributes["fuel.kernel"]  # the body no longer says c-vecmath
    with pytest.raises(KernelSourceError, match="not what this fuel generates"):
        check_kernel_sources(m.op, "m")


def horner(coeffs: tuple[float, ...], x: np.ndarray) -> np.ndarray:
    out = np.full_like(x, coeffs[-1])
    for c in coeffs[-2::-1]:
        out = c + x * out
    return out


def test_fitted_polynomials_meet_their_stated_relative_error() -> None:
    """The degree-7 exp and degree-11 erfcx fits (runtime/native/vecmath.py) on a dense grid
    of their ranges, against numpy's exp and the numpy kernels' double-precision erfcx."""
    from runtime.native import vecmath as text

    r = np.linspace(-np.log(2) / 2, np.log(2) / 2, 200_001)
    assert np.abs(horner(text._EXP_POLY, r) / np.exp(r) - 1).max() < 4.5e-11
    z = np.linspace(0.0, text.ERFCX_Z_MAX, 400_001)
    fit = horner(text._ERFCX_FIT, (z - 3) / (z + 3)) / (1 + 2 * z)
    assert np.abs(fit / special.erfcx(z) - 1).max() < 1.1e-9


def around(value: float, span: int = 1 << 15) -> np.ndarray:
    """Every f32 within `span` bit patterns of `value` (same sign)."""
    bits = np.array([value], np.float32).view(np.int32)[0]
    return (bits + np.arange(-span, span, dtype=np.int32)).view(np.float32)


@pytest.mark.parametrize(
    ("op", "points"),
    [
        ("gelu", (15.0, -15.0, -14.0, 3 * 2**0.5, -(3 * 2**0.5), 1e-3, -1e-3, 1e-30)),
        ("gelu_tanh", (-200.0, -10.0, 1e-3, -1e-3)),
        ("erf", (1.0, -1.0, 6.0, -6.0, 3 * 2**0.5)),
        ("silu", (-200.0, -88.0, 1e-3, -1e-3)),
        ("sigmoid", (-103.0, 16.0, 1e-3, -1e-3)),
    ],
)
def test_every_f32_next_to_the_clamps_and_fit_seams(op: str, points: tuple[float, ...]) -> None:
    """All 2^16 f32 around each clamp, branch seam, the erfcx fit's centre (z = 3) and 0."""
    x = np.concatenate([around(p) for p in points])
    key = "gelu" if op == "gelu_tanh" else op
    (entry,) = [
        e
        for e in global_bindings().lookup_alternatives(key, ("f32", "f32"), "cpu")
        if e.kernel_source == vecmath.SOURCE
    ]
    got = np.empty_like(x)
    entry.kernel([x], [got], {"approximate": "tanh" if op == "gelu_tanh" else "none"})
    assert ulps(got, reference(op, x)) <= 1
