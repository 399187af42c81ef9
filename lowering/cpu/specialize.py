"""Finish lowering a module specialised to one input shape (`runtime.shape_specialize`).

A module with dim symbols is compiled once, at symbolic shapes: an op with a `?` dim keeps a
library kernel (generated C bakes its loop bounds), a fused pattern whose precondition is a
static fact is left alone (rope's tables are computed from the symbols), and the picker
prices every `?` at its symbol's hint. On the first run of a new shape the specialiser binds
the symbols, clones the module with concrete types and folds what depends on the symbols
alone into weights (rope's tables, masks); `shape_finisher` then runs on that clone what a
static compile of the shape runs after import: `fuel-optimize` (the picker at the bound
sizes, the fused patterns whose tables are now weights), the stamp stage and generated C.
Later runs of the shape then cost what a static bundle of that shape costs; the finish is
part of the first run's cost (`SymbolicExecutor.specializations`, `fuel run --profile`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from xdsl.utils.exceptions import PassFailedException

from fuel_dialect.dims import function_dims, is_symbolic
from fuel_dialect.shapes import symbol_hints
from lowering.backend import BackendError, KernelArtifact
from lowering.cpu.backend import (
    CpuBackend,
    CpuOptions,
    artifacts_stage,
    codegen_stage,
    stamp_stage,
)
from passes.environment import PassEnvironment
from passes.fused.patterns import known_weights
from passes.optimize import optimize_graph
from passes.picker.support import PickerOptions, parse_hints
from runtime.binding_table import KernelBindingTable
from runtime.compiled import ExecutionError, InputError
from runtime.module import FuelModule
from runtime.shape_specialize import specialize

Finisher = Callable[[FuelModule], FuelModule]
"""Lowers a specialised (static) clone in place and returns it."""


def shape_finisher(
    options: Mapping[str, str] | None = None, table: KernelBindingTable | None = None
) -> Finisher:
    """The finish of a specialised clone under the cpu backend `options` the symbolic module
    was compiled with (`fuel compile --option`, `--precision`, ...: the same precision floor,
    topology and codegen); `table`: the kernels the picker may choose (a bundle's declared
    ones; default: the process-wide table). With `optimize=0` the clone is only stamped."""
    opts = CpuBackend().parse_options("cpu", dict(options or {}))
    env = PassEnvironment(bindings=table)

    def finish(module: FuelModule) -> FuelModule:
        return finish_shape(module, opts, env)

    return finish


def finish_shape(module: FuelModule, opts: CpuOptions, env: PassEnvironment) -> FuelModule:
    """`module` (a specialised clone) optimized, stamped and with its generated C, in place."""
    md: dict[str, Any] = {}
    try:
        if opts.optimize:
            picker = PickerOptions(
                topology=opts.topology, precision=opts.precision, judge=opts.judge
            )
            with known_weights(module.weights):  # rope tables folded into weights: checked
                optimize_graph(module.op, picker, env=env)
        stamp_stage(module, md)
        if opts.generates_c:
            codegen_stage(module, md, opts.precision)
    except (PassFailedException, BackendError) as e:
        raise ExecutionError(f"lowering the specialised module: {e}") from None
    return module


def hint_artifacts(
    module: FuelModule, options: Mapping[str, str] | None = None
) -> list[KernelArtifact]:
    """The library kernels (and fuel's native library) a specialisation of `module` (compiled,
    with dim symbols) at its symbols' hints stamps, that a bundle declares beside its own so
    its specialisations may pick them (a bundle runs only the kernels it declares); generated C
    is left out (a specialisation builds its own). Where the shapes do not fit at the hints (a
    reshape that needs another size), the symbols' low ends; empty for a module without
    symbols or where neither fits."""
    if not is_symbolic(module.entry):
        return []
    opts = CpuBackend().parse_options("cpu", dict(options or {}))
    hints = symbol_hints(module.entry, parse_hints(opts.hint))
    lows = {name: lo for name, (lo, _) in function_dims(module.entry).items()}
    for env in (hints, lows):
        try:
            clone = finish_shape(specialize(module, env), opts, PassEnvironment())
        except (InputError, ExecutionError):
            continue
        return [a for a in artifacts_stage(clone, {}) if a.meta.get("kind") != "c"]
    return []
