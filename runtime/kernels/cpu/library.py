"""The CPU kernel library's hand registration: every family in its order, and the finalized
table of exactly this library (the reference the kernel tests and the contracts' equivalence
check run against). Kept out of the package `__init__`, so importing one kernel module (the
native C helpers read `special`'s tables) does not import them all.
"""

from __future__ import annotations

from runtime.binding_table import KernelBindingTable
from runtime.kernels.cpu.alternatives import register_alternatives
from runtime.kernels.cpu.cast import register_cast
from runtime.kernels.cpu.elementwise import register_elementwise
from runtime.kernels.cpu.flash import register_flash
from runtime.kernels.cpu.fused import register_fused
from runtime.kernels.cpu.linalg import register_linalg
from runtime.kernels.cpu.movement import register_movement
from runtime.kernels.cpu.native import register_native
from runtime.kernels.cpu.nn import register_nn
from runtime.kernels.cpu.reduction import register_reduction
from runtime.kernels.cpu.torch_blas import register_torch_blas_matmul
from runtime.kernels.cpu.vecmath import register_vecmath

FAMILIES = (
    register_elementwise,
    register_cast,
    register_reduction,
    register_torch_blas_matmul,  # before linalg: vendor BLAS first, the tie-breaker (torch_blas)
    register_linalg,
    register_nn,
    register_movement,
    register_flash,  # after nn: the generic attention stays each key's default
    register_fused,  # after elementwise and linalg: its costs are composed from theirs
)


def register_cpu_kernels(table: KernelBindingTable) -> None:
    """Register every numpy CPU kernel into `table` (call `table.finalize()` afterwards)."""
    for register in FAMILIES:
        register(table)
    register_alternatives(table)  # each key's numpy kernel stays sibling 0 (the default)
    register_native(table)  # last, like the contracts table's hand-only entries (native.py)
    register_vecmath(table)  # the generated kernels' f32 math, also callable on its own


def hand_registered_table() -> KernelBindingTable:
    """A finalized table of exactly this library's hand registration (the reference that the
    kernel tests and the contracts' equivalence check run against)."""
    table = KernelBindingTable()
    register_cpu_kernels(table)
    table.finalize()
    return table
