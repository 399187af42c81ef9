"""Triton flash decoding: `attention` with one query (Sq == 1) over a KV cache's live prefix.

Two launches. Split pass, grid (splits, B * Hkv): program (s, b, kv head) takes the G = Hq / Hkv
query heads that share the kv head as the rows of one tile (GQA costs one K/V read), walks the
keys `[s * SPLIT, min((s + 1) * SPLIT, kv_len))` in BLOCK_N blocks with an online softmax, and
writes the unnormalised partials `m`, `l = sum e^(s - m)`, `acc = sum e^(s - m) v` (f32). A split
past the live length writes `m = -inf, l = 0` and reads nothing. Reduce pass, grid (B * Hq):
`w_s = e^(m_s - max m)`, `out = sum w_s acc_s / sum w_s l_s` (zero when no key is live).

kv_len is read on the device (clamped to [0, Sk]); the split count is sized from the cache
capacity Sk (known at plan time) to give ~`TARGET_PROGRAMS` programs, so only the live keys are
read but a short live prefix uses few of them. `causal` changes nothing when Sq == 1 (query 0
sees keys j <= kv_len - 1). Any other Sq raises ValueError: use the prefill kernel.
"""

from collections.abc import Sequence

import torch
import triton
import triton.language as tl

from runtime.kernels.triton._common import mma, to_out
from runtime.kernels.triton.attention import dot_block
from runtime.kernels.triton.spec import (
    TRITON_PTR,
    Params,
    Shapes,
    TritonKernelSpec,
    cdiv,
    finish,
    next_pow2,
    out_target,
    signature,
)

BLOCK_N = 64
TARGET_PROGRAMS = 512
"""Split-pass programs aimed for: ~4 per SM on a 132-SM H100/H200."""


def split_plan(bsz: int, hkv: int, sk: int) -> tuple[int, int]:
    """(number of splits, keys per split) for a (B, Hkv, Sk) cache; split length % BLOCK_N == 0."""
    blocks = max(1, cdiv(sk, BLOCK_N))
    splits = min(blocks, max(1, cdiv(TARGET_PROGRAMS, max(1, bsz * hkv))))
    per = cdiv(blocks, splits) * BLOCK_N
    return cdiv(max(sk, 1), per), per


