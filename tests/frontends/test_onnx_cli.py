"""`fuel import`: writes IR + weights that `fuel run` executes; one line and exit 1 on bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx_models import make_model, mlp_model, run_ort

from runtime.executor import Executor
from runtime.module import FuelModule
from tools.import_onnx import load_any, main, parse_shape


def fuel_import(*argv: str) -> int:
    """Run `fuel import ARGV` through its own entry point (parser and error boundary)."""
    return main(list(argv))


def test_import_writes_ir_and_weights_that_run(save_model, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    src = save_model(mlp_model())
    out = tmp_path / "out" / "mlp.mlir"
    assert fuel_import(src, "-o", str(out)) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"imported {src}: ") and line.endswith(str(out))
    assert "3 weights (3.1 KiB)" in line
    assert out.with_suffix(".safetensors").exists()
    text = out.read_text()
    assert 'loc("fc1"' in text and "fuel.matmul" in text
    assert 'fuel.weight "fc1.constant"' in text  # w1, transposed at import (Gemm transB)
    module = FuelModule.load(out)
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    got = Executor(module).run({"x": x})
    np.testing.assert_allclose(got["probs"], run_ort(mlp_model(), {"x": x})["probs"], rtol=1e-5)


def test_default_output_and_no_locations(save_model) -> None:  # noqa: ANN001
    src = Path(save_model(mlp_model(), "net.onnx"))
    assert fuel_import(str(src), "--no-locations") == 0
    text = src.with_suffix(".mlir").read_text()
    assert "loc(" not in text and "fuel.weights" in text


def test_input_shape_pins_dynamic_dims(save_model, tmp_path: Path) -> None:  # noqa: ANN001
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    vi = helper.make_tensor_value_info
    model = make_model(
        nodes, [vi("x", TensorProto.FLOAT, ["b", 4])], [vi("y", TensorProto.FLOAT, ["b", 4])]
    )
    out = tmp_path / "r.mlir"
    assert fuel_import(save_model(model), "-o", str(out), "--input-shape", "x=2x4") == 0
    assert "tensor<2x4xf32>" in out.read_text()
    assert parse_shape("ids=1,128") == ("ids", (1, 128))
    assert parse_shape("t=") == ("t", ())


def test_run_and_compile_take_input_shape(save_model, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """`fuel run` and `fuel compile` pin dynamic dims of an ONNX model like `fuel import`."""
    from tools.fuel import main as fuel_main

    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    vi = helper.make_tensor_value_info
    model = make_model(
        nodes, [vi("x", TensorProto.FLOAT, ["b", 4])], [vi("y", TensorProto.FLOAT, ["b", 4])]
    )
    src = save_model(model)
    assert fuel_main(["run", src, "--random-inputs"]) == 1
    assert "--input-shape" in capsys.readouterr().err
    assert fuel_main(["run", src, "--input-shape", "x=3x4", "--input", "x=3x4xf32=-1"]) == 0
    assert "y: [3, 4] f32 sum=0 " in capsys.readouterr().out
    out = tmp_path / "r.fuelbundle"
    assert fuel_main(["compile", src, "-o", str(out), "--input-shape", "x=3x4"]) == 0
    assert fuel_main(["run", str(out), "--input", "x=3x4xf32=2"]) == 0
    assert "y: [3, 4] f32 sum=24 " in capsys.readouterr().out


@pytest.mark.parametrize(
    ("setup", "match"),
    [
        ("missing", "cannot read"),
        ("garbage", "is not a readable ONNX model"),
        ("unsupported", "uses 1 op type fuel does not support: Conv (1 node)"),
        ("dynamic", "dynamic dimension 0 ('b')"),
        ("bad-shape", "--input-shape expects NAME=1x128"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(
    setup: str, match: str, save_model, tmp_path: Path, capsys
) -> None:  # noqa: ANN001
    vi = helper.make_tensor_value_info
    path, extra = str(tmp_path / "nope.onnx"), []
    if setup == "garbage":
        Path(path).write_bytes(b"\x08\x07not a model\xff" * 4)
    elif setup == "unsupported":
        conv = helper.make_node("Conv", ["x", "w"], ["y"])
        model = make_model(
            [conv],
            [vi("x", TensorProto.FLOAT, [1, 1, 3, 3]), vi("w", TensorProto.FLOAT, [1, 1, 1, 1])],
            [vi("y", TensorProto.FLOAT, [1, 1, 3, 3])],
        )
        path = save_model(model)
    elif setup in ("dynamic", "bad-shape"):
        relu = [helper.make_node("Relu", ["x"], ["y"])]
        path = save_model(
            make_model(
                relu, [vi("x", TensorProto.FLOAT, ["b", 4])], [vi("y", TensorProto.FLOAT, ["b", 4])]
            )
        )
        extra = ["--input-shape", "x"] if setup == "bad-shape" else []
    assert fuel_import(path, *extra) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert err.startswith("fuel: error: ") and match in err and "\n" not in err
    assert "Traceback" not in captured.err


def test_module_main(save_model, tmp_path: Path) -> None:  # noqa: ANN001
    assert main([save_model(mlp_model()), "-o", str(tmp_path / "m.mlir")]) == 0


def test_cli_load_any_imports_onnx_or_loads_ir(save_model, tmp_path: Path) -> None:  # noqa: ANN001
    src = save_model(mlp_model())
    module = load_any(src)
    assert [op.sym_name.data for op in module.weight_ops()]
    saved = module.save(tmp_path / "m.mlir")
    assert str(load_any(str(saved))) == str(FuelModule.load(saved))


def test_dim_keeps_a_dynamic_dim_symbolic(save_model, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """`--dim batch=1:8`: one bundle runs every batch size in the range, matching ONNX Runtime;
    a missing range, an unknown dim and a size outside the range each get one clear line."""
    from tools.fuel import main as fuel_main

    model = mlp_model()
    for vi in (model.graph.input[0], *model.graph.output):
        vi.type.tensor_type.shape.dim[0].dim_param = "batch"
    src = save_model(model)
    out = tmp_path / "m.fuelbundle"
    assert fuel_main(["compile", src, "-o", str(out)]) == 1
    assert "dynamic dimension 0 ('batch'); give its range with --dim batch=LO:HI" in (
        capsys.readouterr().err
    )
    assert fuel_main(["compile", src, "-o", str(out), "--dim", "seq=1:8"]) == 1
    assert "--dim seq: no dynamic input dim is named 'seq' (dynamic dims: batch)" in (
        capsys.readouterr().err
    )
    assert fuel_main(["compile", src, "-o", str(out), "--dim", "batch=1:8"]) == 0
    from runtime.bundle import load_bundle

    ex = load_bundle(out).executor()
    for b in (2, 7):
        x = np.random.default_rng(b).standard_normal((b, 16)).astype(np.float32)
        want = run_ort(model, {"x": x})["probs"]
        np.testing.assert_allclose(ex.run({"x": x})["probs"], want, rtol=1e-4, atol=1e-6)
    assert fuel_main(["run", str(out), "--input", "x=9x16xf32=1"]) == 1
    assert "dim 'batch' = 9 (input 'x' dim 0) is outside its range [1, 8]" in (
        capsys.readouterr().err
    )
