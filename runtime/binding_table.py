"""The kernel binding table: every kernel fuel can run, keyed by (op, dtypes, backend).

A key is `(op, dtypes, backend)` where `op` is the fuel op name without the dialect prefix
(`"add"`, `"matmul"`), `dtypes` lists one dtype name per operand, inputs in order then outputs
(`("f32", "f32", "f32")`), and `backend` names a backend (`"cpu"`, `"cuda"`). Several sibling
`BindingEntry`s may share a key (e.g. a portable and a vendor matmul); registration order is
sibling order and the residual tie-breaker everywhere.

The table is append-only. `finalize()` rejects the same kernel registered twice at one key.
The process-wide default table and its providers live in `runtime.kernels`.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from runtime.cost import CostFn
from runtime.precision import UNAUDITED, PrecisionGuarantee

OpParams = Mapping[str, Any]
"""Per-op extras read from the op's properties (axes, eps, causal, ...); read-only by contract."""


class Kernel(Protocol):
    """Destination-passing kernel: reads `inputs`, writes every array in `outputs` in place."""

    def __call__(
        self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray], params: OpParams
    ) -> None: ...


BindingKey = tuple[str, tuple[str, ...], str]


@dataclass(frozen=True)
class KernelCaps:
    """What a kernel can read and write. `strided_input`: walks arbitrary strides (incl. stride
    0), so the executor may pass views. `strided_rows`: takes operands whose rows (last dim)
    are dense at any other strides without a copy pass (what it gathers, it gathers into its
    own scratch as it goes), so a transpose that keeps the last dim may be a view for it
    (`runtime.views.ViewPlanner.transpose_view`). `strided_out_rows`: writes its output's rows
    (dense) at any other strides, so a transpose of its output that keeps the last dim may be
    written by it directly (`ViewPlanner.plan_transposes`). `requires_broadcast`: bakes a
    broadcast pattern and would misread a dense operand, so dense lookups never pick it."""

    strided_input: bool = False
    strided_rows: bool = False
    strided_out_rows: bool = False
    requires_broadcast: bool = False


def digest64(data: str | bytes) -> int:
    """The one recipe of a kernel revision (`KernelRevisionHash`): the first 8 bytes of the
    sha256 of `data` (str as UTF-8), big-endian."""
    raw = data.encode() if isinstance(data, str) else data
    return int.from_bytes(hashlib.sha256(raw).digest()[:8], "big")


def revision_hash(kernel: Callable[..., Any], kernel_source: str) -> int:
    """A 64-bit hash of the kernel's source text and provenance tag (0 if source is unknown)."""
    try:
        text = inspect.getsource(kernel)
    except (OSError, TypeError):
        return 0
    return digest64(f"{kernel_source}\n{text}")


@dataclass(frozen=True)
class BindingEntry:
    """One registered kernel and the facts it advertises."""

    kernel: Kernel
    caps: KernelCaps = KernelCaps()
    precision: PrecisionGuarantee = UNAUDITED
    cost: CostFn | None = None
    kernel_source: str = ""
    revision_hash: int = 0
    is_generic: bool = False
    direct: Callable[..., Any] | None = None
    """Optional fast path with the kernel's exact semantics, called positionally as
    `direct(*inputs, *outputs)` (e.g. the numpy ufunc itself); executors may call it instead
    of `kernel` to skip a Python frame per op. Tests check that both write the same bytes."""

    @property
    def name(self) -> str:
        return getattr(self.kernel, "__qualname__", repr(self.kernel))


class BindingTableError(Exception):
    """Base class of binding-table errors."""


class NoKernelForOp(BindingTableError):
    """No admissible kernel at (op, dtypes, backend); the message lists what is registered."""

    def __init__(self, op: str, dtypes: Sequence[str], backend: str, registered: list[str]):
        self.op, self.dtypes, self.backend = op, tuple(dtypes), backend
        self.registered = registered
        what = "\n  ".join(registered) if registered else "(nothing)"
        super().__init__(
            f"no kernel for op '{op}' with dtypes ({', '.join(dtypes)}) on backend '{backend}'; "
            f"registered for '{op}':\n  {what}"
        )


class DuplicateKernel(BindingTableError):
    """The same kernel callable appears twice among one key's siblings."""

    def __init__(self, key: BindingKey, kernel_name: str):
        self.key = key
        op, dtypes, backend = key
        super().__init__(
            f"kernel '{kernel_name}' registered twice for ({op}, [{', '.join(dtypes)}], {backend})"
        )


class FrozenTable(BindingTableError):
    """A published snapshot was written to; use `extend_global_bindings` or `copy()`."""


