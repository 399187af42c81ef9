"""Patterns of `fuel.rope` and `fuel.attention` over primitive fuel IR (what an ONNX or torch
export of a Llama-style block contains), and their builders. See `passes.fused.patterns`.

* rope, the rotate-half form: `x * cos + rotate_half(x) * sin` with `rotate_half(x) =
  concat(-x[..., D/2:], x[..., :D/2])` and full-width tables whose two halves are equal (HF
  Llama's `cat(freqs, freqs)`): `concat(c, c)`, `cos/sin(concat(f, f))`, an inline constant,
  or rows of a constant or weight table (a decode step's `gather(W, pos)`, a prefill's `W` or
  its row slice). Weight values are read only under `known_weights`; otherwise a weight's halves
  are unknown and the pattern does not match.
* attention: `softmax(q @ transpose(k) * scale (+ mask)) @ v` over rank-4 heads, in the forms
  the exporters write (`passes.fused.attention_forms`: the scale on q, kᵀ or the scores, the
  post-softmax NaN guard, kᵀ by any transpose). An inline causal constant (added, 0 kept and
  <= MASK_FLOOR masked, or selected with `where`) becomes `causal`; any other float added to
  the scores becomes the additive `mask` operand, and `where(b, scores, fill)` the built mask
  `where(b, 0, fill)`. Without a guard, a mask that may make a row all -inf is not fused. k and
  v optionally expanded from fewer kv heads (HF `repeat_kv`: reshape, broadcast, reshape), which
  becomes grouped-query attention.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    UnitAttr,
    f64,
    i64,
)
from xdsl.ir import Operation, OpResult, SSAValue

from fuel_dialect.dtypes import dtype_name, shape_of, tensor_type
from fuel_dialect.ops_elementwise import AddOp, CosOp, DivOp, MulOp, NegOp, SinOp, WhereOp
from fuel_dialect.ops_movement import (
    BroadcastOp,
    ConcatOp,
    ConstantOp,
    GatherOp,
    ReshapeOp,
    SliceOp,
    TransposeOp,
)
from fuel_dialect.ops_nn import AttentionOp, MatmulOp, RopeOp, SoftmaxOp
from fuel_dialect.shapes import TO_END
from passes.fused import attention_forms as forms
from passes.fused.patterns import (
    FusedMatch,
    constant_array,
    either,
    is_float,
    known_array,
    match_softmax,
    producer,
)
from passes.fused.symbolic import dims_of, same_type

MASK_FLOOR = -1.0e4
"""An additive mask entry at or below this masks its key. The fused kernel masks with -inf;
the decomposition's exp(s + m - max) underflows to exactly 0 in f32 and narrower whenever a
row's kept scores span less than |m| - 104, so both agree unless scores span ~10^4."""

# -- rope ------------------------------------------------------------------------------------


def _is_half(sl: SliceOp, upper: bool) -> bool:
    """`sl` takes the upper (or lower) half of its input's last dim and everything else."""
    s = shape_of(sl.input.type)
    h = s[-1] // 2
    lo, hi, steps = sl.bounds()
    want_lo = (*(0,) * (len(s) - 1), h if upper else 0)
    whole = all(e >= TO_END or e == d >= 0 for e, d in zip(hi[:-1], s[:-1], strict=True))
    ends = whole and hi[-1] == (2 * h if upper else h)
    return lo == want_lo and ends and all(st == 1 for st in steps) and h > 0


def rotate_half(v: SSAValue) -> tuple[SSAValue, tuple[Operation, ...]] | None:
    """`concat(neg(x[..., D/2:]), x[..., :D/2], axis=-1)` defining `v` -> (x, ops)."""
    cat = producer(v, ConcatOp)
    s = shape_of(v.type)
    if cat is None or len(cat.inputs) != 2 or not s or s[-1] % 2:
        return None
    if cat.kernel_params()["axis"] != len(s) - 1:
        return None
    neg = producer(cat.inputs[0], NegOp)
    hi = producer(neg.input, SliceOp) if neg is not None else None
    lo = producer(cat.inputs[1], SliceOp)
    if hi is None or lo is None or hi.input != lo.input or not same_type(hi.input, v):
        return None
    if not (_is_half(hi, upper=True) and _is_half(lo, upper=False)):
        return None
    return hi.input, (lo, hi, neg, cat)


def _row_table(t: SSAValue) -> np.ndarray | None:
    """The values of the table whose last-dim rows `t`'s rows are: `t`'s own (a constant, a
    known weight), or through a gather along a leading axis or a slice keeping the last dim."""
    if (g := producer(t, GatherOp)) is not None:
        leading = g.kernel_params()["axis"] < len(shape_of(g.data.type)) - 1
        return _row_table(g.data) if leading else None
    if (sl := producer(t, SliceOp)) is not None:
        lo, hi, steps = sl.bounds()
        whole = (lo[-1], hi[-1], steps[-1]) == (0, shape_of(sl.input.type)[-1], 1)
        return _row_table(sl.input) if whole else None
    return known_array(t)


