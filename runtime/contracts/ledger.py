"""The verification ledger: which precision claims were proven, for which kernel revision.

A JSON file beside the contracts it covers (`ledger.json`), one record per
(kernel, backend, dtypes, revision hash, claim) with the result (`pass` / `fail` /
`no_probe` / `no_reference`) and its evidence (the measured worst case, its element and
inputs). `fuel verify-kernels --write-ledger` regenerates it; it is checked in.

At import (`gate`), a kernel whose machine-checkable claims do not all have a `pass` record at
its current revision and the current protocol is registered with the UNAUDITED guarantee
instead, so the picker's precision floor only ever admits proven claims. JSON rather than YAML
because 64-bit revision hashes exceed a float's precision: they are stored as hex strings.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from runtime.contracts.errors import LedgerWarning, warn
from runtime.fsutil import atomic_write_text
from runtime.precision import UNAUDITED, PrecisionGuarantee

LEDGER_NAME = "ledger.json"
FORMAT = 1
PROTOCOL = 2
"""Version of the verification protocol (probe sets, references, comparison rules). Bumping it
invalidates every record: claims must be re-proven under the stronger protocol. 2: +0 and -0
are 1 ulp apart (`runtime.precision.ulp_distance`), reductions are probed with signed zeros."""

CLAIMS = ("bit_stable", "max_ulp", "max_relative", "max_absolute")

RecordKey = tuple[str, str, tuple[str, ...], str, str]


def revision_hex(revision: int) -> str:
    return f"{revision:016x}"


def claims_of(p: PrecisionGuarantee) -> list[tuple[str, float | bool]]:
    """The machine-checkable claims of a guarantee as (claim, bound)."""
    out: list[tuple[str, float | bool]] = [("bit_stable", True)] if p.bit_stable else []
    for claim in CLAIMS[1:]:
        bound = getattr(p, claim)
        if bound is not None:
            out.append((claim, bound))
    return out


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

    def missing(
        self, kernel: str, backend: str, dtypes: Sequence[str], revision: int, p: PrecisionGuarantee
    ) -> list[str]:
        """The claims of `p` without a pass record at this revision."""
        return [c for c, _ in claims_of(p) if not self.passed(kernel, backend, dtypes, revision, c)]

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


def gate(claimed: PrecisionGuarantee, missing: Sequence[str]) -> PrecisionGuarantee:
    """The guarantee to register: the claim if nothing is missing, else UNAUDITED."""
    return claimed if not missing else UNAUDITED
