"""Generated C for fused elementwise groups on the host: source, compiler driver, loader.

The groups are `lowering.triton.codegen.fusion_groups` (connected elementwise/broadcast/cast
ops over one iteration space). `c_source` emits one readable C function per group,

    void fused_0(void **args)   /* args: input pointers, then output pointers */

calling `fused_0_body` with typed `restrict` pointers, whose body is a loop nest over the
row-major space (size-1 dims dropped; the innermost loop is stride 1, so the compiler can
vectorize it); each input is read through index arithmetic on its own shape (broadcast dims
contribute nothing), each fuel op is one line with a comment naming it, and an output smaller
than the space is stored only from the points whose broadcast coordinates are 0. Outputs never
overlap inputs (the executor's memory plan gives them fresh buffers; `CKernel` writes through
a temporary when a caller's outputs overlap).

Semantics are the numpy kernels' (`runtime/kernels/cpu/elementwise.py`), op by op:
* f32 transcendentals (exp log tanh sin cos rsqrt sigmoid silu pow) are computed in double and
  rounded once, like the numpy kernels' f64 compute dtype (measured bit-identical to them on
  200k inputs per op); + - * / sqrt recip are IEEE in the dtype itself (correctly rounded, so
  bit-identical). f64 transcendentals use libm, numpy its own SIMD routines: each is within
  the numpy kernels' claimed ulp bound on glibc (its documented x86-64 bounds are <= 2 ulp),
  and the two differ by up to 3-4 ulp (tanh, silu) on 200k inputs.
* Integers wrap modulo 2^bits (arithmetic in the unsigned type: no C overflow UB).
* max/min/relu propagate NaN; comparisons give i1 as a 0/1 byte; `where` selects.
* `cast`: to i1 is `x != 0`; float -> int truncates (in range only, like numpy); int -> float
  and f64 -> f32 round once to nearest even.
* erf and gelu are `runtime.kernels.cpu.special`'s f64 algorithms transcribed (the same
  erfcx polynomial, series and exact-square splits, in the same operation order), evaluated in
  double for f32 too, like the numpy kernels' F64_COMPUTE; the f64 tanh form of gelu (a
  double-double argument) has no emitter.
* f16/bf16 are stored as their bits and held as f32 values; each op computes like its numpy
  kernel (in f32; erf/gelu in double) and rounds to the dtype at once, as the unfused kernels
  do, and casts reproduce numpy's / ml_dtypes' conversions bit for bit (`codegen_half`).
  pow, sigmoid, silu, f16 log and bf16 exp, whose numpy f32 SIMD results C cannot reproduce
  to the last 16-bit rounding, have no emitter there: such groups stay on numpy (`c_eligible`).

Compiled with the system C compiler (`$CC`, else `cc`) as `-O2 -fPIC -shared -std=c11
-ffp-contract=off` (never -ffast-math or -march=native: the .so goes into portable bundles);
the library is cached by content hash (source, compiler, flags, machine) in `c_cache_dir()`.
`c_pays_off` is the pass's cost model: a group becomes C when one call beats its numpy calls
(libm's scalar transcendentals are 3-8x slower per element than numpy's SIMD ones, so large
transcendental groups stay on numpy).
`CKernel` is a fuel `Kernel` on contiguous numpy arrays; `CKernel.fn` is the raw ctypes
entry the executor calls with a prebuilt pointer array.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import math
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.ir import Operation, SSAValue

from fuel_dialect.dtypes import dtype_name, shape_of
from lowering.cpu import codegen_half as half
from lowering.triton.codegen import (
    FusionGroup,
    broadcast_index,
    cache_dir,
    emit_group,
    fusion_groups,
    io_signature,
    op_key,
)

CFLAGS = ("-O2", "-fPIC", "-shared", "-std=c11", "-ffp-contract=off", "-fno-math-errno")
"""Compiler flags: no fast-math, no FMA contraction (results stay the numpy kernels'), no
-march=native (bundles must run on any CPU of the architecture). -fno-math-errno only lets
sqrt be an instruction (errno is never read)."""

CTYPE = {
    "f64": "double", "f32": "float", "i64": "int64_t", "i32": "int32_t", "i8": "int8_t",
    "u8": "uint8_t", "i1": "uint8_t", "f16": "uint16_t", "bf16": "uint16_t",
}  # fmt: skip
"""fuel dtype -> C storage type (i1 is a 0/1 byte, like numpy's bool; f16/bf16 their bits)."""
VTYPE = {**CTYPE, "f16": "float", "bf16": "float"}
"""fuel dtype -> the C type its values are held in (f16/bf16: the f32 of the same value)."""
UTYPE = {"i64": "uint64_t", "i32": "uint32_t", "i8": "uint32_t", "u8": "uint32_t"}
"""Unsigned type integer arithmetic runs in (wraps; converting back truncates modulo 2^bits)."""
FLOAT = ("f64", "f32")
INTS = ("i64", "i32", "i8", "u8")
SIGNED = ("i64", "i32", "i8")

# -- op table: one C expression per fuel op ----------------------------------------------------
# {x} {y}: operands; {T}: the result C type; {U}: its unsigned type; {D}: libm compute type
# (double for f32 transcendentals, like the numpy kernels' f64 compute dtype).

FLOAT_UNARY = {
    "neg": "-{x}",
    "abs": "({T})fabs({x})",
    "relu": "(({x} > 0 || {x} != {x}) ? {x} : ({T})0)",
    "exp": "({T})exp((double){x})",
    "log": "({T})log((double){x})",
    "sqrt": "{sqrt}({x})",
    "rsqrt": "({T})(1.0 / sqrt((double){x}))",
    "recip": "({T})1 / {x}",
    "tanh": "({T})tanh((double){x})",
    "sin": "({T})sin((double){x})",
    "cos": "({T})cos((double){x})",
    "sigmoid": "({T})fuel_sigmoid((double){x})",
    "silu": "({T})fuel_silu((double){x})",
    "erf": "({T})fuel_erf((double){x})",
    "gelu": "({T})fuel_gelu_erf((double){x})",
    "gelu_tanh": "({T})fuel_gelu_tanh((double){x})",
}
"""Unary float ops (f32 and f64). For f64 the casts to double are no-ops."""

INT_UNARY = {
    "neg": "({T})(0u - ({U}){x})",
    "abs": "({T})({x} < 0 ? 0u - ({U}){x} : ({U}){x})",
    "relu": "({x} > 0 ? {x} : ({T})0)",
}
"""Unary signed-integer ops (wrapping: abs(INT_MIN) is INT_MIN, like numpy)."""

FLOAT_BINARY = {
    "add": "{x} + {y}",
    "sub": "{x} - {y}",
    "mul": "{x} * {y}",
    "div": "{x} / {y}",
    "pow": "({T})pow((double){x}, (double){y})",
    "max": "(({x} > {y} || {x} != {x}) ? {x} : {y})",
    "min": "(({x} < {y} || {x} != {x}) ? {x} : {y})",
}
"""Binary float ops; max/min propagate a NaN from either side and, like numpy's, return the
second operand on ties (max(-0.0, 0.0) is 0.0, relu(-0.0) is 0.0)."""

INT_BINARY = {
    "add": "({T})(({U}){x} + ({U}){y})",
    "sub": "({T})(({U}){x} - ({U}){y})",
    "mul": "({T})(({U}){x} * ({U}){y})",
    "max": "({x} >= {y} ? {x} : {y})",
    "min": "({x} <= {y} ? {x} : {y})",
}
"""Binary integer ops, wrapping modulo 2^bits."""

COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

SUPPORTED: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("neg", "abs", "relu"), (*FLOAT, *SIGNED)),
    **dict.fromkeys(
        (
            "exp",
            "log",
            "sqrt",
            "rsqrt",
            "recip",
            "tanh",
            "sin",
            "cos",
            "sigmoid",
            "silu",
            "erf",
            "gelu",
        ),
        FLOAT,
    ),  # fmt: skip
    "gelu_tanh": ("f32",),
    **dict.fromkeys(("add", "sub", "mul", "max", "min"), (*FLOAT, *INTS)),
    **dict.fromkeys(("div", "pow"), FLOAT),
    **dict.fromkeys(("eq", "ne"), (*FLOAT, *INTS, "i1")),
    **dict.fromkeys(("lt", "le", "gt", "ge"), (*FLOAT, *INTS)),
    **dict.fromkeys(("where", "cast", "broadcast"), tuple(CTYPE)),
}
SUPPORTED = {k: v + half.SUPPORTED.get(k, ()) for k, v in SUPPORTED.items()}
"""op -> operand dtypes with a C emitter (the numpy kernels' dtype sets; f16/bf16: the ops
`codegen_half.SUPPORTED` lists)."""

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
    from runtime.kernels.cpu import special

    def arr(xs: Sequence[float]) -> str:
        return ", ".join(float(x).hex() for x in xs)

    return {
        "k0": special._TANH_K0.hex(), "k1": special._TANH_K1.hex(),
        "sqrt_half": special._SQRT_HALF.hex(),
        "erfcx": arr(special._ERFCX_T_POLY), "n_erfcx": len(special._ERFCX_T_POLY),
        "erf": arr(special._ERF_SERIES), "n_erf": len(special._ERF_SERIES),
    }  # fmt: skip


