"""Triton movement kernels (transpose, slice, broadcast, concat, gather, where) vs the numpy CPU
kernels: byte-for-byte equal outputs for every dtype, on random bit patterns (NaN payloads
included), non-contiguous operands, broadcasting, odd sizes, walks deeper than six dims."""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import torch
from triton_helpers import entry

from lowering.triton.aot import kernel_specs
from runtime.binding_table import global_bindings
from runtime.dtypes import ALL_DTYPES, NUMPY_DTYPES

DEVICE = "cuda" if os.environ.get("FUEL_GPU") == "1" and torch.cuda.is_available() else "cpu"
SOME = ("f32", "bf16", "i1")  # one 4-, 2- and 1-byte dtype for the wider shape sweeps


def _data(shape: Sequence[int], dtype: str, salt: str = "") -> np.ndarray:
    """Random bits of `dtype` (bools for i1)."""
    rng = np.random.default_rng(zlib.crc32(f"{shape}{dtype}{salt}".encode()))
    if dtype == "i1":
        return rng.random(tuple(shape)) < 0.5
    nd = NUMPY_DTYPES[dtype]
    raw = rng.integers(0, 256, size=(*shape, nd.itemsize), dtype=np.uint8)
    return raw.view(nd).reshape(tuple(shape))


def _torch(a: np.ndarray, strided: bool = False) -> torch.Tensor:
    """`a` as a torch tensor (bits kept); `strided`: reversed-dim strides and a storage offset."""
    a = np.ascontiguousarray(a)
    bf16 = a.dtype == NUMPY_DTYPES["bf16"]
    t = torch.from_numpy(a.view(np.int16) if bf16 else a)
    t = (t.view(torch.bfloat16) if bf16 else t).to(DEVICE)
    if not strided:
        return t
    rev = list(range(t.dim()))[::-1]
    base = torch.empty((t.numel() + 5,), dtype=t.dtype, device=DEVICE)
    body = base[5:].view(tuple(t.shape[d] for d in rev))
    body.copy_(t.permute(rev))
    return body.permute(rev)


def _numpy(t: torch.Tensor) -> np.ndarray:
    t = t.cpu()
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(NUMPY_DTYPES["bf16"])
    return t.numpy()


def _check(op: str, key: tuple[str, ...], ins: Sequence[np.ndarray], out_shape: Sequence[int],
           params: dict[str, Any], strided: bool = False) -> None:  # fmt: skip
    """Run the CPU kernel and the Triton kernel at `key`; assert identical bytes."""
    want = np.empty(tuple(out_shape), NUMPY_DTYPES[key[-1]])
    cpu = global_bindings().lookup_alternatives(op, key, "cpu")[0]
    cpu.kernel(list(ins), [want], params)
    out = torch.empty(tuple(out_shape), dtype=_torch(want).dtype, device=DEVICE)
    entry(op, key).kernel([_torch(x, strided) for x in ins], [out], params)
    got = _numpy(out)
    assert got.shape == want.shape and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_every_dtype_is_a_bit_copy(dtype: str) -> None:
    x = _data((3, 37), dtype)
    _check("transpose", (dtype, dtype), [x], (37, 3), {"perm": (1, 0)})
    sl = {"starts": (1, 2), "limits": (3, 37), "steps": (1, 3)}
    _check("slice", (dtype, dtype), [x], (2, 12), sl)
    _check("broadcast", (dtype, dtype), [x[:1]], (2, 4, 37), {})
    _check("concat", (dtype, dtype), [x, x[:2]], (5, 37), {"axis": 0})
    _check("gather", (dtype, "i64", dtype), [x, np.array([2, -1, 0])], (3, 37), {"axis": 0})
    cond = _data((3, 1), "i1")
    _check("where", ("i1", dtype, dtype, dtype), [cond, x, _data((37,), dtype)], (3, 37), {})


TRANSPOSES = [
    ((2, 3, 4, 5), (2, 0, 3, 1)),
    ((1, 7, 1, 3), (3, 2, 1, 0)),  # size-1 dims dropped
    ((2, 3, 5, 2, 3, 2), (5, 4, 3, 2, 1, 0)),  # rank 6, nothing merges
    ((2, 3, 2, 3, 2, 3, 2), (6, 4, 2, 0, 3, 1, 5)),  # rank 7: the outer dim is peeled
    ((4, 6, 5), (0, 1, 2)),  # identity: one contiguous run
]


