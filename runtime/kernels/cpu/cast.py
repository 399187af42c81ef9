"""Cast kernels: every ordered pair of the nine fuel dtypes (S -> S is a copy).

Semantics: float -> int truncates toward zero (defined for in-range finite values only);
anything -> i1 is `x != 0` (NaN -> true); i1 -> number gives 0/1; int -> float and wide float ->
narrow float round to nearest even, correctly (from the source value, never through an
intermediate RNE). Integer -> integer wraps modulo 2^bits. numpy's own conversions are correct
for every pair except those ml_dtypes routes through f32 (f64/i64/i32 -> bf16), which
`special` re-rounds to odd first.
"""

from __future__ import annotations

import numpy as np

from runtime.binding_table import Kernel, KernelBindingTable
from runtime.kernels.cpu import special
from runtime.kernels.cpu._common import ALL, Arrays, Params, add, exact, per_element_cost

_TO_BF16_SPECIAL = {
    "f64": special.f64_to_bf16,
    "i64": special.i64_to_bf16,
    "i32": special.i64_to_bf16,
}
"""Sources whose ml_dtypes conversion to bf16 double-rounds through f32."""


def _copy() -> Kernel:
    def cast_copy(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        np.copyto(outputs[0], inputs[0])

    return cast_copy


def _convert() -> Kernel:
    def cast_convert(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        np.copyto(outputs[0], inputs[0], casting="unsafe")

    return cast_convert


def _to_bf16(convert: special.ConvertInto) -> Kernel:
    def cast_to_bf16(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        convert(inputs[0], outputs[0])

    return cast_to_bf16


def register_cast(table: KernelBindingTable) -> None:
    """Register `cast` for all 81 (source, destination) dtype pairs."""
    cost = per_element_cost(0.0)
    claim = exact("exact or correctly rounded (RNE); float->int truncates, in range only")
    for src in ALL:
        for dst in ALL:
            if src == dst:
                kernel = _copy()
            elif dst == "bf16" and src in _TO_BF16_SPECIAL:
                kernel = _to_bf16(_TO_BF16_SPECIAL[src])
            else:
                kernel = _convert()
            add(table, "cast", (src, dst), kernel, claim, cost, also=(special.f64_to_bf16,))
