"""Generated C for fused elementwise groups on the host: the source emitter.

The groups are `lowering.fusion.fusion_groups` (connected elementwise/broadcast/cast
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
* erf and gelu are `runtime.special`'s f64 algorithms transcribed (the same
  erfcx polynomial, series and exact-square splits, in the same operation order), evaluated in
  double for f32 too, like the numpy kernels' F64_COMPUTE; the f64 tanh form of gelu (a
  double-double argument) has no emitter.
* f16/bf16 are stored as their bits and held as f32 values; each op computes like its numpy
  kernel (+ - * / sqrt in f32, transcendentals in double) and rounds to the dtype at once, as
  the unfused kernels do, by fuel's own rounding rules (`codegen_half`, `runtime.rounding`):
  bit-identical by construction. pow has no emitter there: such groups stay on numpy.

Two departures from numpy's bits, taken only where no precision floor is stated
(`convert-fuel-to-c{precision=...}`), each checked against float64:
* f32 exp log tanh sigmoid silu gelu erf stamped with their `c-vecmath` sibling call its
  vectorizable C function (`runtime.kernels.cpu.vecmath`: double inside, polynomials and
  selects, 1 ulp, verified into the ledger); the kernel body keeps the stamp. Every kernel
  carries GCC's vectorizer pragma (`vecmath.PRAGMA`: no result changes), and one calling these
  functions is cloned for AVX-512 and AVX2 (the same bits).
* a group with f32 sum/mean/max/min over the last axis is a row kernel (`codegen_rows`):
  per row, one pass per reduction level, double accumulation on fixed lanes.

The compiler driver, cache and loader are run-time code: `runtime.loaders.c` (`CKernel`,
`kernel_for`); the C helpers shared with the native library are `runtime.native.helpers`.
`c_pays_off` is the pass's cost model: a group becomes C when one call beats its numpy calls
(libm's scalar transcendentals are 3-8x slower per element than numpy's SIMD ones, so large
transcendental groups stay on numpy unless their c-vecmath functions replace them).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from xdsl.ir import Operation, SSAValue

from fuel_dialect.attrs import KERNEL_ATTR, KernelRefAttr
from fuel_dialect.dtypes import dtype_name, shape_of
from fuel_dialect.ops_nn import ReduceOp
from lowering.cpu import codegen_half as half
from lowering.cpu.codegen_rows import LANES, RowPlan, row_op_count, row_plan
from lowering.fusion import FusionGroup, broadcast_index, emit_group, fusion_groups, op_key
from runtime.kernels.cpu import vecmath
from runtime.loaders.c import CodegenError
from runtime.native.helpers import HELPER_DEPS, HELPERS, helper_source

CTYPE = {
    "f64": "double",
    "f32": "float",
    "i64": "int64_t",
    "i32": "int32_t",
    "i8": "int8_t",
    "u8": "uint8_t",
    "i1": "uint8_t",
    "f16": "uint16_t",
    "bf16": "uint16_t",
}
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

NARROW_UNARY = {
    op: f"({{T}})fuel_tiny_half_sum((double){{x}}, {fn}((double){{x}}))"
    for op, fn in (
        ("silu", "fuel_silu"),
        ("gelu", "fuel_gelu_erf"),
        ("gelu_tanh", "fuel_gelu_tanh"),
    )
}
"""`FLOAT_UNARY` overrides for results narrower than f64 (`special.tiny_half_sum`)."""

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
    "max": "(({x} > {y} || {x} != {x}) ? {x} : (({x} == {y} && !signbit({x})) ? {x} : {y}))",
    "min": "(({x} < {y} || {x} != {x}) ? {x} : (({x} == {y} && signbit({x})) ? {x} : {y}))",
}
"""Binary float ops; max/min propagate a NaN from either side and order -0 below +0 like the
numpy kernels (IEEE 754-2019: max(-0.0, 0.0) is 0.0 and min(-0.0, 0.0) is -0.0 in either
order; on other ties either operand is the same value)."""

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
    ),
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
    "exp": 6.0,
    "log": 7.0,
    "tanh": 23.0,
    "sin": 14.0,
    "cos": 14.0,
    "rsqrt": 2.0,
    "sigmoid": 11.0,
    "silu": 11.0,
    "erf": 39.0,
    "gelu": 40.0,
    "gelu_tanh": 11.0,
    "pow": 18.0,
}
"""Generated C, ns per element by op (scalar libm in double); any other op: `CHEAP_NS`.
Measured on the x86-64 reference host (GCC 12, glibc 2.36) at 64k elements."""
NUMPY_NS_PER_ELEMENT = {
    "exp": 1.5,
    "log": 1.8,
    "tanh": 2.7,
    "sin": 15.0,
    "cos": 15.0,
    "rsqrt": 2.0,
    "sigmoid": 5.5,
    "silu": 7.5,
    "erf": 80.0,
    "gelu": 55.0,
    "gelu_tanh": 8.0,
    "pow": 4.3,
}
"""The numpy kernels, ns per element (SIMD f64 routines), same host and size."""
CHEAP_NS = 0.25
"""+ - * / max min compares casts where sqrt: vectorized in both, memory bound."""
C_CALL_NS = 600.0
"""One generated kernel call from the executor (ctypes), measured."""
NUMPY_CALL_NS = {
    "sigmoid": 10_000.0,
    "silu": 10_000.0,
    "erf": 50_000.0,
    "gelu": 50_000.0,
    "gelu_tanh": 10_000.0,
}
"""Per-call overhead of the composite numpy kernels (`_common.OVERHEAD_NS`); others 1000."""


def uses_vecmath(op: Operation) -> bool:
    """`op` is stamped with its `c-vecmath` sibling (`runtime.kernels.cpu.vecmath`): its C is
    that vectorizable f32 function, not the numpy kernel's double libm call."""
    stamp = op.attributes.get(KERNEL_ATTR)
    return (
        isinstance(stamp, KernelRefAttr)
        and stamp.kernel_source.data == vecmath.SOURCE
        and op_key(op) in vecmath.FUNCTIONS
        and dtype_name(op.results[0].type) == "f32"
    )


