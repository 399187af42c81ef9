"""Generated C kernels (`convert-fuel-to-c`) against the numpy executor, op by op.

Tolerances: IEEE basic ops (+ - * / sqrt recip), sign/select ops, comparisons, casts and all
integer ops must be bit-identical to the numpy kernels. f32 transcendentals are computed in
double and rounded once on both sides: <= 1 ulp (the f64 libm results can differ by 1 ulp and,
rarely, round to neighbouring f32 values; measured: bit-identical on 200k inputs per op).
f64 transcendentals use libm where numpy uses its own SIMD routines: each is within the numpy
kernels' claimed bound of the truth, so they may differ by twice that bound (measured on 200k
inputs: tanh 3, silu 4, gelu 3, sigmoid 2, exp/log/pow/erf 1, sin/cos 0). NaN must face NaN.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context

from frontends.builder import GraphBuilder
from lowering.cpu import codegen
from lowering.cpu.codegen_half import HALF
from lowering.cpu.convert_fuel_to_c import ConvertFuelToCPass
from runtime.dtypes import to_numpy
from runtime.executor import Executor
from runtime.kernels.cpu.elementwise import F64_ULP
from runtime.loaders import c as c_loader
from runtime.module import FuelModule

pytestmark = pytest.mark.skipif(
    c_loader.find_compiler() is None, reason="no C compiler ($CC or cc) on this machine"
)

TRANSCENDENTAL = {
    "exp",
    "log",
    "tanh",
    "sin",
    "cos",
    "rsqrt",
    "sigmoid",
    "silu",
    "pow",
    "erf",
    "gelu",
}
FLOAT_UNARY = [
    "neg",
    "abs",
    "relu",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "recip",
    "tanh",
    "sin",
    "cos",
    "sigmoid",
    "silu",
    "erf",
    "gelu",
]
FLOAT_BINARY = ["add", "sub", "mul", "div", "pow", "max", "min"]
INT_BINARY = ["add", "sub", "mul", "max", "min"]
COMPARES = ["eq", "ne", "lt", "le", "gt", "ge"]
EDGES = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    np.inf,
    -np.inf,
    np.nan,
    1e-40,
    -1e-40,
    88.7,
    -88.7,
    89.0,
    -750.0,
    710.0,
    3e38,
    -3e38,
    0.5,
    2.0,
    -2.5,
    1e-7,
]


def tolerance(op: str, dtype: str) -> int:
    if op not in TRANSCENDENTAL:
        return 0
    return 1 if dtype == "f32" else 2 * F64_ULP[op][0]


def ulp_diff(a: np.ndarray, b: np.ndarray) -> int:
    """Largest distance in units of the last place; NaN must face NaN; 0 means bit-identical
    (so -0.0 vs 0.0 counts as 1)."""
    a, b = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
    if (np.isnan(a) != np.isnan(b)).any():
        return 1 << 62
    keep = ~np.isnan(a)
    it = np.int32 if a.dtype == np.float32 else np.int64
    ia, ib = a[keep].view(it).tolist(), b[keep].view(it).tolist()
    low = -(2**31) if it is np.int32 else -(2**63)

    def mono(i: int) -> int:  # sign-magnitude bits -> monotone integers; -0.0 sits below 0.0
        return low - i - 1 if i < 0 else i

    return max((abs(mono(x) - mono(y)) for x, y in zip(ia, ib, strict=True)), default=0)


def float_values(dtype: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    x = rng.standard_normal(n) * rng.choice([0.1, 1.0, 10.0, 100.0], n)
    k = min(n, len(EDGES))
    x[rng.choice(n, k, replace=False)] = EDGES[:k]
    with np.errstate(over="ignore"):
        return x.astype(np.float32 if dtype == "f32" else np.float64).reshape(shape)


def int_values(dtype: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    dt = np.dtype({"i64": np.int64, "i32": np.int32, "i8": np.int8, "u8": np.uint8}[dtype])
    info = np.iinfo(dt)
    rng = np.random.default_rng(seed)
    x = rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
    flat = x.reshape(-1)
    flat[: min(4, flat.size)] = np.array([info.min, info.max, 0, -1 if info.min else 1])[
        : min(4, flat.size)
    ].astype(dt)
    return x


HALF_NUMPY = [to_numpy(t) for t in HALF]


def assert_same_bits(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    """16-bit floats: bit-identical, NaN payloads and the sign of zero included."""
    g, w = got.reshape(-1).view(np.uint16), want.reshape(-1).view(np.uint16)
    bad = np.nonzero(g != w)[0]
    first = [f"{i}: got {g[i]:#06x} want {w[i]:#06x}" for i in bad[:5]]
    assert not bad.size, f"{what}: {bad.size} of {g.size} differ ({', '.join(first)})"


def lowered(module: FuelModule, min_ops: int = 1) -> FuelModule:
    m = FuelModule(module.op.clone(), dict(module.weights))
    # the numpy kernels' own C (tests/runtime/kernels/test_cpu_vecmath.py tests the c-vecmath
    # replacements)
    ConvertFuelToCPass(min_ops=min_ops, cost_model=False, use_vecmath=False).apply(Context(), m.op)
    m.op.verify()
    assert any(op.name == "fuel.c_launch" for op in m.op.walk()), "nothing was converted"
    return m


def check(module: FuelModule, feeds: dict[str, np.ndarray], max_ulp: int = 0) -> None:
    with np.errstate(all="ignore"):
        want = Executor(module).run(feeds)
        got = Executor(lowered(module)).run(feeds)
    for k, w in want.items():
        g = got[k]
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype in HALF_NUMPY:
            assert_same_bits(g, w, k)
        elif w.dtype.kind == "f":
            assert ulp_diff(g, w) <= max_ulp, f"{k}: {ulp_diff(g, w)} ulp"
        else:
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("op", FLOAT_UNARY)
def test_float_unary(op: str, dtype: str) -> None:
    g = GraphBuilder()
    x = g.input("x", (6, 50), dtype)
    module = g.build({"y": getattr(g, op)(x)})
    check(module, {"x": float_values(dtype, (6, 50), 1)}, tolerance(op, dtype))


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("op", FLOAT_BINARY + COMPARES)
def test_float_binary_broadcasting(op: str, dtype: str) -> None:
    g = GraphBuilder()
    x, y = g.input("x", (5, 1, 40), dtype), g.input("y", (3, 1), dtype)
    z = g.compare(op, x, y) if op in COMPARES else getattr(g, op)(x, y)
    module = g.build({"z": z})
    ulps = tolerance(op, dtype)
    feeds = {"x": float_values(dtype, (5, 1, 40), 2), "y": float_values(dtype, (3, 1), 3)}
    if op == "pow":
        feeds["y"] = np.array([[2.0], [-0.5], [3.0]], feeds["y"].dtype)
    check(module, feeds, ulps)


@pytest.mark.parametrize("dtype", ["i64", "i32", "i8", "u8"])
@pytest.mark.parametrize("op", INT_BINARY + COMPARES)
def test_int_binary_wraps(op: str, dtype: str) -> None:
    g = GraphBuilder()
    x, y = g.input("x", (4, 33), dtype), g.input("y", (33,), dtype)
    z = g.compare(op, x, y) if op in COMPARES else getattr(g, op)(x, y)
    module = g.build({"z": z})
    check(module, {"x": int_values(dtype, (4, 33), 4), "y": int_values(dtype, (33,), 5)})


@pytest.mark.parametrize("dtype", ["i64", "i32", "i8"])
@pytest.mark.parametrize("op", ["neg", "abs", "relu"])
def test_signed_unary(op: str, dtype: str) -> None:
    g = GraphBuilder()
    x = g.input("x", (100,), dtype)
    module = g.build({"y": getattr(g, op)(x)})
    check(module, {"x": int_values(dtype, (100,), 6)})


CAST_DTYPES = ["f64", "f32", "i64", "i32", "i8", "u8", "i1"]


@pytest.mark.parametrize("dst", CAST_DTYPES)
@pytest.mark.parametrize("src", CAST_DTYPES)
def test_cast_in_range(src: str, dst: str) -> None:
    """Every cast pair on values representable in both (float -> int is defined in range only:
    small integers and halves, so truncation is exercised)."""
    g = GraphBuilder()
    x = g.input("x", (64,), src)
    module = g.build({"y": g.cast(x, dst)})
    vals = np.arange(-32, 32) * (0.5 if src in ("f32", "f64") else 1)
    if "u8" in (src, dst):
        vals = np.abs(vals)
    if src == "i1":
        vals = vals % 2
    check(module, {"x": vals.astype(to_numpy(src))})


def test_cast_rounding_and_nan() -> None:
    """f64 -> f32 and i64 -> f32 round once to nearest even; NaN -> i1 is true."""
    g = GraphBuilder()
    a, b = g.input("a", (8,), "f64"), g.input("b", (4,), "i64")
    module = g.build({"f": g.cast(a, "f32"), "t": g.cast(a, "i1"), "i": g.cast(b, "f32")})
    feeds = {
        "a": np.array([1 + 2**-24, 1 + 3 * 2**-24, np.nan, -0.0, 1e39, -1e-46, 0.1, np.inf]),
        "b": np.array([2**24 + 1, 2**24 + 3, -(2**63), 2**62 + 2**38 + 1], np.int64),
    }
    check(module, feeds)


def test_where_bool_chain_and_partial_outputs() -> None:
    """A mixed-dtype chain where an intermediate smaller than the space is a graph output
    (stored from the broadcast coordinates 0 only) and splats are inlined."""
    g = GraphBuilder()
    x, b = g.input("x", (3, 4, 8), "f32"), g.input("b", (4, 1), "f32")
    c = g.compare("gt", b, 0.25)  # (4, 1): smaller than the space, read outside
    sb = g.mul(b, 2.0)
    y = g.where(c, g.add(x, sb), g.neg(x))
    k = g.cast(g.cast(y, "i32"), "f64")
    module = g.build({"y": y, "c": c, "sb": sb, "k": k})
    feeds = {"x": float_values("f32", (3, 4, 8), 7), "b": float_values("f32", (4, 1), 8)}
    feeds["x"] = np.nan_to_num(feeds["x"], nan=1.0, posinf=5.0, neginf=-5.0).clip(-1e6, 1e6)
    check(module, feeds)


def random_chain(seed: int) -> tuple[FuelModule, dict[str, np.ndarray]]:
    """A random f32 DAG of 12 elementwise ops over broadcasting inputs."""
    rng = np.random.default_rng(seed)
    g = GraphBuilder()
    shapes = [(4, 6), (6,), (4, 1), ()]
    ins = [g.input(f"x{i}", s) for i, s in enumerate(shapes)]
    vals = list(ins)
    unary = ["neg", "abs", "relu", "tanh", "sigmoid", "silu", "exp", "sin"]
    binary = ["add", "sub", "mul", "max", "min"]
    for _ in range(12):
        if rng.random() < 0.4:
            v = getattr(g, unary[rng.integers(len(unary))])(vals[rng.integers(len(vals))])
        else:
            a, b = (vals[i] for i in rng.integers(len(vals), size=2))
            v = getattr(g, binary[rng.integers(len(binary))])(a, b)
        vals.append(v)
    outs = {f"y{i}": v for i, v in enumerate(vals[-3:])}
    feeds = {
        f"x{i}": np.asarray(float_values("f32", s, seed + i).clip(-5, 5))
        for i, s in enumerate(shapes)
    }
    return g.build(outs), feeds


@pytest.mark.parametrize("seed", range(8))
def test_random_chains(seed: int) -> None:
    module, feeds = random_chain(seed)
    check(module, feeds, max_ulp=4)  # transcendentals feed later ops: a few ulp may compound


def test_chain_is_one_kernel_and_min_ops() -> None:
    g = GraphBuilder()
    x = g.input("x", (64,))
    m = g.build({"y": g.relu(g.tanh(g.add(x, 0.5)))})
    ConvertFuelToCPass().apply(Context(), m.op)
    assert [op.name for op in m.entry.body.block.ops] == ["fuel.c_launch", "func.return"]
    g = GraphBuilder()
    lone = g.build({"y": g.exp(g.input("x", (64,)))})
    ConvertFuelToCPass().apply(Context(), lone.op)  # one op: stays a library kernel
    assert [op.name for op in lone.entry.body.block.ops] == ["fuel.exp", "func.return"]


def test_gelu_tanh_f32() -> None:
    g = GraphBuilder()
    x = g.input("x", (400,))
    module = g.build({"y": g.gelu(x, approximate="tanh")})
    feeds = {"x": float_values("f32", (400,), 9)}
    feeds["x"][:6] = [-9.5, -20.0, -1e4, 1e4, 40.0, -3e38]
    check(module, feeds, 1)


@pytest.mark.parametrize("vec", [False, True])
def test_cost_model_keeps_large_transcendental_groups_on_numpy(vec: bool) -> None:
    """Scalar libm exp is ~4x slower per element than numpy's SIMD one: on 1M elements the
    saved call overhead does not pay for it; on 64 elements it does. The vectorized c-vecmath
    exp (where the floor admits it) pays at both sizes."""
    for n, fused in ((1 << 20, vec), (64, True)):
        g = GraphBuilder()
        x = g.input("x", (n,))
        m = g.build({"y": g.exp(g.add(g.exp(x), 1.0))})
        ConvertFuelToCPass(use_vecmath=vec).apply(Context(), m.op)
        assert any(op.name == "fuel.c_launch" for op in m.op.walk()) == fused


def test_f64_gelu_tanh_and_half_pow_stay_on_numpy() -> None:
    g = GraphBuilder()
    x, h = g.input("x", (8,), "f64"), g.input("h", (8,), "f16")
    module = g.build({"y": g.gelu(x, approximate="tanh"), "z": g.pow(g.neg(h), h)})
    ConvertFuelToCPass().apply(Context(), module.op)
    assert not any(op.name == "fuel.c_launch" for op in module.op.walk())


def test_kernel_protocol_and_contiguity() -> None:
    g = GraphBuilder()
    x, b = g.input("x", (3, 4)), g.input("b", (4,))
    m = lowered(g.build({"y": g.mul(g.add(x, b), 2.0)}))
    kop = next(op for op in m.op.walk() if op.name == "fuel.c_kernel")
    k = c_loader.kernel_for(c_loader.CPlan.from_op(kop))
    xs = np.arange(24, dtype=np.float32).reshape(4, 6)[:3, :4]  # a non-contiguous view
    bs = np.ones(4, np.float32)
    out = np.zeros((4, 3), np.float32).T  # non-contiguous destination
    k([xs, bs], [out], {})
    np.testing.assert_array_equal(out, (xs + bs) * 2)
    with pytest.raises(c_loader.CodegenError, match="input 1 must be f32"):
        k([xs, bs.astype(np.float64)], [out], {})


def test_compile_error_carries_stderr(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FUEL_CACHE_DIR", str(tmp_path))
    with pytest.raises(c_loader.CodegenError, match=r"C compile failed .*\n.*error"):
        c_loader.compile_source("void broken(void **args) { return 1 +; }\n", tmp_path / "b.so")


def test_missing_compiler_is_a_clear_error(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CC", "/nonexistent/fuel-cc")
    assert c_loader.find_compiler() is None
    with pytest.raises(c_loader.CodegenError, match="no C compiler found"):
        c_loader.compile_source("void k(void **args) {}\n", tmp_path / "k.so")


def test_cache_reuse_does_not_recompile(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FUEL_CACHE_DIR", str(tmp_path))
    src = "/* cache test */\nvoid cache_probe(void **args) { *(int *)args[0] = 7; }\n"
    path = c_loader.library_path(src)
    assert path.is_file() and path.parent == tmp_path / "cpu"
    mtime = path.stat().st_mtime_ns

    def refuse(source: str, dest: object) -> None:
        raise AssertionError("recompiled a cached kernel")

    monkeypatch.setattr(c_loader, "compile_source", refuse)
    assert c_loader.library_path(src) == path and path.stat().st_mtime_ns == mtime
    fn = c_loader.load_function("cache_probe", src)
    box = np.zeros(1, np.int32)
    ptrs = c_loader.pointer_array(1)
    ptrs[0] = box.ctypes.data
    fn(ptrs)
    assert box[0] == 7


def test_executor_rebinds_new_input_arrays() -> None:
    """A graph input read by a C kernel is re-pointed when a run binds another array."""
    g = GraphBuilder()
    x = g.input("x", (16,))
    ex = Executor(lowered(g.build({"y": g.mul(g.add(x, 1.0), 3.0)}), min_ops=2))
    for k in range(3):
        a = np.full(16, float(k), np.float32)
        np.testing.assert_array_equal(ex.run({"x": a})["y"], (a + 1) * 3)


def chain_module() -> tuple[FuelModule, dict[str, np.ndarray]]:
    g = GraphBuilder(seed=0)
    x = g.input("x", (8, 16))
    h = g.matmul(x, g.weight("w", (16, 16)))
    y = g.silu(g.add(g.mul(h, 0.5), g.weight("b", (16,))))
    feeds = {"x": np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)}
    return g.build({"y": g.relu(g.sub(y, 0.25))}), feeds


def test_bundle_round_trip_builds_its_checked_sources_here(tmp_path, monkeypatch) -> None:
    """An unsigned bundle is data: its C kernels' sources are regenerated and compared, then
    compiled into fuel's cache; the libraries it ships are never loaded."""
    from lowering.bundle import load_bundle, write_bundle

    monkeypatch.setenv("FUEL_CACHE_DIR", str(tmp_path / "cache"))
    module, feeds = chain_module()
    plain = write_bundle(module, tmp_path / "plain")  # the same picks, library kernels only
    want = load_bundle(plain).executor().run(feeds)["y"]
    path = write_bundle(module, tmp_path / "m.fuelbundle", options={"cpu": {"codegen": "c"}})
    loaded = load_bundle(path)
    kop = next(op for op in loaded.module.op.ops if op.name == "fuel.c_kernel")
    assert c_loader.library_path(kop.source.data).name.startswith("k_")  # fuel's own build
    got = loaded.executor().run(feeds)["y"]
    assert ulp_diff(got, want) <= 1


