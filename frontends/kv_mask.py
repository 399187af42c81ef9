"""Recognise a KV cache's live-length mask and turn it into `fuel.attention`'s `kv_len`.

A decode step over a fixed-size cache attends to the first `n` slots with a boolean mask built
as `arange(Sk) < n` (or `arange(Sk) <= pos`, `n > arange(Sk)`, `pos >= arange(Sk)`), reshaped
or broadcast so that only its last axis varies. Exporters keep it as that comparison (torch's
SDPA `attn_mask`, ONNX `Attention`'s mask input); both importers ask `match_kv_mask` whether a
mask is one, and if so give the attention `kv_len = n` (or `pos + 1`) instead of the mask, the
form `fuel-emit-decode-flash` offers flash decoding for. The two are equal for every `n`:
the kernels clamp `kv_len` to `[0, Sk]`, as the mask does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from xdsl.ir import Operation, SSAValue

from frontends.emit import Emitter, Tensor, dtype_of, scalar, shape_of_t
from fuel_dialect import ops_elementwise as ew
from fuel_dialect.ops_movement import BroadcastOp, ConstantOp, ReshapeOp, WeightOp
from runtime.constants import dense_array

_CMP: dict[type[Operation], tuple[int, bool]] = {
    ew.LtOp: (0, False),
    ew.LeOp: (0, True),
    ew.GtOp: (1, False),
    ew.GeOp: (1, True),
}
"""comparison -> (operand holding the arange, whether the bound is inclusive)."""


@dataclass(frozen=True)
class KvMask:
    """A recognised mask: slot j is live iff `j < bound` (`j <= bound` when inclusive)."""

    bound: SSAValue
    inclusive: bool


def _const(v: SSAValue, weights: Mapping[str, np.ndarray]) -> np.ndarray | None:
    op = v.owner
    if isinstance(op, ConstantOp):
        return dense_array(op.value)
    if isinstance(op, WeightOp):
        return weights.get(op.sym_name.data)
    return None


def match_kv_mask(mask: Tensor, sk: int, weights: Mapping[str, np.ndarray]) -> KvMask | None:
    """The live-length form of `mask` (broadcastable to (..., Sq, Sk)), or None."""
    if not isinstance(mask, SSAValue) or dtype_of(mask) != "i1":
        return None
    s = shape_of_t(mask)
    if not s or s[-1] != sk or any(d != 1 for d in s[:-2]):
        return None
    v = mask
    while isinstance(v.owner, ReshapeOp | BroadcastOp):  # only the last axis may vary
        src = v.owner.input
        ss = shape_of_t(src)
        if not ss or ss[-1] != sk or any(d != 1 for d in ss[:-1]):
            return None
        v = src
    op = v.owner
    if type(op) not in _CMP:
        return None
    at, inclusive = _CMP[type(op)]
    ramp, bound = op.operands[at], op.operands[1 - at]
    arr = _const(ramp, weights)
    if arr is None or arr.size != sk or not np.array_equal(arr.reshape(-1), np.arange(sk)):
        return None
    if shape_of_t(ramp)[-1] != sk or np.prod(shape_of_t(bound)) != 1:
        return None
    if dtype_of(bound) not in ("i64", "i32"):
        return None
    return KvMask(bound, inclusive)


def emit_kv_len(em: Emitter, m: KvMask) -> Tensor:
    """`kv_len` (0-d i64) of a recognised mask: the bound, plus one when inclusive."""
    n = em.op("reshape", m.bound, shape=())
    if dtype_of(n) != "i64":
        n = em.op("cast", n, dtype="i64")
    return em.op("add", n, scalar(1, "i64")) if m.inclusive else n