def _c_ns(op: Operation, vec: Callable[[Operation], bool]) -> float:
    key = op_key(op)
    if vec(op):
        return vecmath.NS_PER_ELEMENT[key]
    return C_NS_PER_ELEMENT.get(key, CHEAP_NS)


def c_pays_off(group: FusionGroup, vec: Callable[[Operation], bool] = uses_vecmath) -> bool:
    """True when the cost model expects `group` as one C call to beat its numpy calls: per-op
    call overhead saved against libm's slower scalar transcendentals on large spaces (ops
    `vec` accepts cost what the vectorized `c-vecmath` functions do; a row group's ops count
    once per pass that computes them)."""
    n = math.prod(group.space)
    plan = row_plan(group)
    if plan is None:
        c_ns = sum(_c_ns(op, vec) for op in group.ops)
    else:
        by_key = {op_key(op): op for op in group.ops}
        counts = row_op_count(plan)
        c_ns = ROW_REDUCE_NS * counts.pop("reduce") + ROW_PASS_NS * counts.pop("pass")
        for k, c in counts.items():
            ns = _c_ns(by_key[k], vec)
            c_ns += c * (ROW_CHEAP_NS if ns == CHEAP_NS else ns)
    keys = [op_key(op) for op in group.ops]
    numpy_ns = sum(
        NUMPY_CALL_NS.get(k, 1000.0) + n * NUMPY_NS_PER_ELEMENT.get(k, CHEAP_NS) for k in keys
    )
    return C_CALL_NS + n * c_ns <= numpy_ns


ROW_CHEAP_NS = 0.05
"""A cheap op in a row kernel's pass, ns per element: vectorized, in registers (numpy's
`CHEAP_NS` is a pass over memory)."""
ROW_PASS_NS = 0.15
"""One pass over a row's inputs and outputs, ns per element."""
ROW_REDUCE_NS = 0.1
"""One reduction's lane update, ns per element. Measured with ROW_PASS_NS on longhand
layer norm, softmax and l2-normalize over [64, 1024] f32 (0.5-0.7 ns per element for 3 passes
on the reference host), rounded up."""


