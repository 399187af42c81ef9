"""`fuel-opt` as an mlir-opt user drives it: stdin, `--dump-dir`, `--time-passes`,
`--print-between-passes`, `--print-ir-before-all`, the `-t` targets."""

from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path

import pytest

from frontends.builder import GraphBuilder
from lowering.bundle import load_bundle
from tools.fuel_opt import main as fuel_opt_main

CHAIN = """func.func @main(%x: tensor<4x8xf32> {fuel.name = "x"})
    -> (tensor<4x8xf32> {fuel.name = "y"}) {
  %e = fuel.exp %x : tensor<4x8xf32>
  %r = fuel.relu %e : tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
"""


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    path = tmp_path / "chain.mlir"
    path.write_text(CHAIN)
    return path


class _Stdin:
    """A stand-in for `sys.stdin` (pytest's capture has no `buffer`)."""

    def __init__(self, text: str) -> None:
        self.buffer = io.BytesIO(text.encode())


def test_dash_reads_stdin(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setattr(sys, "stdin", _Stdin(CHAIN))
    assert fuel_opt_main(["-", "-p", "cse"]) == 0
    assert "fuel.relu" in capsys.readouterr().out


def test_stdin_errors_name_stdin(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setattr(sys, "stdin", _Stdin("func.func @f() {\n  %y = fuel.exp\n}\n"))
    assert fuel_opt_main(["-"]) == 1
    assert "<stdin>:" in capsys.readouterr().err


def test_dump_dir_numbers_the_input_each_pass_and_each_stage(chain: Path, tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    out = tmp_path / "out.mlir"
    args = [str(chain), "-p", "cse,fuel-optimize", "--dump-dir", str(dump), "-o", str(out)]
    assert fuel_opt_main(args) == 0
    names = sorted(p.name for p in dump.iterdir())
    assert names[:2] == ["00-parse.mlir", "01-cse.mlir"]
    assert "04-plan.mlir" in names and any(n.endswith("-picked.mlir") for n in names)
    last = ["14-fuel-emit-dim-branches.mlir", "15-fuel-fix-layouts.mlir", "16-fuel-optimize.mlir"]
    assert names[-3:] == last
    assert (dump / "16-fuel-optimize.mlir").read_text().strip() == out.read_text().strip()
    assert "fuel.kernel" not in (dump / "04-plan.mlir").read_text()  # stamped only when picked
    assert "fuel.kernel" in next(dump.glob("*-picked.mlir")).read_text()


def test_time_passes_prints_a_table_of_every_stage(chain: Path, capsys) -> None:
    assert fuel_opt_main([str(chain), "-p", "cse,fuel-optimize", "--time-passes"]) == 0
    err = capsys.readouterr().err
    assert "Execution time report" in err and "Total Execution Time:" in err
    rows = [line.split(")  ", 1)[1] for line in err.splitlines() if "%)  " in line]
    assert rows[:4] == ["parse", "verify (3)", "cse", "fuel-optimize"]
    assert "  fuel-converge-frontier (3)" in rows  # nested stages, indented; repeats counted
    assert rows[-2:] == ["output", "Total"]


def test_print_between_passes_prints_between_passes(chain: Path, capsys) -> None:
    assert fuel_opt_main([str(chain), "-p", "cse,canonicalize,dce", "--print-between-passes"]) == 0
    out = capsys.readouterr().out
    assert out.count("IR after cse:") == 1 and out.count("IR after canonicalize:") == 1
    assert "IR after dce:" not in out  # the last pass's IR is the output itself


def test_print_ir_before_all_shows_the_stages_too(chain: Path, capsys) -> None:
    assert fuel_opt_main([str(chain), "-p", "fuel-optimize", "--print-ir-before-all"]) == 0
    err = capsys.readouterr().err
    assert "IR Dump Before fuel-optimize //" in err
    assert "IR Dump Before fuel-fuse-patterns (fuel-optimize)" in err


def test_bundle_target_writes_a_bundle_fuel_run_loads(chain: Path, tmp_path: Path) -> None:
    assert (
        fuel_opt_main([str(chain), "-t", "fuel-bundle", "-o", str(tmp_path / "m.fuelbundle")]) == 0
    )
    assert zipfile.is_zipfile(tmp_path / "m.fuelbundle")
    assert fuel_opt_main([str(chain), "-t", "fuel-bundle", "-o", str(tmp_path / "d")]) == 0
    assert load_bundle(tmp_path / "d").manifest["created_by"] == "fuel-opt -t fuel-bundle"


def test_bundle_target_carries_the_weights_the_module_names(tmp_path: Path) -> None:
    g = GraphBuilder(seed=0)
    y = g.relu(g.matmul(g.input("x", (2, 4)), g.weight("w", (4, 3))))
    saved = g.build(outputs={"y": y}).save(tmp_path / "mlp.mlir")
    assert fuel_opt_main([str(saved), "-t", "fuel-bundle", "-o", str(tmp_path / "b")]) == 0
    assert (tmp_path / "b" / "weights.safetensors").is_file()


def test_bundle_target_refuses_a_terminal(chain: Path, monkeypatch, capsys) -> None:
    class Tty(io.BytesIO):
        def isatty(self) -> bool:
            return True

    class Stdout(io.StringIO):
        buffer = Tty()

    monkeypatch.setattr(sys, "stdout", Stdout())
    assert fuel_opt_main([str(chain), "-t", "fuel-bundle"]) == 1
    assert "give -o NAME.fuelbundle" in capsys.readouterr().err
    assert Stdout.buffer.getvalue() == b""


def test_bundle_target_goes_to_a_pipe_as_the_archive(chain: Path, monkeypatch) -> None:
    class Stdout(io.StringIO):
        buffer = io.BytesIO()

    monkeypatch.setattr(sys, "stdout", Stdout())
    assert fuel_opt_main([str(chain), "-t", "fuel-bundle"]) == 0
    names = zipfile.ZipFile(io.BytesIO(Stdout.buffer.getvalue())).namelist()
    assert names[0] == "manifest.json" and "module.mlir" in names


def test_triton_target_lowers_a_copy_as_the_backend_does(chain: Path, capsys) -> None:
    assert fuel_opt_main([str(chain), "-t", "fuel-triton"]) == 0
    out = capsys.readouterr().out
    assert "lowered a copy as the Triton backend does" in out
    assert "@triton.jit" in out and "def fused_0(in0, out0, N, BLOCK: tl.constexpr):" in out
