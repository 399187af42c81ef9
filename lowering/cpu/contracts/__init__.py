"""fuel's numpy CPU kernels declared as kernel contracts (`*.fkc.md` in this folder).

Migrated so far: the elementwise family (unary math, binary arithmetic, comparisons, `where`)
and `matmul`, i.e. everything `register_elementwise` and `register_linalg` register by hand.
Their precision claims are proven by `ledger.json` (regenerate with
`fuel verify-kernels --write-ledger` after changing a contract or a kernel it runs).

`register_cpu_kernels_from_contracts` is the full CPU table built this way: the migrated
kernels from contracts, the rest still by hand until their contracts exist (cast, reductions
and softmax, norms/rope/attention, data movement, and the alternative siblings of
`lowering.cpu.kernels`; the harness has no verification probes for most of them yet, see
`runtime.contracts.probes`).
"""

from __future__ import annotations

from pathlib import Path

from runtime.binding_table import KernelBindingTable
from runtime.contracts import ImportResult, Ledger, import_glob

CONTRACTS_DIR = Path(__file__).resolve().parent
LEDGER_PATH = CONTRACTS_DIR / "ledger.json"


def register_cpu_contracts(
    table: KernelBindingTable, *, ledger: Ledger | Path | None = LEDGER_PATH
) -> ImportResult:
    """Register every CPU contract of this folder into `table` (finalized), precision gated by
    `ledger` (default: the checked-in one)."""
    return import_glob(CONTRACTS_DIR, table, ledger=ledger)


def register_cpu_kernels_from_contracts(table: KernelBindingTable) -> None:
    """The whole CPU kernel library with the migrated kernels from contracts.

    Builds the hand-registered library (`register_cpu_kernels`) in a scratch table and keeps
    every entry a contract does not replace: the families without contracts yet, and the
    alternative siblings of other kernel sources at migrated keys. Contract kernels register
    first, so each key's default `numpy` kernel stays sibling 0, as in the hand table.
    """
    from lowering.cpu.kernels import register_cpu_kernels

    result = register_cpu_contracts(table)
    replaced = {(k.op, k.dtypes, k.backend, k.kernel_source) for k in result.kernels}
    scratch = KernelBindingTable()
    register_cpu_kernels(scratch)
    for (op, dtypes, backend), e in scratch.iter_entries():
        if (op, dtypes, backend, e.kernel_source) in replaced:
            continue
        table.register(
            op,
            dtypes,
            backend,
            e.kernel,
            caps=e.caps,
            precision=e.precision,
            cost=e.cost,
            kernel_source=e.kernel_source,
            revision=e.revision_hash,
            direct=e.direct,
        )
    table.finalize()


__all__ = [
    "CONTRACTS_DIR",
    "LEDGER_PATH",
    "register_cpu_contracts",
    "register_cpu_kernels_from_contracts",
]
