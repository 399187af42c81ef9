"""A bundle's GPU target runs: its lowered IR (generated Triton kernels + library calls) on an
emulated `cuda:0` (CPU tensors, the Triton interpreter), checked against its CPU target.

Tolerance: f32 results of the sm_90 build agree with the cpu build to rtol = atol = 1e-4 (the
Triton kernels reassociate sums and evaluate transcendentals differently from numpy).
Compiling a bundle runs Triton's AOT in a child process (a few seconds), so each graph is
compiled once per module.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from lowering.bundle import load_bundle, write_bundle
from runtime.binding_table import KernelBindingTable
from runtime.bundle import BundleError, sha256
from runtime.module import FuelModule
from tests.runtime.bundle_helpers import resign
from tools.fuel import main as fuel_main

ROOT = Path(__file__).resolve().parents[2]
DECODER = ROOT / "examples" / "decoder_block.mlir"
TOL = {"rtol": 1e-4, "atol": 1e-4}

pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1", reason="emulation needs the Triton interpreter"
)

FUSED = """
func.func @main(%x: tensor<4x8xf32> {fuel.name = "x"})
    -> (tensor<4x8xf32> {fuel.name = "y"}, tensor<4x16xf32> {fuel.name = "z"}) {
  %w = fuel.weight "w" : tensor<8x16xf32>
  %b = fuel.weight "b" : tensor<16xf32>
  %wg = fuel.weight "wg" : tensor<8x16xf32>
  %wu = fuel.weight "wu" : tensor<8x16xf32>
  %wd = fuel.weight "wd" : tensor<16x8xf32>
  %z = fuel.matmul_bias_act %x, %w, %b act = "gelu" : tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  %m = fuel.gated_mlp %x, %wg, %wu, %wd : tensor<4x8xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %e = fuel.exp %m : tensor<4x8xf32>
  %y = fuel.mul %e, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %y, %z : tensor<4x8xf32>, tensor<4x16xf32>
}
"""  # noqa: E501


@pytest.fixture(autouse=True)
def no_gpu_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """Behave like a machine without the GPU (even on one), and without the env override."""
    monkeypatch.setattr("runtime.bundle.machine_gpu_targets", lambda: set())
    monkeypatch.delenv("FUEL_EMULATE_GPU", raising=False)


@pytest.fixture(scope="module")
def decoder_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gpu") / "decoder"
    return write_bundle(FuelModule.load(DECODER), out, ["cpu", "sm_90"])


@pytest.fixture(scope="module")
def fused_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(1)
    module = FuelModule.parse(FUSED)
    shapes = {"w": (8, 16), "b": (16,), "wg": (8, 16), "wu": (8, 16), "wd": (16, 8)}
    module.weights = {
        n: (0.3 * rng.standard_normal(s)).astype(np.float32) for n, s in shapes.items()
    }
    return write_bundle(
        module, tmp_path_factory.mktemp("gpu") / "fused.fuelbundle", ["cpu", "sm_90"]
    )


def _x(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_decoder_block_sm90_emulated_matches_the_cpu_target(decoder_bundle: Path) -> None:
    lb = load_bundle(decoder_bundle)
    assert lb.target == "cpu"  # no sm_90 here and no emulation asked: the cpu build
    x = _x((1, 16, 64))
    want = lb.executor().run({"x": x})["y"]
    ex = lb.executor(target="sm_90", emulate=True)
    assert ex.runtimes["cuda:0"].emulated  # type: ignore[attr-defined]
    assert any("fuel.triton_launch @fused_" in n for n in ex.op_names)
    assert any(n.startswith("fuel.library_call matmul") for n in ex.op_names)
    assert any(n == "fuel.copy" for n in ex.op_names)  # x in, transposes' operands across
    for _ in range(2):  # a second run reuses the schedule and the loaded kernels
        np.testing.assert_allclose(ex.run({"x": x})["y"], want, **TOL)
    assert ex.memory_peak_by_device()["cuda:0"] > 0


def test_fused_ops_lower_to_their_decomposition(fused_bundle: Path) -> None:
    lb = load_bundle(fused_bundle)
    lowered, _ = lb.lowered("sm_90")
    text = str(lowered.op)
    assert "fuel.gated_mlp" not in text and "fuel.matmul_bias_act" not in text
    assert 'fuel.library_call "matmul"' in text and "fuel.triton_launch" in text
    x = _x((4, 8), seed=2)
    want = lb.executor().run({"x": x})
    got = lb.executor(target="sm_90", emulate=True).run({"x": x})
    for name in ("y", "z"):
        np.testing.assert_allclose(got[name], want[name], **TOL)


def test_an_optimized_module_keeps_its_host_plan_on_the_gpu_target(tmp_path: Path) -> None:
    """fuel-optimize's output (a fused `fuel.gated_mlp`, every op stamped and placed on the
    cpu here) lowers for sm_90: ops planned for the host stay host ops there."""
    from passes.optimize import optimize_graph
    from passes.picker.support import PickerOptions

    module = FuelModule.load(DECODER)
    optimize_graph(module.op, PickerOptions(judge="none"))
    assert "fuel.gated_mlp" in str(module.op)
    lb = load_bundle(write_bundle(module, tmp_path / "opt", ["cpu", "sm_90"]))
    assert "fuel.gated_mlp" in str(lb.lowered("sm_90")[0].op)
    x = _x((1, 16, 64), seed=5)
    got = lb.executor(target="sm_90", emulate=True).run({"x": x})["y"]
    np.testing.assert_allclose(got, lb.executor().run({"x": x})["y"], **TOL)


def test_emulation_by_environment_picks_the_gpu_target(
    fused_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FUEL_EMULATE_GPU", "1")
    lb = load_bundle(fused_bundle)
    assert lb.target == "sm_90" and any(k.startswith("matmul_f32") for k in lb.kernel_ids)
    x = _x((4, 8))
    got = lb.executor().run({"x": x})["y"]
    np.testing.assert_allclose(got, lb.executor(target="cpu").run({"x": x})["y"], **TOL)


def test_a_gpu_target_without_its_gpu_needs_emulation(fused_bundle: Path) -> None:
    lb = load_bundle(fused_bundle)
    with pytest.raises(BundleError, match=r"target sm_90 needs a sm_90 GPU.*--emulate"):
        lb.executor(target="sm_90")
    with pytest.raises(BundleError, match=r"no target 'sm_80' in this bundle"):
        lb.executor(target="sm_80", emulate=True)


def test_a_tampered_triton_source_is_refused(decoder_bundle: Path, tmp_path: Path) -> None:
    b = Path(shutil.copytree(decoder_bundle, tmp_path / "b"))
    src = b / "targets" / "sm_90" / "fused_0" / "fused_0.py"
    src.write_text(src.read_text().replace("tl.load(", "2 * tl.load(", 1))
    with pytest.raises(BundleError, match=r"fused_0.py' is \d+ bytes, the manifest says"):
        load_bundle(b)

    def rehash(m: dict) -> None:  # a thorough forger: every hash matches the edit
        for k in m["targets"]["sm_90"]["kernels"]:
            k["files"] = {n: sha256((b / n).read_bytes()) for n in k["files"]}

    resign(b, rehash)  # the source now differs only from the one in the lowered IR
    lb = load_bundle(b)  # the cpu target is intact and still runs
    lb.executor().run({"x": _x((1, 16, 64))})
    with pytest.raises(BundleError, match=r"generated kernel fused_0: .* differs from the source"):
        lb.executor(target="sm_90", emulate=True)
    with pytest.raises(BundleError, match="differs from the source"):
        load_bundle(b, emulate=True)


def test_a_library_kernel_the_registry_lacks_is_refused(
    decoder_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime.kernels.triton.registry import triton_kernel_table

    older = KernelBindingTable()  # this fuel's registry without rms_norm
    for (op, dtypes, backend), e in triton_kernel_table().iter_entries():
        if op != "rms_norm":
            older.register(
                op,
                dtypes,
                backend,
                e.kernel,
                kernel_source=e.kernel_source,
                revision=e.revision_hash,
            )
    monkeypatch.setattr("runtime.bundle._triton_table", lambda: older)
    lb = load_bundle(decoder_bundle)
    with pytest.raises(
        BundleError,
        match=r"library kernel rms_norm_f32_f32_f32_1x16x64_64_"
        r"1x16x64 \(rms_norm \[f32, f32, f32\] on cuda, "
        r"source triton\) is not in this fuel's Triton "
        "registry",
    ):
        lb.executor(target="sm_90", emulate=True)


def test_fuel_run_emulates_the_gpu_target(
    decoder_bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    x = _x((1, 16, 64), seed=4)
    np.save(tmp_path / "x.npy", x)
    argv = ["run", str(decoder_bundle), "--input", f"x={tmp_path / 'x.npy'}"]
    assert (
        fuel_main([*argv, "--target", "sm_90", "--emulate", "--output-dir", str(tmp_path / "gpu")])
        == 0
    )
    assert "y: [1, 16, 64] f32" in capsys.readouterr().out
    assert fuel_main([*argv, "--output-dir", str(tmp_path / "cpu")]) == 0
    got, want = np.load(tmp_path / "gpu" / "y.npy"), np.load(tmp_path / "cpu" / "y.npy")
    np.testing.assert_allclose(got, want, **TOL)
    capsys.readouterr()
    assert fuel_main([*argv, "--target", "sm_90"]) == 1
    assert "emulate it (fuel run --emulate" in capsys.readouterr().err
    assert fuel_main(["run", str(DECODER), "--emulate", "--random-inputs"]) == 1
    assert "apply to a bundle only" in capsys.readouterr().err


@pytest.mark.gpu
def test_the_gpu_target_on_a_real_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a machine with a GPU (run with FUEL_GPU=1): the bundle built for its arch runs by
    default, kernels JIT-compiled from the bundle's sources."""
    from runtime.topology import cuda_device_archs

    archs = sorted(cuda_device_archs())
    if not archs or os.environ.get("FUEL_GPU") != "1":
        pytest.skip("needs a CUDA GPU and FUEL_GPU=1")
    monkeypatch.undo()
    lb = load_bundle(write_bundle(FuelModule.load(DECODER), tmp_path / "b", ["cpu", archs[0]]))
    assert lb.target == archs[0]
    ex = lb.executor()
    assert not ex.runtimes["cuda:0"].emulated  # type: ignore[attr-defined]
    x = _x((1, 16, 64))
    np.testing.assert_allclose(ex.run({"x": x})["y"], lb.executor("cpu").run({"x": x})["y"], **TOL)


