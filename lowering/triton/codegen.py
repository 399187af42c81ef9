"""Generated Triton for fused elementwise chains: fusion groups and kernel source.

`fusion_groups` partitions a function body into maximal connected groups of elementwise,
broadcast and cast ops that can run as one kernel over one iteration space (the broadcast of
the members' shapes); ops that only share an input over the same space join one group too
(the input is loaded once). A group never closes a cycle through a non-member op, never mixes
devices, and writes out every member value read outside it (`outputs`); splat constants it
reads are inlined, every other external value is a kernel input.

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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.ir import Block, Operation, SSAValue

from fuel_dialect.attrs import DEVICE_ATTR
from fuel_dialect.dtypes import broadcast_shapes, dtype_name, shape_of
from fuel_dialect.ops_elementwise import BinaryOp, CastOp, GeluOp, UnaryOp, WhereOp
from fuel_dialect.ops_movement import BroadcastOp, ConstantOp
from runtime.loaders.triton import CodegenError

DEFAULT_BLOCK = 1024
TL = {
    "f64": "tl.float64", "f32": "tl.float32", "f16": "tl.float16", "bf16": "tl.bfloat16",
    "i64": "tl.int64", "i32": "tl.int32", "i8": "tl.int8", "u8": "tl.uint8", "i1": "tl.int1",
}  # fmt: skip
HALF = ("f16", "bf16")
FLOATS = ("f64", "f32", "f16", "bf16")

FUSIBLE = (UnaryOp, BinaryOp, WhereOp, CastOp, BroadcastOp)
"""Op classes a generated kernel computes (every elementwise op fuel has, plus broadcast)."""


# -- op table: one line of Triton per fuel op, in compute types -------------------------------

UNARY = {
    "neg": "-{x}",
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
"""Unary fuel op -> expression; sigmoid, silu and gelu(tanh) share the overflow-free x*sigmoid(v)
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
    r = tl.where((xd < 0) & odd, -r, r)
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


def op_key(op: Operation) -> str:
    """The op table key of a fusible op (`gelu_tanh` for the tanh form of gelu)."""
    if isinstance(op, GeluOp) and op.tanh is not None:
        return "gelu_tanh"
    return op.name.removeprefix("fuel.")


# -- fusion groups ----------------------------------------------------------------------------


@dataclass
class FusionGroup:
    """Ops that run as one generated kernel over the row-major iteration `space`."""

    ops: list[Operation]
    space: tuple[int, ...]
    device: str | None
    inputs: list[SSAValue] = field(default_factory=list)
    """External values the kernel loads, in first-use order (splat constants excluded)."""
    outputs: list[SSAValue] = field(default_factory=list)
    """Member results read outside the group (or returned), in op order."""
    splats: dict[SSAValue, float | int | bool] = field(default_factory=dict)
    """External splat constants, inlined as literals."""


def device_of(op: Operation) -> str | None:
    attr = op.attributes.get(DEVICE_ATTR)
    return getattr(attr, "data", None)


def splat_value(op: Operation) -> float | int | bool | None:
    """The value of a finite splat `fuel.constant`, rounded to its dtype; None otherwise."""
    if not isinstance(op, ConstantOp):
        return None
    from runtime.executor import constant_array  # numpy only; keeps this import lazy

    arr = constant_array(op.value)
    flat = arr.reshape(-1)
    if flat.size == 0 or not (flat == flat[0]).all():
        return None
    v = flat[0].item() if arr.dtype.kind != "V" else float(flat[0].astype(np.float32))
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