def helper_source(name: str) -> str:
    """The C text of helper `name`, its numeric tables filled in."""
    text = HELPERS[name]
    return text % _helper_constants() if "%(" in text else text


class CodegenError(Exception):
    """A group the C code generator cannot handle, a missing compiler or a failed compile."""


def c_eligible(op: Operation) -> bool:
    """True when `op` has a C emitter at its dtypes (elementwise, broadcast or cast ops on
    f64/f32/integers/i1, and those of `codegen_half.SUPPORTED` on f16/bf16)."""
    key = op_key(op)
    if key not in SUPPORTED:
        return False
    try:
        dts = {dtype_name(v.type) for v in (*op.operands, *op.results)}
    except ValueError:
        return False
    if not dts <= set(CTYPE):
        return False
    first = dtype_name(op.operands[-1].type)  # where: the value operands
    return first in SUPPORTED[key]


# -- cost model: does a group run faster as one C call than as numpy calls? -------------------

C_NS_PER_ELEMENT = {
    "exp": 6.0, "log": 7.0, "tanh": 23.0, "sin": 14.0, "cos": 14.0, "rsqrt": 2.0,
    "sigmoid": 11.0, "silu": 11.0, "erf": 39.0, "gelu": 40.0, "gelu_tanh": 11.0, "pow": 18.0,
}  # fmt: skip
"""Generated C, ns per element by op (scalar libm in double); any other op: `CHEAP_NS`.
Measured on the x86-64 reference host (GCC 12, glibc 2.36) at 64k elements."""
NUMPY_NS_PER_ELEMENT = {
    "exp": 1.5, "log": 1.8, "tanh": 2.7, "sin": 15.0, "cos": 15.0, "rsqrt": 2.0,
    "sigmoid": 5.5, "silu": 7.5, "erf": 80.0, "gelu": 55.0, "gelu_tanh": 8.0, "pow": 4.3,
}  # fmt: skip
"""The numpy kernels, ns per element (SIMD f64 routines), same host and size."""
CHEAP_NS = 0.25
"""+ - * / max min compares casts where sqrt: vectorized in both, memory bound."""
C_CALL_NS = 600.0
"""One generated kernel call from the executor (ctypes), measured."""
NUMPY_CALL_NS = {"sigmoid": 10_000.0, "silu": 10_000.0, "erf": 50_000.0, "gelu": 50_000.0,
                 "gelu_tanh": 10_000.0}  # fmt: skip
