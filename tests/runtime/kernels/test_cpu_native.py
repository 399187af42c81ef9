"""fuel's native C kernels (`runtime.native`, kernel_source `native`): numerics against
float64, the numpy fallbacks, bit-stability across thread counts, cost-based choice."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from runtime import native
from runtime.kernels import global_bindings
from runtime.kernels.cpu import native as nk
from runtime.kernels.cpu.fused import _gated_mlp
from runtime.kernels.cpu.linalg import matmul_cost

pytestmark = pytest.mark.skipif(not native.enabled(), reason="no C compiler (or FUEL_NATIVE=0)")

ROOT = Path(__file__).resolve().parents[3]
F32 = np.float32


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def normwise(got: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(got - ref).max() / max(1.0, np.abs(ref).max()))


def silu64(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


# (x shape, w shape): GEMV rows 1..7, k not a multiple of 8, n across chunk and line edges,
# weights below and above the parallel threshold, batch dims
GEMV = [
    ((1, 512), (512, 1408)),
    ((3, 1408), (1408, 512)),
    ((7, 100), (100, 33)),
    ((1, 5), (5, 3)),
    ((1, 1, 512), (512, 2048)),
    ((2, 3, 257), (257, 130)),
    ((1, 9), (9, 1)),
    ((1, 1000), (1000, 1000)),
]


@pytest.mark.parametrize(("xs", "ws"), GEMV)
def test_matmul_gemv_against_float64(xs: tuple[int, ...], ws: tuple[int, ...]) -> None:
    g = rng()
    x, w = g.standard_normal(xs).astype(F32), g.standard_normal(ws).astype(F32)
    out = np.full((*xs[:-1], ws[1]), np.nan, F32)
    nk._matmul_native([x, w], [out], {})
    ref = x.astype(np.float64) @ w.astype(np.float64)
    # blocked f32 summation: ~ (k/8 + 3) u of sum|x||w| per element; random data sits far below
    assert normwise(out, ref) < 2e-6 * np.sqrt(xs[-1] / 64 + 1)


# (x shape, w shape) with batched weights: attention's decode products, broadcast batch dims
# either side, rows on the GEMV path (< 8) and on the packed GEMM (8+, a short last panel)
BATCHED = [
    ((1, 8, 1, 64), (1, 8, 64, 128)),
    ((1, 8, 1, 128), (1, 8, 128, 64)),
    ((2, 5, 16), (2, 16, 8)),
    ((8, 64), (3, 64, 32)),
    ((4, 1, 3, 16), (1, 3, 16, 40)),
    ((1, 8, 13, 33), (1, 8, 33, 70)),
]


@pytest.mark.parametrize(("xs", "ws"), BATCHED)
def test_matmul_batched_weights_in_c(xs: tuple[int, ...], ws: tuple[int, ...]) -> None:
    """Batched weights take the C path (`fuel_native_gemm_batched`), so no product falls to
    numpy's BLAS pool: each matrix of the result has the bits of the 2-D native product of its
    operands (the same path for its rows), and the error bound of that path against float64;
    the program record computes the same bits; f64 still runs numpy's matmul."""
    g = rng(1)
    x, w = g.standard_normal(xs).astype(F32), g.standard_normal(ws).astype(F32)
    ref = np.matmul(x.astype(np.float64), w.astype(np.float64))
    out = np.full(ref.shape, np.nan, F32)
    nk._matmul_native([x, w], [out], {})
    bx, bw = (
        np.broadcast_to(x, (*ref.shape[:-2], *xs[-2:])),
        np.broadcast_to(w, ref.shape[:-2] + ws[-2:]),
    )
    for idx in np.ndindex(*ref.shape[:-2]):
        one = np.empty(ref.shape[-2:], F32)
        nk._matmul_native([np.ascontiguousarray(bx[idx]), np.ascontiguousarray(bw[idx])], [one], {})
        assert np.array_equal(out[idx], one)
    bound = np.matmul(np.abs(x).astype(np.float64), np.abs(w).astype(np.float64))
    assert (np.abs(out - ref) <= xs[-1] * 2.0**-24 * bound).all()
    again = np.zeros_like(out)
    entry, words, count = native.program([nk._encode_matmul([x, w], [again], {})])
    assert entry(native.ptr(words), count) == -1
    assert np.array_equal(again, out)
    x64, w64 = g.standard_normal((1, 16)), g.standard_normal((2, 16, 4))
    out64 = np.empty((2, 1, 4))
    nk._matmul_native([x64, w64], [out64], {})  # f64: numpy's path (C only runs f32)
    assert np.array_equal(out64, x64 @ w64)


