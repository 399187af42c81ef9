"""The verification ledger: which precision claims were proven, for which kernel revision.

A JSON file beside the contracts it covers (`ledger.json`), one record per
(kernel, backend, dtypes, revision hash, claim) with the result (`pass` / `fail` /
`no_probe` / `no_reference`) and its evidence (the measured worst case, its element and
inputs). `fuel verify-kernels --write-ledger` regenerates it; it is checked in.

At import (`Ledger.resolve`), a kernel whose machine-checkable claims do not all have a `pass`
record at its current revision and the current protocol is registered with the UNAUDITED
guarantee instead, so the picker's precision floor only ever admits proven claims. A measured
claim (`PrecisionGuarantee.measured`) takes its bound from its record: the worst case measured on
the probe set, rounded up (`measured_bound`). JSON rather than YAML
because 64-bit revision hashes exceed a float's precision: they are stored as hex strings.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from runtime.contracts.errors import LedgerWarning, warn
from runtime.fsutil import atomic_write_text
from runtime.precision import UNAUDITED, PrecisionGuarantee

LEDGER_NAME = "ledger.json"
FORMAT = 1
PROTOCOL = 3
"""Version of the verification protocol (probe sets, references, comparison rules). Bumping it
invalidates every record: claims must be re-proven under the stronger protocol. 2: +0 and -0
are 1 ulp apart (`runtime.precision.ulp_distance`), reductions are probed with signed zeros.
3: measured claims; `max_relative` is normwise for `verify.NORMWISE_OPS`."""

CLAIMS = ("bit_stable", "max_ulp", "max_relative", "max_absolute")

RecordKey = tuple[str, str, tuple[str, ...], str, str]


def revision_hex(revision: int) -> str:
    return f"{revision:016x}"


def claims_of(p: PrecisionGuarantee) -> list[tuple[str, float | bool | None]]:
    """The machine-checkable claims of a guarantee as (claim, bound); a measured claim's bound
    is None (the verification measures it)."""
    out: list[tuple[str, float | bool | None]] = [("bit_stable", True)] if p.bit_stable else []
    for claim in CLAIMS[1:]:
        bound = getattr(p, claim)
        if claim in p.measured:
            out.append((claim, None))
        elif bound is not None:
            out.append((claim, bound))
    return out


MEASURED_CLAIMS = ("max_ulp", "max_relative")
"""The bounds a claim may leave to measurement (an absolute error bound depends on the data's
scale, so a probe set cannot stand for it)."""


def measured_bound(claim: str, worst: float, unit_roundoff: float) -> float | None:
    """The bound a measured claim records for the worst case `worst` on the probes: ulp as
    the integer itself, relative errors rounded up to two significant digits; never tighter
    than one unit (1 ulp, or the output dtype's unit roundoff), since exactness is for proofs,
    not measurements. None when nothing finite was measured (no bound holds)."""
    if not math.isfinite(worst):
        return None
    if claim == "max_ulp":
        return float(max(1, math.ceil(worst)))
    if worst <= unit_roundoff:
        return unit_roundoff
    step = 10.0 ** (math.floor(math.log10(worst)) - 1)
    bound = math.ceil(worst / step) * step
    return float(f"{bound:.2g}") if float(f"{bound:.2g}") >= worst else bound


@dataclass(frozen=True)
class LedgerRecord:
    kernel: str
    backend: str
    dtypes: tuple[str, ...]
    revision: str
    claim: str
    result: str
    bound: float | bool | None = None
    measured: float | None = None
    protocol: int = PROTOCOL
    evidence: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def key(self) -> RecordKey:
        return (self.kernel, self.backend, self.dtypes, self.revision, self.claim)

    @property
    def passed(self) -> bool:
        return self.result == "pass" and self.protocol == PROTOCOL

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["dtypes"] = list(self.dtypes)
        return d


class Ledger:
    """Records by key; `path` is where it was read from (None for an in-memory ledger)."""

    def __init__(self, records: Iterable[LedgerRecord] = (), path: Path | None = None) -> None:
        self.path = path
        self.records: dict[RecordKey, LedgerRecord] = {r.key: r for r in records}

    @staticmethod
    def load(path: str | Path) -> Ledger:
        """Read a ledger; a missing file is empty, a malformed one is empty with a warning."""
        p = Path(path)
        if not p.exists():
            return Ledger(path=p)
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
            rows = doc["records"] if doc.get("format") == FORMAT else None
            if rows is None:
                raise ValueError(f"unsupported ledger format {doc.get('format')!r}")
            records = [_record(r) for r in rows]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            warn(LedgerWarning, f"{p}: unreadable verification ledger ({e}); no claim is proven")
            return Ledger(path=p)
        return Ledger(records, p)

    def passed(
        self, kernel: str, backend: str, dtypes: Sequence[str], revision: int, claim: str
    ) -> bool:
        """Whether `claim` has a pass record at this revision under the current protocol."""
        r = self.records.get((kernel, backend, tuple(dtypes), revision_hex(revision), claim))
        return r is not None and r.passed

    def record(
        self, kernel: str, backend: str, dtypes: Sequence[str], revision: int, claim: str
    ) -> LedgerRecord | None:
        return self.records.get((kernel, backend, tuple(dtypes), revision_hex(revision), claim))

    def missing(
        self, kernel: str, backend: str, dtypes: Sequence[str], revision: int, p: PrecisionGuarantee
    ) -> list[str]:
        """The claims of `p` without a pass record at this revision (a measured claim also
        needs its recorded bound)."""
        out = []
        for claim, _ in claims_of(p):
            r = self.record(kernel, backend, dtypes, revision, claim)
            if r is None or not r.passed or (claim in p.measured and r.bound is None):
                out.append(claim)
        return out

    def resolve(
        self, kernel: str, backend: str, dtypes: Sequence[str], revision: int, p: PrecisionGuarantee
    ) -> tuple[PrecisionGuarantee, list[str]]:
        """(the guarantee to register, the claims lacking a pass record): the claim with its
        measured bounds read from their records when all are proven, else UNAUDITED."""
        lack = self.missing(kernel, backend, dtypes, revision, p)
        if lack:
            return UNAUDITED, lack
        bounds = {}
        for claim in p.measured:
            r = self.record(kernel, backend, dtypes, revision, claim)
            assert r is not None and r.bound is not None
            bounds[claim] = int(r.bound) if claim == "max_ulp" else float(r.bound)
        return p.resolved(bounds), []

    def upsert(self, records: Iterable[LedgerRecord]) -> None:
        """Add `records`, dropping older records of the same (kernel, backend, dtypes, claim)
        at any revision: a re-verified kernel keeps only its current rows."""
        new = list(records)
        fresh = {(r.kernel, r.backend, r.dtypes, r.claim) for r in new}
        self.records = {
            k: r
            for k, r in self.records.items()
            if (r.kernel, r.backend, r.dtypes, r.claim) not in fresh
        }
        self.records.update((r.key, r) for r in new)

    def prune(self, current: Iterable[tuple[str, str, tuple[str, ...]]]) -> None:
        """Drop the records of every (kernel, backend, dtypes) not in `current`: kernels that
        were renamed, split or removed leave no stale rows behind."""
        keep = set(current)
        self.records = {
            k: r for k, r in self.records.items() if (r.kernel, r.backend, r.dtypes) in keep
        }

    def to_text(self) -> str:
        """Deterministic JSON, one record per line (sorted, no timestamps): regenerating the
        ledger changes exactly the lines of the records that changed."""
        rows = sorted(self.records.values(), key=lambda r: r.key)
        body = ",\n".join(
            json.dumps(r.to_json(), sort_keys=True, separators=(",", ":"), allow_nan=False)
            for r in rows
        )
        return f'{{"format": {FORMAT}, "protocol": {PROTOCOL}, "records": [\n{body}\n]}}\n'

    def save(self, path: str | Path | None = None) -> Path:
        """Write atomically to `path` (default: where it was loaded from); the path written."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise ValueError("an in-memory ledger needs a path to be saved")
        atomic_write_text(target, self.to_text())
        return target


def _record(row: dict[str, Any]) -> LedgerRecord:
    return LedgerRecord(
        kernel=str(row["kernel"]),
        backend=str(row["backend"]),
        dtypes=tuple(str(d) for d in row["dtypes"]),
        revision=str(row["revision"]),
        claim=str(row["claim"]),
        result=str(row["result"]),
        bound=row.get("bound"),
        measured=row.get("measured"),
        protocol=int(row.get("protocol", 0)),
        evidence=dict(row.get("evidence") or {}),
    )