"""Per-call overhead of the composite numpy kernels (`_common.OVERHEAD_NS`); others 1000."""


def c_pays_off(group: FusionGroup) -> bool:
    """True when the cost model expects `group` as one C call to beat its numpy calls: per-op
    call overhead saved against libm's slower scalar transcendentals on large spaces."""
    n = math.prod(group.space)
    keys = [op_key(op) for op in group.ops]
    c_ns = C_CALL_NS + n * sum(C_NS_PER_ELEMENT.get(k, CHEAP_NS) for k in keys)
    numpy_ns = sum(NUMPY_CALL_NS.get(k, 1000.0) + n * NUMPY_NS_PER_ELEMENT.get(k, CHEAP_NS)
                   for k in keys)  # fmt: skip
    return c_ns <= numpy_ns


def c_groups(block: Any, eligible: Any) -> list[FusionGroup]:
    """Fusion groups of the C-eligible ops of `block` that `eligible` also accepts."""
    return fusion_groups(block, lambda op: c_eligible(op) and eligible(op))


# -- source emission --------------------------------------------------------------------------


def c_literal(value: float | int | bool, dt: str) -> str:
    """An exact C literal of a splat of dtype `dt` (floats as hex floats)."""
    if dt in FLOAT or dt in half.HALF:  # a 16-bit splat is already rounded: exact in f32
        text = float(value).hex()
        return text if dt == "f64" else f"{text}f"
    v = int(value)
    if dt == "i64" and v == -(2**63):
        return "(-9223372036854775807LL - 1)"
    return f"(({CTYPE[dt]}){v}{'LL' if dt == 'i64' else ''})"


