"""The C text of `c-vecmath` (`runtime.kernels.cpu.vecmath`): branch-free double math for
f32 results, shared by the standalone vecmath kernels, the generated C kernels
(`lowering.cpu.codegen`) and fuel's native library (the products' activation epilogues), which
is why it lives under `runtime.native`: the library's source is assembled here without
importing the kernel modules. The algorithms and their error claims are described in
`runtime.kernels.cpu.vecmath`."""

from __future__ import annotations

import math
from collections.abc import Sequence

from runtime import special

PRAGMA = '#pragma GCC optimize ("tree-vectorize", "no-trapping-math")'
"""What lets GCC vectorize the loops at `-O2`: the vectorizer itself, and if-conversion of the
selects (trapping math keeps each `?:` on a NaN-comparing double a branch). Neither changes a
result: no contraction, no reassociation, only FP exception flags (never read) may differ.
Other compilers ignore it (clang vectorizes at -O2). With GCC on x86-64 the loops are also
cloned for AVX-512 and AVX2 (`FUEL_VM_CLONES`, chosen at load time by the CPU): the same
IEEE double operations on 8 or 4 lanes instead of 2, no FMA (`-ffp-contract=off`), so the
same bits."""
CLONES = "FUEL_VM_CLONES"
"""The attribute macro (defined with the helpers) a loop calling these functions carries."""


def _hex(v: float) -> str:
    return float(v).hex()


