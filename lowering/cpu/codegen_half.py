"""f16 and bf16 in the generated C of `lowering.cpu.codegen`: conversions, rounding, casts.

A 16-bit float is stored as its `uint16_t` bits and held in the kernel as the `float` of the
same value (bit-exact, NaN payloads included), so compares, `where` and sign ops need nothing
special. Every op that computes rounds its result back to the dtype right away, as each numpy
kernel does on its own (`runtime/kernels/cpu/elementwise.py`): a fused chain rounds after every
op, just like the unfused kernels. The conversions are bit manipulation (portable C11, no
`_Float16`) and implement fuel's own rounding rules, the ones `runtime.rounding` implements for
the numpy kernels, so the two agree bit for bit by construction, not by measuring a library:

* narrowing (f64, f32, integers -> f16/bf16, and between the two): round to nearest even, once,
  from the exact source value (f64 -> bf16 rounds to odd in f32 first, which makes the final
  RNE exact; int64 -> bf16 keeps a sticky bit); a NaN becomes the dtype's quiet NaN with its
  sign (f16 `0x7e00`, bf16 `0x7fc0`), and a NaN an op computes is the positive one;
* widening (f16/bf16 -> f32/f64): exact; a NaN becomes the quiet NaN with its sign;
* + - * / sqrt recip compute in f32 (one rounding to 16 bits after an IEEE f32 op is exact);
  the transcendentals (exp log tanh sin cos rsqrt sigmoid silu erf gelu) compute in double and
  round once: correctly rounded, since no 16-bit result lies within 2^-40 of a rounding midpoint
  while libm's and numpy's double routines are within a few 2^-53 (checked on every input by
  tests/test_half_numerics.py).
"""

from __future__ import annotations

HALF = ("f16", "bf16")

HELPER = "fuel_half"
"""The one helper block holding every conversion below (`static inline`: unused ones cost
nothing), emitted before any other helper."""

HELPER_SOURCE = """
/* f16/bf16 <-> float/double: fuel's rounding rules (runtime/rounding.py). */
typedef union { float f; uint32_t u; } fuel_f32bits;
typedef union { double d; uint64_t u; } fuel_f64bits;
static inline float fuel_h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  fuel_f32bits v;
  if (e == 0x1f) v.u = sign | 0x7f800000u | (m << 13);
  else if (e == 0) { v.f = (float)m * 0x1p-24f; v.u |= sign; }  /* exact */
  else v.u = sign | ((e + 112u) << 23) | (m << 13);
  return v.f;
}
static inline uint16_t fuel_f2h(float f) {
  fuel_f32bits v = {f};
  uint32_t a = v.u & 0x7fffffffu;
  uint16_t sign = (uint16_t)((v.u >> 16) & 0x8000u);
  if (a > 0x7f800000u) return sign | 0x7e00u;  /* NaN: the quiet NaN */
  if (a >= 0x477ff000u) return sign | 0x7c00u;  /* >= 65520 (or inf): inf */
  if (a < 0x38800000u) {  /* below 2^-14: subnormal; RNE to a multiple of 2^-24 */
    float t = fabsf(f) * 0x1p24f;
    return sign | (uint16_t)((t + 0x1p23f) - 0x1p23f);
  }
  uint32_t r = a - 0x38000000u;  /* rebias 127 -> 15 */
  r += 0xfffu + ((r >> 13) & 1u);
  return sign | (uint16_t)(r >> 13);
}
static inline uint16_t fuel_d2h(double d) {
  fuel_f64bits v = {d};
  uint64_t a = v.u & 0x7fffffffffffffffull;
  uint16_t sign = (uint16_t)((v.u >> 48) & 0x8000u);
  if (a > 0x7ff0000000000000ull) return sign | 0x7e00u;  /* NaN: the quiet NaN */
  if (a >= 0x40effe0000000000ull) return sign | 0x7c00u;  /* >= 65520 (or inf): inf */
  if (a < 0x3f10000000000000ull) {  /* below 2^-14 */
    double t = fabs(d) * 0x1p24;
    return sign | (uint16_t)((t + 0x1p52) - 0x1p52);
  }
  uint64_t r = a - 0x3f00000000000000ull;  /* rebias 1023 -> 15 */
  r += 0x1ffffffffffull + ((r >> 42) & 1u);
  return sign | (uint16_t)(r >> 42);
}
/* the bits of a held f16 value (exact: it is representable; a NaN keeps its payload) */
static inline uint16_t fuel_bits_h(float f) {
  fuel_f32bits v = {f};
  if (f != f) return (uint16_t)(((v.u >> 16) & 0x8000u) | 0x7c00u | ((v.u >> 13) & 0x3ffu));
  return fuel_f2h(f);
}
static inline float fuel_b2f(uint16_t b) { fuel_f32bits v; v.u = (uint32_t)b << 16; return v.f; }
static inline uint16_t fuel_f2b(float f) {
  fuel_f32bits v = {f};
  if (f != f) return (uint16_t)(((v.u >> 16) & 0x8000u) | 0x7fc0u);  /* the quiet NaN */
  return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}
/* the bits of a held bf16 value (exact: its low 16 bits are 0, NaN payload kept) */
static inline uint16_t fuel_bits_b(float f) { fuel_f32bits v = {f}; return (uint16_t)(v.u >> 16); }
/* convert a float / double to f16 or bf16, held as float again (a NaN keeps its sign) */
static inline float fuel_ch(float f) { return fuel_h2f(fuel_f2h(f)); }
static inline float fuel_chd(double d) { return fuel_h2f(fuel_d2h(d)); }
static inline float fuel_cb(float f) { return fuel_b2f(fuel_f2b(f)); }
/* double -> bf16 rounded once: to f32 rounding to odd, then RNE (24 >= 8 + 2 bits) */
static inline float fuel_cbd(double d) {
  fuel_f32bits v = {(float)d};
  double back = (double)v.f;
  if (back != d && d == d) { if (fabs(back) > fabs(d)) v.u -= 1u; v.u |= 1u; }
  return fuel_cb(v.f);
}
/* round an op's computed result: the same, but a NaN result is the positive quiet NaN */
static inline float fuel_rh(float f) { return f != f ? NAN : fuel_ch(f); }
static inline float fuel_rhd(double d) { return d != d ? NAN : fuel_chd(d); }
static inline float fuel_rb(float f) { return f != f ? NAN : fuel_cb(f); }
static inline float fuel_rbd(double d) { return d != d ? NAN : fuel_cbd(d); }
/* int64 -> bf16 rounded once: shift into 53 bits keeping a sticky bit (an exact double) */
static inline float fuel_i64_rb(int64_t x) {
  uint64_t a = x < 0 ? 0u - (uint64_t)x : (uint64_t)x;
  int s = 0;
  while (a >> 53) { a = (a >> 1) | (a & 1u); ++s; }
  double d = ldexp((double)a, s);
  return fuel_cbd(x < 0 ? -d : d);
}
/* a held f16/bf16 value widened: exact, a NaN becomes the quiet NaN with its sign */
static inline float fuel_widen(float f) { return f != f ? copysignf(NAN, f) : f; }"""

