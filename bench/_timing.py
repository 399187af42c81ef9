"""Shared bench helpers: interleaved timing, latency statistics, output checks, tables.

Timing is interleaved as in `dispatch_overhead.py`: every round times a block of runs of each
runner in turn, so the machine's slow and fast phases hit all of them alike. Each runner is a
zero-argument callable returning its outputs (an array, or a dict/list of arrays).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Runner = Callable[[], Any]


@dataclass(frozen=True)
class Stats:
    """Latency of one runner, in microseconds per run."""

    median: float
    p10: float
    p90: float
    runs: int

    @classmethod
    def of(cls, us: Sequence[float]) -> Stats:
        if len(us) < 2:
            return cls(us[0], us[0], us[0], len(us))
        q = statistics.quantiles(us, n=10, method="inclusive")
        return cls(statistics.median(us), q[0], q[-1], len(us))


SETTLE_S = 0.15
"""Idle time before each block of runs: OpenBLAS workers keep polling after a call (its
THREAD_TIMEOUT, 2^28 cycles by default: ~0.1 s), onnxruntime's and OpenMP's pools spin too; on
a 2-core machine one runner's spinning threads would slow the next runner's first runs."""


def measure(
    fns: Mapping[str, Runner],
    runs: int,
    rounds: int = 20,
    warmup: int | None = None,
    settle_s: float = 0.0,
) -> dict[str, Stats]:
    """`runs` timed runs of every runner (µs each), interleaved over `rounds` rounds, after
    `warmup` untimed runs each (default: max(20, runs // 10)). Each block of runs starts after
    `settle_s` idle seconds (see SETTLE_S) with one untimed run (caches, pools awake)."""
    for fn in fns.values():
        for _ in range(max(20, runs // 10) if warmup is None else warmup):
            fn()
    rounds = max(1, min(rounds, runs // 3))  # blocks of >= 3 runs: the untimed first costs less
    times: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(rounds):
        block = runs // rounds + (1 if r < runs % rounds else 0)
        for name, fn in fns.items():
            if settle_s:
                time.sleep(settle_s)
            fn()
            for _ in range(block):
                t0 = time.perf_counter_ns()
                fn()
                times[name].append((time.perf_counter_ns() - t0) / 1e3)
    return {name: Stats.of(t) for name, t in times.items()}


def runs_for_budget(fns: Mapping[str, Runner], budget_s: float, lo: int, hi: int) -> int:
    """Timed runs per runner so that all of them together take about `budget_s` (each runner
    is called twice here: a warm-up and a probe; the slowest probe sets the count)."""
    probe = 0.0
    for fn in fns.values():
        fn()
        t0 = time.perf_counter()
        fn()
        probe += time.perf_counter() - t0
    return int(min(hi, max(lo, budget_s / max(probe, 1e-9))))


def with_torch_threads(fn: Runner, threads: int) -> Runner:
    """`fn` run with PyTorch's intra-op pool at `threads` (set only when it differs, so other
    runners interleaved with it keep theirs)."""
    import torch

    def run() -> Any:
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        return fn()

    return run


def faster_torch_threads(fn: Runner, choices: Sequence[int] = (1, 2), runs: int = 10) -> int:
    """The intra-op thread count in `choices` at which `fn` runs fastest (interleaved)."""
    trial = {str(n): with_torch_threads(fn, n) for n in choices}
    stats = measure(trial, runs, rounds=min(5, runs), warmup=2, settle_s=SETTLE_S)
    return int(min(stats, key=lambda n: stats[n].median))


def blas_threads() -> str:
    """The thread count numpy's BLAS (fuel's matmuls) runs with, as the environment sets it."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        if os.environ.get(var):
            return f"{os.environ[var]} ({var})"
    return f"{os.cpu_count()} (default: all cores; OPENBLAS_NUM_THREADS=N sets it)"


def as_arrays(out: Any) -> list[np.ndarray]:
    """A runner's outputs as a list of numpy arrays (dict values in order, list, or one)."""
    if isinstance(out, Mapping):
        out = list(out.values())
    if not isinstance(out, (list, tuple)):
        out = [out]
    return [np.asarray(o.numpy() if hasattr(o, "numpy") else o) for o in out]


def mismatch(got: Any, want: Sequence[np.ndarray], tol: float) -> str | None:
    """None when every output matches: max|got - want| <= tol * max(1, max|want|), per output
    (float64 arithmetic); else a one-line description of the first mismatch."""
    arrays = as_arrays(got)
    if len(arrays) != len(want):
        return f"{len(arrays)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(arrays, want, strict=True)):
        if g.shape != w.shape:
            return f"output {i}: shape {g.shape}, expected {w.shape}"
        err = float(np.abs(g.astype(np.float64) - w.astype(np.float64)).max(initial=0.0))
        bound = tol * max(1.0, float(np.abs(w).max(initial=0.0)))
        if not err <= bound:
            return f"output {i}: max |err| {err:.3e} > {bound:.3e}"
    return None


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """A plain-text table, columns right-aligned except the first."""
    cols = list(zip(header, *rows, strict=True))
    widths = [max(len(c) for c in col) for col in cols]

    def line(cells: Sequence[str]) -> str:
        first, *rest = cells
        right = [c.rjust(w) for c, w in zip(rest, widths[1:], strict=True)]
        return "  ".join([first.ljust(widths[0]), *right])

    return "\n".join([line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in rows])
