"""The Judge's profiler: a ladder of sizes per op, float64 references, and `run_judge`, which
times every sibling kernel of every cell and records its error (runtime/judge.py holds the
report, the oracles and the dispatch table it produces)."""

from __future__ import annotations

import gc
import logging
import math
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from runtime.binding_table import BindingEntry, KernelBindingTable
from runtime.dtypes import FLOAT_DTYPES, to_numpy
from runtime.judge import (
    ProfileEntry,
    ProfileReport,
    Shape,
    SkippedCell,
    hardware_fingerprint,
    size_class,
)
from runtime.native import blas

log = logging.getLogger(__name__)
# -- the ladder -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One profiled size of one op: input shapes, the output shape and the op's params."""

    inputs: tuple[Shape, ...]
    output: Shape
    params: Mapping[str, Any] = field(default_factory=dict)
    tag: str = ""  # "small" | "medium" | "large" | "decode", for humans

    @property
    def label(self) -> str:
        return format_shapes(self.inputs)


def format_shapes(shapes: Iterable[Sequence[int]]) -> str:
    """`[1,512]x[512,512]`: operand shapes as the summary table and progress labels show them."""
    return "x".join("[" + ",".join(map(str, s)) + "]" for s in shapes)


Ladder = Mapping[str, Sequence[Cell]]

_SIZES = ("small", "medium", "large")
# General sizes 2^14, 2^18, 2^20 elements: distinct from the decode rows' 2^12 and 2^17, so no
# two cells of one op share a size class (the oracle would fold them into one minimum)
_ROWS_2D: tuple[Shape, ...] = ((128, 128), (512, 512), (1024, 1024))
_DECODE_ROWS: tuple[Shape, ...] = ((32, 128), (32, 4096))  # [Hq, k_len] score rows
_HIDDEN = (512, 2048)


def _tagged(general: Sequence[Shape], decode: Sequence[Shape]) -> list[tuple[Shape, str]]:
    return [*zip(general, _SIZES, strict=True), *((s, "decode") for s in decode)]


def _elementwise(arity: int) -> list[Cell]:
    return [Cell((s,) * arity, s, {}, t) for s, t in _tagged(_ROWS_2D, _DECODE_ROWS)]


def _reduce() -> list[Cell]:
    params = {"axes": (1,), "keepdim": False}
    return [Cell((s,), s[:1], params, t) for s, t in _tagged(_ROWS_2D, _DECODE_ROWS)]


def _softmax() -> list[Cell]:
    return [Cell((s,), s, {"axis": 1}, t) for s, t in _tagged(_ROWS_2D, _DECODE_ROWS)]


def _matmul() -> list[Cell]:
    cells = [
        Cell(((n, n), (n, n)), (n, n), {}, t) for n, t in zip((64, 256, 512), _SIZES, strict=True)
    ]
    for h in _HIDDEN:  # decode GEMVs: a projection [1,H]x[H,H] and an FFN up [1,H]x[H,4H]
        cells += [Cell(((1, h), (h, w)), (1, w), {}, "decode") for w in (h, 4 * h)]
    return cells


def _norm(arity: int) -> list[Cell]:
    rows = _tagged(((16, 256), (128, 1024), (512, 2048)), ((1, 2048),))
    return [Cell(((r, h), *((h,),) * (arity - 1)), (r, h), {"eps": 1e-5}, t) for (r, h), t in rows]


