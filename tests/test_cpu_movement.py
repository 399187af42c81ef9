"""Movement kernels: reshape, transpose, slice, concat, gather (all dtypes, views, errors)."""

from __future__ import annotations

import numpy as np
import pytest

from lowering.cpu.kernels import hand_registered_table
from runtime.dtypes import ALL_DTYPES, NUMPY_DTYPES

TABLE = hand_registered_table()


def run(op: str, dtypes: tuple[str, ...], inputs, out, params=None) -> np.ndarray:
    TABLE.lookup_with_caps(op, dtypes, "cpu").kernel(list(inputs), [out], params or {})
    return out


def values(t: str, shape) -> np.ndarray:
    n = int(np.prod(shape))
    return (np.arange(n) % 7 > 2 if t == "i1" else np.arange(n).astype(NUMPY_DTYPES[t])).reshape(
        shape
    )


@pytest.mark.parametrize("t", ALL_DTYPES)
def test_reshape_from_views_and_into_non_contiguous_out(t: str) -> None:
    x = values(t, (4, 6)).T  # (6, 4), not contiguous
    out = run("reshape", (t, t), [x], np.empty((3, 8), NUMPY_DTYPES[t]))
    np.testing.assert_array_equal(out, x.reshape(3, 8))
    fortran = np.empty((3, 8), NUMPY_DTYPES[t], order="F")
    np.testing.assert_array_equal(run("reshape", (t, t), [x], fortran), x.reshape(3, 8))


@pytest.mark.parametrize("t", ALL_DTYPES)
def test_transpose_and_slice(t: str) -> None:
    x = values(t, (3, 4, 5))
    out = run("transpose", (t, t), [x], np.empty((5, 3, 4), x.dtype), {"perm": (2, 0, 1)})
    np.testing.assert_array_equal(out, x.transpose(2, 0, 1))
    p = {"starts": (0, 1, 4), "limits": (3, 4, 5), "steps": (2, 2, 1)}
    out = run("slice", (t, t), [x], np.empty((2, 2, 1), x.dtype), p)
    np.testing.assert_array_equal(out, x[0:3:2, 1:4:2, 4:5])


@pytest.mark.parametrize("n_inputs", [1, 2, 4])
def test_concat_is_variadic_under_one_key(n_inputs: int) -> None:
    parts = [values("bf16", (2, k + 1)) for k in range(n_inputs)]
    parts[0] = np.broadcast_to(parts[0][:1], parts[0].shape)  # a stride-0 input
    width = sum(p.shape[1] for p in parts)
    out = run("concat", ("bf16", "bf16"), parts, np.empty((2, width), parts[0].dtype), {"axis": 1})
    np.testing.assert_array_equal(out, np.concatenate(parts, axis=1))


@pytest.mark.parametrize("ix", ["i64", "i32"])
@pytest.mark.parametrize("t", ALL_DTYPES)
def test_gather_is_numpy_take(t: str, ix: str) -> None:
    data = values(t, (4, 5))
    idx = np.array([[0, -1], [4, -5], [2, 2]], NUMPY_DTYPES[ix])
    out = run("gather", (t, ix, t), [data, idx], np.empty((4, 3, 2), data.dtype), {"axis": 1})
    np.testing.assert_array_equal(out, np.take(data, idx, axis=1))
    ridx = np.array([[0], [-1], [3]], NUMPY_DTYPES[ix])
    rows = run("gather", (t, ix, t), [data, ridx], np.empty((3, 1, 5), data.dtype), {"axis": 0})
    np.testing.assert_array_equal(rows, data[[[0], [3], [3]]])


@pytest.mark.parametrize("bad", [5, -6])
def test_gather_out_of_range_raises(bad: int) -> None:
    data = values("f32", (2, 5))
    idx = np.array([0, bad], np.int64)
    with pytest.raises(IndexError, match=r"gather: index out of range for axis 1 of size 5"):
        run("gather", ("f32", "i64", "f32"), [data, idx], np.empty((2, 2), np.float32), {"axis": 1})
