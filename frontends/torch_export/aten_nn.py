"""aten linear algebra, reductions and nn ops: linear/addmm/mm/bmm/matmul, mean/sum/amax/amin,
softmax/log_softmax, layer_norm/rms_norm, and scaled_dot_product_attention.

`scaled_dot_product_attention` becomes `fuel.attention` when fuel's op says the same thing:
no dropout; `is_causal` with as many queries as keys (torch aligns the causal frontier top-left,
fuel bottom-right: equal only then); and an `attn_mask` only when it is a live-length mask
(`arange(Sk) <= pos`, see `frontends.kv_mask`), which becomes `kv_len`. GQA needs no repeat:
`fuel.attention` reads kv head `h // (Hq / Hkv)`, which is torch's `enable_gqa`, and a
`repeat_kv` expansion (`k[:, :, None].expand(..).reshape(..)`) is undone. Anything else
follows torch's math reference in fuel primitives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from xdsl.ir import OpResult, SSAValue

from frontends.emit import (
    Tensor,
    Unsupported,
    cumulative_sum,
    dtype_of,
    scalar,
    shape_of_t,
    sym_shape_t,
)
from frontends.kv_mask import emit_kv_len, match_kv_mask
from frontends.torch_export.aten_movement import permute, slice_
from frontends.torch_export.aten_ops import FUEL_TO_TORCH, Cx, Value, aten, axis, cast, reshape
from fuel_dialect.ops_movement import BroadcastOp, ReshapeOp
from runtime.dtypes import to_numpy

# -- linear algebra -----------------------------------------------------------------------


def transposed(cx: Cx, w: Tensor) -> Tensor:
    """`w.T` (2-D); a parameter is transposed once at import, keeping its name + `.T`."""
    if not isinstance(w, np.ndarray):
        return permute(cx, w, [1, 0])
    hit = cx.transposed.get(id(w))
    if hit is None or hit[0] is not w:
        wt = np.ascontiguousarray(w.T)
        named = cx.em._names.get(id(w))  # noqa: SLF001 - the emitter's constant names
        if named is not None and named[0] is w:
            cx.em.name(wt, f"{named[1]}.T")
        if id(w) in getattr(cx.em, "state", ()):
            cx.em.state.add(id(wt))  # type: ignore[attr-defined]
        hit = cx.transposed[id(w)] = (w, wt)
    return hit[1]


def matmul_nd(cx: Cx, a: Tensor, b: Tensor) -> Tensor:
    """torch.matmul: 1-D operands get a unit dim (removed again), the rest broadcast."""
    sa, sb = shape_of_t(a), shape_of_t(b)
    if not sa or not sb:
        raise Unsupported("matmul of a 0-d tensor")
    a2 = reshape(cx, a, (1, *sa)) if len(sa) == 1 else a
    b2 = reshape(cx, b, (*sb, 1)) if len(sb) == 1 else b
    return reshape(cx, cx.op("matmul", a2, b2), cx.shape)


@aten("linear.default")
def linear(cx: Cx, x: Tensor, w: Tensor, bias: Tensor | None = None) -> Tensor:
    y = matmul_nd(cx, x, transposed(cx, w)) if len(shape_of_t(w)) == 2 else None
    if y is None:
        raise Unsupported("linear with a weight that is not 2-D")
    return y if bias is None else cx.op("add", y, bias)


@aten("addmm.default")
def addmm(
    cx: Cx, bias: Tensor, a: Tensor, b: Tensor, *, beta: Value = 1, alpha: Value = 1
) -> Tensor:
    t = cx.dtype
    y = cx.op("matmul", a, b)
    y = y if alpha == 1 else cx.op("mul", y, scalar(alpha, t))
    if beta == 0:
        return y
    return cx.op("add", y, bias if beta == 1 else cx.op("mul", bias, scalar(beta, t)))


@aten("mm.default", "bmm.default", "matmul.default")
def matmul(cx: Cx, a: Tensor, b: Tensor) -> Tensor:
    return matmul_nd(cx, a, b)


# -- reductions ---------------------------------------------------------------------------

REDUCE = {"mean": "reduce_mean", "sum": "reduce_sum", "amax": "reduce_max", "amin": "reduce_min"}


def _dims(x: Tensor, dim: Value) -> list[int]:
    rank = len(shape_of_t(x))
    if dim is None or dim == []:
        return list(range(rank))
    return [axis(d, rank) for d in ([dim] if isinstance(dim, int) else dim)]


def _reduce(method: str) -> object:
    def reduce(cx: Cx, x: Tensor, dim: Value = None, keepdim: bool = False, **kw: Value) -> Tensor:
        axes = _dims(x, dim)
        y = cast(cx.em, x, cx.dtype)
        return y if not axes else cx.op(method, y, axes=axes, keepdim=bool(keepdim))

    return reduce


REDUCE_OVERLOADS = {
    "mean": ("dim", "default"),
    "sum": ("dim_IntList", "default"),
    "amax": ("default",),
    "amin": ("default",),
}
for _name, _method in REDUCE.items():
    for _ov in REDUCE_OVERLOADS[_name]:
        aten(f"{_name}.{_ov}")(_reduce(_method))


@aten("any.dim", "any.dims", "any.default", "all.dim", "all.dims", "all.default")
def any_all(cx: Cx, x: Tensor, dim: Value = None, keepdim: bool = False) -> Tensor:
    """On 0/1 values: any = max > 0, all = min > 0 (in f32: fuel reduces numbers)."""
    axes = _dims(x, dim)
    ones = cx.em.apply(lambda g, a, z: g.compare("ne", a, z), x, scalar(0, dtype_of(x)))
    f = cast(cx.em, ones, "f32")
    method = "reduce_max" if str(cx.node.target).startswith("aten.any") else "reduce_min"
    r = cx.op(method, f, axes=axes, keepdim=bool(keepdim)) if axes else f
    return cx.em.apply(lambda g, a, z: g.compare("gt", a, z), r, scalar(0.0, "f32"))


@aten("cumsum.default")
def cumsum(cx: Cx, x: Tensor, dim: int, *, dtype: Value = None) -> Tensor:
    """Running sums along `dim` in the result dtype (bools and ints sum as i64, as torch)."""
    s = shape_of_t(x)
    if not s:
        return cast(cx.em, x, cx.dtype)
    return cumulative_sum(cx.em, cast(cx.em, x, cx.dtype), axis(dim, len(s)), False, False)


@aten("diff.default")
def diff(
    cx: Cx, x: Tensor, n: int = 1, dim: int = -1, prepend: Value = None, append: Value = None
) -> Tensor:
    """`n` forward differences along `dim` of `prepend ++ x ++ append`: `b - a` of neighbours,
    `a != b` on bools (torch's rule)."""
    d = axis(dim, len(shape_of_t(x)))
    parts = [t for t in (prepend, x, append) if t is not None]
    y = parts[0] if len(parts) == 1 else cx.em.apply(lambda g, *vs: g.concat(list(vs), d), *parts)
    for _ in range(n):
        size = sym_shape_t(cx.em, y)[d]
        lo, hi = slice_(cx, y, d, 0, size - 1), slice_(cx, y, d, 1, size)
        if dtype_of(y) == "i1":
            y = cx.em.apply(lambda g, a, b: g.compare("ne", a, b), hi, lo)
        else:
            y = cx.op("sub", hi, lo)
    return y


@aten("softmax.int", "_softmax.default", "_safe_softmax.default")
def softmax(cx: Cx, x: Tensor, dim: int, *args: Value, **kw: Value) -> Tensor:
    return cx.op("softmax", cast(cx.em, x, cx.dtype), axis=axis(dim, len(shape_of_t(x))))


@aten("log_softmax.int", "_log_softmax.default")
def log_softmax(cx: Cx, x: Tensor, dim: int, *args: Value) -> Tensor:
    """x - max - log(sum(exp(x - max)))."""
    x = cast(cx.em, x, cx.dtype)
    d = axis(dim, len(shape_of_t(x)))
    shifted = cx.op("sub", x, cx.op("reduce_max", x, axes=[d], keepdim=True))
    lse = cx.op("log", cx.op("reduce_sum", cx.op("exp", shifted), axes=[d], keepdim=True))
    return cx.op("sub", shifted, lse)


# -- normalisation ------------------------------------------------------------------------


def _norm_param(p: Tensor | None, n: int, fill: float, t: str) -> Tensor:
    return np.full((n,), fill, to_numpy(t)) if p is None else p


@aten("layer_norm.default", "native_layer_norm.default")
def layer_norm(
    cx: Cx,
    x: Tensor,
    shape: Sequence[int],
    w: Tensor | None = None,
    b: Tensor | None = None,
    eps: float = 1e-5,
    *args: Value,
) -> Value:
    if len(shape) != 1:
        raise Unsupported(f"layer_norm over {len(shape)} trailing dims (fuel normalises one)")
    t, n = dtype_of(x), int(shape[0])
    y = cx.op("layer_norm", x, _norm_param(w, n, 1.0, t), _norm_param(b, n, 0.0, t), eps=eps)
    return (y, None, None) if str(cx.node.target).startswith("aten.native") else y


@aten("rms_norm.default")
def rms_norm(
    cx: Cx, x: Tensor, shape: Sequence[int], w: Tensor | None = None, eps: float | None = None
) -> Tensor:
    if len(shape) != 1:
        raise Unsupported(f"rms_norm over {len(shape)} trailing dims (fuel normalises one)")
    t, n = dtype_of(x), int(shape[0])
    if eps is None:  # torch's default: the dtype's machine epsilon
        eps = float(torch.finfo(FUEL_TO_TORCH[t]).eps)
    return cx.op("rms_norm", x, _norm_param(w, n, 1.0, t), eps=eps)


# -- attention ----------------------------------------------------------------------------


@aten("scaled_dot_product_attention.default")
def sdpa(
    cx: Cx,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    if dropout_p:
        raise Unsupported("attention dropout (export the model in eval mode)")
    if not len(shape_of_t(q)) == len(shape_of_t(k)) == len(shape_of_t(v)) == 4:
        raise Unsupported("attention on tensors that are not (batch, heads, seq, head_dim)")
    sq, sk = shape_of_t(q)[2], shape_of_t(k)[2]
    scale = 1 / math.sqrt(shape_of_t(q)[3]) if scale is None else float(scale)
    live = None if attn_mask is None else match_kv_mask(attn_mask, sk, cx.weights)
    if (attn_mask is None or live is not None) and (not is_causal or sq == sk):
        k, v = ungroup(cx, k, v)
        if live is None:
            return cx.op("attention", q, k, v, causal=bool(is_causal), scale=scale)
        kv_len = emit_kv_len(cx.em, live)
        return cx.em.apply(
            lambda g, a, b, c, n: g.attention(a, b, c, scale=scale, kv_len=n), q, k, v, kv_len
        )
    return _sdpa_reference(cx, q, k, v, attn_mask, bool(is_causal), scale)


def _repeated(x: Tensor) -> tuple[SSAValue, int] | None:
    """(source, group) when `x` is `reshape(broadcast(reshape(src)))` repeating each kv head
    `group` times: (B, Hkv, S, D) -> (B, Hkv, 1, S, D) -> (B, Hkv, g, S, D) -> (B, Hkv*g, S, D),
    the `repeat_kv` of Llama-style code (`k[:, :, None].expand(...).reshape(...)`)."""
    if not isinstance(x, OpResult) or not isinstance(x.owner, ReshapeOp):
        return None
    wide = x.owner.input
    if not isinstance(wide, OpResult) or not isinstance(wide.owner, BroadcastOp):
        return None
    src = wide.owner.input
    (b, hq, s, d), ws, ss = shape_of_t(x), shape_of_t(wide), shape_of_t(src)
    if len(ws) != 5 or ss != (ws[0], ws[1], 1, ws[3], ws[4]) or (b, s, d) != (ws[0], *ws[3:]):
        return None
    return (src, ws[2]) if ws[1] * ws[2] == hq else None


def ungroup(cx: Cx, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    """k and v without a repeat_kv expansion (same group for both): `fuel.attention` reads
    kv head `h // group` itself, so the repeated copies need not exist."""
    rk, rv = _repeated(k), _repeated(v)
    if rk is None or rv is None or rk[1] != rv[1]:
        return k, v
    b, h, _, s, d = shape_of_t(rk[0])
    return reshape(cx, rk[0], (b, h, s, d)), reshape(cx, rv[0], (b, h, s, d))


def _repeat_heads(cx: Cx, x: Tensor, group: int) -> Tensor:
    if group == 1:
        return x
    b, h, s, d = shape_of_t(x)
    wide = cx.op("broadcast", reshape(cx, x, (b, h, 1, s, d)), shape=(b, h, group, s, d))
    return reshape(cx, wide, (b, h * group, s, d))


def _sdpa_reference(
    cx: Cx, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool, scale: float
) -> Tensor:
    """torch's math SDPA: softmax(q k^T * scale + bias) v, fully masked rows zero."""
    t = dtype_of(q)
    sq, sk = shape_of_t(q)[2], shape_of_t(k)[2]
    group = shape_of_t(q)[1] // shape_of_t(k)[1]
    k, v = _repeat_heads(cx, k, group), _repeat_heads(cx, v, group)
    logits = cx.op("mul", cx.op("matmul", q, permute(cx, k, [0, 1, 3, 2])), scalar(scale, t))
    bias = None
    if causal:
        bias = np.where(np.tril(np.ones((sq, sk), bool)), 0.0, -np.inf).astype(to_numpy(t))
    if mask is not None:
        if dtype_of(mask) == "i1":
            mask = cx.op("where", mask, scalar(0.0, t), scalar(-np.inf, t))
        bias = mask if bias is None else cx.op("add", bias, cast(cx.em, mask, t))
    if bias is not None:
        logits = cx.op("add", logits, cast(cx.em, bias, t))
    p = cx.op("softmax", logits, axis=3)
    if bias is not None:
        top = cx.op("reduce_max", logits, axes=[-1], keepdim=True)
        dead = cx.em.apply(lambda g, a, b: g.compare("eq", a, b), top, scalar(-np.inf, t))
        p = cx.op("where", dead, scalar(0.0, t), p)
    return cx.op("matmul", p, v)
