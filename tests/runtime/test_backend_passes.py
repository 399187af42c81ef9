"""The cpu backend's `passes` option: a user's pass pipeline runs inside `fuel compile` (and
`fuel run MODEL`), before fuel-optimize, as `fuel-opt -p` would run it (docs/passes.md)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

import passes
from fuel_dialect.ops_elementwise import NegOp
from lowering.backend import BackendError, backend_for, lower
from runtime.module import FuelModule

NEG_NEG = """
func.func @main(%x: tensor<8xf32> {fuel.name = "x"}) -> (tensor<8xf32> {fuel.name = "y"}) {
  %a = fuel.neg %x : tensor<8xf32>
  %b = fuel.neg %a : tensor<8xf32>
  %y = fuel.exp %b : tensor<8xf32>
  func.return %y : tensor<8xf32>
}
"""


@dataclass(frozen=True)
class DropNegPairs(ModulePass):
    """`neg(neg(x))` -> `x` (a plug-in pass, as an installed package would declare it)."""

    name = "test-drop-neg-pairs"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for neg in [o for o in op.walk() if isinstance(o, NegOp)]:
            inner = neg.input.owner
            if isinstance(inner, NegOp) and neg.parent is not None:
                neg.result.replace_all_uses_with(inner.input)
                neg.detach()
                neg.erase()
        for neg in [o for o in op.walk() if isinstance(o, NegOp) and not o.result.uses]:
            neg.detach()
            neg.erase()


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """`test-drop-neg-pairs` as if an installed package declared it under `fuel.passes`."""
    monkeypatch.setattr(passes, "plugin_passes", lambda: {DropNegPairs.name: lambda: DropNegPairs})


def _ops(options: dict[str, str]) -> set[str | None]:
    module = FuelModule.parse(NEG_NEG, "neg_neg.mlir")
    arts = lower(module, "cpu", {"codegen": "none", "judge": "none", **options})
    return {a.meta.get("op") for a in arts}


@pytest.mark.usefixtures("plugin")
def test_a_plugin_pass_runs_before_optimize() -> None:
    assert _ops({}) == {"neg", "exp"}
    assert _ops({"passes": "test-drop-neg-pairs"}) == {"exp"}
    assert _ops({"passes": "cse,test-drop-neg-pairs", "optimize": "0"}) == {"exp"}


@pytest.mark.usefixtures("plugin")
def test_a_bad_pipeline_is_refused_before_compiling() -> None:
    be = backend_for("cpu")
    for spec, msg in (
        ("no-such-pass", "Unrecognized passes"),
        ("cse{x=1}", "not found in expected arguments"),
        ("cse,,dce", "Expected pass name"),
    ):
        with pytest.raises(BackendError, match=f"passes='.*': .*{msg}"):
            be.parse_options("cpu", {"passes": spec})
    assert be.parse_options("cpu", {"passes": "test-drop-neg-pairs"}).passes