def test_signed_bundle_round_trip_uses_the_bundled_library(
    tmp_path, monkeypatch, signing_key
) -> None:
    from lowering.bundle import load_bundle, write_bundle

    monkeypatch.setenv("FUEL_CACHE_DIR", str(tmp_path / "cache"))
    private, trusted = signing_key
    module, feeds = chain_module()
    plain = write_bundle(module, tmp_path / "plain")  # the same picks, library kernels only
    want = load_bundle(plain).executor().run(feeds)["y"]
    opts = {"cpu": {"codegen": "c"}}
    path = write_bundle(module, tmp_path / "m.fuelbundle", options=opts, sign_key=private)
    loaded = load_bundle(path, trusted=trusted)
    kernels = loaded.manifest["targets"]["cpu"]["kernels"]
    c_kernels = [k for k in kernels if k["meta"].get("kind") == "c"]
    assert c_kernels and all(len(k["files"]) == 2 for k in c_kernels)
    kop = next(op for op in loaded.module.op.ops if op.name == "fuel.c_kernel")
    assert c_loader.library_path(kop.source.data).name.startswith("bundle_")

    def refuse(source: str, dest: object) -> None:
        raise AssertionError("a bundled kernel was recompiled")

    monkeypatch.setattr(c_loader, "compile_source", refuse)
    got = loaded.executor().run(feeds)["y"]
    assert ulp_diff(got, want) <= 1  # silu: f64 compute on both sides, rounded once


