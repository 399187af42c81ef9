"""`c-vecmath`: vectorizable f32 transcendentals in C, the generated kernels' fast math.

exp log tanh sigmoid silu gelu (erf and tanh forms) erf for f32, each a branch-free
`static inline` C function of a double (`HELPERS`): polynomials and selects only, no libm call,
no table, so GCC's auto-vectorizer turns a loop over them into SIMD code at `-O2` without
`-ffast-math` (`runtime.loaders.c.CFLAGS`). Each computes in double from the exact f32 input
and the caller rounds once to f32:

* exp: Cody-Waite reduction x = n ln2 + r (|r| <= 0.35), a degree-7 polynomial for e^r (a
  Chebyshev least-squares fit of the relative error, max 4.1e-11), 2^n built in the
  exponent bits. The argument is clamped to
  [-160, 160], beyond which every f32 result is 0 or inf; a NaN is passed through.
* log: x = 2^e m with m in [sqrt(1/2), sqrt(2)) read from the double's bits (f32 subnormals
  are normal doubles), log m = 2 atanh(f), f = (m - 1) / (m + 1), |f| <= 0.172, 9 odd terms.
* tanh: 1 - 2 / (e^(2|x|) + 1) with its sign, a 3-term odd series below |x| = 0.03.
* sigmoid, silu, gelu_tanh: e = e^-|v|, (v >= 0 ? 1 : e) / (1 + e), times x; below x = -200
  silu and gelu_tanh are -0.0 (their f32 value; x * e^-160 would not be).
* erf: the numpy kernels' odd Maclaurin series below |x| = 1 (16 terms), else 1 - e^-x^2
  erfcx(|x|); x^2 of an f32 is exact in double, so e^-x^2 has only the polynomial's error.
  gelu: relu(x) - |x|/2 e^-z^2 erfcx(z), z = |x| / sqrt 2 (z^2 = x^2 / 2 exact), like
  `special.gelu_erf`, |x| clamped to 15 (the tail is then below every f32 result). erfcx on
  z in [0, 15 / sqrt 2]: (1 + 2z) erfcx(z) is a degree-11 fit in t = (z - 3) / (z + 3)
  (1e-9 relative), both quotients from one division: 11 products where the numpy kernels'
  double-precision erfcx takes 27 and two divisions (gelu 0.54x, erf 0.65x the time).

The double result is within ~1e-9 relative of the exact value (2^-30: an f32 ulp is 2^-23 to
2^-24 relative), so the f32 rounding is correct except within ~1/60 ulp of a rounding
midpoint, where it can be one ulp off: the claim is 1 ulp,
checked on a dense sweep of every f32 range by `lowering.cpu.vecmath_sweep` (the figures are
in each kernel's notes) and on the verification probes into the hand-registered ledger. No
FMA contraction and no libm: the same bits on every x86-64 or AArch64 machine.

The kernels registered here (kernel_source `c-vecmath`, after the numpy siblings) run one
compiled loop over a contiguous copy; they exist where a C compiler does (`native.enabled`).
Generated C kernels inline the same functions (`lowering.cpu.codegen`), and fuel's native
library calls them in the fused products' activation epilogues; their C text lives in
`runtime.native.vecmath` (re-exported here), so the library's source needs no kernel module.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence

import numpy as np

from runtime import native
from runtime.binding_table import Kernel, KernelBindingTable
from runtime.cost import CostEstimate, CostFn
from runtime.kernels.cpu._common import Arrays, Params, Shapes, add, numel, operand_bytes, ulp
from runtime.loaders.c import load_function
from runtime.native.vecmath import CLONES, DEPS, HELPERS, PRAGMA, ordered, source

SOURCE = "c-vecmath"
"""The kernel_source of these siblings."""
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
    "exp": 0.85,
    "log": 1.5,
    "tanh": 1.1,
    "sigmoid": 0.95,
    "silu": 1.1,
    "gelu": 3.5,
    "gelu_tanh": 1.3,
    "erf": 3.3,
}
"""ns per f32 element in a generated loop (AVX-512 clone; half the time of the loaded-machine
figures measured on the x86-64 reference host: the cost model's unit is a quiet machine)."""
FLOPS = {
    "exp": 5.7,
    "log": 8.8,
    "tanh": 4.6,
    "sigmoid": 1.0,
    "silu": 0.87,
    "gelu": 7.8,
    "erf": 4.6,
}
"""Declared FLOPs per element of the standalone kernels: the numpy default's (10 for exp log
tanh, 14 for sigmoid silu, 80 gelu, 60 erf) times the measured vecmath / numpy time on 1M f32
on the reference host, AVX-512 clone (exp 0.67, log 0.88, tanh 0.53, sigmoid 0.087, silu
0.068, gelu 0.18, erf 0.12), like numpy-fast's `FAST_COST`, then scaled by the shorter exp
and erfcx polynomials' measured time (exp tanh sigmoid silu ~0.85, gelu 0.54, erf 0.65: 2^18
f32, one thread, old and new interleaved). An AVX2-only CPU takes ~1.6x."""

CALL_NS = 1500.0
"""One ctypes call of a standalone kernel, with its contiguity checks (native.py's figure)."""


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
    + ("; exhaustive (all 2^32 f32, --stride 1): max 1 ulp" if op != "log" else "")
    for op, m in (
        ("exp", 1),
        ("log", 0),
        ("tanh", 1),
        ("sigmoid", 1),
        ("silu", 1),
        ("gelu", 1),
        ("gelu_tanh", 1),
        ("erf", 1),
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


__all__ = [
    "CLONES",
    "DEPS",
    "FLOPS",
    "FUNCTIONS",
    "HELPERS",
    "NOTES",
    "NS_PER_ELEMENT",
    "PRAGMA",
    "SOURCE",
    "library_source",
    "ordered",
    "register_vecmath",
    "source",
]
