"""fuel's own conversions into and out of the 16-bit floats (f16, bf16).

fuel promises these results, so it computes them itself instead of taking whatever numpy or
ml_dtypes does in a given release (ml_dtypes 0.6 rounded f64 -> bf16 twice, through f32; 0.7
rounds once). The generated C of `lowering.cpu.codegen_half` implements the same rules:

* **Narrowing** (f64, f32, integers -> f16/bf16, and f16 <-> bf16): round to nearest, ties to
  even, **once**, from the exact source value. Past the largest finite value by half an ulp or
  more gives an infinity of the source's sign. A NaN gives the dtype's quiet NaN with the
  source's sign and no payload (f16 `0x7e00`, bf16 `0x7fc0`, sign bit `0x8000`).
* **Results** of ops that compute (arithmetic, transcendentals, reductions, max/min, ...) are
  narrowed the same way, except that a NaN result is always the *positive* quiet NaN: the sign
  of a computed NaN is the machine's and the library's choice (x86's invalid-operation NaN is
  negative, libm's tanh keeps its input's), so fuel does not promise one.
* **Widening** (f16/bf16 -> f32/f64): exact for numbers; a NaN gives the quiet NaN of the wider
  type with the source's sign and no payload.
* Ops that only move bits (copies, `neg`/`abs` on the sign bit, `where`, data movement) keep
  every bit, NaN payloads included: they are not conversions.

The narrowing works on the integer bits of the exact float64 value of the source (int64 sources
first round *to odd* into float64, which makes the second rounding exact: 53 >= 11 + 2 bits),
slice by slice so the temporaries stay in cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime.dtypes import NUMPY_DTYPES

CHUNK = 16384
"""Elements per slice of a chunked evaluation (here and in the composite numpy kernels): its
temporaries stay in cache and come from malloc's free lists instead of fresh (page-faulting)
mmaps. 3x faster than whole-array evaluation on 1M elements; 4096..65536 measured within 20% of
each other."""

HALF = ("f16", "bf16")


@dataclass(frozen=True)
class HalfFormat:
    """A binary floating-point format of 16 bits: `mant` stored fraction bits, `bias`."""

    mant: int
    bias: int

    @property
    def emin(self) -> int:
        """The exponent of the smallest normal value."""
        return 1 - self.bias

    @property
    def inf_bits(self) -> int:
        return 0x7FFF & ~((1 << self.mant) - 1)

    @property
    def nan_bits(self) -> int:
        """The quiet NaN with no payload (positive)."""
        return self.inf_bits | (1 << (self.mant - 1))


FORMATS = {"f16": HalfFormat(mant=10, bias=15), "bf16": HalfFormat(mant=7, bias=127)}

_F64_FRAC = np.uint64((1 << 52) - 1)
_F64_HIDDEN = np.uint64(1 << 52)
_F64_ABS = np.uint64((1 << 63) - 1)
_F64_INF = np.uint64(0x7FF << 52)


def _bits_from_f64(x: np.ndarray, fmt: HalfFormat) -> np.ndarray:
    """The 16-bit patterns of float64 `x` correctly rounded (RNE) to `fmt`, as uint16."""
    u = x.view(np.uint64)
    sign = (u >> np.uint64(48)).astype(np.uint16) & np.uint16(0x8000)
    a = u & _F64_ABS
    e = (a >> np.uint64(52)).astype(np.int64)
    sig = (a & _F64_FRAC) | np.where(e != 0, _F64_HIDDEN, np.uint64(0))
    # drop the bits below the target's last place: 52 - mant of them for a normal result, more
    # below emin (a subnormal result); 63 drops everything (zero, or below half the least
    # subnormal, which rounds to zero: f64 subnormals lie far below both formats' range)
    exp = np.maximum(e, 1) - 1023
    shift = np.clip(52 - fmt.mant + np.maximum(fmt.emin - exp, 0), 0, 63).astype(np.uint64)
    q = sig >> shift
    rem = sig - (q << shift)
    half = np.uint64(1) << (shift - np.uint64(1))
    up = (rem > half) | ((rem == half) & ((q & np.uint64(1)) == 1))
    # q holds the hidden bit for a normal result, which carries the biased exponent up by one;
    # a rounding carry moves into the exponent the same way (and past the top, into inf)
    biased = (np.maximum(exp, fmt.emin) + (fmt.bias - 1)) << fmt.mant
    bits = np.minimum(biased + q.astype(np.int64) + up, fmt.inf_bits)
    bits = np.where(a > _F64_INF, fmt.nan_bits, bits)
    return bits.astype(np.uint16) | sign


def _bits_from_f32(x: np.ndarray, fmt: HalfFormat) -> np.ndarray:
    """`_bits_from_f64` for a float32 source, on its 32-bit pattern (4-5x faster): adding half
    an ulp less one plus the kept last bit rounds the dropped bits to nearest-even, and a carry
    moves into the exponent (saturating at inf)."""
    b = x.view(np.uint32)
    a = b & np.uint32(0x7FFFFFFF)
    sign = (b >> np.uint32(16)).astype(np.uint16) & np.uint16(0x8000)
    if fmt.bias == 127:  # bf16: f32's exponent range, so f32 subnormals round the same way
        h = (a + (np.uint32(0x7FFF) + ((a >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16)
    else:  # f16
        tiny = a < np.uint32(0x38800000)  # below 2^-14: an f16 subnormal (or zero)
        h = a + (np.uint32(0xFFF) + ((a >> np.uint32(13)) & np.uint32(1)))
        h >>= np.uint32(13)
        h -= np.uint32(0x1C000)  # exponent bias 127 -> 15 (wraps when tiny: replaced below)
        np.minimum(h, np.uint32(0x7C00), out=h)
        # |x| + 0.5 rounds |x| to a multiple of 2^-24 (RNE, one float addition), leaving
        # k = |x| 2^24 in the low fraction bits; the f16 pattern of k 2^-24 is k itself
        k = np.fmin(a.view(np.float32), np.float32(2.0**-14)) + np.float32(0.5)
        h = np.where(tiny, k.view(np.uint32) - np.uint32(0x3F000000), h)
    h = np.where(a > np.uint32(0x7F800000), np.uint32(fmt.nan_bits), h)
    return h.astype(np.uint16) | sign


def _i64_to_f64_odd(x: np.ndarray) -> np.ndarray:
    """int64 rounded to float64 *to odd*: truncated toward zero, the last bit set if inexact
    (hi/lo split, an exact TwoSum of the two exact halves)."""
    hi = (x >> 32).astype(np.float64) * 4294967296.0
    lo = (x & 0xFFFFFFFF).astype(np.float64)
    s = hi + lo
    bb = s - hi
    err = (hi - (s - bb)) + (lo - bb)
    s = np.where((err != 0) & ((err < 0) != (s < 0)), np.nextafter(s, 0.0), s)
    return (s.view(np.int64) | (err != 0).astype(np.int64)).view(np.float64)


def _exact_f64(x: np.ndarray) -> np.ndarray:
    """float64 values that round to the same 16-bit value as `x` does (exact, except int64
    beyond 2^53: rounded to odd, which keeps the final rounding exact)."""
    if x.dtype == np.int64:
        return _i64_to_f64_odd(x)
    if x.dtype == np.uint64:
        raise TypeError("uint64 has no fuel dtype")
    return x.astype(np.float64)


def narrow_into(x: np.ndarray, out: np.ndarray, *, result: bool = False) -> None:
    """Write `x` (any float, integer or bool array broadcastable to `out`) into the f16/bf16
    array `out`, correctly rounded (see the module docstring); `result`: `x` is an op's
    computed result, whose NaNs become the positive quiet NaN."""
    fmt = FORMATS[_half_name(out.dtype)]
    x = np.broadcast_to(np.asarray(x), out.shape)
    flat_in = x.reshape(-1) if x.flags.c_contiguous else np.ascontiguousarray(x).reshape(-1)
    contiguous = out.flags.c_contiguous
    flat_out = out.reshape(-1) if contiguous else np.empty(out.size, out.dtype)
    bits_out = flat_out.view(np.uint16)
    with np.errstate(all="ignore"):
        for i in range(0, flat_in.size, CHUNK):
            part = flat_in[i : i + CHUNK]
            if part.dtype == np.float32:
                bits_out[i : i + CHUNK] = _bits_from_f32(part, fmt)
            else:
                bits_out[i : i + CHUNK] = _bits_from_f64(_exact_f64(part), fmt)
    if result:
        nan = (bits_out & np.uint16(0x7FFF)) > np.uint16(fmt.inf_bits)
        bits_out[nan] = fmt.nan_bits
    if not contiguous:
        np.copyto(out, flat_out.reshape(out.shape))


def narrow(x: np.ndarray, dtype: str, *, result: bool = False) -> np.ndarray:
    """A new f16/bf16 array of `x` correctly rounded (`result`: as in `narrow_into`)."""
    out = np.empty(np.shape(x), NUMPY_DTYPES[dtype])
    narrow_into(np.asarray(x), out, result=result)
    return out


def widen_into(x: np.ndarray, out: np.ndarray) -> None:
    """Write the f16/bf16 array `x` into the f32/f64 array `out`: exact, a NaN becomes the
    quiet NaN of `out`'s type with `x`'s sign."""
    np.copyto(out, x, casting="unsafe")
    nan = np.isnan(out)
    if nan.any():
        np.copyto(out, np.copysign(np.array(np.nan, out.dtype), out), where=nan)


def store(out: np.ndarray, y: np.ndarray) -> None:
    """`out[...] = y` as a kernel writes its computed result: rounded once by `narrow_into` as a
    result where `out` is f16/bf16 and `y` is not already of its dtype, else numpy's own
    conversion (exact or IEEE correctly rounded between f64, f32 and the integers)."""
    if out.dtype in _HALF_NUMPY and np.asarray(y).dtype != out.dtype:
        narrow_into(y, out, result=True)
    else:
        np.copyto(out, y, casting="unsafe")


def apply_into(
    uf: np.ufunc, args: tuple[Any, ...], out: np.ndarray, dtype: np.dtype | None = None
) -> None:
    """`uf(*args)` (computed in `dtype`, None: numpy's choice) written into `out` as `store`
    writes it: straight into `out` (numpy's conversion) unless `out` is f16/bf16."""
    if out.dtype in _HALF_NUMPY:
        narrow_into(uf(*args, dtype=dtype), out, result=True)
    else:
        uf(*args, out=out, dtype=dtype, casting="unsafe")


_HALF_NUMPY = {NUMPY_DTYPES[d]: d for d in HALF}


def _half_name(dt: np.dtype) -> str:
    try:
        return _HALF_NUMPY[dt]
    except KeyError:
        raise TypeError(f"{dt} is not a 16-bit float (f16 or bf16)") from None


def is_half(dt: np.dtype) -> bool:
    """Whether numpy dtype `dt` is f16 or bf16."""
    return dt in _HALF_NUMPY


REVISION_CODE = (
    narrow_into,
    _bits_from_f64,
    _bits_from_f32,
    _i64_to_f64_odd,
    widen_into,
    store,
    apply_into,
)
"""The functions a kernel's revision covers when it writes through this module."""
