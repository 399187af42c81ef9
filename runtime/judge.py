"""The Judge: an offline profiler that measures every sibling kernel on this machine.

For each op in a ladder of sizes (three general sizes per family plus decode-shaped cells) and
each dtype, the Judge times every sibling at the binding key (`lookup_alternatives`): 3 warm-ups,
then at least 7 timed runs (more for tiny kernels, until ~20 ms per cell), and records the
median latency and the max relative error against a float64 reference. The result is a
`ProfileReport` (versioned JSON, never pickle) cached at `default_report_path()`, exposed two
ways: the all-entries `ProfileJudgeOracle` the ranker consumes and the winners-only
`DispatchTable`. A report measured on other hardware, in another schema version, or by a kernel
whose `revision_hash` has since changed is a miss, never a wrong answer.

`size_class` is the one bucketing helper shared by the producer (the Judge) and every consumer
(ranker, bake): a past bug in the original system had them disagree.
"""

from __future__ import annotations

import enum
import json
import logging
import math
import os
import platform
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np

from runtime import knobs
from runtime.binding_table import KernelBindingTable
from runtime.fsutil import atomic_write_text, read_regular_file

log = logging.getLogger(__name__)

REPORT_VERSION = 1
"""Schema version of `judge.json`; a file with any other version is a cache miss."""

Shape = tuple[int, ...]

# -- size classes ---------------------------------------------------------------------------


def _lg(n: int) -> int:
    """floor(log2(n)), 0 for n <= 1 (so empty and scalar operands share class 0)."""
    return max(int(n), 1).bit_length() - 1


def _matmul_class(shapes: Sequence[Shape]) -> int:
    a, b = shapes[0], shapes[1]
    batch = math.prod(np.broadcast_shapes(a[:-2], b[:-2]))  # folded into m: rows computed
    m = batch * (a[-2] if len(a) >= 2 else 1)
    n = b[-1] if len(b) >= 2 else 1
    return _lg(m * n) << 16 | _lg(m) << 8 | _lg(a[-1])


PREFILL_BIT = 1 << 24
"""Set in an attention size class when Sq > 1: decode (Sq == 1) and prefill never collide."""


def _attention_class(shapes: Sequence[Shape]) -> int:
    (bsz, hq, sq, d), sk = shapes[0], shapes[1][2]
    packed = _lg(bsz * hq * sk * d) << 16 | _lg(sk) << 8 | _lg(d)
    return packed | (PREFILL_BIT if sq > 1 else 0)


_PACKED_CLASSES: dict[str, Callable[[Sequence[Shape]], int]] = {
    "matmul": _matmul_class,
    "attention": _attention_class,
}


def size_class(op: str, shapes: Sequence[Sequence[int]]) -> int:
    """The Judge's size bucket for `op` on input shapes `shapes` (outputs excluded).

    Default: floor(log2(element count of the first input)), 0 when there is no input or it is
    empty. `matmul` packs `log2(m*n) << 16 | log2(m) << 8 | log2(k)` with any batch folded into
    m, so a GEMV [1,H]x[H,4H] never collides with a square matmul of the same output size.
    `attention` (q (B,Hq,Sq,D), k (B,Hkv,Sk,D)) packs `log2(B*Hq*Sk*D) << 16 | log2(Sk) << 8 |
    log2(D)`, plus `PREFILL_BIT` when Sq > 1. Every field fits 8 bits (log2 of any real size is
    < 64); `class_distance` compares classes field by field.
    """
    dims = [tuple(int(d) for d in s) for s in shapes]
    if not dims or math.prod(dims[0]) == 0:
        return 0
    packed = _PACKED_CLASSES.get(op)
    if packed is not None:
        try:
            return packed(dims)
        except (IndexError, ValueError):
            pass  # malformed shapes: bucket like any other op rather than fail a lookup
    return _lg(math.prod(dims[0]))