@pytest.mark.parametrize("dtype", SOME)
@pytest.mark.parametrize(("shape", "perm"), TRANSPOSES)
@pytest.mark.parametrize("strided", [False, True])
def test_transpose(
    shape: tuple[int, ...], perm: tuple[int, ...], dtype: str, strided: bool
) -> None:
    out = tuple(shape[p] for p in perm)
    _check("transpose", (dtype, dtype), [_data(shape, dtype)], out, {"perm": perm}, strided)


SLICES = [  # (shape, starts, limits, steps), normalised like SliceOp.kernel_params
    ((7, 9), (1, 0), (6, 9), (2, 4)),
    ((5, 6, 7), (4, 1, 0), (5, 6, 7), (1, 1, 3)),
    ((5, 6), (2, 0), (2, 6), (1, 1)),  # empty
    ((1000,), (3,), (1000,), (7,)),  # odd size, several blocks
]


@pytest.mark.parametrize("dtype", SOME)
@pytest.mark.parametrize(("shape", "starts", "limits", "steps"), SLICES)
@pytest.mark.parametrize("strided", [False, True])
def test_slice(shape: tuple[int, ...], starts: tuple[int, ...], limits: tuple[int, ...],
               steps: tuple[int, ...], dtype: str, strided: bool) -> None:  # fmt: skip
    out = tuple(len(range(a, b, c)) for a, b, c in zip(starts, limits, steps, strict=True))
    params = {"starts": starts, "limits": limits, "steps": steps}
    _check("slice", (dtype, dtype), [_data(shape, dtype)], out, params, strided)


@pytest.mark.parametrize("dtype", SOME)
@pytest.mark.parametrize(("shape", "out"), [((1, 5), (4, 5)), ((3, 1, 2), (2, 3, 4, 2)),
                                            ((), (3, 4)), ((6, 1), (6, 1))])  # fmt: skip
def test_broadcast(shape: tuple[int, ...], out: tuple[int, ...], dtype: str) -> None:
    _check("broadcast", (dtype, dtype), [_data(shape, dtype)], out, {}, strided=True)


CONCATS = [  # (input shapes, axis)
    ([(2, 3, 4), (2, 5, 4), (2, 1, 4)], 1),
    ([(3, 7), (0, 7), (4, 7)], 0),  # an empty input
    ([(3, 2), (3, 9)], 1),
    ([(5,)], 0),
]


@pytest.mark.parametrize("dtype", SOME)
@pytest.mark.parametrize(("shapes", "axis"), CONCATS)
@pytest.mark.parametrize("strided", [False, True])
def test_concat(shapes: list[tuple[int, ...]], axis: int, dtype: str, strided: bool) -> None:
    ins = [_data(s, dtype, str(k)) for k, s in enumerate(shapes)]
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    _check("concat", (dtype, dtype), ins, out, {"axis": axis}, strided)


GATHERS = [  # (data shape, indices, axis)
    ((100, 16), [[3, -1, 99, 0, -100], [7, 7, 7, 1, 2]], 0),  # embedding lookup
    ((3, 7, 4), [[0, 6, -7], [5, 1, 2]], 1),
    ((3, 4, 5), [4, 0, -2, 1], 2),
    ((6, 5), 3, 0),  # 0-d indices drop the axis
]


@pytest.mark.parametrize("ix", ["i64", "i32"])
@pytest.mark.parametrize(("shape", "indices", "axis"), GATHERS)
@pytest.mark.parametrize("strided", [False, True])
def test_gather(shape: tuple[int, ...], indices: Any, axis: int, ix: str, strided: bool) -> None:
    idx = np.array(indices, dtype=NUMPY_DTYPES[ix])
    out = (*shape[:axis], *idx.shape, *shape[axis + 1 :])
    for t in ("f32", "bf16"):
        _check("gather", (t, ix, t), [_data(shape, t), idx], out, {"axis": axis}, strided)


