"""A Llama-style decoder in PyTorch, with the two graphs a server runs: prefill and decode step.

RMSNorm, rotary embeddings (rotate-half), grouped-query attention over a KV cache, SiLU-gated
MLP, and an lm head (tied to the embedding or not). Weights are random with a fixed seed.

The KV cache is a static buffer of `max_seq` slots per layer, `(layers, 1, kv_heads, max_seq,
head_dim)`, that the caller allocates once and both graphs update in place, as HF's static cache
does (`index_copy_` at the token positions):

- **prefill**: `tokens (1, T) i64, positions (T,) i64, k_cache, v_cache -> logits (1, T, V)`,
  the prompt's keys/values written at slots `positions` (`0..T-1`: causal attention over the
  prompt itself). `T` may be any length up to `max_seq`: nothing in the graph computes with
  it (rotary angles are gathered at `positions`, views use `-1`), so torch.export keeps it one
  dynamic dim.
- **decode step**: `token (1, 1) i64, pos (1,) i64, k_cache, v_cache -> logits (1, 1, V)`.
  The new key/value is written at slot `pos` (one row per layer), and attention reads the
  first `pos + 1` slots through the mask `arange(max_seq) <= pos`; importers turn that mask
  into `fuel.attention`'s `kv_len`, which is the shape `fuel-emit-decode-flash` needs (one
  query, a live length).

Exported, each in-place write is an input mutation: fuel imports it as a `fuel.index_copy` of
the donated cache, which its executor runs in the caller's buffer (one row per decode step).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class LlamaConfig:
    """Decoder dimensions; `ffn` is the SiLU-gated MLP's inner width."""

    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    max_seq: int
    eps: float = 1e-5
    rope_theta: float = 10000.0
    tie_embeddings: bool = False

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