# -- the report -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ProfileEntry:
    """One sibling kernel measured on one cell: median (p10, p90) latency and accuracy.

    `dtype` is the element type the cell was profiled in, `dtypes` the full binding key
    (inputs then outputs) whose sibling was timed, `shape` the measured input shapes (for
    humans; lookups use `size_class`). `max_rel_error` is None when no reference existed.
    """

    op: str
    dtype: str
    size_class: int
    backend: str
    device: str
    kernel_source: str
    revision_hash: int
    latency_ns: float
    p10_ns: float
    p90_ns: float
    iterations: int
    max_rel_error: float | None
    shape: tuple[Shape, ...]
    dtypes: tuple[str, ...]

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> ProfileEntry:
        err = d["max_rel_error"]
        return ProfileEntry(
            op=str(d["op"]),
            dtype=str(d["dtype"]),
            size_class=int(d["size_class"]),
            backend=str(d["backend"]),
            device=str(d["device"]),
            kernel_source=str(d["kernel_source"]),
            revision_hash=int(d["revision_hash"]),
            latency_ns=float(d["latency_ns"]),
            p10_ns=float(d["p10_ns"]),
            p90_ns=float(d["p90_ns"]),
            iterations=int(d["iterations"]),
            max_rel_error=None if err is None else float(err),
            shape=tuple(tuple(int(x) for x in s) for s in d["shape"]),
            dtypes=tuple(str(t) for t in d["dtypes"]),
        )


@dataclass(frozen=True)
class SkippedCell:
    """A cell (or one sibling of it) the Judge could not measure, and why."""

    op: str
    dtype: str
    size_class: int
    backend: str
    kernel_source: str
    shape: tuple[Shape, ...]
    reason: str

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> SkippedCell:
        return SkippedCell(
            op=str(d["op"]),
            dtype=str(d["dtype"]),
            size_class=int(d["size_class"]),
            backend=str(d["backend"]),
            kernel_source=str(d["kernel_source"]),
            shape=tuple(tuple(int(x) for x in s) for s in d["shape"]),
            reason=str(d["reason"]),
        )


class ReportFormatError(ValueError):
    """A `judge.json` that is not a well-formed report of this schema version."""


@dataclass(frozen=True)
class ProfileReport:
    """Everything one Judge run measured, tied to the hardware it ran on.

    `complete` is False when the run stopped early (time budget); `skipped` lists the cells
    that raised or had no kernel, with their reasons.
    """

    fingerprint: str
    created: str
    entries: tuple[ProfileEntry, ...]
    skipped: tuple[SkippedCell, ...] = ()
    complete: bool = True
    version: int = REPORT_VERSION

    def to_json(self) -> str:
        """The report as JSON with one entry per line (readable, and diffs line by line)."""
        fields = []
        for key, value in asdict(self).items():
            if isinstance(value, list | tuple) and value:
                rows = ",\n".join("  " + json.dumps(v, allow_nan=False) for v in value)
                fields.append(f' "{key}": [\n{rows}\n ]')
            else:
                fields.append(f' "{key}": {json.dumps(value, allow_nan=False)}')
        return "{\n" + ",\n".join(fields) + "\n}\n"

    @staticmethod
    def from_json(text: str) -> ProfileReport:
        """Parse a report; `ReportFormatError` on bad JSON, wrong version or missing fields."""
        try:
            d = json.loads(text)
        except RecursionError:  # json's depth limit: Python's recursion limit
            raise ReportFormatError("corrupt JSON: nested too deeply") from None
        except ValueError as e:  # a decode error, or an integer past Python's 4300 digits
            raise ReportFormatError(f"corrupt JSON: {e}") from None
        if not isinstance(d, dict):
            raise ReportFormatError("not a JSON object")
        if d.get("version") != REPORT_VERSION:
            raise ReportFormatError(f"version {d.get('version')!r}, expected {REPORT_VERSION}")
        try:
            return ProfileReport(
                fingerprint=str(d["fingerprint"]),
                created=str(d["created"]),
                entries=tuple(ProfileEntry.from_dict(e) for e in d["entries"]),
                skipped=tuple(SkippedCell.from_dict(s) for s in d.get("skipped", ())),
                complete=bool(d.get("complete", True)),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ReportFormatError(f"malformed report: {type(e).__name__}: {e}") from None


def default_report_path() -> Path:
    """`$FUEL_JUDGE_REPORT`, else `$XDG_CACHE_HOME/fuel/judge.json`, else ~/.cache/fuel/."""
    return knobs.judge_report()


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown-cpu"


def _blas() -> str:
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]  # type: ignore[index]
        return f"{blas['name']} {blas['version']}"
    except Exception:  # numpy's config layout is not a stable API; the fingerprint must be
        return "blas?"


