"""`c-vecmath`: vectorizable f32 transcendentals in C, the generated kernels' fast math.

exp log tanh sigmoid silu gelu (erf and tanh forms) erf for f32, each a branch-free
`static inline` C function of a double (`HELPERS`): polynomials and selects only, no libm call,
no table, so GCC's auto-vectorizer turns a loop over them into SIMD code at `-O2` without
`-ffast-math` (`runtime.loaders.c.CFLAGS`). Each computes in double from the exact f32 input
and the caller rounds once to f32:

* exp: Cody-Waite reduction x = n ln2 + r (|r| <= 0.35), a degree-10 Taylor polynomial for
  e^r (truncation < 3e-13), 2^n built in the exponent bits. The argument is clamped to
  [-160, 160], beyond which every f32 result is 0 or inf; a NaN is passed through.
* log: x = 2^e m with m in [sqrt(1/2), sqrt(2)) read from the double's bits (f32 subnormals
  are normal doubles), log m = 2 atanh(f), f = (m - 1) / (m + 1), |f| <= 0.172, 9 odd terms.
* tanh: 1 - 2 / (e^(2|x|) + 1) with its sign, a 3-term odd series below |x| = 0.03.
* sigmoid, silu, gelu_tanh: e = e^-|v|, (v >= 0 ? 1 : e) / (1 + e), times x; below x = -200
  silu and gelu_tanh are -0.0 (their f32 value; x * e^-160 would not be).
* erf: the numpy kernels' odd Maclaurin series below |x| = 1 (16 terms), else 1 - e^-x^2
  erfcx(|x|) with their erfcx polynomial (`special._ERFCX_T_POLY`); x^2 of an f32 is exact in
  double, so e^-x^2 has only the polynomial's error. gelu: relu(x) - |x|/2 e^-z^2 erfcx(z),
  z = |x| / sqrt 2, like `special.gelu_erf`.

The double result is within ~1e-13 relative of the exact value, so the f32 rounding is
correct except next to a rounding midpoint, where it can be one ulp off: the claim is 1 ulp,
checked on a dense sweep of every f32 range by `lowering.cpu.vecmath_sweep` (the figures are
in each kernel's notes) and on the verification probes into the hand-registered ledger. No
FMA contraction and no libm: the same bits on every x86-64 or AArch64 machine.

The kernels registered here (kernel_source `c-vecmath`, after the numpy siblings) run one
compiled loop over a contiguous copy; they exist where a C compiler does (`native.enabled`).
Generated C kernels inline the same functions (`lowering.cpu.codegen`).
"""

from __future__ import annotations

import ctypes
import functools
import math
from collections.abc import Sequence

import numpy as np

from runtime import native, special
from runtime.binding_table import Kernel, KernelBindingTable
from runtime.cost import CostEstimate, CostFn
from runtime.kernels.cpu._common import Arrays, Params, Shapes, add, numel, operand_bytes, ulp
from runtime.loaders.c import load_function

SOURCE = "c-vecmath"
"""The kernel_source of these siblings."""
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


