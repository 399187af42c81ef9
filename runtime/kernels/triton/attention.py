"""Triton flash attention (prefill): grouped-query SDPA with online softmax.

q (B, Hq, Sq, D), k (B, Hkv, Sk, D), v (B, Hkv, Sk, Dv) -> (B, Hq, Sq, Dv); query head h reads
kv head `h // (Hq / Hkv)`. Keys j >= kv_len are masked (kv_len is read on the device from the
optional 0-d i64 operand, clamped to [0, Sk], so no host sync); `causal` keeps
`j <= i + kv_len - Sq` (bottom-right aligned) and stops the key loop at the last visible block.
A row with no visible key is zero, like the CPU kernel.

Grid: (cdiv(Sq, BLOCK_M), B * Hq). Each program holds a BLOCK_M x Dv f32 accumulator and walks
the keys in BLOCK_N blocks: `s = q k^T * scale`, running max `m`, rescale `alpha = e^(m_old -
m)`, `l = l alpha + sum e^(s - m)`, `acc = acc alpha + e^(s - m) v`; finally `acc / l`. For
f16/bf16 the probabilities are rounded to the input dtype before the PV product (tensor cores),
as FlashAttention does; f32 inputs use true f32 products (`input_precision="ieee"`).
"""

from collections.abc import Sequence

import torch
import triton
import triton.language as tl

from runtime.kernels.triton._common import mma, to_out
from runtime.kernels.triton.spec import (
    TRITON_PTR,
    Params,
    Shapes,
    TritonKernelSpec,
    finish,
    next_pow2,
    out_target,
    signature,
)

BLOCK_M = 64
BLOCK_N = 64


@triton.jit
def attention_kernel(
    q,
    k,
    v,
    o,
    kv_len,
    scale,
    Sq,
    Sk,
    HQ,
    G,
    D,
    DV,
    sqb,
    sqh,
    sqm,
    skb,
    skh,
    skn,
    svb,
    svh,
    svn,
    sob,
    soh,
    som,
    HAS_KV_LEN: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    PRECISION: tl.constexpr,
):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // HQ).to(tl.int64)
    h = (bh % HQ).to(tl.int64)
    hk = h // G
    n_live = Sk
    if HAS_KV_LEN:
        n_live = tl.minimum(tl.maximum(tl.load(kv_len), 0), Sk).to(tl.int32)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, BLOCK_D)
    rdv = tl.arange(0, BLOCK_DV)
    rn = tl.arange(0, BLOCK_N)
    qt = tl.load(
        q + b * sqb + h * sqh + rm[:, None] * sqm + rd[None, :],
        mask=(rm[:, None] < Sq) & (rd[None, :] < D),
        other=0.0,
    )
    kb = k + b * skb + hk * skh
    vb = v + b * svb + hk * svh
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_DV), dtype=tl.float32)
    end = n_live
    if CAUSAL:  # the tile's last row sees keys j <= pid_m * BLOCK_M + BLOCK_M - 1 + off
        end = tl.minimum(n_live, (pid_m + 1) * BLOCK_M + n_live - Sq)
    for start in range(0, end, BLOCK_N):
        cols = start + rn
        kt = tl.load(
            kb + cols[None, :] * skn + rd[:, None],
            mask=(cols[None, :] < n_live) & (rd[:, None] < D),
            other=0.0,
        )
        s = mma(qt, kt, tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), PRECISION) * scale
        valid = cols[None, :] < n_live
        if CAUSAL:
            valid = valid & (cols[None, :] <= rm[:, None] + n_live - Sq)
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp(s - m_safe[:, None])
        alpha = tl.exp(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        vt = tl.load(
            vb + cols[:, None] * svn + rdv[None, :],
            mask=(cols[:, None] < n_live) & (rdv[None, :] < DV),
            other=0.0,
        )
        acc = mma(to_out(p, vt.dtype), vt, acc * alpha[:, None], PRECISION)
        m_i = m_new
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    tl.store(
        o + b * sob + h * soh + rm[:, None] * som + rdv[None, :],
        to_out(out, o.dtype.element_ty),
        mask=(rm[:, None] < Sq) & (rdv[None, :] < DV),
    )


def dot_block(n: int) -> int:
    """A power-of-two tile extent >= n and >= 16 (tl.dot's minimum on tensor cores)."""
    return max(16, next_pow2(n))


class AttentionKernel:
    """Flash attention (params: causal, scale; optional kv_len operand) on torch tensors."""

    family = "attention"

    def __init__(self, with_kv_len: bool) -> None:
        self.with_kv_len = with_kv_len
        self.__qualname__ = "triton_attention" + ("_kv_len" if with_kv_len else "")

    def launches(
        self, shapes: Shapes, dtypes: Sequence[str], params: Params
    ) -> tuple[TritonKernelSpec, ...]:
        (bsz, hq, sq, d), (_, hkv, sk, _), dv = shapes[0], shapes[1], shapes[2][3]
        types = {nm: TRITON_PTR[dt] for nm, dt in zip("qkv", dtypes, strict=False)}
        types |= {"o": TRITON_PTR[dtypes[-1]], "kv_len": "*i64", "scale": "fp32"}
        types |= {nm: "i32" for nm in ("Sq", "Sk", "HQ", "G", "D", "DV")}
        types |= {f"s{t}{a}": "i64" for t in "qkvo" for a in ("b", "h")}
        types |= {"sqm": "i64", "skn": "i64", "svn": "i64", "som": "i64"}
        const = {
            "HAS_KV_LEN": self.with_kv_len,
            "CAUSAL": bool(params.get("causal")),
            "BLOCK_M": BLOCK_M,
            "BLOCK_N": BLOCK_N,
            "BLOCK_D": dot_block(int(d)),
            "BLOCK_DV": dot_block(int(dv)),
            "PRECISION": "ieee",
        }
        grid = (f"cdiv(Sq, {BLOCK_M})", "B * Hq")
        sizes = {"B": int(bsz), "Hq": int(hq), "Hkv": int(hkv), "Sq": int(sq), "Sk": int(sk)}
        fn = attention_kernel
        return (
            TritonKernelSpec(
                f"attention_{dtypes[0]}", fn, signature(fn, types), const, grid, sizes, 4, 2
            ),
        )

    def __call__(
        self, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor], params: Params
    ) -> None:
        q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in inputs[:3])
        out = outputs[0]
        if out.numel() == 0:
            return
        kv_len = inputs[3] if self.with_kv_len else k  # unused pointer when HAS_KV_LEN=False
        o = out_target(out)
        shapes = [tuple(t.shape) for t in (q, k, v, o)]
        (spec,) = self.launches(shapes, ["f32"] * 4, params)
        bsz, hq, sq, d = q.shape
        hkv, sk, dv = k.shape[1], k.shape[2], v.shape[3]
        spec.launch(
            q,
            k,
            v,
            o,
            kv_len,
            float(params["scale"]),
            sq,
            sk,
            hq,
            hq // hkv,
            d,
            dv,
            *q.stride()[:3],
            *k.stride()[:3],
            *v.stride()[:3],
            *o.stride()[:3],
        )
        finish(out, o)
