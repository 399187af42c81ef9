"""Split-KV flash decoding on the CPU: `attention` with one query over a KV cache's live prefix.

kernel_source `numpy-flashdecode`, keys `attention` (t, t, t, t) and (t, t, t, i64, t) for t in
f32/f16/bf16. Only decode shapes are supported (`Sq == 1`; anything else raises): the
`fuel-emit-decode-flash` pass offers it as a gated variant arm, and its cost prices every other
shape as infeasible, so the picker never chooses it for a prefill.

Algorithm (flash decoding): the live keys `[0, kv_len)` are split into chunks of `CHUNK`; per
chunk, the partial row max `m_c`, sum of exponentials `l_c = sum exp(s - m_c)` and weighted
values `o_c = exp(s - m_c) @ V_c`; then one reduction pass combines the chunks with the
log-sum-exp rescaling `w_c = exp(m_c - max_c m_c)`: `out = sum w_c o_c / sum w_c l_c`. The
query heads of one kv head (GQA) are stacked into one matmul, and all full chunks run as one
batched matmul (the tail chunk is one more call): no Python loop over heads or chunks.

Unlike the generic kernel, which masks a full (Sq, capacity) score matrix, this reads and widens
ONLY the first kv_len rows of k and v: a 4096-slot cache with 128 live tokens costs 128. With
`Sq == 1`, `causal` keeps every live key (j <= 0 + kv_len - 1), so it changes nothing here.
Compute is f32 for every dtype; kv_len <= 0 gives zeros (no valid key), like the generic kernel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from runtime.binding_table import Kernel, KernelBindingTable
from runtime.cost import CostEstimate, dtype_bytes
from runtime.kernels.cpu._common import (
    F32,
    OVERHEAD_NS,
    Arrays,
    Params,
    Shapes,
    add,
    half,
    measured,
)
from runtime.rounding import store

SOURCE = "numpy-flashdecode"
DTYPES = ("f32", "f16", "bf16")
CHUNK = 256
"""Keys per split: large enough that numpy's per-call overhead is amortised, small enough that a
chunk's scores stay in cache."""


def flash_decode(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, kv_len: int, scale: float, chunk: int = CHUNK
) -> np.ndarray:
    """(B, Hq, 1, Dv) f32 attention of one query over the first `kv_len` keys (see module doc)."""
    bsz, hq, sq, d = q.shape
    if sq != 1:
        raise ValueError(f"flash decoding needs one query (Sq == 1), got Sq = {sq}")
    hkv, sk, dv = k.shape[1], k.shape[2], v.shape[3]
    n = min(max(int(kv_len), 0), sk)
    if n == 0:
        return np.zeros((bsz, hq, 1, dv), F32)
    g = hq // hkv
    qg = np.asarray(q, dtype=F32).reshape(bsz, hkv, 1, g, d) * np.float32(scale)
    full = n // chunk * chunk
    parts = []  # (m, l, o) per group of chunks: (B, Hkv, nc, G, 1), (.., 1), (.., Dv)
    if full:
        nc = full // chunk
        kc = np.asarray(k[:, :, :full], dtype=F32).reshape(bsz, hkv, nc, chunk, d)
        vc = np.asarray(v[:, :, :full], dtype=F32).reshape(bsz, hkv, nc, chunk, dv)
        parts.append(_partial(qg, kc, vc))
    if full < n:
        kt = np.asarray(k[:, :, full:n], dtype=F32)[:, :, None]
        vt = np.asarray(v[:, :, full:n], dtype=F32)[:, :, None]
        parts.append(_partial(qg, kt, vt))
    m, sums, o = (np.concatenate(x, axis=2) for x in zip(*parts, strict=True))
    big = np.max(m, axis=2, keepdims=True)
    w = np.exp(m - big)  # log-sum-exp rescaling of each chunk to the global max
    num = np.add.reduce(w * o, axis=2)  # (B, Hkv, G, Dv)
    den = np.add.reduce(w * sums, axis=2)
    return (num / den).reshape(bsz, hq, 1, dv)


def _partial(
    qg: np.ndarray, kc: np.ndarray, vc: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per chunk: row max, sum of exp, exp-weighted V. qg (B,H,1,G,D), kc (B,H,nc,C,D)."""
    s = np.matmul(qg, kc.swapaxes(-1, -2))  # (B, H, nc, G, C)
    m = np.max(s, axis=-1, keepdims=True)
    np.exp(np.subtract(s, m, out=s), out=s)
    return m, np.add.reduce(s, axis=-1, keepdims=True), np.matmul(s, vc)


def _kernel(with_kv_len: bool) -> Kernel:
    def attention_flashdecode(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        q, k, v = inputs[:3]
        n = int(inputs[3]) if with_kv_len else k.shape[2]
        store(outputs[0], flash_decode(q, k, v, n, params["scale"]))

    return attention_flashdecode


def flash_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """One query over the live keys: per key 2D (q.k) + 2Dv (p.v) + 4 (max, sub, exp, sum) FLOPs
    per query head, bytes of q, out and the live rows of k and v. The live length is
    `params["kv_len"]` when known; fuel's attention params do not carry it (kv_len is a runtime
    operand), so the planner charges the capacity Sk: an upper bound, the same rows the generic
    kernel reads. Sq != 1 is infeasible (inf): the kernel refuses it."""
    (bsz, hq, sq, d), (_, hkv, sk, _), dv = shapes[0], shapes[1], shapes[2][3]
    if sq != 1:
        return CostEstimate(math.inf, math.inf, math.inf)
    kv_len = params.get("kv_len")
    live = min(max(int(kv_len), 0), sk) if isinstance(kv_len, int) else sk
    flops = bsz * hq * live * (2.0 * (d + dv) + 4.0)
    kv_bytes = bsz * hkv * live * (d * dtype_bytes(dtypes[1]) + dv * dtype_bytes(dtypes[2]))
    qo_bytes = bsz * hq * (d * dtype_bytes(dtypes[0]) + dv * dtype_bytes(dtypes[-1]))
    chunks = max(1, math.ceil(live / CHUNK))
    return CostEstimate(flops, kv_bytes + qo_bytes, OVERHEAD_NS["attention"] + 2_000.0 * chunks)


def register_flash(table: KernelBindingTable) -> None:
    """Register the flash-decoding attention kernels (both key forms) for f32/f16/bf16."""
    for t in DTYPES:
        claim = measured(
            "f32 chunked softmax-weighted sums (cancellation): normwise relative error measured",
            with_ulp=half(t),
        )
        add(
            table,
            "attention",
            (t, t, t, t),
            _kernel(False),
            claim,
            flash_cost,
            source=SOURCE,
            also=(flash_decode, _partial),
        )
        add(
            table,
            "attention",
            (t, t, t, "i64", t),
            _kernel(True),
            claim,
            flash_cost,
            source=SOURCE,
            also=(flash_decode, _partial),
        )
