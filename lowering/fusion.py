"""Fusion groups, shared by the backends that generate code for them (C and Triton).

`fusion_groups` partitions a function body into maximal connected groups of elementwise,
broadcast and cast ops that can run as one kernel over one iteration space (the broadcast of
the members' shapes); ops that only share an input over the same space join one group too
(the input is loaded once). A group never closes a cycle through a non-member op, never mixes
devices, and writes out every member value read outside it (`outputs`); splat constants it
reads are inlined, every other external value is a kernel input. `emit_group` drives a
backend's emitter over a group, `broadcast_index` indexes a broadcast operand, `schedule`
orders the groups and the other ops, and `KernelSymbols` names one kernel per distinct source.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from fuel_dialect.attrs import DEVICE_ATTR, KERNEL_ATTR, KernelRefAttr
from fuel_dialect.branch import YieldOp
from fuel_dialect.dtypes import broadcast_shapes, shape_of
from fuel_dialect.ops_elementwise import BinaryOp, CastOp, GeluOp, UnaryOp, WhereOp
from fuel_dialect.ops_movement import BroadcastOp, ConstantOp
from fuel_dialect.ops_nn import ReduceOp
from runtime.constants import dense_array

FUSIBLE = (UnaryOp, BinaryOp, WhereOp, CastOp, BroadcastOp)
"""Op classes a generated kernel computes (every elementwise op fuel has, plus broadcast)."""


def op_key(op: Operation) -> str:
    """The op table key of a fusible op (`gelu_tanh` for the tanh form of gelu)."""
    if isinstance(op, GeluOp) and op.tanh is not None:
        return "gelu_tanh"
    return op.name.removeprefix("fuel.")


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
    arr = dense_array(op.value)
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
        stack = [
            n
            for n in self.norm(op_preds).union(*(self.norm(self.preds[g]) for g in s))
            if n not in s
        ]
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


def fusion_groups(
    block: Block,
    eligible: Callable[[Operation], bool],
    reductions: Callable[[Operation], bool] | None = None,
) -> list[FusionGroup]:
    """Partition the fusible, `eligible` ops of `block` into fusion groups (block order).

    Greedy in block order: an op joins the groups of its fusible producers (same device,
    broadcast-compatible spaces) unless that closes a cycle through another op or group; else
    a group that already reads one of its operands over the same space (horizontal fusion);
    else it starts a group. Reductions `reductions` accepts join too, over their input's
    space (a backend that computes row-wise groups: `lowering.cpu.codegen_rows`).
    """
    gs = _Groups({op: i for i, op in enumerate(block.ops)})
    readers: dict[SSAValue, list[int]] = {}  # value -> fusible ops (group ids) that read it
    for op in block.ops:
        reduce = reductions is not None and isinstance(op, ReduceOp) and reductions(op)
        if not (reduce or (isinstance(op, FUSIBLE) and eligible(op))):
            continue
        dev = device_of(op)
        shp = shape_of(op.operands[0].type if reduce else op.results[0].type)
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


BODY_STAMPS = ("c-vecmath",)
"""Kernel sources whose `#fuel.kernel` stamp a kernel body keeps on its ops: the generated code
depends on it (`lowering.cpu.codegen.uses_vecmath`)."""


def kernel_body(group: FusionGroup) -> Region:
    """The body a generated kernel symbol keeps (`fuel_dialect.kernel_body`): block arguments
    for `group.inputs`, clones of its splat constants and member ops (discardable attributes
    dropped: they say where the op ran, not what it computes; a stamp of `BODY_STAMPS` stays:
    it says what the op computes), `fuel.yield` of its outputs. `body_group` reads it back."""
    block = Block(arg_types=[v.type for v in group.inputs])
    mapping: dict[SSAValue, SSAValue] = dict(zip(group.inputs, block.args, strict=True))
    for v, arg in mapping.items():
        arg.name_hint = v.name_hint
    owners = [v.owner for v in group.splats]
    for op in (*owners, *group.ops):
        assert isinstance(op, Operation)
        clone = op.clone(mapping)
        clone.attributes.clear()
        stamp = op.attributes.get(KERNEL_ATTR)
        if isinstance(stamp, KernelRefAttr) and stamp.kernel_source.data in BODY_STAMPS:
            clone.attributes[KERNEL_ATTR] = stamp
        block.add_op(clone)
        mapping.update(zip(op.results, clone.results, strict=True))
    block.add_op(YieldOp(*(mapping[v] for v in group.outputs)))
    return Region(block)


def body_group(body: Region | None, space: Sequence[int]) -> FusionGroup:
    """The fusion group a kernel body (`kernel_body`) was built from: its splat constants
    (leading `fuel.constant`s) inlined, its block arguments the inputs, the yielded values
    the outputs. `ValueError` if `body` is missing or is not a body `kernel_body` builds."""
    if body is None or len(body.blocks) != 1:
        raise ValueError("the kernel has no body to generate its source from")
    block = body.block
    term = block.last_op
    if not isinstance(term, YieldOp):
        raise ValueError("the kernel body does not end with fuel.yield")
    group = FusionGroup([], tuple(space), None, list(block.args), list(term.values))
    for op in block.ops:
        if op is term:
            break
        if not group.ops and isinstance(op, ConstantOp):
            value = splat_value(op)
            if value is None:
                raise ValueError("a constant in the kernel body is not a finite splat")
            group.splats[op.result] = value
        elif isinstance(op, (*FUSIBLE, ReduceOp)):
            group.ops.append(op)
        else:
            raise ValueError(f"'{op.name}' cannot be part of a generated kernel")
    if not group.ops:
        raise ValueError("the kernel body computes nothing")
    return group


def schedule(block: Block, nodes: list[list[Operation]]) -> list[int]:
    """A topological order of `nodes` (each a group of ops run as one), nearest to the block
    order: Kahn's algorithm taking the ready node whose first op comes earliest."""
    node_of = {op: i for i, ops in enumerate(nodes) for op in ops}
    first = {op: i for i, op in enumerate(block.ops)}
    deps: list[set[int]] = [set() for _ in nodes]
    for i, ops in enumerate(nodes):
        for op in ops:
            for inner in op.walk():
                for v in inner.operands:
                    j = node_of.get(v.owner)  # type: ignore[arg-type]
                    if j is not None and j != i:
                        deps[i].add(j)
    users: list[list[int]] = [[] for _ in nodes]
    for i, ds in enumerate(deps):
        for j in ds:
            users[j].append(i)
    pending = [len(ds) for ds in deps]
    ready = [(first[ops[0]], i) for i, ops in enumerate(nodes) if not pending[i]]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            pending[u] -= 1
            if not pending[u]:
                heapq.heappush(ready, (first[nodes[u][0]], u))
    if len(order) != len(nodes):
        raise AssertionError("convert-fuel-to-triton: fusion groups form a cycle")
    return order


@dataclass
class KernelSymbols:
    """A module's generated kernel symbols, one per distinct kernel: a group whose source
    (named "kernel") matches an earlier group's reuses its symbol. `make(group, name)` builds
    the module-level kernel op; new ones go before the first function."""

    module: ModuleOp
    prefix: str
    source: Callable[[FusionGroup, str], str]
    make: Callable[[FusionGroup, str], Operation]
    taken: set[str]
    by_source: dict[str, str] = field(default_factory=dict)

    def symbol(self, group: FusionGroup) -> str:
        canonical = self.source(group, "kernel")
        if canonical in self.by_source:
            return self.by_source[canonical]
        n = len(self.taken)
        while f"{self.prefix}{n}" in self.taken:
            n += 1
        name = f"{self.prefix}{n}"
        self.taken.add(name)
        self.by_source[canonical] = name
        funcs = [op for op in self.module.ops if isinstance(op, func.FuncOp)]
        Rewriter.insert_op(self.make(group, name), InsertPoint.before(funcs[0]))
        return name
