"""Every way an ONNX import fails is one `OnnxImportError` with one clear message."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx_models import make_model, mlp_model

from frontends.onnx import OnnxImportError, import_onnx
from runtime.executor import Executor
from runtime.module import ModuleError

F = TensorProto.FLOAT


def _vi(name: str, shape: list, dtype: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def _raises(model: onnx.ModelProto | str, match: str, **kw: object) -> OnnxImportError:
    with pytest.raises(OnnxImportError, match=match) as info:
        import_onnx(model, **kw)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)
    return info.value


def test_every_unsupported_op_type_is_listed_sorted_with_counts() -> None:
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w"], ["a"]),
        n("Relu", ["a"], ["b"]),
        n("Conv", ["b", "w"], ["c"]),
        n("NonZero", ["c"], ["d"]),
        n("FusedMatMul", ["c", "c"], ["e"], domain="com.microsoft"),
        n("TopK", ["c", "k"], ["f", "g"]),
    ]
    model = make_model(
        nodes,
        [_vi("x", [1, 1, 4, 4]), _vi("w", [1, 1, 1, 1])],
        [_vi("e", None)],
        check=False,
        domains=("com.microsoft",),
    )
    err = _raises(model, "uses 4 op types")
    assert str(err) == (
        "the model uses 4 op types fuel does not support: Conv (2 nodes), NonZero (1 node), "
        "TopK (1 node), com.microsoft.FusedMatMul (1 node)"
    )


def test_an_error_is_a_module_error() -> None:
    assert issubclass(OnnxImportError, ModuleError)  # so every CLI reports it in one line


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"\x08\x07garbage\xff\xfe" * 8, "is not a readable ONNX model"),
        (b"", "is not a readable ONNX model .it has no graph outputs."),
        (None, "cannot read"),
    ],
    ids=["garbage", "empty", "missing"],
)
def test_unreadable_files(tmp_path: Path, content: bytes | None, match: str) -> None:
    path = tmp_path / "model.onnx"
    if content is not None:
        path.write_bytes(content)
    _raises(str(path), match)


def test_dynamic_dims_name_the_input_and_dim_and_can_be_pinned() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    model = make_model(nodes, [_vi("x", ["batch", 8])], [_vi("y", ["batch", 8])])
    _raises(model, r"graph input 'x' has a dynamic dimension 0 \('batch'\); .* --input-shape x=")
    module = import_onnx(model, input_shapes={"x": (3, 8)})
    out = Executor(module).run({"x": -np.ones((3, 8), np.float32)})["y"]
    assert out.shape == (3, 8) and not out.any()
    _raises(model, "no graph input is named 'z'", input_shapes={"z": (1,)})


def test_unknown_rank_is_a_dynamic_shape() -> None:
    relu = [helper.make_node("Relu", ["x"], ["y"])]
    model = make_model(relu, [_vi("x", None)], [_vi("y", None)], check=False)
    _raises(model, "graph input 'x' has no shape")


def test_unsupported_dtypes() -> None:
    i16 = TensorProto.INT16
    model = make_model(
        [helper.make_node("Abs", ["x"], ["y"])], [_vi("x", [4], i16)], [_vi("y", [4], i16)]
    )
    _raises(model, "graph input 'x' has unsupported dtype INT16 .fuel supports FLOAT, DOUBLE")
    cast = helper.make_node("Cast", ["x"], ["y"], name="to_u32", to=TensorProto.UINT32)
    model = make_model([cast], [_vi("x", [4])], [_vi("y", [4], TensorProto.UINT32)])
    _raises(model, r"node 'to_u32' \(Cast\): attribute 'to' has unsupported dtype UINT32")


def test_unsupported_attribute_and_variant_name_the_node() -> None:
    gelu = helper.make_node("Gelu", ["x"], ["y"], name="act", approximate="fast")
    model = make_model([gelu], [_vi("x", [4])], [_vi("y", [4])], opset=20, check=False)
    _raises(model, r"^node 'act' \(Gelu\): approximate='fast' is not supported")
    relu = helper.make_node("Relu", ["x"], ["y"], name="r", bogus=1)
    model = make_model([relu], [_vi("x", [4])], [_vi("y", [4])], check=False)
    _raises(model, r"^node 'r' \(Relu\): attribute 'bogus' is not supported")
    dropout = helper.make_node("Dropout", ["x", "ratio", "train"], ["y"], name="drop")
    inits = {"ratio": np.array(0.5, np.float32), "train": np.array(True)}
    model = make_model([dropout], [_vi("x", [4])], [_vi("y", [4])], inits)
    _raises(model, r"node 'drop' \(Dropout\): training_mode=true is not supported")


def test_run_time_shape_input_names_the_input_it_needs() -> None:
    reshape = helper.make_node("Reshape", ["x", "shape"], ["y"])
    model = make_model(
        [reshape], [_vi("x", [2, 6]), _vi("shape", [2], TensorProto.INT64)], [_vi("y", [3, 4])]
    )
    err = _raises(model, r"node #0 \(Reshape, output 'y'\): shape \(input 1\) must be a constant")
    assert err.constant_input == "shape"
    module = import_onnx(model, constants={"shape": np.array([3, 4])})
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(Executor(module).run({"x": x})["y"], x.reshape(3, 4))


def test_old_opsets_and_bad_graphs() -> None:
    model = mlp_model()
    model.opset_import[0].version = 6
    _raises(model, "imports standard opset 6; fuel imports opset 7 or newer")
    bad = make_model(
        [helper.make_node("Relu", ["nope"], ["y"])], [_vi("x", [4])], [_vi("y", [4])], check=False
    )
    _raises(bad, "input 'nope' is not produced by any earlier node")
    mismatch = make_model(
        [helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [4])], [_vi("y", [5])], check=False
    )
    _raises(mismatch, r"graph output 'y' is declared with shape \[5\] but imports as \[4\]")


def test_shape_errors_from_the_builder_name_the_node() -> None:
    add = helper.make_node("Add", ["x", "z"], ["y"], name="bad_add")
    model = make_model([add], [_vi("x", [4]), _vi("z", [3])], [_vi("y", [4])], check=False)
    _raises(model, r"node 'bad_add' \(Add\): 'fuel.add' operands do not broadcast")


def test_no_kernel_for_a_dtype_is_unsupported_not_a_crash() -> None:
    node = helper.make_node("MatMul", ["x", "z"], ["y"], name="mm8")
    i8 = TensorProto.INT8
    model = make_model([node], [_vi("x", [2, 2], i8), _vi("z", [2, 2], i8)], [_vi("y", [2, 2], i8)])
    _raises(model, r"node 'mm8' \(MatMul\): fuel has no kernel for 'fuel.matmul' on \(i8, i8, i8\)")


def test_an_opset_newer_than_fuel_knows_is_refused_by_name() -> None:
    model = mlp_model()
    model.opset_import[0].version = 999
    _raises(model, r"imports standard opset 999, newer than fuel knows \(opsets 7 to 28\)")
    model.opset_import[0].version = 28
    import_onnx(model)


def test_a_tensor_written_twice_is_refused() -> None:
    n = helper.make_node
    twice = [n("Relu", ["x"], ["y"], name="a"), n("Neg", ["x"], ["y"], name="b")]
    model = make_model(twice, [_vi("x", [4])], [_vi("y", [4])], check=False)
    _raises(model, r"node 'b' \(Neg\) writes tensor 'y', which node 'a' \(Relu\) already writes")
    over_input = [n("Relu", ["x"], ["x"])]
    model = make_model(over_input, [_vi("x", [4])], [_vi("x", [4])], check=False)
    _raises(model, r"node #0 \(Relu, output 'x'\) writes tensor 'x', which a graph input already")
    over_init = [n("Relu", ["x"], ["w"]), n("Add", ["x", "w"], ["y"])]
    model = make_model(
        over_init, [_vi("x", [4])], [_vi("y", [4])], {"w": np.ones(4, np.float32)}, check=False
    )
    _raises(model, "writes tensor 'w', which an initializer already writes")


def test_model_local_functions_are_inlined() -> None:
    body = [helper.make_node("Sigmoid", ["a"], ["s"]), helper.make_node("Mul", ["a", "s"], ["b"])]
    fn = helper.make_function("local", "Swishy", ["a"], ["b"], body, [helper.make_opsetid("", 17)])
    node = helper.make_node("Swishy", ["x"], ["y"], domain="local", name="sw")
    graph = helper.make_graph([node], "g", [_vi("x", [4])], [_vi("y", [4])])
    model = helper.make_model(
        graph,
        functions=[fn],
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    x = np.linspace(-2, 2, 4, dtype=np.float32)
    y = Executor(import_onnx(model)).run({"x": x})["y"]
    np.testing.assert_allclose(y, x / (1 + np.exp(-x)), rtol=1e-6)


def test_a_refusal_of_a_model_file_names_the_file(tmp_path: Path) -> None:
    model = mlp_model()
    model.opset_import[0].version = 999
    path = tmp_path / "new.onnx"
    onnx.save(model, path)
    assert str(_raises(str(path), "opset 999")).startswith(f"{path}: the model imports")
