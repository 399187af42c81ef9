"""The ONNX importer on whole models (vs onnxruntime), its folding, naming and constants, and
single ops in variants the ONNX node tests do not reach (onnxruntime's RMS norm, old opsets)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx_models import block_model, make_model, mlp_model, run_ort
from xdsl.dialects.builtin import NameLoc

from frontends.onnx import import_onnx, load_any, supported_op_types
from fuel_dialect.ops_movement import ConstantOp
from runtime.executor import Executor
from runtime.module import io_names

F = TensorProto.FLOAT


def _inputs(model: onnx.ModelProto, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    dims = {i.name: i.type.tensor_type.shape.dim for i in model.graph.input}
    return {
        k: rng.standard_normal([d.dim_value for d in s]).astype(np.float32) for k, s in dims.items()
    }


def _check_against_ort(model: onnx.ModelProto, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    feeds = _inputs(model)
    got = Executor(import_onnx(model)).run(feeds)
    want = run_ort(model, feeds)
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=atol, err_msg=name)


def test_mlp_matches_onnxruntime() -> None:
    _check_against_ort(mlp_model())


@pytest.mark.parametrize("gelu_op", [False, True], ids=["erf-pattern", "gelu-op"])
def test_transformer_block_matches_onnxruntime(gelu_op: bool) -> None:
    _check_against_ort(block_model(gelu_op=gelu_op), rtol=1e-4)


def test_io_names_are_the_onnx_names() -> None:
    module = import_onnx(mlp_model())
    assert io_names(module.entry) == (["x"], ["probs", "logits"])
    out = Executor(module).run(_inputs(mlp_model()))
    assert set(out) == {"probs", "logits"}


def test_shape_arithmetic_folds_away() -> None:
    """The Shape/Gather/Concat chain that computes the head-split shape leaves no op behind."""
    names = [op.name for op in import_onnx(block_model()).entry.body.block.ops]
    assert names.count("fuel.reshape") == 4  # q, k, v split + merge
    assert not {"fuel.gather", "fuel.concat", "fuel.cast"} & set(names)


def test_ops_carry_node_locations_and_tensor_names() -> None:
    module = import_onnx(block_model())
    ops = {
        op.location.desc.data: op
        for op in module.entry.body.block.ops
        if isinstance(op.location, NameLoc)
    }
    assert ops["attn/q_proj"].name == "fuel.matmul"
    assert ops["attn/softmax"].name == "fuel.softmax"
    assert "%qh = fuel.transpose" in str(module)  # the ONNX tensor name as SSA name


def test_initializers_become_weights_and_small_constants_inline() -> None:
    module = import_onnx(block_model())
    weights = {op.sym_name.data for op in module.weight_ops()}
    assert {"wq", "wk", "wv", "wo", "w_up", "w_down", "ln1_g"} <= weights
    assert "keep" in weights  # the folded causal mask (64 elements), named after its tensor
    constants = [op for op in module.entry.body.block.ops if isinstance(op, ConstantOp)]
    assert {str(op.value.type) for op in constants} == {"tensor<f32>"}  # scale, -1e9
    assert set(module.weights) == weights
    assert module.weights["wq"].dtype == np.float32


def test_constants_that_would_not_read_back_become_weights() -> None:
    """xDSL prints NaN/inf as hex its parser misreads: such constants go to safetensors."""
    nodes = [helper.make_node("Add", ["x", "c"], ["y"])]
    c = np.array([np.nan, np.inf, 1.5], np.float32)
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", F, [3])],
        [helper.make_tensor_value_info("y", F, [3])],
        {"c": c},
    )
    module = import_onnx(model)
    assert [op.sym_name.data for op in module.weight_ops()] == ["c"]
    out = Executor(module).run({"x": np.zeros(3, np.float32)})["y"]
    np.testing.assert_array_equal(out, c)


def test_all_constant_graph_folds_to_its_outputs() -> None:
    nodes = [
        helper.make_node("Range", ["s", "l", "d"], ["r"]),
        helper.make_node("Mul", ["r", "r"], ["y"]),
    ]
    inits = {"s": np.array(1, np.int64), "l": np.array(9, np.int64), "d": np.array(2, np.int64)}
    model = make_model(
        nodes, [], [helper.make_tensor_value_info("y", TensorProto.INT64, [4])], inits
    )
    module = import_onnx(model)
    assert [op.name for op in module.entry.body.block.ops] == ["fuel.constant", "func.return"]
    np.testing.assert_array_equal(Executor(module).run({})["y"], [1, 9, 25, 49])


def test_zero_size_input_and_result_fold() -> None:
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0),
        helper.make_node("Relu", ["x"], ["z"]),
    ]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", F, [0, 3])],
        [helper.make_tensor_value_info("y", F, []), helper.make_tensor_value_info("z", F, [0, 3])],
        opset=11,
    )
    out = Executor(import_onnx(model)).run({"x": np.zeros((0, 3), np.float32)})
    assert out["y"] == 0.0 and out["z"].shape == (0, 3)


def test_load_any_imports_onnx_and_loads_mlir(save_model, tmp_path) -> None:  # noqa: ANN001
    path = save_model(mlp_model())
    module = load_any(path)
    saved = module.save(tmp_path / "m.mlir")
    again = load_any(saved)
    feeds = _inputs(mlp_model())
    np.testing.assert_array_equal(
        Executor(module).run(feeds)["probs"], Executor(again).run(feeds)["probs"]
    )


def test_supported_op_types_lists_the_table() -> None:
    ops = supported_op_types()
    assert ops == sorted(ops)
    for op in (
        "MatMul",
        "Gemm",
        "LayerNormalization",
        "Attention",
        "Softmax",
        "Gather",
        "Slice",
        "com.microsoft.SimplifiedLayerNormalization",
    ):
        assert op in ops


# -- single ops against onnxruntime --------------------------------------------------------


def _one(
    op: str,
    shapes: list[list[int]],
    out_shape: list[int],
    inits=None,
    opset: int = 17,
    check: bool = True,
    **attrs: object,
) -> onnx.ModelProto:  # noqa: ANN001
    names = [f"x{i}" for i in range(len(shapes))]
    node = helper.make_node(op, names + list(inits or {}), ["y"], **attrs)
    ins = [helper.make_tensor_value_info(n, F, s) for n, s in zip(names, shapes, strict=True)]
    out = [helper.make_tensor_value_info("y", F, out_shape)]
    return make_model([node], ins, out, inits, opset=opset, check=check)


I64 = np.int64
SINGLE_OPS = {
    "slice-negative-steps": _one(
        "Slice",
        [[5, 6]],
        [2, 4],
        {
            "s": np.array([-1, 4], I64),
            "e": np.array([-9, 0], I64),
            "a": np.array([0, 1], I64),
            "st": np.array([-3, -1], I64),
        },
    ),
    "expand-bidirectional": _one("Expand", [[3, 1]], [2, 3, 4], {"s": np.array([2, 1, 4], I64)}),
    "tile": _one("Tile", [[2, 3]], [4, 9], {"r": np.array([2, 3], I64)}),
    "gemm-transposed-scaled": _one(
        "Gemm", [[6, 4], [5, 6], [5]], [4, 5], transA=1, transB=1, alpha=0.5, beta=2.0
    ),
    "layernorm-axis1-no-bias": _one(
        "LayerNormalization", [[2, 3, 4], [3, 4]], [2, 3, 4], axis=1, epsilon=1e-3
    ),
    "softmax-opset11-coerced": _one("Softmax", [[2, 3, 4]], [2, 3, 4], opset=11, axis=1),
    "logsoftmax": _one("LogSoftmax", [[3, 5]], [3, 5], axis=0),
    "reduce-l2-keepdims": _one("ReduceL2", [[3, 4, 5]], [3, 1, 5], axes=[1], keepdims=1),
    "reduce-logsumexp": _one("ReduceLogSumExp", [[3, 4]], [4], axes=[0], keepdims=0),
    "matmul-1d-3d": _one("MatMul", [[4], [2, 4, 3]], [2, 3]),
    "simplified-layernorm": _one(
        "SimplifiedLayerNormalization", [[2, 5, 8], [8]], [2, 5, 8], check=False, epsilon=1e-6
    ),  # onnxruntime's: in domain ""
    "hardswish": _one("HardSwish", [[4, 5]], [4, 5]),
    "clip-opset6-attrs": _one("Clip", [[4, 5]], [4, 5], opset=7, min=-0.5, max=0.25),
}


@pytest.mark.parametrize("name", SINGLE_OPS)
def test_single_op_matches_onnxruntime(name: str) -> None:
    _check_against_ort(SINGLE_OPS[name])
