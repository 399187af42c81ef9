"""Every precision claim of every numpy CPU kernel, verified; plus bit-stability.

For each registered (op, dtypes) a case generator builds inputs, params and a reference:
* exact refs (Python Fraction/Decimal, exact integer arithmetic) for claims of 0 ulp in f64 and
  for all integer outputs;
* float64 refs for claims of 0 ulp in f32/f16/bf16 basic ops (+ - * / sqrt of p-bit values
  computed in f64 and rounded once more are correctly rounded, since 53 >= 2p + 2);
* long double (x87, 64-bit significand) for transcendental claims, and 45-digit decimal for f64
  gelu, whose tail long double cannot resolve.
f16/bf16 unary ops are checked on all 65536 bit patterns (exhaustive: a proof on this machine).
"""

from __future__ import annotations

import functools
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from runtime.binding_table import BindingEntry
from runtime.contracts.references import (
    _HALF_GRID,
    ERF,
    _extremum,
    _gelu_decimal,
    erf_decimal,
    round_int,
    wrap,
)
from runtime.contracts.references import round_exact as round_to
from runtime.dtypes import NUMPY_DTYPES
from runtime.kernels.cpu.library import hand_registered_table
from runtime.precision import measure_errors

L = np.longdouble
FLOATS = ("f64", "f32", "f16", "bf16")


TABLE = hand_registered_table()


@pytest.fixture(autouse=True)
def _quiet_fp() -> object:
    """References and edge inputs overflow and divide by zero on purpose."""
    with np.errstate(all="ignore"):
        yield


KEYS = sorted((op, d) for op, d, b in TABLE.iter_keys() if b == "cpu")


def _id(key: tuple[str, tuple[str, ...]]) -> str:
    return f"{key[0]}-{'_'.join(key[1])}"


def run(entry: BindingEntry, inputs: list[np.ndarray], shape, dtype: str, params) -> np.ndarray:
    """Run through the table's entry into a garbage-filled output (all of it must be written)."""
    out = np.full(shape, 7, NUMPY_DTYPES[dtype])
    with np.errstate(all="ignore"):
        entry.kernel(inputs, [out], params)
    return out


# -- input sets -----------------------------------------------------------------------------


def _finfo(dtype: str):
    return ml_dtypes.finfo(NUMPY_DTYPES[dtype])


def edges(dtype: str) -> np.ndarray:
    """Signed zeros, infinities, NaN, extreme subnormals/normals, exp/log thresholds."""
    fi = _finfo(dtype)
    big, tiny, sub = float(fi.max), float(fi.smallest_normal), float(fi.smallest_subnormal)
    lnmax, lnsub = math.log(big), math.log(sub)
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.0, math.pi, -math.pi / 2]
    vals += [big, -big, tiny, -tiny, sub, -sub, 3 * sub, lnmax, -lnmax, lnsub, lnsub - 1.0]
    vals += [lnmax * (1 + 1e-3), lnmax * (1 - 1e-3), 1e-8, -1e-8, 700.0, -745.0, 1e22, -1e300]
    with np.errstate(over="ignore"):
        return np.array(vals, np.float64).astype(NUMPY_DTYPES[dtype])


@functools.cache
def unary_inputs(dtype: str) -> np.ndarray:
    """All bit patterns of 16-bit floats; scaled normals, random bits and edges otherwise."""
    if dtype in ("f16", "bf16"):
        return np.arange(65536, dtype=np.uint16).view(NUMPY_DTYPES[dtype])
    rng = np.random.default_rng(11)
    dt = NUMPY_DTYPES[dtype]
    scaled = rng.standard_normal(30_000) * 10.0 ** rng.integers(-4, 5, 30_000)
    bits = np.frombuffer(rng.bytes(dt.itemsize * 15_000), dt)
    wide = rng.uniform(-750, 750, 10_000)
    with np.errstate(over="ignore"):
        return np.concatenate([scaled.astype(dt), bits, wide.astype(dt), edges(dtype)])


