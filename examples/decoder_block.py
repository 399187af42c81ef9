"""A Llama-style decoder block built with fuel's GraphBuilder, and a float64 numpy reference.

Pre-norm block: RMSNorm -> grouped-query causal attention with rotary embeddings -> residual
-> RMSNorm -> SiLU-gated MLP -> residual. Weights are random with a fixed seed.

    python examples/decoder_block.py          # rewrites examples/decoder_block.mlir + weights
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from frontends.builder import GraphBuilder
from runtime.module import FuelModule


@dataclass(frozen=True)
class BlockConfig:
    seq: int = 16
    hidden: int = 64
    heads: int = 4
    kv_heads: int = 2
    ffn: int = 128
    eps: float = 1e-6
    rope_theta: float = 10000.0

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def rope_tables(seq: int, head_dim: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """cos/sin tables of shape (seq, head_dim/2) for positions 0..seq-1."""
    inv = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    ang = np.outer(np.arange(seq, dtype=np.float64), inv)
    return np.cos(ang), np.sin(ang)


def build_decoder_block(cfg: BlockConfig = BlockConfig(), seed: int = 0) -> FuelModule:
    g = GraphBuilder(seed=seed)
    d, hd, s = cfg.hidden, cfg.head_dim, cfg.seq
    x = g.input("x", (1, s, d))
    cos_t, sin_t = rope_tables(s, hd, cfg.rope_theta)
    cos, sin = (
        g.weight("rope.cos", cos_t.shape, value=cos_t),
        g.weight("rope.sin", sin_t.shape, value=sin_t),
    )

    def heads(t, n):  # (1, S, n*hd) -> (1, n, S, hd)
        return g.transpose(g.reshape(t, (1, s, n, hd)), (0, 2, 1, 3))

    h = g.rms_norm(x, g.weight("attn_norm", (d,), value=np.ones(d)), cfg.eps)
    q = heads(g.matmul(h, g.weight("wq", (d, cfg.heads * hd))), cfg.heads)
    k = heads(g.matmul(h, g.weight("wk", (d, cfg.kv_heads * hd))), cfg.kv_heads)
    v = heads(g.matmul(h, g.weight("wv", (d, cfg.kv_heads * hd))), cfg.kv_heads)
    q, k = g.rope(q, cos, sin), g.rope(k, cos, sin)
    o = g.attention(q, k, v, causal=True)
    o = g.reshape(g.transpose(o, (0, 2, 1, 3)), (1, s, d))
    x1 = g.add(x, g.matmul(o, g.weight("wo", (d, d))))
    h2 = g.rms_norm(x1, g.weight("ffn_norm", (d,), value=np.ones(d)), cfg.eps)
    gate = g.silu(g.matmul(h2, g.weight("w_gate", (d, cfg.ffn))))
    up = g.matmul(h2, g.weight("w_up", (d, cfg.ffn)))
    y = g.add(x1, g.matmul(g.mul(gate, up), g.weight("w_down", (cfg.ffn, d))))
    return g.build(outputs={"y": y})


def reference(cfg: BlockConfig, weights: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """The same block written directly in float64 numpy (an independent check)."""
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    x = x.astype(np.float64)
    s, hd = cfg.seq, cfg.head_dim

    def rms(t, scale):
        return t / np.sqrt((t * t).mean(-1, keepdims=True) + cfg.eps) * scale

    def rot(t):  # half-split rotary embedding, t: (1, n, S, hd)
        c, sn = w["rope.cos"], w["rope.sin"]
        a, b = t[..., : hd // 2], t[..., hd // 2 :]
        return np.concatenate([a * c - b * sn, b * c + a * sn], axis=-1)

    def split(t, n):
        return t.reshape(1, s, n, hd).transpose(0, 2, 1, 3)

    h = rms(x, w["attn_norm"])
    q = rot(split(h @ w["wq"], cfg.heads))
    k = rot(split(h @ w["wk"], cfg.kv_heads))
    v = split(h @ w["wv"], cfg.kv_heads)
    rep = cfg.heads // cfg.kv_heads
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd)
    scores = np.where(np.tril(np.ones((s, s), bool)), scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    o = (p / p.sum(-1, keepdims=True)) @ v
    x1 = x + o.transpose(0, 2, 1, 3).reshape(1, s, cfg.hidden) @ w["wo"]
    h2 = rms(x1, w["ffn_norm"])
    gate = h2 @ w["w_gate"]
    return x1 + ((gate / (1 + np.exp(-gate))) * (h2 @ w["w_up"])) @ w["w_down"]


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_suffix(".mlir")
    build_decoder_block().save(out)
    print(f"wrote {out} and {out.with_suffix('.safetensors')}")