def _horner(var: str, coeffs: Sequence[float]) -> str:
    """`c0 + var * (c1 + var * (...))` with exact hex literals."""
    text = _hex(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        text = f"{_hex(c)} + {var} * ({text})"
    return text


_EXP_POLY = (
    0.999999999961913,
    1.0000000002582792,
    0.5000000104200861,
    0.1666666502318979,
    0.041666226137243516,
    0.008333578387393369,
    0.0013948145751086205,
    0.00019766903837713977,
)
"""e^r on |r| <= ln2 / 2, degree 7: a Chebyshev least-squares fit of relative error (20000
Chebyshev nodes, weight e^-r), max relative error 4.1e-11 (Taylor to degree 10 gave 3e-13 for
three more products; f32 results need ~1e-9)."""
_LOG_ATANH = [1.0 / (2 * k + 1) for k in range(9)]
_ERF_TERMS = special._ERF_SERIES[:16]
_ERFCX_FIT = (
    1.2530080590816524,
    -0.13562111094460705,
    -0.04756239839544157,
    0.12964533593249955,
    -0.11927142736194168,
    0.06830694620747531,
    -0.02378816671676736,
    0.0025251306766300163,
    0.0019475881278509272,
    -0.0007351932075408374,
    -0.00017423241881123392,
    3.831435749407073e-05,
)
"""(1 + 2z) erfcx(z) as a degree-11 polynomial in t = (z - 3) / (z + 3), z in [0, 15 / sqrt 2]
(the range gelu and erf use): a Chebyshev least-squares fit of relative error against
`special.erfcx` (20000 nodes), max relative error 1e-9 (`special._ERFCX_T_POLY`'s 28 terms
reach double precision on all of [0, inf), which an f32 result does not need)."""
ERFCX_Z_MAX = 15.0 * math.sqrt(0.5)
"""The end of `_ERFCX_FIT`'s range: callers clamp z to it."""
_INLINE = "static inline __attribute__((always_inline)) double"

HELPERS: dict[str, str] = {
    "fuel_vm_bits": """
/* c-vecmath (runtime/kernels/cpu/vecmath.py): branch-free double math for f32 results */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* AVX-512 and AVX2 clones picked at load time by the CPU: 8 or 4 doubles a vector, the same
   IEEE operations (no FMA: -ffp-contract=off), so the same bits */
#define FUEL_VM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define FUEL_VM_CLONES
#endif
typedef union { double d; uint64_t u; } fuel_vm_u64;
static inline __attribute__((always_inline)) uint64_t fuel_vm_as_u64(double d) {
  fuel_vm_u64 v = {d}; return v.u;
}
static inline __attribute__((always_inline)) double fuel_vm_as_f64(uint64_t u) {
  fuel_vm_u64 v; v.u = u; return v.d;
}""",
    "fuel_vm_exp": f"""
/* The steps of e^c, |c| <= 160 (expressions: c may be a GCC vector, as in fuel_gemm.c's
   softmax): t = c / ln2 + 1.5 2^52 (n = t - 1.5 2^52 rounds c / ln2 to an integer, whose
   bits t's low word holds), r = c - n ln2 (two-part ln2), e^r on |r| <= ln2 / 2 (Horner) */
#define FUEL_VM_EXP_T(c) ((c) * 0x1.71547652b82fep+0 + 0x1.8p52)
#define FUEL_VM_EXP_R(c, n) (((c) - (n) * 0x1.62e42feep-1) - (n) * 0x1.a39ef35793c76p-33)
#define FUEL_VM_EXP_POLY(r) ({_horner("(r)", _EXP_POLY)})
/* e^x: x = n ln2 + r, a degree-7 fit of e^r (4e-11 relative), 2^n in the exponent bits */
{_INLINE} fuel_vm_exp(double x) {{
  double c = x < -160.0 ? -160.0 : (x > 160.0 ? 160.0 : x);
  double t = FUEL_VM_EXP_T(c), n = t - 0x1.8p52;
  double r = FUEL_VM_EXP_R(c, n);
  double p = FUEL_VM_EXP_POLY(r);
  double e = p * fuel_vm_as_f64((fuel_vm_as_u64(t) + 1023u) << 52);
  return x != x ? x : e;
}}""",
    "fuel_vm_log": f"""
/* log x = e ln2 + 2 atanh((m - 1) / (m + 1)), m in [sqrt(1/2), sqrt(2)) */
{_INLINE} fuel_vm_log(double x) {{
  uint64_t u = fuel_vm_as_u64(x);
  double e = fuel_vm_as_f64(0x4330000000000000u | (u >> 52)) - 0x1p52 - 1023.0;
  double m = fuel_vm_as_f64((u & 0x000fffffffffffffu) | 0x3ff0000000000000u);
  double big = m > 0x1.6a09e667f3bcdp+0 ? 1.0 : 0.0;
  m = m * (1.0 - 0.5 * big);
  e = e + big;
  double f = (m - 1.0) / (m + 1.0), f2 = f * f;
  double r = e * 0x1.62e42fefa39efp-1 + 2.0 * f * ({_horner("f2", _LOG_ATANH)});
  r = x > 0.0 ? r : (x == 0.0 ? -INFINITY : NAN);
  return x == INFINITY ? x : r;
}}""",
    "fuel_vm_tanh": """
/* tanh: 1 - 2 / (e^2|x| + 1) with the sign of x; a - a^3/3 + 2a^5/15 below |x| = 0.03 */
static inline __attribute__((always_inline)) double fuel_vm_tanh(double x) {
  double a = fabs(x), s = a * a;
  double small = a + a * s * (-0x1.5555555555555p-2 + s * 0x1.1111111111111p-3);
  double e = fuel_vm_exp(2.0 * (a > 20.0 ? 20.0 : a));
  return copysign(a < 0.03 ? small : 1.0 - 2.0 / (e + 1.0), x);
}""",
    "fuel_vm_sigmoid": """
/* 1 / (1 + e^-x) with e^-|x| only */
static inline __attribute__((always_inline)) double fuel_vm_sigmoid(double x) {
  double e = fuel_vm_exp(-fabs(x));
  return (x >= 0.0 ? 1.0 : e) / (1.0 + e);
}""",
    "fuel_vm_silu": """
/* x sigmoid(x); -0.0 below -200 (its f32 value; the clamped exp would not give it) */
static inline __attribute__((always_inline)) double fuel_vm_silu(double x) {
  return x < -200.0 ? -0.0 : x * fuel_vm_sigmoid(x);
}""",
    "fuel_vm_gelu_tanh": f"""
/* special.gelu_tanh: x sigmoid(x (K0 + K1 x^2)); -0.0 below -200 */
{_INLINE} fuel_vm_gelu_tanh(double x) {{
  double v = x * ({_hex(special._TANH_K0)} + {_hex(special._TANH_K1)} * (x * x));
  return x < -200.0 ? -0.0 : x * fuel_vm_sigmoid(v);
}}""",
    "fuel_vm_erfcx": f"""
/* erfcx(z) = exp(z^2) erfc(z), 0 <= z <= 15 / sqrt 2: P(t) / (1 + 2z), t = (z - 3) / (z + 3),
   one division for both quotients (1e-9 relative) */
{_INLINE} fuel_vm_erfcx(double z) {{
  double d = z + 3.0, q = 1.0 + 2.0 * z, inv = 1.0 / (d * q), t = (z - 3.0) * q * inv;
  return ({_horner("t", _ERFCX_FIT)}) * d * inv;
}}""",
    "fuel_vm_erf": f"""
/* erf: odd Maclaurin series below |x| = 1, else sign(x) (1 - e^-x^2 erfcx(|x|)) */
{_INLINE} fuel_vm_erf(double x) {{
  double a = fabs(x), as = a < 1.0 ? a : 1.0, ac = a > 6.0 ? 6.0 : a, s = as * as;
  double series = as * ({_horner("s", _ERF_TERMS)});
  double tail = 1.0 - fuel_vm_erfcx(ac) * fuel_vm_exp(-(ac * ac));
  return copysign(a < 1.0 ? series : tail, x);
}}""",
    "fuel_vm_gelu": f"""
/* special.gelu_erf: relu(x) - |x|/2 e^-z^2 erfcx(z), z = |x| / sqrt 2 (z^2 = x^2 / 2 exact);
   |x| clamped to 15, where the tail (5e-50) is below every f32 result */
{_INLINE} fuel_vm_gelu(double x) {{
  double a = fabs(x), ac = a > 15.0 ? 15.0 : a, z = ac * {_hex(special._SQRT_HALF)};
  double tail = 0.5 * ac * fuel_vm_erfcx(z) * fuel_vm_exp(-(0.5 * (ac * ac)));
  return ((x > 0.0 || x != x) ? x : 0.0) - tail;
}}""",
}
"""Helper name -> C text (each after the helpers it calls: `DEPS`)."""

DEPS: dict[str, tuple[str, ...]] = {
    "fuel_vm_exp": ("fuel_vm_bits",),
    "fuel_vm_log": ("fuel_vm_bits",),
    "fuel_vm_tanh": ("fuel_vm_bits", "fuel_vm_exp"),
    "fuel_vm_sigmoid": ("fuel_vm_bits", "fuel_vm_exp"),
    "fuel_vm_silu": ("fuel_vm_bits", "fuel_vm_exp", "fuel_vm_sigmoid"),
    "fuel_vm_gelu_tanh": ("fuel_vm_bits", "fuel_vm_exp", "fuel_vm_sigmoid"),
    "fuel_vm_erfcx": (),
    "fuel_vm_erf": ("fuel_vm_bits", "fuel_vm_exp", "fuel_vm_erfcx"),
    "fuel_vm_gelu": ("fuel_vm_bits", "fuel_vm_exp", "fuel_vm_erfcx"),
}
"""Helper -> the helpers it calls, in emission order."""


def ordered(helpers: set[str] | Sequence[str]) -> list[str]:
    """`helpers` with the helpers they call, in an order where each follows its callees."""
    want = {d for h in helpers for d in (*DEPS.get(h, ()), h)}
    return [h for h in HELPERS if h in want]


def source(helpers: set[str] | Sequence[str]) -> str:
    """The C text of `helpers` and their callees (needs <math.h> and <stdint.h>)."""
    return "\n".join(HELPERS[h] for h in ordered(helpers))