def _rope() -> list[Cell]:
    xs = _tagged(((1, 8, 32, 64), (1, 16, 256, 64), (1, 32, 512, 64)), ((1, 32, 1, 64),))
    return [
        Cell((x, (x[2], x[3] // 2), (x[2], x[3] // 2)), x, {"interleaved": False}, t) for x, t in xs
    ]


def _attention() -> list[Cell]:
    d = 64
    prefill = [((1, 8, 64, d), (1, 8, 64, d)), ((1, 8, 256, d), (1, 8, 256, d))]
    prefill += [((1, 16, 512, d), (1, 4, 512, d))]  # grouped-query: 4 query heads per kv head
    decode = [((1, 32, 1, d), (1, 8, k_len, d)) for k_len in (128, 4096)]
    scale = 1.0 / math.sqrt(d)
    return [
        Cell((q, kv, kv), q, {"causal": tag != "decode", "scale": scale}, tag)
        for (q, kv), tag in [*zip(prefill, _SIZES, strict=True), *((c, "decode") for c in decode)]
    ]


UNARY_OPS = (
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "recip",
    "tanh",
    "sigmoid",
    "silu",
    "gelu",
    "relu",
    "neg",
    "abs",
    "sin",
    "cos",
)
BINARY_OPS = ("add", "sub", "mul", "div", "max", "min", "pow")
REDUCE_OPS = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min")


def default_ladder() -> dict[str, list[Cell]]:
    """Every profiled op and its sizes (kept modest: the reference host has 2 cores)."""
    ladder: dict[str, list[Cell]] = {"matmul": _matmul(), "attention": _attention()}
    ladder |= {op: _reduce() for op in REDUCE_OPS}
    ladder |= {"softmax": _softmax(), "rms_norm": _norm(2), "layer_norm": _norm(3)}
    ladder |= {"rope": _rope()}
    ladder |= {op: _elementwise(1) for op in UNARY_OPS}
    ladder |= {op: _elementwise(2) for op in BINARY_OPS}
    return ladder


# -- float64 references (used when the table has no f64 kernel for an op) --------------------


def _ref_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _ref_rope(x: np.ndarray, c: np.ndarray, s: np.ndarray, interleaved: bool) -> np.ndarray:
    h = x.shape[-1] // 2
    a, b = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., :h], x[..., h:])
    out = np.empty_like(x)
    lo, hi = (out[..., 0::2], out[..., 1::2]) if interleaved else (out[..., :h], out[..., h:])
    lo[...], hi[...] = a * c - b * s, b * c + a * s
    return out


def _ref_attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, p: Mapping[str, Any], mask: Any = 0.0
) -> np.ndarray:
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    scores = (q @ k.swapaxes(-1, -2)) * p["scale"] + mask
    sq, sk = scores.shape[-2:]
    if p["causal"]:
        scores = np.where(np.arange(sk) <= np.arange(sq)[:, None] + sk - sq, scores, -np.inf)
    return _ref_softmax(scores, -1) @ v


_erf = np.frompyfunc(math.erf, 1, 1)


def _ref_gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)).astype(np.float64))


def _ref_norm(x: np.ndarray, eps: float, center: bool) -> np.ndarray:
    if center:
        x = x - x.mean(axis=-1, keepdims=True)
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)


_Ref = Callable[[Sequence[np.ndarray], Mapping[str, Any]], np.ndarray]

