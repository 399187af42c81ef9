"""fuel's numpy CPU kernels declared as kernel contracts (`*.fkc.md` in this folder and its
provider subfolders).

This folder (kernel_source `numpy`): the elementwise family (unary math, erf, binary arithmetic,
comparisons, `where`), `matmul`, `cast`, the reductions and `softmax`, `rms_norm` /
`layer_norm` / `rope` / `attention` (both key forms), and the data movement ops except `concat`:
every `numpy`-source kernel of `register_cpu_kernels` but concat.

`torch-blas` (`VENDOR_DIRS`, imported only where torch is installed): matmul f32/f64 on
PyTorch's CPU BLAS, registered *before* the `numpy` contracts, so vendor BLAS is sibling 0 at
its keys: it declares numpy's cost and the same kind of claim, so sibling order (the executor's
default and the picker's residual tie-breaker) decides, and the faster library should win.

One subfolder per alternative kernel_source (one import is one provider), in the hand
registration's order (`PROVIDER_DIRS`): `numpy-flashdecode` (decode-only attention, `Sq == 1`),
`numpy-fast`, `numpy-f64acc`, `numpy-einsum`, `numpy-contig`, `numpy-bcast-row`. The kernel
bodies stay in `runtime.kernels.cpu` (`alternatives.py`, `flash.py`).

Each folder's claims are proven by the `ledger.json` beside its files (regenerate them all with
`fuel verify-kernels --write-ledger` after changing a contract or a kernel it runs).

`register_cpu_kernels_from_contracts` builds the full CPU table: the contracts, plus by hand
only what they cannot express:

* `concat` (9 keys): variadic, any number of inputs under a canonical `(T, T)` key; a
  contract's operand list is fixed (and its cost would need the bytes of every extra input).
* `matmul_bias_act`, `gated_mlp` (4 keys each, `runtime.kernels.cpu.fused`): their costs are
  composed from the numpy parts' cost functions and `matmul_bias_act`'s depends on its `act`
  param, which a contract's cost expression cannot read; their precision is tested against
  float64 in `tests/runtime/kernels/test_cpu_precision.py`.
* any hand-registered family added to `runtime.kernels.cpu` later, until it gets contracts.

Those hand-registered kernels (and the native ones, `runtime.kernels.cpu.native`) are verified by
the same harness (`runtime.contracts.verify.HandKernel`: named `op/kernel_source`, at the entry's
revision hash) into `hand-registered/ledger.json`, and gated by it like the contracts: a claim
without a pass record there registers as UNAUDITED, which no precision floor admits.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

from runtime.binding_table import BindingEntry, KernelBindingTable
from runtime.contracts import ImportResult, Ledger, UnverifiedClaimWarning, import_glob
from runtime.contracts.errors import warn
from runtime.contracts.verify import HandKernel
from runtime.kernels.cpu.library import register_cpu_kernels
from runtime.kernels.cpu.torch_blas import available

CONTRACTS_DIR = Path(__file__).resolve().parent
LEDGER_PATH = CONTRACTS_DIR / "ledger.json"
HAND_LEDGER_PATH = CONTRACTS_DIR / "hand-registered" / "ledger.json"
"""The verification ledger of the hand-registered CPU kernels (no contract file beside it)."""
PROVIDER_DIRS = tuple(
    CONTRACTS_DIR / name
    for name in (
        "numpy-flashdecode",  # registered with the default families (after nn) by hand
        "numpy-fast",  # then `register_alternatives`' order
        "numpy-f64acc",
        "numpy-einsum",
        "numpy-contig",
        "numpy-bcast-row",
    )
)
"""The alternative siblings' providers, one folder each, in the hand registration's order: at
a key several of them share (matmul f32: f64acc, einsum), their sibling order is this order."""


def vendor_dirs() -> tuple[Path, ...]:
    """The vendor-library providers registered before `numpy` (their kernels become sibling 0):
    `torch-blas` where torch is installed (found without importing it), else none."""
    return (CONTRACTS_DIR / "torch-blas",) if available() else ()


def register_cpu_contracts(
    table: KernelBindingTable, *, ledger: Ledger | Path | None = LEDGER_PATH
) -> ImportResult:
    """Register every CPU contract of this folder into `table` (finalized), precision gated by
    `ledger` (default: the checked-in one)."""
    return import_glob(CONTRACTS_DIR, table, ledger=ledger)


def register_cpu_vendor_contracts(table: KernelBindingTable) -> list[ImportResult]:
    """Register the vendor providers' contracts (`vendor_dirs()`) into `table`, each precision
    gated by the ledger beside its files. Call before `register_cpu_contracts`: vendor first."""
    return [import_glob(d, table, ledger=d / "ledger.json") for d in vendor_dirs()]


def register_cpu_sibling_contracts(table: KernelBindingTable) -> list[ImportResult]:
    """Register the alternative siblings' contracts (`PROVIDER_DIRS`, in order) into `table`,
    each precision gated by the ledger beside its files. Call after `register_cpu_contracts`, so
    each key's default `numpy` kernel stays sibling 0."""
    return [import_glob(d, table, ledger=d / "ledger.json") for d in PROVIDER_DIRS]


