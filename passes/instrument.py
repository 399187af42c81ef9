"""Compile stages and their observers: what `fuel compile`, `fuel-opt` and `FUEL_LOG` show.

A compile is a tree of named **stages**: fuel-opt's passes, `fuel-optimize`'s own stages
(`topology`, `fuel-fix-dtypes`, `fuel-canonicalize`, `plan`, each pathfinder and optimizer,
`picked`,
`fuel-bake-variants`, `copies`, `fuel-insert-residency`, `fuel-fix-layouts`), each backend's
stages (`cpu-optimize`, `cpu-stamp`, `cpu-codegen`, `cpu-artifacts`, `sm_90-convert`, ...).
Code marks a stage with `stage(name, module)` (work done in place) or `run_stage(name, fn,
product, ...)` (a function of the previous product); **observers** attached with
`instrumented(...)` see each stage start and finish with its product and wall time, as MLIR's
`PassInstrumentation` sees passes: IR dumps (`--print-ir-after-all`, `--dump-dir`), the
`--time-passes` table, the progress bar, the log.

The observers are a context variable, not an argument: `fuel-optimize` runs as an xDSL
`ModulePass` (no place for a callback) inside a backend stage inside `fuel compile`, and each
level marks its stages without knowing who watches. With no observer a stage costs two context
variable reads and two clock reads.

`FUEL_LOG=info|debug` (`runtime.knobs.log_level`) logs through the `fuel` logger to stderr:
`info` each stage's wall time as it finishes, `debug` also each start. It is read when a
top-level stage starts, so the Python API logs as the tools do.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from runtime import knobs

T = TypeVar("T")
LOGGER = logging.getLogger("fuel")


@dataclass
class Stage:
    """One running stage: its path from the outermost stage, and what it has made so far."""

    path: tuple[str, ...]
    product: Any = None
    """The stage's subject while it runs (the module it rewrites, or its input), then what it
    made; None for a stage with nothing to show (e.g. `verify`)."""
    children: int = 0
    """Stages run inside this one so far."""
    seconds: float = 0.0
    """Wall time, set when the stage finishes."""

    @property
    def name(self) -> str:
        return self.path[-1]

    @property
    def label(self) -> str:
        """`fuel-fuse-patterns (cpu-optimize)`: the name, then where it ran when nested."""
        return self.name if len(self.path) == 1 else f"{self.name} ({'/'.join(self.path[:-1])})"


class StageObserver:
    """Sees stages start and finish (every hook optional; the defaults do nothing)."""

    def expect(self, count: int) -> None:
        """`count` more stages are about to run (a progress bar's total grows)."""

    def started(self, stage: Stage) -> None:
        """`stage` starts; its `product` is its subject (the module, or the stage's input)."""

    def finished(self, stage: Stage) -> None:
        """`stage` ended without an error: `product` is what it made, `seconds` its time."""


_OBSERVERS: ContextVar[tuple[StageObserver, ...]] = ContextVar("fuel_observers", default=())
_CURRENT: ContextVar[Stage | None] = ContextVar("fuel_stage", default=None)


@contextmanager
def instrumented(*observers: StageObserver) -> Iterator[None]:
    """Stages run inside this block are seen by `observers` (and by any already attached)."""
    token = _OBSERVERS.set(_OBSERVERS.get() + observers)
    try:
        yield
    finally:
        _OBSERVERS.reset(token)


def expect(count: int) -> None:
    """Announce that `count` stages are about to run here (for progress totals)."""
    for o in _OBSERVERS.get():
        o.expect(count)


@contextmanager
def stage(name: str, subject: Any = None) -> Iterator[Stage]:
    """Run the block as stage `name` of the current stage; `subject` is what it works on (set
    `.product` on the yielded `Stage` when the block makes something else)."""
    parent = _CURRENT.get()
    if parent is None:
        apply_fuel_log()
    else:
        parent.children += 1
    current = Stage((*parent.path, name) if parent else (name,), subject)
    observers = (*_OBSERVERS.get(), *_log_observers())
    for o in observers:
        o.started(current)
    token = _CURRENT.set(current)
    start = time.perf_counter()
    try:
        yield current
    finally:
        _CURRENT.reset(token)
    current.seconds = time.perf_counter() - start
    for o in observers:
        o.finished(current)


def run_stage(name: str, fn: Callable[..., T], product: Any, *args: Any) -> T:
    """`fn(product, *args)` as stage `name`; its result is the stage's product."""
    with stage(name, product) as s:
        s.product = fn(product, *args)
    return s.product


# -- FUEL_LOG ---------------------------------------------------------------------------------


class LogObserver(StageObserver):
    """Logs each stage's finish and wall time at `info`, its start at `debug`."""

    def started(self, stage: Stage) -> None:
        LOGGER.debug("%s ...", stage.label)

    def finished(self, stage: Stage) -> None:
        LOGGER.info("%s: %.1f ms", stage.label, stage.seconds * 1e3)


_LOG = LogObserver()


def _log_observers() -> tuple[StageObserver, ...]:
    return (_LOG,) if LOGGER.isEnabledFor(logging.INFO) else ()


class _StderrHandler(logging.StreamHandler):
    """Writes to the `sys.stderr` of the moment (a test's capture, a later redirect)."""

    @property
    def stream(self) -> Any:  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


_HANDLER = _StderrHandler()
_HANDLER.setFormatter(logging.Formatter("fuel: %(levelname)s: %(message)s"))


def apply_fuel_log() -> None:
    """Set the `fuel` logger from `FUEL_LOG` (unset: leave it to the application's logging)."""
    level = knobs.log_level()
    if level is None:
        if _HANDLER in LOGGER.handlers:  # FUEL_LOG was set before and is no longer
            LOGGER.removeHandler(_HANDLER)
            LOGGER.setLevel(logging.NOTSET)
        return
    LOGGER.setLevel(level)
    if _HANDLER not in LOGGER.handlers:
        LOGGER.addHandler(_HANDLER)


# -- --time-passes ----------------------------------------------------------------------------


@dataclass
class TimingObserver(StageObserver):
    """Wall time per stage path (repeats added up), for `report` (`--time-passes`)."""

    rows: dict[tuple[str, ...], list[float]] = field(default_factory=dict)
    start: float = field(default_factory=time.perf_counter)

    def started(self, stage: Stage) -> None:
        self.rows.setdefault(stage.path, [])  # first start fixes the row's place

    def finished(self, stage: Stage) -> None:
        self.rows[stage.path].append(stage.seconds)

    def report(self) -> str:
        """MLIR's `--mlir-timing` table: wall time and share per stage, nested by indent,
        `(N)` after a stage that ran N > 1 times."""
        total = time.perf_counter() - self.start
        bar = "===" + "-" * 73 + "==="
        lines = [bar, "Execution time report".center(len(bar)).rstrip(), bar]
        lines += [
            f"  Total Execution Time: {total:.4f} seconds",
            "",
            "  ----Wall Time----  ----Name----",
        ]
        for path, times in self.rows.items():
            t = sum(times)
            count = f" ({len(times)})" if len(times) > 1 else ""
            name = "  " * (len(path) - 1) + path[-1] + count
            lines.append(f"  {t:8.4f} ({100 * t / (total or 1):5.1f}%)  {name}")
        lines.append(f"  {total:8.4f} (100.0%)  Total")
        return "\n".join(lines) + "\n"