@dataclass
class _Emitter:
    """Builds one kernel body; values are named v0, v1, ... in their C types."""

    group: FusionGroup
    lines: list[str] = field(default_factory=list)
    names: dict[SSAValue, str] = field(default_factory=dict)
    helpers: set[str] = field(default_factory=set)

    def fresh(self) -> str:
        return f"v{len(self.names)}"

    def offset(self, shape: tuple[int, ...], store: bool = False) -> tuple[str, list[str]]:
        """Index of a value of `shape` at point `i`, and the conditions (broadcast coordinates
        0) that pick one point per element for stores."""
        split = broadcast_index(shape, self.group.space)
        if split is None:
            return "i", []
        terms, conds = split[0], [f"i{d} == 0" for d in split[1]] if store else []
        return (" + ".join(terms) if terms else "0"), conds

    def load(self, j: int, v: SSAValue) -> None:
        dt, name = dtype_name(v.type), self.fresh()
        self.names[v] = name
        off, _ = self.offset(shape_of(v.type))
        val = f"{half.LOAD[dt]}(in{j}[{off}])" if dt in half.HALF else f"in{j}[{off}]"
        if dt in half.HALF:
            self.helpers.add(half.HELPER)
        self.lines.append(f"{VTYPE[dt]} {name} = {val};  /* {v.type} */")

    def splat(self, v: SSAValue, value: float | int | bool) -> None:
        dt, name = dtype_name(v.type), self.fresh()
        self.names[v] = name
        self.lines.append(f"const {VTYPE[dt]} {name} = {c_literal(value, dt)};  /* splat */")

    def op(self, op: Operation) -> None:
        dt = dtype_name(op.results[0].type)
        expr = self.expr(op, op_key(op), [self.names[v] for v in op.operands])
        name = self.fresh()
        self.names[op.results[0]] = name
        self.lines.append(f"{VTYPE[dt]} {name} = {expr};  /* {op.name} */")

    def expr(self, op: Operation, key: str, args: list[str]) -> str:
        src, dst = dtype_name(op.operands[-1].type), dtype_name(op.results[0].type)
        fmt = {
            "T": CTYPE[dst],
            "U": UTYPE.get(dst, ""),
            "sqrt": "sqrtf" if dst == "f32" else "sqrt",
        }
        if key in COMPARE:
            return f"({args[0]} {COMPARE[key]} {args[1]})"
        if key == "where":
            return f"({args[0]} ? {args[1]} : {args[2]})"
        if key == "broadcast":
            return args[0]
        if key == "cast":
            if src in half.HALF or dst in half.HALF:
                self.helpers.add(half.HELPER)
                return half.half_cast(src, dst, args[0], CTYPE)
            return self.cast(src, dst, args[0])
        if src in half.HALF:
            return self.half_expr(op, key, args, src)
        table = (FLOAT_UNARY if src in FLOAT else INT_UNARY) if len(args) == 1 else None
        if table is None:
            table = FLOAT_BINARY if src in FLOAT else INT_BINARY
        if key not in table:
            raise CodegenError(f"no C code for '{op.name}' on {src}")
        fmt |= {"x": args[0], "y": args[-1]}
        return self.use_helpers(table[key].format(**fmt))

    def half_expr(self, op: Operation, key: str, args: list[str], dt: str) -> str:
        """An f16/bf16 op: the f32 (erf/gelu: double) expression of the numpy kernel, rounded
        to `dt` at once unless it only selects or flips a sign."""
        wide = "double" if key in half.DOUBLE_COMPUTE else "float"
        table = FLOAT_UNARY if len(args) == 1 else FLOAT_BINARY
        if key not in table:
            raise CodegenError(f"no C code for '{op.name}' on {dt}")
        text = (half.UNARY if len(args) == 1 else half.BINARY).get(key, table[key])
        text = self.use_helpers(text.format(T=wide, U="", sqrt="sqrtf", x=args[0], y=args[-1]))
        self.helpers.add(half.HELPER)
        if key in half.EXACT:
            return text
        rnd = half.ROUND_DOUBLE if wide == "double" else half.ROUND
        return f"{rnd[dt]}({text})"

    def use_helpers(self, text: str) -> str:
        """`text`, noting the helpers it calls (with their dependencies)."""
        for h in HELPERS:
            if f"{h}(" in text:
                self.helpers.update((*HELPER_DEPS.get(h, ()), h))
        return text

    @staticmethod
    def cast(src: str, dst: str, x: str) -> str:
        """`fuel.cast`: to i1 is `x != 0` (NaN too); i1 is 0/1 already; C conversions round
        int/f64 -> float once (RNE), truncate float -> int, wrap int -> int (gcc, clang)."""
        if src == dst:
            return x
        if dst == "i1":
            return f"({x} != 0)"
        return f"({CTYPE[dst]}){x}"

    def store(self, j: int, v: SSAValue) -> None:
        off, conds = self.offset(shape_of(v.type), store=True)
        dt, val = dtype_name(v.type), self.names[v]
        val = f"{half.STORE[dt]}({val})" if dt in half.HALF else val
        line = f"out{j}[{off}] = {val};  /* {v.type} */"
        self.lines.append(f"if ({' && '.join(conds)}) {line}" if conds else line)


