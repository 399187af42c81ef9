"""The per-node dispatch unit: `compile_node` (one table lookup) and completion handles."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from xdsl.ir import Operation

from fuel_dialect.attrs import KERNEL_ATTR, KernelRefAttr
from fuel_dialect.base import KernelOp
from fuel_dialect.dtypes import shape_of
from fuel_dialect.kernel_body import program_ops
from fuel_dialect.ops_triton import LibraryCallOp
from runtime.binding_table import (
    BindingEntry,
    BindingTableError,
    KernelBindingTable,
    NoKernelForOp,
    OpParams,
)
from runtime.module import FuelModule


class StaleKernelStamp(BindingTableError):
    """An op's `fuel.kernel` stamp names a kernel revision the table no longer has."""


@dataclass(frozen=True)
class CompiledNode:
    """A kernel node resolved against the binding table: what the executor calls."""

    op: str
    dtypes: tuple[str, ...]
    backend: str
    entry: BindingEntry
    params: OpParams = field(default_factory=dict)

    @property
    def kernel_source(self) -> str:
        return self.entry.kernel_source

    def output_dtype(self) -> str:
        return self.dtypes[-1]


def compile_node(
    op: str,
    dtypes: Sequence[str],
    backend: str,
    params: OpParams,
    table: KernelBindingTable,
) -> CompiledNode:
    """Resolve (op, dtypes, backend) to its first dense-safe sibling; `NoKernelForOp` if none."""
    entry = table.lookup_with_caps(op, dtypes, backend)
    return CompiledNode(op, tuple(dtypes), backend, entry, params)


def compile_op(op: Operation, table: KernelBindingTable, backend: str = "cpu") -> CompiledNode:
    """`compile_node` for an IR op, honouring a `fuel.kernel` stamp left by the picker.

    A stamp pins the backend, kernel source and revision: the executor runs exactly that
    kernel or fails (fail fast, no silent fallback).
    """
    assert isinstance(op, KernelOp)
    dtypes, params = op.kernel_dtypes(), op.kernel_params()
    stamp = op.attributes.get(KERNEL_ATTR)
    if not isinstance(stamp, KernelRefAttr):
        return compile_node(op.KERNEL_OP, dtypes, backend, params, table)
    name, sdtypes, sbackend = stamp.key()
    for entry in table.lookup_alternatives(name, sdtypes, sbackend):
        if entry.kernel_source == stamp.kernel_source.data:
            if entry.revision_hash != stamp.revision_int():
                raise StaleKernelStamp(
                    f"'{op.name}' is stamped with {stamp.kernel_source.data} kernel revision "
                    f"{stamp.revision.data}, but the table has {entry.revision_hash:016x}; "
                    "re-run the picker"
                )
            return CompiledNode(name, sdtypes, sbackend, entry, params)
    raise NoKernelForOp(name, sdtypes, sbackend, [f"(stamped source '{stamp.kernel_source.data}')"])


def dispatched_kernel_source(op: Operation, table: KernelBindingTable, backend: str = "cpu") -> str:
    """The provenance tag of the kernel the executor will run for `op` (for Judge attribution)."""
    return compile_op(op, table, backend).kernel_source


class Completion(Protocol):
    """An asynchronous kernel's completion; `wait` blocks until its outputs are written."""

    def wait(self) -> None: ...


@dataclass(frozen=True)
class CompletionHandle:
    """`Ready` (nothing to wait for) or `Pending` (wraps a `Completion`)."""

    pending: Completion | None = None

    @property
    def is_ready(self) -> bool:
        return self.pending is None

    def wait(self) -> None:
        if self.pending is not None:
            self.pending.wait()


READY = CompletionHandle()


def Pending(completion: Completion) -> CompletionHandle:  # noqa: N802 (a constructor)
    return CompletionHandle(completion)


def execute_compiled(
    node: CompiledNode, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]
) -> CompletionHandle:
    """Run the node's kernel into `outputs`. CPU kernels are synchronous, so this is `READY`."""
    node.entry.kernel(inputs, outputs, node.params)
    return READY


def library_kernel_id(op: LibraryCallOp) -> str:
    """The bundle's kernel id of a library call: its key and shapes, e.g.
    `matmul_f32_f32_f32_4x8_8x16_4x16`."""
    name, dtypes, _ = op.key()
    shapes = [shape_of(v.type) for v in (*op.args, *op.res)]
    dims = "_".join("x".join(map(str, s)) or "scalar" for s in shapes)
    return f"{name}_{'_'.join(dtypes)}_{dims}"


def library_entry(op: LibraryCallOp, table: Any) -> Any:
    """The binding-table entry a library call runs: its `fuel.kernel` stamp's sibling (at the
    stamped revision) when it carries one for its backend, else the key's first entry."""
    stamp = op.attributes.get(KERNEL_ATTR)
    if not isinstance(stamp, KernelRefAttr) or stamp.backend.data != op.backend.data:
        return table.lookup(*op.key())
    for entry in table.lookup_alternatives(*op.key()):
        if entry.kernel_source == stamp.kernel_source.data:
            if entry.revision_hash != stamp.revision_int():
                raise StaleKernelStamp(
                    f"'{op.callee.data}' is stamped with {stamp.kernel_source.data} revision "
                    f"{stamp.revision.data}, the table has {entry.revision_hash:016x}"
                )
            return entry
    name, dtypes, backend = op.key()
    raise NoKernelForOp(name, dtypes, backend, [f"(stamped source '{stamp.kernel_source.data}')"])


def kernel_id(stamp: KernelRefAttr) -> str:
    """The stable id of a stamped kernel: `op[dtypes]@backend/source`, e.g.
    `matmul[f32,f32,f32]@cpu/numpy` (binding key + provenance tag; never a build counter)."""
    op, dtypes, backend = stamp.key()
    return f"{op}[{','.join(dtypes)}]@{backend}/{stamp.kernel_source.data}"


def kernel_ops(module: FuelModule) -> Iterator[Operation]:
    """Every kernel op of the module, branch arms included, in program order."""
    for op in program_ops(module.op):
        if isinstance(op, KernelOp):
            yield op


class ExecutionError(Exception):
    """A module cannot be compiled or run; the message names the op or input at fault."""


class InputError(ExecutionError):
    """Graph inputs with a wrong name, shape or dtype."""
