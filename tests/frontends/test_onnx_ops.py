"""Which fuel ops the importer picks for an ONNX op (the fast forms the passes look for), and
values the node tests do not pin: Constant forms, exact integer folding, the Attention paths."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_models import make_model, run_ort

from frontends.onnx import OnnxImportError, import_onnx
from runtime.executor import Executor

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _vi(name: str, shape: list | None, dtype: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def _ops(model: onnx.ModelProto) -> list[str]:
    return [op.name for op in import_onnx(model).entry.body.block.ops][:-1]


@pytest.mark.parametrize(
    ("attr", "value", "want"),
    [
        ("value_float", 1.5, np.float32(1.5)),
        ("value_floats", [1.0, 2.0], [1.0, 2.0]),
        ("value_int", 7, np.int64(7)),
        ("value_ints", [3, -4], [3, -4]),
        ("value", numpy_helper.from_array(np.eye(2, dtype=np.float16)), np.eye(2)),
        (
            "sparse_value",
            helper.make_sparse_tensor(
                numpy_helper.from_array(np.array([5.0, 6.0], np.float32)),
                numpy_helper.from_array(np.array([1, 4], np.int64)),
                [2, 3],
            ),
            [[0, 5, 0], [0, 6, 0]],
        ),
    ],
    ids=["float", "floats", "int", "ints", "tensor", "sparse"],
)
def test_constant_forms(attr: str, value: object, want: object) -> None:
    node = helper.make_node("Constant", [], ["y"], **{attr: value})
    model = make_model([node], [], [_vi("y", None, 0)], check=False)
    got = Executor(import_onnx(model)).run({})["y"]
    np.testing.assert_array_equal(got, want)


def test_string_constant_is_unsupported() -> None:
    node = helper.make_node("Constant", [], ["y"], name="s", value_string="hi")
    model = make_model([node], [], [_vi("y", None, 0)], check=False)
    with pytest.raises(OnnxImportError, match=r"node 's' \(Constant\): value_string constants"):
        import_onnx(model)


def test_integer_div_and_mod_fold_exactly() -> None:
    """i64 folds with truncated division (ONNX), beyond what f64 can represent."""
    a = np.array([2**62 + 1, -7, 7, -7], np.int64)
    b = np.array([3, 2, -2, -2], np.int64)
    nodes = [helper.make_node("Div", ["a", "b"], ["q"]), helper.make_node("Mod", ["a", "b"], ["m"])]
    model = make_model(nodes, [], [_vi("q", [4], I64), _vi("m", [4], I64)], {"a": a, "b": b})
    out = Executor(import_onnx(model)).run({})
    np.testing.assert_array_equal(out["q"], [(2**62 + 1) // 3, -3, -3, 3])
    np.testing.assert_array_equal(out["m"], np.mod(a, b))


@pytest.mark.parametrize("dtype", [TensorProto.INT32, TensorProto.INT8])
def test_run_time_integer_div_and_mod_match_numpy(dtype: int) -> None:
    nodes = [
        helper.make_node("Div", ["a", "b"], ["q"]),
        helper.make_node("Mod", ["a", "b"], ["m"]),
        helper.make_node("Mod", ["a", "b"], ["f"], fmod=1),
    ]
    model = make_model(
        nodes, [_vi("a", [64], dtype), _vi("b", [64], dtype)], [_vi(k, [64], dtype) for k in "qmf"]
    )
    npt = helper.tensor_dtype_to_np_dtype(dtype)
    info = np.iinfo(npt)
    rng = np.random.default_rng(0)
    a = rng.integers(info.min, info.max, 64, dtype=npt, endpoint=True)
    b = rng.integers(info.min, info.max, 64, dtype=npt, endpoint=True)
    b[b == 0] = 3
    out = Executor(import_onnx(model)).run({"a": a, "b": b})
    trunc = (np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64))) * np.sign(a) * np.sign(b)
    np.testing.assert_array_equal(out["q"], trunc.astype(npt))
    np.testing.assert_array_equal(out["m"], np.mod(a, b))
    np.testing.assert_array_equal(out["f"], np.fmod(a, b))


def _attention(q: list[int], kv: list[int], **attrs: object) -> onnx.ModelProto:
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], **attrs)
    y = [q[0], q[1], q[2], kv[3]]
    return make_model([node], [_vi("q", q), _vi("k", kv), _vi("v", kv)], [_vi("y", y)], opset=23)


@pytest.mark.parametrize("causal", [0, 1])
def test_attention_takes_fuel_attention_and_matches_onnxruntime(causal: int) -> None:
    model = _attention([1, 8, 6, 16], [1, 2, 6, 16], is_causal=causal)  # GQA 8 / 2
    assert "fuel.attention" in _ops(model)
    rng = np.random.default_rng(0)
    shapes = {"q": (1, 8, 6, 16), "k": (1, 2, 6, 16), "v": (1, 2, 6, 16)}
    feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    got = Executor(import_onnx(model)).run(feeds)["y"]
    np.testing.assert_allclose(got, run_ort(model, feeds)["y"], rtol=1e-5, atol=1e-6)


def test_attention_variants_fuel_attention_cannot_express_use_primitives() -> None:
    softcap = _attention([1, 2, 4, 8], [1, 2, 4, 8], softcap=5.0)
    cross_causal = _attention([1, 2, 3, 8], [1, 2, 5, 8], is_causal=1)  # top-left, not bottom-right
    for model in (softcap, cross_causal):
        ops = _ops(model)
        assert "fuel.attention" not in ops and "fuel.softmax" in ops


def test_decode_step_with_nonpad_length_becomes_kv_len() -> None:
    node = helper.make_node("Attention", ["q", "k", "v", "", "", "", "n"], ["y"], is_causal=1)
    model = make_model(
        [node],
        [
            _vi("q", [1, 4, 1, 8]),
            _vi("k", [1, 4, 16, 8]),
            _vi("v", [1, 4, 16, 8]),
            _vi("n", [1], I64),
        ],
        [_vi("y", [1, 4, 1, 8])],
        opset=24,
    )
    module = import_onnx(model)
    att = next(op for op in module.entry.body.block.ops if op.name == "fuel.attention")
    assert att.kv_len is not None and att.causal is not None
    rng = np.random.default_rng(1)
    q, k, v = (
        rng.standard_normal(s).astype(np.float32)
        for s in ((1, 4, 1, 8), (1, 4, 16, 8), (1, 4, 16, 8))
    )
    y = Executor(module).run({"q": q, "k": k, "v": v, "n": np.array([5])})["y"]
    s = q @ k[:, :, :5].transpose(0, 1, 3, 2) / math.sqrt(8)
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(y, (p / p.sum(-1, keepdims=True)) @ v[:, :, :5], rtol=1e-5)


def test_rotary_embedding_becomes_fuel_rope() -> None:
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"])
    ins = [
        _vi("x", [1, 2, 4, 8]),
        _vi("cos", [16, 4]),
        _vi("sin", [16, 4]),
        _vi("pos", [1, 4], I64),
    ]
    model = make_model([node], ins, [_vi("y", [1, 2, 4, 8])], opset=23)
    assert _ops(model) == [
        "fuel.gather",
        "fuel.gather",
        "fuel.reshape",
        "fuel.reshape",
        "fuel.rope",
    ]


def test_swiglu_and_gelu_use_the_fused_ops() -> None:
    swiglu = helper.make_node("SwiGLU", ["a", "b"], ["y"])
    model = make_model(
        [swiglu], [_vi("a", [2, 8]), _vi("b", [2, 8])], [_vi("y", [2, 8])], opset=28, check=False
    )
    assert _ops(model) == ["fuel.silu", "fuel.mul"]
    gelu = helper.make_node("Gelu", ["a"], ["y"], approximate="tanh")
    model = make_model([gelu], [_vi("a", [2, 8])], [_vi("y", [2, 8])], opset=20)
    assert _ops(model) == ["fuel.gelu"]
    assert " tanh " in str(import_onnx(model))


def test_einsum_and_cumsum_match_numpy() -> None:
    nodes = [
        helper.make_node("Einsum", ["a", "b"], ["e"], equation="bhqd,bhkd->bhqk"),
        helper.make_node("CumSum", ["a", "ax"], ["c"], reverse=1),
    ]
    model = make_model(
        nodes,
        [_vi("a", [2, 3, 4, 5]), _vi("b", [2, 3, 6, 5])],
        [_vi("e", [2, 3, 4, 6]), _vi("c", [2, 3, 4, 5])],
        {"ax": np.array(2, np.int64)},
    )
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((2, 3, 6, 5))
    out = Executor(import_onnx(model)).run({"a": a.astype(np.float32), "b": b.astype(np.float32)})
    np.testing.assert_allclose(out["e"], np.einsum("bhqd,bhkd->bhqk", a, b), rtol=1e-5, atol=1e-6)
    rev = np.flip(np.cumsum(np.flip(a, 2), 2), 2)
    np.testing.assert_allclose(out["c"], rev, rtol=1e-5, atol=1e-6)


def _gather_model(
    op: str, data: np.ndarray, idx: np.ndarray, out_shape: list[int], const: bool, **attrs: object
) -> tuple[onnx.ModelProto, dict]:
    node = helper.make_node(op, ["x", "i"], ["y"], **attrs)
    ins = [_vi("x", list(data.shape))] + ([] if const else [_vi("i", list(idx.shape), I64)])
    model = make_model([node], ins, [_vi("y", out_shape)], {"i": idx} if const else None)
    return model, ({"x": data} if const else {"x": data, "i": idx})


@pytest.mark.parametrize("const", [True, False], ids=["constant-indices", "run-time-indices"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_gather_nd_matches_onnxruntime(k: int, const: bool) -> None:
    """GatherND (batch_dims 0), negative indices included: a gather of the merged lead dims."""
    rng = np.random.default_rng(k)
    data = rng.standard_normal((3, 4, 5)).astype(np.float32)
    lead = (2, 3)
    idx = np.stack([rng.integers(-d, d, lead) for d in data.shape[:k]], -1).astype(np.int64)
    model, feeds = _gather_model("GatherND", data, idx, [*lead, *data.shape[k:]], const)
    got = Executor(import_onnx(model)).run(feeds)["y"]
    np.testing.assert_array_equal(got, run_ort(model, feeds)["y"])


@pytest.mark.parametrize("const", [True, False], ids=["constant-indices", "run-time-indices"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements_matches_onnxruntime(axis: int, const: bool) -> None:
    rng = np.random.default_rng(7)
    data = rng.standard_normal((3, 4, 5)).astype(np.float32)
    shape = list(data.shape)
    shape[axis] = 2
    idx = rng.integers(-data.shape[axis], data.shape[axis], shape).astype(np.int64)
    model, feeds = _gather_model("GatherElements", data, idx, shape, const, axis=axis)
    got = Executor(import_onnx(model)).run(feeds)["y"]
    np.testing.assert_array_equal(got, run_ort(model, feeds)["y"])
