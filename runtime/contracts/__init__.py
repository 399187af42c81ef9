"""Kernel contracts (`*.fkc.md`): kernels declared as data, validated, imported, verified.

A contract file is at once a kernel's documentation and its registration: Markdown with a YAML
front-matter naming the provider, and one `##` section per kernel holding prose and exactly one
```fkc block (see `docs/kernel-contracts.md` for the format). The importer runs

    parse -> validate -> lower -> precision gate -> register -> finalize

(`parse.py`, `validate.py`, `lower.py`, `ledger.py`, `importer.py`); every malformed input is a
typed `FkcError` naming the file and line (`errors.py`, one class per rule). `verify.py` checks
every machine-checkable precision claim and writes the verification ledger the gate reads.

A contract's `entry_point` names only a function its module declares with `@kernel_factory`
(called with the contract's data `entry_args`) or `@kernel_entry` (the kernel itself); see
`entry.py`.
"""

from __future__ import annotations

from runtime.contracts.entry import FUEL_PACKAGES, BuiltKernel, kernel_entry, kernel_factory
from runtime.contracts.errors import (
    FkcError,
    LedgerWarning,
    UnverifiedClaimWarning,
    all_rules,
)
from runtime.contracts.importer import (
    ImportResult,
    Provenance,
    check_files,
    contract_source,
    import_file,
    import_glob,
    load_contracts,
)
from runtime.contracts.ledger import Ledger, LedgerRecord

__all__ = [
    "FUEL_PACKAGES",
    "BuiltKernel",
    "FkcError",
    "ImportResult",
    "Ledger",
    "LedgerRecord",
    "LedgerWarning",
    "Provenance",
    "UnverifiedClaimWarning",
    "all_rules",
    "check_files",
    "contract_source",
    "import_file",
    "import_glob",
    "kernel_entry",
    "kernel_factory",
    "load_contracts",
]
