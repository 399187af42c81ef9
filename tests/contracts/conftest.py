"""Shared fixtures of the kernel-contract tests: a valid contract and a file writer."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

BASE = """---
fkc_version: 1
provider:
  backend: cpu
  kernel_source: test
  revision_base: t1
---

# Test kernels

Intro prose; a heading inside a fence is not a section:

```text
## not a section
```

## exp (f32, f64)

exp one step wider, rounded once.

```fkc
kernel: test_exp
op: exp
inputs:
  - name: x
    dtypes: [f32, f64]
    layout: {contiguous: accepted, strided: accepted, broadcast: accepted, offset: accepted}
    rank: any
    shape: [same_as=out]
outputs:
  - name: out
    dtype_rule: same_as(x)
    shape_rule: same_as(x)
caps:
  awkward_layout: handles_strided
cost:
  provenance: declared
  class: cheap_elementwise
  flops: 10 * n
  bytes: x.bytes + out.bytes
  overhead_ns: 800
precision:
  bit_stable: true
  max_ulp: 2
  audited: true
  notes: computed one step wider
determinism: same_hardware_bitwise
entry_point: runtime.kernels.cpu.contracts.factories:unary
entry_args: {ufunc: exp, compute: f64}
```
"""
"""A valid one-kernel contract file (the rule tests mutate it one field at a time)."""

Writer = Callable[..., Path]
_ids = itertools.count()


@pytest.fixture
def base() -> str:
    return BASE


@pytest.fixture
def write(tmp_path: Path) -> Writer:
    """`write(text, name="k.fkc.md") -> path` in a fresh temporary folder."""

    def _write(text: str, name: str = "k.fkc.md") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return _write


@pytest.fixture
def user_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], str]]:
    """`user_package(source) -> name`: a fresh importable package outside fuel (on sys.path
    for this test only, removed from sys.modules afterwards)."""

    def _make(source: str) -> str:
        name = f"fkc_user_pkg_{next(_ids)}"
        pkg = tmp_path / "site" / name
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text(source)
        monkeypatch.syspath_prepend(str(tmp_path / "site"))
        monkeypatch.delitem(sys.modules, name, raising=False)
        return name

    yield _make
    for mod in [m for m in sys.modules if m.startswith("fkc_user_pkg_")]:
        del sys.modules[mod]
