"""Kernel bundles: round trip, archive == directory, atomic writes, the CPU backend, the CLI."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from lowering import bundle as writer
from lowering.backend import BackendError, backend_for, lower
from lowering.bundle import build_bundle, load_bundle, write_bundle
from lowering.cpu.backend import NATIVE_LIBRARY
from runtime.bundle import BundleError, read_container
from runtime.executor import Executor
from runtime.module import FuelModule
from tests.runtime.bundle_helpers import FAKE_FILES, MM_SOURCE, use_fake_gpu_backend
from tools.fuel import main as fuel_main

ROOT = Path(__file__).resolve().parents[2]
DECODER = ROOT / "examples" / "decoder_block.mlir"


@pytest.fixture(scope="module")
def decoder() -> FuelModule:
    return FuelModule.load(DECODER)


@pytest.fixture(scope="module")
def x() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((1, 16, 64)).astype(np.float32)


@pytest.fixture(scope="module")
def bundles(decoder: FuelModule, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("bundles")
    return write_bundle(decoder, out / "d"), write_bundle(decoder, out / "a.fuelbundle")


def test_round_trip_is_bit_identical_to_the_optimized_module(
    decoder: FuelModule, bundles: tuple[Path, Path], x: np.ndarray
) -> None:
    from passes.optimize import optimize_graph
    from passes.picker.support import PickerOptions

    direct = FuelModule(decoder.op.clone(), decoder.weights)
    optimize_graph(direct.op, PickerOptions(judge="none"))
    want = Executor(direct).run({"x": x})["y"]
    for path in bundles:
        got = load_bundle(path).executor().run({"x": x})["y"]
        assert got.tobytes() == want.tobytes()
    unoptimized = Executor(decoder).run({"x": x})["y"]
    np.testing.assert_allclose(want, unoptimized, rtol=1e-5, atol=1e-5)


def test_archive_equals_directory(bundles: tuple[Path, Path]) -> None:
    d, a = bundles
    assert a.is_file() and d.is_dir()
    assert read_container(d) == read_container(a)
    ld, la = load_bundle(d), load_bundle(a)
    assert ld.kernel_ids == la.kernel_ids and str(ld.module) == str(la.module)


def test_manifest_and_picker_record(bundles: tuple[Path, Path]) -> None:
    lb = load_bundle(bundles[0])
    m = lb.manifest
    assert m["format_version"] == 1 and m["entry"] == "main"
    assert m["signature"]["inputs"] == [{"name": "x", "shape": [1, 16, 64], "dtype": "f32"}]
    native_lib = {f"targets/cpu/{NATIVE_LIBRARY}.{ext}" for ext in ("c", "so")}
    assert set(m["files"]) - native_lib == {"module.mlir", "weights.safetensors", "picker.json"}
    cpu = m["targets"]["cpu"]
    assert cpu["fingerprint"]["kind"] == "cpu"
    ids = [k["id"] for k in cpu["kernels"]]
    assert f"matmul[f32,f32,f32]@cpu/{MM_SOURCE}" in ids and len(ids) == len(set(ids))
    mm = next(o for o in lb.picker["ops"] if o["op"] == "fuel.matmul")
    assert mm["chosen"]["kernel_id"] == f"matmul[f32,f32,f32]@cpu/{MM_SOURCE}"
    assert {a["verdict"] for a in mm["alternatives"]} >= {"winner", "pruned:frontier"}
    assert re.match(MM_SOURCE + r" ranks first of \d+ on cpu \(layer-1 .*\); next ", mm["why"])


def test_writing_is_deterministic_and_leaves_the_module_alone(
    decoder: FuelModule, tmp_path: Path
) -> None:
    before = str(decoder)
    a = write_bundle(decoder, tmp_path / "one.fuelbundle")
    b = write_bundle(decoder, tmp_path / "two.fuelbundle")
    assert a.read_bytes() == b.read_bytes() and str(decoder) == before


def test_no_optimize_still_stamps_every_kernel(decoder: FuelModule, tmp_path: Path) -> None:
    p = write_bundle(decoder, tmp_path / "b", options={"cpu": {"optimize": "0"}})
    lb = load_bundle(p)
    assert "fuel.alternatives" not in str(lb.module)
    assert all("default kernel" in o["why"] for o in lb.picker["ops"])
    lb.executor().run({"x": np.zeros((1, 16, 64), np.float32)})


def test_a_failed_write_leaves_no_destination(
    decoder: FuelModule, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    def boom(path: Path, data: bytes) -> None:
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    monkeypatch.setattr(writer, "_write_file", boom)
    with pytest.raises(OSError, match="No space"):
        write_bundle(decoder, tmp_path / "b")
    assert list(tmp_path.iterdir()) == []

    def no_rename(src: object, dst: object) -> None:
        raise OSError(5, "I/O error")

    monkeypatch.setattr(writer.os, "replace", no_rename)
    with pytest.raises(OSError, match="I/O error"):
        write_bundle(decoder, tmp_path / "b.fuelbundle")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_rewrite_keeps_the_old_bundle(
    decoder: FuelModule, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = write_bundle(decoder, tmp_path / "b")
    before = read_container(old)
    real = os.replace
    n = []

    def second_fails(src: object, dst: object) -> None:
        n.append(dst)
        if len(n) == 2:  # the swap of the new bundle into place
            raise OSError(5, "I/O error")
        real(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(writer.os, "replace", second_fails)
    with pytest.raises(OSError, match="I/O error"):
        write_bundle(decoder, old, options={"cpu": {"optimize": "0"}})
    monkeypatch.undo()
    assert read_container(old) == before and sorted(p.name for p in tmp_path.iterdir()) == ["b"]
    load_bundle(old)


def test_refuses_to_replace_what_is_not_a_bundle(decoder: FuelModule, tmp_path: Path) -> None:
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "notes.txt").write_text("mine")
    with pytest.raises(BundleError, match="refusing to replace"):
        write_bundle(decoder, tmp_path / "keep")
    (tmp_path / "x.fuelbundle").write_text("not a zip")
    with pytest.raises(BundleError, match="refusing to replace"):
        write_bundle(decoder, tmp_path / "x.fuelbundle")
    assert (tmp_path / "keep" / "notes.txt").read_text() == "mine"


def test_cpu_backend_options_and_stages(decoder: FuelModule) -> None:
    be = backend_for("cpu")
    assert be.parse_options("cpu", {"optimize": "0", "precision": "ulp=2"}).optimize is False
    for bad, msg in (
        ({"opt": "1"}, "unknown cpu backend option"),
        ({"optimize": "maybe"}, "expected 0 or 1"),
        ({"precision": "ulp=x"}, "precision"),
        ({"topology": "/no/such.toml"}, "no such file"),
    ):
        with pytest.raises(BackendError, match=msg):
            be.parse_options("cpu", bad)
    with pytest.raises(BackendError, match="no backend lowers for target 'tpu'"):
        backend_for("tpu")
    arts = lower(FuelModule(decoder.op.clone(), decoder.weights), "cpu", {"judge": "none"})
    assert all(a.backend == "cpu" and a.revision for a in arts)
    # only fuel's native library carries files (its source and build), where its kernels run
    assert all(not a.files for a in arts if a.kernel_id != NATIVE_LIBRARY)
    assert {a.meta.get("op") for a in arts} >= {"matmul", "add"}


def test_kernels_of_other_targets_are_stored_per_target(
    decoder: FuelModule, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_fake_gpu_backend(monkeypatch)
    monkeypatch.setattr("runtime.bundle.machine_gpu_targets", lambda: set())
    files = build_bundle(decoder, ["sm_90", "cpu"])
    for name, data in FAKE_FILES.items():
        assert files[f"targets/sm_90/{name}"] == data
    p = write_bundle(decoder, tmp_path / "two.fuelbundle", ["cpu", "sm_90"])
    lb = load_bundle(p)  # no sm_90 here: the kept cpu alternative runs
    assert lb.target == "cpu"
    gpu = lb.manifest["targets"]["sm_90"]
    assert gpu["fingerprint"] == {"kind": "cuda", "arch": "sm_90"}
    assert set(gpu["kernels"][0]["files"]) == {
        "targets/sm_90/matmul.py",
        "targets/sm_90/matmul.cubin",
    }
    assert (
        gpu["module"] in lb.manifest["files"] and "fuel.kernel" not in files[gpu["module"]].decode()
    )
    lb.executor().run({"x": np.ones((1, 16, 64), np.float32)})


# -- the command line ------------------------------------------------------------------------


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    rc = fuel_main(argv)
    err = capsys.readouterr().err
    assert rc == 1, err
    assert err.startswith("fuel: error: ") and "Traceback" not in err and err.count("\n") == 1
    return err


def test_cli_compile_then_run(
    tmp_path: Path, x: np.ndarray, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "b.fuelbundle"
    assert fuel_main(["compile", str(DECODER), "-o", str(out), "--option", "judge=none"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"\(archive, [\d.]+ KiB\): cpu \d+ kernels$", text.strip())
    np.save(tmp_path / "x.npy", x)
    rc = fuel_main(
        ["run", str(out), "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", str(tmp_path / "o")]
    )
    assert rc == 0 and "y: [1, 16, 64] f32" in capsys.readouterr().out
    want = load_bundle(out).executor().run({"x": x})["y"]
    assert np.load(tmp_path / "o" / "y.npy").tobytes() == want.tobytes()
    assert (
        fuel_main(
            ["compile", str(DECODER), "-o", str(tmp_path / "d"), "--format", "dir", "--no-optimize"]
        )
        == 0
    )
    assert "(directory, " in capsys.readouterr().out


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "b.fuelbundle")
    assert "unknown cpu backend option(s) bogus" in _error(
        ["compile", str(DECODER), "-o", out, "--option", "bogus=1"], capsys
    )
    assert "--option expects" in _error(
        ["compile", str(DECODER), "-o", out, "--option", "sm_90:x=1"], capsys
    )
    assert "unknown target 'tpu'" in _error(
        ["compile", str(DECODER), "-o", out, "--target", "tpu"], capsys
    )
    assert "cannot read" in _error(["compile", str(tmp_path / "no.mlir"), "-o", out], capsys)
    assert "no such bundle" in _error(["run", out, "--random-inputs"], capsys)
    assert not Path(out).exists()
    Path(out).write_bytes(b"PK\x03\x04 garbage")
    assert "corrupt or truncated" in _error(["run", out, "--random-inputs"], capsys)
    d = tmp_path / "d"
    assert fuel_main(["compile", str(DECODER), "-o", str(d), "--no-optimize"]) == 0
    assert "--weights does not apply" in _error(
        ["run", str(d), "--weights", "w.safetensors"], capsys
    )
    json.loads((d / "manifest.json").read_text())  # still intact


def test_cli_compiles_an_onnx_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 3], [0.0, 1, -2, 3, -4, 5])
    nodes = [helper.make_node("Add", ["x", "w"], ["a"]), helper.make_node("Relu", ["a"], ["y"])]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y], [w]), opset_imports=[helper.make_opsetid("", 17)]
    )
    onnx.save(model, tmp_path / "tiny.onnx")
    out = tmp_path / "tiny.fuelbundle"
    assert fuel_main(["compile", str(tmp_path / "tiny.onnx"), "-o", str(out)]) == 0
    capsys.readouterr()
    got = load_bundle(out).executor().run({"x": np.ones((2, 3), np.float32)})["y"]
    np.testing.assert_array_equal(got, np.maximum(np.ones((2, 3)) + [[0, 1, -2], [3, -4, 5]], 0))


@pytest.mark.slow
def test_real_triton_target_is_stored_beside_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--target cpu --target sm_90` with the real Triton backend (AOT, no GPU needed)."""
    pytest.importorskip("triton.backends.compiler", reason="Triton is not importable")
    if not (ROOT / "lowering" / "triton" / "backend.py").exists():
        pytest.skip("no Triton backend in this tree")
    from frontends.builder import GraphBuilder

    monkeypatch.setattr("runtime.bundle.machine_gpu_targets", lambda: set())
    g = GraphBuilder(seed=0)
    x = g.input("x", (4, 8))
    module = g.build(outputs={"y": g.relu(g.add(x, g.weight("b", (4, 8))))})
    lb = load_bundle(write_bundle(module, tmp_path / "t.fuelbundle", ["cpu", "sm_90"]))
    gpu = lb.manifest["targets"]["sm_90"]
    names = [n for k in gpu["kernels"] for n in k["files"]]
    assert gpu["backend"] == "triton" and gpu["fingerprint"]["arch"] == "sm_90"
    assert {Path(n).suffix for n in names} == {".py", ".ptx", ".cubin"}
    assert lb.target == "cpu"  # no sm_90 here: the CPU build runs
    xs = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    want = np.maximum(xs + module.weights["b"], 0)
    np.testing.assert_array_equal(lb.executor().run({"x": xs})["y"], want)
