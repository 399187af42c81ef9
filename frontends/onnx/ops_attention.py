"""ONNX Attention (opsets 23-25) and RotaryEmbedding: `fuel.attention` / `fuel.rope` where they
express the node, else the reference formula in fuel primitives.

`fuel.attention` takes the node when there is no mask, softcap, window or qk output and the
causal frontier is its own bottom-right one (offset = total keys - queries): no cache with
Sq = Sk, a `past_key` cache with as many new keys as queries, or a `nonpad_kv_seqlen` of batch
1, which becomes its `kv_len` (the decode step of a static KV cache). A boolean mask that is a
live-length mask (`arange(Sk) <= pos`, see `frontends.kv_mask`; what torch's exporter makes of a
fixed-size cache's decode step) also becomes `kv_len` when the node is not causal.

Otherwise the node follows the ONNX reference step by step: Q and K each scaled by
sqrt(scale), K/V repeated per query group, QK^T, softcap, plus one additive bias (mask, causal
frontier at offset = past length or nonpad - Sq, sliding window, padding), softmax (optionally
at `softmax_precision`), rows whose bias or logits are all -inf zeroed, times V.
"""

from __future__ import annotations

import math

import numpy as np

from frontends.emit import Emitter, Tensor, Unsupported, dtype_of, scalar, shape_of_t
from frontends.kv_mask import KvMask, emit_kv_len, match_kv_mask
from frontends.onnx.dtypes import ONNX_TO_FUEL
from frontends.onnx.ops_elementwise import cast, cmp
from frontends.onnx.ops_movement import reshape_to
from frontends.onnx.registry import Node, onnx_op
from runtime.dtypes import to_numpy

ATTRS = (
    "is_causal kv_num_heads q_num_heads scale softcap softmax_precision "
    "qk_matmul_output_mode left_window_size right_window_size"
)


