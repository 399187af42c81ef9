"""The alternative CPU siblings (runtime/kernels/cpu/alternatives.py).

Every sibling's precision claim is verified against float64 / long double / exact references on
the precision tests' probe inputs plus wider sweeps; bit-stability by repeat (and strided) runs;
each sibling agrees with the key's default within the two claims; the defaults stay sibling 0;
the caps are honoured (contiguous-only kernels refuse views, the broadcast-baked add is never
dispatched on dense operands).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_cpu_precision import (
    FLOATS,
    Case,
    cases_for,
    check_close,
    gelu_narrow_ref,
    round_to,
    run,
    unary_inputs,
)

from frontends.builder import GraphBuilder
from runtime.binding_table import BindingEntry, KernelBindingTable
from runtime.compiled import dispatched_kernel_source
from runtime.dtypes import NUMPY_DTYPES
from runtime.executor import ExecutionError, Executor
from runtime.kernels.cpu.alternatives import exact_f16_sum
from runtime.kernels.cpu.library import FAMILIES, register_cpu_kernels
from runtime.kernels.cpu.linalg import register_linalg
from runtime.kernels.cpu.native import register_native
from runtime.kernels.cpu.vecmath import register_vecmath
from runtime.precision import measure_errors, ulp_distance
from runtime.rounding import narrow

L = np.longdouble
H = ("f32", "f16", "bf16")


def _table(with_alternatives: bool) -> KernelBindingTable:
    t = KernelBindingTable()
    if with_alternatives:
        register_cpu_kernels(t)
    else:
        # native, c-vecmath: hand-registered C kernels, not alternatives
        for register in (*FAMILIES, register_native, register_vecmath):
            register(t)
    t.finalize()
    return t


TABLE, DEFAULTS = _table(True), _table(False)


def expected() -> set[tuple[str, tuple[str, ...], str]]:
    """Every alternative, written out independently of the registration code."""
    keys = {(op, ("f32", "f32"), "numpy-fast") for op in ("exp", "log", "tanh", "sin", "cos")}
    keys |= {("rsqrt", ("f32", "f32"), "numpy-fast")}
    keys |= {(op, (t, t), "numpy-fast") for op in ("sigmoid", "silu", "gelu", "softmax") for t in H}
    keys |= {(op, (t, t), "numpy-f64acc") for op in ("reduce_sum", "reduce_mean") for t in H}
    keys |= {("matmul", ("f32",) * 3, "numpy-f64acc"), ("rms_norm", ("f32",) * 3, "numpy-f64acc")}
    keys |= {
        ("attention", k, "numpy-f64acc") for k in (("f32",) * 4, ("f32",) * 3 + ("i64", "f32"))
    }
    keys |= {("matmul", (t, t, t), "numpy-einsum") for t in ("f32", "f64")}
    alln = tuple(NUMPY_DTYPES)
    keys |= {(op, (t, t), "numpy-contig") for op in ("transpose", "reshape") for t in alln}
    return keys | {("add", ("f32",) * 3, "numpy-bcast-row")}


FAMILY_SOURCES = (
    "numpy",
    "numpy-flashdecode",
    "torch-blas",
    "native",
    "native-flashdecode",
    "native-vecmath",
    "c-vecmath",
)  # the flash kernel: tests/passes/test_decode_flash.py; the others in tests/runtime/kernels/:
# torch-blas: test_cpu_kernels.py; native: test_cpu_native.py; native-vecmath:
# test_cpu_native_epilogue.py; c-vecmath: test_cpu_vecmath.py
ALTS = sorted(
    (op, d, e.kernel_source)
    for (op, d, _), e in TABLE.iter_entries()
    if e.kernel_source not in FAMILY_SOURCES
)


def _id(alt: tuple[str, tuple[str, ...], str]) -> str:
    return f"{alt[0]}-{'_'.join(alt[1])}-{alt[2]}"


def entry(alt: tuple[str, tuple[str, ...], str]) -> BindingEntry:
    op, dtypes, source = alt
    return next(
        e for e in TABLE.lookup_alternatives(op, dtypes, "cpu") if e.kernel_source == source
    )


@pytest.fixture(autouse=True)
def _quiet_fp() -> object:
    with np.errstate(all="ignore"):
        yield


# -- registration ---------------------------------------------------------------------------


def test_exactly_the_documented_alternatives() -> None:
    assert set(ALTS) == expected()
    assert len(TABLE) == len(DEFAULTS) + len(expected())


@pytest.mark.parametrize("alt", ALTS, ids=_id)
def test_default_stays_sibling_zero(alt: tuple[str, tuple[str, ...], str]) -> None:
    """Sibling 0 is still the default of a table without alternatives (same revision): numpy,
    or vendor BLAS (torch-blas) at the matmul keys where torch is installed."""
    op, dtypes, _ = alt
    first, default = (
        TABLE.lookup_alternatives(op, dtypes, "cpu")[0],
        DEFAULTS.lookup(op, dtypes, "cpu"),
    )
    assert first.kernel_source == default.kernel_source in ("numpy", "torch-blas")
    assert TABLE.lookup_with_caps(op, dtypes, "cpu") is first
    assert first.revision_hash == default.revision_hash


@pytest.mark.parametrize("alt", ALTS, ids=_id)
def test_entry_facts(alt: tuple[str, tuple[str, ...], str]) -> None:
    e = entry(alt)
    assert e.precision.audited and e.precision.notes and e.precision.bit_stable
    assert e.revision_hash != 0 and e.cost is not None
    assert e.caps.strided_input == (alt[2] != "numpy-contig")
    assert e.caps.requires_broadcast == (alt[2] == "numpy-bcast-row")
    shapes = [(1, 2, 4, 8)] * len(alt[1]) if alt[0] == "attention" else [(4, 8, 8)] * len(alt[1])
    est = e.cost(shapes, alt[1], {"perm": (0, 2, 1), "axes": (2,)})
    assert est.flops >= 0 and est.bytes_moved > 0 and est.overhead_ns > 0


def test_costs_rank_the_trade() -> None:
    """Fast siblings cost no more than the default; f64acc and einsum cost more."""
    mm = [(64, 64), (64, 64), (64, 64)]
    for op, src, more in (
        ("matmul", "numpy-einsum", True),
        ("matmul", "numpy-f64acc", True),
        ("exp", "numpy-fast", False),
        ("gelu", "numpy-fast", False),
        ("reduce_sum", "numpy-f64acc", True),
    ):
        dtypes = ("f32",) * (3 if op == "matmul" else 2)
        shapes = mm if op == "matmul" else [(64, 64), (64, 1)]
        base = TABLE.lookup(op, dtypes, "cpu").cost(shapes, dtypes, {})
        alt = entry((op, dtypes, src)).cost(shapes, dtypes, {})
        assert (alt.flops > base.flops) if more else (alt.flops < base.flops), (op, src)


# -- cases ------------------------------------------------------------------------------------


def _f32_sweep() -> np.ndarray:
    """Dense f32 inputs over the interesting ranges (the deep sigmoid tail included)."""
    rng = np.random.default_rng(21)
    wide = rng.uniform(-110, 110, 100_000)
    mid = rng.uniform(-20, 20, 100_000)
    return np.concatenate([unary_inputs("f32"), wide.astype(np.float32), mid.astype(np.float32)])


def _unary_ref(op: str, x: np.ndarray, params: dict) -> np.ndarray:
    x64 = x.astype(np.float64)
    if op == "gelu":
        return gelu_narrow_ref(x64, params["approximate"] == "tanh")
    xl = x64.astype(L)
    refs = {
        "exp": np.exp,
        "log": np.log,
        "tanh": np.tanh,
        "sin": np.sin,
        "cos": np.cos,
        "rsqrt": lambda v: 1 / np.sqrt(v),
        "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
        "silu": lambda v: np.where(np.isneginf(v), -0.0, v / (1 + np.exp(-v))),
    }
    return refs[op](xl)


def _softmax_cases(t: str) -> list[Case]:
    """Long rows with wide spreads (mostly subnormal f16 results), both sum paths, 3-D."""
    rng = np.random.default_rng(22)
    x = rng.standard_normal((6, 3000)) * np.array([0.1, 3, 30, 100, 1000, 1e4])[:, None]
    x = x.astype(NUMPY_DTYPES[t])
    out = []
    for axis, xs in ((1, x), (0, np.ascontiguousarray(x.T)), (1, x.reshape(2, 3, 3000))):
        xl = xs.astype(np.float64).astype(L)
        e = np.exp(xl - xl.max(axis=axis, keepdims=True))
        out.append(Case([xs], {"axis": axis}, xs.shape, e / e.sum(axis=axis, keepdims=True)))
    return out


def _reduce_cases(op: str, t: str) -> list[Case]:
    """Rows past the f16 block of 2^13; row 1 cancels exactly but for a tiny last value."""
    rng = np.random.default_rng(23)
    top = 2 if t == "f16" else 4  # f16 row sums stay finite
    half = rng.standard_normal((3, 10_000)) * 10.0 ** rng.integers(-3, top, (3, 10_000))
    x = np.concatenate([half, rng.standard_normal((3, 10_000)), np.ones((3, 1))], axis=1)
    x[1, 10_000:20_000], x[1, -1] = -half[1, rng.permutation(10_000)], 2.0**-10
    x = x.astype(NUMPY_DTYPES[t])
    exact = np.array([math.fsum(r) for r in x.astype(np.float64)])  # exact: < 2^53 ulps
    n = x.shape[1] if op == "reduce_mean" else 1
    scale = np.abs(x.astype(np.float64)).sum(axis=1) / n
    return [Case([x], {"axes": (1,), "keepdim": False}, (3,), exact / n, scale)]


def _bcast_row_cases() -> list[Case]:
    rng = np.random.default_rng(25)
    a = (rng.standard_normal((5, 7)) * 10.0 ** rng.integers(-3, 4, (5, 7))).astype(np.float32)
    a[0, :3] = np.inf, np.nan, -0.0
    rows = [rng.standard_normal(7), rng.standard_normal((1, 7))]
    rows = [r.astype(np.float32) for r in rows]
    return [Case([a, r], {}, a.shape, a.astype(np.float64) + r.reshape(7)) for r in rows]


UNARY = {"exp", "log", "tanh", "sin", "cos", "rsqrt", "sigmoid", "silu", "gelu"}


def alt_cases(alt: tuple[str, tuple[str, ...], str]) -> list[Case]:
    """The precision tests' cases for the key plus this file's wider ones."""
    op, dtypes, source = alt
    if source == "numpy-bcast-row":
        return _bcast_row_cases()
    cases = cases_for(op, dtypes)
    t = dtypes[0]
    if t == "f32" and op in UNARY:
        x = _f32_sweep()
        forms = [{"approximate": a} for a in ("none", "tanh")] if op == "gelu" else [{}]
        cases += [Case([x], p, x.shape, _unary_ref(op, x, p)) for p in forms]
    if op == "softmax":
        cases += _softmax_cases(t)
    if op in ("reduce_sum", "reduce_mean"):
        cases += _reduce_cases(op, t)
    if op in ("transpose", "reshape"):  # the contiguous kernels refuse the strided case
        cases = [c for c in cases if all(a.flags.c_contiguous for a in c.inputs)]
    return cases


_PRECISION = {"f32": (24, -126), "f16": (11, -14), "bf16": (8, -126)}  # (p, emin)


def ulp_of(v: np.ndarray, dtype: str) -> np.ndarray:
    """The spacing of `dtype` at |v| (subnormal spacing below the normals)."""
    p, emin = _PRECISION[dtype]
    _, e = np.frexp(np.abs(v))
    return np.ldexp(1.0, np.maximum(e - 1, emin) - (p - 1))


def check_accumulation_bound(case: Case, got: np.ndarray, dtype: str, op: str) -> None:
    """The f64acc sums and matmul, pinned to what their notes prove (their ulp and relative
    claims are measured on the verification probes, which do not cancel this deeply):
    |err| <= 0.5 ulp + n 2^-53 sum|x| (sum|a||b| for matmul; for a mean the scale is
    sum|x| / n), plus the f64 reference's own rounding."""
    ref = np.asarray(case.ref, np.float64).reshape(got.shape)
    n = case.inputs[0].shape[-1] if op == "matmul" else case.inputs[0].size // got.size
    scale = np.asarray(case.scale, np.float64).reshape(got.shape)
    err = np.abs(got.astype(np.float64) - ref)
    bound = 0.5 * ulp_of(ref, dtype) + (n + 2) * 2.0**-53 * scale + np.abs(ref) * 2.0**-52
    assert (err <= bound).all(), f"max excess {(err - bound).max()}"


