"""Generated Triton for fusion groups: partition rules, source, and numerics under the Triton
interpreter against the numpy CPU executor (the reference) on random inputs.

Tolerances: ops the numpy kernels round once from an exact or f32 value (+ - * / sqrt, casts,
compares, f16/bf16 through f32) must agree exactly or to 1 ulp of the output type; f32
transcendentals differ by the reference's f64 evaluation vs f32 math here (rtol 2e-6, and an
absolute 1e-6 for the cancelling tail of gelu's erf form).
"""

from __future__ import annotations

import numpy as np
import pytest

from fuel_dialect.dialect import fuel_context
from lowering.fusion import fusion_groups
from lowering.triton.codegen import kernel_source
from lowering.triton.convert_fuel_to_triton import ConvertFuelToTritonPass
from runtime.devices import TorchDevice
from runtime.dtypes import to_numpy
from runtime.executor import Executor
from runtime.kernels.triton.registry import triton_kernel_table
from runtime.loaders.triton import CodegenError, GeneratedKernel, KernelPlan, cache_dir, source_file
from runtime.module import FuelModule

RNG = np.random.default_rng(0)
TOL = {"f64": (1e-12, 1e-12), "f32": (2e-6, 1e-6), "f16": (1e-3, 1e-4), "bf16": (8e-3, 1e-3)}


@pytest.fixture(autouse=True, scope="module")
def _cache(tmp_path_factory: pytest.TempPathFactory):
    mp = pytest.MonkeyPatch()
    mp.setenv("FUEL_CACHE_DIR", str(tmp_path_factory.mktemp("fuel-cache")))
    yield
    mp.undo()


def lowered(text: str) -> tuple[FuelModule, FuelModule]:
    """(reference module, converted copy)."""
    ref = FuelModule.parse(text)
    low = FuelModule.parse(text)
    ConvertFuelToTritonPass().apply(fuel_context(), low.op)
    low.op.verify()
    return ref, low


def emulated(low: FuelModule) -> Executor:
    """The executor over a converted module, its launches on an emulated `cuda:0`."""
    cuda = TorchDevice("cuda:0", emulate=True)
    return Executor(low, table=triton_kernel_table(), devices={"cuda:0": cuda})


def random_inputs(module: FuelModule, lo: float = -3.0, hi: float = 3.0) -> dict[str, np.ndarray]:
    out = {}
    for arg, name in zip(module.entry.body.block.args, _names(module), strict=True):
        t = arg.type
        dt, shape = to_numpy(_dt(t)), tuple(t.get_shape())
        if dt.kind == "b":
            out[name] = RNG.random(shape) < 0.5
        elif dt.kind in "iu":
            info = np.iinfo(dt)
            out[name] = RNG.integers(info.min, info.max, shape, endpoint=True).astype(dt)
        else:
            out[name] = RNG.uniform(lo, hi, shape).astype(dt)
    return out


def _names(module: FuelModule) -> list[str]:
    from runtime.module import io_names

    return io_names(module.entry)[0]


def _dt(t) -> str:
    from fuel_dialect.dtypes import dtype_name

    return dtype_name(t)


def check(text: str, inputs: dict[str, np.ndarray] | None = None, launches: int | None = None):
    ref, low = lowered(text)
    if launches is not None:
        assert str(low).count("fuel.triton_launch") == launches, str(low)
    inputs = inputs if inputs is not None else random_inputs(ref)
    want = Executor(ref).run(inputs)
    got = emulated(low).run(inputs)
    for name, w in want.items():
        g = got[name]
        assert g.dtype == w.dtype and g.shape == w.shape, name
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=name)
        else:
            rtol, atol = TOL[{2: "f16", 4: "f32", 8: "f64"}[w.itemsize]]
            if w.dtype.name == "bfloat16":
                rtol, atol = TOL["bf16"]
            a, b = g.astype(np.float64), w.astype(np.float64)
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True, err_msg=name)


# -- numerics -----------------------------------------------------------------------------------

UNARY_SIGNED = "neg abs relu exp tanh sigmoid silu sin cos erf".split()
UNARY_POSITIVE = "log sqrt rsqrt recip".split()


def unary_module(dt: str) -> str:
    t = f"tensor<3x5x{dt}>"
    lines, outs = [], []
    for i, op in enumerate(UNARY_SIGNED + ["gelu", "gelu tanh"]):
        name, extra = (op.split() + [""])[:2]
        lines.append(f"%u{i} = fuel.{name} %x {extra} : {t}")
        outs.append(f"%u{i}")
    for i, op in enumerate(UNARY_POSITIVE):
        lines.append(f"%p{i} = fuel.{op} %p : {t}")
        outs.append(f"%p{i}")
    sig = ", ".join([t] * len(outs))
    body = "\n  ".join(lines)
    return (
        f"func.func @main(%x: {t}, %p: {t}) -> ({sig}) {{\n  {body}\n"
        f"  func.return {', '.join(outs)} : {sig}\n}}"
    )