def c_source(group: FusionGroup, name: str) -> str:
    """The C source of `group` as one function `void name(void **args)`."""
    em = emit_group(_Emitter(group), group)
    space = group.space
    dims = [d for d, n in enumerate(space) if n != 1]  # a loop per dim; size-1 dims are 0
    loops, flat = [], "0"
    for k, d in enumerate(dims):
        loops.append(f"{'  ' * k}for (int64_t i{d} = 0; i{d} < {space[d]}; ++i{d}) {{")
        flat = f"i{d}" if flat == "0" else f"{flat} * {space[d]} + i{d}"
        flat = flat if k in (0, len(dims) - 1) else f"({flat})"
    params, casts = [], []  # restrict parameters: GCC honours those (not restrict locals)
    for j, v in enumerate(group.inputs):
        ct = CTYPE[dtype_name(v.type)]
        params.append(f"const {ct} *restrict in{j}")
        casts.append(f"(const {ct} *)args[{j}]")
    for j, v in enumerate(group.outputs):
        ct = CTYPE[dtype_name(v.type)]
        params.append(f"{ct} *restrict out{j}")
        casts.append(f"({ct} *)args[{len(group.inputs) + j}]")
    ops = ", ".join(dict.fromkeys(op.name for op in group.ops))
    out = [
        f"/* Generated by fuel convert-fuel-to-c: {len(group.ops)} fused op(s) over space "
        f"{list(space)}",
        f"   ({ops}). */",
        "#include <math.h>",
        "#include <stdint.h>",
    ]
    first = (half.HELPER, "fuel_erfcx", "fuel_x_sigmoid")  # helpers others call
    deps_first = sorted(em.helpers, key=lambda h: (first.index(h) if h in first else 3, h))
    out += [half.HELPER_SOURCE if h == half.HELPER else helper_source(h) for h in deps_first]
    out += ["", f"static void {name}_body({', '.join(params)}) {{"]
    if not dims:
        loops = ["{"]  # one point
    out.extend(f"  {line}" for line in loops)
    pad = "  " * (len(loops) + 1)
    out.append(f"{pad}const int64_t i = {flat};  /* row-major index in the space */")
    out.extend(f"{pad}{line}" for line in em.lines)
    out.extend(f"{'  ' * k}}}" for k in range(len(loops), 0, -1))
    out += ["}", "", f"void {name}(void **args) {{", f"  {name}_body({', '.join(casts)});", "}"]
    return "\n".join(out) + "\n"