# -- claims -----------------------------------------------------------------------------------


@pytest.mark.parametrize("alt", ALTS, ids=_id)
def test_claim_holds(alt: tuple[str, tuple[str, ...], str]) -> None:
    e, (op, dtypes, _) = entry(alt), alt
    claim, t = e.precision, dtypes[-1]
    for case in alt_cases(alt):
        got = run(e, case.inputs, case.out_shape, t, case.params)
        if t not in FLOATS:
            np.testing.assert_array_equal(got, np.asarray(case.ref).astype(got.dtype))
            continue
        if claim.max_ulp is None and claim.max_absolute is None:  # no declared bound
            # (measured bounds hold on the verification probes: tests/contracts check those)
            if alt[2] == "numpy-f64acc" and op in ("reduce_sum", "reduce_mean", "matmul"):
                check_accumulation_bound(case, got, t, op)
            else:
                check_close(got, case, t)
            continue
        report = measure_errors(got, round_to(np.asarray(case.ref, np.float64), t))
        assert report.satisfies(claim), f"{report} exceeds {claim.describe()} ({case.params})"


def test_claim_check_is_not_vacuous() -> None:
    """One ulp past the fast exp's claim fails it."""
    x = np.linspace(1, 2, 101, dtype=np.float32)
    ref = np.exp(x.astype(np.float64))
    good = ref.astype(np.float32)
    claim = entry(("exp", ("f32", "f32"), "numpy-fast")).precision
    assert claim.max_ulp is not None
    bad = (good.view(np.int32) + claim.max_ulp + 1).view(np.float32)
    assert measure_errors(good, ref).satisfies(claim)
    assert not measure_errors(bad, ref).satisfies(claim)


