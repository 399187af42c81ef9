"""The kernel binding table: every kernel fuel can run, keyed by (op, dtypes, backend).

A key is `(op, dtypes, backend)` where `op` is the fuel op name without the dialect prefix
(`"add"`, `"matmul"`), `dtypes` lists one dtype name per operand, inputs in order then outputs
(`("f32", "f32", "f32")`), and `backend` names a backend (`"cpu"`, `"cuda"`). Several sibling
`BindingEntry`s may share a key (e.g. a portable and a vendor matmul); registration order is
sibling order and the residual tie-breaker everywhere.

The table is append-only. `finalize()` rejects the same kernel registered twice at one key.
The process-wide default table is published copy-on-write: readers take an immutable snapshot
(`global_bindings()`), writers (`extend_global_bindings`) clone, register, finalize and swap.
It starts with the CPU kernels; other backends' kernels load on first need
(`ensure_backend_kernels`, from the `BACKEND_PROVIDERS` registry) because loading them costs
imports (the cuda backend's Triton kernels import torch and triton, ~2.6 s).
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
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
    """What a kernel can read. `strided_input`: walks arbitrary strides (incl. stride 0), so the
    executor may pass views. `requires_broadcast`: bakes a broadcast pattern and would misread a
    dense operand, so dense lookups never pick it."""

    strided_input: bool = False
    requires_broadcast: bool = False


def revision_hash(kernel: Callable[..., Any], kernel_source: str) -> int:
    """A 64-bit hash of the kernel's source text and provenance tag (0 if source is unknown)."""
    try:
        text = inspect.getsource(kernel)
    except (OSError, TypeError):
        return 0
    digest = hashlib.sha256(f"{kernel_source}\n{text}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


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


# -- the process-wide table ----------------------------------------------------------------


@dataclass
class _GlobalState:
    table: KernelBindingTable | None = None
    generation: int = 0
    writer: threading.Lock = field(default_factory=threading.Lock)
    initializers: list[Callable[[KernelBindingTable], None]] = field(default_factory=list)
    loader: threading.Lock = field(default_factory=threading.Lock)
    """Serializes backend loading (taken before, never inside, `writer`)."""
    loaded: set[str] = field(default_factory=set)
    unavailable: dict[str, str] = field(default_factory=dict)
    """Backend -> why its provider could not load (asked once per process)."""


_STATE = _GlobalState()


def _default_initializers() -> list[Callable[[KernelBindingTable], None]]:
    # Kernel contracts first (precision claims gated by the checked-in ledger), then the
    # families not migrated to contracts yet, hand-registered (runtime/kernels/cpu/contracts).
    from runtime.kernels.cpu.contracts import register_cpu_kernels_from_contracts

    return [register_cpu_kernels_from_contracts]


def global_bindings() -> KernelBindingTable:
    """The current immutable snapshot of the process-wide table (built on first use)."""
    table = _STATE.table
    if table is None:
        with _STATE.writer:
            if _STATE.table is None:
                fresh = KernelBindingTable()
                for init in _default_initializers():
                    init(fresh)
                fresh.finalize()
                _STATE.table = fresh.freeze()
                _STATE.generation += 1
            table = _STATE.table
    return table


def extend_global_bindings(fn: Callable[[KernelBindingTable], None]) -> KernelBindingTable:
    """Atomically publish `fn` applied to a clone of the current table; returns the new snapshot.

    Readers holding an older snapshot keep seeing it unchanged. Writers are serialized, so
    check-then-register inside `fn` is atomic. The generation counter is bumped.
    """
    current = global_bindings()
    with _STATE.writer:
        base = _STATE.table if _STATE.table is not None else current
        fresh = base.copy()
        fn(fresh)
        fresh.finalize()
        _STATE.table = fresh.freeze()
        _STATE.generation += 1
        return _STATE.table


def bindings_generation() -> int:
    """Bumped by every publication of the process-wide table."""
    return _STATE.generation


# -- backends loaded on first need ---------------------------------------------------------


@dataclass(frozen=True)
class BackendProvider:
    """Where a backend's kernels come from: `spec` is `"module:function"`, the function
    registering them into a table; `requires` names what must be installed, for the note."""

    spec: str
    requires: str = ""


BACKEND_PROVIDERS: dict[str, BackendProvider] = {
    "cuda": BackendProvider(
        "runtime.kernels.triton.registry:register_triton_kernels", "torch and triton"
    ),
}
"""Backends whose kernels join the process-wide table on first need (`ensure_backend_kernels`).
The planner asks for the backends of its topology's devices, the executor for a device's
backends when it compiles an op for it; a CPU-only run never imports a provider."""


def register_backend_provider(backend: str, provider: BackendProvider) -> None:
    """Declare (or replace) the provider of `backend`; a backend already loaded stays loaded."""
    with _STATE.loader:
        BACKEND_PROVIDERS[backend] = provider
        _STATE.unavailable.pop(backend, None)


def ensure_backend_kernels(backends: Iterable[str]) -> dict[str, str]:
    """Load the kernels of each of `backends` that has a provider and is not loaded yet into the
    process-wide table (one `extend_global_bindings` per backend; thread-safe, idempotent).
    Returns `{backend: why}` for those whose provider cannot be imported (asked once: the answer
    is kept). Backends without a provider (e.g. "cpu") are served by the default table."""
    wanted = [b for b in dict.fromkeys(backends) if b in BACKEND_PROVIDERS]
    if all(b in _STATE.loaded or b in _STATE.unavailable for b in wanted):
        return {b: _STATE.unavailable[b] for b in wanted if b in _STATE.unavailable}
    with _STATE.loader:
        for b in wanted:
            if b not in _STATE.loaded and b not in _STATE.unavailable:
                _load_backend(b, BACKEND_PROVIDERS[b])
        return {b: _STATE.unavailable[b] for b in wanted if b in _STATE.unavailable}


def _load_backend(backend: str, provider: BackendProvider) -> None:
    module_name, _, fn_name = provider.spec.partition(":")
    try:
        register = getattr(importlib.import_module(module_name), fn_name)
    except Exception as e:  # a missing or broken install: a note, never a traceback
        need = f"; it needs {provider.requires}" if provider.requires else ""
        _STATE.unavailable[backend] = (
            f"backend '{backend}' has no kernels: {provider.spec} could not be loaded "
            f"({type(e).__name__}: {e}){need}"
        )
        return
    extend_global_bindings(register)
    _STATE.loaded.add(backend)


def loaded_backends() -> frozenset[str]:
    """Backends whose provider has been loaded into the process-wide table."""
    return frozenset(_STATE.loaded)