@pytest.mark.parametrize("dt", ["f32", "f16", "bf16", "f64"])
def test_every_unary_op(dt: str) -> None:
    """Siblings reading one input over one space share a kernel (x's ops, p's ops)."""
    text = unary_module(dt)
    ref, _ = lowered(text)
    ins = random_inputs(ref)
    ins["p"] = RNG.uniform(0.05, 4.0, ins["p"].shape).astype(ins["p"].dtype)
    check(text, ins, launches=2)


BINARY = "add sub mul div max min pow".split()
COMPARE = "eq ne lt le gt ge".split()


@pytest.mark.parametrize("dt", ["f32", "f16"])
def test_binary_compare_where_with_broadcasting(dt: str) -> None:
    a, b, o = f"tensor<2x1x4x{dt}>", f"tensor<3x1x{dt}>", f"tensor<2x3x4x{dt}>"
    c = "tensor<2x3x4xi1>"
    lines = [f"%b{i} = fuel.{op} %x, %y : {a}, {b} -> {o}" for i, op in enumerate(BINARY)]
    lines += [f"%c{i} = fuel.{op} %x, %y : {a}, {b} -> {c}" for i, op in enumerate(COMPARE)]
    lines.append(f"%w = fuel.where %c2, %b0, %y : {c}, {o}, {b} -> {o}")
    outs = [f"%b{i}" for i in range(len(BINARY))] + [f"%c{i}" for i in range(len(COMPARE))]
    types = [o] * len(BINARY) + [c] * len(COMPARE)
    text = (
        f"func.func @main(%x: {a}, %y: {b}) -> ({', '.join([*types, o])}) {{\n  "
        + "\n  ".join(lines)
        + f"\n  func.return {', '.join([*outs, '%w'])} : "
        f"{', '.join([*types, o])}\n}}"
    )
    ref, _ = lowered(text)
    ins = random_inputs(ref)
    ins["x"][1] = np.abs(ins["x"][1])  # pow: positive bases, and negative ones below
    ins["y"][0, 0] = 2.0  # an integral exponent of a negative base
    ins["x"][0, 0, 0] = ins["y"][0, 0]  # eq/ne/le/ge see equal operands
    check(text, ins, launches=1)


def test_integer_and_bool_chain_wraps_like_numpy() -> None:
    text = """
func.func @main(%a: tensor<4x8xi32>, %b: tensor<8xi32>, %c: tensor<4x8xi8>, %f: tensor<4x8xf32>,
                %m: tensor<4x8xi1>, %u: tensor<8xui8>)
    -> (tensor<4x8xi32>, tensor<4x8xi8>, tensor<4x8xi32>, tensor<4x8xi1>, tensor<4x8xf32>,
        tensor<8xui8>, tensor<4x8xi64>) {
  %s = fuel.add %a, %b : tensor<4x8xi32>, tensor<8xi32> -> tensor<4x8xi32>
  %p = fuel.mul %s, %a : tensor<4x8xi32>, tensor<4x8xi32> -> tensor<4x8xi32>
  %n = fuel.neg %p : tensor<4x8xi32>
  %q = fuel.max %n, %b : tensor<4x8xi32>, tensor<8xi32> -> tensor<4x8xi32>
  %c2 = fuel.add %c, %c : tensor<4x8xi8>, tensor<4x8xi8> -> tensor<4x8xi8>
  %t = fuel.cast %f : tensor<4x8xf32> to tensor<4x8xi32>
  %z = fuel.cast %f : tensor<4x8xf32> to tensor<4x8xi1>
  %zz = fuel.ne %z, %m : tensor<4x8xi1>, tensor<4x8xi1> -> tensor<4x8xi1>
  %mf = fuel.cast %m : tensor<4x8xi1> to tensor<4x8xf32>
  %w = fuel.where %zz, %mf, %f : tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %uu = fuel.sub %u, %u : tensor<8xui8>, tensor<8xui8> -> tensor<8xui8>
  %u2 = fuel.add %uu, %u : tensor<8xui8>, tensor<8xui8> -> tensor<8xui8>
  %wide = fuel.cast %c2 : tensor<4x8xi8> to tensor<4x8xi64>
  func.return %q, %c2, %t, %zz, %w, %u2, %wide : tensor<4x8xi32>, tensor<4x8xi8>, tensor<4x8xi32>,
      tensor<4x8xi1>, tensor<4x8xf32>, tensor<8xui8>, tensor<4x8xi64>
}"""
    ref, _ = lowered(text)
    ins = random_inputs(ref)
    ins["f"][0, :3] = 0.0
    check(text, ins)