def _strided(a: np.ndarray) -> np.ndarray:
    buf = np.zeros(a.shape + (2,), a.dtype)
    view = buf[..., 0]
    view[...] = a
    return view


@pytest.mark.parametrize("alt", ALTS, ids=_id)
def test_bit_stable(alt: tuple[str, tuple[str, ...], str]) -> None:
    """Repeat runs (and, for strided-capable kernels, strided views) are byte-identical."""
    e = entry(alt)
    case = alt_cases(alt)[-1]
    t, shape, params = alt[1][-1], case.out_shape, case.params
    first = run(e, case.inputs, shape, t, params)
    assert run(e, [a.copy() for a in case.inputs], shape, t, params).tobytes() == first.tobytes()
    if e.caps.strided_input and alt[2] != "numpy-bcast-row":
        strided = run(e, [_strided(a) for a in case.inputs], shape, t, params)
        assert strided.tobytes() == first.tobytes()


@pytest.mark.parametrize("alt", ALTS, ids=_id)
def test_agrees_with_default(alt: tuple[str, tuple[str, ...], str]) -> None:
    """Against sibling 0 on the precision tests' cases: within the sum of the two ULP (or
    absolute) bounds, byte-equal where both are exact, close where neither bounds."""
    op, dtypes, _ = alt
    e, base = entry(alt), TABLE.lookup(op, dtypes, "cpu")
    t = dtypes[-1]
    for case in alt_cases(alt)[:2]:
        got = run(e, case.inputs, case.out_shape, t, case.params)
        want = run(base, case.inputs, case.out_shape, t, case.params)
        mine, theirs = e.precision, base.precision
        if t not in FLOATS or (mine.max_ulp == 0 and theirs.max_ulp == 0):
            assert np.array_equal(got, want, equal_nan=t in FLOATS)
        elif mine.max_ulp is not None and theirs.max_ulp is not None:
            assert ulp_distance(got, want.astype(np.float64)).max() <= mine.max_ulp + theirs.max_ulp
        elif mine.max_absolute is not None:  # softmax f32: the default is faithful (p <= 1)
            diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
            assert np.nan_to_num(diff).max() <= mine.max_absolute + 2.0**-23
        else:
            check_close(got, Case(case.inputs, case.params, case.out_shape, want, case.scale), t)


