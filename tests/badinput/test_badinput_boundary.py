"""The tools' one error boundary (tools/errors.py): a bug is `internal error` and exit 2 without
a traceback, `--verbose` (before or after the subcommand) prints the traceback, Ctrl-C exits
130, a closed stdout 141, all quietly; and the table of bad-input exceptions names real
classes."""

from __future__ import annotations

import argparse
import builtins
import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tools.fuel
import tools.fuel_opt
from tools.errors import USER_ERRORS

FUEL = str(Path(sys.executable).parent / "fuel")


def _boom(args: argparse.Namespace) -> int:
    raise KeyError("boom")


def test_a_bug_is_an_internal_error_without_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tools.fuel, "cmd_run", _boom)
    assert tools.fuel.main(["run", "m.mlir"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fuel: internal error: KeyError: 'boom'\n") and "Traceback" not in err
    assert "rerun with --verbose" in err


@pytest.mark.parametrize("argv", [["--verbose", "run", "m.mlir"], ["run", "m.mlir", "--verbose"]])
def test_verbose_prints_the_traceback_of_a_bug(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tools.fuel, "cmd_run", _boom)
    assert tools.fuel.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and "in _boom" in err
    assert err.rstrip().splitlines()[-1] == "fuel: internal error: KeyError: 'boom'"


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_prints_the_traceback_of_a_bad_input(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = ["run", str(tmp_path / "no.mlir")]
    assert tools.fuel.main(["--verbose", *run] if where == "before" else [*run, "--verbose"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and "ModuleError" in err
    assert err.rstrip().splitlines()[-1].startswith(f"fuel: error: cannot read {tmp_path}")


def test_verbose_after_a_double_dash_is_not_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert tools.fuel.main(["run", "--", "--verbose"]) == 1
    assert capsys.readouterr().err.startswith("fuel: error: cannot read --verbose")


def test_ctrl_c_exits_130_quietly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(tools.fuel, "cmd_run", interrupted)
    assert tools.fuel.main(["run", "m.mlir"]) == 130
    assert capsys.readouterr() == ("", "")


def test_a_fuel_opt_bug_is_an_internal_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def broken(self: tools.fuel_opt.FuelOptMain) -> None:
        raise RuntimeError("broken\nsecond line")

    monkeypatch.setattr(tools.fuel_opt.FuelOptMain, "run", broken)
    assert tools.fuel_opt.main([str(tmp_path / "m.mlir")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fuel-opt: internal error: RuntimeError: broken\n")
    assert "second line" not in err and "Traceback" not in err


def test_fuel_opt_verbose(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert tools.fuel_opt.main([str(tmp_path / "no.mlir"), "--verbose"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and "FileNotFoundError" in err
    assert (
        err.rstrip().splitlines()[-1]
        == f"fuel-opt: error: {tmp_path / 'no.mlir'}: No such file or directory"
    )


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as e:
        tools.fuel.main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"fuel {version('fuel-dispatch')}"


def test_a_closed_stdout_exits_141_without_traceback() -> None:
    """`fuel kernels | head -0`: the reader is gone before fuel writes its table."""
    p = subprocess.Popen([FUEL, "kernels"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141 and err == "", err


def _defines(module: str, name: str) -> bool:
    """`module` defines exception class `name` (fuel's modules read, not imported: some pull
    in torch or triton)."""
    if module in ("builtins", "xdsl.utils.exceptions"):
        cls = getattr(builtins if module == "builtins" else importlib.import_module(module), name)
        return isinstance(cls, type) and issubclass(cls, BaseException)
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    return (
        re.search(rf"^class {name}\(\w*(Error|Exception)\)", Path(spec.origin).read_text(), re.M)
        is not None
    )


@pytest.mark.parametrize(("module", "name"), USER_ERRORS)
def test_the_bad_input_table_names_real_exceptions(module: str, name: str) -> None:
    assert _defines(module, name)
