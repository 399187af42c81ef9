"""Data-movement kernels: `reshape`, `transpose`, `broadcast`, `slice`, `concat`, `gather`,
`index_copy` (all dtypes).

* reshape: out = x.reshape(out.shape) in C order.
* transpose (perm): out = x.transpose(perm).
* broadcast: out = numpy.broadcast_to(x, out.shape).
* slice (starts, limits, steps; one entry per dim, normalised): out = x[start:limit:step, ...].
* concat (axis; variadic inputs, key canonicalised to (T, T)): numpy concatenate.
* gather (axis; indices i64/i32): numpy `take`: out shape = data.shape[:axis] + indices.shape
  + data.shape[axis + 1:]; negative indices count from the end; out of range -> IndexError.
* index_copy (axis, offsets; index i64/i32): out = dest, then source's rows along axis written
  at index, in the block at offsets. When out is dest's own buffer (the executor runs the op in
  place) only source's rows are written; an index outside [0, dest.shape[axis]) -> IndexError.

All are exact copies (REFERENCE claims).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from runtime.binding_table import Kernel, KernelBindingTable
from runtime.cost import CostEstimate, numel
from runtime.dtypes import NUMPY_DTYPES
from runtime.kernels.cpu._common import (
    ALL,
    Arrays,
    Params,
    Shapes,
    add,
    copy_cost,
    exact,
    operand_bytes,
)

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


def _index_copy() -> Kernel:
    def index_copy(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        dest, source, index = inputs
        out, axis = outputs[0], params["axis"]
        if not np.may_share_memory(out, dest):  # in place: dest's other rows are already there
            np.copyto(out, dest)
        n = out.shape[axis]
        if index.size and (int(index.min()) < 0 or int(index.max()) >= n):
            raise IndexError(
                f"index_copy: index {index.tolist()} out of range for axis {axis} of size {n} "
                f"(valid: 0 .. {n - 1})"
            )
        offsets = params["offsets"]
        block: list[object] = [slice(o, o + d) for o, d in zip(offsets, source.shape, strict=True)]
        i = int(index[0]) if index.size == 1 else None
        block[axis] = slice(i, i + 1) if i is not None else index
        out[tuple(block)] = source

    return index_copy


def write_rows_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """index_copy run in place: the source rows read and written, the index read (a fresh
    output would add reading and writing all of dest)."""
    src = numel(shapes[1]) * NUMPY_DTYPES[dtypes[1]].itemsize
    return CostEstimate(0.0, 2.0 * src + operand_bytes(shapes[2:3], dtypes[2:3]), 1500.0)


def register_movement(table: KernelBindingTable) -> None:
    """Register the movement ops for all nine dtypes (gather, index_copy: x {i64, i32}
    indices)."""
    claim = exact("exact copy")
    for t in ALL:
        add(table, "reshape", (t, t), _reshape(), claim, copy_cost)
        add(table, "transpose", (t, t), _transpose(), claim, copy_cost)
        add(table, "broadcast", (t, t), _broadcast(), claim, copy_cost)
        add(table, "slice", (t, t), _slice(), claim, copy_cost)
        add(table, "concat", (t, t), _concat(), claim, copy_cost)
        for ix in GATHER_INDEX_DTYPES:
            add(table, "gather", (t, ix, t), _gather(), claim, copy_cost)
            add(table, "index_copy", (t, t, ix, t), _index_copy(), claim, write_rows_cost)