def _hand_only(results: list[ImportResult]) -> list[HandKernel]:
    """The hand registration's entries that no contract of `results` replaces, in order."""
    replaced = {(k.op, k.dtypes, k.backend, k.kernel_source) for r in results for k in r.kernels}
    scratch = KernelBindingTable()
    register_cpu_kernels(scratch)
    return [
        HandKernel(op, dtypes, backend, e)
        for (op, dtypes, backend), e in scratch.iter_entries()
        if (op, dtypes, backend, e.kernel_source) not in replaced
    ]


def hand_registered_kernels() -> list[HandKernel]:
    """The CPU kernels the default table registers by hand (concat, the fused ops, native; torch
    and native ones where available), with their claims as declared: what `fuel verify-kernels`
    verifies into `HAND_LEDGER_PATH`."""
    table = KernelBindingTable()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnverifiedClaimWarning)  # only the keys matter here
        results = [
            *register_cpu_vendor_contracts(table),
            register_cpu_contracts(table),
            *register_cpu_sibling_contracts(table),
        ]
    return _hand_only(results)


def gate_hand_kernels(
    kernels: list[HandKernel], ledger: Ledger | Path = HAND_LEDGER_PATH
) -> list[BindingEntry]:
    """Each hand-registered entry with its precision gated by `ledger` (measured bounds read
    from it; UNAUDITED where a claim lacks a pass record, with one UnverifiedClaimWarning)."""
    book = ledger if isinstance(ledger, Ledger) else Ledger.load(ledger)
    out, lost = [], []
    for k in kernels:
        precision, missing = book.resolve(k.name, k.backend, k.dtypes, k.revision, k.precision)
        if missing:
            lost.append(f"{k.name} ({', '.join(k.dtypes)}): {', '.join(missing)}")
        out.append(replace(k.entry, precision=precision))
    if lost:
        more = f" and {len(lost) - 4} more" if len(lost) > 4 else ""
        warn(
            UnverifiedClaimWarning,
            f"hand-registered CPU kernels without a pass record in {book.path or 'the ledger'} "
            f"at their revision: {'; '.join(lost[:4])}{more}; registered as UNAUDITED (run "
            "`fuel verify-kernels --write-ledger`)",
        )
    return out


def register_cpu_kernels_from_contracts(table: KernelBindingTable) -> None:
    """The whole CPU kernel library, from contracts wherever a contract can express the kernel.

    Registers the vendor contracts (torch-blas matmul), the `numpy` contracts, then the sibling
    providers in the hand registration's order (so sibling order at every key is the hand
    table's: vendor BLAS, then numpy, then the alternatives), then, from the hand
    registration (`register_cpu_kernels`, built in a scratch table), every entry no contract
    replaces, gated by `HAND_LEDGER_PATH`: today `concat` (variadic), the fused
    `matmul_bias_act` / `gated_mlp` and the native kernels (see the module docstring). A
    leftover lands after the contract siblings of its key; no key has one today (those keys
    have no contract kernel), and `tests/contracts/test_fkc_cpu_migration.py` checks the order.
    """
    results = [
        *register_cpu_vendor_contracts(table),
        register_cpu_contracts(table),
        *register_cpu_sibling_contracts(table),
    ]
    kernels = _hand_only(results)
    for k, entry in zip(kernels, gate_hand_kernels(kernels), strict=True):
        # hand-registered on purpose: concat is variadic, a contract's operand list is fixed
        table.register_entry(k.op, k.dtypes, k.backend, entry)
    table.finalize()


__all__ = [
    "CONTRACTS_DIR",
    "HAND_LEDGER_PATH",
    "LEDGER_PATH",
    "PROVIDER_DIRS",
    "gate_hand_kernels",
    "hand_registered_kernels",
    "register_cpu_contracts",
    "register_cpu_kernels_from_contracts",
    "register_cpu_sibling_contracts",
    "register_cpu_vendor_contracts",
    "vendor_dirs",
]
