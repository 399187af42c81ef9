"""`fuel-opt --verify-diagnostics` with `expected-error` designators, as mlir-opt checks them
(tools/expected_diagnostics.py; tests/filecheck/tools/verify-diagnostics.mlir runs a file)."""

from __future__ import annotations

from pathlib import Path

from tools.expected_diagnostics import check, expectations
from tools.fuel_opt import main as fuel_opt_main

CHAIN = """func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = fuel.exp %x : tensor<4x8xf32>
  func.return %e : tensor<4x8xf32>
}
"""


def test_verify_diagnostics_fails_on_a_wrong_expectation(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text(
        "func.func @f(%x: tensor<4xi32>) {\n"
        '  %0 = "fuel.exp"(%x) : (tensor<4xi32>) -> tensor<4xi32> // expected-error {{wrong}}\n'
        "  func.return\n}\n"
    )
    assert fuel_opt_main([str(bad), "--verify-diagnostics"]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:2: unexpected error: 'fuel.exp' expects a float element type" in err
    assert f'{bad}:2: expected error "wrong" was not produced' in err
    bad.write_text(bad.read_text().replace("{{wrong}}", "{{expects a float element type}}"))
    assert fuel_opt_main([str(bad), "--verify-diagnostics"]) == 0


def test_verify_diagnostics_fails_when_an_expected_error_does_not_happen(
    tmp_path: Path, capsys
) -> None:
    ok = tmp_path / "ok.mlir"
    ok.write_text("// expected-error @below {{never}}\n" + CHAIN)
    assert fuel_opt_main([str(ok), "--verify-diagnostics"]) == 1
    assert f'{ok}:1: expected error "never" was not produced' in capsys.readouterr().err


def test_without_designators_errors_print_and_exit_0_as_in_xdsl(tmp_path: Path, capsys) -> None:
    """tests/filecheck/dialect/invalid-*.mlir check the printed messages with FileCheck."""
    bad = tmp_path / "bad.mlir"
    bad.write_text(CHAIN.replace("tensor<4x8xf32>", "tensor<4x8xi32>"))
    assert fuel_opt_main([str(bad), "--verify-diagnostics"]) == 0
    assert "'fuel.exp' expects a float element type" in capsys.readouterr().out


def test_designators_point_where_mlir_says() -> None:
    text = "a\n// expected-error @below {{b}}\n// expected-error @below {{c}}\nx\n"
    text += "// expected-error @above {{d}}\n// expected-error @-4 {{e}}\n"
    text += "y // expected-error {{f}}\n// expected-error @+1 {{g}}\n"
    lines = {e.text: e.line for e in expectations(text, first_line=10)}
    assert lines == {"b": 13, "c": 13, "d": 13, "e": 11, "f": 16, "g": 18}


def test_an_error_without_a_place_matches_by_text() -> None:
    [e] = expectations("// expected-error {{pass failed}}\n")
    assert check([e], [(None, "the pass failed here")], "f") == []