def _gpus() -> list[str]:
    """GPU models from the NVIDIA driver's proc files: the same answer whether or not torch
    is imported (importing torch just to fingerprint would cost ~1.5 s)."""
    models = []
    for info in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
        try:
            for line in info.read_text().splitlines():
                if line.startswith("Model:"):
                    models.append(line.split(":", 1)[1].strip())
        except OSError:
            continue
    return models


def hardware_fingerprint() -> str:
    """A stable, human-readable string naming what the measurements depend on.

    Platform, machine, CPU model, core count, numpy and its BLAS, and GPU names when torch is
    already imported. Any difference makes a saved report a miss.
    """
    parts = [
        f"{platform.system()}-{platform.machine()}",
        _cpu_model(),
        f"{os.cpu_count()} cores",
        f"numpy {np.__version__}",
        _blas(),
    ]
    parts += [f"gpu {name}" for name in _gpus()]
    return " | ".join(parts)


def save_report(report: ProfileReport, path: str | os.PathLike[str] | None = None) -> Path:
    """Write `report` atomically (temp file + rename) to `path` or `default_report_path()`."""
    target = Path(path) if path is not None else default_report_path()
    atomic_write_text(target, report.to_json())
    return target


@dataclass(frozen=True)
class LoadResult:
    """The outcome of a load: a report, or None and the reason it was a miss."""

    report: ProfileReport | None
    reason: str = ""
    stale_dropped: int = 0

    @property
    def hit(self) -> bool:
        return self.report is not None


def try_load_report(
    path: str | os.PathLike[str] | None = None, table: KernelBindingTable | None = None
) -> LoadResult:
    """Load a report; every failure is a miss with a reason, never an exception.

    With `table`, entries whose kernel revision changed since they were measured are dropped
    (counted in `stale_dropped`).
    """
    target = Path(path) if path is not None else default_report_path()
    try:
        text = read_regular_file(target).decode("utf-8")  # a FIFO would block a plain read
    except FileNotFoundError:
        return LoadResult(None, f"no report at {target}")
    except (OSError, UnicodeDecodeError) as e:
        return LoadResult(None, f"cannot read {target}: {e}")
    try:
        report = ProfileReport.from_json(text)
    except ReportFormatError as e:
        return LoadResult(None, f"{target}: {e}")
    here = hardware_fingerprint()
    if report.fingerprint != here:
        return LoadResult(None, f"{target}: measured on '{report.fingerprint}', this is '{here}'")
    if table is None:
        return LoadResult(report)
    fresh = tuple(fresh_entries(report.entries, table))
    dropped = len(report.entries) - len(fresh)
    return LoadResult(_replace_entries(report, fresh), stale_dropped=dropped)


def load_report(
    path: str | os.PathLike[str] | None = None, table: KernelBindingTable | None = None
) -> ProfileReport | None:
    """`try_load_report(...).report`, logging the reason of a miss at INFO."""
    result = try_load_report(path, table)
    if result.report is None:
        log.info("judge report miss: %s", result.reason)
    return result.report


def _replace_entries(report: ProfileReport, entries: tuple[ProfileEntry, ...]) -> ProfileReport:
    return ProfileReport(
        report.fingerprint, report.created, entries, report.skipped, report.complete
    )


