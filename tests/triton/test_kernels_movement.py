"""Triton movement kernels (transpose, slice, broadcast, concat, gather, where) vs the numpy CPU
kernels: byte-for-byte equal outputs for every dtype, on random bit patterns (NaN payloads
included), non-contiguous operands, broadcasting, odd sizes, walks deeper than six dims; which
transposes take the tiled kernel, and gather's in-kernel out-of-range detection."""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import torch
from triton_helpers import entry

from lowering.triton.aot import compile_specs, kernel_specs
from runtime.dtypes import ALL_DTYPES, NUMPY_DTYPES
from runtime.kernels import global_bindings
from runtime.kernels.triton.movement import (
    ERR_DTYPE,
    bits,
    copy_kernel,
    launch,
    transpose_kernel,
    transpose_spec,
)

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


def _check(
    op: str,
    key: tuple[str, ...],
    ins: Sequence[np.ndarray],
    out_shape: Sequence[int],
    params: dict[str, Any],
    strided: bool = False,
) -> None:
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


TILED = [  # (shape, perm, tiled): tiled = the launch is `transpose_kernel`
    ((70, 33), (1, 0), True),  # 2-D, neither side a multiple of the tile
    ((64, 128), (1, 0), True),  # exact tiles
    ((16, 16), (1, 0), True),  # the smallest tiled transpose: one 16 x 16 tile
    ((3, 40, 70), (0, 2, 1), True),  # batched: last two axes swapped
    ((2, 3, 20, 50), (0, 1, 3, 2), True),  # two batch axes (they merge: one batch walk)
    ((3, 20, 2, 50), (2, 0, 3, 1), True),  # general perm: two batch axes out of order
    ((2, 64, 48), (2, 0, 1), True),  # (64, 48) merge: a 2-D [48, 128] transpose
    ((20, 3, 30, 2, 17), (4, 1, 0, 3, 2), True),  # three batch axes
    ((1, 300), (1, 0), False),  # one row: a plain copy
    ((300, 1), (1, 0), False),  # one column: a plain copy
    ((5, 300), (1, 0), False),  # thinner than MIN_TILE
    ((4, 30, 20), (1, 0, 2), False),  # innermost axis kept
    ((2, 3, 2, 3, 2, 20, 17), (6, 4, 2, 0, 3, 1, 5), False),  # rank 7: a peeled strided copy
]


def _transpose_fns(shape: tuple[int, ...], perm: tuple[int, ...], dtype: str) -> list[Any]:
    out = tuple(shape[p] for p in perm)
    specs = kernel_specs(
        entry("transpose", (dtype, dtype)), [shape, out], (dtype, dtype), {"perm": perm}
    )
    return [s.fn for s in specs]


@pytest.mark.parametrize("dtype", ["i1", "u8", "f16", "bf16", "f32", "i64"])
@pytest.mark.parametrize(("shape", "perm", "tiled"), TILED)
def test_tiled_transpose(
    shape: tuple[int, ...], perm: tuple[int, ...], tiled: bool, dtype: str
) -> None:
    fns = _transpose_fns(shape, perm, dtype)
    assert fns == [transpose_kernel] if tiled else set(fns) == {copy_kernel}
    out = tuple(shape[p] for p in perm)
    _check("transpose", (dtype, dtype), [_data(shape, dtype)], out, {"perm": perm})


@pytest.mark.parametrize("dtype", ["f64", "i8", "bf16"])
def test_tiled_transpose_of_views(dtype: str) -> None:
    """A window of a bigger tensor (offset, row stride 90) into a window of a bigger output."""
    src = _data((3, 50, 90), dtype)
    x = _torch(src)[1:, 5:45, 7:80]
    out = torch.zeros((2, 80, 50), dtype=x.dtype, device=DEVICE)[:, 3:76, 4:44]
    layouts = [(0, x.permute(0, 2, 1).stride()), (0, out.stride())]
    assert transpose_spec("t", "*u8", out.shape, layouts) is not None
    entry("transpose", (dtype, dtype)).kernel([x], [out], {"perm": (0, 2, 1)})
    want = np.ascontiguousarray(src[1:, 5:45, 7:80].transpose(0, 2, 1))
    assert _numpy(out).tobytes() == want.tobytes()


