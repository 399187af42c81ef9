"""The verification harness: check every machine-checkable claim of a contract kernel.

* `bit_stable`: every probe is run three times on fresh input copies into outputs pre-filled
  with different garbage, and again on strided and offset views of the same values where the
  contract's layout accepts them; all outputs must be byte-identical (an element the kernel
  forgets to write shows up as a difference too).
* `max_ulp` / `max_relative` / `max_absolute`: the output against the reference of
  `references.py` rounded to the output dtype (the `PrecisionGuarantee` convention).
  `max_relative` is elementwise, except for `NORMWISE_OPS` (matmul, attention, the norms, float
  sums), where cancellation leaves no elementwise bound: there it is normwise per output row,
  ||got - ref||_2 / ||ref||_2 over the last axis. ULP
  distance in the IEEE total order (`runtime.precision.ulp_distance`: +0 and -0 are 1 apart,
  the sign of a zero being part of the result; NaN vs NaN is 0, NaN vs a number is the
  maximum).

Each claim yields a `LedgerRecord`: `pass` / `fail` with the measured worst case and its
evidence (probe, element index, output, reference, inputs), `no_probe` when fuel has no probe
builder for the op, `no_reference` when it has no reference. A measured claim
(`PrecisionGuarantee.measured`) passes with the worst case as its bound (`measured_bound`:
rounded up, never below one unit) unless that worst case is not finite. Only the CPU backend can be
invoked on the host today; kernels of other backends are skipped (no record is written, so
their existing ledger rows stay).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import ml_dtypes
import numpy as np

from runtime.binding_table import BindingEntry, Kernel
from runtime.contracts.ledger import (
    PROTOCOL,
    LedgerRecord,
    claims_of,
    measured_bound,
    revision_hex,
)
from runtime.contracts.probes import Probe, probes_for
from runtime.contracts.references import reference
from runtime.dtypes import NUMPY_DTYPES
from runtime.precision import PrecisionGuarantee, is_float_dtype, round_to, ulp_distance

INVOKABLE_BACKENDS = frozenset({"cpu"})
NORMWISE_OPS = frozenset(
    {
        "matmul",
        "matmul_bias_act",
        "gated_mlp",
        "attention",
        "rms_norm",
        "layer_norm",
        "reduce_sum",
        "reduce_mean",
    }
)
"""Ops whose `max_relative` is normwise per output row (see the module docstring)."""


class Verifiable(Protocol):
    """What the harness needs of a kernel: a contract's `LoweredKernel` or a `HandKernel`."""

    @property
    def name(self) -> str: ...
    @property
    def op(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def dtypes(self) -> tuple[str, ...]: ...
    @property
    def kernel(self) -> Kernel: ...
    @property
    def precision(self) -> PrecisionGuarantee: ...
    @property
    def revision(self) -> int: ...
    @property
    def where(self) -> str: ...
    def accepts(self, shapes: Sequence[Sequence[int]]) -> bool: ...
    def view_runs(self) -> tuple[bool, bool]: ...


@dataclass(frozen=True)
class HandKernel:
    """A hand-registered binding entry as the harness and the ledger see it: named
    `op/kernel_source` (unique at a key), at the entry's revision hash, the probes its cost
    prices as feasible, strided and offset views run where the entry walks strides."""

    op: str
    dtypes: tuple[str, ...]
    backend: str
    entry: BindingEntry

    @property
    def name(self) -> str:
        return f"{self.op}/{self.entry.kernel_source}"

    @property
    def kernel(self) -> Kernel:
        return self.entry.kernel

    @property
    def precision(self) -> PrecisionGuarantee:
        return self.entry.precision

    @property
    def revision(self) -> int:
        return self.entry.revision_hash

    @property
    def where(self) -> str:
        return "hand-registered"

    def accepts(self, shapes: Sequence[Sequence[int]]) -> bool:
        """The probes the entry's cost prices as feasible: a hand-registered kernel states its
        domain by an infinite cost elsewhere (flash decoding: one query per head)."""
        if self.entry.cost is None:
            return True
        try:
            c = self.entry.cost([tuple(s) for s in shapes], self.dtypes, {})
        except ValueError:  # a variadic key (concat: (T, T) for any number of inputs)
            return True
        return all(math.isfinite(v) for v in (c.flops, c.bytes_moved, c.overhead_ns))

    def view_runs(self) -> tuple[bool, bool]:
        return self.entry.caps.strided_input, self.entry.caps.strided_input


REPEATS = 3
_FILLS = (0x00, 0xFF, 0x5A)


def run(lk: Verifiable, probe: Probe, inputs: Sequence[np.ndarray], fill: int = 0) -> np.ndarray:
    """Run the kernel on `inputs` into an output pre-filled with the byte `fill`."""
    dt = NUMPY_DTYPES[probe.out_dtype]
    out = np.empty(probe.out_shape, dt)
    out.reshape(-1).view(np.uint8)[:] = (fill & 1) if dt == np.bool_ else fill
    with np.errstate(all="ignore"):
        lk.kernel(list(inputs), [out], probe.params)
    return out


def _strided(a: np.ndarray) -> np.ndarray:
    buf = np.zeros((*a.shape, 2), a.dtype)
    view = buf[..., 0]
    view[...] = a
    return view


def _offset(a: np.ndarray) -> np.ndarray:
    buf = np.zeros(a.size + 1, a.dtype)
    view = buf[1:].reshape(a.shape)
    view[...] = a
    return view


def _variants(lk: Verifiable, probe: Probe) -> list[tuple[str, list[np.ndarray], int]]:
    """(label, inputs, fill) of every run the bit-stability check compares."""
    runs = [(f"repeat {i}", [a.copy() for a in probe.inputs], _FILLS[i]) for i in range(REPEATS)]
    strided, offset = lk.view_runs()
    if strided:
        runs.append(("strided views", [_strided(a) for a in probe.inputs], 0))
    if offset:
        runs.append(("offset views", [_offset(a) for a in probe.inputs], 0))
    return runs


def _fmt(v: Any) -> Any:
    if isinstance(v, np.bool_ | bool):
        return bool(v)
    if isinstance(v, np.integer | int):
        return int(v)
    return repr(float(v))


def _inputs_at(probe: Probe, index: tuple[int, ...]) -> list[Any] | None:
    """The input elements behind output element `index` (elementwise kernels only)."""
    try:
        return [_fmt(np.broadcast_to(a, probe.out_shape)[index]) for a in probe.inputs]
    except ValueError:
        return None


def check_bit_stable(lk: Verifiable, probes: Sequence[Probe]) -> tuple[bool, dict[str, Any]]:
    """Byte-identical outputs across repeats, garbage fills and accepted layouts."""
    for probe in probes:
        runs = _variants(lk, probe)
        first = run(lk, probe, runs[0][1], runs[0][2])
        for label, inputs, fill in runs[1:]:
            again = run(lk, probe, inputs, fill)
            if again.tobytes() != first.tobytes():
                diff = np.flatnonzero(
                    first.reshape(-1).view(np.uint8) != again.reshape(-1).view(np.uint8)
                )[0] // max(first.itemsize, 1)
                index = tuple(int(i) for i in np.unravel_index(diff, first.shape))
                return False, {
                    "probe": probe.label,
                    "run": label,
                    "index": list(index),
                    "first": _fmt(first[index]),
                    "again": _fmt(again[index]),
                    "inputs": _inputs_at(probe, index),
                }
    runs_per_probe = len(_variants(lk, probes[0])) if probes else 0
    return True, {"probes": len(probes), "runs_per_probe": runs_per_probe}


def smallest_normal(got: np.ndarray) -> float:
    """The underflow threshold of `got`'s float dtype (float64's for other dtypes)."""
    dt = got.dtype if is_float_dtype(got.dtype) else np.dtype(np.float64)
    return float(ml_dtypes.finfo(dt).smallest_normal)


def element_errors(got: np.ndarray, ref: np.ndarray) -> dict[str, np.ndarray]:
    """Per-element ulp / relative / absolute error of `got` against `ref` rounded to its dtype.
    Relative errors divide by |ref|, at least the dtype's smallest normal (the usual mixed
    model: below the underflow threshold only an absolute error of that size is bounded)."""
    if is_float_dtype(got.dtype):
        ref64 = np.asarray(ref).astype(np.float64)
        ulp = ulp_distance(got, ref64)
        r = round_to(ref64, got.dtype).astype(np.float64)
    else:
        r_obj = np.asarray(ref).astype(object)
        diff = np.abs(got.astype(object) - r_obj)
        ulp = diff.astype(np.float64)  # integers: |got - ref| (exactly 0 when equal)
        r = np.asarray(ref).astype(np.float64)
    g = got.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        same = (g == r) | (np.isnan(g) & np.isnan(r))
        absolute = np.where(same, 0.0, np.abs(g - r))
        absolute = np.where(np.isnan(absolute), np.inf, absolute)
        relative = np.where(same, 0.0, absolute / np.maximum(np.abs(r), smallest_normal(got)))
    return {"max_ulp": np.asarray(ulp), "max_relative": relative, "max_absolute": absolute}


def _norm(x: np.ndarray) -> np.ndarray:
    """The 2-norm of each row of a finite-or-inf (rows, n) array, scaled against overflow."""
    top = np.max(np.abs(x), axis=1, initial=0.0)
    safe = np.where((top > 0) & np.isfinite(top), top, 1.0)
    return np.where(np.isfinite(top), safe * np.sqrt(np.sum((x / safe[:, None]) ** 2, 1)), top)


def normwise_errors(got: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per output row (the last axis; a 0-d output is one row): ||got - ref||_2 / ||ref||_2
    with `ref` rounded to got's dtype, and the flat index of each row's largest difference.
    Equal non-finite values (NaN facing NaN, inf facing the same inf) are no difference, any
    other non-finite pair an infinite one; the norm of the reference row counts as at least
    the dtype's smallest normal (so a zero reference row admits only tiny differences)."""
    n = got.shape[-1] if got.ndim else 1
    g = got.astype(np.float64).reshape(-1, max(n, 1))
    r = round_to(np.asarray(ref).astype(np.float64), got.dtype).astype(np.float64)
    r = r.reshape(g.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        same = (g == r) | (np.isnan(g) & np.isnan(r))
        diff = np.where(same, 0.0, g - r)
        diff = np.where(np.isnan(diff), np.inf, diff)
        num, den = _norm(diff), _norm(np.where(np.isfinite(r), r, 0.0))
        rel = np.where(num == 0, 0.0, num / np.maximum(den, smallest_normal(got)))
    rel = np.where(np.isnan(rel), np.inf, rel)
    rows = np.arange(g.shape[0])
    return rel, rows * g.shape[1] + np.argmax(np.abs(diff), axis=1)


def claim_errors(op: str, got: np.ndarray, ref: np.ndarray) -> dict[str, tuple[np.ndarray, ...]]:
    """Per claim: (the errors, the flat output index each one stands for)."""
    out: dict[str, tuple[np.ndarray, ...]] = {
        c: (e.reshape(-1), np.arange(e.size)) for c, e in element_errors(got, ref).items()
    }
    if op in NORMWISE_OPS and is_float_dtype(got.dtype) and got.size:
        out["max_relative"] = normwise_errors(got, ref)
    return out


@dataclass
class _Worst:
    value: float = 0.0
    evidence: dict[str, Any] | None = None


def check_bounds(
    lk: Verifiable, probes: Sequence[Probe], claims: Sequence[str]
) -> dict[str, _Worst] | None:
    """The worst error per claim over all probes; None when there is no reference."""
    worst = {c: _Worst() for c in claims}
    elements = 0
    for probe in probes:
        ref = reference(lk.op, lk.dtypes, probe.inputs, probe.params)
        if ref is None:
            return None
        got = run(lk, probe, probe.inputs)
        errs = claim_errors(lk.op, got, np.broadcast_to(ref, got.shape))
        elements += got.size
        for claim in claims:
            e, at = errs[claim]
            if e.size == 0:
                continue
            i = int(np.argmax(e))
            value = float(e[i])
            if worst[claim].evidence is None or value > worst[claim].value:
                index = tuple(int(k) for k in np.unravel_index(int(at[i]), got.shape))
                rref = np.broadcast_to(ref, got.shape)[index]
                worst[claim] = _Worst(
                    value,
                    {
                        "probe": probe.label,
                        "index": list(index),
                        "got": _fmt(got[index]),
                        "ref": _fmt(rref if got.dtype.kind in "iub" else np.float64(rref)),
                        "inputs": _inputs_at(probe, index),
                    },
                )
    for w in worst.values():
        if w.evidence is not None:
            w.evidence["elements"] = elements
    return worst


def unit_roundoff(dtype: str) -> float:
    """Half an ulp of 1.0 in a float dtype: 2^-53, 2^-24, 2^-11, 2^-8."""
    return {"f64": 2.0**-53, "f32": 2.0**-24, "f16": 2.0**-11, "bf16": 2.0**-8}.get(dtype, 0.0)


def _bound_record(lk: Verifiable, base: dict[str, Any], claim: str, bound: Any, w: _Worst):
    """The record of one bound claim from its worst case (measured or checked)."""
    evidence = dict(w.evidence or {})
    if claim == "max_relative":
        evidence["metric"] = "normwise per row" if lk.op in NORMWISE_OPS else "elementwise"
    finite = math.isfinite(w.value)
    if not finite:
        evidence["worst"] = repr(w.value)
    if claim in lk.precision.measured:
        recorded = measured_bound(claim, w.value, unit_roundoff(lk.dtypes[-1]))
        evidence["mode"] = "measured"
        ok, bound = recorded is not None, recorded
    else:
        ok = w.value <= float(bound)
    return LedgerRecord(
        **base,
        claim=claim,
        result="pass" if ok else "fail",
        bound=bound,
        measured=w.value if finite else None,
        evidence=evidence,
    )


def verify_kernel(lk: Verifiable) -> list[LedgerRecord]:
    """One record per machine-checkable claim of `lk` (empty if it claims nothing)."""
    claims = claims_of(lk.precision)
    if not claims or lk.backend not in INVOKABLE_BACKENDS:
        return []
    base = dict(
        kernel=lk.name,
        backend=lk.backend,
        dtypes=lk.dtypes,
        revision=revision_hex(lk.revision),
        protocol=PROTOCOL,
    )
    probes = probes_for(lk.op, lk.dtypes)
    if probes is not None:
        probes = [p for p in probes if lk.accepts([a.shape for a in p.inputs] + [p.out_shape])]
    if not probes:
        why = "no probe builder for this op" if probes is None else "the contract accepts no probe"
        return [
            LedgerRecord(**base, claim=c, result="no_probe", bound=b, evidence={"why": why})
            for c, b in claims
        ]
    records = []
    try:
        bounds = [c for c, _ in claims if c != "bit_stable"]
        with np.errstate(all="ignore"):  # edge probes overflow in the comparisons on purpose
            worst = check_bounds(lk, probes, bounds) if bounds else {}
        for claim, bound in claims:
            if claim == "bit_stable":
                ok, evidence = check_bit_stable(lk, probes)
                records.append(
                    LedgerRecord(
                        **base,
                        claim=claim,
                        result="pass" if ok else "fail",
                        bound=True,
                        evidence=evidence,
                    )
                )
            elif worst is None:
                records.append(
                    LedgerRecord(**base, claim=claim, result="no_reference", bound=bound)
                )
            else:
                records.append(_bound_record(lk, base, claim, bound, worst[claim]))
    except Exception as e:  # a kernel that raises on a probe fails every claim, with the reason
        error = {"error": f"{type(e).__name__}: {e}"}
        return [
            LedgerRecord(**base, claim=c, result="fail", bound=b, evidence=error) for c, b in claims
        ]
    return records


def verify_all(
    kernels: Iterable[Verifiable],
    progress: Callable[[int, int, Verifiable], None] | None = None,
) -> list[LedgerRecord]:
    """`verify_kernel` over `kernels`, reporting (done, total, kernel) to `progress`."""
    todo = list(kernels)
    out: list[LedgerRecord] = []
    for i, lk in enumerate(todo):
        out += verify_kernel(lk)
        if progress is not None:
            progress(i + 1, len(todo), lk)
    return out


@dataclass(frozen=True)
class Figures:
    """The ledger's headline numbers for one verification run."""

    kernels: int
    claims: int
    passed: int
    failed: int
    unproven: int
    """no_probe / no_reference: claims that cannot be checked yet."""
    downgraded: int
    """Kernels (dtype keys) that will register as UNAUDITED: some claim did not pass."""

    @staticmethod
    def of(records: Sequence[LedgerRecord]) -> Figures:
        keys = {(r.kernel, r.backend, r.dtypes) for r in records}
        down = {(r.kernel, r.backend, r.dtypes) for r in records if not r.passed}
        return Figures(
            kernels=len(keys),
            claims=len(records),
            passed=sum(r.result == "pass" for r in records),
            failed=sum(r.result == "fail" for r in records),
            unproven=sum(r.result not in ("pass", "fail") for r in records),
            downgraded=len(down),
        )

    def line(self) -> str:
        return (
            f"{self.kernels} kernels, {self.claims} claims: {self.passed} passed, "
            f"{self.failed} failed, {self.unproven} unproven; {self.downgraded} downgraded"
        )


def by_result(records: Iterable[LedgerRecord]) -> Mapping[str, list[LedgerRecord]]:
    out: dict[str, list[LedgerRecord]] = {}
    for r in records:
        out.setdefault(r.result, []).append(r)
    return out
