"""`fuel run` and `fuel-opt`: outputs, timings, and one clear message for every bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from frontends.builder import GraphBuilder
from tools.fuel import main as fuel_main
from tools.fuel_opt import main as fuel_opt_main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def saved_mlp(tmp_path: Path) -> Path:
    g = GraphBuilder(seed=0)
    x = g.input("x", (2, 4))
    g2 = g.tanh(g.matmul(x, g.weight("w", (4, 3))))
    return g.build(outputs={"y": g2}).save(tmp_path / "mlp.mlir")


def test_run_writes_outputs_and_reports(saved_mlp: Path, tmp_path: Path, capsys) -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    rc = fuel_main(
        [
            "run",
            str(saved_mlp),
            "--input",
            f"x={tmp_path / 'x.npy'}",
            "--output-dir",
            str(out),
            "--repeat",
            "3",
        ]
    )
    text = capsys.readouterr().out
    assert rc == 0
    assert "y: [2, 3] f32 sum=" in text and "3 run(s), median" in text
    from safetensors.numpy import load_file

    w = load_file(str(saved_mlp.with_suffix(".safetensors")))["w"]
    # the optimized plan (as fuel compile builds it) may pick the fast tanh: a few ulp
    np.testing.assert_allclose(np.load(out / "y.npy"), np.tanh(x @ w), rtol=1e-6, atol=1e-7)


def test_random_inputs_are_seeded(saved_mlp: Path, capsys) -> None:
    fuel_main(["run", str(saved_mlp), "--random-inputs", "--seed", "7"])
    first = capsys.readouterr().out.splitlines()[0]
    fuel_main(["run", str(saved_mlp), "--random-inputs", "--seed", "7"])
    assert capsys.readouterr().out.splitlines()[0] == first
    fuel_main(["run", str(saved_mlp), "--random-inputs", "--seed", "8"])
    assert capsys.readouterr().out.splitlines()[0] != first


def _error(argv: list[str], capsys) -> str:
    rc = fuel_main(argv)
    err = capsys.readouterr().err
    assert rc == 1, err
    assert err.startswith("fuel: error: ") and "Traceback" not in err
    return err


def test_run_errors(saved_mlp: Path, tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text(
        "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %y = fuel.exp %x : tensor<4xi32>\n"
        "  func.return %y : tensor<4xf32>\n}\n"
    )
    assert "bad.mlir:2:17" in _error(["run", str(bad)], capsys)
    assert "cannot read" in _error(["run", str(tmp_path / "nope.mlir")], capsys)
    assert "missing input(s) x" in _error(["run", str(saved_mlp)], capsys)
    np.save(tmp_path / "x3.npy", np.zeros((3, 4), np.float32))
    assert "input 'x' must be float32[2, 4], got float32[3, 4]" in _error(
        ["run", str(saved_mlp), "--input", f"x={tmp_path / 'x3.npy'}"], capsys
    )
    assert "NAME=FILE.npy" in _error(["run", str(saved_mlp), "--input", "x"], capsys)
    assert "cannot load input 'x'" in _error(
        ["run", str(saved_mlp), "--input", f"x={tmp_path / 'none.npy'}"], capsys
    )
    wfile = saved_mlp.with_suffix(".safetensors")
    wfile.write_bytes(wfile.read_bytes()[:20])
    assert "corrupt weights file" in _error(["run", str(saved_mlp)], capsys)
    wfile.unlink()
    assert "cannot read weights file" in _error(["run", str(saved_mlp)], capsys)


def test_run_reports_missing_weight_and_unknown_op(tmp_path: Path, capsys) -> None:
    m = tmp_path / "w.mlir"
    m.write_text(
        'func.func @main() -> tensor<2xf32> {\n  %w = fuel.weight "w" : tensor<2xf32>\n'
        "  func.return %w : tensor<2xf32>\n}\n"
    )
    assert "weight 'w' is used by the IR but missing" in _error(["run", str(m)], capsys)
    u = tmp_path / "u.mlir"
    u.write_text(
        "func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
        "  %y = fuel.frobnicate %x : tensor<2xf32>\n"
        "  func.return %y : tensor<2xf32>\n}\n"
    )
    assert "fuel.frobnicate" in _error(["run", str(u)], capsys)


def test_fuel_opt_runs_a_pipeline_and_dumps(saved_mlp: Path, capsys) -> None:
    assert fuel_opt_main([str(saved_mlp), "-p", "cse,canonicalize", "--print-ir-after-all"]) == 0
    cap = capsys.readouterr()
    assert "fuel.matmul" in cap.out
    assert "IR Dump After cse" in cap.err and "IR Dump After canonicalize" in cap.err


def test_fuel_opt_errors(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text(
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %y = fuel.exp %x tensor\n}\n"
    )
    assert fuel_opt_main([str(bad)]) == 1
    assert "bad.mlir:2:20" in capsys.readouterr().err
    assert fuel_opt_main([str(bad), "-p", "no-such-pass"]) == 1
    assert "no-such-pass" in capsys.readouterr().err


@pytest.mark.skipif(
    not (Path(sys.executable).parent / "fuel").exists(), reason="console scripts not installed"
)
def test_installed_entry_points_exit_nonzero_without_traceback(tmp_path: Path) -> None:
    bindir = Path(sys.executable).parent
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f() {\n  %y = fuel.exp\n}\n")
    for cmd in ([str(bindir / "fuel"), "run", str(bad)], [str(bindir / "fuel-opt"), str(bad)]):
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert p.returncode == 1
        assert "Traceback" not in p.stderr and "bad.mlir:3:1" in p.stderr


def test_output_names_never_escape_the_output_dir() -> None:
    from tools.fuel import output_file_name

    assert output_file_name("y") == "y.npy"
    assert output_file_name("/model/Add_output_0") == "_model_Add_output_0.npy"
    assert output_file_name("../x") == "_x.npy"


def test_run_profile_lists_the_schedule_items(saved_mlp: Path, capsys) -> None:
    assert fuel_main(["run", str(saved_mlp), "--random-inputs", "--profile"]) == 0
    text = capsys.readouterr().out
    assert "profile: 2 distinct schedule items" in text
    rows = [line.split() for line in text.splitlines() if line.startswith("  fuel.")]
    assert {r[0] for r in rows} == {"fuel.matmul", "fuel.tanh"}
    assert all(int(r[1]) == 1 and float(r[2]) >= 0 and r[3].endswith("%") for r in rows)


def test_profile_items_covers_every_item_once(saved_mlp: Path) -> None:
    from runtime.executor import Executor
    from runtime.module import FuelModule

    ex = Executor(FuelModule.load(saved_mlp))
    rows = ex.profile_items({"x": np.ones((2, 4), np.float32)}, runs=3)
    assert sum(count for _, count, _ in rows) == len(ex)
    assert [s for _, _, s in rows] == sorted((s for _, _, s in rows), reverse=True)


def test_run_compiles_ir_as_fuel_compile_does(capsys) -> None:
    """`fuel run MODEL.mlir` builds the plan `fuel compile` would (optimized: the decoder
    block's fused kernels, fewer of them), in a process that never imports torch; with
    --no-optimize it runs the graph as written."""
    example = str(ROOT / "examples" / "decoder_block.mlir")
    code = (
        "import sys\n"
        "from tools.fuel import main\n"
        f"assert main(['run', {example!r}, '--random-inputs']) == 0\n"
        "print('torch' in sys.modules)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    *lines, torch_loaded = res.stdout.splitlines()
    assert torch_loaded == "False"
    optimized = int(next(ln for ln in lines if ln.startswith("ran ")).split()[1])
    assert fuel_main(["run", example, "--random-inputs", "--no-optimize"]) == 0
    plain = capsys.readouterr().out
    written = int(next(ln for ln in plain.splitlines() if ln.startswith("ran ")).split()[1])
    assert optimized < written


def test_plan_flags_do_not_apply_to_a_bundle(tmp_path: Path, saved_mlp: Path, capsys) -> None:
    assert fuel_main(["compile", str(saved_mlp), "-o", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    rc = fuel_main(["run", str(tmp_path / "b"), "--random-inputs", "--precision", "ulp=1"])
    assert rc == 1
    assert "a bundle runs the plan it was compiled with" in capsys.readouterr().err


def test_inline_inputs_and_output_files(saved_mlp: Path, tmp_path: Path, capsys) -> None:
    """iree-run-module's forms: `x=2x4xf32=v,...` (one value fills), `--output [NAME=]@f.npy`."""
    from safetensors.numpy import load_file

    w = load_file(str(saved_mlp.with_suffix(".safetensors")))["w"]
    values = ",".join(str(v / 8) for v in range(8))
    rc = fuel_main(
        ["run", str(saved_mlp), "--input", f"x=2x4xf32={values}", "--output", f"@{tmp_path}/a.npy"]
    )
    assert rc == 0
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    np.testing.assert_allclose(np.load(tmp_path / "a.npy"), np.tanh(x @ w), rtol=1e-6, atol=1e-7)
    rc = fuel_main(
        ["run", str(saved_mlp), "--input", "x=2x4xf32=0.25", "--output", f"y=@{tmp_path}/b.npy"]
    )
    assert rc == 0
    want = np.tanh(np.full((2, 4), 0.25, np.float32) @ w)
    np.testing.assert_allclose(np.load(tmp_path / "b.npy"), want, rtol=1e-6, atol=1e-7)
    capsys.readouterr()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--input", "x=2x4xf32=1,2,3"], "3 values for shape [2, 4] (8)"),
        (["--input", "x=2x4xf32=1,zz"], "could not convert"),
        (["--input", "x=@/nonexistent.npy"], "cannot load input 'x' from /nonexistent.npy"),
        (["--random-inputs", "--output", "nope.npy"], "--output expects [NAME=]@FILE.npy"),
        (["--random-inputs", "--output", "q=@o.npy"], "no output 'q' (outputs: y)"),
        (["--random-inputs", "--output", "@a.npy", "--output", "@b.npy"], "more --output files"),
    ],
)
def test_bad_inline_inputs_and_outputs(
    saved_mlp: Path, argv: list[str], message: str, capsys
) -> None:
    assert fuel_main(["run", str(saved_mlp), *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fuel: error:") and message in err and "Traceback" not in err


TWO_FUNCTIONS = """\
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = fuel.tanh %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
func.func @double(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = fuel.add %x, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
"""


@pytest.mark.parametrize("form", ["ir", "bundle"])
def test_function_picks_what_runs(form: str, tmp_path: Path, capsys) -> None:
    src = tmp_path / "two.mlir"
    src.write_text(TWO_FUNCTIONS)
    target = src
    if form == "bundle":
        assert fuel_main(["compile", str(src), "-o", str(tmp_path / "b")]) == 0
        target = tmp_path / "b"
    argv = ["run", str(target), "--input", "x=4xf32=1,2,3,4", "--output", f"@{tmp_path}/o.npy"]
    assert fuel_main([*argv, "--function", "double"]) == 0
    assert np.load(tmp_path / "o.npy").tolist() == [2.0, 4.0, 6.0, 8.0]
    assert fuel_main(argv) == 0  # default: @main
    np.testing.assert_allclose(np.load(tmp_path / "o.npy"), np.tanh([1, 2, 3, 4]), rtol=1e-6)
    capsys.readouterr()
    assert fuel_main([*argv, "--function", "nope"]) == 1
    assert "no function @nope in the module (it has: @main, @double)" in capsys.readouterr().err


def test_every_flag_has_help() -> None:
    """`fuel <command> --help` explains every flag it lists."""
    import argparse

    from tools.fuel import build_parser

    missing = []

    def walk(p: argparse.ArgumentParser, where: str) -> None:
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    walk(sub, f"{where} {name}")
            elif a.help is None:
                missing.append(f"{where} {'/'.join(a.option_strings) or a.dest}")

    walk(build_parser(), "fuel")
    assert not missing, missing


def test_hint_prices_dim_symbols_or_is_refused(tmp_path: Path, capsys) -> None:
    """`--hint seq=N` reaches the picker of `fuel run` (a symbol it does not declare, or a
    malformed hint, is a `fuel: error:`); a bundle runs the plan it was compiled with."""
    g = GraphBuilder(seed=0)
    x = g.input("x", (g.dim("seq", 1, 64), 4))
    path = g.build(outputs={"y": g.tanh(g.matmul(x, g.weight("w", (4, 3))))}).save(
        tmp_path / "m.mlir"
    )
    assert fuel_main(["run", str(path), "--random-inputs", "--hint", "seq=8"]) == 0
    assert "y: [1, 3] f32" in capsys.readouterr().out
    for hint, why in (("len=8", "undeclared dim symbol(s) len"), ("seq", "bad hint 'seq'")):
        assert fuel_main(["run", str(path), "--random-inputs", "--hint", hint]) == 1
        assert why in capsys.readouterr().err
    assert fuel_main(["compile", str(path), "--hint", "seq=8", "-o", str(tmp_path / "b")]) == 0
    assert fuel_main(["run", str(tmp_path / "b"), "--random-inputs", "--hint", "seq=2"]) == 1
    assert "a bundle runs the plan it was compiled with" in capsys.readouterr().err