@triton.jit
def decode_split_kernel(
    q,
    k,
    v,
    kv_len,
    mp,
    lp,
    ap,
    scale,
    Sk,
    HQ,
    HKV,
    G,
    D,
    DV,
    SPLIT,
    NS,
    sqb,
    sqh,
    skb,
    skh,
    skn,
    svb,
    svh,
    svn,
    HAS_KV_LEN: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    PRECISION: tl.constexpr,
):
    sid = tl.program_id(0)
    bk = tl.program_id(1)
    b = (bk // HKV).to(tl.int64)
    hk = (bk % HKV).to(tl.int64)
    n_live = Sk
    if HAS_KV_LEN:
        n_live = tl.minimum(tl.maximum(tl.load(kv_len), 0), Sk).to(tl.int32)
    rg = tl.arange(0, BLOCK_G)
    rd = tl.arange(0, BLOCK_D)
    rdv = tl.arange(0, BLOCK_DV)
    rn = tl.arange(0, BLOCK_N)
    heads = hk * G + rg  # the query heads reading this kv head
    qt = tl.load(
        q + b * sqb + heads[:, None] * sqh + rd[None, :],
        mask=(rg[:, None] < G) & (rd[None, :] < D),
        other=0.0,
    )
    kb = k + b * skb + hk * skh
    vb = v + b * svb + hk * svh
    m_i = tl.full((BLOCK_G,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_G,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_G, BLOCK_DV), dtype=tl.float32)
    lo = sid * SPLIT
    hi = tl.minimum(lo + SPLIT, n_live)
    for start in range(lo, hi, BLOCK_N):
        cols = start + rn
        live = cols < hi
        kt = tl.load(
            kb + cols[None, :] * skn + rd[:, None],
            mask=live[None, :] & (rd[:, None] < D),
            other=0.0,
        )
        s = mma(qt, kt, tl.zeros((BLOCK_G, BLOCK_N), dtype=tl.float32), PRECISION) * scale
        s = tl.where(live[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp(s - m_safe[:, None])
        alpha = tl.exp(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        vt = tl.load(
            vb + cols[:, None] * svn + rdv[None, :],
            mask=live[:, None] & (rdv[None, :] < DV),
            other=0.0,
        )
        acc = mma(to_out(p, vt.dtype), vt, acc * alpha[:, None], PRECISION)
        m_i = m_new
    row = (b * HQ + heads) * NS + sid  # partials are (B, Hq, NS[, DV]) f32
    tl.store(mp + row, m_i, mask=rg < G)
    tl.store(lp + row, l_i, mask=rg < G)
    tl.store(
        ap + row[:, None] * DV + rdv[None, :], acc, mask=(rg[:, None] < G) & (rdv[None, :] < DV)
    )


@triton.jit
def decode_reduce_kernel(
    mp,
    lp,
    ap,
    o,
    HQ,
    NS,
    DV,
    sob,
    soh,
    BLOCK_S: tl.constexpr,
    BLOCK_DV: tl.constexpr,
):
    bh = tl.program_id(0).to(tl.int64)
    rs = tl.arange(0, BLOCK_S)
    rdv = tl.arange(0, BLOCK_DV)
    m = tl.load(mp + bh * NS + rs, mask=rs < NS, other=float("-inf"))
    big = tl.max(m, axis=0)
    w = tl.exp(m - tl.where(big == float("-inf"), 0.0, big))  # e^-inf = 0: dead splits
    l = tl.load(lp + bh * NS + rs, mask=rs < NS, other=0.0)  # noqa: E741
    a = tl.load(
        ap + (bh * NS + rs[:, None]) * DV + rdv[None, :],
        mask=(rs[:, None] < NS) & (rdv[None, :] < DV),
        other=0.0,
    )
    den = tl.sum(w * l, axis=0)
    num = tl.sum(w[:, None] * a, axis=0)
    out = num / tl.where(den == 0.0, 1.0, den)
    b = bh // HQ
    h = bh % HQ
    tl.store(o + b * sob + h * soh + rdv, to_out(out, o.dtype.element_ty), mask=rdv < DV)


class FlashDecodeKernel:
    """Split-KV flash decoding (Sq == 1; params: scale) as a fuel Kernel on torch tensors."""

    family = "flash_decode"

    def __init__(self, with_kv_len: bool) -> None:
        self.with_kv_len = with_kv_len
        self.__qualname__ = "triton_flash_decode" + ("_kv_len" if with_kv_len else "")

    def launches(
        self, shapes: Shapes, dtypes: Sequence[str], params: Params
    ) -> tuple[TritonKernelSpec, ...]:
        (bsz, hq, sq, d), (_, hkv, sk, _), dv = shapes[0], shapes[1], int(shapes[2][3])
        if sq != 1:
            raise ValueError(f"flash decoding needs one query (Sq == 1), got Sq = {sq}")
        ns, per = split_plan(int(bsz), int(hkv), int(sk))
        sizes = {"B": int(bsz), "Hq": int(hq), "Hkv": int(hkv), "Sk": int(sk), "NS": ns}
        t1 = {nm: TRITON_PTR[dt] for nm, dt in zip("qkv", dtypes, strict=False)}
        t1 |= {"kv_len": "*i64", "mp": "*fp32", "lp": "*fp32", "ap": "*fp32", "scale": "fp32"}
        t1 |= {nm: "i32" for nm in ("Sk", "HQ", "HKV", "G", "D", "DV", "SPLIT", "NS")}
        t1 |= {f"s{t}{a}": "i64" for t in "qkv" for a in "bh"} | {"skn": "i64", "svn": "i64"}
        c1 = {
            "HAS_KV_LEN": self.with_kv_len,
            "BLOCK_G": dot_block(int(hq) // int(hkv)),
            "BLOCK_N": BLOCK_N,
            "BLOCK_D": dot_block(int(d)),
            "BLOCK_DV": dot_block(dv),
            "PRECISION": "ieee",
        }
        t2 = {"mp": "*fp32", "lp": "*fp32", "ap": "*fp32", "o": TRITON_PTR[dtypes[-1]]}
        t2 |= {"HQ": "i32", "NS": "i32", "DV": "i32", "sob": "i64", "soh": "i64"}
        c2 = {"BLOCK_S": next_pow2(ns), "BLOCK_DV": next_pow2(dv)}
        f1, f2 = decode_split_kernel, decode_reduce_kernel
        return (
            TritonKernelSpec(
                f"flash_decode_split_{dtypes[0]}",
                f1,
                signature(f1, t1),
                c1,
                ("NS", "B * Hkv"),
                sizes | {"SPLIT": per},
                4,
                2,
            ),
            TritonKernelSpec(
                f"flash_decode_reduce_{dtypes[0]}",
                f2,
                signature(f2, t2),
                c2,
                ("B * Hq",),
                sizes,
                4,
                1,
            ),
        )

    def __call__(
        self, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor], params: Params
    ) -> None:
        q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in inputs[:3])
        out = outputs[0]
        shapes = [tuple(t.shape) for t in (q, k, v, out)]
        split, reduce = self.launches(shapes, ["f32"] * 4, params)
        if out.numel() == 0:
            return
        bsz, hq, _, d = q.shape
        hkv, sk, dv = k.shape[1], k.shape[2], v.shape[3]
        ns, per = split.sizes["NS"], split.sizes["SPLIT"]
        f32 = {"dtype": torch.float32, "device": q.device}
        mp, lp = torch.empty((bsz, hq, ns), **f32), torch.empty((bsz, hq, ns), **f32)
        ap = torch.empty((bsz, hq, ns, dv), **f32)
        kv_len = inputs[3] if self.with_kv_len else k
        split.launch(
            q,
            k,
            v,
            kv_len,
            mp,
            lp,
            ap,
            float(params["scale"]),
            sk,
            hq,
            hkv,
            hq // hkv,
            d,
            dv,
            per,
            ns,
            *q.stride()[:2],
            *k.stride()[:3],
            *v.stride()[:3],
        )
        o = out_target(out)
        reduce.launch(mp, lp, ap, o, hq, ns, dv, *o.stride()[:2])
        finish(out, o)