TINY = LlamaConfig(vocab=128, hidden=64, layers=2, heads=4, kv_heads=2, ffn=128, max_seq=32)
SMALL = LlamaConfig(vocab=2048, hidden=512, layers=4, heads=8, kv_heads=2, ffn=1408, max_seq=256)
GPT2_SMALL = LlamaConfig(
    vocab=32000,
    hidden=768,
    layers=12,
    heads=12,
    kv_heads=4,
    ffn=2048,
    max_seq=512,
    tie_embeddings=True,
)
CONFIGS = {"tiny": TINY, "small": SMALL, "gpt2-small": GPT2_SMALL}


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def write_rows(cache: torch.Tensor, positions: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """`cache[:, :, positions] = rows` in place, as HF's static cache writes (`index_copy_`).

    ONNX has no in-place update: under `torch.onnx.export` the rows are spread over the slots
    by a one-hot product and selected with a `where` (that graph computes the whole cache)."""
    if not torch.onnx.is_in_onnx_export():
        return cache.index_copy_(2, positions, rows)
    hit = positions.view(-1, 1) == torch.arange(cache.shape[2]).view(1, -1)  # (T, slots)
    spread = rows if rows.shape[2] == 1 else torch.matmul(hit.T.to(rows.dtype), rows)
    return cache.copy_(torch.where(hit.any(0).view(1, 1, -1, 1), spread, cache))


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.cfg = cfg
        hd = cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden, cfg.heads * hd, bias=False)
        self.k_proj = nn.Linear(cfg.hidden, cfg.kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(cfg.hidden, cfg.kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(cfg.heads * hd, cfg.hidden, bias=False)

    def _qkv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        hd, c = self.cfg.head_dim, self.cfg
        q = self.q_proj(x).view(1, -1, c.heads, hd).transpose(1, 2)
        k = self.k_proj(x).view(1, -1, c.kv_heads, hd).transpose(1, 2)
        v = self.v_proj(x).view(1, -1, c.kv_heads, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        return q, k, v

    def _out(self, o: torch.Tensor) -> torch.Tensor:
        return self.o_proj(o.transpose(1, 2).reshape(1, -1, self.cfg.hidden))

    def prefill(self, x, cos, sin, positions, k_cache, v_cache):
        """Causal attention over the prompt; its k/v written into the layer's cache slots
        `positions` (`k_cache`, `v_cache`: this layer's `(1, Hkv, max_seq, D)`, updated)."""
        q, k, v = self._qkv(x, cos, sin)
        write_rows(k_cache, positions, k)
        write_rows(v_cache, positions, v)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self._out(o)

    def decode(self, x, cos, sin, pos, k_cache, v_cache):
        """One query; the new k/v written at slot `pos` of the layer's cache (in place); keys
        `0..pos` attended."""
        q, k, v = self._qkv(x, cos, sin)
        k_cache, v_cache = write_rows(k_cache, pos, k), write_rows(v_cache, pos, v)
        slots = torch.arange(self.cfg.max_seq, dtype=torch.int64)
        live = (slots <= pos).view(1, 1, 1, -1)
        o = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=live, enable_gqa=True)
        return self._out(o)


class Block(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.hidden, cfg.eps)
        self.attn = Attention(cfg)
        self.mlp_norm = RMSNorm(cfg.hidden, cfg.eps)
        self.gate_proj = nn.Linear(cfg.hidden, cfg.ffn, bias=False)
        self.up_proj = nn.Linear(cfg.hidden, cfg.ffn, bias=False)
        self.down_proj = nn.Linear(cfg.ffn, cfg.hidden, bias=False)

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        h = self.mlp_norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    """The decoder; `prefill` and `decode` are its two graphs (see the module doc)."""

    def __init__(self, cfg: LlamaConfig, seed: int = 0):
        super().__init__()
        self.cfg = cfg
        gen = torch.Generator().manual_seed(seed)
        self.embed = nn.Embedding(cfg.vocab, cfg.hidden)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.hidden, cfg.eps)
        self.lm_head = None if cfg.tie_embeddings else nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("norm.weight"):
                    p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
                else:
                    fan_in = p.shape[-1]
                    p.copy_(torch.randn(p.shape, generator=gen) / fan_in**0.5)
        inv = 1.0 / cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2).double() / cfg.head_dim)
        ang = torch.outer(torch.arange(cfg.max_seq).double(), inv)
        ang = torch.cat([ang, ang], dim=-1)  # rotate-half layout: (max_seq, head_dim)
        self.register_buffer("rope_cos", ang.cos().float(), persistent=False)
        self.register_buffer("rope_sin", ang.sin().float(), persistent=False)

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm(x)
        w = self.embed.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(x, w)

    def prefill(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
    ) -> torch.Tensor:
        """tokens (1, T), positions (T,) -> logits (1, T, V); the prompt's keys and values
        written into k_cache, v_cache (layers, 1, Hkv, max_seq, D) at slots `positions`."""
        cos = torch.index_select(self.rope_cos, 0, positions)
        sin = torch.index_select(self.rope_sin, 0, positions)
        x = self.embed(tokens)
        for i, blk in enumerate(self.blocks):
            h = blk.attn_norm(x)
            x = blk.mlp(x + blk.attn.prefill(h, cos, sin, positions, k_cache[i], v_cache[i]))
        return self._logits(x)

    def decode(
        self, token: torch.Tensor, pos: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor
    ) -> torch.Tensor:
        """token (1, 1), pos (1,) -> logits (1, 1, V); slot `pos` of the caches written."""
        cos = torch.index_select(self.rope_cos, 0, pos)
        sin = torch.index_select(self.rope_sin, 0, pos)
        x = self.embed(token)
        for i, blk in enumerate(self.blocks):
            o = blk.attn.decode(blk.attn_norm(x), cos, sin, pos, k_cache[i], v_cache[i])
            x = blk.mlp(x + o)
        return self._logits(x)


class Prefill(nn.Module):
    """`Llama.prefill` as a module's forward (what the exporters trace)."""

    def __init__(self, model: Llama):
        super().__init__()
        self.model = model

    def forward(self, tokens, positions, k_cache, v_cache):
        return self.model.prefill(tokens, positions, k_cache, v_cache)


class Decode(nn.Module):
    """`Llama.decode` as a module's forward."""

    def __init__(self, model: Llama):
        super().__init__()
        self.model = model

    def forward(self, token, pos, k_cache, v_cache):
        return self.model.decode(token, pos, k_cache, v_cache)


def cache_shape(cfg: LlamaConfig) -> tuple[int, ...]:
    return (cfg.layers, 1, cfg.kv_heads, cfg.max_seq, cfg.head_dim)


def new_cache(cfg: LlamaConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """An empty (k_cache, v_cache) pair for one sequence."""
    return torch.zeros(cache_shape(cfg)), torch.zeros(cache_shape(cfg))
