"""Residency: per-device memory over a function's schedule, and where evictions would help.

`ResidencyPlanner` reads one function (op order = schedule order, as the executor runs it) and
gives every tensor a `LiveRange` on its device, every device its peak bytes and where the peak
occurs, and the eviction candidates at the peak ranked by bytes x idle gap.
`passes/insert_residency.py` acts on it; `ResidencyReport` says what was done and why.

The model mirrors the executor's memory plan:
* a buffer is live from its producer's position to its last consumer's, inclusive (the
  producer's outputs and the last consumer's inputs are live together); a result nobody reads
  dies at once; graph outputs live through the `func.return`;
* `fuel.reshape` is a view: it shares its input's storage, so the storage lives while any view
  of it is read; `fuel.copy` makes a new buffer on its target device;
* `fuel.weight` and `fuel.constant` are resident, as the executor keeps them: on the host for
  the whole run, and uploaded once to every other device whose kernels read them (a copy of one
  is an alias). They count at every position and are never evicted: a held upload frees
  nothing when copied away. Budget the device for them first;
* a graph input is counted on the default device from the entry to its last use (the executor
  leaves the caller's arrays uncounted: planning them is the conservative side);
* values read inside a `fuel.branch` arm count as read by the branch; an arm's own
  intermediates are not tracked (arms are small).

Devices: a value lives where its producer is placed (`fuel.device`, else `fuel.pin`), a copy's
result on the copy's target, a view with its source, a graph input on the default device;
anything else unplaced on the default device (`cpu` unless configured, as in the executor).

Not mirrored: the executor's best-fit buffer pool may hand a smaller value a larger free
buffer and count its full size, so with mixed tensor sizes the measured peak can exceed the
planned one by that slack; host buffers that an asynchronous copy reads are held to the end of
the run there (host budgets only).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from xdsl.dialects import func
from xdsl.ir import BlockArgument, Operation, SSAValue

from fuel_dialect.base import KernelOp
from fuel_dialect.dispatch import CopyOp, placed_device
from fuel_dialect.ops_movement import ConstantOp, ReshapeOp, WeightOp
from passes.picker.plan import value_bytes
from runtime.topology import DEVICE_NAME, TRANSFER_DEFAULTS, TransferEstimator, TransferPath

MAX_CANDIDATES = 32
"""Candidates kept per device, best first (the reference planner's cap)."""

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*")


class ResidencyError(ValueError):
    """A malformed budget or an unusable residency request; the message says what to write."""


def parse_size(text: str) -> int:
    """Bytes in `"64KiB"`, `"1.5GB"`, `"4096"` (B, kB/MB/GB/TB = 1000^n, KiB/MiB/GiB/TiB =
    1024^n; case-insensitive; fractions round down)."""
    m = _SIZE.fullmatch(text)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS:
        raise ResidencyError(
            f"bad memory size '{text}': write a number and a unit, e.g. 64KiB, 1.5GB, 4096 "
            f"(units: {', '.join(u for u in _UNITS if u)})"
        )
    return math.floor(float(m.group(1)) * _UNITS[unit])


def parse_budgets(text: str, default_device: str = "cpu") -> dict[str, int]:
    """Per-device budgets from `"cuda:0=2GiB,cpu=8GiB"`; a bare size (`"64KiB"`) budgets the
    default device; an empty string budgets nothing."""
    budgets: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        device, _, size = part.rpartition("=")
        device = device.strip() or default_device
        if not DEVICE_NAME.fullmatch(device):
            raise ResidencyError(
                f"bad device '{device}' in budget '{part}': write `cpu` or "
                "`<kind>:<ordinal>`, e.g. cuda:0=2GiB"
            )
        if device in budgets:
            raise ResidencyError(f"device '{device}' has two budgets in '{text}'")
        budgets[device] = parse_size(size)
    return budgets


def format_bytes(n: float) -> str:
    """`1536` -> `1.5 KiB`; `3000` -> `2.93 KiB (3000 B)`; exact bytes below 1 KiB."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            short = f"{n / size:.4g}"
            return f"{short} {unit}" + ("" if float(short) * size == n else f" ({int(n)} B)")
    return f"{int(n)} B"


def op_label(op: Operation, position: int) -> str:
    """`fuel.neg %c` when the op's result has a name, else `op 5 (fuel.add)`."""
    hint = op.results[0].name_hint if op.results else None
    return f"{op.name} %{hint}" if hint else f"op {position} ({op.name})"


def _first(pair: tuple[int, SSAValue]) -> int:
    return pair[0]


def _is_resident(v: SSAValue) -> bool:
    return isinstance(v.owner, WeightOp | ConstantOp)


@dataclass(frozen=True)
class LiveRange:
    """One buffer: the SSA value that owns it, its device and bytes, and the schedule positions
    where it is defined (`start`, -1 for a graph input) and read (`uses`, incl. via views)."""

    value: SSAValue
    name: str
    device: str
    bytes: int
    start: int
    end: int
    uses: tuple[int, ...]
    readers: tuple[SSAValue, ...]
    """The value or view read at each use position (parallel to `uses`)."""
    resident: bool = False
    """A weight or constant: held for the whole run, never an eviction candidate."""

    def live_at(self, i: int) -> bool:
        return max(self.start, 0) <= i <= self.end

    def gap_around(self, i: int) -> tuple[int, int] | None:
        """The idle gap (a, b) between consecutive touches that strictly contains `i`, if
        evicting across it frees memory (some op lies strictly between a and b)."""
        touches = (self.start, *self.uses)
        for a, b in zip(touches, touches[1:], strict=False):
            if a < i < b:
                return (a, b)
        return None


@dataclass(frozen=True)
class EvictionWindow:
    """Evict `range` after position `after` and reload it before position `before`."""

    range: LiveRange
    after: int
    before: int

    @property
    def score(self) -> int:
        return self.range.bytes * (self.before - self.after)


@dataclass(frozen=True)
class DevicePeak:
    """A device's most live bytes, at the first schedule position reaching them."""

    device: str
    bytes: int
    at: int
    op_name: str


class ResidencyPlanner:
    """Live ranges, per-device peaks and eviction candidates of one function."""

    def __init__(self, fn: func.FuncOp, default_device: str = "cpu", host: str = "cpu"):
        self.fn, self.default_device, self.host = fn, default_device, host
        self.ops: list[Operation] = list(fn.body.block.ops)
        self.position = {op: i for i, op in enumerate(self.ops)}
        self.ranges: list[LiveRange] = self._ranges()
        self.usage: dict[str, list[int]] = self._sweep()

    # -- analysis --------------------------------------------------------------------------

    def _reads(self) -> dict[SSAValue, list[int]]:
        reads: dict[SSAValue, list[int]] = {}
        for i, op in enumerate(self.ops):
            for inner in op.walk():  # values read inside branch arms are read by the branch
                for v in inner.operands:
                    if not reads.get(v) or reads[v][-1] != i:
                        reads.setdefault(v, []).append(i)
        return reads

    def _device_of(self, v: SSAValue) -> str:
        if isinstance(v, BlockArgument):
            return self.default_device
        op = v.owner
        assert isinstance(op, Operation)
        if isinstance(op, CopyOp):
            return op.target.data
        return placed_device(op) or self.default_device

    def _owners(self) -> dict[SSAValue, SSAValue]:
        """Each value's storage owner: itself, or for a view (and for a copy of a weight or
        constant, which is resident wherever it is read) its source's owner."""
        owner: dict[SSAValue, SSAValue] = {}
        for v in [*self.fn.body.block.args, *(r for op in self.ops for r in op.results)]:
            op, src = v.owner, None
            if isinstance(op, ReshapeOp):
                src = op.input
            elif isinstance(op, CopyOp) and _is_resident(owner.get(op.input, op.input)):
                src = op.input
            owner[v] = owner[src] if src is not None and src in owner else v
        return owner

    def _ranges(self) -> list[LiveRange]:
        reads, owner = self._reads(), self._owners()
        members: dict[SSAValue, list[SSAValue]] = {}
        for v, root in owner.items():
            members.setdefault(root, []).append(v)
        out = []
        for root, group in members.items():
            touches = sorted(((i, m) for m in group for i in reads.get(m, ())), key=_first)
            uses, readers = tuple(i for i, _ in touches), tuple(m for _, m in touches)
            if _is_resident(root):
                out += self._resident(root, set(group), uses, readers)
                continue
            start = -1 if isinstance(root, BlockArgument) else self.position[root.owner]  # type: ignore[index]
            out.append(
                LiveRange(
                    root,
                    self._name(root),
                    self._device_of(root),
                    value_bytes(root),
                    start,
                    max((start, *uses)),
                    uses,
                    readers,
                )
            )
        return out

    def _resident(
        self,
        root: SSAValue,
        group: set[SSAValue],
        uses: tuple[int, ...],
        readers: tuple[SSAValue, ...],
    ) -> list[LiveRange]:
        """A weight or constant, as the executor holds it: on the host for the whole run, and
        uploaded once to each other device whose kernels read it (once per view read there)."""
        last, name = len(self.ops) - 1, self._name(root)
        out = [LiveRange(root, name, self.host, value_bytes(root), 0, last, uses, readers, True)]
        seen: set[tuple[SSAValue, str]] = set()
        for op in self.fn.walk():
            if not isinstance(op, KernelOp) or isinstance(op, ReshapeOp):
                continue
            device = placed_device(op) or self.default_device
            for v in op.operands:
                if v in group and device != self.host and (v, device) not in seen:
                    seen.add((v, device))
                    out.append(
                        LiveRange(v, name, device, value_bytes(v), 0, last, uses, readers, True)
                    )
        return out

    def _name(self, v: SSAValue) -> str:
        if isinstance(v, BlockArgument):
            return f"%{v.name_hint or f'arg{v.index}'} (graph input)"
        op = v.owner
        assert isinstance(op, Operation)
        if isinstance(op, WeightOp):
            return f'weight "{op.sym_name.data}"'
        return f"%{v.name_hint} ({op.name})" if v.name_hint else op_label(op, self.position[op])

    def _sweep(self) -> dict[str, list[int]]:
        n = len(self.ops)
        delta: dict[str, list[int]] = {}
        for r in self.ranges:
            d = delta.setdefault(r.device, [0] * (n + 1))
            d[max(r.start, 0)] += r.bytes
            d[r.end + 1] -= r.bytes
        usage = {}
        for dev, d in delta.items():
            acc, usage[dev] = 0, []
            for i in range(n):
                acc += d[i]
                usage[dev].append(acc)
        return usage

    # -- queries ---------------------------------------------------------------------------

    @property
    def devices(self) -> list[str]:
        return sorted(self.usage)

    def peak(self, device: str) -> DevicePeak:
        """Peak live bytes on `device` and the first position reaching it (0 B if unused)."""
        usage = self.usage.get(device)
        if not usage:
            return DevicePeak(device, 0, 0, "no op")
        at = max(range(len(usage)), key=lambda i: (usage[i], -i))
        return DevicePeak(device, usage[at], at, op_label(self.ops[at], at))

    def live_at(self, device: str, i: int) -> list[LiveRange]:
        return [r for r in self.ranges if r.device == device and r.live_at(i)]

    def candidates(self, device: str) -> list[EvictionWindow]:
        """Tensors live at `device`'s peak and idle across it, best first by bytes x gap (ties:
        larger bytes, then earlier definition). A host tensor has nowhere to go, and a gap
        whose later reads go through more than one view cannot be rewired with one reload."""
        if device == self.host:
            return []
        at = self.peak(device).at
        found = []
        for r in self.live_at(device, at):
            gap = None if r.resident else r.gap_around(at)
            if (
                gap is None
                or len({m for i, m in zip(r.uses, r.readers, strict=True) if i >= gap[1]}) != 1
            ):
                continue
            found.append(EvictionWindow(r, *gap))
        found.sort(key=lambda c: (-c.score, -c.range.bytes, c.range.start))
        return found[:MAX_CANDIDATES]


# -- the report ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Eviction:
    """One evict/reload pair: what moved, where, and what the two transfers are priced at."""

    value: str
    device: str
    host: str
    bytes: int
    after_op: str
    before_op: str
    evict_ns: float
    reload_ns: float


@dataclass
class DeviceResidency:
    """One device of one function: its budget, planned peak before and after, the evictions."""

    function: str
    device: str
    budget: int | None
    peak_before: DevicePeak
    peak_after: DevicePeak
    evictions: list[Eviction] = field(default_factory=list)
    rounds: int = 0
    reason: str = ""
    """Why planning stopped without fitting (empty when it fits)."""

    @property
    def fits(self) -> bool:
        return self.budget is None or self.peak_after.bytes <= self.budget

    @property
    def transfer_ns(self) -> float:
        return sum(e.evict_ns + e.reload_ns for e in self.evictions)

    def __str__(self) -> str:
        b, a = self.peak_before, self.peak_after
        budget = "no budget" if self.budget is None else f"budget {format_bytes(self.budget)}"
        verdict = "fits" if self.fits else f"DOES NOT FIT ({self.reason})"
        lines = [
            f"@{self.function} on {self.device}: {budget}; peak {format_bytes(b.bytes)} at "
            f"{b.op_name} -> {format_bytes(a.bytes)} at {a.op_name}; {verdict}",
            f"  {len(self.evictions)} eviction(s) in {self.rounds} round(s), transfers "
            f"{self.transfer_ns / 1e3:.1f} us",
        ]
        lines += [
            f"  evict {e.value}, {format_bytes(e.bytes)}, to {e.host} after {e.after_op} "
            f"({e.evict_ns / 1e3:.1f} us); reload before {e.before_op} "
            f"({e.reload_ns / 1e3:.1f} us)"
            for e in self.evictions
        ]
        return "\n".join(lines)


@dataclass
class ResidencyReport:
    """Every budgeted or occupied device of every function, and whether each fits."""

    devices: list[DeviceResidency] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return all(d.fits for d in self.devices)

    @property
    def evictions(self) -> list[Eviction]:
        return [e for d in self.devices for e in d.evictions]

    def device(self, device: str, function: str | None = None) -> DeviceResidency:
        for d in self.devices:
            if d.device == device and function in (None, d.function):
                return d
        raise KeyError(f"the report has no device '{device}'")

    def __str__(self) -> str:
        head = "residency: fits" if self.fits else "residency: a budget is unreachable"
        return "\n".join([head, *(str(d) for d in self.devices)])


def transfer_ns(topology: TransferEstimator | None, src: str, dst: str, nbytes: int) -> float:
    """Price a host<->device move; without a topology, the PCIe class default."""
    if topology is None:
        return TRANSFER_DEFAULTS[TransferPath.DEVICE_COPY].ns(nbytes)
    return topology.estimate_transfer_ns(src, dst, nbytes)
