"""`fuel kernels` and `fuel verify-kernels`: list the binding table; prove kernel claims.

    fuel kernels [--op X] [--backend Y] [--contracts GLOB ...] [--allow PKG ...] [--cpu-contracts]
    fuel verify-kernels [--write-ledger | --check] [--op X] [--backend Y]
                        [--contracts GLOB ...] [--allow PKG ...]

`fuel kernels` prints one row per kernel (a contract section or a hand-registered function):
its op, backend, caps, cost class, precision claim and status (`verified` by the ledger,
`unaudited`, `audited` without a checkable bound, or `claimed` by a hand registration), the
contract file:line it came from (or "hand-registered"), and its dtype keys.

`fuel verify-kernels` checks every machine-checkable claim of the built-in CPU contracts (or,
given `--contracts`, of those files instead), prints failures and the ledger figures, and with
`--write-ledger` updates the `ledger.json` beside each provider's files (atomically).
`--check` verifies nothing: it only reports claims without a pass record at the current
revision (what CI runs). Entry points outside fuel's packages are imported only for packages
named by `--allow`.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.binding_table import BindingEntry, KernelBindingTable, KernelCaps
from runtime.contracts import Ledger, contract_source, import_glob, load_contracts
from runtime.contracts.importer import expand
from runtime.contracts.ledger import LEDGER_NAME, LedgerRecord, claims_of
from runtime.contracts.lower import lower
from runtime.contracts.verify import Figures, HandKernel, Verifiable, verify_all
from runtime.kernels import global_bindings
from runtime.kernels.cpu.contracts import (
    CONTRACTS_DIR,
    HAND_LEDGER_PATH,
    PROVIDER_DIRS,
    hand_registered_kernels,
    register_cpu_kernels_from_contracts,
    vendor_dirs,
)
from tools.errors import ArgumentParser, CliError, run_parser


def _builtin_contract_dirs() -> list[Path]:
    """The vendor providers' folders (torch-blas, where torch is installed), the numpy provider's
    folder, then one folder per alternative kernel_source (each has its own ledger.json: one
    import is one provider)."""
    return [*vendor_dirs(), CONTRACTS_DIR, *PROVIDER_DIRS]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--op", help="only this op (e.g. exp, matmul)")
    p.add_argument("--backend", help="only this backend (e.g. cpu)")
    p.add_argument(
        "--contracts",
        action="append",
        default=[],
        metavar="GLOB",
        help="contract files: a glob, a directory or a file; repeatable (kernels: "
        "added to the table; verify-kernels: verified instead of the built-in ones)",
    )
    p.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="PKG",
        help="a package outside fuel whose entry points may be imported",
    )


def add_kernels_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add `kernels` to an `add_subparsers()` object; it dispatches to `cmd_kernels`."""
    p = subparsers.add_parser("kernels", help="list the kernel binding table")
    _common(p)
    p.add_argument(
        "--cpu-contracts",
        action="store_true",
        help="build the CPU kernels from runtime/kernels/cpu/contracts instead of the "
        "default table (what the default becomes once switched)",
    )
    p.set_defaults(fn=cmd_kernels)
    return p


def add_verify_kernels_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add `verify-kernels`; it dispatches to `cmd_verify_kernels`."""
    p = subparsers.add_parser("verify-kernels", help="verify kernel precision claims")
    _common(p)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--write-ledger",
        action="store_true",
        help="write the results to each provider's ledger.json",
    )
    mode.add_argument(
        "--check",
        action="store_true",
        help="verify nothing; fail if a claim lacks a pass record at its revision",
    )
    p.set_defaults(fn=cmd_verify_kernels)
    return p


# -- fuel kernels ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    op: str
    backend: str
    kernel: str
    caps: str
    cost_class: str
    precision: str
    status: str
    source: str
    dtypes: tuple[str, ...]


HEADER = Row(
    "op", "backend", "kernel", "caps", "cost", "precision", "status", "source", ("dtypes",)
)


def _caps(c: KernelCaps) -> str:
    text = "strided" if c.strided_input else "contiguous"
    return text + (",baked-broadcast" if c.requires_broadcast else "")


def _key(dtypes: Sequence[str]) -> str:
    return dtypes[0] if len(set(dtypes)) == 1 else ",".join(dtypes)


def _rel(path: str) -> str:
    """`path` relative to the working directory when it lies below it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return path
    return path if rel.startswith("..") else rel


