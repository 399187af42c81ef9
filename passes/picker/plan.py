"""`compile_plan`: rank every decision point of a module and place it across devices.

For each kernel-bearing op (in program order): enumerate candidates on every (backend, device)
of the topology (only the pinned device for an op carrying `fuel.pin`, only the default
device when cost placement is off), filter, price (Layer 1 on the device's rates, the Judge's
measurement where present). Then a carry-forward placement DP chooses one device per op:

    best[n][d] = c(n, d) + sum over inputs of
                 (fixed input on device e: transfer(e -> d)) or
                 (producer p: min over d' of best[p][d'] + transfer(d' -> d))

with graph inputs on the default device and graph outputs priced back to it (exit pricing).
This fixes greedy placement's two biases: a segment whose combined win beats one crossing
migrates, and a fast op whose output must come back is charged for the trip. Backtracking
follows the first consumer of a fan-out (exact for trees; diamonds are a known heuristic).
Weights and constants are free-floating: uploaded once at load, never priced per run.

Finally each op's candidates on its chosen device get inbound transfer costs, are ranked, and
keep a per-device frontier. `ExecutionPlan` is the result; the picker passes write it into IR.

Planning with the process-wide table (no `table` option) first loads the kernels of every
backend the topology's devices run (`topology_kernels`: the cuda Triton kernels on first use);
a backend that cannot load leaves its devices without candidates and a line in `plan.notes`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from fuel_dialect.attrs import KERNEL_ATTR, DeviceAttr, KernelRefAttr
from fuel_dialect.base import KernelOp
from fuel_dialect.dispatch import PIN_ATTR, CopyOp
from fuel_dialect.dtypes import dtype_name
from fuel_dialect.ops_movement import ConstantOp, ReshapeOp, WeightOp
from fuel_dialect.shapes import cost_shape, cost_shapes
from passes.environment import bindings_generation, bindings_or_default
from passes.picker.ranker import (
    KEEP_PER_DEVICE,
    AlternativeSet,
    Candidate,
    FilterContext,
    FilterRejected,
    JudgeOracle,
    PrecisionRequirement,
    apply_filter_chain,
    apply_inbound_transfer_costs,
    compute_static_costs,
    default_chain,
    enumerate_candidates,
)
from runtime.binding_table import BindingTableError, KernelBindingTable
from runtime.cost import dtype_bytes, layer1_cost
from runtime.judge import size_class
from runtime.module import entry_function
from runtime.topology import SystemTopology


class PlanError(Exception):
    """A decision point with no admissible candidate, named by op and location."""


@dataclass(frozen=True)
class PlanOptions:
    """Knobs of `compile_plan` (all optional)."""

    topology: SystemTopology | None = None
    """Devices to plan across (default: the CPU only)."""
    precision: PrecisionRequirement = PrecisionRequirement()
    """Hard precision floor for every decision point."""
    judge: JudgeOracle | None = None
    """Measured latencies that replace Layer-1 estimates."""
    default_device: str = "cpu"
    """Where graph inputs live and outputs must end up."""
    allow_cost_placement: bool = True
    """False keeps every un-pinned op on the default device."""
    keep_per_device: int = KEEP_PER_DEVICE
    table: KernelBindingTable | None = None
    hints: tuple[tuple[str, int], ...] = ()
    """Per dim symbol, the size its `?` dims are priced at (`--hint seq=128`); a symbol not
    named here is priced at `fuel_dialect.shapes.DIM_HINT`, every hint clamped to the
    symbol's range (`fuel_dialect.shapes.symbol_hints`)."""


@dataclass
class Decision:
    """One decision point's outcome."""

    op: Operation
    device: str
    alternatives: AlternativeSet  # on `device`, ranked, frontier-retained; [0] is the winner
    considered: list[Candidate] = field(default_factory=list)  # every device, for explain
    node_cost: dict[str, float] = field(default_factory=dict)  # best compute ns per device

    @property
    def winner(self) -> Candidate:
        return self.alternatives.winner()


@dataclass
class ExecutionPlan:
    order: list[Operation]
    decisions: dict[Operation, Decision]
    residency: dict[SSAValue, str | None]
    generation: int
    total_ns: float = 0.0
    notes: list[str] = field(default_factory=list)
    """Why some devices of the topology had no candidates (a backend that could not load)."""


