"""The numpy CPU kernel library: registration facts and elementwise semantics.

Values and precision claims of every (op, dtypes) are checked in test_cpu_precision.py; this file
checks that exactly the documented keys are registered, the per-entry facts (provenance, caps,
cost, revision), and the elementwise semantics: broadcasting, strided and stride-0 inputs,
integer wraparound, NaN propagation and the infinite limits of the composite functions.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

from runtime.binding_table import NoKernelForOp
from runtime.cost import CostEstimate
from runtime.dtypes import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, NUMPY_DTYPES, SIGNED_INT_DTYPES
from runtime.kernels import global_bindings
from runtime.kernels.cpu.library import hand_registered_table

F, I, SI, ALL = FLOAT_DTYPES, INT_DTYPES, SIGNED_INT_DTYPES, ALL_DTYPES  # noqa: E741


TABLE = hand_registered_table()


def expected_keys() -> set[tuple[str, tuple[str, ...]]]:
    """The documented (op, dtypes) set, written out independently of the registration code."""
    keys: set[tuple[str, tuple[str, ...]]] = set()
    unary = "exp log sqrt rsqrt recip tanh sigmoid silu gelu erf sin cos softmax reduce_mean"
    for op in unary.split():
        keys |= {(op, (t, t)) for t in F}
    keys |= {(op, (t, t)) for op in ("neg", "abs", "relu") for t in (*F, *SI)}
    keys |= {(op, (t, t, t)) for op in ("add", "sub", "mul", "max", "min") for t in (*F, *I)}
    keys |= {(op, (t, t, t)) for op in ("div", "pow") for t in F}
    for op in ("eq", "ne", "lt", "le", "gt", "ge"):
        keys |= {(op, (t, t, "i1")) for t in (*F, *I, *(("i1",) if op in ("eq", "ne") else ()))}
    keys |= {("where", ("i1", t, t, t)) for t in ALL}
    keys |= {("cast", (s, d)) for s in ALL for d in ALL}
    keys |= {("matmul", (t, t, t)) for t in (*F, "i64", "i32")}
    keys |= {(op, (t, t)) for op in ("reduce_sum", "reduce_max", "reduce_min") for t in (*F, *I)}
    for t in F:
        keys |= {("rms_norm", (t, t, t)), ("layer_norm", (t,) * 4), ("rope", (t,) * 4)}
        keys |= {("attention", (t,) * 4), ("attention", (t, t, t, "i64", t))}
        keys |= {("attention", (t,) * 5)}  # the additive-mask form
        keys |= {("matmul_bias_act", (t,) * 4), ("gated_mlp", (t,) * 5)}
    for op in ("reshape", "transpose", "broadcast", "slice", "concat"):
        keys |= {(op, (t, t)) for t in ALL}
    keys |= {("gather", (t, ix, t)) for t in ALL for ix in ("i64", "i32")}
    keys |= {("index_copy", (t, t, ix, t)) for t in ALL for ix in ("i64", "i32")}
    return keys


def run(op: str, dtypes: tuple[str, ...], inputs, out_shape, params=None) -> np.ndarray:
    entry = TABLE.lookup_with_caps(op, dtypes, "cpu")
    out = np.full(out_shape, 3, NUMPY_DTYPES[dtypes[-1]])
    entry.kernel(list(inputs), [out], params or {})
    return out


def rand(t: str, shape, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if t == "i1":
        return rng.random(shape) < 0.5
    if t in F:
        return (rng.standard_normal(shape) * 4).astype(NUMPY_DTYPES[t])
    info = np.iinfo(NUMPY_DTYPES[t])
    return rng.integers(info.min, info.max, shape, dtype=NUMPY_DTYPES[t], endpoint=True)


# -- registration -----------------------------------------------------------------------------


def test_registered_keys_are_exactly_the_documented_ones() -> None:
    got = {(op, d) for op, d, b in TABLE.iter_keys() if b == "cpu"}
    assert got - expected_keys() == set(), "registered but undocumented"
    assert expected_keys() - got == set(), "documented but missing"
    numpy_entries = [k for k, e in TABLE.iter_entries() if e.kernel_source == "numpy"]
    assert len(numpy_entries) == TABLE.key_count() == 408  # exactly one numpy sibling per key


def test_global_table_holds_the_cpu_kernels() -> None:
    table = global_bindings()
    assert all(table.backend_supports(op, d, "cpu") for op, d in expected_keys())


def test_unregistered_key_names_what_is_registered() -> None:
    with pytest.raises(NoKernelForOp, match=r"\(f32, f32, f32\) on cpu"):
        TABLE.lookup_with_caps("div", ("i32", "i32", "i32"), "cpu")


VENDOR_FIRST = (
    {
        ("matmul", ("f32",) * 3),
        ("matmul", ("f64",) * 3),
        ("matmul_bias_act", ("f32",) * 4),
        ("gated_mlp", ("f32",) * 5),
        ("attention", ("f32",) * 4),
        ("attention", ("f32", "f32", "f32", "i64", "f32")),
        ("attention", ("f32",) * 5),
    }
    if importlib.util.find_spec("torch")
    else set()
)
"""Keys whose sibling 0 is PyTorch's CPU BLAS (runtime/kernels/cpu/torch_blas.py) when torch is
installed: vendor BLAS first, numpy second."""


@pytest.mark.parametrize("key", sorted(expected_keys()), ids=lambda k: f"{k[0]}-{'_'.join(k[1])}")
def test_entry_facts(key: tuple[str, tuple[str, ...]]) -> None:
    op, dtypes = key
    entry = TABLE.lookup_with_caps(op, dtypes, "cpu")
    assert entry.kernel_source == ("torch-blas" if key in VENDOR_FIRST else "numpy")
    assert entry.caps.strided_input and not entry.caps.requires_broadcast
    assert entry.revision_hash != 0
    assert entry.precision.audited and entry.precision.notes
    assert entry.cost is not None
    est = entry.cost([(2, 3, 4, 5)] * len(dtypes), dtypes, {})
    assert isinstance(est, CostEstimate)
    assert est.flops >= 0 and est.bytes_moved > 0 and est.overhead_ns >= 0


def test_cost_formulas() -> None:
    def cost(op, dtypes, shapes):
        return TABLE.lookup(op, dtypes, "cpu").cost(shapes, dtypes, {})

    mm = cost("matmul", ("f32",) * 3, [(7, 1, 4, 5), (3, 5, 6), (7, 3, 4, 6)])
    assert mm.flops == 2 * 4 * 6 * 5 * 21
    assert mm.bytes_moved == 4 * (7 * 4 * 5 + 3 * 5 * 6 + 7 * 3 * 4 * 6)
    assert cost("add", ("f16",) * 3, [(8,), (1,), (8,)]).flops == 8
    assert cost("exp", ("f64", "f64"), [(8,), (8,)]).flops == 80
    assert cost("cast", ("f64", "bf16"), [(8,), (8,)]).bytes_moved == 8 * 8 + 8 * 2
    assert cost("transpose", ("i8", "i8"), [(3, 4), (4, 3)]).flops == 0


def test_revision_hash_tracks_helpers() -> None:
    """Generic closures share source; the helper mixed in keeps their revisions apart."""
    revs = {TABLE.lookup(op, ("f32", "f32"), "cpu").revision_hash for op in ("rsqrt", "silu")}
    assert len(revs) == 2


# -- elementwise semantics ----------------------------------------------------------------------


@pytest.mark.parametrize("t", [*F, *I])
def test_binary_broadcasting(t: str) -> None:
    a, b = rand(t, (3, 1, 5), 1), rand(t, (4, 1), 2)
    got = run("add" if t in I else "mul", (t, t, t), [a, b], (3, 4, 5))
    with np.errstate(over="ignore"):
        want = np.add(a, b) if t in I else np.multiply(a, b, dtype=np.float64)
    np.testing.assert_array_equal(got, want.astype(got.dtype))


@pytest.mark.parametrize("t", F)
def test_strided_and_stride0_inputs_match_contiguous(t: str) -> None:
    base = rand(t, (6, 8), 3)
    views = {
        "transposed": base.T,
        "stepped": rand(t, (8, 12), 4)[:, ::2],
        "stride0": np.broadcast_to(rand(t, (1, 6), 5), (8, 6)),
    }
    b = rand(t, (8, 6), 6)
    for name, v in views.items():
        assert not v.flags.c_contiguous, name
        dense = np.ascontiguousarray(v)
        for op, dtypes, ins in (
            ("sub", (t, t, t), lambda x: [x, b]),
            ("tanh", (t, t), lambda x: [x]),
            ("gelu", (t, t), lambda x: [x]),
            ("lt", (t, t, "i1"), lambda x: [b, x]),
            ("where", ("i1", t, t, t), lambda x: [b > 0, x, b]),
        ):
            got = run(op, dtypes, ins(v), (8, 6))
            want = run(op, dtypes, ins(dense), (8, 6))
            assert got.tobytes() == want.tobytes(), (name, op)


def test_where_broadcasts_all_three() -> None:
    cond = np.array([[True], [False]])
    got = run(
        "where",
        ("i1", "i32", "i32", "i32"),
        [cond, np.arange(3, dtype=np.int32), np.int32(-1) * np.ones((1, 1), np.int32)],
        (2, 3),
    )
    np.testing.assert_array_equal(got, [[0, 1, 2], [-1, -1, -1]])


def test_integer_wraparound() -> None:
    i8 = ("i8", "i8", "i8")
    assert run("add", i8, [np.int8([127]), np.int8([1])], (1,))[0] == -128
    assert run("sub", ("u8",) * 3, [np.uint8([0]), np.uint8([1])], (1,))[0] == 255
    assert run("mul", ("i64",) * 3, [np.int64([2**62]), np.int64([4])], (1,))[0] == 0
    assert run("neg", ("i8", "i8"), [np.int8([-128])], (1,))[0] == -128
    assert run("abs", ("i8", "i8"), [np.int8([-128])], (1,))[0] == -128
    np.testing.assert_array_equal(
        run("relu", ("i32", "i32"), [np.int32([-5, 0, 7])], (3,)), [0, 0, 7]
    )


@pytest.mark.parametrize("t", F)
def test_max_min_propagate_nan(t: str) -> None:
    a = np.array([np.nan, 1.0, 2.0]).astype(NUMPY_DTYPES[t])
    b = np.array([1.0, np.nan, 3.0]).astype(NUMPY_DTYPES[t])
    for op in ("max", "min"):
        got = run(op, (t, t, t), [a, b], (3,)).astype(np.float64)
        assert np.isnan(got[:2]).all() and got[2] == (3.0 if op == "max" else 2.0)


@pytest.mark.parametrize("t", F)
def test_composite_limits(t: str) -> None:
    x = np.array([-np.inf, np.inf, -1e4, 1e4, 0.0]).astype(NUMPY_DTYPES[t])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        sig = run("sigmoid", (t, t), [x], (5,)).astype(np.float64)
        silu = run("silu", (t, t), [x], (5,)).astype(np.float64)
        gelu = run("gelu", (t, t), [x], (5,)).astype(np.float64)
        gelu_t = run("gelu", (t, t), [x], (5,), {"approximate": "tanh"}).astype(np.float64)
    np.testing.assert_array_equal(sig, [0, 1, 0, 1, 0.5])
    for y in (silu, gelu, gelu_t):
        np.testing.assert_array_equal(y, [0, np.inf, 0, x[3], 0])
        assert math.copysign(1, y[0]) == -1  # the limit at -inf is -0.0


def test_gelu_forms_and_default() -> None:
    x = np.linspace(-6, 6, 97)
    exact = run("gelu", ("f64", "f64"), [x], x.shape)
    explicit = run("gelu", ("f64", "f64"), [x], x.shape, {"approximate": "none"})
    np.testing.assert_array_equal(exact, explicit)
    approx = run("gelu", ("f64", "f64"), [x], x.shape, {"approximate": "tanh"})
    np.testing.assert_allclose(approx, exact, atol=1e-3)
    want = [0.5 * v * math.erfc(-v / math.sqrt(2)) for v in x]  # erfc: no 1 + erf cancellation
    np.testing.assert_allclose(exact, want, rtol=1e-14, atol=1e-300)


@pytest.mark.parametrize("op", ["eq", "ne"])
def test_bool_equality(op: str) -> None:
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    got = run(op, ("i1", "i1", "i1"), [a, b], (4,))
    np.testing.assert_array_equal(got, (a == b) if op == "eq" else (a != b))


def test_kernels_write_in_place() -> None:
    out = np.zeros(4, np.float32)
    TABLE.lookup("exp", ("f32", "f32"), "cpu").kernel([np.zeros(4, np.float32)], [out], {})
    np.testing.assert_array_equal(out, np.ones(4, np.float32))


@pytest.mark.parametrize(("op", "src"), [("gelu", "f32"), ("silu", "bf16"), ("cast", "f64")])
def test_chunked_kernels_with_any_output_layout(op: str, src: str) -> None:
    """Composite and re-rounding kernels work in slices: check several slices, a
    non-contiguous output and a 0-d operand against the plain contiguous result."""
    dst = "bf16" if op == "cast" else src
    x = rand(src, (300, 130), 7)  # 39000 elements: more than two slices
    dense = run(op, (src, dst), [x], x.shape)
    out = np.empty(x.shape, NUMPY_DTYPES[dst], order="F")
    TABLE.lookup(op, (src, dst), "cpu").kernel([x], [out], {})
    assert np.ascontiguousarray(out).tobytes() == dense.tobytes()
    scalar = run(op, (src, dst), [x[3, 4].reshape(())], ())
    assert scalar.tobytes() == dense[3, 4].tobytes()
