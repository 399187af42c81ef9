"""IEEE 754-2019 `maximum` / `minimum` on ties of signed zeros, for max/min and their reductions.

IEEE 754-2019 orders -0 below +0 in `maximum` and `minimum`: max(-0, +0) is +0 and min(-0, +0)
is -0, in either order. numpy's loops return one of two equal operands, which one depending on
the dtype (its f32/f64 SIMD loops the second, f16 and long double the first) and, in a
reduction, on the lane order; so after numpy has selected, a zero result gets the sign IEEE
gives it. Everything else (NaN propagation, non-zero values) is numpy's selection, unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ZERO_TIE_BITS = {np.maximum: np.bitwise_and, np.minimum: np.bitwise_or}
"""On a tie of two zeros, max has a sign bit only when both operands have one (AND of the
bits: a zero's other bits are all 0), min when either has (OR)."""


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def settle_zero_ties(uf: np.ufunc, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """Give `out = uf(a, b)` (np.maximum or np.minimum, broadcast) IEEE's sign on zero ties."""
    tie = (a == 0) & (b == 0)
    if tie.any():
        x, y = (np.asarray(v, out.dtype) for v in (a, b))
        np.copyto(_bits(out), ZERO_TIE_BITS[uf](_bits(x), _bits(y)), where=tie)


def settle_zero_extrema(
    uf: np.ufunc, x: np.ndarray, axes: Sequence[int], keepdims: bool, out: np.ndarray
) -> None:
    """Give `out = uf.reduce(x, axes)` IEEE's sign where the extremum is a zero: a max is -0
    only when no +0 takes part, a min is -0 when any -0 does."""
    zero = out == 0
    if not zero.any():
        return
    sign = (_bits(x) >> (8 * x.dtype.itemsize - 1)).astype(bool)
    wanted = (x == 0) & (sign if uf is np.minimum else ~sign)  # a -0 for min, a +0 for max
    found = np.logical_or.reduce(wanted, tuple(axes), keepdims=keepdims)
    negative = found if uf is np.minimum else ~found
    np.copyto(out, np.where(negative, -0.0, 0.0).astype(out.dtype), where=zero)
