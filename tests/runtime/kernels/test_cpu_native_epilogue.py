"""The fused products' epilogue in C (`act_cols` in runtime/native/fuel_native.c, the
`native-vecmath` sibling of `matmul_bias_act`) and the native `layer_norm`: checked against
float64 references, against the numpy steps they replace, on every micro-kernel the CPU has
and through program records; the picker chooses the fused kernel on its own costs."""

from __future__ import annotations

import numpy as np
import pytest

from frontends.builder import GraphBuilder
from fuel_dialect.attrs import KERNEL_ATTR
from runtime import native, special
from runtime.executor import Executor
from runtime.kernels.cpu import native as nk
from runtime.precision import ulp_distance

pytestmark = pytest.mark.skipif(not native.enabled(), reason="no C compiler (or FUEL_NATIVE=0)")

F32 = np.float32
ACTS64 = {
    "none": lambda y: y,
    "relu": lambda y: np.where((y > 0) | np.isnan(y), y, 0.0),
    "gelu": special.gelu_erf,
    "gelu_tanh": special.gelu_tanh,
    "silu": special.silu,
    "sigmoid": lambda y: 1.0 / (1.0 + np.exp(-y)),
    "tanh": np.tanh,
}
"""Each epilogue's activation in float64 (the reference an f32 result is 1 ulp from)."""


def operands(rows: tuple[int, ...], k: int, n: int, seed: int) -> tuple[np.ndarray, ...]:
    g = np.random.default_rng(seed)
    x = g.standard_normal((*rows, k)).astype(F32)
    w = (g.standard_normal((k, n)) / np.sqrt(k) * 3).astype(F32)  # products of a few units
    return x, w, g.standard_normal(n).astype(F32)


def product(x: np.ndarray, w: np.ndarray, packed: bool) -> np.ndarray:
    """The bare f32 product on the path the fused kernel takes (GEMV tiles or FMA chains)."""
    y = np.empty((*x.shape[:-1], w.shape[1]), F32)
    if packed:
        nk._fma_gemm(x, w, None, None, y)
    else:
        nk._matmul_native([x, w], [y], {})
    return y


# rows: a decode GEMV (1), a few (3); k * n past the GEMV's one-K-block size (partial sums,
# the epilogue after the reduction); many rows (the packed GEMM, the epilogue per panel)
CASES = [((1,), 64, 48, False), ((3,), 700, 300, False), ((2, 10), 40, 70, True)]


@pytest.mark.parametrize("act", list(ACTS64))
@pytest.mark.parametrize(("rows", "k", "n", "packed"), CASES)
def test_epilogue_is_within_one_ulp_of_float64(
    act: str, rows: tuple[int, ...], k: int, n: int, packed: bool
) -> None:
    """act(x @ w + b): the product's bits, `+ b` in f32 (numpy's `out += b`), then the
    activation within 1 ulp of float64 on that sum (relu and none: exactly numpy's)."""
    x, w, b = operands(rows, k, n, seed=k + n)
    if act in ("sigmoid", "tanh"):  # no fuel op spells these as matmul_bias_act: the C entry
        y = product(x, w, packed)
        out = y.copy()
        native.library().fuel_native_bias_act(
            native.ptr(out), native.ptr(b), y.size // n, n, native.ACT_CODES[act]
        )
    else:
        out = np.full((*rows, n), np.nan, F32)
        nk._matmul_bias_act_vecmath([x, w, b], [out], {"act": act})
    biased = product(x, w, packed) + b
    want = ACTS64[act](biased.astype(np.float64))
    assert ulp_distance(out, want.astype(F32)).max() <= (0 if act in ("none", "relu") else 1)
    # and the whole fused op against float64 end to end (normwise per row: the product's error)
    full = ACTS64[act](x.astype(np.float64) @ w.astype(np.float64) + b)
    assert np.abs(out - full).max() <= 1e-5 * max(1.0, np.abs(full).max())


def test_none_and_relu_are_the_native_siblings_bits() -> None:
    """Without a transcendental the two siblings compute the same steps: the same bits."""
    for rows, k, n, _ in CASES:
        x, w, b = operands(rows, k, n, seed=3)
        for act in ("none", "relu"):
            a, c = (np.empty((*rows, n), F32) for _ in range(2))
            nk._matmul_bias_act_vecmath([x, w, b], [a], {"act": act})
            nk._matmul_bias_act_native([x, w, b], [c], {"act": act})
            assert a.tobytes() == c.tobytes(), (rows, act)


def test_packed_epilogue_is_the_same_on_every_isa() -> None:
    """The AVX-512, AVX2 and portable micro-kernels, packed and in-place weights, and the
    plain C chain (`fuel_native_gemm_fma_ref`) give the same fused gelu bits."""
    lib = native.library()
    x, w, b = operands((20,), 300, 70, seed=5)
    gelu = native.ACT_CODES["gelu"]
    want = np.empty((20, 70), F32)
    p = native.ptr
    lib.fuel_native_gemm_fma_ref(p(x), p(w), p(b), p(want), 20, 300, 70, gelu)
    try:
        for isa in range(lib.fuel_native_gemm_isa() + 1):
            assert lib.fuel_native_gemm_use_isa(isa) == isa
            for packed in (nk.pack(w), None):
                got = np.empty((20, 70), F32)
                nk._fma_gemm(x, w, packed, b, got, gelu)
                assert got.tobytes() == want.tobytes(), (isa, packed is None)
    finally:
        lib.fuel_native_gemm_use_isa(-1)


