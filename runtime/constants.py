"""The numpy value of an IR constant (`fuel.constant`'s dense attribute)."""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr

from fuel_dialect.dtypes import dtype_name, shape_of
from runtime.dtypes import to_numpy
from runtime.rounding import is_half, narrow


def dense_array(attr: DenseIntOrFPElementsAttr) -> np.ndarray:
    """The numpy value of a dense constant attribute (a splat filled to its shape; a half
    literal rounded once from its decimal, by fuel's rule)."""
    t = attr.get_type()
    dt, shape = to_numpy(dtype_name(t)), shape_of(t)
    vals = list(attr.get_values())
    arr = np.asarray(vals, dtype=np.float64 if dt.kind == "V" or dt.kind == "f" else None)
    if arr.size == 1 and math.prod(shape) != 1:
        arr = np.full(shape, arr.reshape(()))
    if is_half(dt):
        return narrow(arr, dtype_name(t)).reshape(shape)
    return arr.astype(dt).reshape(shape)
