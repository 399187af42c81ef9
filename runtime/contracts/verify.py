"""The verification harness: check every machine-checkable claim of a contract kernel.

* `bit_stable`: every probe is run three times on fresh input copies into outputs pre-filled
  with different garbage, and again on strided and offset views of the same values where the
  contract's layout accepts them; all outputs must be byte-identical (an element the kernel
  forgets to write shows up as a difference too).
* `max_ulp` / `max_relative` / `max_absolute`: the output against the reference of
  `references.py` rounded to the output dtype (the `PrecisionGuarantee` convention); ULP
  distance in the IEEE total order (`runtime.precision.ulp_distance`: +0 and -0 are 1 apart,
  the sign of a zero being part of the result; NaN vs NaN is 0, NaN vs a number is the
  maximum).

Each claim yields a `LedgerRecord`: `pass` / `fail` with the measured worst case and its
evidence (probe, element index, output, reference, inputs), `no_probe` when fuel has no probe
builder for the op, `no_reference` when it has no reference. Only the CPU backend can be
invoked on the host today; kernels of other backends are skipped (no record is written, so
their existing ledger rows stay).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime.contracts.ledger import PROTOCOL, LedgerRecord, claims_of, revision_hex
from runtime.contracts.lower import LoweredKernel
from runtime.contracts.probes import Probe, probes_for
from runtime.contracts.references import reference
from runtime.dtypes import NUMPY_DTYPES
from runtime.precision import is_float_dtype, round_to, ulp_distance

INVOKABLE_BACKENDS = frozenset({"cpu"})
REPEATS = 3
_FILLS = (0x00, 0xFF, 0x5A)


def run(lk: LoweredKernel, probe: Probe, inputs: Sequence[np.ndarray], fill: int = 0) -> np.ndarray:
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


def _variants(lk: LoweredKernel, probe: Probe) -> list[tuple[str, list[np.ndarray], int]]:
    """(label, inputs, fill) of every run the bit-stability check compares."""
    runs = [(f"repeat {i}", [a.copy() for a in probe.inputs], _FILLS[i]) for i in range(REPEATS)]
    layouts = [o.layout for o in lk.contract.inputs]
    if all(lay is not None and lay.strided == "accepted" for lay in layouts):
        runs.append(("strided views", [_strided(a) for a in probe.inputs], 0))
    if all(lay is not None and lay.offset == "accepted" for lay in layouts):
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


def check_bit_stable(lk: LoweredKernel, probes: Sequence[Probe]) -> tuple[bool, dict[str, Any]]:
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


def element_errors(got: np.ndarray, ref: np.ndarray) -> dict[str, np.ndarray]:
    """Per-element ulp / relative / absolute error of `got` against `ref` rounded to its dtype."""
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
        relative = np.where(same, 0.0, absolute / np.maximum(np.abs(r), np.finfo(np.float64).tiny))
    return {"max_ulp": np.asarray(ulp), "max_relative": relative, "max_absolute": absolute}


@dataclass
class _Worst:
    value: float = 0.0
    evidence: dict[str, Any] | None = None


def check_bounds(
    lk: LoweredKernel, probes: Sequence[Probe], claims: Sequence[str]
) -> dict[str, _Worst] | None:
    """The worst error per claim over all probes; None when there is no reference."""
    worst = {c: _Worst() for c in claims}
    elements = 0
    for probe in probes:
        ref = reference(lk.op, lk.dtypes, probe.inputs, probe.params)
        if ref is None:
            return None
        got = run(lk, probe, probe.inputs)
        errs = element_errors(got, np.broadcast_to(ref, got.shape))
        elements += got.size
        for claim in claims:
            e = errs[claim]
            if e.size == 0:
                continue
            i = int(np.argmax(e))
            value = float(e.reshape(-1)[i])
            if worst[claim].evidence is None or value > worst[claim].value:
                index = tuple(int(k) for k in np.unravel_index(i, got.shape))
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


def verify_kernel(lk: LoweredKernel) -> list[LedgerRecord]:
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
                w = worst[claim]
                ok = w.value <= float(bound)
                records.append(
                    LedgerRecord(
                        **base,
                        claim=claim,
                        result="pass" if ok else "fail",
                        bound=bound,
                        measured=w.value,
                        evidence=w.evidence or {},
                    )
                )
    except Exception as e:  # a kernel that raises on a probe fails every claim, with the reason
        error = {"error": f"{type(e).__name__}: {e}"}
        return [
            LedgerRecord(**base, claim=c, result="fail", bound=b, evidence=error) for c, b in claims
        ]
    return records


def verify_all(
    kernels: Iterable[LoweredKernel],
    progress: Callable[[int, int, LoweredKernel], None] | None = None,
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
