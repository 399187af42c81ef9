"""Data-movement kernels: `reshape`, `transpose`, `broadcast`, `slice`, `concat`, `gather` (all
dtypes).

* reshape: out = x.reshape(out.shape) in C order.
* transpose (perm): out = x.transpose(perm).
* broadcast: out = numpy.broadcast_to(x, out.shape).
* slice (starts, limits, steps; one entry per dim, normalised): out = x[start:limit:step, ...].
* concat (axis; variadic inputs, key canonicalised to (T, T)): numpy concatenate.
* gather (axis; indices i64/i32): numpy `take`: out shape = data.shape[:axis] + indices.shape
  + data.shape[axis + 1:]; negative indices count from the end; out of range -> IndexError.

All are exact copies (REFERENCE claims).
"""

from __future__ import annotations

import numpy as np

from runtime.binding_table import Kernel, KernelBindingTable
from runtime.kernels.cpu._common import ALL, Arrays, Params, add, copy_cost, exact

GATHER_INDEX_DTYPES = ("i64", "i32")


def _reshape() -> Kernel:
    def reshape(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        x, out = inputs[0], outputs[0]
        if out.flags.c_contiguous:  # a view of out in x's shape: one strided copy
            np.copyto(out.reshape(x.shape), x)
        else:
            out[...] = x.reshape(out.shape)

    return reshape


def _transpose() -> Kernel:
    def transpose(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        np.copyto(outputs[0], inputs[0].transpose(params["perm"]))

    return transpose


def _broadcast() -> Kernel:
    def broadcast(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        np.copyto(outputs[0], np.broadcast_to(inputs[0], outputs[0].shape))

    return broadcast


def _slice() -> Kernel:
    def slice_(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        index = tuple(map(slice, params["starts"], params["limits"], params["steps"]))
        np.copyto(outputs[0], inputs[0][index])

    return slice_


def _concat() -> Kernel:
    def concat(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        np.concatenate(inputs, axis=params["axis"], out=outputs[0])

    return concat


def _gather() -> Kernel:
    def gather(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        data, indices = inputs
        axis = params["axis"]
        try:
            np.take(data, indices, axis=axis, out=outputs[0], mode="raise")
        except IndexError as e:
            raise IndexError(
                f"gather: index out of range for axis {axis} of size {data.shape[axis]} "
                f"(valid: -{data.shape[axis]} .. {data.shape[axis] - 1}): {e}"
            ) from None

    return gather


def register_movement(table: KernelBindingTable) -> None:
    """Register the movement ops for all nine dtypes (gather: x {i64, i32} indices)."""
    claim = exact("exact copy")
    for t in ALL:
        add(table, "reshape", (t, t), _reshape(), claim, copy_cost)
        add(table, "transpose", (t, t), _transpose(), claim, copy_cost)
        add(table, "broadcast", (t, t), _broadcast(), claim, copy_cost)
        add(table, "slice", (t, t), _slice(), claim, copy_cost)
        add(table, "concat", (t, t), _concat(), claim, copy_cost)
        for ix in GATHER_INDEX_DTYPES:
            add(table, "gather", (t, ix, t), _gather(), claim, copy_cost)
