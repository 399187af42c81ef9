"""Generated Triton for fused elementwise chains: the kernel source of a fusion group
(`lowering.fusion`).

`kernel_source` emits one readable `@triton.jit` kernel per group: a flat 1-D grid of BLOCK
elements over the space; each input is loaded through index arithmetic on its own shape
(stride 0 on broadcast dims, so broadcasting costs nothing); each op is one line. f16/bf16 values
are computed in f32 and rounded back after every op, exactly as the numpy kernels compute each
op (so the fused kernel is the unfused graph, op by op); f32 math is f32 (transcendentals: a
few ulp from the numpy kernels, which evaluate them in f64), pow is evaluated in f64, f64 is f64.
An output smaller than the space is stored only from the points whose broadcast coordinates
are 0.

`runtime.loaders.triton.GeneratedKernel` turns the source into a jit function (written to a
content-addressed file, since Triton needs real source) and is a fuel `Kernel` on torch tensors.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue

from fuel_dialect.dtypes import dtype_name, shape_of
from lowering.fusion import FusionGroup, broadcast_index, emit_group, op_key, row_major_strides
from runtime.loaders.triton import CodegenError

DEFAULT_BLOCK = 1024
TL = {
    "f64": "tl.float64",
    "f32": "tl.float32",
    "f16": "tl.float16",
    "bf16": "tl.bfloat16",
    "i64": "tl.int64",
    "i32": "tl.int32",
    "i8": "tl.int8",
    "u8": "tl.uint8",
    "i1": "tl.int1",
}
HALF = ("f16", "bf16")
FLOATS = ("f64", "f32", "f16", "bf16")


# -- op table: one line of Triton per fuel op, in compute types -------------------------------

UNARY = {
    "neg": "{x} * {minus_one}",
    "abs": "tl.abs({x})",
    "relu": "tl.where(({x} > 0) | ({x} != {x}), {x}, tl.zeros_like({x}))",
    "exp": "tl.exp({x})",
    "log": "tl.log({x})",
    "sqrt": "{sqrt}({x})",
    "rsqrt": "{div}(tl.full({x}.shape, 1.0, {ct}), {sqrt}({x}))",
    "recip": "{div}(tl.full({x}.shape, 1.0, {ct}), {x})",
    "tanh": "_tanh({x})",
    "sigmoid": "_x_sigmoid(tl.full({x}.shape, 1.0, {ct}), {x})",
    "silu": "_x_sigmoid({x}, {x})",
    "sin": "tl.sin({x})",
    "cos": "tl.cos({x})",
    "erf": "tl.erf({x})",
    "gelu": "_gelu_erf({x})",
    "gelu_tanh": "_x_sigmoid({x}, {x} * (1.5957691216057308 + 0.07135481627260025 * {x} * {x}))",
}
"""Unary fuel op -> expression (neg multiplies: Triton's unary minus is 0 - x, which makes
-(+0.0) +0.0); sigmoid, silu and gelu(tanh) share the overflow-free x*sigmoid(v)
form of the numpy kernels (exp only sees -|v|)."""

BINARY = {
    "add": "{x} + {y}",
    "sub": "{x} - {y}",
    "mul": "{x} * {y}",
    "div": "{div}({x}, {y})",
    "pow": "_pow({x}, {y})",
    "max": "tl.where(({x} > {y}) | ({x} != {x}), {x}, {y})",
    "min": "tl.where(({x} < {y}) | ({x} != {x}), {x}, {y})",
    "eq": "{x} == {y}",
    "ne": "{x} != {y}",
    "lt": "{x} < {y}",
    "le": "{x} <= {y}",
    "gt": "{x} > {y}",
    "ge": "{x} >= {y}",
}
"""Binary fuel op -> expression; max/min propagate NaN like numpy (integers never are NaN)."""

HELPERS = {
    "_tanh": '''
@triton.jit
def _tanh(x):
    """tanh: odd Taylor series below |x| = 1/16 (no cancellation), else (1 - e)/(1 + e)."""
    ax = tl.abs(x)
    e = tl.exp(-2.0 * ax)
    big = (1.0 - e) / (1.0 + e)
    x2 = x * x
    p = -0.008863235529902197 * x2 + 0.021869488536155203
    p = (p * x2 - 0.05396825396825397) * x2 + 0.13333333333333333
    small = x + x * x2 * (p * x2 - 0.3333333333333333)
    return tl.where(ax < 0.0625, small, tl.where(x < 0, -big, big))
''',
    "_x_sigmoid": '''
@triton.jit
def _x_sigmoid(x, v):
    """x * sigmoid(v) without overflow: x e / (1 + e) with e = exp(-|v|) for v < 0."""
    e = tl.exp(-tl.abs(v))
    num = tl.where(v >= 0, x, tl.maximum(x, -1.0e4) * e)  # clamp: -inf * 0 would be NaN
    return num / (1.0 + e)
''',
    "_gelu_erf": '''
@triton.jit
def _gelu_erf(x):
    """0.5 x (1 + erf(x / sqrt 2)); its limit -0.0 below x = -50 (where -inf * 0 is NaN)."""
    g = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    return tl.where(x < -50.0, -0.0, g)
''',
    "_div": """