def _equal_halves(arr: np.ndarray | None) -> bool:
    h = arr.shape[-1] // 2 if arr is not None and arr.ndim else 0
    return arr is not None and h > 0 and np.array_equal(arr[..., :h], arr[..., h:])


def _strip_ones(v: SSAValue) -> tuple[Any, ...]:
    """`v`'s dims (`dims_of`) without its leading 1s."""
    d = dims_of(v)
    lead = next((i for i, n in enumerate(d) if n != 1), len(d))
    return d[lead:]


def half_table(t: SSAValue, x: SSAValue) -> tuple[Any, ...] | None:
    """How to make the (S, D/2) table fuel.rope takes from a full-width table `t` of shape
    (1.., S, D) whose halves are equal: ("value", c), ("unary", cls, f), ("const", array) or
    ("lower", t) (`t`'s first half: rows of a table checked to have equal halves). A reshape
    that only adds or drops leading 1s is looked through."""
    s = shape_of(t.type)
    if len(s) < 2 or dims_of(t)[-2:] != dims_of(x)[-2:] or math.prod(s[:-2]) != 1:
        return None
    if (r := producer(t, ReshapeOp)) is not None and _strip_ones(r.input) == _strip_ones(t):
        return half_table(r.input, x)  # an unsqueeze (HF's `cos.unsqueeze(1)`): the same rows
    cat = producer(t, ConcatOp)
    if cat is not None and len(cat.inputs) == 2 and cat.inputs[0] == cat.inputs[1]:
        if cat.kernel_params()["axis"] == len(s) - 1:
            return ("value", cat.inputs[0])
    for cls in (CosOp, SinOp):
        if (u := producer(t, cls)) is not None and (inner := half_table(u.input, x)) is not None:
            return ("unary", cls, inner[1]) if inner[0] == "value" else None
    if _equal_halves(arr := constant_array(t)):
        return ("const", arr[..., : s[-1] // 2].reshape(s[-2], s[-1] // 2))  # pyright: ignore
    # Not baked: a weight's half would duplicate data, and slicing a gathered row is cheap.
    return ("lower", t) if arr is None and _equal_halves(_row_table(t)) else None


def match_rope(root: Operation) -> FusedMatch | None:
    """add(mul(x, cos), mul(rotate_half(x), sin)), any operand orders."""
    if not isinstance(root, AddOp) or not is_float(root.result):
        return None

    def split(a_v: SSAValue, b_v: SSAValue) -> FusedMatch | None:
        ma, mb = producer(a_v, MulOp), producer(b_v, MulOp)
        rot = either(mb, lambda r, s: (rotate_half(r), s) if rotate_half(r) else None)
        if ma is None or rot is None:
            return None
        (x, rot_ops), sin = rot
        cos = ma.rhs if ma.lhs == x else ma.lhs if ma.rhs == x else None
        same = cos is not None and all(same_type(r.result, x) for r in (root, ma, mb))
        if not same:
            return None
        c, s = half_table(cos, x), half_table(sin, x)
        if c is None or s is None:
            return None
        ops = (*rot_ops, ma, mb, root)
        return FusedMatch(root, ops, (x, cos, sin), {"cos": c, "sin": s})

    return either(root, split)


def _first_half(t: SSAValue) -> SliceOp:
    """`t[..., :D/2]`."""
    s = shape_of(t.type)
    hi = [*s[:-1], s[-1] // 2]
    bounds = {"starts": [0] * len(s), "limits": hi, "steps": [1] * len(s)}
    props = {k: DenseArrayBase.from_list(i64, v) for k, v in bounds.items()}
    half = tensor_type(hi, dtype_name(t.type))
    return SliceOp.create(operands=[t], result_types=[half], properties=props)


def _realize(recipe: tuple[Any, ...], x: SSAValue) -> tuple[list[Operation], SSAValue]:
    """The ops making a `half_table` recipe's (S, D/2) table, and that value."""
    s = shape_of(x.type)
    want = tensor_type((s[-2], s[-1] // 2), dtype_name(x.type))
    ops: list[Operation] = []
    if recipe[0] == "const":
        data = recipe[1].ravel().tolist()
        ops.append(ConstantOp(DenseIntOrFPElementsAttr.from_list(want, data)))
    elif recipe[0] == "lower":
        ops.append(_first_half(recipe[1]))
    elif recipe[0] == "unary":
        ops.append(recipe[1].create(operands=[recipe[2]], result_types=[recipe[2].type]))
    value = ops[-1].results[0] if ops else recipe[1]
    if value.type != want:
        ops.append(ReshapeOp.create(operands=[value], result_types=[want]))
        value = ops[-1].results[0]
    return ops, value


def build_rope(m: FusedMatch) -> Sequence[Operation]:
    x = m.inputs[0]
    cos_ops, cos = _realize(m.params["cos"], x)
    sin_ops, sin = _realize(m.params["sin"], x)
    rope = RopeOp.create(operands=[x, cos, sin], result_types=[x.type])
    return [*cos_ops, *sin_ops, rope]


# -- attention -------------------------------------------------------------------------------


def causal_keep(sq: int, sk: int) -> np.ndarray:
    """keep[i, j]: the bottom-right aligned causal mask of fuel.attention (j <= i + sk - sq)."""
    return np.arange(sk)[None, :] <= np.arange(sq)[:, None] + (sk - sq)


def _plane(arr: np.ndarray | None, sq: int, sk: int) -> np.ndarray | None:
    """A constant of shape (1.., sq, sk) as its (sq, sk) plane."""
    if arr is None or arr.shape[-2:] != (sq, sk) or math.prod(arr.shape[:-2]) != 1:
        return None
    return arr.reshape(sq, sk)


Masked = tuple[SSAValue, tuple[Operation, ...], bool, Any]
"""(scores, ops, causal, mask): mask None, ("value", m) an additive mask operand, or ("where",
b, fill) the additive mask `where(b, 0, fill)` to build."""


def _mask(v: SSAValue) -> Masked | None:
    """Look through the mask of the logits `v` (see `attention_forms`): a constant causal plane
    becomes `causal`; None: an add or where that is no mask of attention's."""
    sq, sk = shape_of(v.type)[-2:]
    if (add := producer(v, AddOp)) is not None:

        def split(s_v: SSAValue, m_v: SSAValue) -> Any:
            if not same_type(s_v, v):
                return None
            arr = _plane(constant_array(m_v), sq, sk)
            if arr is not None and ((arr == 0) | (arr <= MASK_FLOOR)).all():
                if np.array_equal(arr == 0, causal_keep(sq, sk)):
                    return (s_v, (add,), True, None)
            ok = forms.additive_mask(m_v, v) and not _derived(m_v, s_v)
            return (s_v, (add,), False, ("value", m_v)) if ok else None

        return either(add, split)
    if (w := producer(v, WhereOp)) is not None:
        fill = forms.where_fill(w, MASK_FLOOR)
        if fill is None or not same_type(w.lhs, v):
            return None
        keep = _plane(constant_array(w.cond), sq, sk)
        if keep is not None and np.array_equal(keep != 0, causal_keep(sq, sk)):
            return (w.lhs, (w,), True, None)
        cs = shape_of(w.cond.type)
        if not 1 <= len(cs) <= 4 or _derived(w.cond, w.lhs):
            return None
        return (w.lhs, (w,), False, ("where", w.cond, fill))
    return v, (), False, None


def _derived(m: SSAValue, s: SSAValue, depth: int = 8) -> bool:
    """Whether `m` is (within `depth` producers) computed from `s`: such a mask depends on
    the scores themselves and is no mask."""
    if m == s:
        return True
    if depth == 0 or not isinstance(m, OpResult):
        return False
    return any(_derived(o, s, depth - 1) for o in m.owner.operands)


def _kv_heads(v: SSAValue) -> tuple[SSAValue, tuple[Operation, ...]]:
    """Look through HF `repeat_kv` (reshape to (B, Hkv, 1, S, D), broadcast to (B, Hkv, r, S,
    D), reshape to (B, Hkv*r, S, D)) -> (the unexpanded kv, ops)."""
    r2 = producer(v, ReshapeOp)
    bc = producer(r2.input, BroadcastOp) if r2 is not None else None
    r1 = producer(bc.input, ReshapeOp) if bc is not None else None
    if r1 is None or len(base := dims_of(r1.input)) != 4:
        return v, ()
    b, hkv, s, d = base
    rep = dims_of(bc.result)[2] if len(dims_of(bc.result)) == 5 else 0
    if (
        not isinstance(hkv, int)
        or not isinstance(rep, int)
        or dims_of(r1.result) != (b, hkv, 1, s, d)
        or dims_of(bc.result) != (b, hkv, rep, s, d)
        or dims_of(v) != (b, hkv * rep, s, d)
    ):
        return v, ()
    return r1.input, (r1, bc, r2)


def _softmax(p: SSAValue) -> tuple[SSAValue, tuple[Operation, ...]] | None:
    """A last-axis softmax defining `p` (fuel.softmax or its primitives) -> (input, ops)."""
    last = len(shape_of(p.type)) - 1
    if (sm := producer(p, SoftmaxOp)) is not None and sm.kernel_params()["axis"] == last:
        return sm.input, (sm,)
    m = match_softmax(p.owner) if isinstance(p.owner, DivOp) else None  # type: ignore[arg-type]
    return (m.inputs[0], m.ops) if m is not None and m.params["axis"] == last else None


def match_attention(root: Operation) -> FusedMatch | None:
    """matmul(guard(softmax(mask(scale(matmul(scale(q), scale(transpose(k))))))), v), rank-4
    heads; each part in any of its exporter forms (`passes.fused.attention_forms`)."""
    if not isinstance(root, MatmulOp) or len(shape_of(root.result.type)) != 4:
        return None
    if not is_float(root.result):
        return None
    p, guard_ops = forms.nan_guard(root.lhs)
    sm = _softmax(p)
    masked = _mask(sm[0]) if sm is not None else None
    if sm is None or masked is None:
        return None
    scores, scale_ops, scale = forms.scaled(masked[0])
    qk = producer(scores, MatmulOp)
    kt = forms.key(qk.rhs) if qk is not None else None
    if kt is None:
        return None
    q, q_ops, q_scale = forms.scaled(qk.lhs)
    kx, kt_ops, perm, k_scale = kt
    (k, k_ops) = _kv_heads(kx) if perm is None else (kx, ())
    (v, v_ops), mask = _kv_heads(root.rhs), masked[3]
    qs, vs = dims_of(q), dims_of(v)
    ks = dims_of(k) if perm is None else tuple(dims_of(k)[i] for i in perm)
    if len(qs) != 4 or ks[:3] != vs[:3] or qs[0] != ks[0] or qs[3] != ks[3]:
        return None
    if not isinstance(qs[1], int) or not isinstance(ks[1], int) or qs[1] % ks[1]:
        return None
    if not guard_ops and not _no_empty_rows(masked, qs[2], ks[2]):
        return None  # a row of all -inf: softmax gives NaN there, the kernel zeros
    ops = (*k_ops, *kt_ops, *q_ops, qk, *scale_ops, *masked[1], *sm[1], *guard_ops, *v_ops, root)
    inputs = (q, k, v) if mask is None or mask[0] != "value" else (q, k, v, mask[1])
    params = {"scale": scale * q_scale * k_scale, "causal": masked[2], "perm": perm}
    return FusedMatch(root, ops, inputs, {**params, "mask": mask})


def _no_empty_rows(masked: Masked, sq: Any, sk: Any) -> bool:
    """Without a NaN guard: no row of logits can be all -inf (the kernel zeros such a row,
    softmax makes it NaN)."""
    causal, mask = masked[2], masked[3]
    if causal and sq != sk and not (isinstance(sq, int) and isinstance(sk, int) and sk >= sq):
        return False
    if mask is None:
        return True
    if mask[0] == "where":
        return mask[2] != -math.inf
    return forms.never_neg_inf(mask[1])


def build_attention(m: FusedMatch) -> Sequence[Operation]:
    q, k, v = m.inputs[:3]
    ops: list[Operation] = []
    if (perm := m.params["perm"]) is not None:
        ks = shape_of(k.type)
        kt = tensor_type(tuple(ks[i] for i in perm), dtype_name(k.type))
        props = {"perm": DenseArrayBase.from_list(i64, list(perm))}
        ops.append(TransposeOp.create(operands=[k], result_types=[kt], properties=props))
        k = ops[-1].results[0]
    operands = [q, k, v]
    mask = m.params["mask"]
    if mask is not None and mask[0] == "value":
        operands.append(m.inputs[3])
    elif mask is not None:
        ops.extend(_where_mask(mask[1], mask[2], q))
        operands.append(ops[-1].results[0])
    segments = [1, 1, 1, 0, 1 if len(operands) == 4 else 0]
    attrs: dict[str, Any] = {
        "scale": FloatAttr(m.params["scale"], f64),
        "operandSegmentSizes": DenseArrayBase.from_list(IntegerAttr(0, 32).type, segments),
    }
    if m.params["causal"]:
        attrs["causal"] = UnitAttr()
    result = [m.root.results[0].type]
    return [*ops, AttentionOp.create(operands=operands, result_types=result, properties=attrs)]


def _where_mask(b: SSAValue, fill: float, q: SSAValue) -> list[Operation]:
    """`where(b, 0, fill)` in q's element type: the additive form of a boolean mask."""
    scalar = tensor_type((), dtype_name(q.type))
    zero = ConstantOp(DenseIntOrFPElementsAttr.from_list(scalar, [0.0]))
    low = ConstantOp(DenseIntOrFPElementsAttr.from_list(scalar, [fill]))
    out = tensor_type(shape_of(b.type), dtype_name(q.type))
    where = WhereOp.create(operands=[b, zero.result, low.result], result_types=[out])
    return [zero, low, where]