def test_casts_between_floats_round_to_nearest_even() -> None:
    text = """
func.func @main(%x: tensor<64xf32>, %d: tensor<64xf64>)
    -> (tensor<64xf16>, tensor<64xbf16>, tensor<64xf32>, tensor<64xf16>, tensor<64xi8>) {
  %h = fuel.cast %x : tensor<64xf32> to tensor<64xf16>
  %b = fuel.cast %x : tensor<64xf32> to tensor<64xbf16>
  %hb = fuel.cast %h : tensor<64xf16> to tensor<64xf32>
  %dh = fuel.cast %d : tensor<64xf64> to tensor<64xf16>
  %i = fuel.cast %h : tensor<64xf16> to tensor<64xi8>
  func.return %h, %b, %hb, %dh, %i : tensor<64xf16>, tensor<64xbf16>, tensor<64xf32>,
      tensor<64xf16>, tensor<64xi8>
}"""
    ref, _ = lowered(text)
    ins = random_inputs(ref, -100.0, 100.0)
    check(text, ins, launches=2)  # the f32 and the f64 input chains are independent groups


def test_chain_around_library_calls_and_smaller_outputs() -> None:
    """An intermediate read by a matmul and a reduction is written out; an output smaller
    than the iteration space ([8] inside [4, 8]) is stored once per element."""
    text = """
func.func @main(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %w: tensor<8x8xf32>)
    -> (tensor<4x8xf32>, tensor<8xf32>, tensor<4x1xf32>) {
  %e = fuel.exp %b : tensor<8xf32>
  %a = fuel.add %x, %e : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %m = fuel.matmul %a, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %r = fuel.reduce_max %a axes = [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  %d = fuel.sub %m, %r : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %y = fuel.tanh %d : tensor<4x8xf32>
  func.return %y, %e, %r : tensor<4x8xf32>, tensor<8xf32>, tensor<4x1xf32>
}"""
    check(text, launches=2)


def test_random_chains_match_the_executor() -> None:
    """Random DAGs of broadcasting elementwise ops and reductions over f32/f16 inputs: the
    partition never closes a cycle and every output matches."""
    rng = np.random.default_rng(7)
    shapes = [(3, 4), (4,), (3, 1), ()]
    for _ in range(6):
        dt = str(rng.choice(["f32", "f16"]))
        vals = [(f"%i{k}", s) for k, s in enumerate(shapes)]
        args = ", ".join(f"{n}: {_t(s, dt)}" for n, s in vals)
        lines = []
        for j in range(8):
            (n1, s1), (n2, s2) = (vals[int(k)] for k in rng.integers(0, len(vals), 2))
            op = str(rng.choice(["add", "sub", "mul", "max", "min", "tanh", "sigmoid", "neg"]))
            if s1 == (3, 4) and rng.random() < 0.3:  # a reduction between fusible ops
                lines.append(
                    f"%v{j} = fuel.reduce_max {n1} axes = [1] keepdim : "
                    f"{_t(s1, dt)} -> {_t((3, 1), dt)}"
                )
                vals.append((f"%v{j}", (3, 1)))
                continue
            if op in ("tanh", "sigmoid", "neg"):
                lines.append(f"%v{j} = fuel.{op} {n1} : {_t(s1, dt)}")
                vals.append((f"%v{j}", s1))
                continue
            so = np.broadcast_shapes(s1, s2)
            lines.append(
                f"%v{j} = fuel.{op} {n1}, {n2} : {_t(s1, dt)}, {_t(s2, dt)} -> {_t(so, dt)}"
            )
            vals.append((f"%v{j}", so))
        outs = vals[-3:]
        text = (
            f"func.func @main({args}) -> ({', '.join(_t(s, dt) for _, s in outs)}) {{\n  "
            + "\n  ".join(lines)
            + f"\n  func.return {', '.join(n for n, _ in outs)} : "
            f"{', '.join(_t(s, dt) for _, s in outs)}\n}}"
        )
        check(text)


def _t(shape: tuple[int, ...], dt: str) -> str:
    return f"tensor<{'x'.join(map(str, shape))}{'x' if shape else ''}{dt}>"


# -- partition rules and source -----------------------------------------------------------------


def test_a_group_never_closes_a_cycle_through_another_op() -> None:
    """exp -> reduce_sum -> add(exp, sum): the add reads the exp group through the reduction,
    so it must be a second group (one kernel could not both feed and wait for the sum)."""
    text = """
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = fuel.exp %x : tensor<4x8xf32>
  %s = fuel.reduce_sum %e axes = [1] keepdim : tensor<4x8xf32> -> tensor<4x1xf32>
  %y = fuel.div %e, %s : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}"""
    module = FuelModule.parse(text)
    groups = fusion_groups(module.entry.body.block, lambda op: True)
    assert [[op.name for op in g.ops] for g in groups] == [["fuel.exp"], ["fuel.div"]]
    check(text, launches=2)