@triton.jit
def _div(x, y):
    return x / y
""",
    "_pow": '''
@triton.jit
def _pow(x, y):
    """x ** y like numpy, in f64: exp2(y log2 |x|), signed for negative x and integral y,
    NaN for negative x and non-integral y (log2 of a negative), 1 for y == 0 or x == 1."""
    xd = x.to(tl.float64)
    yd = y.to(tl.float64)
    integral = tl.floor(yd) == yd
    r = tl.exp2(yd * tl.log2(tl.where(integral, tl.abs(xd), xd)))
    odd = integral & (tl.floor(yd * 0.5) != yd * 0.5)
    r = tl.where((xd < 0) & odd, r * -1.0, r)
    r = tl.where((yd == 0) | (xd == 1), 1.0, r)
    return r.to(x.dtype)
''',
    "_to_bf16": '''
@triton.jit
def _to_bf16(r):
    """f32 -> bf16 rounding to nearest even. The interpreter truncates, so there the f32 bits
    are rounded first (then the truncation is exact); compiled kernels convert with RNE."""
    if INTERPRET:
        bits = r.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        r = tl.where(r != r, r, bits.to(tl.float32, bitcast=True))
    return r.to(tl.bfloat16)
''',
}
"""Helper jit functions, emitted into a kernel's source only when it calls them."""


def compute_type(dtype: str) -> str:
    """The Triton type a value of `dtype` is held in inside a kernel (f16/bf16: f32)."""
    return "tl.float32" if dtype in HALF else TL[dtype]


# -- fusion groups ----------------------------------------------------------------------------


# -- source emission --------------------------------------------------------------------------

EXACT_IN_F32 = frozenset({"neg", "abs", "relu", "max", "min", "where", "broadcast"})
"""Ops whose f32 result of f16/bf16 operands is already representable: no rounding step."""


