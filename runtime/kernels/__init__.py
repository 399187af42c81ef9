"""The kernel libraries the runtime calls, `cpu/` (numpy, native wrappers, torch-BLAS, and
their contracts) and `triton/` (the Triton kernels and their table), and the process-wide
binding table they fill.

The process-wide table is published copy-on-write: readers take an immutable snapshot
(`global_bindings()`), writers (`extend_global_bindings`) clone, register, finalize and swap.
It starts with the CPU kernels; other backends' kernels load on first need
(`ensure_backend_kernels`, from the `BACKEND_PROVIDERS` registry) because loading them costs
imports (the cuda backend's Triton kernels import torch and triton, ~2.6 s).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import entry_points

from runtime.binding_table import KernelBindingTable

KERNELS_GROUP = "fuel.kernels"
"""The entry-point group through which installed packages declare kernel providers: the name
is the backend (`cpu` providers join every table; others load on first need), the value a
`module:function` registering kernels into a table. fuel imports none of them by name."""


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


DEFAULT_PROVIDERS = ("runtime.kernels.cpu.contracts:register_cpu_kernels_from_contracts",)
"""What every table starts with: kernel contracts first (precision claims gated by the
checked-in ledger), then the families not migrated to contracts yet, hand-registered
(runtime/kernels/cpu/contracts). Installed packages add theirs as `fuel.kernels` entry points
named `cpu` (see `declared_providers`)."""


def declared_providers(group: str = KERNELS_GROUP) -> list[tuple[str, str, str]]:
    """(backend, "module:function", distribution) of every `fuel.kernels` entry point of the
    installed packages (fuel's own included), in the order the metadata lists them."""
    return [
        (ep.name, ep.value, ep.dist.name if ep.dist else "") for ep in entry_points(group=group)
    ]


def _load(spec: str) -> Callable[[KernelBindingTable], None]:
    module_name, _, fn_name = spec.partition(":")
    return getattr(importlib.import_module(module_name), fn_name)


def _default_initializers() -> list[Callable[[KernelBindingTable], None]]:
    specs = list(DEFAULT_PROVIDERS)
    specs += [v for name, v, _ in declared_providers() if name == "cpu" and v not in specs]
    return [_load(spec) for spec in specs]


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
for _name, _spec, _dist in declared_providers():  # a package's backend, named like it
    if _name != "cpu" and _name not in BACKEND_PROVIDERS:
        BACKEND_PROVIDERS[_name] = BackendProvider(_spec, f"the {_dist} package")
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
    try:
        register = _load(provider.spec)
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
