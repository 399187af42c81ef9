"""f16 and bf16 in the generated C of `lowering.cpu.codegen`: conversions, rounding, casts.

A 16-bit float is stored as its `uint16_t` bits and held in the kernel as the `float` of the
same value (bit-exact, NaN payloads included), so compares, `where` and sign ops need nothing
special. Every op that computes rounds its result back to the dtype right away, as each numpy
kernel does on its own (`runtime/kernels/cpu/elementwise.py` computes f16/bf16 ops in f32 and
writes the result through numpy's / ml_dtypes' cast): a fused chain rounds after every op, just
like the unfused kernels. The conversions are bit manipulation (portable C11, no `_Float16`)
and reproduce the numpy kernels' conversions exactly, measured on every 16-bit pattern:

* f32 -> f16 (numpy): round to nearest even; NaN keeps its top 10 payload bits (an empty
  payload becomes 1), never quieted. f64 -> f16 rounds once from the double, same NaN rule.
* f32 -> bf16 (ml_dtypes): round to nearest even; any NaN becomes the quiet NaN 0x7fc0 with its
  sign. f64 (and i64/i32) -> bf16 is the `fuel.cast` kernel's correctly rounded conversion
  (round to odd in f32 first), while f64 results of the erf/gelu kernels reach bf16 the way
  ml_dtypes writes them: through f32 (two roundings).
* f16 -> f64 keeps a signalling NaN's payload (numpy); bf16 -> f64 quiets it (ml_dtypes goes
  through f32); bf16 -> f16 turns every NaN into 0x7e00 with its sign (ml_dtypes).
"""

from __future__ import annotations

HALF = ("f16", "bf16")

HELPER = "fuel_half"
"""The one helper block holding every conversion below (`static inline`: unused ones cost
nothing), emitted before any other helper."""

HELPER_SOURCE = """
/* f16/bf16 <-> float/double, bit-exact like numpy (f16) and ml_dtypes (bf16). */
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
/* a NaN narrowed to f16 keeps its top payload bits, never empty (numpy) */
static inline uint16_t fuel_nan_h(uint16_t sign, uint16_t m) {
  return sign | 0x7c00u | (m ? m : 1u);
}
static inline uint16_t fuel_f2h(float f) {
  fuel_f32bits v = {f};
  uint32_t a = v.u & 0x7fffffffu;
  uint16_t sign = (uint16_t)((v.u >> 16) & 0x8000u);
  if (a > 0x7f800000u) return fuel_nan_h(sign, (uint16_t)((a >> 13) & 0x3ffu));
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
  if (a > 0x7ff0000000000000ull) return fuel_nan_h(sign, (uint16_t)((a >> 42) & 0x3ffu));
  if (a >= 0x40effe0000000000ull) return sign | 0x7c00u;  /* >= 65520 (or inf): inf */
  if (a < 0x3f10000000000000ull) {  /* below 2^-14 */
    double t = fabs(d) * 0x1p24;
    return sign | (uint16_t)((t + 0x1p52) - 0x1p52);
  }
  uint64_t r = a - 0x3f00000000000000ull;  /* rebias 1023 -> 15 */
  r += 0x1ffffffffffull + ((r >> 42) & 1u);
  return sign | (uint16_t)(r >> 42);
}
static inline float fuel_b2f(uint16_t b) { fuel_f32bits v; v.u = (uint32_t)b << 16; return v.f; }
static inline uint16_t fuel_f2b(float f) {
  fuel_f32bits v = {f};
  if (f != f) return (uint16_t)(((v.u >> 16) & 0x8000u) | 0x7fc0u);
  return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}
/* the bits of a held bf16 value (exact: its low 16 bits are 0, NaN payload kept) */
static inline uint16_t fuel_bits_b(float f) { fuel_f32bits v = {f}; return (uint16_t)(v.u >> 16); }
/* round a float / double result to f16 or bf16, held as float again */
static inline float fuel_rh(float f) { return fuel_h2f(fuel_f2h(f)); }
static inline float fuel_rhd(double d) { return fuel_h2f(fuel_d2h(d)); }
static inline float fuel_rb(float f) { return fuel_b2f(fuel_f2b(f)); }
static inline float fuel_rbd(double d) { return fuel_rb((float)d); }  /* ml_dtypes: via f32 */
/* correctly rounded double -> bf16: to f32 rounding to odd, then RNE (24 >= 8 + 2 bits) */
static inline float fuel_rbd_exact(double d) {
  fuel_f32bits v = {(float)d};
  double back = (double)v.f;
  if (back != d) { if (fabs(back) > fabs(d)) v.u -= 1u; v.u |= 1u; }
  return fuel_rb(v.f);
}
/* correctly rounded int64 -> bf16: shift into 53 bits keeping a sticky bit (exact double) */
static inline float fuel_i64_rb(int64_t x) {
  uint64_t a = x < 0 ? 0u - (uint64_t)x : (uint64_t)x;
  int s = 0;
  while (a >> 53) { a = (a >> 1) | (a & 1u); ++s; }
  double d = ldexp((double)a, s);
  return fuel_rbd_exact(x < 0 ? -d : d);
}
/* a held f16 value as double, a signalling NaN's payload kept (numpy's f16 -> f64) */
static inline double fuel_h2d(float f) {
  fuel_f32bits v = {f};
  if (f == f) return (double)f;
  fuel_f64bits w;
  w.u = ((uint64_t)(v.u & 0x80000000u) << 32) | 0x7ff0000000000000ull
        | ((uint64_t)(v.u & 0x7fffffu) << 29);
  return w.d;
}
/* the NaN of x op y on x86-64 (numpy's SIMD loops): the first NaN operand, quieted */
static inline float fuel_nan2(float x, float y) {
  fuel_f32bits v = {x != x ? x : y};
  v.u |= 0x400000u;
  return v.f;
}
/* bf16 -> f16 (ml_dtypes): RNE through f32, any NaN -> 0x7e00 with its sign */
static inline float fuel_b2h(float f) { return f != f ? copysignf(NAN, f) : fuel_rh(f); }"""