def c_groups(
    block: Any, eligible: Any, reductions: Callable[[Operation], bool] | None = None
) -> list[FusionGroup]:
    """Fusion groups of the C-eligible ops of `block` that `eligible` also accepts, with the
    reductions `reductions` accepts where they make row groups (`codegen_rows.row_plan`): a
    reduction in a group that is not one stays out, and the block is grouped again."""
    banned: set[Operation] = set()

    def red(op: Operation) -> bool:
        return reductions is not None and op not in banned and reductions(op)

    while True:
        use = red if reductions is not None else None
        groups = fusion_groups(block, lambda op: c_eligible(op) and eligible(op), use)
        bad = {
            op for g in groups if row_plan(g) is None for op in g.ops if isinstance(op, ReduceOp)
        }
        if not bad:
            return groups
        banned |= bad


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
    vec_helpers: set[str] = field(default_factory=set)
    """`c-vecmath` functions the body calls (`runtime.kernels.cpu.vecmath.HELPERS`)."""

    count: int = 0

    def fresh(self) -> str:
        """A new value name (a row kernel recomputes a value under a new one per pass)."""
        self.count += 1
        return f"v{self.count - 1}"

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
        if src == "f32" and uses_vecmath(op):
            fn = vecmath.FUNCTIONS[key]
            self.vec_helpers.add(fn)
            return f"(float){fn}((double){args[0]})"
        table = (FLOAT_UNARY if src in FLOAT else INT_UNARY) if len(args) == 1 else None
        if table is None:
            table = FLOAT_BINARY if src in FLOAT else INT_BINARY
        if key not in table:
            raise CodegenError(f"no C code for '{op.name}' on {src}")
        fmt |= {"x": args[0], "y": args[-1]}
        if src == "f32" and key in NARROW_UNARY:
            return self.use_helpers(NARROW_UNARY[key].format(**fmt))
        return self.use_helpers(table[key].format(**fmt))

    def half_expr(self, op: Operation, key: str, args: list[str], dt: str) -> str:
        """An f16/bf16 op: the f32 (transcendentals: double) expression of the numpy kernel,
        rounded to `dt` at once unless it only selects or flips a sign."""
        wide = "double" if key in half.DOUBLE_COMPUTE else "float"
        table = FLOAT_UNARY if len(args) == 1 else FLOAT_BINARY
        if key not in table:
            raise CodegenError(f"no C code for '{op.name}' on {dt}")
        text = NARROW_UNARY.get(key, table[key]) if len(args) == 1 else table[key]
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


def _flat(space: tuple[int, ...], dims: list[int]) -> str:
    """The row-major index expression of the point `i<d>` over the loop dims `dims`."""
    flat = "0"
    for k, d in enumerate(dims):
        flat = f"i{d}" if flat == "0" else f"{flat} * {space[d]} + i{d}"
        flat = flat if k in (0, len(dims) - 1) else f"({flat})"
    return flat


def _point_body(em: _Emitter, group: FusionGroup) -> list[str]:
    """An elementwise group's body: one loop nest over the space, every op once per point."""
    emit_group(em, group)
    space = group.space
    dims = [d for d, n in enumerate(space) if n != 1]  # a loop per dim; size-1 dims are 0
    loops = [
        f"{'  ' * k}for (int64_t i{d} = 0; i{d} < {space[d]}; ++i{d}) {{"
        for k, d in enumerate(dims)
    ]
    if not dims:
        loops = ["{"]  # one point
    out = list(loops)
    pad = "  " * len(loops)
    out.append(f"{pad}const int64_t i = {_flat(space, dims)};  /* row-major index in the space */")
    out.extend(f"{pad}{line}" for line in em.lines)
    out.extend(f"{'  ' * k}}}" for k in range(len(loops) - 1, -1, -1))
    return out