def _pairs(dtype: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    dt = NUMPY_DTYPES[dtype]
    e = edges(dtype)
    ea, eb = (a.ravel() for a in np.meshgrid(e, e))
    a = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
    b = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
    ra = np.frombuffer(rng.bytes(dt.itemsize * n), dt)
    rb = np.frombuffer(rng.bytes(dt.itemsize * n), dt)
    with np.errstate(over="ignore"):
        return (
            np.concatenate([a.astype(dt), ra, ea]),
            np.concatenate([b.astype(dt), rb, eb]),
        )


def ints(dtype: str, shape, rng: np.random.Generator) -> np.ndarray:
    if dtype == "i1":
        return rng.random(shape) < 0.5
    info = np.iinfo(NUMPY_DTYPES[dtype])
    return rng.integers(info.min, info.max, shape, dtype=NUMPY_DTYPES[dtype], endpoint=True)


# -- references -----------------------------------------------------------------------------


gelu_decimal = _gelu_decimal  # 45 significant digits, rounded once to float64


def _gelu_tail_inputs() -> np.ndarray:
    rng = np.random.default_rng(5)
    return np.concatenate(
        [
            rng.uniform(-39, -5, 250),
            rng.uniform(-5, 5, 250),
            rng.uniform(5, 40, 40),
            np.exp(rng.uniform(-40, 0, 60)) * rng.choice([-1.0, 1.0], 60),
            [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, -38.6, -37.6, 1e300, -1e300],
        ]
    )


@functools.cache
def gelu_f64_case(tanh: bool) -> tuple[np.ndarray, np.ndarray]:
    x = _gelu_tail_inputs()
    return x, np.array([gelu_decimal(float(v), tanh) if v == v else v for v in x])


_ERFC = np.frompyfunc(math.erfc, 1, 1)
_ERF = ERF


@functools.cache
def erf_f64_case() -> tuple[np.ndarray, np.ndarray]:
    x = np.concatenate([_gelu_tail_inputs() / 4, np.linspace(-1.2, 1.2, 301), [1.0, -1.0, 7.5]])
    return x, np.array([erf_decimal(float(v)) if v == v else v for v in x])


def gelu_narrow_ref(x64: np.ndarray, tanh: bool) -> np.ndarray:
    """Reference for results rounded to f32 or narrower (math.erfc / long double tanh form)."""
    if tanh:
        xl = x64.astype(L)
        u = np.sqrt(L(2) / L(math.pi)) * (xl + L(0.044715) * xl**3)
        ref = xl / (1 + np.exp(-2 * u))
    else:
        finite = np.where(np.isfinite(x64), x64, 0.0)
        e = _ERFC(np.abs(finite) / math.sqrt(2)).astype(np.float64)
        ref = np.maximum(finite, 0.0) - 0.5 * np.abs(finite) * e
    ref = np.where(np.isnan(x64), np.nan, ref)
    return np.where(np.isinf(x64), np.where(x64 > 0, np.inf, -0.0), ref)


UNARY_REFS = {
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "recip": lambda x: 1 / x,
    "tanh": np.tanh,
    "sin": np.sin,
    "cos": np.cos,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "silu": lambda x: np.where(np.isneginf(x), -0.0, x / (1 + np.exp(-x))),
    "neg": lambda x: -x,
    "abs": np.abs,
    "relu": lambda x: np.where((x > 0) | np.isnan(x), x, 0.0),
}


def exact_f64_unary(op: str, x: np.ndarray) -> np.ndarray:
    """Correctly rounded sqrt / recip of finite f64 (Decimal sqrt never lands on a midpoint)."""
    out = []
    for v in x:
        if not math.isfinite(v) or v == 0 or (op == "sqrt" and v < 0):
            out.append(np.sqrt(v) if op == "sqrt" else np.float64(1.0) / v)
        elif op == "sqrt":
            with localcontext() as ctx:
                ctx.prec = 60
                out.append(float(Decimal(v).sqrt()))
        else:
            out.append(_fraction_to_float(1 / Fraction(v)))
    return np.array(out, np.float64)


def _fraction_to_float(q: Fraction) -> float:
    """Correctly rounded (CPython int/int division), overflowing to +-inf like IEEE RNE."""
    try:
        return float(q)
    except OverflowError:
        return math.inf if q > 0 else -math.inf


_FRACTION_OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
}
_F64_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


