"""Concurrent `fuel import`s of two models into the same output end with one import's pair
(IR + weights), never a mix that `fuel run` refuses as torn; and two real processes doing the
same, repeatedly, agree."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import runtime.fsutil as fsutil
from runtime.module import FuelModule
from tools.fuel import main

FUEL = str(Path(sys.executable).parent / "fuel")


def _onnx(path: Path, value: float) -> str:
    """y = x @ w with w all `value` (large enough to be a weight, not an inlined constant)."""
    w = numpy_helper.from_array(np.full((64, 64), value, np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 64])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


def _weight(out: Path) -> float:
    """The one value of the output's weight (loading it checks that the pair is not torn)."""
    (w,) = FuelModule.load(out).weights.values()
    assert np.all(w == w.flat[0])
    return float(w.flat[0])


def test_an_import_finishing_during_another_leaves_one_pair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Import A writes its pair, then waits (up to 0.5 s) for import B to finish entirely
    before it goes on: whatever A writes after its pair must not pair with B's weights."""
    a, b, out = _onnx(tmp_path / "a.onnx", 1.0), _onnx(tmp_path / "b.onnx", 2.0), tmp_path / "m"
    a_wrote, b_done = threading.Event(), threading.Event()
    write = fsutil.atomic_write_files

    def write_then_wait(files) -> None:  # noqa: ANN001
        write(files)
        if threading.current_thread().name == "A" and not a_wrote.is_set():
            a_wrote.set()
            b_done.wait(0.5)

    def import_b() -> None:
        a_wrote.wait(10)
        main(["import", b, "-o", f"{out}.mlir"])
        b_done.set()

    monkeypatch.setattr(fsutil, "atomic_write_files", write_then_wait)
    monkeypatch.setattr("runtime.module.atomic_write_files", write_then_wait)
    threads = [
        threading.Thread(target=main, args=(["import", a, "-o", f"{out}.mlir"],), name="A"),
        threading.Thread(target=import_b, name="B"),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert "Traceback" not in capsys.readouterr().err
    assert _weight(out.with_suffix(".mlir")) == 2.0


def test_two_import_processes_into_one_output(tmp_path: Path) -> None:
    a, b, out = _onnx(tmp_path / "a.onnx", 1.0), _onnx(tmp_path / "b.onnx", 2.0), tmp_path / "m"
    procs = [
        subprocess.Popen(
            [FUEL, "import", src, "-o", f"{out}.mlir"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for src in (a, b)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0 and "Traceback" not in err, err
    assert _weight(out.with_suffix(".mlir")) in (1.0, 2.0)