@dataclass
class _Groups:
    """Union-find over group ids (an id is its first op's block index), with per group its
    space, device, index range and the nodes its ops read from outside it."""

    index: dict[Operation, int]
    group_of: dict[Operation, int] = field(default_factory=dict)
    parent: dict[int, int] = field(default_factory=dict)
    space: dict[int, tuple[int, ...]] = field(default_factory=dict)
    device: dict[int, str | None] = field(default_factory=dict)
    first: dict[int, int] = field(default_factory=dict)
    last: dict[int, int] = field(default_factory=dict)
    preds: dict[int, set[Any]] = field(default_factory=dict)

    def find(self, g: int) -> int:
        while self.parent[g] != g:
            self.parent[g] = self.parent[self.parent[g]]
            g = self.parent[g]
        return g

    def node(self, v: SSAValue) -> Any:
        """The node producing `v`: its group, its op, or None (an argument, a nested value)."""
        owner = v.owner
        if not isinstance(owner, Operation) or owner not in self.index:
            return None
        return self.find(self.group_of[owner]) if owner in self.group_of else owner

    def norm(self, nodes: Iterable[Any]) -> set[Any]:
        return {self.find(n) if isinstance(n, int) else n for n in nodes}

    def op_preds(self, op: Operation) -> set[Any]:
        return {self.node(v) for inner in op.walk() for v in inner.operands} - {None}

    def closes_cycle(self, s: set[int], op_preds: set[Any]) -> bool:
        """Would merging the groups `s` and an op reading `op_preds` create a path that leaves
        the merged group and re-enters it? Walks upstream from every outside node the merged
        group reads, never past the first op of `s` (nothing earlier is downstream of it)."""
        lo = min(self.first[g] for g in s)
        stack = [n for n in self.norm(op_preds).union(*(self.norm(self.preds[g]) for g in s))
                 if n not in s]  # fmt: skip
        seen: set[Any] = set()
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            if isinstance(n, int):
                if n in s:
                    return True
                if self.last[n] > lo:
                    stack.extend(self.norm(self.preds[n]))
            elif self.index[n] > lo:
                stack.extend(self.op_preds(n))
        return False

    def add(self, op: Operation, s: set[int], space: tuple[int, ...]) -> None:
        """Start group `index[op]` holding `op` and the groups `s`."""
        i = self.index[op]
        self.parent[i] = i
        for g in s:
            self.parent[g] = i
        self.group_of[op] = i
        self.space[i], self.device[i] = space, device_of(op)
        self.first[i] = min([i, *(self.first[g] for g in s)])
        self.last[i] = i
        preds = self.op_preds(op).union(*(self.preds[g] for g in s))
        self.preds[i] = {n for n in self.norm(preds) if n != i}


def fusion_groups(block: Block, eligible: Callable[[Operation], bool]) -> list[FusionGroup]:
    """Partition the fusible, `eligible` ops of `block` into fusion groups (block order).

    Greedy in block order: an op joins the groups of its fusible producers (same device,
    broadcast-compatible spaces) unless that closes a cycle through another op or group; else
    a group that already reads one of its operands over the same space (horizontal fusion);
    else it starts a group.
    """
    gs = _Groups({op: i for i, op in enumerate(block.ops)})
    readers: dict[SSAValue, list[int]] = {}  # value -> fusible ops (group ids) that read it
    for op in block.ops:
        if not (isinstance(op, FUSIBLE) and eligible(op)):
            continue
        dev, shp = device_of(op), shape_of(op.results[0].type)
        producers = {n for n in (gs.node(v) for v in op.operands) if isinstance(n, int)}
        cands = [g for g in producers if gs.device[g] == dev and _fits(gs.space[g], shp)]
        preds = gs.op_preds(op)
        chosen: set[int] = set()
        for s in (set(cands), *({g} for g in cands)):
            if s and not gs.closes_cycle(s, preds):
                chosen = s
                break
        if not chosen:
            chosen = _sibling(op, shp, dev, preds, readers, gs)
        for v in op.operands:
            readers.setdefault(v, []).append(gs.index[op])
        space = broadcast_shapes(shp, *(gs.space[g] for g in chosen))
        assert space is not None
        gs.add(op, chosen, space)
    return _collect(block, gs.group_of, gs)