def exact_f64_binary(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Correctly rounded + - * / of f64 pairs via Fraction (IEEE specials via numpy)."""
    out = []
    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        if not (math.isfinite(x) and math.isfinite(y)) or (op == "div" and y == 0):
            out.append(float(_F64_OPS[op](np.float64(x), np.float64(y))))
            continue
        exact = _fraction_to_float(_FRACTION_OPS[op](Fraction(x), Fraction(y)))
        # a Fraction has no signed zero: a zero takes IEEE's sign, which the f64 op gets right
        zero = math.copysign(0.0, float(_F64_OPS[op](np.float64(x), np.float64(y))))
        out.append(zero if exact == 0 else exact)
    return np.array(out, np.float64)


# -- cases: (inputs, params, out_shape, reference, scale) ----------------------------------


class Case:
    """One kernel invocation and its reference. `scale` is the magnitude the tolerance test
    measures errors against (None: |ref| elementwise)."""

    def __init__(
        self,
        inputs: list[np.ndarray],
        params: dict,
        out_shape: tuple[int, ...],
        ref: np.ndarray,
        scale: np.ndarray | None = None,
    ) -> None:
        self.inputs, self.params, self.out_shape = list(inputs), params, tuple(out_shape)
        self.ref, self.scale = ref, scale


def _f64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def cases_unary(op: str, dtypes: tuple[str, ...]) -> list[Case]:
    t = dtypes[0]
    rng = np.random.default_rng(1)
    if t not in FLOATS:
        info = np.iinfo(NUMPY_DTYPES[t])
        extremes = np.array([info.min, info.max, 0, -1, 1], NUMPY_DTYPES[t])
        x = np.concatenate([ints(t, 2000, rng), extremes])
        xo = x.astype(object)
        ref = {"neg": -xo, "abs": np.abs(xo), "relu": np.maximum(xo, 0)}[op]
        return [Case([x], {}, x.shape, wrap(ref, t))]
    if op == "erf":
        if t == "f64":
            x, ref = erf_f64_case()
        else:
            x = unary_inputs(t)
            ref = np.where(np.isnan(_f64(x)), np.nan, _ERF(np.nan_to_num(_f64(x))).astype(float))
        return [Case([x], {}, x.shape, ref)]
    if op == "gelu":
        out = []
        for tanh in (False, True):
            params = {"approximate": "tanh" if tanh else "none"}
            if t == "f64":
                x, ref = gelu_f64_case(tanh)
            else:
                x = unary_inputs(t)
                ref = gelu_narrow_ref(_f64(x), tanh)
            out.append(Case([x], params, x.shape, ref))
        return out
    x = unary_inputs(t)
    if t == "f64" and op in ("sqrt", "recip"):
        x = np.concatenate([x[:2000], edges(t)])
        return [Case([x], {}, x.shape, exact_f64_unary(op, x))]
    with np.errstate(all="ignore"):
        ref = UNARY_REFS[op](_f64(x).astype(L))
    return [Case([x], {}, x.shape, ref)]


def cases_binary(op: str, dtypes: tuple[str, ...]) -> list[Case]:
    t = dtypes[0]
    rng = np.random.default_rng(2)
    if t not in FLOATS:
        a, b = ints(t, 3000, rng), ints(t, 3000, rng)
        ao, bo = a.astype(object), b.astype(object)
        ref = {
            "add": lambda: ao + bo,
            "sub": lambda: ao - bo,
            "mul": lambda: ao * bo,
            "max": lambda: np.maximum(ao, bo),
            "min": lambda: np.minimum(ao, bo),
        }[op]()
        return [Case([a, b], {}, a.shape, wrap(ref, t))]
    a, b = _pairs(t, 20_000 if t != "f64" else 1500, rng)
    if op == "pow":
        a, b = np.abs(a), b
        base = np.exp(rng.uniform(-8, 8, 5000)).astype(NUMPY_DTYPES[t])
        a = np.concatenate([a, base, -base[:500]])
        expo = rng.uniform(-30, 30, 5000).astype(NUMPY_DTYPES[t])
        b = np.concatenate([b, expo, np.round(expo[:500])])
        with np.errstate(all="ignore"):
            return [Case([a, b], {}, a.shape, np.power(_f64(a).astype(L), _f64(b).astype(L)))]
    if op in ("max", "min"):  # IEEE 754-2019: NaN propagates, -0 is below +0
        ref = _extremum(op == "max", _f64(a), _f64(b))
    elif t == "f64":
        ref = exact_f64_binary(op, a, b)
    else:
        with np.errstate(all="ignore"):
            ref = _F64_OPS[op](_f64(a), _f64(b))  # f64 then rounding to t: exact (53 >= 2p+2)
    return [Case([a, b], {}, a.shape, ref)]


_COMPARE_REFS = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


def cases_compare(op: str, dtypes: tuple[str, ...]) -> list[Case]:
    t = dtypes[0]
    rng = np.random.default_rng(3)
    if t in FLOATS:
        a, b = _pairs(t, 2000, rng)
    else:
        a, b = ints(t, 3000, rng), ints(t, 3000, rng)
    b = b.copy()
    b[::3] = a[::3]  # plenty of equal pairs
    ref = _COMPARE_REFS[op](a.astype(object), b.astype(object)).astype(bool)
    if t in FLOATS:
        ref = _COMPARE_REFS[op](_f64(a), _f64(b))
    return [Case([a, b], {}, a.shape, ref)]


def cases_where(op: str, dtypes: tuple[str, ...]) -> list[Case]:
    t = dtypes[1]
    rng = np.random.default_rng(4)
    cond = rng.random((5, 1, 7)) < 0.5
    a = _any(t, (5, 6, 7), rng)
    b = _any(t, (6, 1), rng)
    return [Case([cond, a, b], {}, (5, 6, 7), np.where(cond, a, b))]


def _any(t: str, shape, rng: np.random.Generator) -> np.ndarray:
    """Random values of any dtype (floats: scaled normals with a NaN and an inf)."""
    if t not in FLOATS:
        return ints(t, shape, rng)
    x = (rng.standard_normal(shape) * 3).astype(NUMPY_DTYPES[t])
    if x.size > 4:
        x.flat[1], x.flat[3] = np.nan, -np.inf
    return x


def _int_edges(t: str) -> list[int]:
    info = np.iinfo(NUMPY_DTYPES[t])
    vals = [info.min, info.max, 0, 1, -1, 2**24 + 1, 2**24 + 3, 65519, 65520, 257, 255]
    vals += [2**62 + 2**54 + 1, 2**62 + 2**38 + 1, 2**53 + 1, -(2**53) - 3, 2**30 + 2**22 + 1]
    return [v for v in vals if info.min <= v <= info.max]


def _midpoints(grid: np.ndarray, rng: np.random.Generator, n: int = 2000) -> np.ndarray:
    """Exact midpoints between random adjacent finite grid values (representable in f32)."""
    i = rng.integers(0, len(grid) - 2, n)
    return (grid[i] + grid[i + 1]) / 2


def cast_inputs(src: str, dst: str) -> np.ndarray:
    rng = np.random.default_rng(6)
    if src == "i1":
        return np.array([True, False, True])
    if src not in FLOATS:
        return np.concatenate([ints(src, 3000, rng), np.array(_int_edges(src), NUMPY_DTYPES[src])])
    x = unary_inputs(src)
    if src in ("f64", "f32") and x.size > 40_000:
        x = x[::2]
    if src in ("f64", "f32"):  # midpoints of the narrow grids and their neighbours: the traps
        mids = np.concatenate(
            [_midpoints(_HALF_GRID["bf16"], rng), _midpoints(_HALF_GRID["f16"], rng)]
        )
        near = [mids * (1 + 2.0**-30), mids * (1 - 2.0**-40)] if src == "f64" else []
        m = np.concatenate([mids, -mids, *near]).astype(NUMPY_DTYPES[src])
        x = np.concatenate([x, m, np.nextafter(m, np.inf), np.nextafter(m, -np.inf)])
    if dst in FLOATS or dst == "i1":
        return x
    info = np.iinfo(NUMPY_DTYPES[dst])
    with np.errstate(all="ignore"):
        t = np.trunc(_f64(x))
        keep = np.isfinite(t) & (t >= info.min) & (t <= info.max) & (np.abs(t) < 2.0**62)
    frac = np.array([0.5, -0.5, 0.99, -0.99, 1.5, -1.5, 2.75, -2.75]).astype(NUMPY_DTYPES[src])
    x = np.concatenate([x[keep], frac])
    with np.errstate(all="ignore"):
        t = np.trunc(_f64(x))
    return x[(t >= info.min) & (t <= info.max)]


def cases_cast(op: str, dtypes: tuple[str, ...]) -> list[Case]:
    src, dst = dtypes
    x = cast_inputs(src, dst)
    if dst == "i1":
        ref = x != 0
    elif dst in FLOATS:
        if src in FLOATS:
            ref = round_to(_f64(x), dst)
        else:
            ref = np.array([round_int(int(v), dst) for v in x.tolist()], np.float64)
    elif src in FLOATS:
        ref = wrap([int(v) for v in np.trunc(_f64(x)).tolist()], dst)
    else:
        ref = wrap([int(v) for v in x.tolist()], dst)
    return [Case([x], {}, x.shape, ref)]


_REDUCE_PARAMS = [((), False), ((0,), True), ((1, 2), False), ((0, 1, 2), True), ((2,), False)]
_NP_REDUCE = {
    "reduce_sum": np.sum,
    "reduce_max": np.max,
    "reduce_min": np.min,
    "reduce_mean": np.mean,
}


def cases_reduce(op: str, dtypes: tuple[str, ...]) -> list[Case]:
    t = dtypes[0]
    rng = np.random.default_rng(7)
    out = []
    for axes, keep in _REDUCE_PARAMS:
        params = {"axes": axes, "keepdim": keep}
        if t in FLOATS:
            x = (rng.standard_normal((4, 5, 6)) * 4).astype(NUMPY_DTYPES[t])
            if op in ("reduce_max", "reduce_min"):
                x[1, 2, 3] = np.nan
            xf = _f64(x)
            ref = _NP_REDUCE[op](xf, axis=axes, keepdims=keep)
            scale = _NP_REDUCE[op](np.abs(xf), axis=axes, keepdims=keep)
        else:
            x = ints(t, (4, 5, 6), rng)
            if op == "reduce_sum":
                ref = wrap(np.sum(x.astype(object), axis=axes, keepdims=keep), t)
            else:
                ref = _NP_REDUCE[op](x, axis=axes, keepdims=keep)
            scale = None
        out.append(Case([x], params, np.shape(ref), ref, scale))
    return out


def _softmax_rows(t: str, rng: np.random.Generator) -> np.ndarray:
    spreads = np.array([1.0, 30.0, 200.0, 0.0, 8.0])[:, None]
    x = rng.standard_normal((5, 37)) * spreads + rng.uniform(-50, 50, (5, 1))
    x[4, ::5] = -np.inf
    return x.astype(NUMPY_DTYPES[t])


def cases_softmax(op: str, dtypes: tuple[str, ...]) -> list[Case]:
    t = dtypes[0]
    x = _softmax_rows(t, np.random.default_rng(8))
    out = []
    for axis, xs in ((1, x), (0, np.ascontiguousarray(x.T))):
        xl = _f64(xs).astype(L)
        e = np.exp(xl - xl.max(axis=axis, keepdims=True))
        out.append(Case([xs], {"axis": axis}, xs.shape, e / e.sum(axis=axis, keepdims=True)))
    return out


def cases_matmul(op: str, dtypes: tuple[str, ...]) -> list[Case]:
    t = dtypes[0]
    rng = np.random.default_rng(9)
    out = []
    for sa, sb in (((2, 1, 3, 4), (3, 4, 5)), ((4, 6), (6, 3)), ((1, 7, 16), (2, 16, 1))):
        if t in FLOATS:
            a = rng.standard_normal(sa).astype(NUMPY_DTYPES[t])
            b = rng.standard_normal(sb).astype(NUMPY_DTYPES[t])
            ref = np.matmul(_f64(a), _f64(b))
            scale = np.matmul(np.abs(_f64(a)), np.abs(_f64(b)))
        else:
            a, b = ints(t, sa, rng), ints(t, sb, rng)
            ref, scale = wrap(np.matmul(a.astype(object), b.astype(object)), t), None
        out.append(Case([a, b], {}, ref.shape, ref, scale))
    return out


def _floats(t: str, shape, rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(NUMPY_DTYPES[t])


def cases_rms_norm(op: str, dtypes: tuple[str, ...]) -> list[Case]:
    t = dtypes[0]
    rng = np.random.default_rng(10)
    x, w = _floats(t, (3, 4, 16), rng, 3.0), _floats(t, (16,), rng)
    xf, wf = _f64(x), _f64(w)
    ref = xf / np.sqrt(np.mean(xf * xf, axis=-1, keepdims=True) + 1e-5) * wf
    return [Case([x, w], {"eps": 1e-5}, x.shape, ref)]


def cases_layer_norm(op: str, dtypes: tuple[str, ...]) -> list[Case]:
    t = dtypes[0]
    rng = np.random.default_rng(12)
    x = _floats(t, (3, 4, 16), rng, 3.0) + np.asarray(5.0).astype(NUMPY_DTYPES[t])
    w, b = _floats(t, (16,), rng), _floats(t, (16,), rng)
    xf, wf, bf = _f64(x), _f64(w), _f64(b)
    mu, sd = xf.mean(-1, keepdims=True), np.sqrt(xf.var(-1, keepdims=True) + 1e-5)
    ref = (xf - mu) / sd * wf + bf
    scale = (np.abs(xf) + np.abs(mu)) / sd * np.abs(wf) + np.abs(bf)
    return [Case([x, w, b], {"eps": 1e-5}, x.shape, ref, scale)]


def rope_reference(x, cos, sin, interleaved: bool):
    """Long-double rope; returns (reference, |products| magnitude)."""
    xl, c, s = (_f64(a).astype(L) for a in (x, cos, sin))
    h = xl.shape[-1] // 2
    a, b = (xl[..., 0::2], xl[..., 1::2]) if interleaved else (xl[..., :h], xl[..., h:])
    ref, mag = np.empty_like(xl), np.empty_like(xl)
    first, second = (
        (np.s_[..., 0::2], np.s_[..., 1::2]) if interleaved else (np.s_[..., :h], np.s_[..., h:])
    )
    ref[first], ref[second] = a * c - b * s, b * c + a * s
    mag[first] = mag[second] = np.abs(a * c) + np.abs(b * s) + np.abs(b * c) + np.abs(a * s)
    return ref, mag


def cases_rope(op: str, dtypes: tuple[str, ...]) -> list[Case]:
    t = dtypes[0]
    rng = np.random.default_rng(13)
    x = _floats(t, (2, 3, 5, 8), rng, 2.0)
    ang = rng.uniform(-10, 10, (5, 4))
    cos, sin = np.cos(ang).astype(x.dtype), np.sin(ang).astype(x.dtype)
    out = []
    for inter in (False, True):
        ref, mag = rope_reference(x, cos, sin, inter)
        out.append(Case([x, cos, sin], {"interleaved": inter}, x.shape, ref, _f64(mag)))
    return out


def attention_reference(q, k, v, kv_len: int, causal: bool, scale: float, mask=None) -> np.ndarray:
    """Straightforward float64 SDPA: a loop over batch and query heads; `mask` additive."""
    q, k, v = _f64(q), _f64(k), _f64(v)
    bsz, hq, sq, _ = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    m = np.broadcast_to(0.0 if mask is None else _f64(mask), (bsz, hq, sq, sk))
    out = np.zeros((bsz, hq, sq, v.shape[-1]))
    for bi in range(bsz):
        for h in range(hq):
            kh, vh = k[bi, h // (hq // hkv)], v[bi, h // (hq // hkv)]
            for i in range(sq):
                keys = [j for j in range(min(kv_len, sk)) if not causal or j <= i + kv_len - sq]
                keys = [j for j in keys if m[bi, h, i, j] > -np.inf]
                if not keys:
                    continue
                s = np.array([q[bi, h, i] @ kh[j] * scale + m[bi, h, i, j] for j in keys])
                p = np.exp(s - s.max())
                out[bi, h, i] = (p / p.sum()) @ vh[keys]
    return out


def cases_attention(op: str, dtypes: tuple[str, ...]) -> list[Case]:
    t = dtypes[0]
    rng = np.random.default_rng(14)
    out = []
    variants = ((3, True, 6), (3, False, 4), (1, True, 5), (4, True, 2), (2, True, 0))
    if len(dtypes) == 5 and dtypes[3] != "i64":  # the additive mask: 0, -1, -inf, a row all -inf
        for sq, causal in ((3, True), (4, False)):
            q, k = _floats(t, (2, 4, sq, 8), rng), _floats(t, (2, 2, 6, 8), rng)
            v = _floats(t, (2, 2, 6, 5), rng)
            mask = rng.choice(np.array([0.0, -1.0, -np.inf]), (2, 1, sq, 6))
            mask[:, :, 0] = -np.inf
            mask = mask.astype(NUMPY_DTYPES[t])
            ref = attention_reference(q, k, v, 6, causal, 0.35, mask)
            scale = np.full(ref.shape, np.abs(_f64(v)).max())
            out.append(
                Case([q, k, v, mask], {"causal": causal, "scale": 0.35}, ref.shape, ref, scale)
            )
        return out
    for sq, causal, kv_len in variants:
        q, k = _floats(t, (2, 4, sq, 8), rng), _floats(t, (2, 2, 6, 8), rng)
        v = _floats(t, (2, 2, 6, 5), rng)
        live = kv_len if len(dtypes) == 5 else 6
        params = {"causal": causal, "scale": 0.35}
        ref = attention_reference(q, k, v, live, causal, 0.35)
        inputs = [q, k, v] + ([np.array(kv_len, np.int64)] if len(dtypes) == 5 else [])
        out.append(Case(inputs, params, ref.shape, ref, np.full(ref.shape, np.abs(_f64(v)).max())))
    return out


def cases_movement(op: str, dtypes: tuple[str, ...]) -> list[Case]:
    t = dtypes[0]
    rng = np.random.default_rng(15)
    x = _any(t, (4, 5, 6), rng)
    if op == "reshape":
        return [
            Case([x], {}, (10, 12), x.reshape(10, 12)),
            Case([x.T], {}, (30, 4), x.T.reshape(30, 4)),
        ]
    if op == "transpose":
        return [Case([x], {"perm": (2, 0, 1)}, (6, 4, 5), x.transpose(2, 0, 1))]
    if op == "broadcast":
        row = x[:1, :, 2:3]  # (1, 5, 1) -> (3, 4, 5, 6): a new leading dim and two repeats
        return [Case([row], {}, (3, 4, 5, 6), np.broadcast_to(row, (3, 4, 5, 6)))]
    if op == "slice":
        p = {"starts": (1, 0, 2), "limits": (4, 5, 6), "steps": (2, 1, 3)}
        return [Case([x], p, (2, 5, 2), x[1:4:2, 0:5, 2:6:3])]
    if op == "concat":
        parts = [x[:, :2], _any(t, (4, 1, 6), rng), x[:, 3:]]
        return [Case(parts, {"axis": 1}, (4, 5, 6), np.concatenate(parts, axis=1))]
    if op == "index_copy":  # rows at run-time positions; a one-row write into a block
        rows, one = _any(t, (4, 2, 6), rng), _any(t, (1, 1, 4), rng)
        ix = NUMPY_DTYPES[dtypes[2]]
        two, block = x.copy(), x.copy()
        two[:, 3], two[:, 0] = rows[:, 0], rows[:, 1]
        block[2, 4, 1:5] = one[0, 0]
        return [
            Case([x, rows, np.array([3, 0], ix)], {"axis": 1, "offsets": (0, 0, 0)}, x.shape, two),
            Case([x, one, np.array([4], ix)], {"axis": 1, "offsets": (2, 0, 1)}, x.shape, block),
        ]
    idx = np.array([[0, -1, 3], [4, -5, 2]], NUMPY_DTYPES[dtypes[1]])
    return [Case([x, idx], {"axis": 1}, (4, 2, 3, 6), np.take(x, idx, axis=1))]


def cases_fused(op: str, dtypes: tuple[str, ...]) -> list[Case]:
    """matmul_bias_act (every act) and gated_mlp against their decomposition in float64. The
    scale bounds each step's error magnitude: |x| @ |w| (+ |b|) for a matmul, propagated
    through the activation (Lipschitz <= 1.13) and the product of the gated MLP."""
    t = dtypes[0]
    rng = np.random.default_rng(16)
    x = _floats(t, (2, 3, 8), rng)
    x64, ax = _f64(x), np.abs(_f64(x))
    if op == "gated_mlp":
        wg, wu, wd = (_floats(t, s, rng) for s in ((8, 6), (8, 6), (6, 5)))
        g, u = x64 @ _f64(wg), x64 @ _f64(wu)
        ref = (UNARY_REFS["silu"](g) * u) @ _f64(wd)
        scale = 4 * ((ax @ np.abs(_f64(wg))) * (ax @ np.abs(_f64(wu)))) @ np.abs(_f64(wd))
        return [Case([x, wg, wu, wd], {}, ref.shape, ref, scale)]
    w, b = _floats(t, (8, 5), rng), _floats(t, (5,), rng)
    y = x64 @ _f64(w) + _f64(b)
    scale = 2 * (ax @ np.abs(_f64(w)) + np.abs(_f64(b)))
    acts = {
        "none": lambda v: v,
        "relu": UNARY_REFS["relu"],
        "silu": UNARY_REFS["silu"],
        "gelu": lambda v: gelu_narrow_ref(v, False),
        "gelu_tanh": lambda v: gelu_narrow_ref(v, True).astype(np.float64),
    }
    return [Case([x, w, b], {"act": a}, y.shape, f(y), scale) for a, f in acts.items()]


UNARY_OPS = set(UNARY_REFS) | {"gelu", "erf"}


def cases_for(op: str, dtypes: tuple[str, ...]) -> list[Case]:
    """Dispatch to the family's case generator (KeyError: an op without verification)."""
    if op in UNARY_OPS:
        return cases_unary(op, dtypes)
    return CASES[op](op, dtypes)


CASES = {
    **dict.fromkeys(("add", "sub", "mul", "div", "pow", "max", "min"), cases_binary),
    **dict.fromkeys(_COMPARE_REFS, cases_compare),
    **dict.fromkeys(_NP_REDUCE, cases_reduce),
    **dict.fromkeys(
        ("reshape", "transpose", "broadcast", "slice", "concat", "gather", "index_copy"),
        cases_movement,
    ),
    "where": cases_where,
    "cast": cases_cast,
    "softmax": cases_softmax,
    "matmul": cases_matmul,
    "rms_norm": cases_rms_norm,
    "layer_norm": cases_layer_norm,
    "rope": cases_rope,
    "attention": cases_attention,
    "matmul_bias_act": cases_fused,
    "gated_mlp": cases_fused,
}


# -- tests ----------------------------------------------------------------------------------

TOL = {"f64": 1e-12, "f32": 1e-5, "f16": 4e-3, "bf16": 3e-2}
"""Relative tolerance of the reference comparison, against |ref| or the case's magnitude.
The references start from the same narrow inputs, so the kernels' only errors are rounding: the
final rounding (f16 eps/2 = 4.9e-4, bf16 eps/2 = 3.9e-3) plus f32 (f64 for f64) accumulation
over <= 40 terms; about 8 half-ulps of headroom catches real bugs without flaking."""


def check_close(got: np.ndarray, case: Case, dtype: str) -> None:
    if dtype not in FLOATS:
        np.testing.assert_array_equal(got, np.asarray(case.ref).astype(got.dtype))
        return
    tiny = float(_finfo(dtype).smallest_normal)
    with np.errstate(invalid="ignore", over="ignore"):
        ref = round_to(np.asarray(case.ref, np.float64), dtype)
        g = got.astype(np.float64)
        scale = np.abs(ref) if case.scale is None else np.asarray(case.scale, np.float64)
        near = np.abs(g - ref) <= TOL[dtype] * scale + tiny
        ok = (g == ref) | (np.isnan(g) & np.isnan(ref)) | near
    where = np.argwhere(~ok)[:3].tolist()
    assert ok.all(), f"mismatch at {where}: got {g[~ok][:3]} ref {ref[~ok][:3]}"


def check_claim(claim, got: np.ndarray, case: Case, dtype: str) -> None:
    """A claim with bounds must hold against the (correctly rounded) reference."""
    if dtype not in FLOATS:
        if claim.max_ulp == 0:
            np.testing.assert_array_equal(got, np.asarray(case.ref).astype(got.dtype))
        return
    if claim.max_ulp is None and claim.max_relative is None and claim.max_absolute is None:
        return
    report = measure_errors(got, round_to(np.asarray(case.ref, np.float64), dtype))
    assert report.satisfies(claim), f"measured {report} exceeds claim {claim.describe()}"


@pytest.mark.parametrize("key", KEYS, ids=_id)
def test_matches_reference_and_claim(key: tuple[str, tuple[str, ...]]) -> None:
    op, dtypes = key
    entry = TABLE.lookup(op, dtypes, "cpu")
    assert entry.precision.audited and entry.precision.notes
    for case in cases_for(op, dtypes):
        got = run(entry, case.inputs, case.out_shape, dtypes[-1], case.params)
        check_close(got, case, dtypes[-1])
        check_claim(entry.precision, got, case, dtypes[-1])


def _strided(a: np.ndarray) -> np.ndarray:
    """The same values in a non-contiguous view (every other element of a wider buffer)."""
    buf = np.zeros(a.shape + (2,), a.dtype)
    view = buf[..., 0]
    view[...] = a
    return view


BIT_STABLE_KEYS = [k for k in KEYS if TABLE.lookup(k[0], k[1], "cpu").precision.bit_stable]


@pytest.mark.parametrize("key", BIT_STABLE_KEYS, ids=_id)
def test_bit_stable(key: tuple[str, tuple[str, ...]]) -> None:
    """Repeat runs, and runs on strided copies of the same values, are byte-identical."""
    op, dtypes = key
    entry = TABLE.lookup(op, dtypes, "cpu")
    case = cases_for(op, dtypes)[0]
    shape, out_dtype, params = case.out_shape, dtypes[-1], case.params
    first = run(entry, case.inputs, shape, out_dtype, params)
    again = run(entry, [a.copy() for a in case.inputs], shape, out_dtype, params)
    strided = run(entry, [_strided(a) for a in case.inputs], shape, out_dtype, params)
    assert first.tobytes() == again.tobytes()
    assert first.tobytes() == strided.tobytes()


def test_claim_check_detects_a_violation() -> None:
    """The verifier is not vacuous: one ulp off fails a 0-ulp claim, two fail a 1-ulp claim."""
    x = np.linspace(1, 2, 101, dtype=np.float32)
    case = Case([x], {}, x.shape, np.exp(_f64(x)))
    good = np.exp(_f64(x)).astype(np.float32)
    bad = np.nextafter(np.nextafter(good, np.inf), np.inf)
    claim = TABLE.lookup("exp", ("f32", "f32"), "cpu").precision
    check_claim(claim, good, case, "f32")
    with pytest.raises(AssertionError):
        check_claim(claim, bad, case, "f32")
    with pytest.raises(AssertionError):
        check_claim(TABLE.lookup("add", ("f32",) * 3, "cpu").precision, bad, case, "f32")
