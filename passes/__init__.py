"""fuel's passes, IR -> IR: a lazy registry of pass name -> pass class (one ModulePass per
file), the picker engine (`passes.picker`) and the fused-op registry and matchers
(`passes.fused`). The conversion passes belong to their backends (`lowering.LOWERING_PASSES`);
`fuel-opt` registers both.

Importing a pass module is deferred until the pass is asked for, so `fuel-opt` starts fast.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points

from xdsl.passes import ModulePass


def _xdsl_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """General-purpose xDSL passes that are useful on fuel IR."""

    def canonicalize() -> type[ModulePass]:
        from xdsl.transforms.canonicalize import CanonicalizePass

        return CanonicalizePass

    def cse() -> type[ModulePass]:
        from xdsl.transforms.common_subexpression_elimination import (
            CommonSubexpressionElimination,
        )

        return CommonSubexpressionElimination

    def dce() -> type[ModulePass]:
        from xdsl.transforms.dead_code_elimination import DeadCodeElimination

        return DeadCodeElimination

    return {"canonicalize": canonicalize, "cse": cse, "dce": dce}


# pass name -> (module, class); imported on first use
_FUEL_PASSES = {
    "fuel-canonicalize": ("passes.canonicalize", "CanonicalizePass"),
    "fuel-enumerate-alternatives": ("passes.enumerate_alternatives", "EnumerateAlternativesPass"),
    "fuel-rank-alternatives": ("passes.rank_alternatives", "RankAlternativesPass"),
    "fuel-place": ("passes.place", "PlacePass"),
    "fuel-select": ("passes.select", "SelectPass"),
    "fuel-bake-variants": ("passes.bake_variants", "BakeVariantsPass"),
    "fuel-emit-decode-flash": ("passes.emit_decode_flash", "EmitDecodeFlashPass"),
    "fuel-emit-dim-branches": ("passes.emit_dim_branches", "EmitDimBranchesPass"),
    "fuel-fuse-casts": ("passes.fuse_casts", "FuseCastsPass"),
    "fuel-fork-placements": ("passes.fork_placements", "ForkPlacementsPass"),
    "fuel-converge-frontier": ("passes.converge_frontier", "ConvergeFrontierPass"),
    "fuel-optimize": ("passes.optimize", "OptimizePass"),
    "fuel-fix-dtypes": ("passes.fix_dtypes", "FixDtypesPass"),
    "fuel-fix-layouts": ("passes.fix_layouts", "FixLayoutsPass"),
    "fuel-fuse-patterns": ("passes.fuse_patterns", "FusePatternsPass"),
    "fuel-insert-residency": ("passes.insert_residency", "InsertResidencyPass"),
}


def lazy_pass(module: str, cls: str) -> Callable[[], type[ModulePass]]:
    """A factory importing `module` and returning its pass class `cls` on first call."""

    def load() -> type[ModulePass]:
        import importlib

        return getattr(importlib.import_module(module), cls)

    return load


PASSES_GROUP = "fuel.passes"
"""The entry-point group through which installed packages add passes: the name is the pass
name, the value `module:PassClass` (imported when the pass is asked for)."""


def plugin_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """The passes installed packages declare in the `fuel.passes` entry-point group."""
    return {ep.name: ep.load for ep in entry_points(group=PASSES_GROUP)}


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Every pass `fuel-opt -p` accepts, by name (fuel's own win over a plugin's namesake)."""
    fuel = {name: lazy_pass(mod, cls) for name, (mod, cls) in _FUEL_PASSES.items()}
    return {**plugin_passes(), **_xdsl_passes(), **fuel}
