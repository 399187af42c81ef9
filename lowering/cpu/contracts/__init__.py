"""fuel's numpy CPU kernels declared as kernel contracts (`*.fkc.md` in this folder).

Migrated: the elementwise family (unary math, erf, binary arithmetic, comparisons, `where`),
`matmul`, `cast`, the reductions and `softmax`, `rms_norm` / `layer_norm` / `rope` /
`attention` (both key forms), and the data movement ops except `concat`: every `numpy`-source
kernel of `register_cpu_kernels` but concat. Their claims are proven by `ledger.json`
(regenerate with `fuel verify-kernels --write-ledger` after changing a contract or a kernel it
runs).

`register_cpu_kernels_from_contracts` builds the full CPU table: the contracts, plus by hand
only what they do not express yet:

* `concat` (9 keys): variadic, any number of inputs under a canonical `(T, T)` key; a
  contract's operand list is fixed (and its cost would need the bytes of every extra input).
* the alternative siblings of other kernel sources (`numpy-fast`, `numpy-f64acc`,
  `numpy-einsum`, `numpy-contig`, `numpy-bcast-row`): not migrated yet (one provider per
  import, so each needs its own folder, and `fuel verify-kernels` only walks this one).
* any hand-registered family added to `lowering.cpu.kernels` since (e.g. `flash`).
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
