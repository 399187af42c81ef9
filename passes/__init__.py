"""fuel's passes: a lazy registry of pass name -> pass class (one ModulePass per file).

Importing a pass module is deferred until the pass is asked for, so `fuel-opt` starts fast.
"""

from __future__ import annotations

from collections.abc import Callable

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


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Every pass `fuel-opt -p` accepts, by name."""
    return {**_xdsl_passes()}
