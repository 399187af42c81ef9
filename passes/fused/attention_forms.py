"""The exporter forms of attention's parts, read by `passes.fused.attention.match_attention`.

What `torch.onnx` (legacy and dynamo) and `torch.export` write for `softmax(q kᵀ s + m) v`:

* scale: `mul` or `div` by a scalar constant on q, on kᵀ (before or after its transpose), on
  both (SDPA's decomposition multiplies each side by sqrt(s)) or on the scores; the product of
  all of them is the scale (absent: 1, T5).
* kᵀ: a `transpose` whose permutation, with its last two entries swapped, gives k (B, H, S, D):
  HF's `transpose(-1, -2)` of k, or GPT-2/BERT's `permute(0, 2, 3, 1)` of the (B, S, H, D)
  projection (k is then that projection transposed by (0, 2, 1, 3), built by the fused arm);
  or the dynamo exporter's batched form, reshape (B*H, S, D) / transpose / reshape back.
* NaN guard: `where(p != p, 0, p)` (ONNX IsNaN) after the softmax, or torch.export's
  `where(rowmax(logits) == -inf, 0, p)`. The fused kernel gives a zero row where every logit
  is -inf, which is exactly what either guard makes of softmax's NaN row there; elsewhere
  softmax has no NaN to guard (finite q and k).
* mask: `scores + m` with m any float tensor broadcastable to the scores (built from
  `attention_mask`, a causal triu/compare, T5's position bias) becomes the additive mask
  operand, read as it is; `where(b, scores, fill)` with `fill` -inf (exact) or <= MASK_FLOOR
  becomes the additive mask `where(b, 0, fill)`, built by the fused arm.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from xdsl.ir import Operation, SSAValue

from fuel_dialect.dtypes import broadcast_shapes, shape_of
from fuel_dialect.ops_elementwise import CastOp, DivOp, EqOp, MulOp, NeOp, WhereOp
from fuel_dialect.ops_movement import BroadcastOp, ReshapeOp, TransposeOp
from fuel_dialect.ops_nn import ReduceMaxOp, SoftmaxOp
from passes.fused.patterns import (
    constant_array,
    either,
    known_array,
    last_axis,
    producer,
    scalar_constant,
)
from passes.fused.symbolic import dims_of, same_type

Scaled = tuple[SSAValue, tuple[Operation, ...], float]


def scaled(v: SSAValue) -> Scaled:
    """Look through a scalar scale of `v` (mul by c either side, or div by c) -> (x, ops, c);
    (v, (), 1.0) if there is none."""
    mul, div = producer(v, MulOp), producer(v, DivOp)

    def by(x: SSAValue, c: SSAValue) -> Scaled | None:
        k = scalar_constant(c)
        return (x, (mul,), k) if k is not None and same_type(x, v) else None

    found = either(mul, by)
    if found is not None:
        return found
    c = scalar_constant(div.rhs) if div is not None and same_type(div.lhs, v) else None
    return (div.lhs, (div,), 1.0 / c) if c else (v, (), 1.0)


def nan_guard(p: SSAValue) -> tuple[SSAValue, tuple[Operation, ...]]:
    """`where(ne(x, x), 0, x)` defining `p`, or torch.export's row guard `where(max(l) == -inf,
    0, softmax(l))` (the row max of softmax's own input) -> (x, ops); (p, ()) if unguarded."""
    w = producer(p, WhereOp)
    if w is None or not same_type(w.rhs, p) or scalar_constant(w.lhs) != 0.0:
        return p, ()
    ne, eq = producer(w.cond, NeOp), producer(w.cond, EqOp)
    if ne is not None and ne.lhs == ne.rhs == w.rhs:
        return w.rhs, (ne, w)
    found = either(
        eq, lambda r, c: (red, known_array(c)) if (red := producer(r, ReduceMaxOp)) else None
    )
    red, c = found if found is not None else (None, None)
    sm = producer(w.rhs, SoftmaxOp)
    if red is None or sm is None or red.input != sm.input or not last_axis(red):
        return p, ()
    if c is None or c.size != 1 or c.ravel()[0] != -math.inf or red.keepdim is None:
        return p, ()
    return w.rhs, (red, eq, w)


def _batched_transpose(kt: SSAValue) -> tuple[SSAValue, tuple[Operation, ...]] | None:
    """torch.onnx dynamo's kᵀ: reshape (B*H, S, D), transpose (0, 2, 1), reshape (B, H, D, S)
    -> (k, ops); the first reshape may read HF's repeat_kv expansion (B, Hkv, H/Hkv, S, D) of
    `reshape(k, (B, Hkv, 1, S, D))`, whose k then has Hkv heads (grouped-query)."""
    r2 = producer(kt, ReshapeOp)
    tr = producer(r2.input, TransposeOp) if r2 is not None else None
    r1 = producer(tr.input, ReshapeOp) if tr is not None else None
    if r1 is None or tr.kernel_params()["perm"] != (0, 2, 1):
        return None
    b, h, d, s = out if len(out := dims_of(kt)) == 4 else (0, 0, 0, 0)
    if not isinstance(h, int) or dims_of(r1.result) != (b * h, s, d) or not b:
        return None
    x, ops = r1.input, (r1, tr, r2)
    if dims_of(x) == (b, h, s, d):
        return x, ops
    bc = producer(x, BroadcastOp)
    r0 = producer(bc.input, ReshapeOp) if bc is not None else None
    if r0 is None or len(ks := dims_of(r0.input)) != 4 or not isinstance(hkv := ks[1], int):
        return None
    if h % max(hkv, 1) or ks != (b, hkv, s, d) or dims_of(r0.result) != (b, hkv, 1, s, d):
        return None
    return (r0.input, (r0, bc, *ops)) if dims_of(x) == (b, hkv, h // hkv, s, d) else None


def key(kt: SSAValue) -> tuple[SSAValue, tuple[Operation, ...], tuple[int, ...] | None, float]:
    """kᵀ (B, H, D, S), maybe scaled before and after its transpose -> (x, ops, perm, scale):
    k is `x` when perm is None, else `transpose(x, perm)`. None if kᵀ is not a transpose."""
    after, after_ops, c_after = scaled(kt)
    if (batched := _batched_transpose(after)) is not None:
        return batched[0], (*batched[1], *after_ops), None, c_after
    tr = producer(after, TransposeOp)
    if tr is None or len(p := tr.kernel_params()["perm"]) != 4:
        return None  # type: ignore[return-value]
    x, before_ops, c_before = scaled(tr.input)
    perm = (*p[:2], p[3], p[2])
    ops = (*before_ops, tr, *after_ops)
    return x, ops, (None if perm == (0, 1, 2, 3) else perm), c_after * c_before


def additive_mask(m: SSAValue, scores: SSAValue) -> bool:
    """`m` can be the additive mask operand of attention over `scores`: a float of the scores'
    element type, rank 1-4, broadcasting to the scores without growing them."""
    s, ms = shape_of(scores.type), shape_of(m.type)
    same = getattr(m.type, "element_type", None) == getattr(scores.type, "element_type", None)
    return same and 1 <= len(ms) <= 4 and broadcast_shapes(ms, s) == s


def never_neg_inf(m: SSAValue) -> bool:
    """`m` provably holds no -inf: known finite values, an int cast, or a `where` of such.
    (Then no row of logits is all -inf, and softmax makes no NaN that a guard would zero.)"""
    if (w := producer(m, WhereOp)) is not None:
        return never_neg_inf(w.lhs) and never_neg_inf(w.rhs)
    if (c := producer(m, CastOp)) is not None:
        elem = str(getattr(c.input.type, "element_type", ""))
        return elem.startswith("i")
    arr = known_array(m)
    return arr is not None and bool(np.all(arr > -math.inf))


def where_fill(w: Any, floor: float) -> float | None:
    """The fill of `where(b, scores, fill)` when it masks: -inf, or a scalar <= floor."""
    arr = constant_array(w.rhs)
    if arr is None:
        arr = known_array(w.rhs)
    if arr is None or arr.size != 1:
        return None
    fill = float(arr.ravel()[0])
    return fill if fill == -math.inf or fill <= floor else None