LOAD = {"f16": "fuel_h2f", "bf16": "fuel_b2f"}
"""Storage bits -> held float."""
STORE = {"f16": "fuel_bits_h", "bf16": "fuel_bits_b"}
"""Held float -> storage bits (exact: held values are representable, NaN payloads kept)."""
ROUND = {"f16": "fuel_rh", "bf16": "fuel_rb"}
"""An op's float result -> the nearest value of the dtype (a NaN: the positive quiet NaN)."""
ROUND_DOUBLE = {"f16": "fuel_rhd", "bf16": "fuel_rbd"}
"""An op's double result (the transcendentals' f64 compute) -> the same."""
CONVERT = {"f16": "fuel_ch", "bf16": "fuel_cb"}
"""`fuel.cast` of a float -> the nearest value of the dtype (a NaN keeps its sign)."""
CONVERT_DOUBLE = {"f16": "fuel_chd", "bf16": "fuel_cbd"}
"""`fuel.cast` of a double (f64, i32, i64 -> f16) -> the same."""

EXACT = ("neg", "abs", "where", "broadcast", "eq", "ne", "lt", "le", "gt", "ge")
"""Ops whose result is an operand (or its sign flipped) or a bool: no rounding step."""
DOUBLE_COMPUTE = (
    "exp",
    "log",
    "tanh",
    "sin",
    "cos",
    "rsqrt",
    "sigmoid",
    "silu",
    "erf",
    "gelu",
    "gelu_tanh",
)
"""Ops the numpy kernels evaluate in f64 for f16/bf16 (`_common.F64_COMPUTE`), rounded once."""

SUPPORTED: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("neg", "abs", "relu", "sqrt", "recip"), HALF),
    **dict.fromkeys(DOUBLE_COMPUTE, HALF),
    **dict.fromkeys(("add", "sub", "mul", "div", "max", "min"), HALF),
    **dict.fromkeys(("eq", "ne", "lt", "le", "gt", "ge", "where", "cast", "broadcast"), HALF),
}
"""op -> 16-bit dtypes whose C is bit-identical to the numpy kernel, NaN payloads included:
both implement the rounding rules above, and tests/test_half_numerics.py checks all 65,536
inputs of each unary op and cast against an exact reference and the numpy kernel. `pow` is left
out: numpy's double `power` and libm's may differ in the last bit where the exact result is a
16-bit rounding midpoint (x^2 of an 11-bit x can be one), so its groups stay on numpy."""


def half_cast(src: str, dst: str, x: str, ctype: dict[str, str]) -> str:
    """`fuel.cast` with a 16-bit float on either side (`x` is the held value), by the rules in
    the module docstring; float -> int truncates (in range)."""
    if src == dst:
        return x
    if dst == "i1":
        return f"({x} != 0)"
    if src in HALF:
        if dst in HALF:
            return f"{CONVERT[dst]}({x})"
        if dst == "f32":
            return f"fuel_widen({x})"
        if dst == "f64":
            return f"(double)fuel_widen({x})"
        return f"({ctype[dst]}){x}"
    if src in ("i8", "u8", "i1"):
        return f"(float){x}"  # exact in both
    if src == "f32":
        return f"{CONVERT[dst]}({x})"
    if src == "i64" and dst == "bf16":
        return f"fuel_i64_rb({x})"
    # f64, i32 (exact in double) and i64 -> f16 (rounding in double only past 2^53: inf anyway)
    return f"{CONVERT_DOUBLE[dst]}((double){x})"
