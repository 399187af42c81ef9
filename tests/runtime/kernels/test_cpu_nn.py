"""Semantics of the accumulating kernels: reductions, softmax, matmul, norms, rope, attention.

Values against float64 references for every dtype are in test_cpu_precision.py; these tests pin
the documented semantics (shapes, params, masking, layouts) and the f32 accumulation of f16/bf16.
"""

from __future__ import annotations

import numpy as np
import pytest

from runtime.dtypes import FLOAT_DTYPES, NUMPY_DTYPES
from runtime.kernels.cpu.library import hand_registered_table

F = FLOAT_DTYPES


TABLE = hand_registered_table()


def run(op: str, dtypes: tuple[str, ...], inputs, out_shape, params=None) -> np.ndarray:
    out = np.full(out_shape, 5, NUMPY_DTYPES[dtypes[-1]])
    TABLE.lookup_with_caps(op, dtypes, "cpu").kernel(list(inputs), [out], params or {})
    return out


def randn(t: str, shape, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(NUMPY_DTYPES[t])


# -- reductions ---------------------------------------------------------------------------------


def test_reduction_shapes_and_identity() -> None:
    x = randn("f32", (3, 4, 5))
    got = run("reduce_sum", ("f32", "f32"), [x], (1, 4, 1), {"axes": (0, 2), "keepdim": True})
    np.testing.assert_allclose(got, x.sum(axis=(0, 2), keepdims=True), rtol=1e-6)
    same = run("reduce_max", ("f32", "f32"), [x], x.shape, {"axes": (), "keepdim": False})
    np.testing.assert_array_equal(same, x)


def test_integer_sum_wraps() -> None:
    x = np.array([[100, 100, 100]], np.int8)
    got = run("reduce_sum", ("i8", "i8"), [x], (1,), {"axes": (1,), "keepdim": False})
    assert got.tolist() == [44]  # 300 mod 256
    u = np.full((1, 3), 200, np.uint8)
    got = run("reduce_sum", ("u8", "u8"), [u], (1,), {"axes": (1,), "keepdim": False})
    assert got.tolist() == [88]  # 600 mod 256


@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_half_sums_accumulate_in_f32(t: str) -> None:
    """3000 ones: an f16/bf16 accumulator stalls at 2048/256; f32 gives the exact 3000 (which
    f16 holds exactly and bf16 rounds to 2992)."""
    x = np.ones((1, 3000), NUMPY_DTYPES[t])
    got = run("reduce_sum", (t, t), [x], (1,), {"axes": (1,), "keepdim": False}).astype(np.float64)
    assert got[0] == float(np.array(3000.0).astype(NUMPY_DTYPES[t]))
    mean = run("reduce_mean", (t, t), [x], (1,), {"axes": (1,), "keepdim": False})
    assert float(mean[0]) == 1.0
    mm = run("matmul", (t, t, t), [x, x.T.copy()], (1, 1)).astype(np.float64)
    assert mm[0, 0] == got[0]


@pytest.mark.parametrize("t", F)
def test_float_sum_is_layout_independent(t: str) -> None:
    x = randn(t, (64, 33), 1)
    params = {"axes": (0,), "keepdim": False}
    dense = run("reduce_sum", (t, t), [np.ascontiguousarray(x)], (33,), params)
    strided = run("reduce_sum", (t, t), [np.asfortranarray(x)], (33,), params)
    assert dense.tobytes() == strided.tobytes()


# -- softmax ------------------------------------------------------------------------------------


@pytest.mark.parametrize("t", F)
def test_softmax_is_stable_and_normalised(t: str) -> None:
    x = np.array([[1000.0, 1004.0, 996.0], [-1e4, -1e4, -1e4]]).astype(NUMPY_DTYPES[t])
    with np.errstate(over="raise", invalid="raise"):
        got = run("softmax", (t, t), [x], x.shape, {"axis": 1}).astype(np.float64)
    e = np.exp(np.array([0.0, 4.0, -4.0]))
    np.testing.assert_allclose(got[0], e / e.sum(), rtol=1e-2)
    np.testing.assert_allclose(got[1], [1 / 3] * 3, rtol=1e-2)
    cols = run("softmax", (t, t), [np.ascontiguousarray(x.T)], (3, 2), {"axis": 0})
    np.testing.assert_array_equal(cols.T.astype(np.float64), got)


# -- matmul -------------------------------------------------------------------------------------


@pytest.mark.parametrize("t", [*F, "i64", "i32"])
def test_matmul_broadcasts_batch_dims_and_reads_views(t: str) -> None:
    rng = np.random.default_rng(2)
    a = rng.integers(-4, 5, (2, 1, 3, 4)).astype(NUMPY_DTYPES[t])
    b = rng.integers(-4, 5, (5, 6, 4)).astype(NUMPY_DTYPES[t])  # read transposed below
    got = run("matmul", (t, t, t), [a, b.swapaxes(1, 2)], (2, 5, 3, 6))
    want = np.matmul(a.astype(np.int64), b.swapaxes(1, 2).astype(np.int64))
    np.testing.assert_array_equal(got.astype(np.int64), want)  # small ints: exact everywhere


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_blas_matmul_is_bit_stable(t: str) -> None:
    """Big enough for OpenBLAS to thread: repeat runs and transposed views agree bitwise."""
    a, b = randn(t, (192, 320), 19), randn(t, (320, 160), 20)
    first = run("matmul", (t, t, t), [a, b], (192, 160))
    assert run("matmul", (t, t, t), [a, b], (192, 160)).tobytes() == first.tobytes()
    view = run("matmul", (t, t, t), [np.asfortranarray(a), b], (192, 160))
    assert view.tobytes() == first.tobytes()


def test_integer_matmul_wraps() -> None:
    a = np.array([[2**30, 2**30]], np.int32)
    got = run("matmul", ("i32",) * 3, [a, np.array([[2], [2]], np.int32)], (1, 1))
    assert got.tolist() == [[0]]  # 2^32 mod 2^32


# -- norms --------------------------------------------------------------------------------------


@pytest.mark.parametrize("t", F)
def test_rms_and_layer_norm_formulas(t: str) -> None:
    x = randn(t, (2, 3, 8), 3, 2.0)
    w, b = randn(t, (8,), 4), randn(t, (8,), 5)
    xf, wf, bf = (a.astype(np.float64) for a in (x, w, b))
    tol = {"f64": 1e-12, "f32": 1e-5, "f16": 4e-3, "bf16": 3e-2}[t]
    rms = run("rms_norm", (t,) * 3, [x.transpose(1, 0, 2), w], (3, 2, 8), {"eps": 1e-6})
    want = xf / np.sqrt((xf**2).mean(-1, keepdims=True) + 1e-6) * wf
    np.testing.assert_allclose(rms.astype(np.float64), want.transpose(1, 0, 2), rtol=tol, atol=tol)
    ln = run("layer_norm", (t,) * 4, [x, w, b], x.shape, {"eps": 1e-6})
    want = (xf - xf.mean(-1, keepdims=True)) / np.sqrt(xf.var(-1, keepdims=True) + 1e-6) * wf + bf
    np.testing.assert_allclose(ln.astype(np.float64), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("t", F)
@pytest.mark.parametrize("d", [37, 64, 100, 768])
def test_layer_norm_of_a_constant_row_is_the_bias(t: str, d: int) -> None:
    """The corrected two-pass mean is exactly a constant row's value, so x - mean is 0 and the
    result is the bias, bit for bit (a plain f32 mean was off by ~1e-5 and the result by up to
    0.17 at -1234.567)."""
    x = np.array([0.1, 3.3, -1234.567, 1e-3, 65000.0])[:, None].repeat(d, 1)
    x = x.astype(NUMPY_DTYPES[t])
    w, b = randn(t, (d,), 1), randn(t, (d,), 2)
    got = run("layer_norm", (t,) * 4, [x, w, b], x.shape, {"eps": 1e-5})
    np.testing.assert_array_equal(got, np.broadcast_to(b, x.shape))


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_layer_norm_of_a_constant_row_matches_torch(t: str) -> None:
    """torch's CPU layer_norm returns the bias exactly for a constant row too."""
    torch = pytest.importorskip("torch")  # optional: the reference where installed
    x = np.full((3, 37), 3.3, NUMPY_DTYPES[t])
    w, b = randn(t, (37,), 1), randn(t, (37,), 2)
    got = run("layer_norm", (t,) * 4, [x, w, b], x.shape, {"eps": 1e-5})
    ref = torch.nn.functional.layer_norm(
        torch.from_numpy(x), (37,), torch.from_numpy(w), torch.from_numpy(b), 1e-5
    )
    np.testing.assert_array_equal(got, ref.numpy())


# -- rope ---------------------------------------------------------------------------------------


def test_rope_layouts_by_hand() -> None:
    x = np.array([[1.0, 2.0, 3.0, 4.0]])
    c, s = np.array([[0.5, 0.25]]), np.array([[0.75, 0.125]])
    half = run("rope", ("f64",) * 4, [x, c, s], (1, 4), {"interleaved": False})
    np.testing.assert_array_equal(
        half, [[1 * 0.5 - 3 * 0.75, 2 * 0.25 - 4 * 0.125, 3 * 0.5 + 1 * 0.75, 4 * 0.25 + 2 * 0.125]]
    )
    inter = run("rope", ("f64",) * 4, [x, c, s], (1, 4), {"interleaved": True})
    want = [1 * 0.5 - 2 * 0.75, 2 * 0.5 + 1 * 0.75, 3 * 0.25 - 4 * 0.125, 4 * 0.25 + 3 * 0.125]
    np.testing.assert_array_equal(inter, [want])


@pytest.mark.parametrize("t", F)
def test_rope_layouts_agree_up_to_a_permutation(t: str) -> None:
    """Interleaved rope on x equals half-split rope on x with its pairs de-interleaved."""
    x = randn(t, (2, 3, 5, 8), 6)
    ang = np.random.default_rng(7).uniform(-3, 3, (5, 4))
    c, s = np.cos(ang).astype(x.dtype), np.sin(ang).astype(x.dtype)
    perm = np.r_[0:8:2, 1:8:2]
    inter = run("rope", (t,) * 4, [x, c, s], x.shape, {"interleaved": True})
    half = run("rope", (t,) * 4, [x[..., perm], c, s], x.shape, {"interleaved": False})
    assert inter[..., perm].tobytes() == half.tobytes()


# -- attention ----------------------------------------------------------------------------------


def attn(t: str, q, k, v, causal: bool, kv_len: int | None = None, scale: float = 0.5):
    params = {"causal": causal, "scale": scale}
    shape = q.shape[:3] + v.shape[-1:]
    if kv_len is None:
        return run("attention", (t,) * 4, [q, k, v], shape, params).astype(np.float64)
    ins = [q, k, v, np.array(kv_len, np.int64)]
    return run("attention", (t, t, t, "i64", t), ins, shape, params).astype(np.float64)


@pytest.mark.parametrize("t", F)
def test_gqa_head_mapping(t: str) -> None:
    """Query head h reads kv head h // (Hq / Hkv): constant values per kv head show which."""
    q, k = randn(t, (1, 6, 2, 4), 8), randn(t, (1, 3, 5, 4), 9)
    v = np.broadcast_to(np.array([1.0, 2.0, 3.0])[None, :, None, None], (1, 3, 5, 2))
    got = attn(t, q, k, v.astype(NUMPY_DTYPES[t]), causal=False)
    np.testing.assert_allclose(got[0, :, 0, 0], [1, 1, 2, 2, 3, 3], rtol=1e-2)


@pytest.mark.parametrize("t", F)
def test_kv_len_masks_keys_and_decode_sees_all_live_keys(t: str) -> None:
    q, k, v = randn(t, (2, 4, 1, 8), 10), randn(t, (2, 2, 7, 8), 11), randn(t, (2, 2, 7, 3), 12)
    base = attn(t, q, k[:, :, :5], v[:, :, :5], causal=False)
    junk_k, junk_v = k.copy(), v.copy()
    junk_k[:, :, 5:], junk_v[:, :, 5:] = 1e4, -1e4  # dead keys: must not matter
    assert np.array_equal(attn(t, q, junk_k, junk_v, causal=True, kv_len=5), base)
    assert np.array_equal(attn(t, q, k, v, causal=False, kv_len=7), attn(t, q, k, v, False))


@pytest.mark.parametrize("t", F)
def test_causal_is_bottom_right_aligned_and_empty_rows_are_zero(t: str) -> None:
    q, k, v = randn(t, (1, 2, 3, 4), 13), randn(t, (1, 1, 3, 4), 14), randn(t, (1, 1, 3, 2), 15)
    first_v = np.broadcast_to(v[0, 0, 0].astype(np.float64), (2, 2))
    got = attn(t, q, k, v, causal=True)
    np.testing.assert_array_equal(got[0, :, 0], first_v)  # query 0 of 3 sees key 0 only
    # kv_len 2 with 3 queries: query 0 may see keys j <= 0 + 2 - 3 = -1: none -> zeros
    short = attn(t, q, k, v, causal=True, kv_len=2)
    assert not short[0, :, 0].any()
    np.testing.assert_array_equal(short[0, :, 1], first_v)
    assert not attn(t, q, k, v, causal=False, kv_len=0).any()


@pytest.mark.parametrize("t", F)
def test_attention_reads_bshd_views_bitwise(t: str) -> None:
    """q stored (B, S, H, D) and viewed as (B, H, S, D): same bits as a dense q."""
    q = randn(t, (2, 3, 4, 8), 16).transpose(0, 2, 1, 3)
    k, v = randn(t, (2, 2, 3, 8), 17), randn(t, (2, 2, 3, 8), 18)
    dense = attn(t, np.ascontiguousarray(q), k, v, causal=True)
    assert attn(t, q, k, v, causal=True).tobytes() == dense.tobytes()


@pytest.mark.parametrize("t", F)
def test_attention_mask_is_added_to_the_scaled_scores(t: str) -> None:
    """The mask operand: 0 keeps, -inf masks (a row all -inf is zero, as the NaN guard makes
    it), finite values shift; the same as the scores shifted by hand."""
    q, k, v = randn(t, (1, 4, 3, 8), 19), randn(t, (1, 2, 5, 8), 20), randn(t, (1, 2, 5, 4), 21)
    mask = np.zeros((1, 1, 3, 5))
    mask[0, 0, 0] = -np.inf  # query 0: no key
    mask[0, 0, 1, 2:] = -np.inf  # query 1: keys 0 and 1
    mask[0, 0, 2] = [0.0, -1.0, 0.0, -2.0, 0.0]
    ins = [q, k, v, mask.astype(NUMPY_DTYPES[t])]
    params = {"causal": False, "scale": 0.5}
    got = run("attention", (t,) * 5, ins, (1, 4, 3, 4), params).astype(np.float64)
    assert not got[0, :, 0].any()
    two = attn(t, q[:, :, 1:2], k[:, :, :2], v[:, :, :2], False)  # query 1 over its 2 keys
    q64, k64, v64 = (a.astype(np.float64)[0] for a in (q, k, v))
    s = np.einsum("hd,hkd->hk", q64[:, 2], np.repeat(k64, 2, 0)) * 0.5 + mask[0, 0, 2]
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = np.einsum("hk,hkd->hd", p / p.sum(-1, keepdims=True), np.repeat(v64, 2, 0))
    tol = 1e-6 if t in ("f32", "f64") else 2e-2
    np.testing.assert_allclose(got[0, :, 1], two[0, :, 0], rtol=tol, atol=tol)
    np.testing.assert_allclose(got[0, :, 2], ref, rtol=tol, atol=tol)