NUMPY_REFERENCES: dict[str, _Ref] = {
    "matmul": lambda a, p: a[0] @ a[1],
    "reduce_sum": lambda a, p: a[0].sum(axis=p["axes"], keepdims=p["keepdim"]),
    "reduce_mean": lambda a, p: a[0].mean(axis=p["axes"], keepdims=p["keepdim"]),
    "reduce_max": lambda a, p: a[0].max(axis=p["axes"], keepdims=p["keepdim"]),
    "reduce_min": lambda a, p: a[0].min(axis=p["axes"], keepdims=p["keepdim"]),
    "softmax": lambda a, p: _ref_softmax(a[0], p["axis"]),
    "rms_norm": lambda a, p: _ref_norm(a[0], p["eps"], False) * a[1],
    "layer_norm": lambda a, p: _ref_norm(a[0], p["eps"], True) * a[1] + a[2],
    # a fourth operand of rank >= 1 is the additive mask (kv_len is 0-d)
    "attention": lambda a, p: _ref_attention(*a[:3], p, a[3] if len(a) > 3 and a[3].ndim else 0.0),
    "rope": lambda a, p: _ref_rope(a[0], a[1], a[2], p["interleaved"]),
    "exp": lambda a, p: np.exp(a[0]),
    "log": lambda a, p: np.log(a[0]),
    "sqrt": lambda a, p: np.sqrt(a[0]),
    "rsqrt": lambda a, p: 1.0 / np.sqrt(a[0]),
    "recip": lambda a, p: 1.0 / a[0],
    "tanh": lambda a, p: np.tanh(a[0]),
    "sigmoid": lambda a, p: 1.0 / (1.0 + np.exp(-a[0])),
    "silu": lambda a, p: a[0] / (1.0 + np.exp(-a[0])),
    "gelu": lambda a, p: _ref_gelu(a[0], p.get("approximate", "none")),
    "relu": lambda a, p: np.maximum(a[0], 0.0),
    "neg": lambda a, p: -a[0],
    "abs": lambda a, p: np.abs(a[0]),
    "sin": lambda a, p: np.sin(a[0]),
    "cos": lambda a, p: np.cos(a[0]),
    "add": lambda a, p: a[0] + a[1],
    "sub": lambda a, p: a[0] - a[1],
    "mul": lambda a, p: a[0] * a[1],
    "div": lambda a, p: a[0] / a[1],
    "max": lambda a, p: np.maximum(a[0], a[1]),
    "min": lambda a, p: np.minimum(a[0], a[1]),
    "pow": lambda a, p: a[0] ** a[1],
}
"""Independent float64 references for the profiled families, by op name."""

_POSITIVE_INPUTS = frozenset({"log", "sqrt", "rsqrt", "recip", "div", "pow"})
"""Ops whose domain (or stable range) wants inputs in [0.5, 2) rather than N(0, 1)."""

ERROR_CAP = 1e30
"""max_rel_error of an output with NaN/inf where the reference is finite (JSON has no inf)."""


def max_rel_error(got: np.ndarray, ref: np.ndarray) -> float:
    """max |got - ref| / max(|ref|, 1e-3 * max|ref|), capped at `ERROR_CAP`.

    The floor keeps outputs that cancel to nearly zero (common in matmul and sub) from turning
    a correct kernel's rounding into a huge relative error: they are judged against the
    output's scale instead.
    """
    got64, ref64 = got.astype(np.float64), np.asarray(ref, dtype=np.float64)
    if got64.shape != ref64.shape:
        return ERROR_CAP
    finite = np.abs(ref64[np.isfinite(ref64)])
    floor = max(1e-3 * float(finite.max(initial=0.0)), np.finfo(np.float64).tiny)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        err = np.abs(got64 - ref64) / np.maximum(np.abs(ref64), floor)
    same = (got64 == ref64) | (np.isnan(got64) & np.isnan(ref64))
    err = np.nan_to_num(np.where(same, 0.0, err), nan=ERROR_CAP, posinf=ERROR_CAP)
    return float(min(err.max(initial=0.0), ERROR_CAP))


# -- measuring ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """How hard each sibling is timed."""

    warmups: int = 3
    min_runs: int = 7
    cell_target_s: float = 0.02  # tiny kernels keep running until this much timed wall time
    max_runs: int = 10_000


ProgressFn = Callable[[int, int, float, str], None]
"""progress(done, total, eta_s, label), called after each cell (and once before the first)."""


class JudgeError(ValueError):
    """A bad request to the Judge (unknown op or dtype)."""


def _key_dtypes(cell: Cell, dtype: str) -> tuple[str, ...]:
    return (dtype,) * (len(cell.inputs) + 1)


