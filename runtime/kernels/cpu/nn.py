"""Neural-network kernels: `rms_norm`, `layer_norm`, `rope`, `attention`.

* rms_norm (x, w; eps): y = x / sqrt(mean(x^2, last dim) + eps) * w.
* layer_norm (x, w, b; eps): y = (x - mean) / sqrt(var + eps) * w + b, biased variance over the
  last dim, of the values centred on the corrected two-pass mean (`row_mean`): a constant row
  gives exactly the bias. Both compute in f32 for f16/bf16, else in the dtype itself.
* rope (x, cos, sin; interleaved): x (..., S, D), cos/sin (S, D/2). Half-split (GPT-NeoX/HF
  rotate_half) pairs x[..., i] with x[..., i + D/2]; interleaved (GPT-J/Meta) pairs x[..., 2i]
  with x[..., 2i + 1]; each pair (a, b) becomes (a cos - b sin, b cos + a sin). f32/f16/bf16
  compute in f64, where both products are exact and the difference is rounded once: faithful.
* attention (q, k, v[, kv_len | mask]; causal, scale): grouped-query SDPA. q (B, Hq, Sq, D),
  k (B, Hkv, Sk, D), v (B, Hkv, Sk, Dv); query head h reads kv head h // (Hq / Hkv). Keys
  j >= kv_len are masked; causal keeps j <= i + kv_len - Sq (bottom-right aligned). An additive
  `mask` (broadcastable to (B, Hq, Sq, Sk)) is added to the scaled scores in the compute dtype.
  A row with no valid key (every logit -inf) is zero. Computes in f32 (f64 for f64) with a
  max-subtracted softmax; the query groups of one kv head are stacked into one matmul, so there
  is no loop over heads.

Inputs are made C-contiguous (or widened) before any accumulation, so results do not depend on
the input strides.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from runtime.binding_table import Kernel, KernelBindingTable
from runtime.cost import CostEstimate, CostFn
from runtime.dtypes import compute_dtype
from runtime.kernels.cpu._common import (
    F64,
    OVERHEAD_NS,
    Arrays,
    F,
    Params,
    Shapes,
    add,
    half,
    measured,
    numel,
    operand_bytes,
    per_element_cost,
    ulp,
)
from runtime.rounding import apply_into, store

_NO_BOUND = "x - mean and the bias cancel: normwise relative error measured"
_RMS_NOTE = "positive sum of squares, then products (no cancellation): ulp and rel measured"


def _compute(x: np.ndarray, cdt: np.dtype) -> np.ndarray:
    """`x` in the compute dtype, C-contiguous (a copy only when needed)."""
    return np.ascontiguousarray(x, dtype=cdt)


def _rms_norm(cdt: np.dtype) -> Kernel:
    def rms_norm(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        x, w = _compute(inputs[0], cdt), _compute(inputs[1], cdt)
        ms = np.add.reduce(x * x, axis=-1, keepdims=True)
        ms /= x.shape[-1]
        ms += params["eps"]
        inv = np.divide(1.0, np.sqrt(ms, out=ms), out=ms)
        apply_into(np.multiply, (x * inv, w), outputs[0])

    return rms_norm


def row_mean(x: np.ndarray) -> np.ndarray:
    """The mean over the last dim, corrected once by the mean of the residuals (the corrected
    two-pass mean): a constant row's mean is exactly its value (the first pass's rounding error
    r = c - m is exact, and so are d r and d r / d), so layer_norm gives it exactly the bias."""
    d = x.shape[-1]
    m = np.add.reduce(x, axis=-1, keepdims=True) / d
    m += np.add.reduce(x - m, axis=-1, keepdims=True) / d
    return m


def _layer_norm(cdt: np.dtype) -> Kernel:
    def layer_norm(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        x, w, b = (_compute(a, cdt) for a in inputs)
        d = x.shape[-1]
        xc = x - row_mean(x)
        var = np.add.reduce(xc * xc, axis=-1, keepdims=True)
        var /= d
        var += params["eps"]
        xc *= np.divide(1.0, np.sqrt(var, out=var), out=var)
        xc *= w
        apply_into(np.add, (xc, b), outputs[0])

    return layer_norm


def _rope(cdt: np.dtype) -> Kernel:
    def rope(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        x, c, s = (np.asarray(a, dtype=cdt) for a in inputs)
        out = outputs[0]
        h = x.shape[-1] // 2
        if params["interleaved"]:
            a, b, oa, ob = x[..., 0::2], x[..., 1::2], out[..., 0::2], out[..., 1::2]
        else:
            a, b, oa, ob = x[..., :h], x[..., h:], out[..., :h], out[..., h:]
        apply_into(np.subtract, (a * c, b * s), oa)
        apply_into(np.add, (b * c, a * s), ob)

    return rope


def _mask(sq: int, sk: int, kv_len: int, causal: bool) -> np.ndarray:
    """valid[i, j]: key j < kv_len and, if causal, j <= i + kv_len - sq."""
    j = np.arange(sk)
    valid = np.broadcast_to(j < kv_len, (sq, sk))
    if causal:
        valid = valid & (j[None, :] <= np.arange(sq)[:, None] + (kv_len - sq))
    return valid


def _sdpa(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    kv_len: int,
    params: Params,
    mm: Callable[..., np.ndarray] = np.matmul,
    add_mask: np.ndarray | None = None,
) -> np.ndarray:
    """(B, Hq, Sq, Dv) attention in the dtype of q (f32 or f64); see the module docstring. `mm`
    computes the two batched products (numpy's BLAS, or torch's for the torch-blas sibling);
    `add_mask` is the additive mask in q's dtype."""
    bsz, hq, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    g = hq // hkv
    qg = q.reshape(bsz, hkv, g * sq, d)  # heads h = kv * g + r share kv head `kv`
    scores = mm(qg, k.swapaxes(-1, -2))
    scores *= params["scale"]
    valid = _mask(sq, sk, kv_len, params["causal"])
    s5 = scores.reshape(bsz, hkv, g, sq, sk)
    if add_mask is not None:
        full = np.broadcast_to(add_mask, (bsz, hq, sq, sk))
        s5 += full.reshape(bsz, hkv, g, sq, sk)
    np.copyto(s5, -np.inf, where=~valid)
    m = np.max(scores, axis=-1, keepdims=True)
    m[m == -np.inf] = 0.0  # fully masked rows: exp(-inf - 0) = 0, no NaN
    np.exp(np.subtract(scores, m, out=scores), out=scores)
    denom = np.add.reduce(scores, axis=-1, keepdims=True)
    denom[denom == 0] = 1.0  # zero rows stay zero
    out = mm(scores, v)
    out /= denom
    return out.reshape(bsz, hq, sq, v.shape[-1])


