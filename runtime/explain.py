"""`fuel explain`: why the planner put each op where it did, as text or as one HTML page.

    fuel explain MODULE.mlir [--topology FILE] [--judge PATH|none] [--precision SPEC]
                 [--html OUT.html] [--op N]

Both renderers read an `ExecutionPlan` (runtime/plan.py) and show, per decision point in
program order, its signature, device, every candidate the ranker saw (winner, kept, pruned,
other-device, rejected) with Layer-1 / Judge / transfer times, and one "why" line derived
from the per-device compute costs (`Decision.node_cost`) and the transfers the topology
prices. The why line compares the chosen device with the inputs' device (or the best other
device) locally; when the placement DP chose against that local comparison (a segment
start, exit pricing) the line says so instead of inventing a reason.

`explain_text` is the terminal view (columns aligned across the whole module, a few lines
per op); `explain_html` is a self-contained page (inline CSS/JS, no network) with the graph
as a layered SVG (devices coloured, cross-device edges dashed red with their transfer cost)
and a `<details>` section per op. The planner's options come from the same flags as the
picker passes (passes/picker_support.py). Every user error is one line on stderr, exit 1.
"""

from __future__ import annotations

import argparse
import html
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from xdsl.ir import Operation, SSAValue

from fuel_dialect.attrs import DeviceAttr
from fuel_dialect.dispatch import PIN_ATTR, CopyOp
from fuel_dialect.dtypes import dtype_name, shape_of
from fuel_dialect.ops_movement import ReshapeOp
from runtime.plan import Decision, ExecutionPlan, PlanOptions, value_bytes
from runtime.ranker import Candidate, PrecisionRequirement
from runtime.topology import SystemTopology

# -- units ---------------------------------------------------------------------------------

