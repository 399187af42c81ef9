"""The import pipeline: parse -> validate -> lower -> precision gate -> register -> finalize.

`import_glob(paths, table, allow=...)` imports every `*.fkc.md` file named (a glob pattern, a
directory, a file, or a list of those) into a `KernelBindingTable`. The files of one import
must declare the same provider (`ProviderMismatch` otherwise); kernel names are unique across
them. Nothing is registered unless every file validates and lowers, so a failed import leaves
the table untouched.

Contract-registered entries remember where they came from (`contract_source`), for
`fuel kernels` and diagnostics.
"""

from __future__ import annotations

import glob
import os
import weakref
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from runtime.binding_table import BindingEntry, KernelBindingTable
from runtime.contracts.errors import (
    DuplicateKernelName,
    DuplicateRegistration,
    FkcError,
    NoContractFiles,
    ProviderMismatch,
    UnverifiedClaimWarning,
    warn,
)
from runtime.contracts.ledger import LEDGER_NAME, Ledger, claims_of
from runtime.contracts.lower import LoweredKernel, lower
from runtime.contracts.model import KernelContract, Provider
from runtime.contracts.parse import parse_file
from runtime.contracts.validate import validate_provider, validate_section
from runtime.precision import PrecisionGuarantee

Paths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
AUTO = "auto"


@dataclass(frozen=True)
class Provenance:
    """Where a registered entry was declared."""

    path: str
    line: int
    kernel: str
    cost_class: str
    verified: bool | None
    """True: every claim proven by the ledger; False: downgraded; None: nothing to prove."""

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


_SOURCES: dict[int, tuple[weakref.ref[BindingEntry], Provenance]] = {}


def contract_source(entry: BindingEntry) -> Provenance | None:
    """The contract that registered `entry`, or None for a hand-registered entry."""
    hit = _SOURCES.get(id(entry))
    return hit[1] if hit is not None and hit[0]() is entry else None


def _remember(entry: BindingEntry, prov: Provenance) -> None:
    key = id(entry)
    _SOURCES[key] = (weakref.ref(entry, lambda _: _SOURCES.pop(key, None)), prov)


@dataclass
class ImportResult:
    provider: Provider
    contracts: list[KernelContract]
    kernels: list[LoweredKernel]
    """Every registration, with the claimed (pre-gate) precision."""
    entries: list[BindingEntry] = field(default_factory=list)
    downgraded: list[LoweredKernel] = field(default_factory=list)


def expand(paths: Paths) -> list[Path]:
    """Files named by a glob pattern, a directory (its `*.fkc.md`), a file, or a list of those;
    sorted, so sibling order at a key is the same on every machine."""
    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    found: set[Path] = set()
    for item in items:
        text = os.fspath(item)
        if Path(text).is_dir():
            found.update(Path(text).glob("*.fkc.md"))
        elif glob.has_magic(text):
            found.update(Path(p) for p in glob.glob(text, recursive=True))
        elif Path(text).is_file():
            found.add(Path(text))
    if not found:
        shown = ", ".join(os.fspath(i) for i in items) or "(nothing)"
        raise NoContractFiles(shown, 0, "no contract file matched")
    return sorted(found)


def load_contracts(
    paths: Paths, allow: Collection[str] = ()
) -> tuple[Provider, list[KernelContract]]:
    """Parse and validate every file; check that they share one provider and unique names."""
    provider: Provider | None = None
    contracts: list[KernelContract] = []
    names: dict[str, KernelContract] = {}
    for path in expand(paths):
        cf = parse_file(path)
        prov = validate_provider(cf)
        if provider is not None and prov.key != provider.key:
            raise ProviderMismatch(
                prov.path,
                prov.line,
                f"provider {prov.key} differs from {provider.key} "
                f"declared at {provider.path}:{provider.line}",
            )
        provider = provider or prov
        for section in cf.sections:
            c = validate_section(section, prov, cf.path, allow)
            if c.name in names:
                first = names[c.name]
                line = c.lines.get(("kernel",), c.line)
                raise DuplicateKernelName(
                    c.path, line, f"kernel '{c.name}' is already declared at {first.where}"
                )
            names[c.name] = c
            contracts.append(c)
    assert provider is not None
    return provider, contracts


def _default_ledger(contracts: Sequence[KernelContract], provider: Provider) -> Ledger:
    dirs = {str(Path(c.path).parent) for c in contracts} or {str(Path(provider.path).parent)}
    return Ledger.load(Path(os.path.commonpath(sorted(dirs))) / LEDGER_NAME)


