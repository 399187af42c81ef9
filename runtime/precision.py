"""Precision guarantees and the ULP arithmetic used to verify them.

A `PrecisionGuarantee` is what a kernel *claims* about its numerics against an exact
(float64-or-better) reference. The picker's precision floor admits only claims it can prove
("cannot prove => not admissible"), so every claim made by a fuel kernel is checked by a test
with `ulp_distance` / `max_errors` below.

A bound is either declared (a number derived from the kernel's arithmetic, which verification
checks) or *measured* (`measured` names it): the worst case the verification harness saw on its
stated probe set (`runtime.contracts.probes`), recorded in the kernel's ledger and read from
there when the kernel registers. `max_relative` is elementwise for elementwise ops and normwise
(per output row, `runtime.contracts.verify.NORMWISE_OPS`) for matmul, attention, the norms and
the float reductions, where cancellation leaves no elementwise bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import ml_dtypes
import numpy as np

from runtime.rounding import is_half, narrow_into

_UNAUDITED_NOTE = "unaudited"


@dataclass(frozen=True)
class PrecisionGuarantee:
    """A kernel's numeric claim relative to an exact reference rounded to the output dtype.

    `max_ulp` is measured in units in the last place of the output dtype, `max_relative` and
    `max_absolute` as |got - ref| / |ref| and |got - ref| (|ref| at least the output dtype's
    smallest normal: below it a relative bound is one on |got - ref| / tiny). None means "no
    claim for this bound".
    `audited=False` is the UNAUDITED sentinel: nothing was checked. `audited=True` with no bounds
    and `bit_stable=False` is an audited "no bound applies" conclusion, with its reason in notes.
    `measured` names the bounds (`max_ulp`, `max_relative`) that are measured, not declared:
    None as declared, set from the ledger by the precision gate (`resolved`).
    """

    bit_stable: bool = False
    max_ulp: int | None = None
    max_relative: float | None = None
    max_absolute: float | None = None
    audited: bool = True
    notes: str = field(default="", compare=False)
    measured: tuple[str, ...] = ()

    def declared(self) -> PrecisionGuarantee:
        """The claim as declared: measured bounds back to None (what a contract writes)."""
        return replace(self, **dict.fromkeys(self.measured))

    def resolved(self, bounds: dict[str, float]) -> PrecisionGuarantee:
        """This claim with its measured bounds set to `bounds` (from a ledger)."""
        return replace(self, **bounds)

    def makes_no_static_claim(self) -> bool:
        """True when no bound and no bit-stability is claimed (UNAUDITED or `none`)."""
        return (
            not self.bit_stable
            and self.max_ulp is None
            and (self.max_relative is None and self.max_absolute is None)
        )

    def is_unaudited(self) -> bool:
        return not self.audited

    def meets(self, other: PrecisionGuarantee) -> bool:
        """Whether this claim is at least as strong as `other` on every bound `other` sets. A
        0-ulp claim is the rounded reference itself, so it also meets every relative and
        absolute bound (both errors are measured against that rounded reference)."""
        if other.bit_stable and not self.bit_stable:
            return False
        exact = self.max_ulp == 0
        for mine, theirs in (
            (self.max_ulp, other.max_ulp),
            (0.0 if exact else self.max_relative, other.max_relative),
            (0.0 if exact else self.max_absolute, other.max_absolute),
        ):
            if theirs is not None and (mine is None or mine > theirs):
                return False
        return True

    @staticmethod
    def none(reason: str) -> PrecisionGuarantee:
        """An audited conclusion that no static bound applies, with the reason."""
        return PrecisionGuarantee(audited=True, notes=reason)

    def describe(self) -> str:
        """`bit_stable, ulp<=1, rel<=3.3e-07 (measured)`; a measured bound not yet read from
        a ledger is `rel<=?`."""
        parts = ["bit_stable"] if self.bit_stable else []
        for name, short, fmt in (
            ("max_ulp", "ulp", "d"),
            ("max_relative", "rel", "g"),
            ("max_absolute", "abs", "g"),
        ):
            bound = getattr(self, name)
            note = " (measured)" if name in self.measured else ""
            if bound is not None:
                parts.append(f"{short}<={bound:{fmt}}{note}")
            elif note:
                parts.append(f"{short}<=?{note}")
        if not self.audited:
            parts.append(_UNAUDITED_NOTE)
        return ", ".join(parts) or "none"


REFERENCE = PrecisionGuarantee(bit_stable=True, max_ulp=0, notes="exact")
"""Bit-stable and correctly rounded: the result equals the exact value rounded to the dtype."""

DETERMINISTIC = PrecisionGuarantee(bit_stable=True, notes="deterministic, no numeric bound")
UNAUDITED = PrecisionGuarantee(audited=False, notes=_UNAUDITED_NOTE)


def _ordered_int(x: np.ndarray) -> np.ndarray:
    """Map floats to int64 monotone in the IEEE total order (adjacent floats differ by 1)."""
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[x.dtype.itemsize]
    i = np.ascontiguousarray(x).view(bits).astype(np.int64)
    lowest = np.int64(np.iinfo(bits).min)
    # A set sign bit means the magnitude is i - lowest; its order position is minus that.
    # (lowest - i cannot overflow: i is negative there.) -0.0 maps to 0, like +0.0: the sign of
    # a zero is counted separately (`ulp_distance`).
    return np.where(i < 0, lowest - i, i)


def round_to(ref: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Correctly rounded conversion of a float64 reference to `dt` (RNE, once: fuel's own for
    f16/bf16, `runtime.rounding`; IEEE numpy casts for f32/f64)."""
    ref = np.asarray(ref, dtype=np.float64)
    if is_half(dt):
        out = np.empty(ref.shape, dt)
        narrow_into(ref, out)
        return out
    return ref.astype(dt)