@dataclass
class _Emitter:
    """Builds one kernel body; values are named v0, v1, ... in compute types."""

    group: FusionGroup
    lines: list[str] = field(default_factory=list)
    names: dict[SSAValue, str] = field(default_factory=dict)
    helpers: set[str] = field(default_factory=set)
    coords: set[int] = field(default_factory=set)

    def fresh(self) -> str:
        return f"v{len(self.names)}"

    def index(self, shape: tuple[int, ...], store: bool = False) -> tuple[str, list[str]]:
        """Offset of a value of `shape` at the current points, and the conditions that pick
        one point per element (broadcast coordinates 0) for stores."""
        split = broadcast_index(shape, self.group.space)
        if split is None:
            return "offs", []
        terms, conds = split[0], [f"(i{d} == 0)" for d in split[1]]
        used = " ".join(terms + conds) if store else " ".join(terms)
        self.coords.update(int(d) for d in re.findall(r"\bi(\d+)\b", used))
        return (" + ".join(terms) if terms else "offs * 0"), conds

    def load(self, j: int, v: SSAValue) -> None:
        dt, name = dtype_name(v.type), self.fresh()
        self.names[v] = name
        off, _ = self.index(shape_of(v.type))
        widen = ".to(tl.float32)" if dt in HALF else ""
        self.lines.append(f"{name} = tl.load(in{j} + {off}, mask=mask){widen}  # {v.type}")

    def splat(self, v: SSAValue, value: float | int | bool) -> None:
        dt, name = dtype_name(v.type), self.fresh()
        self.names[v] = name
        lit = repr(int(value)) if dt == "i1" else repr(value)
        self.lines.append(f"{name} = tl.full([BLOCK], {lit}, {compute_type(dt)})  # splat")

    def op(self, op: Operation) -> None:
        key, dt = op_key(op), dtype_name(op.results[0].type)
        args = [self.names[v] for v in op.operands]
        expr = self.expr(op, key, args)
        if dt in HALF and key not in EXACT_IN_F32 and not (key == "cast" and _same_cast(op)):
            expr = self.round_half(expr, dt)
        name = self.fresh()
        self.names[op.results[0]] = name
        self.lines.append(f"{name} = {expr}  # {op.name}")

    def expr(self, op: Operation, key: str, args: list[str]) -> str:
        operand = dtype_name(op.operands[-1].type)
        ct = compute_type(operand)
        fmt = {
            "ct": ct,
            "sqrt": "tl.sqrt_rn" if ct == "tl.float32" else "tl.sqrt",
            "div": "tl.div_rn" if ct == "tl.float32" else "_div",
            "minus_one": "-1.0" if operand in FLOATS else "-1",
        }
        if key in UNARY:
            template = UNARY[key]
            fmt["x"] = args[0]
        elif key in BINARY:
            template = BINARY[key]
            fmt["x"], fmt["y"] = args
        elif key == "where":
            return f"tl.where({args[0]}, {args[1]}, {args[2]})"
        elif key == "broadcast":
            return args[0]
        elif key == "cast":
            return self.cast(op, args[0])
        else:
            raise CodegenError(f"no Triton code for '{op.name}'")
        text = template.format(**fmt)
        self.helpers.update(h for h in HELPERS if f"{h}(" in text)
        return text

    def cast(self, op: Operation, x: str) -> str:
        """`fuel.cast` semantics: to i1 is `x != 0`; float -> int truncates (Triton's fptosi);
        narrowing to f16 rounds once (f64 directly). To bf16 goes through f32, which can round
        twice for f64 or |int| > 2**24 sources, where the numpy kernel rounds once."""
        src, dst = dtype_name(op.operands[0].type), dtype_name(op.results[0].type)
        if src == dst:
            return x
        if dst == "i1":
            return f"{x} != 0"
        if dst in HALF:
            return f"{x}.to(tl.float32)" if src != "f64" or dst == "bf16" else x
        return f"{x}.to({TL[dst]})"

    def round_half(self, expr: str, dt: str) -> str:
        if dt == "f16":
            return f"({expr}).to(tl.float16).to(tl.float32)"
        self.helpers.add("_to_bf16")
        return f"_to_bf16({expr}).to(tl.float32)"

    def store(self, j: int, v: SSAValue) -> None:
        dt = dtype_name(v.type)
        off, conds = self.index(shape_of(v.type), store=True)
        value = self.names[v]
        if dt in HALF:
            value = f"{value}.to({TL[dt]})"  # exact: the value is already rounded
        mask = " & ".join(["mask", *conds])
        self.lines.append(f"tl.store(out{j} + {off}, {value}, mask={mask})  # {v.type}")


def _same_cast(op: Operation) -> bool:
    return dtype_name(op.operands[0].type) == dtype_name(op.results[0].type)


def kernel_source(group: FusionGroup, name: str) -> str:
    """The Triton source of `group` as one `@triton.jit` kernel named `name`."""
    em = emit_group(_Emitter(group), group)
    space, numel = group.space, math.prod(group.space)
    strides = row_major_strides(space)
    head = ["pid = tl.program_id(0)"]
    pid = "pid.to(tl.int64)" if numel >= 2**31 else "pid"
    head.append(f"offs = {pid} * BLOCK + tl.arange(0, BLOCK)")
    head.append("mask = offs < N")
    for d in sorted(em.coords):
        c = "offs" if strides[d] == 1 else f"offs // {strides[d]}"
        c = c if d == 0 or strides[d] == 1 else f"({c})"
        head.append(f"i{d} = {c}" + (f" % {space[d]}" if d > 0 else ""))
    params = [f"in{j}" for j in range(len(group.inputs))]
    params += [f"out{j}" for j in range(len(group.outputs))]
    ops = ", ".join(dict.fromkeys(op.name for op in group.ops))
    bf16 = "_to_bf16" in em.helpers
    out = [
        f"# Generated by fuel convert-fuel-to-triton: {len(group.ops)} fused op(s) over space "
        f"{list(space)}",
        f"# ({ops}).",
        "import triton",
        "import triton.language as tl",
        *(["", "from runtime import knobs"] if bf16 else []),
        *(["", "INTERPRET = tl.constexpr(knobs.triton_interpret())"] if bf16 else []),
    ]
    for h in sorted(em.helpers):
        out += ["", "", HELPERS[h].strip("\n")]
    out += [
        "",
        "",
        "@triton.jit",
        f"def {name}({', '.join([*params, 'N', 'BLOCK: tl.constexpr'])}):",
    ]
    out.extend(f"    {line}" for line in (*head, *em.lines))
    return "\n".join(out) + "\n"


# -- run time: source -> jit function -> fuel Kernel ------------------------------------------
