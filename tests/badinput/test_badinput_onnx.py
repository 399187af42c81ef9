"""Bad ONNX files at the API: each import is one `OnnxImportError` whose message starts with the
model's path (so `fuel import` / `fuel run` name the file), never another exception."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from frontends.onnx import OnnxImportError, import_onnx

F, I64 = TensorProto.FLOAT, TensorProto.INT64
HUGE = [100_000_000_000, 100_000_000_000]


def _vi(name: str, shape: list[int] | None, dtype: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def _model(
    nodes: list[onnx.NodeProto],
    ins: list[onnx.ValueInfoProto],
    outs: list[onnx.ValueInfoProto],
    inits: dict[str, np.ndarray] | None = None,
    opset: int = 17,
) -> onnx.ModelProto:
    tensors = [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()]
    graph = helper.make_graph(nodes, "g", ins, outs, tensors)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _relu(opset: int = 17) -> onnx.ModelProto:
    return _model(
        [helper.make_node("Relu", ["x"], ["y"], name="r")],
        [_vi("x", [4])],
        [_vi("y", [4])],
        opset=opset,
    )


n = helper.make_node
CASES: dict[str, tuple[Callable[[], onnx.ModelProto | bytes], str]] = {
    "opset-999": (lambda: _relu(999), "imports standard opset 999, newer than fuel knows"),
    "opset-29": (lambda: _relu(29), "imports standard opset 29, newer than fuel knows"),
    "opset-6": (lambda: _relu(6), "imports standard opset 6; fuel imports opset 7 or newer"),
    "written-twice": (
        lambda: _model(
            [n("Relu", ["x"], ["y"], name="a"), n("Neg", ["x"], ["y"], name="b")],
            [_vi("x", [4])],
            [_vi("y", [4])],
        ),
        r"node 'b' \(Neg\) writes tensor 'y', which node 'a' \(Relu\) already",
    ),
    "writes-an-input": (
        lambda: _model([n("Relu", ["x"], ["x"], name="a")], [_vi("x", [4])], [_vi("x", [4])]),
        "writes tensor 'x', which a graph input already writes",
    ),
    "writes-an-initializer": (
        lambda: _model(
            [n("Relu", ["x"], ["w"]), n("Add", ["x", "w"], ["y"])],
            [_vi("x", [4])],
            [_vi("y", [4])],
            {"w": np.ones(4, np.float32)},
        ),
        "writes tensor 'w', which an initializer already writes",
    ),
    "huge-input": (
        lambda: _model([n("Relu", ["x"], ["y"])], [_vi("x", HUGE)], [_vi("y", HUGE)]),
        r"graph input 'x' has shape \[100000000000, 100000000000\]: more than",
    ),
    "expand-to-huge": (
        lambda: _model(
            [n("Expand", ["x", "s"], ["y"], name="e")],
            [_vi("x", [1])],
            [_vi("y", HUGE)],
            {"s": np.array(HUGE, np.int64)},
        ),
        r"(declares|shape) .*100000000000",
    ),
    "unsupported-op": (
        lambda: _model([n("NonZero", ["x"], ["y"])], [_vi("x", [4])], [_vi("y", None, I64)]),
        "does not support: NonZero",
    ),
    "dynamic-dim": (
        lambda: _model([n("Relu", ["x"], ["y"])], [_vi("x", ["b"])], [_vi("y", ["b"])]),
        "dynamic dimension 0 \\('b'\\)",
    ),
    "dangling-input": (
        lambda: _model([n("Relu", ["nope"], ["y"])], [_vi("x", [4])], [_vi("y", [4])]),
        "'nope' is not produced",
    ),
    "no-such-output": (
        lambda: _model([n("Relu", ["x"], ["y"])], [_vi("x", [4])], [_vi("z", [4])]),
        "graph output 'z' is not produced",
    ),
    "sequence-input": (
        lambda: _model(
            [n("Identity", ["x"], ["y"])],
            [helper.make_tensor_sequence_value_info("x", F, [4])],
            [_vi("y", [4])],
        ),
        "is not a tensor",
    ),
    "garbage": (lambda: b"\x08\x07not a model\xff" * 4, "is not a readable ONNX model"),
    "empty-file": (lambda: b"", "no graph outputs"),
}


def _write(tmp_path: Path, model: onnx.ModelProto | bytes) -> Path:
    path = tmp_path / "bad.onnx"
    path.write_bytes(model if isinstance(model, bytes) else model.SerializeToString())
    return path


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_onnx(case: str, tmp_path: Path) -> None:
    make, match = CASES[case]
    path = _write(tmp_path, make())
    with pytest.raises(OnnxImportError, match=match) as e:
        import_onnx(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("cut", [1, 5, 9, 13, 17, 21, 25, 29])
def test_truncated_onnx(cut: int, tmp_path: Path) -> None:
    data = _relu().SerializeToString()
    path = _write(tmp_path, data[: len(data) * cut // 32])
    with pytest.raises(OnnxImportError) as e:
        import_onnx(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_input_shape_override_is_bounded(tmp_path: Path) -> None:
    path = _write(tmp_path, _relu())
    with pytest.raises(OnnxImportError, match=r"graph input 'x' has shape .*more than"):
        import_onnx(path, input_shapes={"x": HUGE})