def test_matmul_strided_operands_and_output() -> None:
    g = rng(2)
    x = g.standard_normal((4, 300)).astype(F32)[::2, ::2]  # (2, 150), strided
    w = g.standard_normal((150, 80)).astype(F32).T.copy().T  # F-ordered view
    out = np.zeros((2, 160), F32)[:, ::2]  # a strided output
    nk._matmul_native([x, w], [out], {})
    assert normwise(out, x.astype(np.float64) @ w.astype(np.float64)) < 1e-6
    want = np.empty((2, 80), F32)
    nk._matmul_native([np.ascontiguousarray(x), np.ascontiguousarray(w)], [want], {})
    assert np.array_equal(out, want)  # the path and the bits depend on shapes and values only


def test_gated_mlp_against_float64_and_numpy_kernel() -> None:
    g = rng(3)
    for m, k, f, n in [(1, 512, 1408, 512), (3, 64, 200, 48), (1, 8, 16, 8)]:
        x = g.standard_normal((1, m, k)).astype(F32)
        wg, wu = (g.standard_normal((k, f)).astype(F32) / np.sqrt(k) for _ in range(2))
        wd = g.standard_normal((f, n)).astype(F32) / np.sqrt(f)
        out = np.empty((1, m, n), F32)
        nk._gated_mlp_native([x, wg, wu, wd], [out], {})
        x64 = x.astype(np.float64)
        h = silu64(x64 @ wg.astype(np.float64)) * (x64 @ wu.astype(np.float64))
        ref = h @ wd.astype(np.float64)
        assert normwise(out, ref) < 4e-6
        numpy_out = np.empty_like(out)
        _gated_mlp("f32")([x, wg, wu, wd], [numpy_out], {})
        assert normwise(out, numpy_out.astype(np.float64)) < 4e-6


def test_gated_mlp_many_rows_is_its_steps_bit_for_bit() -> None:
    """Prefill rows: the three products on the packed GEMM and a C silu * up that rounds
    exactly like numpy's f64 silu."""
    from runtime.kernels.cpu.activations import f32_activations

    g = rng(4)
    x = g.standard_normal((16, 32)).astype(F32)
    ws = [g.standard_normal(s).astype(F32) for s in ((32, 48), (32, 48), (48, 24))]
    got = np.empty((16, 24), F32)
    nk._gated_mlp_native([x, *ws], [got], {})
    gate, up, want = np.empty((16, 48), F32), np.empty((16, 48), F32), np.empty((16, 24), F32)
    nk._matmul_native([x, ws[0]], [gate], {})
    nk._matmul_native([x, ws[1]], [up], {})
    f32_activations()["silu"](gate, gate)
    gate *= up
    nk._matmul_native([gate, ws[2]], [want], {})
    assert np.array_equal(got, want)


def test_silu_mul_rounds_like_the_numpy_silu() -> None:
    from runtime.kernels.cpu.activations import f32_activations

    g = rng(13)
    x = np.concatenate(
        [
            g.standard_normal(200_000) * 8,
            g.standard_normal(200_000) * 200,
            [
                0.0,
                -0.0,
                np.inf,
                -np.inf,
                np.nan,
                88.7,
                -88.7,
                -745.0,
                -700.5,
                -699.9,
                1e-40,
                -1e-40,
                3e38,
                -3e38,
            ],
        ]
    ).astype(F32)
    u = g.standard_normal(x.size).astype(F32)
    got = x.copy()
    native.library().fuel_native_silu_mul(native.ptr(got), native.ptr(u), got.size)
    want = x.copy()
    f32_activations()["silu"](want, want)
    want *= u
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("shape", [(1, 1, 512), (5, 768), (3000, 64), (2, 3, 7)])
def test_rms_norm_against_float64(shape: tuple[int, ...]) -> None:
    g = rng(5)
    x = (g.standard_normal(shape) * 3).astype(F32)
    w = g.standard_normal(shape[-1]).astype(F32)
    out = np.empty_like(x)
    nk._rms_norm_native([x, w], [out], {"eps": 1e-5})
    x64 = x.astype(np.float64)
    ref = x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-5) * w
    # two f32 roundings per element (x * inv, then * w) plus inv's own: <= 3 ulp-ish of |ref|
    assert np.all(np.abs(out - ref) <= 4 * np.finfo(F32).eps * np.abs(ref) + 1e-30)