_TIME_UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"))
_BYTE_UNITS = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))
_FLOP_UNITS = ((1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP"), (1e3, "kFLOP"))


def _scaled(x: float, units: tuple[tuple[float, str], ...], base: str) -> str:
    for scale, name in units:
        if abs(x) >= scale:
            v = x / scale
            return f"{v:.1f} {name}" if abs(v) < 100 else f"{v:.0f} {name}"
    return f"{x:.0f} {base}"


def fmt_ns(ns: float) -> str:
    """Nanoseconds in human units: `980 ns`, `1.2 µs`, `45.0 ms`; `0` for nothing."""
    if ns == 0:
        return "0"
    return "∞" if math.isinf(ns) else _scaled(ns, _TIME_UNITS, "ns")


def fmt_bytes(n: float) -> str:
    """Bytes in binary units: `512 B`, `24.0 KiB`, `1.5 MiB`."""
    return _scaled(n, _BYTE_UNITS, "B")


def _fmt_flops(n: float) -> str:
    return _scaled(n, _FLOP_UNITS, "FLOP")


# -- the graph around each decision --------------------------------------------------------


@dataclass
class _Graph:
    """Producers, consumers and exits of the decision points (reshapes and copies see through)."""

    plan: ExecutionPlan
    index: dict[Operation, int] = field(default_factory=dict)
    producer: dict[SSAValue, Operation] = field(default_factory=dict)
    consumers: dict[Operation, list[Operation]] = field(default_factory=dict)
    exits: set[Operation] = field(default_factory=set)
    alias: dict[SSAValue, SSAValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for op in self.plan.order:
            if isinstance(op, ReshapeOp | CopyOp):
                self.alias[op.results[0]] = op.operands[0]
            elif op in self.plan.decisions:
                self.index[op] = len(self.index)
                self.consumers[op] = []
                for v in op.operands:
                    p = self.producer.get(self.source(v))
                    if p is not None and op not in self.consumers[p]:
                        self.consumers[p].append(op)
                self.producer.update({r: op for r in op.results})
        if self.plan.order:
            ret = self.plan.order[-1]
            self.exits = {p for v in ret.operands if (p := self.producer.get(self.source(v)))}

    def source(self, v: SSAValue) -> SSAValue:
        while v in self.alias:
            v = self.alias[v]
        return v

    def decision(self, i: int) -> Decision:
        return self.plan.decisions[list(self.index)[i]]


def _value_names(plan: ExecutionPlan) -> dict[SSAValue, str]:
    """`%name` per value like the printer: the name hint when free, else the next number."""
    names: dict[SSAValue, str] = {}
    used: set[str] = set()
    counter = 0
    values = [a for op in plan.order[:1] for a in _block_args(op)]
    values += [r for op in plan.order for r in op.results]
    for v in values:
        hint = v.name_hint
        if not hint or hint in used:
            while str(counter) in used:
                counter += 1
            hint = str(counter)
        used.add(hint)
        names[v] = "%" + hint
    return names


def _block_args(op: Operation) -> Sequence[SSAValue]:
    block = op.parent_block()
    return block.args if block is not None else ()


def _signature(op: Operation) -> str:
    """`(1x16x64, 64x64 -> 1x16x64, f32)`; per-value dtypes when they differ."""
    types = [v.type for v in (*op.operands, *op.results)]
    dtypes = {dtype_name(t) for t in types}

    def one(t: Any) -> str:
        dims = "x".join(str(d) for d in shape_of(t)) or "scalar"
        return dims if len(dtypes) == 1 else f"{dims}x{dtype_name(t)}"

    ins = ", ".join(one(v.type) for v in op.operands)
    outs = ", ".join(one(r.type) for r in op.results)
    tail = f", {dtypes.pop()}" if len(dtypes) == 1 else ""
    return f"({ins} -> {outs}{tail})"


# -- verdicts and rows ---------------------------------------------------------------------

_VERDICT_ORDER = {"winner": 0, "kept": 1, "pruned:frontier": 2, "other-device": 3}


def ranked_candidates(d: Decision) -> list[tuple[Candidate, str]]:
    """Every candidate with its verdict: winner, kept, pruned, other-device, then rejected."""
    kept = d.alternatives.candidates
    out: list[tuple[Candidate, str]] = []
    for c in d.considered:
        if c.device != d.device:
            out.append((c, "other-device"))
            continue
        i = next((j for j, k in enumerate(kept)
                  if k.entry is c.entry and k.backend == c.backend), None)  # fmt: skip
        out.append((c, "winner" if i == 0 else "kept" if i is not None else "pruned:frontier"))
    out.sort(key=lambda cv: (_VERDICT_ORDER[cv[1]], cv[0].time_ns))
    return out + [(c, c.verdict) for c in d.alternatives.rejected]


def _layer1(c: Candidate) -> str:
    work = [f for f, n in ((_fmt_flops, c.static_cost.flops), (fmt_bytes, c.static_cost.bytes_moved))
            if n for f in [f(n)]]  # fmt: skip
    return fmt_ns(c.static_ns) + (f" ({', '.join(work)})" if work else "")


def _row(c: Candidate, verdict: str) -> tuple[str, ...]:
    judge = "—" if c.judge_ns is None else fmt_ns(c.judge_ns)
    rejected = verdict.startswith("rejected")
    total = "—" if rejected else fmt_ns(c.time_ns)
    transfer = "—" if rejected else fmt_ns(c.inbound_transfer_ns)
    return (c.kernel_source or "?", c.backend, c.device, _layer1(c), judge, transfer, total,
            verdict)  # fmt: skip


COLUMNS = ("kernel", "backend", "device", "layer-1", "judge", "transfer", "total", "verdict")
_NUMERIC = {4, 5, 6}


# -- why ----------------------------------------------------------------------------------


@dataclass
class _Why:
    """Derives one honest sentence for a decision from its per-device costs and transfers."""

    graph: _Graph
    topo: SystemTopology
    options: PlanOptions

    def line(self, op: Operation) -> str:
        d = self.graph.plan.decisions[op]
        return f"{self.placement(op, d)}; {self.kernel(d)}"

    def best_on(self, d: Decision, device: str) -> Candidate:
        return min((c for c in d.considered if c.device == device), key=lambda c: c.time_ns)

    def exit_back(self, op: Operation, device: str) -> float:
        """The exit copy back to the default device if `op`'s output leaves the graph."""
        if op not in self.graph.exits:
            return 0.0
        nbytes = sum(value_bytes(r) for r in op.results)
        return self.topo.estimate_transfer_ns(device, self.options.default_device, nbytes)

    def input_device(self, op: Operation, dev: str) -> str | None:
        """The device other than `dev` holding most of `op`'s input bytes, if any."""
        by_dev: dict[str, int] = {}
        for v in op.operands:
            where = self.graph.plan.residency.get(v)
            if where is not None and where != dev:
                by_dev[where] = by_dev.get(where, 0) + value_bytes(v)
        return max(by_dev, key=lambda k: by_dev[k]) if by_dev else None

    def placement(self, op: Operation, d: Decision) -> str:
        dev, costs = d.device, d.node_cost
        pin = op.attributes.get(PIN_ATTR)
        if isinstance(pin, DeviceAttr):
            return f"pinned to {dev} by fuel.pin"
        if not self.options.allow_cost_placement:
            return f"on {dev}: cost placement is off"
        if len(costs) == 1:
            return self.only_device(op, d)
        src = self.input_device(op, dev)
        if d.winner.inbound_transfer_ns > 0 and src is not None:
            return self.moved(op, d, src)
        return self.stayed(op, d)

    def only_device(self, op: Operation, d: Decision) -> str:
        others = [x.name for x in self.topo.devices if x.name != d.device]
        if not others:
            return f"on {d.device}: the only device"
        kop = getattr(op, "KERNEL_OP", op.name)
        verb = "moved to" if d.winner.inbound_transfer_ns > 0 else "stays on"
        tail = (f", transfer {fmt_ns(d.winner.inbound_transfer_ns)}"
                if d.winner.inbound_transfer_ns > 0 else "")  # fmt: skip
        return f"{verb} {d.device}: no kernel for {kop} on {', '.join(others)}{tail}"

    def moved(self, op: Operation, d: Decision, src: str) -> str:
        dev, costs, w = d.device, d.node_cost, d.winner
        if src not in costs:
            kop = getattr(op, "KERNEL_OP", op.name)
            return f"moved to {dev}: no kernel for {kop} on {src}; transfer {fmt_ns(w.inbound_transfer_ns)}"
        stay = self.best_on(d, src)
        save = costs[src] - costs[dev]
        back = self.exit_back(op, dev) - self.exit_back(op, src)
        cost = w.inbound_transfer_ns - stay.inbound_transfer_ns + back
        parts = f"in {fmt_ns(w.inbound_transfer_ns)}, back {fmt_ns(back)}" if back > 0 else ""
        transfer = f"transfer {fmt_ns(cost)}" + (f" ({parts})" if parts else "")
        if save > cost:
            return (f"moved to {dev}: compute saves {fmt_ns(save)} ({src} {fmt_ns(costs[src])} "
                    f"vs {dev} {fmt_ns(costs[dev])}) > {transfer}")  # fmt: skip
        gain = f"saves only {fmt_ns(save)}" if save >= 0 else f"is {fmt_ns(-save)} slower"
        return f"moved to {dev}: compute here {gain} < {transfer}, but {self.downstream(op, dev)}"

    def downstream(self, op: Operation, dev: str) -> str:
        """What the placement DP saw beyond this op (it optimises whole chains, not one op)."""
        same = [c for c in self.graph.consumers[op]
                if self.graph.plan.decisions[c].device == dev]  # fmt: skip
        if same:
            n = len(same)
            return f"{n} consumer{'s' if n > 1 else ''} also run{'' if n > 1 else 's'} on {dev}"
        if op in self.graph.exits and dev == self.options.default_device:
            return f"its output must return to {dev} anyway"
        return "the placement DP chose it for the whole graph (fan-out heuristic)"

    def stayed(self, op: Operation, d: Decision) -> str:
        dev, costs = d.device, d.node_cost
        verb = "stays on" if self.graph.plan.residency and self.input_device(op, "") in (dev, None) else "runs on"
        alt = min((self.best_on(d, e) for e in costs if e != dev), key=lambda c: c.time_ns)
        e = alt.device
        if costs[e] >= costs[dev]:
            return (f"{verb} {dev}: fastest device ({e} would take {fmt_ns(costs[e])}"
                    f" + transfer {fmt_ns(alt.inbound_transfer_ns)})")  # fmt: skip
        save = costs[dev] - costs[e]
        back = self._back_cost(op, e, dev)
        cost = alt.inbound_transfer_ns + back
        detail = f"in {fmt_ns(alt.inbound_transfer_ns)}, back {fmt_ns(back)}"
        if save <= cost:
            return (f"{verb} {dev}: {e} would save {fmt_ns(save)} compute, but transfer "
                    f"{fmt_ns(cost)} ({detail}) would exceed it")  # fmt: skip
        return (f"{verb} {dev}: {e} would save {fmt_ns(save)} net of transfer {fmt_ns(cost)} "
                f"for this op alone, but the placement DP keeps it with its neighbours")

    def _back_cost(self, op: Operation, alt: str, dev: str) -> float:
        """Moving `op` alone to `alt` sends its output back to `dev` for consumers/exit there."""
        consumers_home = any(self.graph.plan.decisions[c].device == dev
                             for c in self.graph.consumers[op])  # fmt: skip
        exits_home = op in self.graph.exits and dev == self.options.default_device
        if not (consumers_home or exits_home):
            return 0.0
        nbytes = sum(value_bytes(r) for r in op.results)
        return self.topo.estimate_transfer_ns(alt, dev, nbytes)

    def kernel(self, d: Decision) -> str:
        w = d.winner
        measured = (f"judge {fmt_ns(w.judge_ns)} vs layer-1 {fmt_ns(w.static_ns)}"
                    if w.judge_ns is not None else f"layer-1 {fmt_ns(w.static_ns)}, no judge figure")  # fmt: skip
        mine = sorted((c for c in d.considered if c.device == d.device), key=lambda c: c.time_ns)
        if len(mine) <= 1:
            text = f"{w.kernel_source} is the only admissible kernel on {d.device} ({measured})"
        else:
            nxt = next(c for c in mine if c.entry is not w.entry or c.backend != w.backend)
            tie = " (tie on time; wins on precision/memory)" if nxt.time_ns == w.time_ns else ""
            text = (f"{w.kernel_source} fastest of {len(mine)} admissible on {d.device} ({measured}"
                    f"; next {nxt.kernel_source} {fmt_ns(nxt.compute_ns)}){tie}")  # fmt: skip
        filters = sorted({c.verdict.removeprefix("rejected:") for c in d.alternatives.rejected})
        if filters:
            text += f"; {len(d.alternatives.rejected)} rejected by {', '.join(filters)}"
        return text