# -- compile, cache, load ---------------------------------------------------------------------


def c_cache_dir() -> Path:
    """Where compiled kernels are cached: `cpu/` beside the Triton cache (`cache_dir()`), so
    `$FUEL_CACHE_DIR` and `$XDG_CACHE_HOME` move both."""
    return cache_dir().parent / "cpu"


def find_compiler() -> list[str] | None:
    """The C compiler command (`$CC`, split like a shell word list, else `cc`), or None."""
    cmd = shlex.split(os.environ.get("CC", "") or "cc")
    return cmd if cmd and shutil.which(cmd[0]) else None


@functools.lru_cache(maxsize=8)
def _compiler_id(cmd: tuple[str, ...]) -> str:
    try:
        res = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise CodegenError(f"C compiler {' '.join(cmd)!r} does not run: {e}") from None
    return res.stdout.splitlines()[0] if res.stdout else " ".join(cmd)


def library_key(source: str, flags: Sequence[str] = CFLAGS) -> str:
    """The cache key of `source`'s library: sha256 of the source, compiler, flags, machine."""
    cmd = find_compiler()
    who = _compiler_id(tuple(cmd)) if cmd else "no-compiler"
    text = "\0".join([source, who, " ".join(flags), platform.machine()])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def source_key(source: str) -> str:
    """The sha256 of a kernel's source (what a bundle's .so is registered under)."""
    return hashlib.sha256(source.encode()).hexdigest()[:24]


_PREBUILT: dict[str, Path] = {}
"""source_key -> a verified prebuilt library (from a bundle): used instead of compiling."""


def prebuilt(key: str) -> Path | None:
    """The registered prebuilt library for source key `key`, if any."""
    return _PREBUILT.get(key)


def register_prebuilt(source: str, path: Path) -> None:
    """Use the library at `path` for `source` (a bundle's .so, after hash verification)."""
    _PREBUILT[source_key(source)] = path


def compile_source(source: str, dest: Path, flags: Sequence[str] = CFLAGS) -> None:
    """Compile `source` into the shared library `dest` (atomically) with `flags`; CodegenError
    carries the compiler's stderr."""
    cmd = find_compiler()
    if cmd is None:
        raise CodegenError(
            f"no C compiler found (tried ${{CC}}={os.environ.get('CC', '')!r}, then 'cc'); "
            "install gcc or clang, or build with codegen=none"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".cc.") as tmp:
        src, so = Path(tmp) / "kernel.c", Path(tmp) / "kernel.so"
        src.write_text(source)
        try:
            res = subprocess.run([*cmd, *flags, "-o", str(so), str(src), "-lm"],
                                 capture_output=True, text=True, timeout=300)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as e:
            raise CodegenError(f"C compiler {' '.join(cmd)!r} failed to run: {e}") from None
        if res.returncode != 0:
            raise CodegenError(
                f"C compile failed ({' '.join(cmd)} exit {res.returncode}):\n{res.stderr.strip()}"
            )
        os.replace(so, dest)