def value_bytes(v: SSAValue, shapes: Mapping[SSAValue, tuple[int, ...]] | None = None) -> int:
    """Bytes of a tensor value's buffer (at its cost shape: `shapes`, else `cost_shape`)."""
    shape = shapes.get(v) if shapes else None
    return math.prod(shape or cost_shape(v.type)) * dtype_bytes(dtype_name(v.type))


def _operand_shapes(
    op: Operation, shapes: Mapping[SSAValue, tuple[int, ...]]
) -> tuple[list[tuple[int, ...]], list[str]]:
    vals = [*op.operands, *op.results]
    return [shapes.get(v) or cost_shape(v.type) for v in vals], [dtype_name(v.type) for v in vals]


def _size_class(op: str, shapes: list[tuple[int, ...]]) -> int:
    return size_class(op, shapes)


def topology_kernels(topo: SystemTopology) -> dict[str, str]:
    """Load the kernels of every backend `topo`'s devices run into the process-wide table (the
    cuda backend's on first use); returns `{backend: why}` for those that cannot load."""
    return bindings_or_default(None, topology_backends(topo))[1]


def topology_backends(topo: SystemTopology) -> list[str]:
    """Every backend a device of `topo` runs (repeats kept; the loader drops them)."""
    return [b for d in topo.devices for b in d.backends]


def backend_notes(topo: SystemTopology, unavailable: Mapping[str, str]) -> list[str]:
    """One line per unavailable backend, naming the devices left without its kernels."""
    out = []
    for backend, why in unavailable.items():
        names = ", ".join(d.name for d in topo.devices_for_backend(backend))
        out.append(f"{names}: {why}")
    return out


def _plan_table(
    options: PlanOptions, topo: SystemTopology
) -> tuple[KernelBindingTable, dict[str, str]]:
    """The table to plan with (an explicit one as is) and the backends that could not load."""
    return bindings_or_default(options.table, topology_backends(topo))


@dataclass
class _Planner:
    topo: SystemTopology
    table: KernelBindingTable
    opts: PlanOptions
    unavailable: Mapping[str, str] = field(default_factory=dict)
    drafts: dict[Operation, list[Candidate]] = field(default_factory=dict)
    rejected: dict[Operation, list[Candidate]] = field(default_factory=dict)
    sizes: dict[Operation, int] = field(default_factory=dict)
    shapes: dict[SSAValue, tuple[int, ...]] = field(default_factory=dict)
    """Each value's shape with its dim symbols at their hints (empty: static shapes)."""

    def nbytes(self, v: SSAValue) -> int:
        return value_bytes(v, self.shapes)

    def placements(self, op: Operation) -> list[tuple[str, str]]:
        pin = op.attributes.get(PIN_ATTR)
        if isinstance(pin, DeviceAttr):
            devices = [self.topo.device(pin.data)]
        elif not self.opts.allow_cost_placement:
            devices = [self.topo.device(self.opts.default_device)]
        else:  # decision device first, so stable sorting breaks ties toward locality
            devices = sorted(self.topo.devices, key=lambda d: d.name != self.opts.default_device)
        return [(b, d.name) for d in devices for b in d.backends]

    def rates(self, device: str) -> tuple[float, float]:
        d = self.topo.device(device)
        return d.flops_per_ns, d.bytes_per_ns

    def draft(self, op: Operation) -> None:
        assert isinstance(op, KernelOp)
        dtypes, params = op.kernel_dtypes(), op.kernel_params()
        cands = enumerate_candidates(op.KERNEL_OP, dtypes, self.placements(op), self.table)
        if not cands:
            pin = op.attributes.get(PIN_ATTR)
            if isinstance(pin, DeviceAttr):
                why = [
                    self.unavailable[b]
                    for b in self.topo.device(pin.data).backends
                    if b in self.unavailable
                ]
                if why:
                    raise PlanError(f"{_where(op)} is pinned to {pin.data}, but {'; '.join(why)}")
            backend = self.topo.device(self.opts.default_device).backends[0]
            try:
                self.table.lookup_with_caps(op.KERNEL_OP, dtypes, backend)
            except BindingTableError as e:
                raise PlanError(f"{_where(op)}: {e}") from None
            raise PlanError(f"{_where(op)}: no candidate on any device of the topology")
        ctx = FilterContext(op.KERNEL_OP, dtypes, tag=_where(op))
        try:
            alive, rejected = apply_filter_chain(cands, ctx, default_chain(self.opts.precision))
        except FilterRejected as e:
            raise PlanError(str(e)) from None
        shapes, all_dtypes = _operand_shapes(op, self.shapes)
        sc = _size_class(op.KERNEL_OP, shapes)
        self.sizes[op] = sc

        def default_cost(s, d, p):  # noqa: ANN001, ANN202
            return layer1_cost(op.KERNEL_OP, s, d, p)

        costed = compute_static_costs(
            alive,
            op.KERNEL_OP,
            shapes,
            all_dtypes,
            params,
            self.rates,
            default_cost,
            self.opts.judge,
            sc,
        )
        # An infinite price is a kernel declaring these shapes infeasible (e.g. flash decoding
        # for a prefill): never a candidate, and never silently the only one.
        feasible = [c for c in costed if math.isfinite(c.compute_ns)]
        if not feasible:
            raise PlanError(f"{_where(op)}: every candidate prices these shapes as infeasible")
        self.drafts[op] = feasible
        infeasible = [
            replace(c, verdict="rejected:infeasible")
            for c in costed
            if not math.isfinite(c.compute_ns)
        ]
        self.rejected[op] = rejected + infeasible