def is_fresh(entry: ProfileEntry, table: KernelBindingTable) -> bool:
    """Whether the table still holds the exact kernel revision that produced `entry`."""
    siblings = table.lookup_alternatives(entry.op, entry.dtypes, entry.backend)
    return any(
        e.kernel_source == entry.kernel_source and e.revision_hash == entry.revision_hash
        for e in siblings
    )


def fresh_entries(
    entries: Iterable[ProfileEntry], table: KernelBindingTable
) -> Iterable[ProfileEntry]:
    """The entries still valid against `table` (a stale measurement is a miss)."""
    return (e for e in entries if is_fresh(e, table))


# -- oracles --------------------------------------------------------------------------------

OracleKey = tuple[str, str, int, str, str]
"""(op, dtype, size_class, backend, kernel_source)."""


class JudgeOracle(Protocol):
    """Measured latencies by exact cell; None means "not measured" (use the static estimate)."""

    def measured_latency_ns(
        self, op: str, dtype: str, size_class: int, backend: str, kernel_source: str
    ) -> float | None: ...


class NearestMeasurement(NamedTuple):
    """A fallback answer: the latency measured at a *different* size class, labelled as such."""

    size_class: int
    latency_ns: float


class _LatencyMap:
    """Exact-key latency lookups plus the nearest-size-class fallback."""

    def __init__(self) -> None:
        self._cells: dict[OracleKey, float] = {}

    def measured_latency_ns(
        self, op: str, dtype: str, size_class: int, backend: str, kernel_source: str
    ) -> float | None:
        return self._cells.get((op, dtype, size_class, backend, kernel_source))

    def nearest(
        self, op: str, dtype: str, size_class: int, backend: str, kernel_source: str
    ) -> NearestMeasurement | None:
        """The measurement at the nearest profiled size class (`class_distance`; ties: the
        larger class). A fallback: callers must treat it as an estimate, not a measurement."""
        classes = [
            sc
            for (o, d, sc, b, s) in self._cells
            if (o, d, b, s) == (op, dtype, backend, kernel_source)
        ]
        if not classes:
            return None
        best = nearest_class(size_class, classes)
        return NearestMeasurement(best, self._cells[(op, dtype, best, backend, kernel_source)])

    def __len__(self) -> int:
        return len(self._cells)


_FIELD_WEIGHTS = (64, 1, 1, 1)
"""Per-byte weights of `class_distance`, high byte first: the top byte holds `PREFILL_BIT`, and
crossing between decode and prefill is worse than any size difference within one kind."""


def class_distance(a: int, b: int) -> int:
    """Distance between two size classes: the weighted sum of per-byte (per log2 field) gaps.

    For a default class this is |a - b| (one field); for packed classes it compares each log2
    field, so a [1,4096]x[4096,4096] GEMV is nearer the [1,2048]x[2048,2048] GEMV than a 64^3
    matmul whose top field happens to match, which plain integer distance would pick.
    """
    shifts = (24, 16, 8, 0)
    return sum(
        w * abs((a >> s & 0xFF) - (b >> s & 0xFF))
        for w, s in zip(_FIELD_WEIGHTS, shifts, strict=True)
    )


def nearest_class(target: int, classes: Iterable[int]) -> int:
    """The class closest to `target` by `class_distance`; on a tie the larger class wins (an
    overestimate of the cost is safer than an underestimate)."""
    return min(classes, key=lambda sc: (class_distance(sc, target), -sc))


class HashMapJudge(_LatencyMap):
    """An exact-key in-memory oracle; `insert` overwrites (last write wins)."""

    def insert(
        self,
        op: str,
        dtype: str,
        size_class: int,
        backend: str,
        kernel_source: str,
        latency_ns: float,
    ) -> None:
        self._cells[(op, dtype, size_class, backend, kernel_source)] = float(latency_ns)


