"""The ulp sweep behind the `c-vecmath` claims: every op over a dense lattice of f32 inputs.

    python -m lowering.cpu.vecmath_sweep [--stride 7]

A small C driver (compiled like a generated kernel, `runtime.loaders.c.CFLAGS`) walks the f32
bit patterns 0, s, 2s, ... over all 2^32 (both signs, denormals, every exponent; stride 1 is
exhaustive) plus the edge cases (+-0, the smallest denormals, +-inf, NaN, the exp overflow
and underflow thresholds), computes each `runtime.kernels.cpu.vecmath` function rounded to f32
and the reference in double from libm (`exp log tanh erf erfc`; sigmoid, silu and gelu from
those in overflow-free forms) rounded to f32, and reports per op the largest distance in f32
ulps (ordered bit patterns: +0 and -0 are 0 apart), where it occurs, and any NaN mismatch.
glibc's double functions are within 1 double ulp, so the rounded reference is the correctly
rounded f32 result except within ~2^-29 ulp of a midpoint.
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from dataclasses import dataclass

from runtime import special
from runtime.kernels.cpu import vecmath
from runtime.loaders.c import library_path

K0, K1 = special._TANH_K0.hex(), special._TANH_K1.hex()
REFERENCE = {
    "exp": "exp(x)",
    "log": "log(x)",
    "tanh": "tanh(x)",
    "sigmoid": "ref_sigmoid(x)",
    "silu": "ref_limit(x, x * ref_sigmoid(x))",
    "gelu": "ref_limit(x, 0.5 * x * erfc(-x * 0x1.6a09e667f3bcdp-1))",
    "gelu_tanh": f"ref_limit(x, x * ref_sigmoid(x * ({K0} + {K1} * x * x)))",
    "erf": "erf(x)",
}
"""op -> the double reference expression of `x` (a double holding the f32 input); silu and
the gelus at +-inf are their limits (+inf, -0.0: inf * 0 is no value)."""

EDGES = (
    0x00000000,
    0x80000000,
    0x00000001,
    0x80000001,
    0x007FFFFF,
    0x807FFFFF,
    0x00800000,
    0x7F800000,
    0xFF800000,
    0x7FC00000,
    0xFFC00000,
    0x7F7FFFFF,
    0xFF7FFFFF,
    0x42B17218,
    0x42B17217,
    0x42B17219,
    0xC2CFF1B5,
    0xC2CFF1B4,
    0xC2CE8ED0,
    0xC2AEAC50,
    0x3F800000,
    0xBF800000,
    0x3CF5C28F,
    0xC3480000,
    0xC3490000,
)
"""Bit patterns always checked: +-0, denormals, normal min/max, +-inf, NaNs, exp's overflow
(88.72...) and underflow (-103.97..., -87.33...) thresholds, +-1, tanh's 0.03 switch, -200."""


def driver(stride: int) -> str:
    """The sweep's C source: `long sweep_<op>(int64_t *out)` fills worst ulp, its input bits
    and the NaN mismatch count."""
    edges = ", ".join(f"0x{e:08x}u" for e in EDGES)
    body = [
        "#include <math.h>",
        "#include <stdint.h>",
        vecmath.source(set(vecmath.FUNCTIONS.values())),
        "static double ref_limit(double x, double y) { return isinf(x) ? (x > 0 ? x : -0.0) : y; }",
        "static double ref_sigmoid(double x) {",
        "  double e = exp(-fabs(x)); return (x >= 0 ? 1.0 : e) / (1.0 + e);",
        "}",
        "typedef union { float f; uint32_t u; } sw_bits;",
        "static int64_t sw_ord(float f) {",
        "  sw_bits b = {f};",
        "  return (b.u & 0x80000000u) ? -(int64_t)(b.u & 0x7fffffffu) : (int64_t)b.u;",
        "}",
        f"static const uint32_t SW_EDGES[{len(EDGES)}] = {{{edges}}};",
    ]
    for op, fn in vecmath.FUNCTIONS.items():
        body.append(f"""
static void sw_one_{op}(uint32_t u, int64_t *out) {{
  sw_bits b; b.u = u;
  double x = (double)b.f;
  float got = (float){fn}(x), want = (float)({REFERENCE[op]});
  if (got != got || want != want) {{ if ((got != got) != (want != want)) out[2] += 1; return; }}
  int64_t d = sw_ord(got) - sw_ord(want);
  if (d < 0) d = -d;
  if (d > out[0]) {{ out[0] = d; out[1] = u; }}
}}
void sweep_{op}(int64_t *out) {{
  out[0] = 0; out[1] = 0; out[2] = 0;
  for (uint64_t u = 0; u < 0x100000000ull; u += {stride}u) sw_one_{op}((uint32_t)u, out);
  for (int k = 0; k < {len(EDGES)}; ++k) sw_one_{op}(SW_EDGES[k], out);
}}""")
    return "\n".join(body) + "\n"


@dataclass(frozen=True)
class SweepResult:
    """One op's sweep: the largest ulp distance, the f32 input bits where it occurs, and the
    inputs where exactly one of the result and the reference is NaN."""

    op: str
    max_ulp: int
    worst_bits: int
    nan_mismatches: int


def sweep(stride: int, ops: tuple[str, ...] = tuple(vecmath.FUNCTIONS)) -> list[SweepResult]:
    """Run the sweep with `stride` over the bit patterns for `ops`."""
    lib = ctypes.CDLL(str(library_path(driver(stride))))
    out = []
    for op in ops:
        buf = (ctypes.c_int64 * 3)()
        getattr(lib, f"sweep_{op}")(buf)
        out.append(SweepResult(op, buf[0], buf[1], buf[2]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stride", type=int, default=7, help="bit-pattern step (1: exhaustive)")
    ap.add_argument("--ops", default=",".join(vecmath.FUNCTIONS), help="comma-separated ops")
    args = ap.parse_args(argv)
    ops = tuple(args.ops.split(","))
    if unknown := [op for op in ops if op not in vecmath.FUNCTIONS]:
        print(f"fuel: error: unknown vecmath op(s) {', '.join(unknown)}", file=sys.stderr)
        return 1
    n = (2**32 + args.stride - 1) // args.stride + len(EDGES)
    print(f"{n} f32 inputs per op (stride {args.stride} over all bit patterns + edges)")
    worst = 0
    for r in sweep(args.stride, ops):
        x = ctypes.c_float.from_buffer_copy(r.worst_bits.to_bytes(4, "little")).value
        print(f"  {r.op:10s} max {r.max_ulp} ulp (at {x!r})  NaN mismatches {r.nan_mismatches}")
        worst = max(worst, r.max_ulp + (r.nan_mismatches > 0) * 10**6)
    return 0 if worst <= 1 else 1


if __name__ == "__main__":
    sys.exit(main())
