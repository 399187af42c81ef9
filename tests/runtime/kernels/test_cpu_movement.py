"""Movement kernels: reshape, transpose, slice, concat, gather (all dtypes, views, errors)."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.dtypes import ALL_DTYPES, NUMPY_DTYPES
from runtime.kernels.cpu.library import hand_registered_table

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


# -- where selecting positions along one axis (a KV-cache update: pure data movement) --------

WHERE_CASES = [  # (cond shape, positions set, a shape, b shape)
    ((1, 1, 16, 1), [3], (1, 2, 1, 8), (1, 2, 16, 8)),  # one row of a decode step
    ((1, 1, 16, 1), [], (1, 2, 1, 8), (1, 2, 16, 8)),  # none
    ((1, 1, 16, 1), [0, 15], (1, 2, 16, 8), (1, 2, 16, 8)),  # a full along the axis
    ((1, 1, 16, 1), list(range(0, 16, 2)), (1, 2, 1, 8), (1, 2, 16, 8)),  # many: the mask
    ((16,), [5, 6], (), (8, 16)),  # the last axis, a 0-d a
    ((6, 1, 1), [1], (4, 4), (6, 4, 4)),  # the first axis, a broadcast in front
    ((1, 16, 1), [2], (1, 1, 1), (3, 16, 8)),  # b and a broadcast along other axes
]


@pytest.mark.parametrize(("cshape", "hits", "ashape", "bshape"), WHERE_CASES)
@pytest.mark.parametrize("t", ALL_DTYPES)
def test_where_along_one_axis_is_exact(cshape, hits, ashape, bshape, t: str) -> None:
    cond = np.zeros(cshape, bool)
    cond.reshape(-1)[hits] = True
    a = values(t, ashape) if ashape else values(t, (1,)).reshape(())
    b = values(t, bshape)
    if t in ("f16", "f32", "f64", "bf16"):  # bits that only a copy keeps
        b.reshape(-1)[:3] = np.array([-0.0, np.nan, -np.inf]).astype(b.dtype)
    shape = np.broadcast_shapes(cshape, a.shape, b.shape)
    out = run("where", ("i1", t, t, t), [cond, a, b], np.empty(shape, b.dtype))
    assert out.tobytes() == np.where(cond, a, b).astype(b.dtype).tobytes()


def test_where_axis_is_the_one_axis_cond_varies_along() -> None:
    from runtime.kernels.cpu.elementwise import _where_axis

    out = np.empty((1, 2, 16, 8))
    assert _where_axis(np.zeros((1, 1, 16, 1), bool), out) == 2
    assert _where_axis(np.zeros((16, 1), bool), out) == 2
    assert _where_axis(np.zeros((2, 16, 1), bool), out) is None  # two axes: the mask
    assert _where_axis(np.zeros((1, 1), bool), out) is None  # a scalar
    assert _where_axis(np.zeros((16, 8), bool), np.empty((16, 8))) is None  # no broadcast
