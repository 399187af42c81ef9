"""The backend interface every lowering target implements (CPU today, Triton for GPUs).

Shaped after Triton's own `BaseBackend`: a backend turns free-form command-line options into a
frozen options object (`parse_options`) and appends its named lowering stages to an ordered
stage table (`add_stages`). `lower` runs the stages in order; each stage takes the previous
stage's product and a shared metadata dict. The last stage yields `KernelArtifact`s, the unit
the kernel bundle stores. A new backend (generated CPU code, another GPU target) drops in by
registering itself with `register_backend`; nothing else changes.

Each stage runs as a `passes.instrument` stage named `<target>-<stage>` (`cpu-optimize`,
`sm_90-aot`), so `fuel compile --dump-dir`, `--time-passes` and `FUEL_LOG` see it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from passes.instrument import expect, run_stage

Stage = Callable[[Any, dict[str, Any]], Any]
"""One lowering step: (product of the previous stage, shared metadata) -> next product."""


class BackendError(Exception):
    """Unknown target, bad backend option, or a lowering stage that cannot proceed."""


@dataclass(frozen=True)
class KernelArtifact:
    """One kernel as the bundle stores it.

    `kernel_id` is stable across builds (the binding-table key or generated group name);
    `revision` is the kernel's revision hash; `files` maps bundle-relative paths to bytes
    (sources, PTX, cubin); `meta` is JSON-serializable (signature, launch grid, target, ...).
    """

    kernel_id: str
    revision: int
    backend: str
    files: Mapping[str, bytes] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)


class Backend(Protocol):
    """A lowering target."""

    name: str

    def supports_target(self, target: str) -> bool:
        """True when this backend lowers for `target` (e.g. "cpu", "sm_90")."""
        ...

    def parse_options(self, target: str, options: Mapping[str, str]) -> Any:
        """Validate `options` (raise BackendError on unknown keys or bad values)."""
        ...

    def add_stages(self, stages: dict[str, Stage], options: Any) -> None:
        """Append this backend's stages, in order, to `stages`."""
        ...


_BACKENDS: dict[str, Callable[[], Backend]] = {}


def register_backend(name: str, factory: Callable[[], Backend]) -> None:
    """Make a backend available by name; the factory runs on first use (lazy imports)."""
    _BACKENDS[name] = factory


def backend_for(target: str) -> Backend:
    """The backend that lowers for `target`; BackendError listing the known ones otherwise."""
    _register_builtin()
    for factory in _BACKENDS.values():
        backend = factory()
        if backend.supports_target(target):
            return backend
    raise BackendError(f"no backend lowers for target {target!r} (backends: {sorted(_BACKENDS)})")


def lower(
    module: Any,
    target: str,
    options: Mapping[str, str] | None = None,
    metadata: dict[str, Any] | None = None,
) -> Any:
    """Run every stage of `target`'s backend over `module`; returns the last stage's product.

    `metadata`, when given, is the dict the stages share: after the call it holds what they
    recorded (e.g. the lowered IR), plus "target" and "backend".
    """
    backend = backend_for(target)
    parsed = backend.parse_options(target, options or {})
    stages: dict[str, Stage] = {}
    backend.add_stages(stages, parsed)
    md = metadata if metadata is not None else {}
    md.update(target=target, backend=backend.name)
    expect(len(stages))
    product = module
    for name, stage in stages.items():
        product = run_stage(f"{target}-{name}", stage, product, md)
    return product


def _register_builtin() -> None:
    """Backends shipped with fuel, each imported lazily by its own module."""
    import importlib

    for name, module in (("cpu", "lowering.cpu.backend"), ("triton", "lowering.triton.backend")):
        if name in _BACKENDS:
            continue
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:  # a backend whose package is not installed
            if e.name and e.name.split(".")[0] in ("triton", "torch"):
                continue
            if e.name == module:
                continue
            raise
        register_backend(name, mod.make_backend)