# -- helpers of the f16 paths -----------------------------------------------------------------


def test_f32_to_f16_rounding_matches_numpys_ieee_cast() -> None:
    """Every f16 value, every midpoint and its f32 neighbours, random bit patterns, specials."""
    rng = np.random.default_rng(24)
    grid = np.arange(0, 0x7C01, dtype=np.uint16).view(np.float16).astype(np.float32)
    mids = ((grid[:-1].astype(np.float64) + grid[1:]) / 2).astype(np.float32)
    specials = [0, np.inf, np.nan, 65520, 65519.996, 1e-30, 2**-25, 3 * 2**-25, 2**-14]
    q = np.concatenate(
        [
            grid,
            mids,
            np.nextafter(mids, np.inf),
            np.nextafter(mids, -np.inf),
            np.frombuffer(rng.bytes(4 << 18), np.float32),
            np.array(specials, np.float32),
        ]
    )
    q = np.concatenate([q, -q])
    got = narrow(q, "f16")
    want = q.astype(np.float16)
    nan = np.isnan(want)
    assert np.isnan(got[nan]).all()
    assert got[~nan].tobytes() == want[~nan].tobytes()


def _f16_of_scaled(s: int) -> float:
    """The correctly rounded f16 value of s * 2^-24 (exact integer arithmetic)."""
    m = abs(s)
    shift = max(m.bit_length() - 11, 0)
    q, r = divmod(m, 1 << shift)
    half = (1 << shift) >> 1
    if shift and (r > half or (r == half and q & 1)):
        q += 1
    v = math.ldexp(q, shift - 24)
    return math.copysign(math.inf if v > 65504 else v, s)


