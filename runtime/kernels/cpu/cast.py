"""Cast kernels: every ordered pair of the nine fuel dtypes (S -> S is a copy).

Semantics: float -> int truncates toward zero (defined for in-range finite values only);
anything -> i1 is `x != 0` (NaN -> true); i1 -> number gives 0/1; int -> float and wide float ->
narrow float round to nearest even, correctly (from the source value, never through an
intermediate RNE). Integer -> integer wraps modulo 2^bits. Conversions into or out of f16/bf16
are fuel's own (`runtime.rounding`: one correct rounding, a NaN becomes the quiet NaN of the
destination with its sign); the others are numpy's, exact or IEEE correctly rounded.
"""

from __future__ import annotations

import numpy as np

from runtime.binding_table import Kernel, KernelBindingTable
from runtime.kernels.cpu._common import ALL, Arrays, Params, add, exact, per_element_cost
from runtime.rounding import HALF, narrow_into, widen_into


def _copy() -> Kernel:
    def cast_copy(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        np.copyto(outputs[0], inputs[0])

    return cast_copy


def _convert() -> Kernel:
    def cast_convert(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        np.copyto(outputs[0], inputs[0], casting="unsafe")

    return cast_convert


def _narrow() -> Kernel:
    def cast_narrow(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        narrow_into(inputs[0], outputs[0])

    return cast_narrow


def _widen() -> Kernel:
    def cast_widen(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        widen_into(inputs[0], outputs[0])

    return cast_widen


def make_cast(src: str, dst: str) -> Kernel:
    """The cast kernel of one (source, destination) pair."""
    if src == dst:
        return _copy()
    if dst in HALF:
        return _narrow()
    if src in HALF and dst in ("f32", "f64"):
        return _widen()
    return _convert()


def register_cast(table: KernelBindingTable) -> None:
    """Register `cast` for all 81 (source, destination) dtype pairs."""
    cost = per_element_cost(0.0)
    claim = exact("exact or correctly rounded (RNE); float->int truncates, in range only")
    for src in ALL:
        for dst in ALL:
            kernel = make_cast(src, dst)
            add(table, "cast", (src, dst), kernel, claim, cost)