def _status(entry: BindingEntry, verified: bool | None, from_contract: bool) -> str:
    """`unaudited`, `audited` (nothing checkable), `verified` by a ledger, or `claimed` (a
    hand registration no ledger covers: a table built without the gate)."""
    p = entry.precision
    if not p.audited:
        return "unaudited"
    if not claims_of(p):
        return "audited"
    if from_contract:
        return "verified" if verified else "unaudited"
    return "verified" if verified else "claimed"


def _hand_verified(op: str, dtypes: tuple[str, ...], backend: str, entry: BindingEntry) -> bool:
    """A hand-registered CPU entry whose (gated) claims the hand ledger proves."""
    k = HandKernel(op, dtypes, backend, entry)
    p = entry.precision
    if backend != "cpu" or any(getattr(p, c) is None for c in p.measured):
        return False  # measured bounds not read from a ledger: not gated
    declared = p.declared()
    return not _hand_ledger().missing(k.name, backend, dtypes, k.revision, declared)


@functools.cache
def _hand_ledger() -> Ledger:
    return Ledger.load(HAND_LEDGER_PATH)


def table_rows(
    table: KernelBindingTable, op: str | None = None, backend: str | None = None
) -> list[Row]:
    """One row per kernel (entries grouped by their source and facts), dtypes collected."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for (o, dtypes, b), entry in table.iter_entries():
        if (op is not None and o != op) or (backend is not None and b != backend):
            continue
        prov = contract_source(entry)
        name = prov.kernel if prov else entry.name.rsplit(".", 1)[-1]
        kernel = f"{entry.kernel_source}:{name}" if entry.kernel_source else name
        fields = (
            o,
            b,
            kernel,
            _caps(entry.caps),
            prov.cost_class if prov else "-",
            entry.precision.describe(),
            _status(
                entry,
                prov.verified if prov else _hand_verified(o, dtypes, b, entry),
                prov is not None,
            ),
            _rel(prov.path) + f":{prov.line}" if prov else "hand-registered",
        )
        groups.setdefault(fields, []).append(_key(dtypes))
    return [Row(*k, dtypes=tuple(v)) for k, v in groups.items()]  # type: ignore[misc]


def format_rows(rows: Sequence[Row]) -> str:
    """Aligned columns; the dtype list last, so long lists do not push the others."""
    cells = [
        [*(getattr(r, f) for f in Row.__dataclass_fields__ if f != "dtypes"), " ".join(r.dtypes)]
        for r in [HEADER, *rows]
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(cells[0]) - 1)]
    return "\n".join(
        "  ".join([*(c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)), row[-1]]).rstrip()
        for row in cells
    )


def _kernels_table(args: argparse.Namespace) -> KernelBindingTable:
    if args.cpu_contracts:
        table = KernelBindingTable()
        register_cpu_kernels_from_contracts(table)
    else:
        table = global_bindings().copy()
    for pattern in args.contracts:
        import_glob(pattern, table, allow=tuple(args.allow))
    return table


def _nothing_matches(table: KernelBindingTable, op: str | None, backend: str | None) -> str:
    """Why `--op`/`--backend` select no kernel: the names the table does have."""
    keys = [k for k, _ in table.iter_entries()]
    ops, backends = sorted({o for o, _, _ in keys}), sorted({b for _, _, b in keys})
    if op is not None and op not in ops:
        return f"no kernel for op '{op}' (ops: {', '.join(ops)})"
    if backend is not None and backend not in backends:
        return f"no kernel on backend '{backend}' (backends: {', '.join(backends)})"
    return f"no kernel for op '{op}' on backend '{backend}'"


def cmd_kernels(args: argparse.Namespace) -> int:
    """Print the table for the parsed `fuel kernels` arguments."""
    table = _kernels_table(args)
    rows = table_rows(table, args.op, args.backend)
    if not rows and (args.op is not None or args.backend is not None):
        raise CliError(_nothing_matches(table, args.op, args.backend))
    rows.sort(key=lambda r: (r.op, r.backend))
    print(format_rows(rows))
    n = sum(len(r.dtypes) for r in rows)
    print(f"\n{len(rows)} kernels, {n} dtype keys")
    return 0


# -- fuel verify-kernels -----------------------------------------------------------------------


@dataclass
class _Group:
    """The kernels of one provider's files and the ledger beside them (or the hand-registered
    CPU kernels and their ledger: `whole` is False there, as which of them exist depends on the
    machine, so rows of kernels absent here are kept)."""

    ledger_path: Path
    kernels: Sequence[Verifiable]
    whole: bool = True


def _hand_group(args: argparse.Namespace) -> list[_Group]:
    if args.contracts or args.backend not in (None, "cpu"):
        return []
    kernels = [k for k in hand_registered_kernels() if args.op is None or k.op == args.op]
    return [_Group(HAND_LEDGER_PATH, kernels, whole=False)]


def _groups(args: argparse.Namespace) -> list[_Group]:
    out = _hand_group(args)
    for source in args.contracts or _builtin_contract_dirs():
        files = expand(source)
        _, contracts = load_contracts(files, tuple(args.allow))
        kernels = [
            k
            for c in contracts
            for k in lower(c, tuple(args.allow))
            if (args.op is None or k.op == args.op)
            and (args.backend is None or k.backend == args.backend)
        ]
        common = Path(os.path.commonpath([str(f.parent) for f in files]))
        out.append(_Group(common / LEDGER_NAME, kernels))
    return out


def _describe(r: LedgerRecord) -> str:
    ev = r.evidence
    where = ", ".join(
        f"{k}={ev[k]}"
        for k in ("probe", "run", "index", "got", "ref", "first", "again", "inputs", "error", "why")
        if k in ev
    )
    measured = "" if r.measured is None else f" measured {r.measured:g} vs bound {r.bound}"
    return (
        f"{r.result.upper()} {r.kernel} ({', '.join(r.dtypes)}) {r.backend} "
        f"{r.claim}:{measured} {where}"
    ).rstrip()


def _check(groups: Sequence[_Group]) -> int:
    missing = 0
    for g in groups:
        ledger = Ledger.load(g.ledger_path)
        for k in g.kernels:
            lack = ledger.missing(k.name, k.backend, k.dtypes, k.revision, k.precision)
            if lack:
                missing += 1
                print(
                    f"UNPROVEN {k.name} ({', '.join(k.dtypes)}) {k.backend}: "
                    f"{', '.join(lack)} [{_rel(k.where)}]"
                )
    total = sum(len(g.kernels) for g in groups)
    print(f"{total} kernels checked against their ledgers: {missing} with unproven claims")
    return 1 if missing else 0


def cmd_verify_kernels(args: argparse.Namespace) -> int:
    """Verify (or `--check`) the claims for the parsed `fuel verify-kernels` arguments."""
    groups = _groups(args)
    if args.check:
        return _check(groups)
    records: list[LedgerRecord] = []
    for g in groups:
        fresh = verify_all(g.kernels)
        records += fresh
        if args.write_ledger:
            ledger = Ledger.load(g.ledger_path)
            ledger.upsert(fresh)
            if g.whole and args.op is None and args.backend is None:  # all the folder's
                ledger.prune((k.name, k.backend, k.dtypes) for k in g.kernels)
            print(f"wrote {len(fresh)} records to {_rel(str(ledger.save(g.ledger_path)))}")
    for r in records:
        if not r.passed:
            print(_describe(r))
    figures = Figures.of(records)
    print(f"verify-kernels: {figures.line()}")
    return 1 if figures.failed or figures.unproven else 0


def main(argv: Sequence[str] | None = None) -> int:
    """A standalone `fuel`-style entry point holding the two subcommands."""
    parser = ArgumentParser(prog="fuel")
    sub = parser.add_subparsers(dest="command", required=True)
    add_kernels_parser(sub)
    add_verify_kernels_parser(sub)
    return run_parser("fuel", parser, argv)


if __name__ == "__main__":
    sys.exit(main())