def test_a_gpu_topology_plan_lowers_its_cuda_arms_and_runs_them(tmp_path: Path) -> None:
    """Optimized for cpu_2gpu, the decoder block's placement branches carry cuda:0 arms; the
    sm_90 build lowers those arms to library calls and generated launches (declared in the
    manifest), and forcing every branch onto its cuda arm still matches the host run."""
    from xdsl.dialects.builtin import IntegerAttr

    from fuel_dialect.branch import PICKED_ATTR, BranchOp
    from fuel_dialect.ops_triton import LibraryCallOp
    from passes.optimize import optimize_graph
    from passes.picker.support import PickerOptions
    from runtime.executor import Executor

    module = FuelModule.load(DECODER)
    x = _x((1, 16, 64), seed=7)
    want = Executor(module).run({"x": x})["y"]
    topology = str(ROOT / "examples" / "topologies" / "cpu_2gpu.toml")
    optimize_graph(module.op, PickerOptions(topology=topology, judge="none"))
    lb = load_bundle(write_bundle(module, tmp_path / "gpu_plan", ["sm_90"]), emulate=True)
    lowered, _ = lb.lowered("sm_90")
    placement = [
        b for b in lowered.op.walk() if isinstance(b, BranchOp) and b.kind.data == "placement"
    ]
    assert placement and all(
        any(isinstance(op, LibraryCallOp) for op in b.arms[1].block.ops)
        or any(op.name == "fuel.triton_launch" for op in b.arms[1].block.ops)
        for b in placement
    )
    np.testing.assert_allclose(lb.executor().run({"x": x})["y"], want, **TOL)
    for b in placement:
        b.attributes[PICKED_ATTR] = IntegerAttr(1, 64)
    ex = lb.executor()
    np.testing.assert_allclose(ex.run({"x": x})["y"], want, **TOL)
    assert ex.memory_peak_by_device()["cuda:0"] > 0