def c_source(group: FusionGroup, name: str) -> str:
    """The C source of `group` as one function `void name(void **args)` (a group with
    reductions over the last axis: the row kernel of `lowering.cpu.codegen_rows`)."""
    em = _Emitter(group)
    plan = row_plan(group)
    body = _point_body(em, group) if plan is None else _row_body(em, plan)
    space = group.space
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
        vecmath.PRAGMA,
        "#include <math.h>",
        "#include <stdint.h>",
    ]
    first = (half.HELPER, "fuel_erfcx", "fuel_x_sigmoid")  # helpers others call
    deps_first = sorted(em.helpers, key=lambda h: (first.index(h) if h in first else 3, h))
    out += [half.HELPER_SOURCE if h == half.HELPER else helper_source(h) for h in deps_first]
    if em.vec_helpers or plan is not None:
        out.append(vecmath.source(em.vec_helpers or {"fuel_vm_bits"}))  # defines the clones
    clones = f"{vecmath.CLONES} " if em.vec_helpers or plan is not None else ""
    out += ["", f"{clones}static void {name}_body({', '.join(params)}) {{"]
    out.extend(f"  {line}" for line in body)
    out += ["}", "", f"void {name}(void **args) {{", f"  {name}_body({', '.join(casts)});", "}"]
    return "\n".join(out) + "\n"


REDUCE_INIT = {"reduce_sum": "0.0", "reduce_mean": "0.0", "reduce_max": "-INFINITY"}
REDUCE_INIT["reduce_min"] = "INFINITY"
PICK = {"reduce_max": ">", "reduce_min": "<"}
"""max/min lane updates: take `v` when it is beyond the lane or NaN (a NaN lane stays NaN)."""


def _row_body(em: _Emitter, plan: RowPlan) -> list[str]:
    """A row group's body (`lowering.cpu.codegen_rows`): per row, the phases' passes."""
    group = plan.group
    space = group.space
    jd, n = len(space) - 1, space[-1]
    lead = [d for d in range(jd) if space[d] != 1]
    dims = [*lead, jd]
    out = [
        f"{'  ' * k}for (int64_t i{d} = 0; i{d} < {space[d]}; ++i{d}) {{"
        for k, d in enumerate(lead)
    ]
    pad = "  " * len(lead)
    if not lead:
        out, pad = ["{"], "  "
    em.lines = []
    for v, value in group.splats.items():
        em.splat(v, value)
    out += [f"{pad}{line}" for line in em.lines]
    out.append(f"{pad}const int64_t i{jd} = 0;  /* per-row values: the row's first point */")
    out += [f"{pad}float {_buffer(plan, v)}[{n}];  /* {v.type} row */" for v in plan.buffered]
    row_inputs = [(j, v) for j, v in enumerate(group.inputs) if plan.is_row(v)]
    em.lines = []
    for j, v in enumerate(group.inputs):
        if not plan.is_row(v):
            em.load(j, v)
    out += [f"{pad}{line}" for line in em.lines]
    for p in range(plan.phases):
        em.lines = []
        for op in plan.row_scalar_ops(p):
            em.op(op)
        _store_scalars(em, plan, p)
        out += [f"{pad}{line}" for line in em.lines]
        out += _phase(em, plan, p, row_inputs, pad, jd, n, _flat(space, dims))
    last = plan.phases
    em.lines = []
    for op in plan.row_scalar_ops(last):
        em.op(op)
    _store_scalars(em, plan, last)
    out += [f"{pad}{line}" for line in em.lines]
    out.extend(f"{'  ' * k}}}" for k in range(max(len(lead), 1) - 1, -1, -1))
    return out


def _store_scalars(em: _Emitter, plan: RowPlan, p: int) -> None:
    """Store the per-row outputs of level `p` (once per row: at the row's first point)."""
    for j, v in enumerate(plan.group.outputs):
        if not plan.is_row(v) and plan.level[v] == p:
            em.store(j, v)