def test_rms_norm_specials_and_empty() -> None:
    x = np.array([[0.0, 0.0], [np.inf, 1.0], [np.nan, 1.0]], F32)
    out = np.empty_like(x)
    nk._rms_norm_native([x, np.ones(2, F32)], [out], {"eps": 1e-6})
    assert np.array_equal(out[0], [0.0, 0.0])
    assert np.isnan(out[1, 0]) or out[1, 0] == np.inf  # inf / sqrt(inf): numpy gives nan too
    assert np.isnan(out[2]).all()
    empty = np.empty((0, 4), F32)
    nk._rms_norm_native([empty, np.ones(4, F32)], [np.empty_like(empty)], {"eps": 1e-6})


_BITS_SCRIPT = """
import hashlib, numpy as np
from runtime.kernels.cpu import native as nk
g = np.random.default_rng(7)
h = hashlib.sha256()
for m, k, n in [(1, 512, 1408), (5, 1000, 777), (2, 64, 4096), (40, 300, 200), (13, 64, 4096)]:
    x = g.standard_normal((m, k)).astype(np.float32)
    w = g.standard_normal((k, n)).astype(np.float32)
    y = np.empty((m, n), np.float32)
    nk._matmul_native([x, w], [y], {})
    h.update(y.tobytes())
x = g.standard_normal((1, 256)).astype(np.float32)
ws = [g.standard_normal(s).astype(np.float32) for s in ((256, 2048), (256, 2048), (2048, 256))]
y = np.empty((1, 256), np.float32)
nk._gated_mlp_native([x, *ws], [y], {})
h.update(y.tobytes())
x = g.standard_normal((4000, 96)).astype(np.float32)
y = np.empty_like(x)
nk._rms_norm_native([x, np.ones(96, np.float32)], [y], {"eps": 1e-5})
h.update(y.tobytes())
q = g.standard_normal((1, 32, 1, 64)).astype(np.float32)
k, v = (g.standard_normal((1, 8, 512, 64)).astype(np.float32) for _ in range(2))
y = np.empty_like(q)
nk._flash_decode_native(True)([q, k, v, np.array(300)], [y], {"scale": 0.125, "causal": False})
h.update(y.tobytes())
q = g.standard_normal((1, 32, 40, 64)).astype(np.float32)
y = np.empty_like(q)
nk._attention_native(True)([q, k, v, np.array(300)], [y], {"scale": 0.125, "causal": True})
h.update(y.tobytes())
mask = np.where(g.random((1, 1, 40, 512)) < 0.2, -np.inf, 0.0).astype(np.float32)
nk._attention_native(False, with_mask=True)([q, k, v, mask], [y], {"scale": 0.125, "causal": False})
h.update(y.tobytes())
print(h.hexdigest())
"""


def test_bits_do_not_depend_on_the_thread_count() -> None:
    """One thread, two (the prefill attention's 8 kv groups split evenly: a group per thread)
    and three (uneven: each group's products on the pool): the same bits."""
    digests = set()
    for n in ("1", "2", "3"):
        res = subprocess.run(
            [sys.executable, "-c", _BITS_SCRIPT],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={"PATH": "/usr/bin:/bin", "FUEL_NUM_THREADS": n, "HOME": str(Path.home())},
            timeout=120,
        )
        assert res.returncode == 0, res.stderr
        digests.add(res.stdout.strip())
    assert len(digests) == 1


def test_concurrent_callers_get_their_own_results() -> None:
    g = rng(8)
    w = g.standard_normal((512, 1024)).astype(F32)
    xs = [g.standard_normal((1, 512)).astype(F32) for _ in range(4)]
    want = [x @ w for x in xs]
    errors: list[str] = []

    def work(i: int) -> None:
        out = np.empty((1, 1024), F32)
        for _ in range(50):
            nk._matmul_native([xs[i], w], [out], {})
            if normwise(out, want[i]) > 1e-5:
                errors.append(f"thread {i}")
                return

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_bad_thread_count_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUEL_NUM_THREADS", "two")
    with pytest.raises(ValueError, match="FUEL_NUM_THREADS must be an integer"):
        native.threads()


