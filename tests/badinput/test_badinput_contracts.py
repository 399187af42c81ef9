"""Hostile kernel contracts through the CLI (`fuel verify-kernels` / `fuel kernels`): a contract
is data, so none of these may run code. Each case writes a contract (and, for some, a package
that would leave a marker file if imported or called), runs the command in a fresh process, and
must exit 1 with one `fuel: error:` line naming the file and the rule, no traceback, and no
marker file. The processes run concurrently (each start costs ~2-4 s of imports)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from runtime.contracts import load_contracts
from runtime.contracts.lower import lower

ROOT = Path(__file__).resolve().parents[2]

CONTRACT = """---
fkc_version: 1
provider: {backend: cpu, kernel_source: hostile, revision_base: h1}
---

## exp (f32)

A contract that tries to run code.

```fkc
kernel: hostile_exp
op: exp
inputs:
  - name: x
    dtypes: [f32]
    layout: {contiguous: accepted, strided: accepted, broadcast: accepted, offset: accepted}
    shape: [same_as=out]
outputs:
  - {name: out, dtype_rule: same_as(x), shape_rule: same_as(x)}
cost: {provenance: declared, class: cheap_elementwise, flops: n, bytes: x.bytes, overhead_ns: 1}
precision: {bit_stable: false, audited: false}
determinism: same_hardware_bitwise
entry_point: ENTRY
ARGS
```
"""

DECLARED = """from runtime.contracts import kernel_factory


@kernel_factory
def exp_wide(dtypes, accumulate):
    raise AssertionError("never reached: the contract names the re-export")
"""

F = "runtime.kernels.cpu.contracts.factories"


@dataclass(frozen=True)
class Case:
    """A contract's entry point and entry_args (`MARKER` stands for the marker file's path),
    the rule it must break, the command, and the package it may bring along."""

    entry: str
    args: str | None
    rule: str
    command: str = "verify-kernels"
    allow: str | None = None
    package: Callable[[Path, str], None] | None = None


def _touching(site: Path, marker: str) -> None:
    """`hostile_pkg`: writes the marker when imported; `bad` writes it when called."""
    (site / "hostile_pkg").mkdir()
    (site / "hostile_pkg" / "__init__.py").write_text(
        f"open({marker!r}, 'w').write('imported')\n\n"
        f"def bad(dtypes, accumulate):\n    open({marker!r}, 'w').write('called')\n"
    )


def _quiet(site: Path, marker: str) -> None:
    """`hostile_pkg`: imports cleanly; re-exports a declared factory, defines an undeclared
    function that writes the marker, and answers every other name through `__getattr__`."""
    (site / "hostile_pkg").mkdir()
    (site / "hostile_pkg" / "impl.py").write_text(DECLARED)
    (site / "hostile_pkg" / "__init__.py").write_text(
        "from hostile_pkg.impl import exp_wide\n\n"
        f"def bad(dtypes, accumulate):\n    open({marker!r}, 'w').write('called')\n\n"
        "def __getattr__(name):\n    return exp_wide\n"
    )


TOUCH = "entry_args: {args: [sh, -c, touch MARKER]}"
EXEC = """entry_args: {source: "open('MARKER', 'w').write('executed')"}"""
WIDE = "entry_args: {accumulate: float64}"


def _allowed_pkg(entry: str, rule: str) -> Case:
    """A case naming `hostile_pkg` (the `_quiet` one), allowed on the command line."""
    return Case(entry, WIDE, rule, allow="hostile_pkg", package=_quiet)


CASES = {
    "dotted-path-out-of-a-module": Case("lowering.cpu.codegen:subprocess.run", TOUCH, "E33"),
    "expression-entry": Case(f"{F}:__import__('os').system", TOUCH, "E33"),
    "fuel-loader-that-execs": Case("runtime.loaders.triton:load_kernel", EXEC, "E41"),
    "fuel-loader-via-kernels": Case("runtime.loaders.triton:load_kernel", EXEC, "E41", "kernels"),
    "fuel-helper-undeclared": Case(f"{F}:_ufunc", "entry_args: {name: exp}", "E41"),
    "fuel-reexported-function": Case(f"{F}:compute_dtype", "entry_args: {}", "E41"),
    "allowed-os-system": Case("os:system", None, "E41", allow="os"),
    "allowed-builtins-exec": Case("builtins:exec", None, "E41", allow="builtins"),
    "allowed-subprocess-run": Case("subprocess:run", TOUCH, "E41", allow="subprocess"),
    "package-not-allowed": Case("hostile_pkg:bad", WIDE, "E34", "kernels", package=_touching),
    "package-undeclared": _allowed_pkg("hostile_pkg:bad", "E41"),
    "package-reexport": _allowed_pkg("hostile_pkg:exp_wide", "E41"),
    "package-getattr-hook": _allowed_pkg("hostile_pkg:other", "E35"),
    "yaml-python-object": Case(
        f"{F}:unary", "entry_args: {ufunc: !!python/object/apply:os.system [touch MARKER]}", "E11"
    ),
    "entry-args-binary": Case(f"{F}:unary", "entry_args: {ufunc: !!binary ZXhw}", "E36"),
    "entry-args-too-deep": Case(f"{F}:unary", "entry_args: {ufunc: [[[[[exp]]]]]}", "E36"),
    "kernel-entry-given-args": Case("runtime.kernels.cpu.alternatives:_add_bias_row", EXEC, "E36"),
}
"""Each case's contract is valid but for its entry point or entry_args."""


def _start(case: Case, tmp: Path) -> tuple[subprocess.Popen[str], Path, Path]:
    marker, site = tmp / "MARKER", tmp / "site"
    site.mkdir()
    if case.package is not None:
        case.package(site, str(marker))
    text = CONTRACT.replace("ENTRY", case.entry).replace("ARGS", case.args or "")
    contract = tmp / "hostile.fkc.md"
    contract.write_text(text.replace("MARKER", str(marker)))
    argv = [sys.executable, "-m", "tools.fuel", case.command, "--contracts", str(contract)]
    argv += ["--allow", case.allow] if case.allow else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)])}
    pipe = subprocess.PIPE
    p = subprocess.Popen(argv, stdout=pipe, stderr=pipe, text=True, cwd=tmp, env=env)
    return p, contract, marker


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str, Path, Path]]:
    """Every case's (exit code, stderr, contract, marker), run concurrently."""
    started = {name: _start(c, tmp_path_factory.mktemp(name)) for name, c in CASES.items()}
    out = {}
    for name, (p, contract, marker) in started.items():
        _, err = p.communicate(timeout=180)
        out[name] = (p.returncode, err, contract, marker)
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_contract_is_refused_without_running_code(
    case: str, results: dict[str, tuple[int, str, Path, Path]]
) -> None:
    rc, err, contract, marker = results[case]
    assert rc == 1, err
    assert err.startswith("fuel: error: ") and "Traceback" not in err, err
    assert f"{contract}:" in err and f"[FKC-{CASES[case].rule}]" in err, err
    assert not marker.exists(), f"{case}: {marker.read_text()!r} ran"


def test_the_contract_is_valid_with_a_declared_factory(tmp_path: Path) -> None:
    """The control: with fuel's own declared factory the same contract lowers."""
    text = CONTRACT.replace("ENTRY", f"{F}:unary").replace(
        "ARGS", "entry_args: {ufunc: exp, compute: f64}"
    )
    (tmp_path / "good.fkc.md").write_text(text)
    (contract,) = load_contracts(tmp_path / "good.fkc.md")[1]
    assert [k.dtypes for k in lower(contract)] == [("f32", "f32")]
