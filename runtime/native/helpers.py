"""C helper functions shared by fuel's native library and the generated C kernels
(erf, gelu, f16/bf16 conversions ...): `helper_source(name)` is a helper with the helpers it
calls, in dependency order."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from runtime import special

HELPERS = {
    "fuel_sigmoid": """
/* 1 / (1 + exp(-x)) without overflow: exp only sees -|x| (special.sigmoid). */
static double fuel_sigmoid(double x) {
  double e = exp(-fabs(x));
  return (x >= 0 ? 1.0 : e) / (1.0 + e);
}""",
    "fuel_silu": """
/* x * sigmoid(x) (special.x_sigmoid(x, x)): x e / (1 + e), e = exp(-|x|); below -700, where e
   nears the subnormals, (x h) h with h = exp(-|x|/2); silu(+-inf) is its limit (+inf, -0.0). */
static double fuel_silu(double x) {
  if (isinf(x)) return x > 0 ? x : -0.0;
  double ax = fabs(x), e = exp(-ax), num;
  if (x >= 0) num = x;
  else if (x < -700.0) { double h = exp(-0.5 * ax); num = (x * h) * h; }
  else num = x * e;
  return num / (1.0 + e);
}""",
    "fuel_tiny_half_sum": """
/* special.tiny_half_sum: for 0 < |x| < 2^-60, silu and gelu are x/2 plus a positive term that
   double drops; the next double above x/2 keeps it for the narrower rounding that follows. */
static double fuel_tiny_half_sum(double x, double y) {
  return (x != 0.0 && fabs(x) < 0x1p-60) ? nextafter(0.5 * x, INFINITY) : y;
}""",
    "fuel_x_sigmoid": """
/* x * sigmoid(v) (special.x_sigmoid without v_lo), silu's form for any v; +-inf x: limits. */
static double fuel_x_sigmoid(double x, double v) {
  double av = fabs(v), e = exp(-av), num;
  if (v >= 0) num = x;
  else if (v < -700.0) { double h = exp(-0.5 * av); num = (x * h) * h; }
  else num = x * e;
  double r = num / (1.0 + e);
  return isinf(x) ? (x > 0 ? x : -0.0) : r;
}""",
    "fuel_gelu_tanh": """
/* special.gelu_tanh: x * sigmoid(x (K0 + K1 x^2)), K0 = 2 sqrt(2/pi), K1 = 0.044715 K0. */
static double fuel_gelu_tanh(double x) {
  return fuel_x_sigmoid(x, x * (%(k0)s + %(k1)s * (x * x)));
}""",
    "fuel_erfcx": """
/* special.erfcx: exp(z^2) erfc(z), z >= 0; g(t) (1 + 2z)^-1 with t = 1 - 6 / (z + 3). */
static const double FUEL_ERFCX_T_POLY[%(n_erfcx)d] = {%(erfcx)s};
static double fuel_erfcx(double z) {
  double t = 1.0 - 6.0 / (z + 3.0), g = FUEL_ERFCX_T_POLY[%(n_erfcx)d - 1];
  for (int k = %(n_erfcx)d - 2; k >= 0; --k) { g *= t; g += FUEL_ERFCX_T_POLY[k]; }
  return g / (1.0 + 2.0 * z);
}
/* |x| with its low 27 fraction bits cleared: hi * hi is exact. */
static double fuel_hi27(double ax) {
  union { double d; int64_t i; } u = {ax};
  u.i &= ~((INT64_C(1) << 27) - 1);
  return u.d;
}""",
    "fuel_gelu_erf": """
/* special.gelu_erf: relu(x) - 0.5 |x| erfc(|x| / sqrt 2), erfc via erfcx and a split exp. */
static double fuel_gelu_erf(double x) {
  double ax = fabs(x), hi = fuel_hi27(ax), lo_part = (ax - hi) * (ax + hi);
  double tail = 0.5 * ax * fuel_erfcx(ax * %(sqrt_half)s);
  tail *= exp(-0.5 * lo_part);
  tail *= exp(-0.5 * (hi * hi));
  double out = ((x > 0.0 || x != x) ? x : 0.0) - tail;
  return isinf(x) ? (x > 0 ? x : -0.0) : out;
}""",
    "fuel_erf": """
/* special.erf: odd Maclaurin series below |x| = 1, else sign(x) (1 - erfc(|x|)). */
static const double FUEL_ERF_SERIES[%(n_erf)d] = {%(erf)s};
static double fuel_erf(double x) {
  if (isinf(x)) return x > 0 ? 1.0 : -1.0;
  double x2 = x * x, s = FUEL_ERF_SERIES[%(n_erf)d - 1];
  for (int k = %(n_erf)d - 2; k >= 0; --k) { s *= x2; s += FUEL_ERF_SERIES[k]; }
  double ax = fabs(x);
  if (ax < 1.0) return x * s;
  double hi = fuel_hi27(ax);
  double tail = fuel_erfcx(ax) * exp(-((ax - hi) * (ax + hi))) * exp(-(hi * hi));
  return copysign(1.0 - tail, x);
}""",
}
"""Helper functions, emitted into a kernel's source only when it calls them (with the helpers
they call: `HELPER_DEPS`)."""
HELPER_DEPS = {
    "fuel_gelu_tanh": ("fuel_x_sigmoid",),
    "fuel_gelu_erf": ("fuel_erfcx",),
    "fuel_erf": ("fuel_erfcx",),
}


@functools.cache
def _helper_constants() -> dict[str, Any]:
    """The numeric tables of the numpy kernels' special functions, as exact C literals."""

    def arr(xs: Sequence[float]) -> str:
        return ", ".join(float(x).hex() for x in xs)

    return {
        "k0": special._TANH_K0.hex(),
        "k1": special._TANH_K1.hex(),
        "sqrt_half": special._SQRT_HALF.hex(),
        "erfcx": arr(special._ERFCX_T_POLY),
        "n_erfcx": len(special._ERFCX_T_POLY),
        "erf": arr(special._ERF_SERIES),
        "n_erf": len(special._ERF_SERIES),
    }


def helper_source(name: str) -> str:
    """The C text of helper `name`, its numeric tables filled in."""
    text = HELPERS[name]
    return text % _helper_constants() if "%(" in text else text