@pytest.mark.parametrize("n", [5, 8192, 8193, 50_001, (1 << 23) + 3])
def test_exact_f16_sum(n: int) -> None:
    """Correctly rounded for any row length: one block, several, and more than 2^10 blocks
    (the Python-int path); rows that overflow, cancel exactly, or cancel to a remainder."""
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-7, 3, n)).astype(np.float16)
    h = n // 2
    cancel = np.concatenate([x[:h], -x[rng.permutation(h)], x[2 * h :]])
    rows = np.stack([cancel, x, -x])[: 1 if n > 1 << 20 else 3]
    got = np.empty(len(rows), np.float16)
    kernel = entry(("reduce_sum", ("f16", "f16"), "numpy-f64acc")).kernel
    kernel([rows], [got], {"axes": (1,), "keepdim": False})
    exact = (rows.astype(np.float64) * 2.0**24).astype(np.int64).sum(axis=1)  # < 2^63: exact
    want = np.array([_f16_of_scaled(int(s)) for s in exact], np.float16)
    assert got.tobytes() == want.tobytes()


def test_exact_f16_sum_specials_and_zeros() -> None:
    z = np.zeros(9000, np.float16)
    rows = np.stack([-z, z, z + np.float16(np.inf), z])
    rows[3, 5], rows[3, 8500] = np.inf, -np.inf
    got = exact_f16_sum(rows, (1,))
    assert got[0] == 0 and got[1] == 0 and got[2] == np.inf and np.isnan(got[3])