@pytest.mark.skipif(DEVICE != "cpu", reason="the host checks indices only when they are on it")
@pytest.mark.parametrize("bad", [5, -6])
def test_gather_out_of_range_raises_like_the_cpu_kernel(bad: int) -> None:
    data, idx = _data((5, 3), "f32"), np.array([0, bad])
    with pytest.raises(IndexError, match="index out of range for axis 0 of size 5"):
        global_bindings().lookup_alternatives("gather", ("f32", "i64", "f32"), "cpu")[0].kernel(
            [data, idx], [np.empty((2, 3), np.float32)], {"axis": 0}
        )
    with pytest.raises(IndexError, match=r"index out of range for axis 0 of size 5 \(valid"):
        entry("gather", ("f32", "i64", "f32")).kernel(
            [_torch(data), _torch(idx)], [torch.empty((2, 3))], {"axis": 0}
        )


WHERES = [  # (cond, lhs, rhs, out)
    ((4, 5), (4, 5), (4, 5), (4, 5)),
    ((4, 1), (), (1, 5), (4, 5)),  # everything broadcast
    ((2, 1, 3, 1, 2, 1, 2), (3, 1, 2, 3, 2), (1,), (2, 2, 3, 3, 2, 3, 2)),  # rank 7, peeled
]


@pytest.mark.parametrize("dtype", SOME)
@pytest.mark.parametrize("shapes", WHERES)
@pytest.mark.parametrize("strided", [False, True])
def test_where(shapes: tuple[tuple[int, ...], ...], dtype: str, strided: bool) -> None:
    ins = [_data(shapes[0], "i1"), _data(shapes[1], dtype, "a"), _data(shapes[2], dtype, "b")]
    _check("where", ("i1", dtype, dtype, dtype), ins, shapes[3], {}, strided)


def test_non_contiguous_outputs() -> None:
    x = _data((6, 4), "f32")
    big = torch.zeros((4, 13), device=DEVICE)
    entry("transpose", ("f32", "f32")).kernel([_torch(x)], [big[:, 1:13:2]], {"perm": (1, 0)})
    assert np.array_equal(_numpy(big[:, 1:13:2]), x.T) and not big[:, 0::2].any()
    out = torch.zeros((4, 8), device=DEVICE)[:, ::2]  # (4, 4), strides (8, 2)
    idx = np.array([5, 0, 2, -1])
    entry("gather", ("f32", "i64", "f32")).kernel([_torch(x), _torch(idx)], [out], {"axis": 0})
    assert np.array_equal(_numpy(out), x[idx])


def test_launches_describe_every_launch() -> None:
    """Specs carry every runtime integer in `sizes`; concat makes one per non-empty input."""
    e = entry("concat", ("f16", "f16"))
    specs = kernel_specs(e, [(3, 4), (3, 0), (3, 2), (3, 6)], ("f16", "f16"), {"axis": 1})
    assert [s.name for s in specs] == ["concat_f16_0", "concat_f16_2"]
    assert [s.sizes["y_off"] for s in specs] == [0, 4] and specs[0].signature["x"] == "*i16"
    for s in specs:
        scalars = [a for a, t in s.signature.items() if t in ("i32", "i64")]
        assert set(scalars) == set(s.sizes)
    (g,) = kernel_specs(entry("gather", ("bf16", "i32", "bf16")), [(10, 4), (2, 3), (2, 3, 4)],
                        ("bf16", "i32", "bf16"), {"axis": 0})  # fmt: skip
    assert g.signature["ix"] == "*i32" and g.launch_grid() == (1,)
    deep = kernel_specs(entry("transpose", ("f32", "f32")), [(2,) * 7, (2,) * 7], ("f32", "f32"),
                        {"perm": (6, 4, 2, 0, 3, 1, 5)})  # fmt: skip
    assert len(deep) == 2 and deep[1].sizes["x_off"] == 1 and deep[0].constexprs["NDIM"] == 6
    shapes = list(WHERES[2])
    assert len(kernel_specs(entry("where", ("i1",) * 4), shapes, ("i1",) * 4, {})) > 1