class ProfileJudgeOracle(_LatencyMap):
    """The oracle over a `ProfileReport`: exact cells, minimum over devices, stale entries out.

    An entry whose `revision_hash` no longer matches the table's sibling with that
    `kernel_source` at its key is ignored. A report of another schema version gives an empty
    oracle. `table`: the kernels the plan picks from (the report's entries are checked
    against it).
    """

    def __init__(self, report: ProfileReport, table: KernelBindingTable) -> None:
        super().__init__()
        if report.version != REPORT_VERSION:
            return
        for e in fresh_entries(report.entries, table):
            key = (e.op, e.dtype, e.size_class, e.backend, e.kernel_source)
            old = self._cells.get(key)
            self._cells[key] = e.latency_ns if old is None else min(old, e.latency_ns)


# -- the dispatch table ---------------------------------------------------------------------


class Criterion(enum.Enum):
    """What a `DispatchTable` pick optimizes."""

    FASTEST = "fastest"  # min latency
    MOST_ACCURATE = "most_accurate"  # min max_rel_error, tie by latency
    BALANCED = "balanced"  # min latency * (1 + 100 * max_rel_error)


def _error(e: ProfileEntry) -> float:
    return math.inf if e.max_rel_error is None else e.max_rel_error


def _balanced(e: ProfileEntry) -> float:
    err = _error(e)
    return math.inf if math.isinf(err) else e.latency_ns * (1.0 + 100.0 * err)


_CRITERION_KEYS: dict[Criterion, Callable[[ProfileEntry], tuple[float, float]]] = {
    Criterion.FASTEST: lambda e: (e.latency_ns, _error(e)),
    Criterion.MOST_ACCURATE: lambda e: (_error(e), e.latency_ns),
    Criterion.BALANCED: lambda e: (_balanced(e), e.latency_ns),
}


@dataclass(frozen=True)
class Pick:
    """The winner of one (op, dtype, size_class) under one criterion."""

    backend: str
    device: str
    kernel_source: str
    size_class: int
    latency_ns: float
    max_rel_error: float | None


@dataclass(frozen=True)
class DispatchTable:
    """Winners only: per (op, dtype, size_class) and `Criterion`, the measured best `Pick`."""

    picks: Mapping[tuple[str, str, int, Criterion], Pick]

    @staticmethod
    def from_report(
        report: ProfileReport, table: KernelBindingTable | None = None
    ) -> DispatchTable:
        """Pick per criterion among the report's entries (only fresh ones when `table` given)."""
        entries: Iterable[ProfileEntry] = report.entries
        if table is not None:
            entries = fresh_entries(entries, table)
        groups: dict[tuple[str, str, int], list[ProfileEntry]] = {}
        for e in entries:
            groups.setdefault((e.op, e.dtype, e.size_class), []).append(e)
        picks: dict[tuple[str, str, int, Criterion], Pick] = {}
        for (op, dtype, sc), group in groups.items():
            for crit, key in _CRITERION_KEYS.items():
                w = min(group, key=key)  # min is stable: registration order breaks full ties
                picks[(op, dtype, sc, crit)] = Pick(
                    w.backend, w.device, w.kernel_source, sc, w.latency_ns, w.max_rel_error
                )
        return DispatchTable(picks)

    def pick(
        self, op: str, dtype: str, size_class: int, criterion: Criterion = Criterion.FASTEST
    ) -> Pick | None:
        """The exact-cell winner, or None."""
        return self.picks.get((op, dtype, size_class, criterion))

    def pick_nearest(
        self, op: str, dtype: str, size_class: int, criterion: Criterion = Criterion.FASTEST
    ) -> Pick | None:
        """The exact winner, else the nearest profiled size class's (ties to the larger);
        `Pick.size_class` says which class answered."""
        exact = self.pick(op, dtype, size_class, criterion)
        if exact is not None:
            return exact
        classes = [sc for (o, d, sc, c) in self.picks if (o, d, c) == (op, dtype, criterion)]
        if not classes:
            return None
        return self.picks[(op, dtype, nearest_class(size_class, classes), criterion)]