_EXP_TAYLOR = [1.0 / math.factorial(k) for k in range(11)]
_LOG_ATANH = [1.0 / (2 * k + 1) for k in range(9)]
_ERF_TERMS = special._ERF_SERIES[:16]
_ERFCX = special._ERFCX_T_POLY
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
/* e^x: x = n ln2 + r, Taylor(r) to degree 10, 2^n in the exponent bits */
{_INLINE} fuel_vm_exp(double x) {{
  double c = x < -160.0 ? -160.0 : (x > 160.0 ? 160.0 : x);
  double t = c * 0x1.71547652b82fep+0 + 0x1.8p52, n = t - 0x1.8p52;
  double r = (c - n * 0x1.62e42feep-1) - n * 0x1.a39ef35793c76p-33;
  double p = {_horner("r", _EXP_TAYLOR)};
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
/* special.erfcx: exp(z^2) erfc(z), z >= 0: a polynomial in t = 1 - 6 / (z + 3) */
{_INLINE} fuel_vm_erfcx(double z) {{
  double t = 1.0 - 6.0 / (z + 3.0);
  return ({_horner("t", _ERFCX)}) / (1.0 + 2.0 * z);
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
/* special.gelu_erf: relu(x) - |x|/2 e^-z^2 erfcx(z), z = |x| / sqrt 2 */
{_INLINE} fuel_vm_gelu(double x) {{
  double a = fabs(x), ac = a > 40.0 ? 40.0 : a, z = ac * {_hex(special._SQRT_HALF)};
  double tail = 0.5 * ac * fuel_vm_erfcx(z) * fuel_vm_exp(-(z * z));
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

FUNCTIONS = {
    "exp": "fuel_vm_exp",
    "log": "fuel_vm_log",
    "tanh": "fuel_vm_tanh",
    "sigmoid": "fuel_vm_sigmoid",
    "silu": "fuel_vm_silu",
    "gelu": "fuel_vm_gelu",
    "gelu_tanh": "fuel_vm_gelu_tanh",
    "erf": "fuel_vm_erf",
}
"""fuel op key (`gelu_tanh`: gelu's tanh form) -> its C function."""

NS_PER_ELEMENT = {
    "exp": 1.0,
    "log": 1.5,
    "tanh": 1.3,
    "sigmoid": 1.1,
    "silu": 1.3,
    "gelu": 6.5,
    "gelu_tanh": 1.5,
    "erf": 5.0,
}
"""ns per f32 element in a generated loop (AVX-512 clone; half the time of the loaded-machine
figures measured on the x86-64 reference host: the cost model's unit is a quiet machine)."""
FLOPS = {
    "exp": 6.7,
    "log": 8.8,
    "tanh": 5.3,
    "sigmoid": 1.2,
    "silu": 1.0,
    "gelu": 14.5,
    "erf": 7.0,
}
"""Declared FLOPs per element of the standalone kernels: the numpy default's (10 for exp log
tanh, 14 for sigmoid silu, 80 gelu, 60 erf) times the measured vecmath / numpy time on 1M f32
on the reference host, AVX-512 clone (exp 0.67, log 0.88, tanh 0.53, sigmoid 0.087, silu
0.068, gelu 0.18, erf 0.12), like numpy-fast's `FAST_COST`. An AVX2-only CPU takes ~1.6x."""

CALL_NS = 1500.0
"""One ctypes call of a standalone kernel, with its contiguity checks (native.py's figure)."""


def ordered(helpers: set[str] | Sequence[str]) -> list[str]:
    """`helpers` with the helpers they call, in an order where each follows its callees."""
    want = {d for h in helpers for d in (*DEPS.get(h, ()), h)}
    return [h for h in HELPERS if h in want]


def source(helpers: set[str] | Sequence[str]) -> str:
    """The C text of `helpers` and their callees (needs <math.h> and <stdint.h>)."""
    return "\n".join(HELPERS[h] for h in ordered(helpers))


def library_source() -> str:
    """The standalone library: `fuel_vm_<op>_f32(x, y, n)` loops over contiguous f32."""
    out = [PRAGMA, "#include <math.h>", "#include <stdint.h>", source(set(FUNCTIONS.values()))]
    for fn in FUNCTIONS.values():
        out.append(
            f"{CLONES} void {fn}_f32("
            "const float *restrict x, float *restrict y, int64_t n) {\n"
            f"  for (int64_t i = 0; i < n; ++i) y[i] = (float){fn}((double)x[i]);\n}}"
        )
    return "\n".join(out) + "\n"


@functools.cache
def _entry(op: str) -> object:
    """The ctypes entry of `op`'s loop (compiled on first use, cached by content hash)."""

    fn = load_function(f"{FUNCTIONS[op]}_f32", library_source())
    fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
    return fn


def _run(op: str, inputs: Arrays, outputs: Arrays) -> None:
    """`op`'s compiled loop on a contiguous f32 copy of the input."""
    x, out = np.ascontiguousarray(inputs[0], np.float32), outputs[0]
    dst = out if out.flags.c_contiguous and not np.may_share_memory(out, x) else None
    y = np.empty(x.shape, np.float32) if dst is None else dst
    _entry(op)(x.ctypes.data, y.ctypes.data, x.size)  # type: ignore[operator]
    if dst is None:
        np.copyto(out, y)


def _kernel(op: str) -> Kernel:
    """The standalone kernel of `op` (gelu: both forms, by the `approximate` param)."""

    def vecmath(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        form = "gelu_tanh" if op == "gelu" and params.get("approximate") == "tanh" else op
        _run(form, inputs, outputs)

    vecmath.__name__ = vecmath.__qualname__ = f"{op}_vecmath"
    return vecmath


def _cost(op: str) -> CostFn:
    def cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
        n = numel(shapes[0])
        return CostEstimate(n * FLOPS[op], operand_bytes(shapes, dtypes), CALL_NS)

    return cost


NOTES = {
    op: f"f64 inside, rounded once; dense sweep (every 7th f32 bit pattern + edges): max {m} ulp"
    for op, m in (
        ("exp", 1),
        ("log", 0),
        ("tanh", 1),
        ("sigmoid", 1),
        ("silu", 0),
        ("gelu", 1),
        ("gelu_tanh", 1),
        ("erf", 0),
    )
}
"""Each claim's evidence beside the ledger's probes (`lowering.cpu.vecmath_sweep`)."""


def register_vecmath(table: KernelBindingTable, force: bool = False) -> None:
    """Register the f32 `c-vecmath` siblings (after numpy's at each key); no-op where no C
    compiler exists or native code is disabled (`native.enabled`), unless `force`."""
    if not (force or native.enabled()):
        return
    code = library_source()
    for op in FUNCTIONS:
        if op == "gelu_tanh":
            continue  # gelu's tanh form: the `approximate` param of the gelu kernel
        claim = ulp(1, NOTES[op] + ("; tanh form: " + NOTES["gelu_tanh"] if op == "gelu" else ""))
        kernel, cost = _kernel(op), _cost(op)
        add(table, op, ("f32", "f32"), kernel, claim, cost, source=SOURCE, code=code)