class KernelBindingTable:
    """Map (op, dtypes, backend) -> ordered sibling `BindingEntry`s."""

    def __init__(self) -> None:
        self._rows: dict[BindingKey, tuple[BindingEntry, ...]] = {}
        self._frozen = False

    # -- writing -------------------------------------------------------------------------

    def register(
        self,
        op: str,
        dtypes: Sequence[str],
        backend: str,
        kernel: Kernel,
        *,
        caps: KernelCaps = KernelCaps(),
        precision: PrecisionGuarantee = UNAUDITED,
        cost: CostFn | None = None,
        kernel_source: str = "",
        revision: int | None = None,
        direct: Callable[..., Any] | None = None,
    ) -> BindingEntry:
        """Append one sibling at (op, dtypes, backend); never rejects (see `finalize`)."""
        if self._frozen:
            raise FrozenTable("this binding table is a published snapshot and is read-only")
        rev = revision_hash(kernel, kernel_source) if revision is None else revision
        entry = BindingEntry(kernel, caps, precision, cost, kernel_source, rev, direct=direct)
        key = (op, tuple(dtypes), backend)
        self._rows[key] = (*self._rows.get(key, ()), entry)
        return entry

    def register_entry(
        self, op: str, dtypes: Sequence[str], backend: str, entry: BindingEntry
    ) -> BindingEntry:
        """Append a sibling another table holds (same kernel, facts and revision)."""
        return self.register(
            op,
            dtypes,
            backend,
            entry.kernel,
            caps=entry.caps,
            precision=entry.precision,
            cost=entry.cost,
            kernel_source=entry.kernel_source,
            revision=entry.revision_hash,
            direct=entry.direct,
        )

    def kernel(
        self, op: str, dtypes: Sequence[str], backend: str, **facts: Any
    ) -> Callable[[Kernel], Kernel]:
        """Decorator form of `register`."""

        def wrap(fn: Kernel) -> Kernel:
            self.register(op, dtypes, backend, fn, **facts)
            return fn

        return wrap

    def finalize(self) -> None:
        """Raise `DuplicateKernel` if any key lists the same kernel callable twice."""
        for key, entries in self._rows.items():
            seen: set[int] = set()
            for e in entries:
                if id(e.kernel) in seen:
                    raise DuplicateKernel(key, e.name)
                seen.add(id(e.kernel))

    def freeze(self) -> KernelBindingTable:
        self._frozen = True
        return self

    def copy(self) -> KernelBindingTable:
        """A writable clone (rows are immutable tuples, so the clone is shallow)."""
        clone = KernelBindingTable()
        clone._rows = dict(self._rows)
        return clone

    # -- reading -------------------------------------------------------------------------

    def lookup_alternatives(
        self, op: str, dtypes: Sequence[str], backend: str
    ) -> tuple[BindingEntry, ...]:
        """Every sibling at the key, in registration order (possibly empty)."""
        return self._rows.get((op, tuple(dtypes), backend), ())

    def lookup_with_caps(self, op: str, dtypes: Sequence[str], backend: str) -> BindingEntry:
        """The first sibling that does not bake a broadcast; `NoKernelForOp` otherwise."""
        for e in self._rows.get((op, tuple(dtypes), backend), ()):
            if not e.caps.requires_broadcast:
                return e
        raise self._miss(op, dtypes, backend)

    def lookup(self, op: str, dtypes: Sequence[str], backend: str) -> BindingEntry:
        """The first sibling regardless of caps; `NoKernelForOp` if the key is empty."""
        entries = self._rows.get((op, tuple(dtypes), backend), ())
        if not entries:
            raise self._miss(op, dtypes, backend)
        return entries[0]

    def backend_supports(self, op: str, dtypes: Sequence[str], backend: str) -> bool:
        """The `lookup_with_caps` admission test without building a diagnostic."""
        entries = self._rows.get((op, tuple(dtypes), backend), ())
        return any(not e.caps.requires_broadcast for e in entries)

    def backends(self) -> list[str]:
        return sorted({b for (_, _, b) in self._rows})

    def iter_keys(self) -> Iterator[BindingKey]:
        return iter(self._rows)

    def iter_entries(self) -> Iterator[tuple[BindingKey, BindingEntry]]:
        for key, entries in self._rows.items():
            for e in entries:
                yield key, e

    def key_count(self) -> int:
        return len(self._rows)

    def __len__(self) -> int:
        return sum(len(v) for v in self._rows.values())

    def _miss(self, op: str, dtypes: Sequence[str], backend: str) -> NoKernelForOp:
        registered = sorted(
            f"({', '.join(d)}) on {b}" + (" [broadcast-baked only]" if _all_baked(es) else "")
            for (o, d, b), es in self._rows.items()
            if o == op
        )
        return NoKernelForOp(op, dtypes, backend, registered)


def _all_baked(entries: tuple[BindingEntry, ...]) -> bool:
    return all(e.caps.requires_broadcast for e in entries)