def library_path(source: str, flags: Sequence[str] = CFLAGS) -> Path:
    """The compiled library of `source`: a registered prebuilt one, else the cache entry
    (compiled now with `flags` if missing)."""
    pre = _PREBUILT.get(source_key(source))
    if pre is not None:
        return pre
    path = c_cache_dir() / f"k_{library_key(source, flags)}.so"
    if not path.exists():
        compile_source(source, path, flags)
    return path


_LOADED: dict[Path, ctypes.CDLL] = {}


def load_function(name: str, source: str) -> Any:
    """The ctypes function `name` of `source`'s library (compiled or taken from the cache)."""
    path = library_path(source)
    lib = _LOADED.get(path)
    if lib is None:
        try:
            lib = _LOADED[path] = ctypes.CDLL(str(path))
        except OSError as e:
            raise CodegenError(f"cannot load compiled kernel {path}: {e}") from None
    try:
        fn = getattr(lib, name)
    except AttributeError:
        raise CodegenError(f"{path} does not define '{name}'") from None
    fn.argtypes, fn.restype = None, None
    return fn


@dataclass(frozen=True)
class CPlan:
    """A generated C kernel as plain data (what a `fuel.c_kernel` op holds)."""

    name: str
    source: str
    inputs: tuple[tuple[tuple[int, ...], str], ...]
    outputs: tuple[tuple[tuple[int, ...], str], ...]

    @staticmethod
    def from_op(op: Any) -> CPlan:
        """From a `fuel.c_kernel` op."""
        return CPlan(op.sym_name.data, op.source.data, *io_signature(op.function_type))


def pointer_array(n: int) -> Any:
    """A ctypes array of `n` pointers (the `args` of a generated kernel)."""
    return (ctypes.c_void_p * n)()


class CKernel:
    """A fuel `Kernel` (`kernel(inputs, outputs, params)`, destination-passing) running a
    generated C kernel on numpy arrays; `fn(ptrs)` is the raw entry (a pointer array of
    C-contiguous buffers of the planned shapes and dtypes, inputs then outputs)."""

    def __init__(self, plan: CPlan) -> None:
        self.plan = plan
        self.fn = load_function(plan.name, plan.source)

    def __call__(self, inputs: Sequence[Any], outputs: Sequence[Any], params: Any) -> None:
        from runtime.dtypes import to_numpy

        plan = self.plan
        for what, got, want in (("input", inputs, plan.inputs), ("output", outputs, plan.outputs)):
            if len(got) != len(want):
                raise CodegenError(f"{plan.name}: expected {len(want)} {what}s, got {len(got)}")
            for j, (a, (shape, dt)) in enumerate(zip(got, want, strict=True)):
                if not isinstance(a, np.ndarray) or a.shape != shape or a.dtype != to_numpy(dt):
                    have = f"{a.dtype}{list(a.shape)}" if isinstance(a, np.ndarray) else type(a)
                    raise CodegenError(f"{plan.name}: {what} {j} must be {dt}{list(shape)}, "
                                       f"got {have}")  # fmt: skip
        ins = [np.ascontiguousarray(a) for a in inputs]
        outs = [
            o if o.flags.c_contiguous and not any(np.may_share_memory(o, a) for a in ins)
            else np.empty(o.shape, o.dtype)
            for o in outputs
        ]  # fmt: skip
        ptrs = pointer_array(len(ins) + len(outs))
        for j, a in enumerate((*ins, *outs)):
            ptrs[j] = a.ctypes.data
        self.fn(ptrs)
        for o, t in zip(outs, outputs, strict=True):
            if o is not t:
                np.copyto(t, o)


_KERNELS: dict[CPlan, CKernel] = {}


def kernel_for(plan: CPlan) -> CKernel:
    """The loaded `CKernel` of `plan` (one per distinct plan in this process)."""
    k = _KERNELS.get(plan)
    if k is None:
        k = _KERNELS[plan] = CKernel(plan)
    return k