def _seeded_inputs(op: str, dtype: str, cell: Cell) -> list[np.ndarray]:
    """Inputs in `dtype`, seeded by the cell so every run and sibling sees the same data."""
    rng = np.random.default_rng(zlib.crc32(f"{op}:{cell.label}".encode()))
    dt = to_numpy(dtype)
    out = []
    for shape in cell.inputs:
        if dtype not in FLOAT_DTYPES:
            out.append(rng.integers(-4, 5, shape).astype(dt))
        elif op in _POSITIVE_INPUTS:
            out.append(rng.uniform(0.5, 2.0, shape).astype(dt))
        else:
            out.append(rng.standard_normal(shape).astype(dt))
    return out


def _new_output(cell: Cell, dtype: str) -> np.ndarray:
    dt = to_numpy(dtype)
    # NaN-filled, so a kernel that forgets to write its destination scores as wrong
    fill = np.nan if dtype in FLOAT_DTYPES else 0
    return np.full(cell.output, fill, dtype=dt)


def _reference(
    table: KernelBindingTable, op: str, dtype: str, backend: str, cell: Cell, inputs: list
) -> np.ndarray | None:
    """The cell's float64 answer: the first f64 sibling, else the numpy reference."""
    wide = [a.astype(np.float64) for a in inputs]  # the kernel's own (rounded) inputs, widened
    f64_siblings = table.lookup_alternatives(op, ("f64",) * (len(inputs) + 1), backend)
    independent = NUMPY_REFERENCES.get(op)
    # An f64 profile checked against the f64 kernel would only compare the kernel with itself
    if f64_siblings and not (dtype == "f64" and independent is not None):
        out = np.full(cell.output, np.nan)
        f64_siblings[0].kernel(wide, [out], cell.params)
        return out
    if independent is not None:
        return np.asarray(independent(wide, cell.params), dtype=np.float64)
    return None


def _time_kernel(
    entry: BindingEntry,
    inputs: list,
    out: np.ndarray,
    params: Mapping[str, Any],
    t: Timing,
    deadline: float,
) -> list[int]:
    """Per-run wall times (ns) after the warm-ups; GC is paused so it is not timed.

    Past the deadline a slow kernel stops after its first timed run (fewer `iterations`)
    instead of overrunning the budget by `min_runs` calls. numpy's BLAS runs on one thread,
    as in the executor (one pool: `runtime.native.blas`)."""
    with blas.one_thread():
        return _time_runs(entry, inputs, out, params, t, deadline)


def _time_runs(
    entry: BindingEntry,
    inputs: list,
    out: np.ndarray,
    params: Mapping[str, Any],
    t: Timing,
    deadline: float,
) -> list[int]:
    for _ in range(t.warmups):
        entry.kernel(inputs, [out], params)
    times: list[int] = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        total, target_ns = 0, t.cell_target_s * 1e9
        while len(times) < t.min_runs or (total < target_ns and len(times) < t.max_runs):
            if times and time.perf_counter() >= deadline:
                break
            t0 = time.perf_counter_ns()
            entry.kernel(inputs, [out], params)
            times.append(time.perf_counter_ns() - t0)
            total += times[-1]
    finally:
        if gc_was_enabled:
            gc.enable()
    return times


@dataclass
class _Run:
    """What one Judge run has gathered so far."""

    entries: list[ProfileEntry] = field(default_factory=list)
    skipped: list[SkippedCell] = field(default_factory=list)