def test_tiled_transpose_launches() -> None:
    """Tile sides follow the extents (16..64), the grid covers every tile of every batch, and
    a >= 2^31-element transpose indexes in i64."""
    e, key = entry("transpose", ("f16", "f16")), ("f16", "f16")
    (s,) = kernel_specs(e, [(5, 20, 100), (5, 100, 20)], key, {"perm": (0, 2, 1)})
    assert s.fn is transpose_kernel and s.name == "transpose_f16"
    assert dict(s.constexprs) == {"NDIM": 3, "BIG": False, "BLOCK_M": 64, "BLOCK_N": 32}
    assert s.sizes["M"] == 100 and s.sizes["N"] == 20 and s.launch_grid() == (2 * 1 * 5,)
    assert s.sizes["xn"] == 100 and s.sizes["ym"] == 20 and s.signature["x"] == "*i16"
    scalars = [a for a, t in s.signature.items() if t in ("i32", "i64")]
    assert set(scalars) == set(s.sizes)
    (big,) = kernel_specs(e, [(2**16, 2**15 + 1), (2**15 + 1, 2**16)], key, {"perm": (1, 0)})
    assert big.fn is transpose_kernel and big.constexprs["BIG"]
    assert set(big.signature.values()) == {"*i16", "i64", "constexpr"}


@pytest.mark.slow
def test_tiled_transpose_and_gather_compile_for_sm_90() -> None:
    """AOT (the interpreter's child process): the tiled transpose at every batch rank and each
    width, i64 indexing; gather with its error flag (i32 and, >= 2^31 elements, i64)."""
    specs, rows = (
        [],
        [
            ("f16", (70, 33), (1, 0)),
            ("i1", (3, 40, 70), (0, 2, 1)),
            ("i64", (3, 20, 2, 50), (2, 0, 3, 1)),
            ("f32", (20, 3, 30, 2, 17), (4, 1, 0, 3, 2)),
            ("bf16", (2, 3, 2, 3, 20, 30), (2, 0, 5, 3, 1, 4)),
            ("f16", (2**16, 2**15 + 1), (1, 0)),
        ],
    )
    for t, shape, perm in rows:
        out = tuple(shape[p] for p in perm)
        specs += kernel_specs(entry("transpose", (t, t)), [shape, out], (t, t), {"perm": perm})
    assert [s.fn for s in specs] == [transpose_kernel] * len(rows)
    assert [s.constexprs["NDIM"] for s in specs] == [2, 3, 4, 5, 6, 2]
    g = entry("gather", ("bf16", "i32", "bf16"))
    for data in ((10, 4), (2**31, 1)):
        specs += kernel_specs(g, [data, (3,), (3, data[1])], ("bf16", "i32", "bf16"), {"axis": 0})
    assert [s.signature["err"] for s in specs[-2:]] == ["*i32", "*i64"]
    built = compile_specs(specs, "sm_90")
    for b, s in zip(built, specs, strict=True):
        assert ".target sm_90" in b.ptx and b.cubin[:4] == b"\x7fELF"
        assert b.kernel_name == s.fn.fn.__name__ and b.launch_grid == s.launch_grid()
        assert b.runtime_args() == [n for n, t in s.signature.items() if t != "constexpr"]
    assert all("atom.global" in b.ptx for b in built[-2:])


SLICES = [  # (shape, starts, limits, steps), normalised like SliceOp.kernel_params
    ((7, 9), (1, 0), (6, 9), (2, 4)),
    ((5, 6, 7), (4, 1, 0), (5, 6, 7), (1, 1, 3)),
    ((5, 6), (2, 0), (2, 6), (1, 1)),  # empty
    ((1000,), (3,), (1000,), (7,)),  # odd size, several blocks
]


@pytest.mark.parametrize("dtype", SOME)
@pytest.mark.parametrize(("shape", "starts", "limits", "steps"), SLICES)
@pytest.mark.parametrize("strided", [False, True])
def test_slice(
    shape: tuple[int, ...],
    starts: tuple[int, ...],
    limits: tuple[int, ...],
    steps: tuple[int, ...],
    dtype: str,
    strided: bool,
) -> None:
    out = tuple(len(range(a, b, c)) for a, b, c in zip(starts, limits, steps, strict=True))
    params = {"starts": starts, "limits": limits, "steps": steps}
    _check("slice", (dtype, dtype), [_data(shape, dtype)], out, params, strided)


@pytest.mark.parametrize("dtype", SOME)
@pytest.mark.parametrize(
    ("shape", "out"), [((1, 5), (4, 5)), ((3, 1, 2), (2, 3, 4, 2)), ((), (3, 4)), ((6, 1), (6, 1))]
)
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


