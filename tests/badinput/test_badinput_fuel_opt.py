"""`fuel-opt` on bad files, bad pipelines and bad flags, in process: every one exits 1 with one
`fuel-opt: error:` message naming the file (verifier errors with line:col), no traceback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.badinput.badinput_cli import GOOD_IR, assert_refused
from tests.badinput.test_badinput_fuel_cli import AXIS_RANGE, BAD_DEVICE, BAD_RETURN, K_MISMATCH
from tools.fuel_opt import main

Case = Callable[[Path], tuple[list[str], list[str]]]


def _file(name: str, text: bytes | str, *extra: str, where: str = "") -> Case:
    """`fuel-opt FILE EXTRA...`; the message names the file followed by `where`."""

    def case(tmp: Path) -> tuple[list[str], list[str]]:
        path = tmp / name
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        return [str(path), *extra], [f"{path}{where}"]

    return case


def _good(*extra: str, names: tuple[str, ...] = ()) -> Case:
    def case(tmp: Path) -> tuple[list[str], list[str]]:
        path = tmp / "good.mlir"
        path.write_text(GOOD_IR)
        return [str(path), *extra], list(names)

    return case


SPLIT = f"{GOOD_IR}// -----\n{K_MISMATCH}"  # the bad function starts on line 7 of the file
CASES: dict[str, Case] = {
    "missing": lambda tmp: ([str(tmp / "no.mlir")], [str(tmp / "no.mlir")]),
    "folder": lambda tmp: ([str(tmp)], [str(tmp)]),
    "dev-null": lambda tmp: (["/dev/null"], ["/dev/null"]),
    "no-extension": _file("ir", GOOD_IR),
    "onnx-extension": _file("m.onnx", b"\x08\x07"),
    "empty": _file("e.mlir", b"", where=":1:1"),
    "latin1": _file("l.mlir", b"// \xe9\n" + GOOD_IR.encode(), where=": not UTF-8"),
    "truncated": _file("t.mlir", GOOD_IR[:40], where=":"),
    "unknown-op": _file("u.mlir", GOOD_IR.replace("fuel.exp", "fuel.nope"), where=":2:"),
    "verify-return-type": _file("v.mlir", BAD_RETURN, where=":3:3: 'func.return'"),
    "verify-matmul-k": _file("v.mlir", K_MISMATCH, where=":2:3: 'fuel.matmul' contraction"),
    "verify-axis": _file("v.mlir", AXIS_RANGE, where=":2:3: 'fuel.reduce_sum' axis 2"),
    "attribute-verifier": _file("a.mlir", BAD_DEVICE, where=":2:54: invalid device 'gpu'"),
    "verify-second-chunk": _file("s.mlir", SPLIT, "--split-input-file", where=":7:3"),
    "deep-nesting": _file("d.mlir", "builtin.module {\n" * 3000 + "}\n" * 3000, where=":"),
    "unknown-pass": _good("-p", "no-such-pass", names=("no-such-pass",)),
    "pass-option-type": _good("-p", "fuel-select{judge=1}", names=("fuel-select{judge=1}",)),
    "pass-option-unknown": _good("-p", "fuel-select{frob=1}", names=("frob",)),
    "pass-spec-syntax": _good("-p", "fuel-select{", names=("-p",)),
    "pass-topology-folder": lambda tmp: (
        [_good()(tmp)[0][0], "-p", f'fuel-place{{topology="{tmp}"}}'],
        [str(tmp)],
    ),
    "pass-budget-unit": _good("-p", 'fuel-optimize{budget="3 parsecs"}', names=("budget",)),
    "unknown-target": _good("-t", "gpu-asm", names=("-t/--target",)),
    "output-folder": lambda tmp: ([_good()(tmp)[0][0], "-o", str(tmp)], [str(tmp)]),
    "output-no-folder": lambda tmp: (
        [_good()(tmp)[0][0], "-o", str(tmp / "no" / "o.mlir")],
        [str(tmp / "no" / "o.mlir")],
    ),
    "unknown-flag": _good("--frobnicate", names=("--frobnicate",)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fuel_opt_refuses(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv, names = CASES[case](tmp_path)
    rc = main(argv)
    assert_refused(rc, capsys.readouterr().err, names, prog="fuel-opt")
