"""The exporter forms of attention's parts, read by `passes.fused.attention.match_attention`.

What `torch.onnx` (legacy and dynamo) and `torch.export` write for `softmax(q kᵀ s + m) v`:

* scale: `mul` or `div` by a scalar constant on q, on kᵀ (before or after its transpose), on
  both (SDPA's decomposition multiplies each side by sqrt(s)) or on the scores; the product of
  all of them is the scale (absent: 1, T5).
* kᵀ: a `transpose` whose permutation, with its last two entries swapped, gives k (B, H, S, D):
  HF's `transpose(-1, -2)` of k, or GPT-2/BERT's `permute(0, 2, 3, 1)` of the (B, S, H, D)
  projection (k is then that projection transposed by (0, 2, 1, 3), built by the fused arm).
* NaN guard: `where(p != p, 0, p)` (ONNX IsNaN) after the softmax. The fused kernel gives a
  zero row where every logit is -inf, which is exactly what the guard makes of softmax's NaN
  row there; elsewhere softmax has no NaN to guard (finite q and k).
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
from fuel_dialect.ops_elementwise import CastOp, DivOp, MulOp, NeOp, WhereOp
from fuel_dialect.ops_movement import TransposeOp
from passes.fused.patterns import constant_array, either, known_array, producer, scalar_constant

Scaled = tuple[SSAValue, tuple[Operation, ...], float]


def scaled(v: SSAValue) -> Scaled:
    """Look through a scalar scale of `v` (mul by c either side, or div by c) -> (x, ops, c);
    (v, (), 1.0) if there is none."""
    mul, div = producer(v, MulOp), producer(v, DivOp)

    def by(x: SSAValue, c: SSAValue) -> Scaled | None:
        k = scalar_constant(c)
        return (x, (mul,), k) if k is not None and x.type == v.type else None

    found = either(mul, by)
    if found is not None:
        return found
    c = scalar_constant(div.rhs) if div is not None and div.lhs.type == v.type else None
    return (div.lhs, (div,), 1.0 / c) if c else (v, (), 1.0)


def nan_guard(p: SSAValue) -> tuple[SSAValue, tuple[Operation, ...]]:
    """`where(ne(x, x), 0, x)` defining `p` -> (x, ops); (p, ()) if `p` is not guarded."""
    w = producer(p, WhereOp)
    ne = producer(w.cond, NeOp) if w is not None else None
    if ne is None or ne.lhs != ne.rhs or ne.lhs != w.rhs or w.rhs.type != p.type:
        return p, ()
    return (w.rhs, (ne, w)) if scalar_constant(w.lhs) == 0.0 else (p, ())


def key(kt: SSAValue) -> tuple[SSAValue, tuple[Operation, ...], tuple[int, ...] | None, float]:
    """kᵀ (B, H, D, S), maybe scaled before and after its transpose -> (x, ops, perm, scale):
    k is `x` when perm is None, else `transpose(x, perm)`. None if kᵀ is not a transpose."""
    after, after_ops, c_after = scaled(kt)
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