def test_signed_bundle_for_another_machine_is_refused(tmp_path, monkeypatch, signing_key) -> None:
    import platform

    from lowering.bundle import load_bundle, write_bundle
    from runtime.bundle import BundleError

    monkeypatch.setenv("FUEL_CACHE_DIR", str(tmp_path / "cache"))
    private, trusted = signing_key
    module, _ = chain_module()
    path = write_bundle(module, tmp_path / "m", options={"cpu": {"codegen": "c"}}, sign_key=private)
    monkeypatch.setattr(platform, "machine", lambda: "riscv64")
    with pytest.raises(BundleError, match=r"was built for .*this machine is riscv64"):
        load_bundle(path, trusted=trusted)


def test_codegen_option_is_validated() -> None:
    from lowering.backend import BackendError
    from lowering.cpu.backend import CpuBackend

    assert CpuBackend().parse_options("cpu", {"codegen": "c"}).generates_c
    assert not CpuBackend().parse_options("cpu", {"codegen": "none"}).generates_c
    with pytest.raises(BackendError, match="codegen='llvm': expected auto, c or none"):
        CpuBackend().parse_options("cpu", {"codegen": "llvm"})


@pytest.mark.parametrize("native_on", ["1", "0"])
def test_codegen_auto_follows_the_native_switch(
    native_on: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The default (`auto`) generates C exactly where fuel's native kernels are enabled: a
    compiler exists and FUEL_NATIVE is not 0; a bundle then carries the generated kernels."""
    from lowering.bundle import load_bundle, write_bundle
    from lowering.cpu.backend import CpuBackend

    monkeypatch.setenv("FUEL_NATIVE", native_on)
    opts = CpuBackend().parse_options("cpu", {})
    assert opts.codegen == "auto" and opts.generates_c == (native_on == "1")
    g = GraphBuilder()
    x = g.input("x", (4, 8))
    module = g.build({"y": g.relu(g.add(g.exp(x), x))})
    write_bundle(module, tmp_path / "b")
    files = load_bundle(tmp_path / "b").manifest["files"]
    assert any(f.endswith(".c") and "/c/" in f for f in files) == (native_on == "1")


# -- f16 / bf16: bit-identical to the numpy kernels -------------------------------------------

HALF_UNARY = [
    "neg",
    "abs",
    "relu",
    "sqrt",
    "recip",
    "exp",
    "log",
    "rsqrt",
    "tanh",
    "sin",
    "cos",
    "sigmoid",
    "silu",
    "erf",
    "gelu",
    "gelu_tanh",
]
"""Unary ops with a 16-bit C emitter: every unary op (pow, binary, stays on numpy)."""
NOT_COMPUTING = ("fuel.constant", "func.return")
HALF_BINARY = ["add", "sub", "mul", "div", "max", "min"]


def every_half(dtype: str) -> np.ndarray:
    """All 65,536 bit patterns of a 16-bit float: zeros, subnormals, inf, every NaN."""
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(to_numpy(dtype))


def random_half(dtype: str, n: int, seed: int) -> np.ndarray:
    """Random 16-bit patterns (NaNs, infs and subnormals among them) and, for half of the
    elements, moderate normal values where rounding after every op matters."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 1 << 16, n).astype(np.uint16).view(to_numpy(dtype))
    normal = (rng.standard_normal(n) * 4).astype(np.float32).astype(to_numpy(dtype))
    return np.where(rng.random(n) < 0.5, bits, normal)


def half_unary(g: GraphBuilder, op: str, x: object) -> object:
    return g.gelu(x, approximate="tanh") if op == "gelu_tanh" else getattr(g, op)(x)


@pytest.mark.parametrize(("dtype", "op"), [(t, op) for t in HALF for op in HALF_UNARY])
def test_half_unary_exhaustive(dtype: str, op: str) -> None:
    g = GraphBuilder()
    x = g.input("x", (1 << 16,), dtype)
    check(g.build({"y": half_unary(g, op, x)}), {"x": every_half(dtype)})


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("op", HALF_BINARY + COMPARES)
def test_half_binary_random_bits(op: str, dtype: str) -> None:
    n = 1 << 17
    g = GraphBuilder()
    x, y = g.input("x", (n,), dtype), g.input("y", (n,), dtype)
    module = g.build({"z": g.compare(op, x, y) if op in COMPARES else getattr(g, op)(x, y)})
    a, b = random_half(dtype, n, 10), random_half(dtype, n, 11)
    b[::7] = a[::7]  # ties for max/min and the compares
    check(module, {"x": a, "y": b})


@pytest.mark.parametrize("dtype", HALF)
def test_half_binary_broadcasting(dtype: str) -> None:
    g = GraphBuilder()
    x, y = g.input("x", (5, 1, 40), dtype), g.input("y", (3, 1), dtype)
    module = g.build({"z": g.div(g.sub(x, y), g.max(y, 0.75))})
    check(
        module,
        {
            "x": random_half(dtype, 200, 12).reshape(5, 1, 40),
            "y": random_half(dtype, 3, 13).reshape(3, 1),
        },
    )


@pytest.mark.parametrize("dst", [*HALF, "f32", "f64", "i64", "i32", "i8", "u8", "i1"])
@pytest.mark.parametrize("src", HALF)
def test_half_casts_exhaustive(src: str, dst: str) -> None:
    """Every 16-bit pattern to every dtype (to integers: the in-range finite ones)."""
    x = every_half(src)
    if dst in ("i64", "i32", "i8", "u8"):
        f, lo = x.astype(np.float32), -1.0 if dst == "u8" else -129.0
        x = x[np.isfinite(f) & (f > lo) & (f < (256.0 if dst in ("i8", "u8") else 1e6))]
        x = x[(x.astype(np.float32) < 128) | (dst != "i8")]
    g = GraphBuilder()
    v = g.input("x", x.shape, src)
    check(g.build({"y": g.cast(v, dst)}), {"x": x})


def wide_values_near_half_ties(src: str, seed: int) -> np.ndarray:
    """f32/f64 values on, next to and between the rounding ties of f16 and bf16, random bit
    patterns (NaN payloads, subnormals, out of range) and the overflow thresholds."""
    rng = np.random.default_rng(seed)
    n = 1 << 16
    ties = (rng.integers(-4096, 4096, n) + 0.5) * np.exp2(rng.integers(-34, 6, n))
    dt = to_numpy(src)
    it = np.uint32 if src == "f32" else np.uint64
    rand = rng.integers(0, np.iinfo(it).max, n, dtype=np.uint64, endpoint=True).astype(it)
    edges = np.array(
        [
            65504.0,
            65519.99,
            65520.0,
            -65520.0,
            2.0**-24,
            2.0**-25,
            3 * 2.0**-26,
            2.0**-25 * (1 + 2.0**-20),
            3.3961e38,
            3.4e38,
            1e300,
            0.0,
            -0.0,
        ]
    )
    with np.errstate(over="ignore"):
        t = ties.astype(dt)
        return np.concatenate(
            [
                t,
                np.nextafter(t, dt.type(0)),
                np.nextafter(t, dt.type(np.inf)),
                rand.view(dt),
                edges.astype(dt),
            ]
        )


@pytest.mark.parametrize("dst", HALF)
@pytest.mark.parametrize("src", ["f32", "f64", "i64", "i32", "i8", "u8", "i1"])
def test_casts_to_half(src: str, dst: str) -> None:
    """Round to nearest even (ties, overflow to inf, subnormals, NaN payloads); f64/i64/i32
    -> bf16 round once, correctly (the cast kernel's round-to-odd), not through f32."""
    rng = np.random.default_rng(14)
    if src in ("f32", "f64"):
        x = wide_values_near_half_ties(src, 15)
    elif src == "i1":
        x = rng.integers(0, 2, 64).astype(np.bool_)
    else:
        dt, info = to_numpy(src), np.iinfo(to_numpy(src))
        x = rng.integers(info.min, info.max, 1 << 16, dtype=dt, endpoint=True)
        if src in ("i64", "i32"):  # 8-bit mantissas times powers of two, +-2: bf16 ties
            top = 54 if src == "i64" else 22
            m = rng.integers(1, 512, 1 << 16) << rng.integers(1, top, 1 << 16)
            near = (m + rng.integers(-2, 3, 1 << 16)).astype(dt)
            x = np.concatenate([x, near, np.array([info.min, info.max, 65519, 65520, -65520], dt)])
    g = GraphBuilder()
    v = g.input("x", x.shape, src)
    check(g.build({"y": g.cast(v, dst)}), {"x": x})


@pytest.mark.parametrize("dtype", HALF)
def test_half_fused_chain_rounds_after_every_op(dtype: str) -> None:
    """relu(x * y + z) and a cast chain, one kernel, bit-identical to the unfused numpy
    kernels, which round to the dtype after every op; the inputs are ones where rounding only
    once at the end would differ (checked), so a kernel that skipped a rounding fails."""
    n = 1 << 14
    g = GraphBuilder()
    x, y, z = (g.input(k, (n,), dtype) for k in "xyz")
    w = g.input("w", (n,), "f32")
    r = g.relu(g.add(g.mul(x, y), z))
    mixed = g.cast(g.mul(g.cast(g.sqrt(g.abs(r)), "f32"), w), dtype)
    other = "bf16" if dtype == "f16" else "f16"
    across = g.cast(g.add(g.cast(r, other), g.cast(z, other)), "f64")
    module = g.build(
        {"r": r, "mixed": g.where(g.compare("gt", mixed, z), mixed, x), "across": across}
    )
    lowered_ops = [op.name for op in lowered(module).entry.body.block.ops]
    assert lowered_ops == ["fuel.c_launch", "func.return"]
    feeds = {k: random_half(dtype, n, 20 + i) for i, k in enumerate("xyz")}
    feeds["w"] = np.random.default_rng(23).standard_normal(n).astype(np.float32)
    check(module, feeds)
    with np.errstate(all="ignore"):  # the test's inputs do tell per-op rounding apart
        xs, ys, zs = (feeds[k].astype(np.float32) for k in "xyz")
        once = np.maximum(xs * ys + zs, 0).astype(to_numpy(dtype))
        want = Executor(module).run(feeds)["r"]
    assert (once.view(np.uint16) != want.view(np.uint16)).sum() > 10


def test_half_nan_inf_subnormal_cases() -> None:
    """Spot cases: subnormal ties round to even, 65520 overflows f16 to inf, NaN payloads
    survive neg/abs/where (bits) and narrowing to f16, bf16 arithmetic gives its default NaN,
    -0.0 stays -0.0."""
    h = np.array([0x0001, 0x0003, 0x7BFF, 0x7C01, 0xFD55, 0x8000, 0x0400, 0x7C00], np.uint16)
    b = np.array([0x0001, 0x7F81, 0xFF81, 0x7F7F, 0x8000, 0x0080, 0xFFC1, 0x7F80], np.uint16)
    g = GraphBuilder()
    x, y = g.input("x", (8,), "f16"), g.input("y", (8,), "bf16")
    half_x = g.mul(x, 0.5)  # 0x0001 * 0.5: a tie, to even 0; 0x0003 * 0.5 -> 0x0002
    big = g.add(x, 16.0)  # 65504 + 16 = 65520: to inf
    sel = g.where(g.compare("lt", x, 1.0), g.neg(x), g.abs(x))
    module = g.build(
        {
            "half_x": half_x,
            "big": big,
            "sel": sel,
            "yb": g.add(g.neg(y), y),
            "yw": g.cast(g.cast(y, "f16"), "bf16"),
            "yf": g.where(g.compare("ne", y, y), g.abs(y), g.mul(y, 2.0)),
        }
    )
    feeds = {"x": h.view(np.float16), "y": b.view(to_numpy("bf16"))}
    check(module, feeds)
    with np.errstate(all="ignore"):
        got = Executor(lowered(module)).run(feeds)
    assert got["half_x"].view(np.uint16)[:2].tolist() == [0x0000, 0x0002]
    assert got["big"].view(np.uint16)[2] == 0x7C00
    assert got["sel"].view(np.uint16)[3:6].tolist() == [0x7C01, 0x7D55, 0x0000]
    assert got["yf"].view(np.uint16)[1:3].tolist() == [0x7F81, 0x7F81]  # abs keeps a payload


@pytest.mark.parametrize("dtype", HALF)
def test_half_pow_stays_on_numpy(dtype: str) -> None:
    """pow has no 16-bit C emitter (see `codegen_half.SUPPORTED`): a chain through it is split,
    pow runs as its numpy kernel, and the result is still bit-identical."""
    g = GraphBuilder()
    x, y = g.input("x", (4, 64), dtype), g.input("y", (64,), dtype)
    u = g.pow(g.abs(g.mul(x, 1.5)), y)
    u = g.sigmoid(g.max(g.add(u, 0.5), -4.0))
    module = g.build({"z": g.relu(g.mul(u, 3.0))})
    computing = [op for op in module.entry.body.block.ops if op.name not in NOT_COMPUTING]
    assert [op.name for op in computing if not codegen.c_eligible(op)] == ["fuel.pow"]
    names = [op.name for op in lowered(module).entry.body.block.ops]
    assert "fuel.pow" in names
    assert names.count("fuel.c_launch") == 2
    feeds = {"x": random_half(dtype, 256, 30).reshape(4, 64), "y": random_half(dtype, 64, 31)}
    check(module, feeds)