def test_costs_choose_native_for_every_f32_product() -> None:
    """2-D and batched weights both cost one C call (below numpy's BLAS call); a vector
    operand runs numpy's code, one frame above it."""
    dt = ["f32"] * 3
    gemv = [(1, 1, 512), (512, 1408), (1, 1, 1408)]
    batched = [(2, 64, 512), (2, 512, 1408), (2, 64, 1408)]
    vector = [(512,), (2, 512, 1408), (2, 1408)]
    for shapes in (gemv, batched):
        assert nk._matmul_cost(shapes, dt, {}).overhead_ns < matmul_cost(shapes, dt, {}).overhead_ns
    assert nk._matmul_cost(vector, dt, {}).overhead_ns > matmul_cost(vector, dt, {}).overhead_ns


def test_registered_after_numpy_with_the_c_source_in_the_revision() -> None:
    table = global_bindings()
    for op, n in (("matmul", 3), ("gated_mlp", 5), ("rms_norm", 3)):
        sources = [e.kernel_source for e in table.lookup_alternatives(op, ("f32",) * n, "cpu")]
        assert "native" in sources and sources.index("native") > sources.index("numpy")
    entry = next(
        e
        for e in table.lookup_alternatives("rms_norm", ("f32",) * 3, "cpu")
        if e.kernel_source == "native"
    )
    assert entry.revision_hash != 0 and entry.precision.bit_stable


