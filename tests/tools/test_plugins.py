"""A package fuel never names adds a pass and a kernel through its entry points (`fuel.passes`,
`fuel.kernels`), found the way an installed distribution's are: its `.dist-info` on the path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PLUGIN = """
from xdsl.passes import ModulePass

from fuel_dialect.ops_elementwise import NegOp


class DropNegPairs(ModulePass):
    name = "plug-drop-neg-pairs"

    def apply(self, ctx, op):
        for neg in [o for o in op.walk() if isinstance(o, NegOp)]:
            inner = neg.input.owner
            if isinstance(inner, NegOp):
                neg.result.replace_all_uses_with(inner.input)
                neg.detach()
                neg.erase()
        for neg in [o for o in op.walk() if isinstance(o, NegOp) and not o.result.uses]:
            neg.detach()
            neg.erase()


def _exp(ins, outs, params):
    import numpy as np

    np.exp(ins[0], out=outs[0])


def register(table):
    table.register("exp", ("f32", "f32"), "cpu", _exp, kernel_source="fuelplug-exp", revision=1)
"""

ENTRY_POINTS = """[fuel.passes]
plug-drop-neg-pairs = fuelplug:DropNegPairs

[fuel.kernels]
cpu = fuelplug:register
"""

NEG_NEG = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = fuel.neg %x : tensor<4xf32>
  %b = fuel.neg %a : tensor<4xf32>
  %y = fuel.exp %b : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding `fuelplug` and its distribution metadata, as pip would install it."""
    root = tmp_path_factory.mktemp("site")
    (root / "fuelplug").mkdir()
    (root / "fuelplug" / "__init__.py").write_text(PLUGIN)
    info = root / "fuelplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fuelplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    (root / "neg_neg.mlir").write_text(NEG_NEG)
    return root


def fuel(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(site)])}
    return subprocess.run(
        [sys.executable, "-m", *args], capture_output=True, text=True, env=env, cwd=site
    )


def test_fuel_opt_runs_a_pass_an_installed_package_declares(site: Path) -> None:
    done = fuel(site, "tools.fuel_opt", "neg_neg.mlir", "-p", "plug-drop-neg-pairs")
    assert done.returncode == 0, done.stderr
    assert NEG_NEG.count("fuel.neg") == 2
    assert "fuel.exp %x" in done.stdout and "fuel.neg" not in done.stdout


def test_the_kernel_table_holds_a_kernel_an_installed_package_declares(site: Path) -> None:
    done = fuel(site, "tools.fuel", "kernels", "--op", "exp", "--backend", "cpu")
    assert done.returncode == 0, done.stderr
    assert "fuelplug-exp" in done.stdout  # the name only the plug-in's provider binds