# -- caps -------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["transpose", "reshape"])
def test_contiguous_only_kernels_refuse_views(op: str) -> None:
    e = entry((op, ("f32", "f32"), "numpy-contig"))
    x = np.arange(12, dtype=np.float32).reshape(3, 4).T
    params = {"perm": (1, 0)}
    with pytest.raises(ValueError, match="C-contiguous"):
        e.kernel([x], [np.empty((3, 4) if op == "transpose" else (4, 3), np.float32)], params)


@pytest.mark.parametrize(
    ("shape", "dtype", "perm"),
    [
        ((1024, 1024), "f32", (1, 0)),
        ((2, 1024, 512), "f64", (0, 2, 1)),
        ((3, 40, 50), "i8", (2, 0, 1)),
        ((1024, 1024), "bf16", (1, 0)),
    ],
)
def test_contig_transpose_matches_default(shape: tuple[int, ...], dtype: str, perm) -> None:
    """Banded (>= 4 MiB matrices) and plain paths, into C- and F-ordered outputs."""
    x = np.arange(math.prod(shape)).reshape(shape).astype(NUMPY_DTYPES[dtype])
    want = np.ascontiguousarray(x.transpose(perm))
    e = entry(("transpose", (dtype, dtype), "numpy-contig"))
    for order in ("C", "F"):
        out = np.empty(want.shape, want.dtype, order=order)
        e.kernel([x], [out], {"perm": perm})
        assert np.ascontiguousarray(out).tobytes() == want.tobytes()


def _mlp() -> tuple:
    g = GraphBuilder(seed=3)
    x = g.input("x", (4, 8))
    h = g.add(g.matmul(x, g.weight("w", (8, 16))), g.weight("b", (16,)))  # a row broadcast
    y = g.add(h, h)  # dense
    return g.build(outputs={"y": y}), np.random.default_rng(3).standard_normal((4, 8))


def test_executor_never_dispatches_the_broadcast_baked_add() -> None:
    m, x = _mlp()
    adds = [op for op in m.op.walk() if op.name == "fuel.add"]
    assert len(adds) == 2
    assert all(dispatched_kernel_source(op, TABLE) == "numpy" for op in adds)
    got = Executor(m, table=TABLE).run({"x": x.astype(np.float32)})["y"]
    want = Executor(m, table=DEFAULTS).run({"x": x.astype(np.float32)})["y"]
    assert got.tobytes() == want.tobytes()


def test_broadcast_baked_add_alone_is_not_admissible() -> None:
    only = KernelBindingTable()
    e = entry(("add", ("f32",) * 3, "numpy-bcast-row"))
    only.register("add", ("f32",) * 3, "cpu", e.kernel, caps=e.caps, kernel_source=e.kernel_source)
    register_linalg(only)  # the matmul
    m, _ = _mlp()
    with pytest.raises(ExecutionError, match="broadcast-baked only"):
        Executor(m, table=only)


def test_broadcast_baked_add_reads_a_row_and_refuses_a_dense_operand() -> None:
    e = entry(("add", ("f32",) * 3, "numpy-bcast-row"))
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = np.empty((3, 4), np.float32)
    e.kernel([a, np.ones((1, 4), np.float32)], [out], {})
    assert out.tobytes() == (a + 1).tobytes()
    with pytest.raises(ValueError, match="reshape"):
        e.kernel([a, a], [out], {})
