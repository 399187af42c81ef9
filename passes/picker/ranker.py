"""The ranker ("Picker 1"): candidates, filters, costs, ranking and per-device frontiers.

For one decision point (a kernel-bearing op): `enumerate_candidates` lists every sibling
kernel at (op, dtypes, backend) for each (backend, device) placement; `apply_filter_chain`
drops inadmissible ones (precision floor: hard; strided-input and bit-stable preferences:
soft); `compute_static_costs` prices each with the Layer-1 roofline on its device's rates,
replaced by the Judge's measured latency where one exists; `apply_inbound_transfer_costs`
adds the cost of moving inputs to the candidate's device (kept separate, so a Judge figure
never erases it); `AlternativeSet.rank` sorts time-first with precision, accuracy and memory
tie-breaks; `retain_per_device_frontier` keeps a bounded Pareto frontier per device.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Protocol

from runtime.binding_table import BindingEntry, KernelBindingTable
from runtime.cost import CostEstimate
from runtime.precision import PrecisionGuarantee

KEEP_PER_DEVICE = 32
"""Frontier cap per device (crowding distance drops the rest)."""


@dataclass(frozen=True)
class Candidate:
    """One (kernel, backend, device) alternative for a decision point and its costs."""

    entry: BindingEntry
    backend: str
    device: str
    static_cost: CostEstimate = CostEstimate()
    static_ns: float = 0.0  # Layer-1 composite on the device's rates
    judge_ns: float | None = None  # Layer 2: measured median, replaces static_ns when present
    inbound_transfer_ns: float = 0.0
    verdict: str = "kept"

    @property
    def kernel_source(self) -> str:
        return self.entry.kernel_source

    @property
    def precision(self) -> PrecisionGuarantee:
        return self.entry.precision

    @property
    def compute_ns(self) -> float:
        return self.judge_ns if self.judge_ns is not None else self.static_ns

    @property
    def time_ns(self) -> float:
        return self.compute_ns + self.inbound_transfer_ns

    def cost_vector(self) -> CostVector:
        host = self.static_cost.bytes_moved if self.device == "cpu" else 0.0
        return CostVector(
            self.time_ns,
            host,
            self.static_cost.bytes_moved - host,
            precision_digits(self.precision),
            accuracy_class(self.precision),
        )


def precision_digits(p: PrecisionGuarantee) -> int:
    """Decimal digits guaranteed: from max_relative, else ULP 0 => 18, bit-stable => 9, else 0."""
    if p.max_relative is not None:
        return (
            18 if p.max_relative <= 0 else min(18, max(0, math.floor(-math.log10(p.max_relative))))
        )
    if p.max_ulp == 0:
        return 18
    return 9 if p.bit_stable else 0


class Accuracy(int, Enum):
    UNBOUNDED = 0
    STABLE = 1
    BOUNDED_LOOSE = 2
    BOUNDED_TIGHT = 3
    CORRECTLY_ROUNDED = 4


def accuracy_class(p: PrecisionGuarantee) -> Accuracy:
    if p.max_ulp is not None:
        if p.max_ulp == 0:
            return Accuracy.CORRECTLY_ROUNDED
        return Accuracy.BOUNDED_TIGHT if p.max_ulp <= 2 else Accuracy.BOUNDED_LOOSE
    return Accuracy.STABLE if p.bit_stable else Accuracy.UNBOUNDED


@dataclass(frozen=True)
class CostVector:
    """Lower time/memory and higher precision/accuracy are better."""

    time_ns: float
    host_bytes: float
    device_bytes: float
    precision: int
    accuracy: int

    def dominates(self, other: CostVector) -> bool:
        no_worse = (
            self.time_ns <= other.time_ns
            and self.host_bytes <= other.host_bytes
            and self.device_bytes <= other.device_bytes
            and self.precision >= other.precision
            and self.accuracy >= other.accuracy
        )
        return no_worse and self != other

    def rank_key(self) -> tuple[float, int, int, float]:
        return (self.time_ns, -self.precision, -self.accuracy, self.host_bytes + self.device_bytes)


# -- enumeration ---------------------------------------------------------------------------


def enumerate_candidates(
    op: str,
    dtypes: Sequence[str],
    placements: Iterable[tuple[str, str]],
    table: KernelBindingTable,
) -> list[Candidate]:
    """One candidate per dense-safe sibling at (op, dtypes, backend) for each (backend, device).

    Backends without kernels contribute nothing; an empty result is not an error here.
    """
    out: list[Candidate] = []
    for backend, device in placements:
        for entry in table.lookup_alternatives(op, dtypes, backend):
            if not entry.caps.requires_broadcast:
                out.append(Candidate(entry, backend, device))
    return out


# -- filters -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FilterContext:
    op: str
    dtypes: tuple[str, ...]
    strided_inputs: tuple[bool, ...] = ()
    tag: str = ""

    def summary(self) -> str:
        s = f"op={self.op} dtypes=({', '.join(self.dtypes)})"
        return s + (f" tag={self.tag}" if self.tag else "")


class FilterClass(Enum):
    HARD = "hard"
    SOFT = "soft"


class FilterRejected(Exception):
    """A hard filter admitted no candidate."""

    def __init__(self, filter_name: str, ctx: FilterContext, available: list[str]):
        self.filter_name, self.ctx, self.available = filter_name, ctx, available
        super().__init__(
            f"{filter_name} rejected every candidate for {ctx.summary()}; available: "
            + ("; ".join(available) or "none")
        )


class AlternativeFilter(Protocol):
    name: str
    klass: FilterClass
    min_remaining: int

    def keep(self, cands: Sequence[Candidate], ctx: FilterContext) -> list[int]: ...


@dataclass(frozen=True)
class PrecisionRequirement:
    """A hard floor. Unset bounds are unconstrained."""

    require_bit_stable: bool = False
    max_ulp: int | None = None
    max_relative: float | None = None
    max_absolute: float | None = None

    def unconstrained(self) -> bool:
        return (
            not self.require_bit_stable
            and self.max_ulp is None
            and (self.max_relative is None and self.max_absolute is None)
        )

    def admits(self, p: PrecisionGuarantee) -> bool:
        """ "Cannot prove => not admissible": a missing claim fails every bound that is set."""
        if not p.audited and not self.unconstrained():
            return False
        need = PrecisionGuarantee(
            self.require_bit_stable, self.max_ulp, self.max_relative, self.max_absolute
        )
        return p.meets(need)

    @staticmethod
    def parse(spec: str) -> PrecisionRequirement:
        """`bit_stable,ulp=2,rel=1e-5,abs=0.1` (any subset; empty = unconstrained)."""
        kw: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in spec.split(","))):
            key, _, val = part.partition("=")
            if key == "bit_stable" and not val:
                kw["require_bit_stable"] = True
            elif key in ("ulp", "rel", "abs") and val:
                name = {"ulp": "max_ulp", "rel": "max_relative", "abs": "max_absolute"}[key]
                kw[name] = int(val) if key == "ulp" else float(val)
            else:
                raise ValueError(
                    f"bad precision requirement '{part}' (bit_stable, ulp=, rel=, abs=)"
                )
        return PrecisionRequirement(**kw)


BIT_STABLE = PrecisionRequirement(require_bit_stable=True)


@dataclass(frozen=True)
class PrecisionFloorFilter:
    requirement: PrecisionRequirement
    name: str = "precision-floor"
    klass: FilterClass = FilterClass.HARD
    min_remaining: int = 0

    def keep(self, cands: Sequence[Candidate], ctx: FilterContext) -> list[int]:
        if self.requirement.unconstrained():
            return list(range(len(cands)))
        return [i for i, c in enumerate(cands) if self.requirement.admits(c.precision)]


@dataclass(frozen=True)
class StridedInputPreferenceFilter:
    name: str = "strided-input-preference"
    klass: FilterClass = FilterClass.SOFT
    min_remaining: int = 1

    def keep(self, cands: Sequence[Candidate], ctx: FilterContext) -> list[int]:
        if not any(ctx.strided_inputs):
            return list(range(len(cands)))
        return [i for i, c in enumerate(cands) if c.entry.caps.strided_input]


@dataclass(frozen=True)
class BitStablePreferenceFilter:
    name: str = "bit-stable-preference"
    klass: FilterClass = FilterClass.SOFT
    min_remaining: int = 1

    def keep(self, cands: Sequence[Candidate], ctx: FilterContext) -> list[int]:
        return [i for i, c in enumerate(cands) if c.precision.bit_stable]


def default_chain(req: PrecisionRequirement = PrecisionRequirement()) -> list[AlternativeFilter]:
    return [PrecisionFloorFilter(req), StridedInputPreferenceFilter(), BitStablePreferenceFilter()]


def apply_filter_chain(
    cands: Sequence[Candidate], ctx: FilterContext, chain: Sequence[AlternativeFilter]
) -> tuple[list[Candidate], list[Candidate]]:
    """Run `chain` in order; returns (survivors, rejected with their verdicts).

    Each filter sees the previous survivors. A hard filter that admits nothing raises
    `FilterRejected`; a soft filter that would leave fewer than `min_remaining` is skipped.
    """
    alive = list(cands)
    rejected: list[Candidate] = []
    for f in chain:
        keep = set(f.keep(alive, ctx))
        if f.klass is FilterClass.HARD and not keep:
            raise FilterRejected(f.name, ctx, [describe(c) for c in alive])
        if f.klass is FilterClass.SOFT and len(keep) < f.min_remaining:
            continue
        rejected += [
            replace(c, verdict=f"rejected:{f.name}") for i, c in enumerate(alive) if i not in keep
        ]
        alive = [c for i, c in enumerate(alive) if i in keep]
    return alive, rejected


def describe(c: Candidate) -> str:
    return f"{c.kernel_source}@{c.device} ({c.precision.describe()})"


# -- costs ---------------------------------------------------------------------------------


class JudgeOracle(Protocol):
    def measured_latency_ns(
        self, op: str, dtype: str, size_class: int, backend: str, kernel_source: str
    ) -> float | None: ...


class TransferEstimator(Protocol):
    def estimate_transfer_ns(self, src: str, dst: str, nbytes: float) -> float: ...


Rates = Callable[[str], tuple[float, float]]
"""device name -> (flops per ns, bytes per ns)."""


def compute_static_costs(
    cands: Sequence[Candidate],
    op: str,
    shapes: Sequence[tuple[int, ...]],
    dtypes: Sequence[str],
    params: Mapping[str, Any],
    rates: Rates,
    default_cost: Callable[..., CostEstimate],
    judge: JudgeOracle | None = None,
    size_class: int = 0,
) -> list[Candidate]:
    """Layer 1 (the entry's cost fn, else `default_cost`) on the device's rates; Layer 2
    replaces it with the Judge's measurement when there is one ("absence is not zero")."""
    out = []
    for c in cands:
        fn = c.entry.cost or default_cost
        est = fn(shapes, dtypes, params)
        flops_rate, bw = rates(c.device)
        ns = est.composite_ns(flops_rate, bw)
        measured = None
        if judge is not None:
            measured = judge.measured_latency_ns(
                op, dtypes[0], size_class, c.backend, c.kernel_source
            )
        out.append(replace(c, static_cost=est, static_ns=ns, judge_ns=measured))
    return out


def apply_inbound_transfer_costs(
    cands: Sequence[Candidate],
    inputs: Sequence[tuple[str | None, float]],
    estimator: TransferEstimator,
) -> list[Candidate]:
    """Add, per candidate, the time to move each (device, bytes) input to its device.

    Inputs of unknown residency (device None) contribute nothing."""
    return [
        replace(
            c,
            inbound_transfer_ns=sum(
                estimator.estimate_transfer_ns(d, c.device, b) for d, b in inputs if d is not None
            ),
        )
        for c in cands
    ]


# -- ranking and the frontier --------------------------------------------------------------


@dataclass
class AlternativeSet:
    """The ranked alternatives of one decision point; index 0 is the winner."""

    candidates: list[Candidate] = field(default_factory=list)
    rejected: list[Candidate] = field(default_factory=list)
    size_class: int = 0

    def rank(self) -> AlternativeSet:
        """Stable sort: time, then precision, accuracy, memory; enumeration order breaks ties."""
        self.candidates.sort(key=lambda c: c.cost_vector().rank_key())
        return self

    def winner(self) -> Candidate:
        return self.candidates[0]

    def devices(self) -> list[str]:
        return list(dict.fromkeys(c.device for c in self.candidates))

    def on_device(self, device: str) -> AlternativeSet:
        return AlternativeSet(
            [c for c in self.candidates if c.device == device], self.rejected, self.size_class
        )

    def retain_per_device_frontier(self, keep: int = KEEP_PER_DEVICE) -> AlternativeSet:
        """Per device: drop dominated candidates, never strand the last (device, backend),
        keep the winner, then cap at `keep` by crowding distance."""
        keep = max(1, keep)
        if not self.candidates:
            return self
        winner = self.candidates[0]
        kept: list[Candidate] = []
        for dev in self.devices():
            bucket = [c for c in self.candidates if c.device == dev]
            kept += _frontier(bucket, keep, winner)
        self.candidates = [c for c in self.candidates if any(c is k for k in kept)]
        return self.rank()


def _frontier(bucket: list[Candidate], keep: int, winner: Candidate) -> list[Candidate]:
    vecs = [c.cost_vector() for c in bucket]
    alive = [c for c, v in zip(bucket, vecs, strict=True) if not any(w.dominates(v) for w in vecs)]
    for backend in dict.fromkeys(c.backend for c in bucket):  # never strand a backend
        if not any(c.backend == backend for c in alive):
            alive.append(min((c for c in bucket if c.backend == backend), key=lambda c: c.time_ns))
    if any(c is winner for c in bucket) and not any(c is winner for c in alive):
        alive.append(winner)
    while len(alive) > keep:
        pinned = {id(winner)} | {
            id(c) for c in alive if sum(1 for d in alive if d.backend == c.backend) == 1
        }
        dist = _crowding([c.cost_vector() for c in alive])
        droppable = [i for i, c in enumerate(alive) if id(c) not in pinned]
        if not droppable:
            break
        alive.pop(min(droppable, key=lambda i: dist[i]))
    return alive


def _crowding(vecs: list[CostVector]) -> list[float]:
    """NSGA-II crowding distance over the cost axes (boundary points are infinite)."""
    n = len(vecs)
    dist = [0.0] * n
    axes = [
        lambda v: v.time_ns,
        lambda v: v.host_bytes,
        lambda v: v.device_bytes,
        lambda v: v.precision,
        lambda v: v.accuracy,
    ]
    for ax in axes:
        order = sorted(range(n), key=lambda i: ax(vecs[i]))
        lo, hi = ax(vecs[order[0]]), ax(vecs[order[-1]])
        dist[order[0]] = dist[order[-1]] = math.inf
        if hi == lo:
            continue
        for a, i, b in zip(order, order[1:], order[2:], strict=False):
            dist[i] += (ax(vecs[b]) - ax(vecs[a])) / (hi - lo)
    return dist