def _fits(space: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    return broadcast_shapes(space, shape) is not None


def _sibling(
    op: Operation,
    shp: tuple[int, ...],
    dev: str | None,
    preds: set[Any],
    readers: dict[SSAValue, list[int]],
    gs: _Groups,
) -> set[int]:
    """Horizontal fusion: a group over the same space and device that already reads one of
    `op`'s operands, when joining it closes no cycle (so the operand is loaded once)."""
    for v in op.operands:
        for g in gs.norm(readers.get(v, ())):
            if gs.space[g] == shp and gs.device[g] == dev and not gs.closes_cycle({g}, preds):
                return {g}
    return set()


def _collect(block: Block, group_of: dict[Operation, int], gs: _Groups) -> list[FusionGroup]:
    """Turn the union-find into FusionGroups with their inputs, outputs and splats."""
    by_root: dict[int, FusionGroup] = {}
    for op in block.ops:
        if op in group_of:
            g = gs.find(group_of[op])
            grp = by_root.setdefault(g, FusionGroup([], gs.space[g], gs.device[g]))
            grp.ops.append(op)
    for grp in by_root.values():
        members = set(grp.ops)
        for op in grp.ops:
            for v in op.operands:
                if v.owner in members or v in grp.inputs or v in grp.splats:
                    continue
                splat = splat_value(v.owner) if isinstance(v.owner, Operation) else None
                if splat is None:
                    grp.inputs.append(v)
                else:
                    grp.splats[v] = splat
            for r in op.results:
                if any(_user(u.operation, block) not in members for u in r.uses):
                    grp.outputs.append(r)
    return list(by_root.values())


def _user(op: Operation, block: Block) -> Operation:
    """The op of `block` that contains `op` (a use inside a branch arm is the branch's)."""
    while op.parent_block() is not block and op.parent_op() is not None:
        op = op.parent_op()  # type: ignore[assignment]
    return op


# -- source emission --------------------------------------------------------------------------

EXACT_IN_F32 = frozenset({"neg", "abs", "relu", "max", "min", "where", "broadcast"})
"""Ops whose f32 result of f16/bf16 operands is already representable: no rounding step."""


def row_major_strides(shape: Sequence[int]) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def broadcast_index(
    shape: tuple[int, ...], space: tuple[int, ...]
) -> tuple[list[str], list[int]] | None:
    """How a value of `shape` broadcast over an iteration `space` is indexed at the point with
    coordinates `i0, i1, ...`: None when it covers the whole space (its index is the linear
    point), else the index terms (`i1 * 8`, ...) and the dims along which it is broadcast."""
    padded = (1,) * (len(space) - len(shape)) + shape
    if padded == space:
        return None
    strides = row_major_strides(padded)
    terms, broadcast = [], []
    for d, (p, s) in enumerate(zip(padded, space, strict=True)):
        if s == 1:
            continue
        if p == s:
            terms.append(f"i{d}" if strides[d] == 1 else f"i{d} * {strides[d]}")
        else:
            broadcast.append(d)
    return terms, broadcast


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
        ct = compute_type(dtype_name(op.operands[-1].type))
        fmt = {
            "ct": ct,
            "sqrt": "tl.sqrt_rn" if ct == "tl.float32" else "tl.sqrt",
            "div": "tl.div_rn" if ct == "tl.float32" else "_div",
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


def emit_group(em: Any, group: FusionGroup) -> Any:
    """Drive an emitter (Triton here, C in `lowering.cpu.codegen`) over `group`: load the
    inputs, materialize the splats, one line per op, store the outputs. Returns `em`."""
    for j, v in enumerate(group.inputs):
        em.load(j, v)
    for v, value in group.splats.items():
        em.splat(v, value)
    for op in group.ops:
        em.op(op)
    for j, v in enumerate(group.outputs):
        em.store(j, v)
    return em


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
        *(["import os", ""] if bf16 else []),
        "import triton",
        "import triton.language as tl",
        *(
            ["", 'INTERPRET = tl.constexpr(os.environ.get("TRITON_INTERPRET") == "1")']
            if bf16
            else []
        ),
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