def ulp_distance(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Number of representable values of `got.dtype` between `got` and `ref` (rounded to it).

    Both arrays are compared in `got`'s float dtype (f64, f32, f16 or bf16). NaN against NaN is
    distance 0; NaN against a number is the maximum int64. +0 and -0 are 1 apart: the sign of a
    zero is part of the result (1 / x, copysign, a later product or log tell them apart), so a
    kernel returning +0 where IEEE arithmetic gives -0 is not exact. Every other distance is the
    number of floats between the two values.
    """
    dt = got.dtype
    ref_r = round_to(ref, dt) if np.asarray(ref).dtype != dt else np.asarray(ref)
    g, r = _ordered_int(got), _ordered_int(ref_r)
    dist = np.abs(g - r) + ((g == 0) & (r == 0) & (signbit(got) != signbit(ref_r)))
    g_nan = np.isnan(got.astype(np.float64))
    r_nan = np.isnan(ref_r.astype(np.float64))
    dist = np.where(g_nan & r_nan, 0, dist)
    return np.where(g_nan ^ r_nan, np.iinfo(np.int64).max, dist)


def signbit(x: np.ndarray) -> np.ndarray:
    """The sign bit of every element of a float array (f16/bf16 included)."""
    return np.signbit(np.asarray(x).astype(np.float64))


def is_float_dtype(dt: np.dtype) -> bool:
    return np.issubdtype(dt, np.floating) or dt == np.dtype(ml_dtypes.bfloat16)


@dataclass(frozen=True)
class ErrorReport:
    """Worst-case errors of a kernel output against a reference."""

    max_ulp: int
    max_relative: float
    max_absolute: float
    bit_exact: bool

    def satisfies(self, claim: PrecisionGuarantee) -> bool:
        """True when every bound `claim` sets holds for this measurement."""
        if claim.max_ulp is not None and self.max_ulp > claim.max_ulp:
            return False
        if claim.max_relative is not None and self.max_relative > claim.max_relative:
            return False
        return claim.max_absolute is None or self.max_absolute <= claim.max_absolute


def measure_errors(got: np.ndarray, ref: np.ndarray) -> ErrorReport:
    """Measure `got` against a high-precision `ref` (any float dtype, ideally float64)."""
    ref64 = np.asarray(ref, dtype=np.float64)
    got64 = got.astype(np.float64)
    same_nan = np.isnan(got64) & np.isnan(ref64)
    with np.errstate(invalid="ignore", over="ignore"):
        abs_err = np.where(same_nan | (got64 == ref64), 0.0, np.abs(got64 - ref64))
        rel_err = np.where(abs_err == 0, 0.0, abs_err / np.maximum(np.abs(ref64), 1e-300))
    if is_float_dtype(got.dtype):
        ulp = int(ulp_distance(got, ref64).max(initial=0))
        exact = ulp == 0  # NaN matches NaN; +0 and -0 differ
    else:  # integers compare exactly (float64 cannot hold every i64)
        ref_i = np.asarray(ref)
        ref_i = ref_i if ref_i.dtype.kind in "iub" else ref_i.astype(np.int64)
        diff = (
            np.abs(got.astype(object) - ref_i.astype(object))
            if got.dtype.itemsize == 8
            else (np.abs(got.astype(np.int64) - ref_i.astype(np.int64)))
        )
        ulp = int(np.max(diff, initial=0))
        exact = ulp == 0
    return ErrorReport(
        max_ulp=ulp,
        max_relative=float(np.nan_to_num(rel_err, nan=np.inf).max(initial=0.0)),
        max_absolute=float(np.nan_to_num(abs_err, nan=np.inf).max(initial=0.0)),
        bit_exact=exact,
    )
