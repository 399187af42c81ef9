"""fuel's packed FMA GEMM (`runtime/native/fuel_gemm.c`, `runtime.kernels.cpu.native`):
every output is one FMA chain in k order, so the AVX-512, AVX2 and portable micro-kernels, the
packed and the in-place weight, and a plain C loop agree bit for bit; the error is bounded
against float64; bias and relu are numpy's steps; the executor packs constant weights once."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from frontends.builder import GraphBuilder
from runtime import native
from runtime.executor import Executor
from runtime.kernels.cpu import native as nk
from runtime.kernels.cpu.activations import f32_activations
from runtime.kernels.cpu.linalg import matmul_cost

pytestmark = pytest.mark.skipif(not native.enabled(), reason="no C compiler (or FUEL_NATIVE=0)")

F32 = np.float32
U = 2.0**-24  # f32 unit roundoff


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def ref_chain(
    x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, relu: bool = False
) -> np.ndarray:
    """The FMA chain written plainly in C (`fuel_native_gemm_fma_ref`, one thread)."""
    m, k, n = x.shape[0], x.shape[1], w.shape[1]
    y = np.empty((m, n), F32)
    p = native.ptr
    native.library().fuel_native_gemm_fma_ref(
        p(x), p(w), 0 if b is None else p(b), p(y), m, k, n, int(relu)
    )
    return y


def packed_gemm(
    x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, relu: bool = False
) -> np.ndarray:
    y = np.empty((x.shape[0], w.shape[1]), F32)
    nk._fma_gemm(x, w, nk.pack(w), b, y, relu)
    return y


def inplace_gemm(
    x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, relu: bool = False
) -> np.ndarray:
    y = np.empty((x.shape[0], w.shape[1]), F32)
    nk._fma_gemm(x, w, None, b, y, relu)
    return y


@pytest.fixture
def isas() -> Iterator[list[int]]:
    """The micro-kernels this CPU can run (0 portable, 1 AVX2, 2 AVX-512); the machine's own
    is restored afterwards."""
    lib = native.library()
    try:
        yield list(range(lib.fuel_native_gemm_isa() + 1))
    finally:
        lib.fuel_native_gemm_use_isa(-1)


# rows: 1-7 (the few-row kernels: one row over two panels, 2 and 4 rows over one), 8 (one
# 8-block), 9-11 (a padded 12-block), 12, 13, 16 (two 8s), 20, 33, 64; columns around the
# 32-wide panel (an odd count of panels: a single row's last panel alone); k around the
# 256-row slice
SHAPES = [
    (1, 1, 1),
    (1, 300, 130),
    (2, 64, 33),
    (3, 257, 96),
    (5, 5, 64),
    (7, 513, 100),
    (8, 64, 32),
    (9, 1, 1),
    (11, 255, 33),
    (12, 256, 31),
    (13, 257, 64),
    (16, 600, 100),
    (20, 3, 65),
    (14, 1024, 40),  # rows 4 KB apart: copied further apart (`pk_rows`), a short last block
    (21, 1030, 40),
    (24, 2048, 33),
    (33, 513, 96),
    (64, 300, 130),
]


@pytest.mark.parametrize(("m", "k", "n"), SHAPES)
def test_every_path_is_the_same_fma_chain(m: int, k: int, n: int, isas: list[int]) -> None:
    """Each micro-kernel the CPU has, on the packed and the in-place weight, with bias and
    relu: the bits of the plain C chain."""
    g = rng(m * 1000 + k + n)
    x, w = g.standard_normal((m, k)).astype(F32), g.standard_normal((k, n)).astype(F32)
    b = g.standard_normal(n).astype(F32)
    want, want_br = ref_chain(x, w).view(np.int32), ref_chain(x, w, b, True).view(np.int32)
    for isa in isas:
        assert native.library().fuel_native_gemm_use_isa(isa) == isa
        assert np.array_equal(packed_gemm(x, w).view(np.int32), want), isa
        assert np.array_equal(inplace_gemm(x, w).view(np.int32), want), isa
        assert np.array_equal(packed_gemm(x, w, b, True).view(np.int32), want_br), isa
        assert np.array_equal(inplace_gemm(x, w, b, True).view(np.int32), want_br), isa


def test_error_is_within_the_recursive_sum_bound() -> None:
    """|y - x.w| <= gamma_k sum_i |x_i w_i| per output (products exact until each FMA)."""
    g = rng(1)
    for m, k, n in [(32, 4096, 64), (64, 1408, 96), (8, 5, 7)]:
        x = g.standard_normal((m, k)).astype(F32)
        w = (g.standard_normal((k, n)) * np.exp(g.uniform(-4, 4, (k, n)))).astype(F32)
        x64, w64 = x.astype(np.float64), w.astype(np.float64)
        err = np.abs(packed_gemm(x, w) - x64 @ w64)
        gamma = k * U / (1 - k * U)
        assert (err <= gamma * (np.abs(x64) @ np.abs(w64)) + 1e-45).all()


def test_bias_and_relu_are_numpys_steps() -> None:
    """Fused bias and relu equal `y += b; np.maximum(y, 0)` on the bare product, bit for bit,
    NaN and infinities included (relu keeps NaN and turns -0 into +0, as numpy does)."""
    g = rng(2)
    m, k, n = 24, 40, 70
    x, w = g.standard_normal((m, k)).astype(F32), g.standard_normal((k, n)).astype(F32)
    b = g.standard_normal(n).astype(F32)
    x[3, 5], x[7, :] = np.nan, 0.0
    w[2, 9], b[11], b[12] = np.inf, -np.inf, -0.0
    bare = packed_gemm(x, w)
    with np.errstate(invalid="ignore"):
        biased = bare + b
        relu = np.maximum(biased, 0)
    for path in (packed_gemm, inplace_gemm, ref_chain):
        with np.errstate(invalid="ignore"):
            assert path(x, w, b).tobytes() == biased.tobytes()
            assert path(x, w, b, True).tobytes() == relu.tobytes()
    assert np.isnan(relu[3]).all() and not np.signbit(relu[7, 12])


def test_kernels_take_the_packed_path_per_matrix() -> None:
    g = rng(3)
    x, w = g.standard_normal((16, 48)).astype(F32), g.standard_normal((48, 40)).astype(F32)
    out = np.empty((16, 40), F32)
    nk._matmul_native([x, w], [out], {})
    assert out.tobytes() == ref_chain(x, w).tobytes()
    xb, wb = g.standard_normal((2, 16, 48)).astype(F32), g.standard_normal((2, 48, 40)).astype(F32)
    outb = np.empty((2, 16, 40), F32)
    nk._matmul_native([xb, wb], [outb], {})  # batched weights: the same chain per matrix
    assert outb.tobytes() == np.stack([ref_chain(xb[i], wb[i]) for i in range(2)]).tobytes()
    xk, wk = g.standard_normal((2, 10, 1024)).astype(F32), g.standard_normal((2, 1024, 8))
    outk = np.empty((2, 10, 8), F32)  # rows 4 KB apart, a short block: copied, same chain
    nk._matmul_native([xk, wk.astype(F32)], [outk], {})
    want = [ref_chain(xk[i], wk[i].astype(F32)) for i in range(2)]
    assert outk.tobytes() == np.stack(want).tobytes()
    x3 = g.standard_normal((2, 8, 48)).astype(F32)  # leading dims flatten into rows
    out3 = np.empty((2, 8, 40), F32)
    nk._matmul_native([x3, w], [out3], {})
    assert out3.tobytes() == ref_chain(x3.reshape(16, 48), w).reshape(2, 8, 40).tobytes()


@pytest.mark.parametrize("act", ["none", "relu", "gelu", "silu"])
def test_matmul_bias_act_is_the_chain_of_its_steps(act: str) -> None:
    g = rng(4)
    x, w = g.standard_normal((20, 64)).astype(F32), g.standard_normal((64, 48)).astype(F32)
    b = g.standard_normal(48).astype(F32)
    out = np.empty((20, 48), F32)
    nk._matmul_bias_act_native([x, w, b], [out], {"act": act})
    want = ref_chain(x, w) + b
    if act != "none":
        f32_activations()[act](want, want)
    assert out.tobytes() == want.tobytes()
    x1 = g.standard_normal((1, 64)).astype(F32)  # a GEMV row: the numpy kernel's steps
    out1 = np.empty((1, 48), F32)
    nk._matmul_bias_act_native([x1, w, b], [out1], {"act": act})
    gemv = np.empty((1, 48), F32)
    nk._matmul_native([x1, w], [gemv], {})
    gemv += b
    if act != "none":
        f32_activations()[act](gemv, gemv)
    assert out1.tobytes() == gemv.tobytes()


def test_prepared_kernels_pack_each_constant_once_and_change_no_bit() -> None:
    g = rng(5)
    x = g.standard_normal((12, 32)).astype(F32)
    wg, wu = (g.standard_normal((32, 80)).astype(F32) for _ in range(2))
    wd = g.standard_normal((80, 32)).astype(F32)
    b = g.standard_normal(80).astype(F32)
    cache: dict = {}
    shapes = [x.shape, wg.shape]
    mm = nk._matmul_native.prepare([None, wg], shapes, {}, cache)
    mba = nk._matmul_bias_act_native.prepare(
        [None, wg, b], [*shapes, b.shape], {"act": "relu"}, cache
    )
    gated = nk._gated_mlp_native.prepare(
        [None, wg, wu, wd], [x.shape, wg.shape, wu.shape, wd.shape], {}, cache
    )
    assert mm is not None and mba is not None and gated is not None
    assert len(cache) == 3  # wg (shared by all three), wu, wd
    for kernel, prepared, ins, params in [
        (nk._matmul_native, mm, [x, wg], {}),
        (nk._matmul_bias_act_native, mba, [x, wg, b], {"act": "relu"}),
        (nk._gated_mlp_native, gated, [x, wg, wu, wd], {}),
    ]:
        n = ins[-1].shape[1] if kernel is not nk._matmul_bias_act_native else 80
        want, got = np.empty((12, n), F32), np.empty((12, n), F32)
        kernel(ins, [want], params)
        prepared(ins, [got], params)
        assert got.tobytes() == want.tobytes()
    # a weight that is not a constant is left alone
    assert nk._matmul_native.prepare([x, None], shapes, {}, {}) is None


@pytest.mark.parametrize("rows", [1, 12])
def test_prepared_kernels_read_column_slices_of_a_fused_weight_in_panels(rows: int) -> None:
    """A fused projection split by columns (`passes.canonical.products`): the weights are
    strided views of one constant, packed like dense ones: the same bits."""
    g = rng(6)
    x = g.standard_normal((rows, 32)).astype(F32)
    fused = g.standard_normal((32, 160)).astype(F32)
    wg, wu = fused[:, :80], fused[:, 80:]
    wd = g.standard_normal((80, 32)).astype(F32)
    b = g.standard_normal(80).astype(F32)
    shapes = [x.shape, wg.shape, wu.shape, wd.shape]
    prepared = [
        (nk._matmul_native, [x, wu], {}),
        (nk._matmul_bias_act_native, [x, wg, b], {"act": "relu"}),
        (nk._matmul_bias_act_vecmath, [x, wg, b], {"act": "silu"}),
        (nk._gated_mlp_native, [x, wg, wu, wd], {}),
    ]
    for kernel, ins, params in prepared:
        made = kernel.prepare([None, *ins[1:]], shapes[: len(ins)], params, {})
        if made is None:  # a few rows without a SIMD micro-kernel: the GEMV reads in place
            assert rows < nk.GEMV_ROWS and not native.simd_fma()
            continue
        dense = [x, *(np.ascontiguousarray(w) for w in ins[1:])]
        made_dense = kernel.prepare([None, *dense[1:]], shapes[: len(ins)], params, {})
        n = ins[-1].shape[1] if kernel is nk._gated_mlp_native or len(ins) == 2 else 80
        want, got = np.empty((rows, n), F32), np.empty((rows, n), F32)
        made_dense(dense, [want], params)
        made(ins, [got], params)
        assert got.tobytes() == want.tobytes(), kernel.__name__


def test_a_few_rows_read_the_panels_of_a_constant_weight() -> None:
    """A decode step's product by a constant weight (fewer than GEMV_ROWS rows) is prepared
    where a SIMD kernel runs: it reads the panels and gives the chain's bits (a row's bits are
    those of the same row in a prefill); a bias, relu, gelu and the gated MLP too."""
    g = rng(6)
    x = g.standard_normal((3, 64)).astype(F32)
    w, wu = (g.standard_normal((64, 72)).astype(F32) for _ in range(2))
    wd, b = g.standard_normal((72, 40)).astype(F32), g.standard_normal(72).astype(F32)
    prepared = nk._matmul_native.prepare([None, w], [x.shape, w.shape], {}, {})
    assert (prepared is not None) == native.simd_fma()
    if prepared is None:
        return
    got = np.empty((3, 72), F32)
    prepared([x, w], [got], {})
    assert got.tobytes() == ref_chain(x, w).tobytes()
    big = g.standard_normal((12, 64)).astype(F32)
    big[:3] = x
    assert packed_gemm(big, w)[:3].tobytes() == got.tobytes()
    for act in ("relu", "gelu"):
        mba = nk._matmul_bias_act_vecmath.prepare(
            [None, w, b], [x.shape, w.shape, b.shape], {"act": act}, {}
        )
        assert mba is not None
        mba([x, w, b], [got], {"act": act})
        want = ref_chain(x, w, b, act == "relu")
        if act == "gelu":
            native.library().fuel_native_bias_act(native.ptr(want), 0, 3, 72, native.ACT_CODES[act])
        assert got.tobytes() == want.tobytes()
    gated = nk._gated_mlp_native.prepare(
        [None, w, wu, wd], [x.shape, w.shape, wu.shape, wd.shape], {}, {}
    )
    assert gated is not None
    out = np.empty((3, 40), F32)
    gated([x, w, wu, wd], [out], {})
    h, u = ref_chain(x, w), ref_chain(x, wu)  # u held: ptr() keeps no reference
    native.library().fuel_native_silu_mul(native.ptr(h), native.ptr(u), h.size)
    assert out.tobytes() == ref_chain(h, wd).tobytes()


def test_the_gated_mlp_reads_rows_4k_apart_as_the_chain() -> None:
    """Rows of x a multiple of 4 KB apart (k = 1024) are copied further apart before the gate
    and up products (and a short last block padded): the bits of the three chains."""
    g = rng(7)
    x = g.standard_normal((13, 1024)).astype(F32)
    wg, wu = (g.standard_normal((1024, 40)).astype(F32) for _ in range(2))
    wd = g.standard_normal((40, 1024)).astype(F32)
    shapes = [x.shape, wg.shape, wu.shape, wd.shape]
    gated = nk._gated_mlp_native.prepare([None, wg, wu, wd], shapes, {}, {})
    assert gated is not None
    out = np.empty((13, 1024), F32)
    gated([x, wg, wu, wd], [out], {})
    h, u = ref_chain(x, wg), ref_chain(x, wu)  # u held: ptr() keeps no reference
    native.library().fuel_native_silu_mul(native.ptr(h), native.ptr(u), h.size)
    assert out.tobytes() == ref_chain(h, wd).tobytes()


def test_a_program_record_computes_what_the_call_does() -> None:
    g = rng(6)
    x, w = g.standard_normal((40, 96)).astype(F32), g.standard_normal((96, 72)).astype(F32)
    b = g.standard_normal(72).astype(F32)
    kernel = nk._matmul_bias_act_native.prepare(
        [None, w, b], [x.shape, w.shape, b.shape], {"act": "relu"}, {}
    )
    want, got = np.empty((40, 72), F32), np.full((40, 72), np.nan, F32)
    kernel([x, w, b], [want], {"act": "relu"})
    record = kernel.encode([x, w, b], [got], {"act": "relu"})
    assert record is not None and record.words[0] == native.OP_GEMM_PACKED
    fn, words, count = native.program([record])
    assert fn(words.ctypes.data, count) == -1
    assert got.tobytes() == want.tobytes()
    assert kernel.encode([x, w, b], [got], {"act": "gelu"}) is None  # gelu: a numpy pass


def mlp(dims: tuple[int, ...] = (64, 128, 96, 32), rows: int = 16, seed: int = 0) -> tuple:
    g = GraphBuilder(seed=seed)
    x = g.input("x", (rows, dims[0]))
    h = x
    for i, (a, c) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
        h = g.add(g.matmul(h, g.weight(f"w{i}", (a, c))), g.weight(f"b{i}", (c,)))
        if i < len(dims) - 2:
            h = g.relu(h)
    return g.build({"y": h}), dims, rows


def test_the_executor_packs_weights_once_and_matches_the_plain_kernels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from passes.optimize import optimize_graph

    module, dims, rows = mlp()
    optimize_graph(module.op)
    fused = Executor(module)
    names = " ".join(fused.op_names)
    assert "native program" in names and "matmul_bias_act" in names, fused.op_names
    packed = sum(
        native.library().fuel_native_packed_floats(a, c) * 4
        for a, c in zip(dims[:-1], dims[1:], strict=True)
    )
    weights = sum(a.nbytes for a in module.weights.values())
    assert fused.memory_peak_by_device()["cpu"] >= weights + packed
    monkeypatch.setattr(native, "available", lambda: False)  # no programs, no packing
    plain = Executor(module)
    x = rng(7).standard_normal((rows, dims[0])).astype(F32)
    got, want = fused.run({"x": x})["y"], plain.run({"x": x})["y"]
    assert got.tobytes() == want.tobytes()
    h = x.astype(np.float64)
    for i in range(len(dims) - 1):
        h = h @ module.weights[f"w{i}"].astype(np.float64) + module.weights[f"b{i}"]
        h = np.maximum(h, 0) if i < len(dims) - 2 else h
    assert np.abs(got - h).max() <= 1e-5 * max(1.0, np.abs(h).max())


def test_costs_price_the_packed_gemm_like_blas_with_one_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dt = ["f32"] * 3
    gemm = [(64, 512), (512, 1408), (64, 1408)]
    batched = [(2, 64, 512), (2, 512, 64), (2, 64, 64)]
    blas = matmul_cost(gemm, dt, {})
    monkeypatch.setattr(native, "simd_fma", lambda: True)
    est = nk._matmul_cost(gemm, dt, {})
    assert est.flops == blas.flops and est.overhead_ns < blas.overhead_ns
    assert nk._matmul_cost(batched, dt, {}).overhead_ns < matmul_cost(batched, dt, {}).overhead_ns
    monkeypatch.setattr(native, "simd_fma", lambda: False)  # the portable kernel: priced slow
    assert nk._matmul_cost(gemm, dt, {}).flops == blas.flops * nk.PORTABLE_SLOWDOWN


def test_attention_follows_the_products_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """Native attention over many queries runs on the packed GEMM: priced at the BLAS rate
    where a SIMD micro-kernel runs, like the GEMM's portable kernel elsewhere; one query (the
    flash kernel) at the BLAS rate everywhere."""
    from runtime.kernels.cpu.nn import attention_cost

    params = {"causal": True, "scale": 0.125}
    dt = ["f32"] * 4
    for sq, slow in ((64, nk.PORTABLE_SLOWDOWN), (1, 1.0)):
        shapes = [(1, 8, sq, 64), (1, 2, 64, 64), (1, 2, 64, 64), (1, 8, sq, 64)]
        blas = attention_cost(shapes, dt, params)
        monkeypatch.setattr(native, "simd_fma", lambda: True)
        est = nk._attention_cost(shapes, dt, params)
        assert est.flops == blas.flops and est.overhead_ns < blas.overhead_ns
        monkeypatch.setattr(native, "simd_fma", lambda: False)
        assert nk._attention_cost(shapes, dt, params).flops == blas.flops * slow


@pytest.mark.parametrize(
    ("hq", "hkv", "sq", "sk", "kv_len", "causal"),
    [
        (8, 2, 64, 256, 100, True),
        (4, 4, 33, 40, 40, False),
        (6, 2, 7, 300, 290, True),
        (2, 1, 5, 8, 2, True),
    ],
)
def test_attention_on_the_gemm_is_the_same_on_every_isa(
    hq: int, hkv: int, sq: int, sk: int, kv_len: int, causal: bool, isas: list[int]
) -> None:
    g = rng(hq * sq + kv_len)
    q = g.standard_normal((1, hq, sq, 16)).astype(F32)
    k, v = (g.standard_normal((1, hkv, sk, 16)).astype(F32) for _ in range(2))
    kernel, params = nk._attention_native(True), {"scale": 0.25, "causal": causal}
    outs = []
    for isa in isas:
        native.library().fuel_native_gemm_use_isa(isa)
        out = np.full((1, hq, sq, 16), np.nan, F32)
        kernel([q, k, v, np.array(kv_len)], [out], params)
        outs.append(out.tobytes())
    assert len(set(outs)) == 1


def test_gated_mlp_record_is_the_three_products_and_the_middle_pass() -> None:
    """`fuel_native_gated_packed` (one call: x packed once, silu * up per panel, the down
    product) has the bits of the FMA chains and `fuel_native_silu_mul` run one by one, with
    packed weights (a prepared kernel's program record) and with weights read in place."""
    g = rng(7)
    m, k, f, n = 20, 64, 100, 40  # a short last panel of the hidden width and of the output
    x = g.standard_normal((m, k)).astype(F32)
    wg, wu = (g.standard_normal((k, f)).astype(F32) * 0.1 for _ in range(2))
    wd = g.standard_normal((f, n)).astype(F32) * 0.1
    gate, up = ref_chain(x, wg), ref_chain(x, wu)
    native.library().fuel_native_silu_mul(native.ptr(gate), native.ptr(up), gate.size)
    want = ref_chain(gate, wd)
    kernel = nk._gated_mlp_native.prepare(
        [None, wg, wu, wd], [x.shape, wg.shape, wu.shape, wd.shape], {}, {}
    )
    got = np.full((m, n), np.nan, F32)
    record = kernel.encode([x, wg, wu, wd], [got], {})
    assert record is not None and record.words[0] == native.OP_GATED_PACKED
    fn, words, count = native.program([record])
    assert fn(words.ctypes.data, count) == -1
    assert got.tobytes() == want.tobytes()
    in_place = np.full((m, n), np.nan, F32)
    nk._gated_mlp_native([x, wg, wu, wd], [in_place], {})
    assert in_place.tobytes() == want.tobytes()