def test_batched_weights_take_the_same_epilogue() -> None:
    """A weight with batch dims: the product in C, then the epilogue in one more C call."""
    g = np.random.default_rng(6)
    x, w = g.standard_normal((2, 3, 16)).astype(F32), g.standard_normal((2, 16, 24)).astype(F32)
    b = g.standard_normal(24).astype(F32)
    out = np.empty((2, 3, 24), F32)
    nk._matmul_bias_act_vecmath([x, w, b], [out], {"act": "gelu"})
    biased = np.empty_like(out)
    nk._matmul_native([x, w], [biased], {})
    biased += b
    want = special.gelu_erf(biased.astype(np.float64)).astype(F32)
    assert ulp_distance(out, want).max() <= 1


def test_program_records_compute_what_the_calls_do() -> None:
    """OP_GEMM_ACT (GEMV), OP_GEMM_PACKED with gelu (a prepared constant weight) and OP_LN:
    one program, the same bits as the Python calls."""
    x1, w, b = operands((1,), 64, 96, seed=7)
    x20 = np.random.default_rng(8).standard_normal((20, 64)).astype(F32)
    params = {"act": "gelu"}
    packed = nk._matmul_bias_act_vecmath.prepare(
        [None, w, b], [x20.shape, w.shape, b.shape], params, {}
    )
    assert packed is not None
    ln_w, ln_b = (np.random.default_rng(9).standard_normal(96).astype(F32) for _ in range(2))
    calls = [
        (nk._matmul_bias_act_vecmath, [x1, w, b], (1, 96), params, native.OP_GEMM_ACT),
        (packed, [x20, w, b], (20, 96), params, native.OP_GEMM_PACKED),
    ]
    records, got, want = [], [], []
    for kernel, ins, shape, prm, opcode in calls:
        a, c = np.empty(shape, F32), np.full(shape, np.nan, F32)
        kernel(ins, [a], prm)
        record = kernel.encode(ins, [c], prm)
        assert record is not None and record.words[0] == opcode
        records.append(record)
        want.append(a)
        got.append(c)
    a, c = np.empty((20, 96), F32), np.full((20, 96), np.nan, F32)
    nk._layer_norm_native([want[1], ln_w, ln_b], [a], {"eps": 1e-5})
    records.append(nk._layer_norm_native.encode([got[1], ln_w, ln_b], [c], {"eps": 1e-5}))
    want.append(a)
    got.append(c)
    fn, words, count = native.program(records)
    assert fn(words.ctypes.data, count) == -1
    for g, wnt in zip(got, want, strict=True):
        assert g.tobytes() == wnt.tobytes()


def test_layer_norm_is_float64_rounded_once() -> None:
    """Rows offset from 0 (the mean matters): within 1 ulp of the float64 layer norm; a
    constant row gives exactly the bias; broadcast weights fall back to the numpy kernel."""
    g = np.random.default_rng(10)
    for shape in [(1, 512), (3, 7, 33), (130, 64)]:
        x = (g.standard_normal(shape) * 3 + 50).astype(F32)
        w, b = g.standard_normal(shape[-1]).astype(F32), g.standard_normal(shape[-1]).astype(F32)
        out = np.empty(shape, F32)
        nk._layer_norm_native([x, w, b], [out], {"eps": 1e-5})
        x64 = x.astype(np.float64)
        xc = x64 - x64.mean(-1, keepdims=True)
        want = xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5) * w + b
        assert ulp_distance(out, want.astype(F32)).max() <= 1, shape
    const = np.full((2, 64), 3.25, F32)
    w, b = g.standard_normal(64).astype(F32), g.standard_normal(64).astype(F32)
    out = np.empty_like(const)
    nk._layer_norm_native([const, w, b], [out], {"eps": 1e-5})
    assert (out == b).all()
    wb = np.broadcast_to(w, (2, 64))
    got, want = np.empty_like(const), np.empty_like(const)
    x = g.standard_normal((2, 64)).astype(F32)
    nk._layer_norm_native([x, wb, b], [got], {"eps": 1e-5})
    nk._numpy_ln([x, wb, b], [want], {"eps": 1e-5})
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("rows", [1, 16])
def test_the_picker_chooses_the_fused_c_epilogue(rows: int) -> None:
    """matmul + bias + gelu, optimized with the default (no floor stated): a matmul_bias_act
    on the native-vecmath kernel, run in a native program, within f32 of the float64 graph."""
    from passes.optimize import optimize_graph

    g = GraphBuilder(seed=1)
    x = g.input("x", (rows, 64))
    h = g.gelu(g.add(g.matmul(x, g.weight("w0", (64, 256))), g.weight("b0", (256,))))
    y = g.add(g.matmul(h, g.weight("w1", (256, 64))), g.weight("b1", (64,)))
    module = g.build({"y": y})
    optimize_graph(module.op)
    fused = [o for o in module.op.walk() if o.name == "fuel.matmul_bias_act"]
    sources = [o.attributes[KERNEL_ATTR].kernel_source.data for o in fused]
    assert len(fused) == 2, sources
    # gelu: the C epilogue; no activation: either native sibling (the same steps, same bits)
    assert sources[0] == nk.NATIVE_VECMATH and sources[1] in (nk.NATIVE, nk.NATIVE_VECMATH)
    ex = Executor(module)
    assert any(n.startswith("native program") for n in ex.op_names), ex.op_names
    xv = np.random.default_rng(11).standard_normal((rows, 64)).astype(F32)
    got = ex.run({"x": xv})["y"]
    wt = {k: v.astype(np.float64) for k, v in module.weights.items()}
    want = special.gelu_erf(xv @ wt["w0"] + wt["b0"]) @ wt["w1"] + wt["b1"]
    assert np.abs(got - want).max() <= 1e-5 * max(1.0, np.abs(want).max())
