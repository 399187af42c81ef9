"""Layout ops built from movement ops: Pad (all four modes), DepthToSpace and SpaceToDepth.

Pad crops negative pads with a slice; `constant` mode then concatenates fill blocks, and the
`edge`, `reflect` and `wrap` modes gather along each axis the index map numpy's own `pad`
gives `arange(dim)` (which is how the ONNX reference defines them).
"""

from __future__ import annotations

import numpy as np

from frontends.emit import Emitter, Tensor, Unsupported, dtype_of, shape_of_t
from frontends.onnx.ops_movement import reshape_to, take
from frontends.onnx.registry import Node, onnx_op
from fuel_dialect.dtypes import normalize_axis
from runtime.dtypes import to_numpy

MODES = ("constant", "reflect", "edge", "wrap")


@onnx_op("Pad", attrs="mode pads value")
def pad(n: Node) -> Tensor:
    x, em = n.x(), n.em
    s, mode = shape_of_t(x), n.attr("mode", "constant")
    if mode not in MODES:
        raise Unsupported(f"mode '{mode}' is not supported ({', '.join(MODES)})")
    pads = n.ints(1, "pads") if n.opset >= 11 else n.attr("pads")
    axes = (n.ints(3, "axes") if n.opset >= 18 else None) or list(range(len(s)))
    if pads is None or len(pads) != 2 * len(axes):
        raise Unsupported(f"pads {pads} need a begin and an end per padded axis")
    value = _fill_value(n)
    widths = [(0, 0)] * len(s)
    for i, a in enumerate(axes):
        norm = normalize_axis(int(a), len(s))
        if norm is None:
            raise Unsupported(f"axis {a} is out of range for rank {len(s)}")
        widths[norm] = (pads[i], pads[i + len(axes)])
    crop = [range(max(0, -b), d - max(0, -e)) for (b, e), d in zip(widths, s, strict=True)]
    x = take(em, x, crop)
    for axis, (b, e) in enumerate(widths):
        b, e = max(b, 0), max(e, 0)
        if b or e:
            x = _pad_axis(em, x, axis, b, e, mode, value)
    return x


def _fill_value(n: Node) -> float:
    if n.opset < 11:
        return float(n.attr("value", 0.0))
    c = n.const(2, "constant_value")
    return 0.0 if c is None or c.size == 0 else c.reshape(-1)[0].item()


def _pad_axis(em: Emitter, x: Tensor, axis: int, b: int, e: int, mode: str, value: float) -> Tensor:
    s = list(shape_of_t(x))
    if mode != "constant":
        if s[axis] == 0:
            raise Unsupported(f"cannot {mode}-pad an empty axis")
        idx = np.pad(np.arange(s[axis]), (b, e), mode=mode).astype(np.int64)
        return em.op("gather", x, idx, axis=axis)
    dt = to_numpy(dtype_of(x))
    blocks = [
        np.full([b if i == axis else d for i, d in enumerate(s)], value).astype(dt),
        x,
        np.full([e if i == axis else d for i, d in enumerate(s)], value).astype(dt),
    ]
    kept = [blk for blk in blocks if shape_of_t(blk)[axis]]
    return em.apply(lambda g, *vs: g.concat(list(vs), axis), *kept)


@onnx_op("DepthToSpace", attrs="blocksize mode")
def depth_to_space(n: Node) -> Tensor:
    """(N, C, H, W) -> (N, C / b^2, H b, W b); DCR (default) or CRD channel order."""
    x, em = n.x(), n.em
    (nb, c, h, w), b = shape_of_t(x), int(n.attr("blocksize"))
    if n.attr("mode", "DCR") == "DCR":
        y = reshape_to(em, x, (nb, b, b, c // (b * b), h, w))
        perm = [0, 3, 4, 1, 5, 2]
    else:
        y = reshape_to(em, x, (nb, c // (b * b), b, b, h, w))
        perm = [0, 1, 4, 2, 5, 3]
    y = em.op("transpose", y, perm=perm)
    return reshape_to(em, y, (nb, c // (b * b), h * b, w * b))


@onnx_op("SpaceToDepth", attrs="blocksize")
def space_to_depth(n: Node) -> Tensor:
    """(N, C, H, W) -> (N, C b^2, H / b, W / b)."""
    x, em = n.x(), n.em
    (nb, c, h, w), b = shape_of_t(x), int(n.attr("blocksize"))
    y = reshape_to(em, x, (nb, c, h // b, b, w // b, b))
    y = em.op("transpose", y, perm=[0, 3, 5, 1, 2, 4])
    return reshape_to(em, y, (nb, c * b * b, h // b, w // b))