def _attention(
    cdt: np.dtype,
    with_kv_len: bool,
    mm: Callable[..., np.ndarray] = np.matmul,
    with_mask: bool = False,
) -> Kernel:
    def attention(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        q, k, v = (_compute(a, cdt) for a in inputs[:3])
        sk = k.shape[2]
        kv_len = min(max(int(inputs[3]), 0), sk) if with_kv_len else sk
        mask = _compute(inputs[3], cdt) if with_mask else None
        store(outputs[0], _sdpa(q, k, v, kv_len, params, mm, mask))

    return attention


def attention_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """QK^T and PV matmuls (2 Sq Sk (D + Dv) per query head) plus a ~14-flop softmax."""
    (bsz, hq, sq, d), (sk, dv) = shapes[0], (shapes[1][2], shapes[2][3])
    flops = bsz * hq * sq * sk * (2.0 * (d + dv) + 14.0)
    return CostEstimate(flops, operand_bytes(shapes, dtypes), OVERHEAD_NS["attention"])


def _norm_cost(flops_per_elem: float) -> CostFn:
    def norm_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
        flops = numel(shapes[0]) * flops_per_elem
        return CostEstimate(flops, operand_bytes(shapes, dtypes), OVERHEAD_NS["composite"])

    return norm_cost


def register_nn(table: KernelBindingTable) -> None:
    """Register rms_norm, layer_norm, rope and attention (both key forms) for F."""
    rope_cost = per_element_cost(3.0, "composite")
    for t in F:
        cdt = compute_dtype(t)
        rms = measured(_RMS_NOTE, with_ulp=True)
        add(table, "rms_norm", (t, t, t), _rms_norm(cdt), rms, _norm_cost(4.0))
        ln = measured(_NO_BOUND, with_ulp=half(t))
        add(table, "layer_norm", (t, t, t, t), _layer_norm(cdt), ln, _norm_cost(8.0))
        rope_claim = (
            measured("f64 products rounded before the difference: cancellation", with_ulp=True)
            if t == "f64"
            else ulp(1, "computed in f64: exact products, one rounding, then the final one")
        )
        add(table, "rope", (t, t, t, t), _rope(F64), rope_claim, rope_cost)
        attn = measured("softmax-weighted sums (cancellation): measured", with_ulp=half(t))
        add(table, "attention", (t, t, t, t), _attention(cdt, False), attn, attention_cost)
        kernel = _attention(cdt, True)
        add(table, "attention", (t, t, t, "i64", t), kernel, attn, attention_cost)
        kernel = _attention(cdt, False, with_mask=True)
        add(table, "attention", (t, t, t, t, t), kernel, attn, attention_cost)