def is_decision_point(op: Operation) -> bool:
    """Kernel-bearing ops; reshapes are views the executor makes without a kernel."""
    return isinstance(op, KernelOp) and not isinstance(op, ReshapeOp)


def _where(op: Operation) -> str:
    return f"'{op.name}'"


def compile_plan(
    module: ModuleOp, options: PlanOptions = PlanOptions(), function: func.FuncOp | None = None
) -> ExecutionPlan:
    """Rank and place every decision point of `function` (default: the entry function)."""
    topo = options.topology or SystemTopology.cpu_only()
    table, unavailable = _plan_table(options, topo)
    fn = function if function is not None else entry_function(module)
    p = _Planner(topo, table, options, unavailable)
    p.shapes = cost_shapes(fn, dict(options.hints))
    order = [op for op in fn.body.block.ops]
    for op in order:
        if is_decision_point(op):
            p.draft(op)
    devices = _place(p, fn, order)
    plan = _finish(p, fn, order, devices)
    plan.notes = backend_notes(topo, unavailable)
    return plan


def _node_costs(cands: list[Candidate]) -> dict[str, float]:
    out: dict[str, float] = {}
    for c in cands:
        out[c.device] = min(out.get(c.device, math.inf), c.compute_ns)
    return out


def _source(v: SSAValue, alias: Mapping[SSAValue, SSAValue]) -> SSAValue:
    while v in alias:
        v = alias[v]
    return v


def _place(p: _Planner, fn: func.FuncOp, order: list[Operation]) -> dict[Operation, str]:
    """The carry-forward DP: forward pass computes best[n][d], backward pass commits."""
    default = p.opts.default_device
    est = p.topo.estimate_transfer_ns
    fixed: dict[SSAValue, str | None] = {a: default for a in fn.body.block.args}
    alias: dict[SSAValue, SSAValue] = {}  # reshape views pass residency through
    producer: dict[SSAValue, Operation] = {}
    best: dict[Operation, dict[str, float]] = {}
    back: dict[Operation, dict[str, list[tuple[Operation, str]]]] = {}
    for op in order:
        if isinstance(op, ReshapeOp):
            alias[op.result] = op.input
        elif isinstance(op, CopyOp):
            fixed[op.result] = op.target.data
        elif isinstance(op, KernelOp):
            costs = _node_costs(p.drafts[op])
            best[op], back[op] = {}, {}
            for d, c in costs.items():
                total, ptrs = c, []
                for v in op.operands:
                    src, nbytes = _source(v, alias), p.nbytes(v)
                    if src in producer:
                        prod = producer[src]
                        dp, tp = min((best[prod][e] + est(e, d, nbytes), e) for e in best[prod])
                        total += dp
                        ptrs.append((prod, tp))
                    elif fixed.get(src) is not None:
                        total += est(fixed[src], d, nbytes)  # type: ignore[arg-type]
                best[op][d], back[op][d] = total, ptrs
            for r in op.results:
                producer[r] = op
        else:
            for r in op.results:
                fixed[r] = None  # weights/constants: free-floating
    chosen: dict[Operation, str] = {}
    ret = order[-1]
    exits = {producer[_source(v, alias)] for v in ret.operands if _source(v, alias) in producer}
    for op in reversed(order):
        if op not in best or op in chosen:
            continue
        if op in exits:
            nbytes = sum(p.nbytes(r) for r in op.results)
            _, d = min(
                (b + p.topo.estimate_transfer_ns(d, default, nbytes), d)
                for d, b in best[op].items()
            )
        else:
            _, d = min((b, d) for d, b in best[op].items())
        _commit(op, d, back, chosen)
    return chosen