def _phase(
    em: _Emitter,
    plan: RowPlan,
    p: int,
    row_inputs: list[tuple[int, SSAValue]],
    pad: str,
    jd: int,
    n: int,
    flat: str,
) -> list[str]:
    """Phase `p`: a pass over the row computing its ops, accumulating its reductions on
    `LANES` interleaved lanes (a fixed order), storing its row outputs; then the reductions'
    per-row results."""
    ops, reds = plan.loop_ops(p), plan.reductions(p)
    em.lines = []
    needed = {v for op in (*ops, *reds) for v in op.operands}
    for j, v in row_inputs:
        if v in needed or (v in plan.group.outputs and plan.level[v] == p):
            em.load(j, v)
    for v in plan.loads(p):
        name = em.names[v] = em.fresh()
        em.lines.append(f"float {name} = {_buffer(plan, v)}[i{jd}];  /* buffered */")
    for op in ops:
        em.op(op)
    for v in plan.buffered:
        if plan.level[v] == p:
            em.lines.append(f"{_buffer(plan, v)}[i{jd}] = {em.names[v]};")
    body = list(em.lines)
    em.lines = []
    for j, v in enumerate(plan.group.outputs):
        if plan.is_row(v) and plan.level[v] == p:
            em.store(j, v)
    stores = list(em.lines)
    acc = [f"acc{plan.group.ops.index(r)}" for r in reds]
    out: list[str] = []
    for a, r in zip(acc, reds, strict=True):
        key = op_key(r)
        ct = "double" if key in ("reduce_sum", "reduce_mean") else "float"
        init = ", ".join([REDUCE_INIT[key]] * LANES)
        out.append(f"{ct} {a}[{LANES}] = {{{init}}};  /* {r.name} lanes */")

    def updates(lane: str) -> list[str]:
        lines = []
        for a, r in zip(acc, reds, strict=True):
            v, key = em.names[r.input], op_key(r)
            if key in PICK:
                x = f"{a}[{lane}]"
                lines.append(f"{x} = ({v} {PICK[key]} {x} || {v} != {v}) ? {v} : {x};")
            else:
                lines.append(f"{a}[{lane}] += (double){v};")
        return lines

    point = [f"const int64_t i = {flat};  /* row-major index in the space */", *body]
    if reds:
        full = n - n % LANES
        out.append(f"for (int64_t jo = 0; jo < {full}; jo += {LANES}) {{")
        out.append(f"  for (int64_t jl = 0; jl < {LANES}; ++jl) {{")
        out.append(f"    const int64_t i{jd} = jo + jl;")
        out += [f"    {line}" for line in (*point, *updates("jl"), *stores)]
        out += ["  }", "}"]
        if full < n:
            out.append(f"for (int64_t i{jd} = {full}; i{jd} < {n}; ++i{jd}) {{")
            out.append(f"  const int64_t jl = i{jd} - {full};")
            out += [f"  {line}" for line in (*point, *updates("jl"), *stores)]
            out.append("}")
    elif body or stores:
        out.append(f"for (int64_t i{jd} = 0; i{jd} < {n}; ++i{jd}) {{")
        out += [f"  {line}" for line in (*point, *stores)]
        out.append("}")
    for a, r in zip(acc, reds, strict=True):
        out += _finish(em, a, r, n)
    return [f"{pad}{line}" for line in out]


def _buffer(plan: RowPlan, v: SSAValue) -> str:
    """The row buffer of the buffered value `v`."""
    assert isinstance(v.owner, Operation)
    return f"buf{plan.group.ops.index(v.owner)}"


def _finish(em: _Emitter, a: str, r: ReduceOp, n: int) -> list[str]:
    """A reduction's per-row result from its lanes, combined pairwise in a fixed order
    (lane k takes lane k + step, step 1, 2, 4)."""
    key = op_key(r)
    name = em.fresh()
    em.names[r.result] = name
    out, step = [], 1
    while step < LANES:
        for k in range(0, LANES, 2 * step):
            x, y = f"{a}[{k}]", f"{a}[{k + step}]"
            if key in PICK:
                out.append(f"{x} = ({y} {PICK[key]} {x} || {y} != {y}) ? {y} : {x};")
            else:
                out.append(f"{x} += {y};")
        step *= 2
    if key in PICK:
        value = f"{a}[0]"
    else:
        value = f"(float){a}[0]" if key == "reduce_sum" else f"(float)({a}[0] / {n}.0)"
    return [*out, f"float {name} = {value};  /* {r.name} */"]


# -- compile, cache, load ---------------------------------------------------------------------
