"""Live-length masks (`arange(Sk) <= pos` and its spellings) become `fuel.attention`'s kv_len
in the ONNX importer; any other mask keeps the reference formula. Every case is checked against
a float64 numpy reference (rtol 1e-5, atol 1e-6)."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from frontends.onnx import import_onnx
from runtime.executor import Executor
from tests.frontends.onnx_models import make_model

F, I64 = TensorProto.FLOAT, TensorProto.INT64
HQ, HKV, SK, D = 4, 2, 12, 8


def _vi(name: str, shape: list[int], t: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, t, shape)


def decode_model(
    cmp: str, ramp: np.ndarray, ramp_first: bool = True, **attrs: object
) -> onnx.ModelProto:
    """Attention of one query over a cache, mask = Reshape(cmp(ramp, pos)) to (1, 1, 1, Sk)."""
    operands = ["ramp", "pos"] if ramp_first else ["pos", "ramp"]
    nodes = [
        helper.make_node(cmp, operands, ["live"], name="live"),
        helper.make_node("Reshape", ["live", "shape"], ["mask"], name="mask"),
        helper.make_node("Attention", ["q", "k", "v", "mask"], ["y"], name="attn", **attrs),
    ]
    ins = [
        _vi("q", [1, HQ, 1, D]),
        _vi("k", [1, HKV, SK, D]),
        _vi("v", [1, HKV, SK, D]),
        _vi("pos", [1], I64),
    ]
    inits = {"ramp": ramp, "shape": np.array([1, 1, 1, SK], np.int64)}
    return make_model(nodes, ins, [_vi("y", [1, HQ, 1, D])], inits, opset=23)


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, live: np.ndarray) -> np.ndarray:
    k, v = (np.repeat(t.astype(np.float64), HQ // HKV, axis=1) for t in (k, v))
    s = q.astype(np.float64) @ k.transpose(0, 1, 3, 2) / math.sqrt(D)
    s = np.where(live, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def run(model: onnx.ModelProto, pos: int) -> tuple[np.ndarray, np.ndarray, str]:
    rng = np.random.default_rng(pos)
    q, k, v = (
        rng.standard_normal(s).astype(np.float32)
        for s in ((1, HQ, 1, D), (1, HKV, SK, D), (1, HKV, SK, D))
    )
    module = import_onnx(model)
    got = Executor(module).run({"q": q, "k": k, "v": v, "pos": np.array([pos])})["y"]
    return got, (q, k, v), str(module)  # type: ignore[return-value]


RAMP = np.arange(SK, dtype=np.int64)
LIVE = {  # (comparison, ramp first?) -> which slots are live for `pos`
    ("LessOrEqual", True): lambda p: RAMP <= p,
    ("Less", True): lambda p: RAMP < p,
    ("GreaterOrEqual", False): lambda p: p >= RAMP,
    ("Greater", False): lambda p: p > RAMP,
}


@pytest.mark.parametrize("pos", [0, 5, SK - 1])
@pytest.mark.parametrize(("cmp", "ramp_first"), sorted(LIVE))
def test_live_length_mask_becomes_kv_len(cmp: str, ramp_first: bool, pos: int) -> None:
    got, (q, k, v), text = run(decode_model(cmp, RAMP, ramp_first), pos)
    assert "kv_len" in text and "fuel.softmax" not in text
    live = LIVE[(cmp, ramp_first)](pos)
    if not live.any():  # no live key: zeros, like the ONNX reference path and torch's SDPA
        assert not got.any()
        return
    np.testing.assert_allclose(got, reference(q, k, v, live), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("what", "model", "live"),
    [
        ("shifted ramp", decode_model("LessOrEqual", RAMP + 1), lambda p: RAMP + 1 <= p),
        ("causal", decode_model("LessOrEqual", RAMP, is_causal=1), None),
    ],
)
def test_other_masks_keep_the_reference_formula(
    what: str, model: onnx.ModelProto, live: object
) -> None:
    got, (q, k, v), text = run(model, 6)
    assert "kv_len" not in text and "fuel.softmax" in text, what
    if live is not None:
        np.testing.assert_allclose(got, reference(q, k, v, live(6)), rtol=1e-5, atol=1e-6)
