"""The extension story end to end: a user writes a contract and a module outside fuel, allows
the package, proves the claim, and the picker chooses the new kernel because it is cheaper."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from frontends.builder import GraphBuilder
from passes.picker.plan import PlanOptions, compile_plan
from passes.picker.ranker import PrecisionRequirement
from runtime.binding_table import KernelBindingTable
from runtime.contracts import UnverifiedClaimWarning, contract_source, import_glob
from runtime.contracts import errors as E
from runtime.kernels.cpu.library import hand_registered_table
from tools.kernels import main as contracts_cli

MODULE = """
import numpy as np

from runtime.contracts import kernel_factory

IMPORTED = True

@kernel_factory
def exp_f32(dtypes, accumulate):
    # exp of f32 computed in f64 and rounded once: faithful, and (the contract says) cheap
    wide = np.dtype(accumulate)

    def fast_exp(inputs, outputs, params):
        np.exp(inputs[0], out=outputs[0], dtype=wide, casting="unsafe")

    return fast_exp
"""

CONTRACT = """---
fkc_version: 1
provider:
  backend: cpu
  kernel_source: userlib
  revision_base: userlib-0.1
---

# userlib: a faster exp

## exp (f32)

A hand-tuned exp that (we declare) costs one FLOP per element and no call overhead.

```fkc
kernel: fast_exp
op: exp
inputs:
  - name: x
    dtypes: [f32]
    layout: {contiguous: accepted, strided: accepted, broadcast: accepted, offset: accepted}
    shape: [same_as=out]
outputs:
  - name: out
    dtype_rule: same_as(x)
    shape_rule: same_as(x)
cost:
  provenance: declared
  class: cheap_elementwise
  flops: n
  bytes: x.bytes + out.bytes
  overhead_ns: 1
precision:
  bit_stable: true
  max_ulp: 1
  audited: true
  notes: computed in f64, rounded once
determinism: same_hardware_bitwise
entry_point: PKG:exp_f32
entry_args: {accumulate: float64}
```
"""


def _winner(table: KernelBindingTable, floor: PrecisionRequirement | None = None) -> str:
    g = GraphBuilder()
    module = g.build(outputs=[g.exp(g.input("x", (4096,)))])
    opts = PlanOptions(table=table, precision=floor or PrecisionRequirement())
    (decision,) = compile_plan(module.op, opts).decisions.values()
    return decision.winner.kernel_source


def _fuel_table() -> KernelBindingTable:
    return hand_registered_table()


def test_user_contract_extends_fuel_end_to_end(
    tmp_path: Path, user_package: Callable[[str], str], capsys: pytest.CaptureFixture[str]
) -> None:
    pkg = user_package(MODULE)
    folder = tmp_path / "contracts"
    folder.mkdir()
    (folder / "userlib.fkc.md").write_text(CONTRACT.replace("PKG", pkg))
    floor = PrecisionRequirement(require_bit_stable=True, max_ulp=1)
    assert _winner(_fuel_table()) != "userlib"

    # 1. Not allowed: refused with the typed error, and the user's module is never imported.
    with pytest.raises(E.EntryPointNotAllowed, match="allow its package"):
        import_glob(folder, _fuel_table())
    assert pkg not in sys.modules

    # 2. Allowed but unproven: registered as UNAUDITED, so neither the picker's precision
    #    floor nor its bit-stable preference lets it win.
    table = _fuel_table()
    with pytest.warns(UnverifiedClaimWarning, match="fast_exp"):
        import_glob(folder, table, allow=(pkg,))
    assert _winner(table) != "userlib" and _winner(table, floor) != "userlib"

    # 3. Prove the claim: `fuel verify-kernels` writes the ledger beside the contract.
    argv = ["verify-kernels", "--contracts", str(folder), "--allow", pkg, "--write-ledger"]
    assert contracts_cli(argv) == 0
    out = capsys.readouterr().out
    assert "1 kernels, 2 claims: 2 passed, 0 failed" in out
    assert (folder / "ledger.json").exists()

    # 4. Proven and cheaper: the picker chooses it, even under a 1-ulp bit-stable floor.
    table = _fuel_table()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnverifiedClaimWarning)
        import_glob(folder, table, allow=(pkg,))
    assert _winner(table) == "userlib" and _winner(table, floor) == "userlib"
    entry = table.lookup_alternatives("exp", ("f32", "f32"), "cpu")[-1]
    assert contract_source(entry).verified  # type: ignore[union-attr]
    x = np.linspace(-3, 3, 11, dtype=np.float32)
    out_arr = np.empty_like(x)
    entry.kernel([x], [out_arr], {})
    np.testing.assert_array_equal(out_arr, np.exp(x.astype(np.float64)).astype(np.float32))

    # 5. The CLI refuses the same contracts without --allow, as one readable line.
    assert contracts_cli(["kernels", "--contracts", str(folder)]) == 1
    assert "FKC-E34" in capsys.readouterr().err