def _commit(op: Operation, device: str, back: dict, chosen: dict[Operation, str]) -> None:
    """Commit `op` at `device` and walk back-pointers (iteratively: chains can be long)."""
    stack = [(op, device)]
    while stack:
        node, d = stack.pop()
        if node in chosen:
            continue
        chosen[node] = d
        stack.extend(back[node][d])


def _finish(
    p: _Planner, fn: func.FuncOp, order: list[Operation], devices: dict[Operation, str]
) -> ExecutionPlan:
    residency: dict[SSAValue, str | None] = {a: p.opts.default_device for a in fn.body.block.args}
    decisions: dict[Operation, Decision] = {}
    total = 0.0
    for op in order:
        if isinstance(op, ReshapeOp):
            residency[op.result] = residency.get(op.input)
        elif isinstance(op, CopyOp):
            residency[op.result] = op.target.data
        elif isinstance(op, KernelOp):
            inputs = [(residency.get(v), float(p.nbytes(v))) for v in op.operands]
            considered = apply_inbound_transfer_costs(p.drafts[op], inputs, p.topo)
            dev = devices[op]
            alts = AlternativeSet(
                [c for c in considered if c.device == dev], p.rejected[op], p.sizes[op]
            )
            alts.rank().retain_per_device_frontier(p.opts.keep_per_device)
            considered = sorted(considered, key=lambda c: c.cost_vector().rank_key())
            winner = alts.winner()
            considered = [
                c if c.device == dev else replace(c, verdict="other-device") for c in considered
            ]
            decisions[op] = Decision(op, dev, alts, considered, _node_costs(p.drafts[op]))
            total += winner.time_ns
            for r in op.results:
                residency[r] = dev
        else:
            for r in op.results:
                residency[r] = None
    ret = order[-1]
    for v in ret.operands:  # exit: outputs return to the default device
        src = residency.get(v)
        if src is not None:
            total += p.topo.estimate_transfer_ns(src, p.opts.default_device, p.nbytes(v))
    return ExecutionPlan(order, decisions, residency, bindings_generation(), total)


def ranked_at(
    op: Operation, shapes: Mapping[SSAValue, tuple[int, ...]], options: PlanOptions = PlanOptions()
) -> list[Candidate]:
    """`op`'s feasible candidates on every device, priced with its values at `shapes` (e.g. a
    dim symbol at another size than its hint) as if alone: computed inputs moved from the
    default device and results back to it (transfers counted as inbound), best first (the
    ranker's order). Raises PlanError if none."""
    topo = options.topology or SystemTopology.cpu_only()
    table, unavailable = _plan_table(options, topo)
    p = _Planner(topo, table, options, unavailable, shapes=dict(shapes))
    p.draft(op)
    inputs = [
        (
            None if isinstance(v.owner, WeightOp | ConstantOp) else options.default_device,
            p.nbytes(v),
        )
        for v in op.operands
    ]
    costed = apply_inbound_transfer_costs(p.drafts[op], [(d, float(b)) for d, b in inputs], topo)
    out = sum(p.nbytes(r) for r in op.results)
    back = [
        replace(
            c,
            inbound_transfer_ns=c.inbound_transfer_ns
            + topo.estimate_transfer_ns(c.device, options.default_device, out),
        )
        for c in costed
    ]
    return AlternativeSet(back, [], p.sizes[op]).rank().candidates


def price_op(op: Operation, options: PlanOptions = PlanOptions()) -> dict[str, float]:
    """Best compute time (ns) of one decision point per device: the Judge's figure where
    measured, Layer 1 otherwise, over the admissible candidates. Raises PlanError if none."""
    topo = options.topology or SystemTopology.cpu_only()
    table, unavailable = _plan_table(options, topo)
    p = _Planner(topo, table, options, unavailable)
    p.draft(op)
    cands = p.drafts[op]
    stamp = op.attributes.get(KERNEL_ATTR)
    if isinstance(stamp, KernelRefAttr):  # a stamped op runs exactly its stamped kernel
        cands = [
            c
            for c in cands
            if c.backend == stamp.backend.data and c.kernel_source == stamp.kernel_source.data
        ]
    return _node_costs(cands)