def _profile_cell(
    run: _Run,
    table: KernelBindingTable,
    op: str,
    dtype: str,
    cell: Cell,
    backend: str,
    timing: Timing,
    deadline: float,
) -> bool:
    """Measure every sibling at the cell's key; False when the deadline cut it short."""
    sc = size_class(op, cell.inputs)
    dtypes = _key_dtypes(cell, dtype)

    def skip(source: str, reason: str) -> None:
        run.skipped.append(SkippedCell(op, dtype, sc, backend, source, cell.inputs, reason))

    # Broadcast-baked siblings never run on the dense operands a cell feeds (nor in a plan).
    siblings = [
        e for e in table.lookup_alternatives(op, dtypes, backend) if not e.caps.requires_broadcast
    ]
    if not siblings:
        skip("", f"no kernel at ({op}, [{', '.join(dtypes)}], {backend})")
        return True
    try:
        inputs = _seeded_inputs(op, dtype, cell)
    except Exception as e:  # a malformed cell (custom ladder) is skipped like a failing kernel
        skip("", f"cannot build inputs: {type(e).__name__}: {e}")
        return True
    try:
        ref = _reference(table, op, dtype, backend, cell, inputs)
    except Exception as e:  # a broken reference costs the accuracy column, not the timing
        log.warning("judge: no reference for %s %s: %s", op, cell.label, e)
        ref = None
    for entry in siblings:
        if time.perf_counter() >= deadline:
            return False
        out = _new_output(cell, dtype)
        try:
            times = np.array(_time_kernel(entry, inputs, out, cell.params, timing, deadline))
        except Exception as e:  # any failure is this sibling's, never the run's
            skip(entry.kernel_source, f"{type(e).__name__}: {e}")
            continue
        p10, med, p90 = (float(x) for x in np.percentile(times, (10, 50, 90)))
        err = None if ref is None else max_rel_error(out, ref)
        run.entries.append(
            ProfileEntry(
                op,
                dtype,
                sc,
                backend,
                backend,
                entry.kernel_source,
                entry.revision_hash,
                med,
                p10,
                p90,
                len(times),
                err,
                cell.inputs,
                dtypes,
            )
        )
    return True


def _plan(
    ops: Sequence[str] | None, dtypes: Sequence[str], ladder: Ladder
) -> list[tuple[str, str, Cell]]:
    unknown = [op for op in (ops or ()) if op not in ladder]
    if unknown:
        raise JudgeError(f"unknown op(s) {', '.join(unknown)}; profiled: {', '.join(ladder)}")
    bad = [d for d in dtypes if d not in FLOAT_DTYPES]
    if bad:
        raise JudgeError(f"unknown dtype(s) {', '.join(bad)}; profiled: {', '.join(FLOAT_DTYPES)}")
    chosen = list(ops) if ops else list(ladder)
    return [(op, dt, cell) for op in chosen for dt in dtypes for cell in ladder[op]]


def run_judge(
    table: KernelBindingTable,
    ops: Sequence[str] | None = None,
    dtypes: Sequence[str] = ("f32",),
    budget_s: float | None = None,
    backend: str = "cpu",
    progress: ProgressFn | None = None,
    *,
    ladder: Ladder | None = None,
    timing: Timing = Timing(),
) -> ProfileReport:
    """Profile every sibling of every (op, dtype, ladder cell); see the module docstring.

    `ops=None` profiles every op of the ladder (`default_ladder()` unless given). A cell with no
    kernel, or a sibling that raises, is recorded in `skipped`. When `budget_s` runs out the run
    stops between siblings and returns what it measured, with `complete=False`. `JudgeError`
    for an op not in the ladder or a non-float dtype.
    """
    plan = _plan(ops, dtypes, ladder if ladder is not None else default_ladder())
    start = time.perf_counter()
    deadline = start + budget_s if budget_s is not None else math.inf
    run, complete = _Run(), True
    if progress:
        progress(0, len(plan), math.nan, "")
    for i, (op, dtype, cell) in enumerate(plan):
        if time.perf_counter() >= deadline or not _profile_cell(
            run, table, op, dtype, cell, backend, timing, deadline
        ):
            complete = False
            break
        if progress:
            elapsed = time.perf_counter() - start
            eta = elapsed / (i + 1) * (len(plan) - i - 1)
            eta = min(eta, max(deadline - time.perf_counter(), 0.0))
            progress(i + 1, len(plan), eta, f"{op} {dtype} {cell.label}")
    return ProfileReport(
        fingerprint=hardware_fingerprint(),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        entries=tuple(run.entries),
        skipped=tuple(run.skipped),
        complete=complete,
    )
