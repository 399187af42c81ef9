"""Triton flash attention (prefill) and flash decoding vs a float64 numpy reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from triton_helpers import TOLERANCE, check, entry, quantize, run, to_torch


def sdpa64(q, k, v, kv_len: int, causal: bool, scale: float) -> np.ndarray:
    """fuel.attention semantics in float64 (GQA, kv_len prefix, bottom-right causal)."""
    q, k, v = (t.astype(np.float64) for t in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = q @ k.swapaxes(-1, -2) * scale
    sq, sk = q.shape[2], k.shape[2]
    j, i = np.arange(sk)[None, :], np.arange(sq)[:, None]
    valid = (j < kv_len) & ((j <= i + kv_len - sq) if causal else True)
    s = np.where(valid, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m)
    den = p.sum(axis=-1, keepdims=True)
    return (p @ v) / np.where(den == 0, 1.0, den)


def _qkv(b, hq, hkv, sq, sk, d, dv, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (
        quantize(rng.normal(size=(b, hq, sq, d)), dtype),
        quantize(rng.normal(size=(b, hkv, sk, d)), dtype),
        quantize(rng.normal(size=(b, hkv, sk, dv)), dtype),
    )


def _attend(source, dtype, q, k, v, kv_len, causal, scale=0.3):
    params = {"causal": causal, "scale": scale}
    out_shape = (*q.shape[:3], v.shape[3])
    if kv_len is None:
        e = entry("attention", (dtype,) * 4, source)
        got = run(e, [q, k, v], out_shape, dtype, params)
        n = k.shape[2]
    else:
        e = entry("attention", (dtype,) * 3 + ("i64", dtype), source)
        got = run(e, [q, k, v, torch.tensor(kv_len)], out_shape, dtype, params)
        n = min(max(kv_len, 0), k.shape[2])
    ref = sdpa64(q, k, v, n, causal, scale)
    check(got, ref, e.precision, dtype, scale=float(np.abs(v).max()))
    return got, ref


PREFILL = [  # (hq, hkv, sq, sk, kv_len, causal)
    (4, 2, 37, 70, None, False),
    (4, 2, 37, 70, None, True),
    (3, 3, 20, 90, 50, True),  # kv_len < cache length
    (4, 1, 33, 90, 20, True),  # kv_len < Sq: the first rows see no key -> zero
    (2, 2, 70, 70, 0, False),  # nothing live -> zero
    (8, 2, 5, 130, 129, False),
]


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize(("hq", "hkv", "sq", "sk", "kv_len", "causal"), PREFILL)
def test_flash_attention_prefill(dtype, hq, hkv, sq, sk, kv_len, causal) -> None:
    q, k, v = _qkv(2, hq, hkv, sq, sk, 24, 20, dtype)
    got, ref = _attend("triton", dtype, q, k, v, kv_len, causal)
    if kv_len is not None and kv_len < sq and causal:  # rows i < sq - kv_len see nothing
        assert np.all(got[:, :, : sq - kv_len] == 0)


def test_flash_attention_f16_head_dim_128() -> None:
    q, k, v = _qkv(1, 2, 1, 65, 65, 128, 128, "f16", seed=4)
    _attend("triton", "f16", q, k, v, None, True, scale=128**-0.5)


def test_flash_attention_strided_inputs() -> None:
    q, k, v = _qkv(1, 4, 2, 16, 40, 16, 16, "f32", seed=5)
    qt = to_torch(q.transpose(0, 2, 1, 3).copy()).transpose(1, 2)  # (B, Hq, Sq, D) view
    out = torch.empty((1, 4, 16, 16))
    entry("attention", ("f32",) * 4).kernel(
        [qt, to_torch(k), to_torch(v)], [out], {"causal": True, "scale": 0.25}
    )
    err = np.abs(out.numpy() - sdpa64(q, k, v, 40, True, 0.25)).max()
    assert err <= TOLERANCE["f32"]


DECODE = [  # (hq, hkv, sk, kv_len)
    (6, 2, 300, None),
    (6, 2, 300, 1),
    (6, 2, 300, 150),
    (8, 8, 300, 0),
    (24, 3, 129, 500),  # kv_len beyond capacity clamps to Sk
    (4, 1, 1000, 999),  # several splits
]


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize(("hq", "hkv", "sk", "kv_len"), DECODE)
def test_flash_decode(dtype, hq, hkv, sk, kv_len) -> None:
    q, k, v = _qkv(2, hq, hkv, 1, sk, 24, 20, dtype, seed=hq)
    _attend("triton-flashdecode", dtype, q, k, v, kv_len, causal=True)


def test_flash_decode_refuses_prefill() -> None:
    q, k, v = _qkv(1, 2, 2, 3, 10, 8, 8, "f32")
    e = entry("attention", ("f32",) * 4, "triton-flashdecode")
    with pytest.raises(ValueError, match="Sq == 1"):
        run(e, [q, k, v], (1, 2, 3, 8), "f32", {"causal": False, "scale": 1.0})
    assert e.cost is not None
    assert e.cost([q.shape, k.shape, v.shape, (1, 2, 3, 8)], ["f32"] * 4, {}).flops == np.inf


def test_decode_and_prefill_agree_at_one_query() -> None:
    q, k, v = _qkv(1, 8, 2, 1, 257, 32, 32, "f32", seed=9)
    a, _ = _attend("triton", "f32", q, k, v, 200, True)
    b, _ = _attend("triton-flashdecode", "f32", q, k, v, 200, True)
    assert np.abs(a - b).max() <= 1e-6