def test_a_chain_resumed_after_a_matmul_is_a_second_group() -> None:
    """silu(matmul(chain)) + chain: the add reads the first group directly and through the
    matmul, so it belongs with the silu in a second kernel after the matmul."""
    text = """
func.func @main(%x: tensor<4x8xf16>, %b: tensor<8xf16>, %w: tensor<8x8xf16>)
    -> (tensor<4x8xf16>, tensor<8xf16>) {
  %e = fuel.exp %b : tensor<8xf16>
  %a = fuel.add %x, %e : tensor<4x8xf16>, tensor<8xf16> -> tensor<4x8xf16>
  %mm = fuel.matmul %a, %w : tensor<4x8xf16>, tensor<8x8xf16> -> tensor<4x8xf16>
  %s = fuel.silu %mm : tensor<4x8xf16>
  %t = fuel.add %s, %a : tensor<4x8xf16>, tensor<4x8xf16> -> tensor<4x8xf16>
  func.return %t, %e : tensor<4x8xf16>, tensor<8xf16>
}"""
    module = FuelModule.parse(text)
    groups = fusion_groups(module.entry.body.block, lambda op: True)
    assert [[op.name for op in g.ops] for g in groups] == [
        ["fuel.exp", "fuel.add"],
        ["fuel.silu", "fuel.add"],
    ]
    check(text, launches=2)


def test_no_cycle_through_a_group_that_grew_later() -> None:
    """H reads G; G later grows a member that waits (through a reduction) for K. Merging H
    and K would then close K -> reduce -> G -> H+K: the op reading both joins H alone."""
    text = """
func.func @main(%b: tensor<8xf32>, %x: tensor<4x8xf32>, %y: tensor<3x8xf32>, %z: tensor<3x8xf32>)
    -> (tensor<4x8xf32>, tensor<3x8xf32>) {
  %e = fuel.exp %b : tensor<8xf32>
  %a = fuel.add %x, %e : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %h = fuel.add %y, %e : tensor<3x8xf32>, tensor<8xf32> -> tensor<3x8xf32>
  %k = fuel.neg %z : tensor<3x8xf32>
  %r = fuel.reduce_sum %k axes = [0] keepdim : tensor<3x8xf32> -> tensor<1x8xf32>
  %m = fuel.mul %a, %r : tensor<4x8xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
  %n = fuel.sub %h, %k : tensor<3x8xf32>, tensor<3x8xf32> -> tensor<3x8xf32>
  func.return %m, %n : tensor<4x8xf32>, tensor<3x8xf32>
}"""
    module = FuelModule.parse(text)
    groups = fusion_groups(module.entry.body.block, lambda op: True)
    names = sorted(sorted(op.name.removeprefix("fuel.") for op in g.ops) for g in groups)
    assert names == [["add", "exp", "mul"], ["add", "sub"], ["neg"]]
    check(text, launches=3)


def test_source_is_readable_and_content_addressed(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FUEL_CACHE_DIR", str(tmp_path))
    module = FuelModule.parse("""
func.func @main(%x: tensor<4x8xbf16>, %b: tensor<8xbf16>) -> tensor<4x8xbf16> {
  %a = fuel.add %x, %b : tensor<4x8xbf16>, tensor<8xbf16> -> tensor<4x8xbf16>
  func.return %a : tensor<4x8xbf16>
}""")
    (group,) = fusion_groups(module.entry.body.block, lambda op: True)
    src = kernel_source(group, "k")
    assert "def k(in0, in1, out0, N, BLOCK: tl.constexpr):" in src
    assert "tl.load(in1 + i1, mask=mask).to(tl.float32)" in src
    assert "_to_bf16(v0 + v1).to(tl.float32)  # fuel.add" in src
    path = source_file("k", src)
    assert path.parent == cache_dir() == tmp_path / "triton"
    assert path.read_text() == src and source_file("k", src) == path


def test_launcher_checks_its_operands() -> None:
    _, low = lowered("""
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = fuel.exp %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}""")
    import torch

    from fuel_dialect.ops_triton import TritonKernelOp

    (op,) = [k for k in low.op.ops if isinstance(k, TritonKernelOp)]
    kernel = GeneratedKernel(KernelPlan.from_op(op))
    with pytest.raises(CodegenError, match=r"input 0 must be f32\[4\], got torch.float16\[4\]"):
        kernel([torch.zeros(4, dtype=torch.float16)], [torch.empty(4)], {})
    with pytest.raises(CodegenError, match="expected 1 outputs, got 0"):
        kernel([torch.zeros(4)], [], {})
    out = torch.empty(8)[::2]  # a strided destination is written through a scratch copy
    kernel([torch.zeros(4)], [out], {})
    assert out.tolist() == [1.0] * 4
