"""End to end through the installed `fuel` command: a handful of bad inputs, one of each class
fixed in this folder's API tests, run concurrently (each start costs ~1-2 s of imports). Each
exits 1 with one `fuel: error:` naming the file, and no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.badinput.badinput_modules import small_module
from tests.badinput.badinput_zip import (
    DEFLATED,
    GIB,
    Member,
    gib_of_zeros_deflated,
    stored,
    write_zip,
)

FUEL = str(Path(sys.executable).parent / "fuel")
F = TensorProto.FLOAT


def _onnx(path: Path, opset: int = 17) -> Path:
    w = numpy_helper.from_array(np.ones((4, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        "g",
        [helper.make_tensor_value_info("x", F, [2, 4])],
        [helper.make_tensor_value_info("y", F, [2, 3])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _saved(path: Path, seed: int) -> Path:
    return small_module(seed).save(path)


def _torn(tmp: Path) -> tuple[list[str], list[str]]:
    ir = _saved(tmp / "m.mlir", 0)
    new = _saved(tmp / "new.mlir", 1)  # a later save's weights, renamed in before its IR
    (tmp / "m.safetensors").write_bytes(new.with_suffix(".safetensors").read_bytes())
    return ["run", str(ir), "--random-inputs"], [str(ir), str(tmp / "m.safetensors")]


def _bytes(name: str, data: bytes) -> object:
    def case(tmp: Path) -> tuple[list[str], list[str]]:
        (tmp / name).write_bytes(data)
        return ["run", str(tmp / name), "--random-inputs"], [str(tmp / name)]

    return case


def _new_opset(tmp: Path) -> tuple[list[str], list[str]]:
    path = _onnx(tmp / "new.onnx", opset=999)
    return ["import", str(path), "-o", str(tmp / "new.mlir")], [str(path), "opset 999"]


def _folder_target(tmp: Path) -> tuple[list[str], list[str]]:
    path = _onnx(tmp / "good.onnx")
    (tmp / "out.mlir").mkdir()
    (tmp / "out.safetensors").write_bytes(b"the old weights")
    return ["import", str(path), "-o", str(tmp / "out.mlir")], [str(tmp / "out.mlir")]


def _bomb(tmp: Path, files: dict[str, bytes]) -> tuple[list[str], list[str]]:
    bomb = Member("targets/cpu/zeros.bin", gib_of_zeros_deflated(), DEFLATED, GIB, 0)
    a = write_zip(tmp / "a.fuelbundle", [*stored(files), bomb])
    return ["run", str(a), "--random-inputs"], [str(a), "zeros.bin' is not declared"]


CASES = {
    "torn-pair": _torn,
    "onnx-opset-999": _new_opset,
    "import-into-a-folder": _folder_target,
    "archive-bomb": _bomb,
}


@pytest.fixture(scope="module")
def results(
    tmp_path_factory: pytest.TempPathFactory, bundle_files: dict[str, bytes]
) -> dict[str, tuple[int, str, list[str]]]:
    """Every case's (exit code, stderr, strings the error must name), run concurrently."""
    procs = {}
    for name, make in CASES.items():
        tmp = tmp_path_factory.mktemp(name)
        extra = (bundle_files,) if make is _bomb else ()
        argv, names = make(tmp, *extra)  # type: ignore[operator]
        p = subprocess.Popen(
            [FUEL, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp
        )
        procs[name] = (p, names)
    out = {}
    for name, (p, names) in procs.items():
        _, err = p.communicate(timeout=120)
        out[name] = (p.returncode, err, names)
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_cli_refuses_cleanly(case: str, results: dict[str, tuple[int, str, list[str]]]) -> None:
    rc, err, names = results[case]
    assert rc == 1, err
    assert err.startswith("fuel: error: ") and "Traceback" not in err, err
    for s in names:
        assert s in err, err


def test_the_folder_target_left_the_old_weights(
    results: dict[str, tuple[int, str, list[str]]],
) -> None:
    rc, _, names = results["import-into-a-folder"]
    out = Path(names[0])
    assert rc == 1 and out.is_dir()
    assert out.with_suffix(".safetensors").read_bytes() == b"the old weights"
    assert sorted(p.name for p in out.parent.iterdir()) == [
        "good.onnx",
        "out.mlir",
        "out.safetensors",
    ]