LOAD = {"f16": "fuel_h2f", "bf16": "fuel_b2f"}
"""Storage bits -> held float."""
STORE = {"f16": "fuel_f2h", "bf16": "fuel_bits_b"}
"""Held float -> storage bits (exact: held values are representable)."""
ROUND = {"f16": "fuel_rh", "bf16": "fuel_rb"}
"""A float result -> the nearest value of the dtype (numpy / ml_dtypes f32 -> 16-bit cast)."""
ROUND_DOUBLE = {"f16": "fuel_rhd", "bf16": "fuel_rbd"}
"""A double result (erf, gelu: the kernels' f64 compute) -> the dtype, as numpy writes it."""

BINARY = {
    op: f"(({{x}} != {{x}} || {{y}} != {{y}}) ? fuel_nan2({{x}}, {{y}}) : {{x}} {sym} {{y}})"
    for op, sym in (("add", "+"), ("sub", "-"), ("mul", "*"), ("div", "/"))
}
"""f16/bf16 overrides of `codegen.FLOAT_BINARY`: which NaN operand comes out is explicit, as the
C compiler may swap the operands of + and * (it does in fused chains)."""
EXACT = ("neg", "abs", "where", "broadcast", "eq", "ne", "lt", "le", "gt", "ge")
"""Ops whose result is an operand (or its sign flipped) or a bool: no rounding step."""
DOUBLE_COMPUTE = ("erf", "gelu", "gelu_tanh")
"""Ops the numpy kernels evaluate in f64 for f16/bf16 too (`_common.F64_COMPUTE`)."""
UNARY = {
    "rsqrt": "1.0f / sqrtf({x})",
    **{
        op: f"({{x}} != {{x}} ? NAN : (float){op}((double){{x}}))"
        for op in ("exp", "log", "tanh", "sin", "cos")
    },
}
"""f16/bf16 overrides of `codegen.FLOAT_UNARY`: numpy's rsqrt is 1 / sqrt(x) in f32 there, and
its f32 SIMD exp log tanh sin cos turn any NaN input into the default NaN (+, quiet, no
payload) where libm returns the input NaN."""

SUPPORTED: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("neg", "abs", "relu", "sqrt", "rsqrt", "recip", "tanh", "sin", "cos"), HALF),
    **dict.fromkeys(("erf", "gelu", "gelu_tanh"), HALF),
    "exp": ("f16",),
    "log": ("bf16",),
    **dict.fromkeys(("add", "sub", "mul", "div", "max", "min"), HALF),
    **dict.fromkeys(("eq", "ne", "lt", "le", "gt", "ge", "where", "cast", "broadcast"), HALF),
}
"""op -> 16-bit dtypes whose C is bit-identical to the numpy kernel, NaN payloads included
(measured: all 65,536 inputs of each unary op and cast, 2^20 random bit-pattern pairs of each
binary op). The IEEE ops, casts and the f64-computed erf/gelu are identical by construction.
exp log tanh sin cos are numpy's own f32 SIMD routines (not correctly rounded) rounded to 16
bits; C rounds libm's double result instead, which lands on the same 16-bit value for every
input except (x86-64 AVX-512 reference host) f16 log (1 input: 0x1935) and bf16 exp (1 input:
0x40db). Kept out, so their groups stay on numpy: those two, sigmoid and silu (f32 composites
of numpy's exp: f16 2 and 1 inputs differ, bf16 1 and 1) and pow (numpy's f32 SIMD power: 24
of 2^20 normal f16 pairs differ, 7 for bf16). The kept transcendentals match numpy's SIMD code
as dispatched on the reference host; tests/test_cpu_codegen.py re-checks every input."""


def half_cast(src: str, dst: str, x: str, ctype: dict[str, str]) -> str:
    """`fuel.cast` with a 16-bit float on either side (`x` is the held value); the numpy
    kernels' conversions (see the module docstring); float -> int truncates (in range)."""
    if src == dst:
        return x
    if dst == "i1":
        return f"({x} != 0)"
    if src in HALF:
        if dst in HALF:
            return f"fuel_b2h({x})" if src == "bf16" else f"fuel_rb({x})"
        if dst == "f32":
            return x
        if dst == "f64":
            return f"fuel_h2d({x})" if src == "f16" else f"(double){x}"
        return f"({ctype[dst]}){x}"
    if src in ("i8", "u8", "i1"):
        return f"(float){x}"  # exact in both
    if dst == "f16":
        return f"fuel_rh({x})" if src == "f32" else f"fuel_rhd((double){x})"
    if src == "i64":
        return f"fuel_i64_rb({x})"
    return f"fuel_rb({x})" if src == "f32" else f"fuel_rbd_exact((double){x})"