def _to_heads(em: Emitter, x: Tensor, heads: int | None) -> Tensor:
    """(B, S, H*D) -> (B, H, S, D); 4-D inputs pass."""
    s = shape_of_t(x)
    if len(s) == 4:
        return x
    if not heads or s[2] % heads:
        raise Unsupported(f"3-D input {list(s)} needs q_num_heads/kv_num_heads dividing it")
    split = reshape_to(em, x, (s[0], s[1], heads, s[2] // heads))
    return em.op("transpose", split, perm=[0, 2, 1, 3])


@onnx_op("Attention", attrs=ATTRS)
def attention(n: Node) -> tuple[Tensor, Tensor | None, Tensor | None, Tensor | None]:
    em = n.em
    q3 = n.x(0)
    q = _to_heads(em, q3, n.attr("q_num_heads"))
    k = _to_heads(em, n.x(1), n.attr("kv_num_heads"))
    v = _to_heads(em, n.x(2), n.attr("kv_num_heads"))
    past_k, past_v = n.input(4), n.input(5)
    if (past_k is None) != (past_v is None):
        raise Unsupported("past_key and past_value must be given together")
    past = shape_of_t(past_k)[2] if past_k is not None else 0
    if past_k is not None:
        k = em.apply(lambda g, a, b: g.concat([a, b], 2), past_k, k)
        v = em.apply(lambda g, a, b: g.concat([a, b], 2), past_v, v)
    present_k, present_v = k, v
    hq, hkv = shape_of_t(q)[1], shape_of_t(k)[1]
    if hkv == 0 or hq % hkv:
        raise Unsupported(f"query heads ({hq}) must be a multiple of kv heads ({hkv})")
    live = _live_mask(n, k)
    y = _fast(n, q, k, v, past, live) if _fast_ok(n, q, k, past, live) else None
    qk_out = None
    if y is None:
        y, qk_out = _general(n, q, k, v, past)
    if len(shape_of_t(q3)) == 3:
        b, _, sq, dv = shape_of_t(y)
        y = reshape_to(em, em.op("transpose", y, perm=[0, 2, 1, 3]), (b, sq, hq * dv))
    return y, present_k, present_v, qk_out


def _scale(n: Node, q: Tensor) -> float:
    s = n.attr("scale")
    return 1 / math.sqrt(shape_of_t(q)[3]) if s is None else float(s)


def _windows(n: Node) -> tuple[int, int]:
    return int(n.attr("left_window_size", -1)), int(n.attr("right_window_size", -1))


def _live_mask(n: Node, k: Tensor) -> KvMask | None:
    """The mask input as a live length, when it is one and nothing else constrains the keys."""
    mask = n.input(3)
    if mask is None or n.input(6) is not None or n.attr("is_causal", 0):
        return None
    return match_kv_mask(mask, shape_of_t(k)[2], n.em.b.weights)


def _fast_ok(n: Node, q: Tensor, k: Tensor, past: int, live: KvMask | None) -> bool:
    t = dtype_of(q)
    precision = n.attr("softmax_precision")
    sq, sk = shape_of_t(q)[2], shape_of_t(k)[2]
    nonpad = n.input(6)
    causal_ok = not n.attr("is_causal", 0) or (sk - past == sq if nonpad is None else True)
    mask_ok = n.input(3) is None or live is not None
    return (
        mask_ok
        and float(n.attr("softcap", 0.0)) <= 0
        and not n.wants(3)
        and _windows(n) == (-1, -1)
        and causal_ok
        and (nonpad is None or (past == 0 and shape_of_t(q)[0] == 1))
        and (precision is None or ONNX_TO_FUEL.get(precision) in (t, "f32"))
    )


def _fast(n: Node, q: Tensor, k: Tensor, v: Tensor, past: int, live: KvMask | None) -> Tensor:
    causal, scale = bool(n.attr("is_causal", 0)), _scale(n, q)
    nonpad = n.input(6)
    if nonpad is None and live is None:
        return n.em.op("attention", q, k, v, causal=causal, scale=scale)
    if live is not None:
        kv_len = emit_kv_len(n.em, live)
    else:
        kv_len = reshape_to(n.em, cast(n.em, nonpad, "i64"), ())
    return n.em.apply(
        lambda g, a, b, c, m: g.attention(a, b, c, causal=causal, scale=scale, kv_len=m),
        q,
        k,
        v,
        kv_len,
    )


def _repeat_heads(em: Emitter, x: Tensor, group: int) -> Tensor:
    """(B, Hkv, S, D) -> (B, Hkv * group, S, D), each kv head repeated `group` times."""
    if group == 1:
        return x
    b, h, s, d = shape_of_t(x)
    wide = em.op("broadcast", reshape_to(em, x, (b, h, 1, s, d)), shape=(b, h, group, s, d))
    return reshape_to(em, wide, (b, h * group, s, d))


def _general(n: Node, q: Tensor, k: Tensor, v: Tensor, past: int) -> tuple[Tensor, Tensor | None]:
    em, t = n.em, dtype_of(q)
    root = scalar(math.sqrt(_scale(n, q)), t)
    group = shape_of_t(q)[1] // shape_of_t(k)[1]
    k, v = _repeat_heads(em, k, group), _repeat_heads(em, v, group)
    kt = em.op("transpose", em.op("mul", k, root), perm=[0, 1, 3, 2])
    qk = em.op("matmul", em.op("mul", q, root), kt)
    cap = float(n.attr("softcap", 0.0))
    if cap > 0:
        c = scalar(cap, t)
        qk = em.op("mul", em.op("tanh", em.op("div", qk, c)), c)
    bias = _bias(n, t, shape_of_t(q)[2], shape_of_t(k)[2], past)
    logits = qk if bias is None else em.op("add", qk, bias)
    mode = int(n.attr("qk_matmul_output_mode", 0))
    precision = n.attr("softmax_precision")
    work = t if precision is None else ONNX_TO_FUEL.get(int(precision), "")
    if not work:
        raise Unsupported(f"softmax_precision {precision} is not supported")
    p = em.op("softmax", cast(em, logits, work), axis=3)
    for masked in [logits] + ([bias] if bias is not None else []):
        top = em.op("reduce_max", cast(em, masked, work), axes=[-1], keepdim=True)
        p = em.op("where", cmp(em, "eq", top, scalar(-np.inf, work)), scalar(0, work), p)
    p = cast(em, p, t)
    qk_out = {0: qk, 1: qk, 2: logits, 3: p}.get(mode) if n.wants(3) else None
    if n.wants(3) and qk_out is None:
        raise Unsupported(f"qk_matmul_output_mode {mode} is not supported")
    return em.op("matmul", p, v), qk_out


def _bias(n: Node, t: str, sq: int, sk: int, past: int) -> Tensor | None:
    """The additive bias: mask (bool -> 0/-inf, padded with -inf to Sk), causal frontier,
    sliding window and padding, each 0 where allowed and -inf elsewhere."""
    em, parts = n.em, []
    mask, nonpad = n.input(3), n.input(6)
    if mask is not None:
        ms = shape_of_t(mask)
        if ms[-1] < sk:  # a shorter mask is padded with "not allowed"
            pad = (*ms[:-1], sk - ms[-1])
            is_bool = dtype_of(mask) == "i1"
            fill = np.zeros(pad, bool) if is_bool else np.full(pad, -np.inf, to_numpy(t))
            mask = em.apply(lambda g, a, b: g.concat([a, b], len(ms) - 1), mask, fill)
        parts.append(_allowed_to_bias(em, mask, t) if dtype_of(mask) == "i1" else mask)
    if nonpad is not None:
        if past:
            raise Unsupported("nonpad_kv_seqlen cannot be combined with past_key")
        nb = reshape_to(em, cast(em, nonpad, "i64"), (shape_of_t(nonpad)[0], 1, 1))  # (B,1,1)
        offset = em.op("sub", nb, scalar(sq, "i64"))
    else:
        offset = scalar(past, "i64")
    diff = np.arange(sq)[:, None] - np.arange(sk)[None, :]  # i - j, (Sq, Sk)
    rel = em.op("add", diff.astype(np.int64), offset)  # i + offset - j, (B?, Sq, Sk)
    left, right = _windows(n)
    rules = [("ge", 0)] if n.attr("is_causal", 0) else []
    rules += [("le", left)] if left >= 0 else []
    rules += [("ge", -right)] if right >= 0 else []
    for kind, bound in rules:
        allowed = cmp(em, kind, rel, scalar(bound, "i64"))
        parts.append(_per_batch(em, _allowed_to_bias(em, allowed, t)))
    if nonpad is not None:
        live = cmp(em, "lt", np.arange(sk, dtype=np.int64), nb)  # (B, 1, Sk)
        parts.append(_per_batch(em, _allowed_to_bias(em, live, t)))
    if not parts:
        return None
    total = parts[0]
    for part in parts[1:]:
        total = em.op("add", total, part)
    return total


def _allowed_to_bias(em: Emitter, allowed: Tensor, t: str) -> Tensor:
    return em.op("where", allowed, scalar(0, t), scalar(-np.inf, t))


def _per_batch(em: Emitter, x: Tensor) -> Tensor:
    """A (B, Sq, Sk) bias gets its head axis: (B, 1, Sq, Sk); (Sq, Sk) passes."""
    s = shape_of_t(x)
    return x if len(s) == 2 else reshape_to(em, x, (s[0], 1, s[1], s[2]))


@onnx_op("RotaryEmbedding", attrs="interleaved rotary_embedding_dim num_heads")
def rotary_embedding(n: Node) -> Tensor:
    """`fuel.rope` over the first `rotary_embedding_dim` features of each head when the
    (position-gathered) cos/sin tables are shared by the batch (batch 1, or equal constant
    rows); otherwise the reference's products in fuel primitives."""
    em, x = n.em, n.x(0)
    s = shape_of_t(x)
    x4 = _to_heads(em, x, n.attr("num_heads"))  # (B, H, S, D)
    b, _, sq, d = shape_of_t(x4)
    rd = int(n.attr("rotary_embedding_dim", 0)) or d
    cos, sin, pos = n.x(1), n.x(2), n.input(3)
    if pos is not None:
        cos, sin = (em.op("gather", t, pos, axis=0) for t in (cos, sin))
    if shape_of_t(cos) != (b, sq, rd // 2) or rd % 2 or rd > d:
        raise Unsupported(
            f"cos/sin of shape {list(shape_of_t(cos))} do not fit input "
            f"{list(s)} with rotary_embedding_dim {rd}"
        )
    heads = shape_of_t(x4)[1]
    xr = x4 if rd == d else em.op("slice", x4, starts=[0] * 4, limits=[b, heads, sq, rd])
    interleaved = bool(n.attr("interleaved", 0))
    cos2, sin2 = _shared_table(em, cos), _shared_table(em, sin)
    if cos2 is not None and sin2 is not None:
        yr = em.op("rope", xr, cos2, sin2, interleaved=interleaved)
    else:
        yr = _rope_primitive(em, xr, cos, sin, interleaved)
    if rd != d:
        rest = em.op("slice", x4, starts=[0, 0, 0, rd], limits=list(shape_of_t(x4)))
        yr = em.apply(lambda g, a, c: g.concat([a, c], 3), yr, rest)
    if len(s) == 4:
        return yr
    return reshape_to(em, em.op("transpose", yr, perm=[0, 2, 1, 3]), s)


def _shared_table(em: Emitter, t: Tensor) -> Tensor | None:
    """A (B, S, h) table as (S, h) when every batch row is the same, else None."""
    b = shape_of_t(t)[0]
    if b == 1:
        return reshape_to(em, t, shape_of_t(t)[1:])
    if isinstance(t, np.ndarray) and (t == t[:1]).all():
        return np.ascontiguousarray(t[0])
    return None


def _rope_primitive(em: Emitter, x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool) -> Tensor:
    b, h, sq, d = shape_of_t(x)
    half = d // 2
    c, s = (reshape_to(em, t, (b, 1, sq, half)) for t in (cos, sin))
    if interleaved:
        x1, x2 = (
            em.op("slice", x, starts=[0, 0, 0, k], limits=[b, h, sq, d], steps=[1, 1, 1, 2])
            for k in (0, 1)
        )
    else:
        x1 = em.op("slice", x, starts=[0, 0, 0, 0], limits=[b, h, sq, half])
        x2 = em.op("slice", x, starts=[0, 0, 0, half], limits=[b, h, sq, d])
    real = em.op("sub", em.op("mul", c, x1), em.op("mul", s, x2))
    imag = em.op("add", em.op("mul", s, x1), em.op("mul", c, x2))
    if not interleaved:
        return em.apply(lambda g, a, i: g.concat([a, i], 3), real, imag)
    pairs = [reshape_to(em, t, (b, h, sq, half, 1)) for t in (real, imag)]
    return reshape_to(em, em.apply(lambda g, a, i: g.concat([a, i], 4), *pairs), (b, h, sq, d))
