"""What a pass consults besides the IR: the binding table and the topology.

A pass reads them from its xDSL context (`FuelContext.env`), never from a global. The one
default, the process-wide table with the kernels of the topology's backends loaded into it,
is resolved here (`bindings_or_default`), so a library user can run any pass or the whole
`fuel-optimize` pipeline against a table and a topology of their own:

    ctx = pass_context(PassEnvironment(bindings=my_table, topology=my_topology))
    OptimizePass().apply(ctx, module)

`fuel-opt` and `fuel compile` run with the default environment (`PassEnvironment()`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields

from xdsl.context import Context

from fuel_dialect.dialect import fuel_context
from runtime.binding_table import KernelBindingTable
from runtime.kernels import bindings_generation, ensure_backend_kernels, global_bindings
from runtime.topology import SystemTopology


@dataclass(frozen=True)
class PassEnvironment:
    """The kernels and devices passes plan with (None: the process-wide default)."""

    bindings: KernelBindingTable | None = None
    """The table to enumerate, price and stamp kernels from; None: the process-wide table."""
    topology: SystemTopology | None = None
    """The devices to plan across where a pass's `topology` option names no file; None:
    detect this machine."""


@dataclass
class FuelContext(Context):
    """An xDSL context that also carries the passes' environment."""

    env: PassEnvironment = field(default_factory=PassEnvironment)

    def clone(self) -> FuelContext:
        base = super().clone()
        return FuelContext(**{f.name: getattr(base, f.name) for f in fields(Context)}, env=self.env)


def pass_context(env: PassEnvironment | None = None) -> FuelContext:
    """A context with fuel's dialects loaded and `env` (default: the process-wide one)."""
    base = fuel_context()
    return FuelContext(
        **{f.name: getattr(base, f.name) for f in fields(Context)}, env=env or PassEnvironment()
    )


def environment(ctx: Context) -> PassEnvironment:
    """`ctx`'s environment; a plain xDSL context gets the default one."""
    return ctx.env if isinstance(ctx, FuelContext) else PassEnvironment()


def bindings_or_default(
    table: KernelBindingTable | None, backends: Iterable[str] = ()
) -> tuple[KernelBindingTable, dict[str, str]]:
    """`table` as is, or the process-wide table with the kernels of `backends` loaded into it;
    with the backends whose kernels could not load (`{backend: why}`, empty for a given table).
    The only place a pass reaches the process-wide table."""
    if table is not None:
        return table, {}
    unavailable = ensure_backend_kernels(backends)
    return global_bindings(), unavailable


def table_or_default(table: KernelBindingTable | None) -> KernelBindingTable:
    """`table`, or the process-wide table as it stands (no backend loaded)."""
    return bindings_or_default(table)[0]


__all__ = [
    "FuelContext",
    "PassEnvironment",
    "bindings_generation",
    "bindings_or_default",
    "environment",
    "pass_context",
    "table_or_default",
]