@pytest.mark.parametrize("ix", ["i64", "i32"])
@pytest.mark.parametrize("bad", [5, -6, 2**30, -(2**30)])
def test_gather_out_of_range_raises_like_the_cpu_kernel(bad: int, ix: str) -> None:
    data, idx = _data((5, 3), "f32"), np.array([0, bad, 2, 9], dtype=NUMPY_DTYPES[ix])
    with pytest.raises(IndexError, match="index out of range for axis 0 of size 5"):
        global_bindings().lookup_alternatives("gather", ("f32", ix, "f32"), "cpu")[0].kernel(
            [data, idx], [np.empty((4, 3), np.float32)], {"axis": 0}
        )
    want = rf"index out of range for axis 0 of size 5 \(valid: -5 \.\. 4\): indices\[1\] = {bad}$"
    with pytest.raises(IndexError, match=want):
        entry("gather", ("f32", ix, "f32")).kernel(
            [_torch(data), _torch(idx)], [torch.empty((4, 3), device=DEVICE)], {"axis": 0}
        )


def test_gather_names_the_first_bad_index_along_any_axis() -> None:
    data, idx = _data((3, 7, 4), "bf16"), np.array([[0, -7, 6], [7, 1, -8]])
    with pytest.raises(IndexError, match=r"axis 1 of size 7 .*: indices\[1, 0\] = 7$"):
        entry("gather", ("bf16", "i64", "bf16")).kernel(
            [_torch(data, strided=True), _torch(idx)],
            [torch.empty((3, 2, 3, 4), dtype=torch.bfloat16, device=DEVICE)],
            {"axis": 1},
        )


@pytest.mark.parametrize("ix", ["i64", "i32"])
@pytest.mark.parametrize("dtype", ["i1", "f16", "i64"])
def test_gather_edge_indices_are_in_range(dtype: str, ix: str) -> None:
    """-A, -1, 0 and A - 1 are valid (negative ones count from the end)."""
    idx = np.array([[-5, 4], [-1, 0], [4, -5]], dtype=NUMPY_DTYPES[ix])
    _check("gather", (dtype, ix, dtype), [_data((5, 6), dtype), idx], (3, 2, 6), {"axis": 0})
    _check("gather", (dtype, ix, dtype), [_data((6, 5), dtype), idx], (6, 3, 2), {"axis": 1})


@pytest.mark.parametrize("ix", ["i64", "i32"])
def test_gather_kernel_flags_the_first_bad_position(ix: str) -> None:
    """The kernel itself, launched without its launcher: the error buffer holds M - j of the
    first bad flat position j (across programs), bad positions are written as 0 (their loads
    are masked) and every other position is gathered."""
    data = _data((40,), "f32")
    idx = np.arange(3000, dtype=NUMPY_DTYPES[ix]) % 80 - 40  # -40 .. 39: all in range
    idx[[2100, 2900]], idx[1500] = 40, -41  # in the third and second of three programs
    e = entry("gather", ("f32", ix, "f32"))
    (spec,) = kernel_specs(e, [(40,), (3000,), (3000,)], ("f32", ix, "f32"), {"axis": 0})
    assert spec.launch_grid() == (3,) and spec.signature["err"] == "*i32"
    y = torch.full((3000,), 7.0, device=DEVICE)
    err = torch.zeros(1, dtype=ERR_DTYPE[spec.signature["err"]], device=DEVICE)
    launch(spec, bits(_torch(data)), _torch(idx), bits(y), err)
    assert int(err.item()) == 3000 - 1500
    got, want = _numpy(y), np.take(data, np.clip(idx, -40, 39))
    bad = np.isin(np.arange(3000), [1500, 2100, 2900])
    assert not got[bad].any() and got[~bad].tobytes() == want[~bad].tobytes()
    err.zero_()
    ok = np.clip(idx, -40, 39)
    launch(spec, bits(_torch(data)), _torch(ok), bits(y), err)
    assert int(err.item()) == 0 and _numpy(y).tobytes() == np.take(data, ok).tobytes()


def test_gather_with_an_empty_output_reads_no_index() -> None:
    """Nothing to gather (an empty dim before `axis`), nothing checked, as numpy's `take`."""
    _check(
        "gather", ("f32", "i64", "f32"), [_data((0, 5), "f32"), np.array([7])], (0, 1), {"axis": 1}
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
    (g,) = kernel_specs(
        entry("gather", ("bf16", "i32", "bf16")),
        [(10, 4), (2, 3), (2, 3, 4)],
        ("bf16", "i32", "bf16"),
        {"axis": 0},
    )
    assert g.signature["ix"] == "*i32" and g.launch_grid() == (1,)
    deep = kernel_specs(
        entry("transpose", ("f32", "f32")),
        [(2,) * 7, (2,) * 7],
        ("f32", "f32"),
        {"perm": (6, 4, 2, 0, 3, 1, 5)},
    )
    assert len(deep) == 2 and deep[1].sizes["x_off"] == 1 and deep[0].constexprs["NDIM"] == 6
    shapes = list(WHERES[2])
    assert len(kernel_specs(entry("where", ("i1",) * 4), shapes, ("i1",) * 4, {})) > 1
