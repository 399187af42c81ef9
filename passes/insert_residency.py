"""`fuel-insert-residency`: evict long-idle tensors to the host so each device fits its budget."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from fuel_dialect.dispatch import CopyOp
from passes.picker.residency import (
    DeviceResidency,
    Eviction,
    EvictionWindow,
    ResidencyError,
    ResidencyPlanner,
    ResidencyReport,
    format_bytes,
    op_label,
    parse_budgets,
    transfer_ns,
)
from runtime.topology import TopologyError, TransferEstimator
from runtime.topology_file import load_file

RESIDENCY_ATTR = "fuel.residency"
"""Discardable attribute on the copies this pass inserts: `"evict"` or `"reload"`."""
DEFAULT_ROUNDS = 16


@dataclass(frozen=True)
class InsertResidencyPass(ModulePass):
    """While a device's planned peak (`picker.residency.ResidencyPlanner`) exceeds its budget,
    take the best candidate live at the peak (bytes x idle gap), copy it to the host after its
    last read before the gap (`fuel.copy ... {fuel.residency = "evict"}`) and back right before
    the next read (`{fuel.residency = "reload"}`), rewiring every later read to the reload; then
    re-plan. One eviction per round.

    Pre: fuel IR in schedule order, placed or not. Post: every budgeted device fits, or the pass
    fails with the `ResidencyReport` as its message (the budget is unreachable: the round limit
    ran out, or nothing live at the peak can be evicted).
    """

    name = "fuel-insert-residency"

    budget: str = ""
    """Per-device budgets, e.g. `cuda:0=2GiB,cpu=8GiB`; a bare size (`64KiB`) is `device`'s."""
    rounds: int = DEFAULT_ROUNDS
    """Most evictions per device and function."""
    device: str = "cpu"
    """Where unplaced ops and graph inputs live, and whose budget a bare size sets."""
    host: str = "cpu"
    """Where evicted tensors go."""
    topology: str = ""
    """Topology file pricing the transfers; empty: the PCIe class default."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        try:
            budgets = parse_budgets(self.budget, self.device)
            topo = load_file(self.topology) if self.topology else None
            report = insert_residency(
                op,
                budgets,
                rounds=self.rounds,
                default_device=self.device,
                host=self.host,
                topology=topo,
            )
        except (ResidencyError, TopologyError) as e:
            raise PassFailedException(str(e)) from None
        if not report.fits:
            raise PassFailedException(str(report))


def insert_residency(
    module: ModuleOp,
    budgets: dict[str, int],
    *,
    rounds: int = DEFAULT_ROUNDS,
    default_device: str = "cpu",
    host: str = "cpu",
    topology: TransferEstimator | None = None,
) -> ResidencyReport:
    """Fit every function of `module` into `budgets` (bytes per device); returns the report
    (check `report.fits`: an unreachable budget does not raise)."""
    if rounds < 0:
        raise ResidencyError(f"rounds must be >= 0, got {rounds}")
    report = ResidencyReport()
    for fn in (f for f in module.ops if isinstance(f, func.FuncOp)):
        planner = ResidencyPlanner(fn, default_device, host)
        devices = sorted({*planner.devices, *budgets}, key=lambda d: (d == host, d))
        before = {d: planner.peak(d) for d in devices}  # the host grows as devices evict
        for device in devices:
            entry = DeviceResidency(
                fn.sym_name.data, device, budgets.get(device), before[device], before[device]
            )
            _fit(fn, entry, rounds, default_device, host, topology)
            report.devices.append(entry)
    return report


def _fit(
    fn: func.FuncOp,
    entry: DeviceResidency,
    rounds: int,
    default_device: str,
    host: str,
    topology: TransferEstimator | None,
) -> None:
    planner = ResidencyPlanner(fn, default_device, host)
    while entry.budget is not None and planner.peak(entry.device).bytes > entry.budget:
        if entry.rounds == rounds:
            entry.reason = f"the round limit ({rounds}) ran out"
            break
        found = planner.candidates(entry.device)
        if not found:
            entry.reason = _stuck(planner, entry.device)
            break
        entry.evictions.append(_evict(planner, found[0], host, topology))
        entry.rounds += 1
        planner = ResidencyPlanner(fn, default_device, host)
    entry.peak_after = planner.peak(entry.device)


def _stuck(planner: ResidencyPlanner, device: str) -> str:
    """Why nothing at `device`'s peak can be evicted."""
    if device == planner.host:
        return f"'{device}' is the host: nowhere to evict to"
    peak = planner.peak(device)
    live = planner.live_at(device, peak.at)
    held = sum(r.bytes for r in live if r.resident)
    weights = f"; {format_bytes(held)} of it resident weights/constants" if held else ""
    return f"nothing live at {peak.op_name} is idle across it{weights}"


def _evict(
    planner: ResidencyPlanner, c: EvictionWindow, host: str, topology: TransferEstimator | None
) -> Eviction:
    """Insert the evict/reload pair for `c` and rewire the reads after the gap to the reload."""
    r, ops = c.range, planner.ops
    value = next(m for i, m in zip(r.uses, r.readers, strict=True) if i >= c.before)
    later = [u for u in value.uses if _position(planner, u.operation) >= c.before]
    evict = CopyOp(value, host)
    reload = CopyOp(evict.result, r.device)
    evict.attributes[RESIDENCY_ATTR] = StringAttr("evict")
    reload.attributes[RESIDENCY_ATTR] = StringAttr("reload")
    block = planner.fn.body.block
    at = InsertPoint.at_start(block) if c.after < 0 else InsertPoint.after(ops[c.after])
    Rewriter.insert_op(evict, at)
    Rewriter.insert_op(reload, InsertPoint.before(ops[c.before]))
    for u in later:
        u.operation.operands[u.index] = reload.result
    after = "the function entry" if c.after < 0 else op_label(ops[c.after], c.after)
    return Eviction(
        r.name,
        r.device,
        host,
        r.bytes,
        after,
        op_label(ops[c.before], c.before),
        transfer_ns(topology, r.device, host, r.bytes),
        transfer_ns(topology, host, r.device, r.bytes),
    )


def _position(planner: ResidencyPlanner, op: Operation) -> int:
    """Schedule position of the top-level op that holds `op` (itself, or a branch around it)."""
    cur: Operation | None = op
    while cur is not None and cur not in planner.position:
        cur = cur.parent_op()
    if cur is None:
        raise ResidencyError(f"'{op.name}' is not inside @{planner.fn.sym_name.data}")
    return planner.position[cur]