def apply_gate(
    kernels: Sequence[LoweredKernel], ledger: Ledger
) -> tuple[list[PrecisionGuarantee], list[LoweredKernel]]:
    """The precision each kernel registers with, and the kernels downgraded to UNAUDITED (one
    `UnverifiedClaimWarning` per contract names them)."""
    out, downgraded = [], []
    by_contract: dict[str, list[tuple[LoweredKernel, list[str]]]] = {}
    for k in kernels:
        precision, missing = ledger.resolve(k.name, k.backend, k.dtypes, k.revision, k.precision)
        out.append(precision)
        if missing:
            downgraded.append(k)
            by_contract.setdefault(k.contract.where, []).append((k, missing))
    for where, rows in by_contract.items():
        k = rows[0][0]
        claims = sorted({c for _, m in rows for c in m})
        keys = "; ".join("(" + ", ".join(r.dtypes) + ")" for r, _ in rows[:4])
        more = f" and {len(rows) - 4} more" if len(rows) > 4 else ""
        source = ledger.path if ledger.path is not None else "the ledger"
        warn(
            UnverifiedClaimWarning,
            f"{where}: kernel '{k.name}' ({k.backend}): claim(s) {', '.join(claims)} have no "
            f"pass record in {source} at the current revision for {keys}{more}; registered as "
            f"UNAUDITED (run `fuel verify-kernels --write-ledger`)",
        )
    return out, downgraded


def _same(entry: BindingEntry, k: LoweredKernel) -> bool:
    """The same callable, or the same contract kernel imported again (factories build a fresh
    closure per import, so identity alone would let a second import double every key)."""
    prov = contract_source(entry)
    same_contract = prov is not None and prov.kernel == k.name
    return entry.kernel is k.kernel or (same_contract and entry.kernel_source == k.kernel_source)


def register(
    kernels: Sequence[LoweredKernel],
    precisions: Sequence[PrecisionGuarantee],
    table: KernelBindingTable,
    verified: Iterable[bool | None],
) -> list[BindingEntry]:
    """Append every kernel to `table`, then `finalize()`. Duplicates (the same callable twice
    at one key, within the import or against the table) are refused before anything is added."""
    seen: dict[tuple[object, ...], LoweredKernel] = {}
    for k in kernels:
        key = (k.op, k.dtypes, k.backend, id(k.kernel))
        clash = seen.get(key)
        existing = any(_same(e, k) for e in table.lookup_alternatives(*key[:3]))
        if clash is not None or existing:
            other = f"also by {clash.contract.where}" if clash else "already in the table"
            raise DuplicateRegistration(
                k.contract.path,
                k.contract.line,
                f"kernel '{k.name}' at ({k.op}, {list(k.dtypes)}, {k.backend}) is registered "
                f"twice ({other})",
            )
        seen[key] = k
    entries = []
    for k, precision, ok in zip(kernels, precisions, verified, strict=True):
        c = k.contract
        entry = table.register(
            k.op,
            k.dtypes,
            k.backend,
            k.kernel,
            caps=k.caps,
            precision=precision,
            cost=k.cost,
            kernel_source=k.kernel_source,
            revision=k.revision,
            direct=k.direct,
        )
        _remember(entry, Provenance(c.path, c.line, c.name, c.cost.cost_class, ok))
        entries.append(entry)
    table.finalize()
    return entries


def import_glob(
    paths: Paths,
    table: KernelBindingTable,
    *,
    allow: Collection[str] = (),
    ledger: Ledger | str | os.PathLike[str] | None = AUTO,
    gate_precision: bool = True,
) -> ImportResult:
    """Import contract files into `table` (see the module docstring).

    `allow`: packages besides fuel's own whose entry points may be imported. `ledger`: the
    verification ledger (default: `ledger.json` beside the files; None: an empty one, so every
    claim is downgraded). `gate_precision=False` registers the claims as written, unproven: for
    tools that inspect claims, never for a table the picker reads.
    """
    provider, contracts = load_contracts(paths, allow)
    kernels = [k for c in contracts for k in lower(c, allow)]
    if not gate_precision:
        precisions, downgraded = [k.precision for k in kernels], []
    else:
        if ledger == AUTO:
            book = _default_ledger(contracts, provider)
        elif isinstance(ledger, Ledger):
            book = ledger
        else:
            book = Ledger() if ledger is None else Ledger.load(ledger)
        precisions, downgraded = apply_gate(kernels, book)
    lost = {id(k) for k in downgraded}
    # verified: True = every claim proven, False = downgraded, None = nothing was checked
    verified = [
        id(k) not in lost if gate_precision and claims_of(k.precision) else None for k in kernels
    ]
    entries = register(kernels, precisions, table, verified)
    return ImportResult(provider, contracts, kernels, entries, downgraded)


def import_file(
    path: str | os.PathLike[str], table: KernelBindingTable, **options: object
) -> ImportResult:
    """`import_glob` of one file."""
    return import_glob([path], table, **options)  # type: ignore[arg-type]


def check_files(paths: Paths, allow: Collection[str] = ()) -> list[FkcError]:
    """Every file's first error, without registering anything (for linters and CI)."""
    problems: list[FkcError] = []
    for path in expand(paths):
        try:
            provider, contracts = load_contracts([path], allow)
            for c in contracts:
                lower(c, allow)
        except FkcError as e:
            problems.append(e)
    return problems
