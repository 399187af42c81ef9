"""`fuel kernels` and `fuel verify-kernels` (through their standalone entry point)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.kernels.cpu.contracts import LEDGER_PATH
from tools.kernels import main

Capsys = pytest.CaptureFixture[str]


def test_kernels_lists_contract_kernels_with_their_source(capsys: Capsys) -> None:
    assert main(["kernels", "--cpu-contracts", "--op", "exp"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header, rows = lines[0], [ln for ln in lines[1:] if ln.startswith("exp ")]
    assert header.split() == [
        "op",
        "backend",
        "kernel",
        "caps",
        "cost",
        "precision",
        "status",
        "source",
        "dtypes",
    ]
    mine = [r for r in rows if "elementwise-unary.fkc.md:" in r]
    assert len(mine) == 4  # one per dtype: each has its own measured relative error
    f64 = next(r for r in mine if "exp_f64" in r)
    assert "verified" in f64 and "ulp<=2" in f64 and "cheap_elementwise" in f64
    assert f64.split()[-1] == "f64" and "strided" in f64 and "(measured)" in f64
    narrow = [r for r in mine if "numpy:exp " in r]
    assert sorted(r.split()[-1] for r in narrow) == ["bf16", "f16", "f32"]
    assert all("ulp<=1, rel<=" in r and "(measured)" in r for r in narrow)
    col = header.index("source")
    assert all(r[col - 2 : col] == "  " and r[col] != " " for r in rows)  # aligned
    assert lines[-1].endswith("dtype keys")


def test_kernels_marks_hand_registered_entries(capsys: Capsys) -> None:
    assert main(["kernels", "--op", "concat", "--backend", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "hand-registered" in out and "verified" in out  # by the hand-registered ledger
    assert main(["kernels", "--op", "no_such_op"]) == 1
    err = capsys.readouterr().err
    assert "error: no kernel for op 'no_such_op' (ops: abs, add," in err
    assert main(["kernels", "--op", "exp", "--backend", "tpu"]) == 1
    assert "error: no kernel on backend 'tpu' (backends: cpu" in capsys.readouterr().err


def test_verify_kernels_check_and_run_do_not_touch_the_ledger(capsys: Capsys) -> None:
    before = LEDGER_PATH.read_bytes()
    assert main(["verify-kernels", "--check"]) == 0
    assert "0 with unproven claims" in capsys.readouterr().out
    assert main(["verify-kernels", "--op", "relu"]) == 0
    assert "7 kernels, 14 claims: 14 passed, 0 failed, 0 unproven; 0 downgraded" in (
        capsys.readouterr().out
    )
    assert LEDGER_PATH.read_bytes() == before


def test_verify_kernels_reports_failures_and_unproven(
    base: str, write: Callable[..., Path], capsys: Capsys
) -> None:
    tight = write(base.replace("max_ulp: 2", "max_ulp: 0"), "tight.fkc.md")
    assert main(["verify-kernels", "--contracts", str(tight), "--write-ledger"]) == 1
    out = capsys.readouterr().out
    assert "FAIL test_exp (f64, f64) cpu max_ulp: measured 1 vs bound 0" in out
    assert "inputs=[" in out and "1 failed" in out and "1 downgraded" in out
    assert main(["verify-kernels", "--contracts", str(tight), "--check"]) == 1
    assert "UNPROVEN test_exp" in capsys.readouterr().out


def test_cli_errors_are_one_line(write: Callable[..., Path], capsys: Capsys) -> None:
    bad = write("---\nfkc_version: 2\n---\n")
    assert main(["verify-kernels", "--contracts", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "FKC-E02" in err and err.startswith("fuel: error: ")