def attention64(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    kv_len: int,
    causal: bool,
    scale: float,
    mask: np.ndarray | float = 0.0,
) -> np.ndarray:
    """float64 reference of fuel.attention (GQA by repeating kv heads; `mask` additive)."""
    g = q.shape[1] // k.shape[1]
    k, v = (np.repeat(a.astype(np.float64), g, axis=1) for a in (k, v))
    s = q.astype(np.float64) @ k.swapaxes(-1, -2) * scale + mask
    sq, sk = s.shape[-2:]
    j, i = np.arange(sk)[None, :], np.arange(sq)[:, None]
    valid = (j < kv_len) & ((j <= i + kv_len - sq) if causal else True)
    s = np.where(valid, s, -np.inf)
    m = s.max(-1, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    e = np.exp(s - m)
    denom = e.sum(-1, keepdims=True)
    denom[denom == 0] = 1.0
    return e @ v / denom


@pytest.mark.parametrize(
    ("b", "hq", "hkv", "sk", "d", "kv_len"),
    [
        (1, 8, 2, 256, 64, 65),
        (2, 4, 4, 10, 16, 3),
        (1, 2, 1, 5, 8, 0),
        (1, 12, 4, 512, 64, 512),
        (1, 4, 2, 33, 24, 99),
        (1, 4, 1, 1100, 32, 1030),
        (2, 2, 2, 600, 16, 257),
    ],
)
def test_flash_decode_against_float64(
    b: int, hq: int, hkv: int, sk: int, d: int, kv_len: int
) -> None:
    g = rng(9)
    q = g.standard_normal((b, hq, 1, d)).astype(F32)
    k, v = (g.standard_normal((b, hkv, sk, d)).astype(F32) for _ in range(2))
    out = np.full((b, hq, 1, d), np.nan, F32)
    params = {"scale": 1 / np.sqrt(d), "causal": True}  # one query: causal keeps every live key
    nk._flash_decode_native(True)([q, k, v, np.array(kv_len)], [out], params)
    ref = attention64(q, k, v, min(max(kv_len, 0), sk), False, params["scale"])
    assert normwise(out, ref) < 1e-6
    full = np.empty_like(out)
    nk._flash_decode_native(False)([q, k, v], [full], params)
    assert normwise(full, attention64(q, k, v, sk, False, params["scale"])) < 1e-6


@pytest.mark.parametrize(
    ("b", "hq", "hkv", "sq", "sk", "d", "kv_len", "causal"),
    [
        (1, 8, 2, 64, 256, 64, 64, True),
        (1, 8, 2, 64, 256, 64, 100, True),
        (2, 6, 2, 5, 40, 16, 30, False),
        (1, 4, 4, 9, 12, 8, 4, True),
        (1, 4, 1, 300, 600, 32, 590, True),
        (1, 2, 2, 3, 8, 8, 0, False),
        (1, 3, 1, 7, 7, 16, 7, False),
    ],
)
def test_attention_any_query_count_against_float64(
    b: int, hq: int, hkv: int, sq: int, sk: int, d: int, kv_len: int, causal: bool
) -> None:
    """Prefill shapes: causal rows see i + kv_len - sq + 1 keys (none: zeros), splits past
    256 live keys, grouped-query heads; as float64 would, to 1e-6 normwise."""
    g = rng(10)
    q = g.standard_normal((b, hq, sq, d)).astype(F32)
    k, v = (g.standard_normal((b, hkv, sk, d)).astype(F32) for _ in range(2))
    params = {"scale": 1 / np.sqrt(d), "causal": causal}
    out = np.full((b, hq, sq, d), np.nan, F32)
    nk._attention_native(True)([q, k, v, np.array(kv_len)], [out], params)
    assert normwise(out, attention64(q, k, v, kv_len, causal, params["scale"])) < 1e-6
    full = np.full_like(out, np.nan)
    nk._attention_native(False)([q, k, v], [full], params)
    assert normwise(full, attention64(q, k, v, sk, causal, params["scale"])) < 1e-6
    one = np.empty((b, hq, 1, d), F32)  # one query: the decode kernel's bits
    nk._attention_native(True)([q[:, :, :1], k, v, np.array(kv_len)], [one], params)
    dec = np.empty_like(one)
    nk._flash_decode_native(True)([q[:, :, :1], k, v, np.array(kv_len)], [dec], params)
    assert one.tobytes() == dec.tobytes()


@pytest.mark.parametrize(
    ("hq", "hkv", "sq", "sk", "causal", "masked"),
    [(8, 8, 128, 128, False, True), (4, 2, 9, 12, True, False), (6, 2, 5, 40, False, True)],
)
def test_attention_reads_transposed_views_as_their_dense_copies(
    hq: int, hkv: int, sq: int, sk: int, causal: bool, masked: bool
) -> None:
    """q, k, v as [b, s, h, d] products transposed to [b, h, s, d] (numpy views): the kernel
    reads them at their strides (`KernelCaps.strided_rows`), and writes an output so viewed
    (`strided_out_rows`), the bits of their dense copies; grouped-query heads and a kernel
    without a mask too."""
    g, d, b = rng(12), 16, 2
    q = g.standard_normal((b, sq, hq, d)).astype(F32).transpose(0, 2, 1, 3)
    k, v = (g.standard_normal((b, sk, hkv, d)).astype(F32).transpose(0, 2, 1, 3) for _ in "kv")
    mask = [np.where(g.random((b, 1, sq, sk)) < 0.2, -np.inf, 0.5).astype(F32)] if masked else []
    kernel = nk._attention_native(False, with_mask=masked)
    params = {"scale": 0.3, "causal": causal}
    got, want = (np.full((b, hq, sq, d), np.nan, F32) for _ in range(2))
    kernel([q, k, v, *mask], [got], params)
    kernel([np.ascontiguousarray(a) for a in (q, k, v)] + mask, [want], params)
    assert got.tobytes() == want.tobytes() and np.isfinite(got).all()
    # the output written at its strides too: [b, s, h, d] seen as [b, h, s, d]
    back = np.full((b, sq, hq, d), np.nan, F32)
    kernel([q, k, v, *mask], [back.transpose(0, 2, 1, 3)], params)
    assert back.tobytes() == np.ascontiguousarray(want.transpose(0, 2, 1, 3)).tobytes()
    ref = attention64(*(np.ascontiguousarray(a) for a in (q, k, v)), sk, causal, 0.3)
    assert masked or normwise(got, ref) < 1e-6
    entry = next(
        e
        for e in global_bindings().lookup_alternatives("attention", ("f32",) * (4 + masked), "cpu")
        if e.kernel_source == nk.NATIVE
    )
    assert entry.caps.strided_rows and entry.caps.strided_out_rows


def test_flash_decode_refuses_prefill() -> None:
    q = np.zeros((1, 2, 3, 8), F32)
    k = np.zeros((1, 2, 3, 8), F32)
    with pytest.raises(ValueError, match="one query per head"):
        nk._flash_decode_native(False)([q, k, k], [np.empty_like(q)], {"scale": 1.0})
    shapes = [(1, 2, 3, 8)] * 4
    assert nk._flash_native_cost(shapes, ["f32"] * 4, {}).overhead_ns == float("inf")


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_is_the_numpy_kernel_bit_for_bit(interleaved: bool) -> None:
    from runtime.kernels.cpu.nn import _rope

    g = rng(11)
    for shape in [(1, 8, 1, 64), (2, 3, 5, 16), (2, 4, 6, 8), (7, 2)]:
        x = g.standard_normal(shape).astype(F32)
        c, s = (g.standard_normal((shape[-2], shape[-1] // 2)).astype(F32) for _ in range(2))
        got, want = np.empty_like(x), np.empty_like(x)
        params = {"interleaved": interleaved}
        nk._rope_native([x, c, s], [got], params)
        _rope(np.dtype(np.float64))([x, c, s], [want], params)
        assert np.array_equal(got, want)
        # tables as slices of full-width ones (the exporters' cos/sin): read in place, and so
        # as a program record
        wide = [np.concatenate([t, t], axis=-1) for t in (c, s)]
        halves = [t[:, : shape[-1] // 2] for t in wide]
        got[...] = np.nan
        nk._rope_native([x, *halves], [got], params)
        assert np.array_equal(got, want)
        got[...] = np.nan
        fn, words, n = native.program([nk._encode_rope([x, *halves], [got], params)])
        assert fn(words.ctypes.data, n) == -1 and np.array_equal(got, want)
        if len(shape) != 4:
            continue
        # x as a transposed view ([b, s, h, d] read as [b, h, s, d]): read at its strides
        xt = np.ascontiguousarray(x.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
        got[...] = np.nan
        nk._rope_native([xt, c, s], [got], params)
        assert np.array_equal(got, want)
        got[...] = np.nan
        fn, words, n = native.program([nk._encode_rope([xt, *halves], [got], params)])
        assert fn(words.ctypes.data, n) == -1 and np.array_equal(got, want)


def _child_gemv(q: object) -> None:
    g = rng(12)
    x, w = g.standard_normal((1, 512)).astype(F32), g.standard_normal((512, 1408)).astype(F32)
    out = np.empty((1, 1408), F32)
    nk._matmul_native([x, w], [out], {})
    q.put(normwise(out, x.astype(np.float64) @ w.astype(np.float64)))  # type: ignore[attr-defined]


def test_a_forked_child_runs_on_its_own_thread() -> None:
    import multiprocessing as mp

    _child_gemv(queue := __import__("queue").Queue())  # the pool is up in this process
    assert queue.get() < 1e-6
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_gemv, args=(q,))
    p.start()
    p.join(60)
    assert p.exitcode == 0 and q.get(timeout=5) < 1e-6


def test_a_broken_compiler_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from runtime.loaders.c import CodegenError

    monkeypatch.setenv("FUEL_CACHE_DIR", str(tmp_path))  # nothing cached: it must compile
    monkeypatch.setenv("CC", "false")  # runs, fails
    monkeypatch.setattr(native, "_LIB", [])
    with pytest.raises(CodegenError, match="(?s)C compile failed.*FUEL_NATIVE=0"):
        native.library()


def additive_mask(g: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """0, moderate negatives and -inf; the first query row all -inf where there are rows."""
    m = np.where(g.random(shape) < 0.3, -np.inf, g.uniform(-3, 0, shape)).astype(F32)
    if len(shape) >= 2 and shape[-2] > 1:
        m[..., 0, :] = -np.inf
    return m


@pytest.mark.parametrize(
    ("b", "hq", "hkv", "sq", "sk", "mshape", "causal"),
    [
        (1, 8, 2, 64, 64, (1, 1, 64, 64), True),  # prefill, mask over batch and heads
        (2, 4, 2, 5, 40, (2, 4, 5, 40), False),  # a mask per head
        (1, 8, 8, 1, 700, (1, 1, 1, 700), False),  # decode over three splits
        (2, 4, 1, 3, 9, (9,), False),  # a key mask only
    ],
)
def test_attention_mask_against_float64(
    b: int, hq: int, hkv: int, sq: int, sk: int, mshape: tuple[int, ...], causal: bool
) -> None:
    """The additive mask operand, added to the scaled scores (read in place by strides); rows
    all -inf are zeros; as float64 would, to 1e-6 normwise."""
    g = rng(11)
    q = g.standard_normal((b, hq, sq, 32)).astype(F32)
    k, v = (g.standard_normal((b, hkv, sk, 32)).astype(F32) for _ in range(2))
    mask = additive_mask(g, mshape)
    params = {"scale": 0.125, "causal": causal}
    out = np.full((b, hq, sq, 32), np.nan, F32)
    nk._attention_native(False, with_mask=True)([q, k, v, mask], [out], params)
    ref = attention64(q, k, v, sk, causal, 0.125, mask.astype(np.float64))
    assert normwise(out, ref) < 1e-6
    if len(mshape) >= 2 and sq > 1:
        assert not out[:, :, 0].any()  # the all -inf row


@pytest.mark.parametrize("fill", [-np.inf, np.finfo(np.float32).min])
def test_attention_causal_mask_written_out_is_the_causal_flag(fill: float) -> None:
    """A causal mask written out (0 on and below the diagonal, -inf or the lowest float above:
    what exporters write) gives the bits of the `causal` flag: the masked future is cut before
    scoring and its weights are 0. Scores with a wide spread trim keys of no weight inside a
    row too: still float64's values."""
    g = rng(12)
    b, hq, hkv, s, d = 1, 8, 2, 48, 32
    q = g.standard_normal((b, hq, s, d)).astype(F32)
    k, v = (g.standard_normal((b, hkv, s, d)).astype(F32) for _ in range(2))
    k[:, :, s // 2 :] *= 60.0  # later keys: weights that underflow next to the largest
    mask = np.where(np.tril(np.ones((s, s), bool)), 0.0, fill).astype(F32)[None, None]
    params = {"scale": 0.125, "causal": False}
    written, flag = (np.full((b, hq, s, d), np.nan, F32) for _ in range(2))
    nk._attention_native(False, with_mask=True)([q, k, v, mask], [written], params)
    nk._attention_native(False)([q, k, v], [flag], {**params, "causal": True})
    assert np.array_equal(written, flag)
    ref = attention64(q, k, v, s, True, 0.125)
    assert normwise(written, ref) < 1e-5  # scores ~40: f32 rounding of the logits, not trimming


def test_attention_lowest_fill_keeps_fully_masked_rows_and_nans() -> None:
    """A padded causal mask filled with the lowest float (torch.finfo.min): rows whose keys
    are all masked out are uniform over every key, as the unfused graph's softmax makes them
    (the cut future is put back); a NaN query (its logits all NaN: the NaN guard's zeros)
    spoils its own row only, and the rows of its kv group keep their bits uncut."""
    g = rng(13)
    b, hq, hkv, s, d = 1, 4, 2, 12, 16
    q = g.standard_normal((b, hq, s, d)).astype(F32)
    k, v = (g.standard_normal((b, hkv, s, d)).astype(F32) for _ in range(2))
    keep = np.tril(np.ones((s, s), bool)) & (np.arange(s) >= 3)  # keys 0-2 padded
    mask = np.where(keep, 0.0, np.finfo(F32).min).astype(F32)[None, None]
    params = {"scale": 0.25, "causal": False}
    out = np.full(q.shape, np.nan, F32)
    kernel = nk._attention_native(False, with_mask=True)
    kernel([q, k, v, mask], [out], params)
    ref = attention64(q, k, v, s, False, 0.25, mask.astype(np.float64))
    assert normwise(out, ref) < 1e-6
    uniform = np.repeat(v.astype(np.float64).mean(axis=2, keepdims=True), hq // hkv, axis=1)
    assert np.allclose(out[:, :, :3], uniform, atol=1e-6)
    q[0, 1, 5] = np.nan
    spoiled = np.full(q.shape, np.nan, F32)
    kernel([q, k, v, mask], [spoiled], params)
    assert not spoiled[0, 1, 5].any()
    assert np.array_equal(spoiled[:, 2:], out[:, 2:]) and np.array_equal(spoiled[:, 0], out[:, 0])
