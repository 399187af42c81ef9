"""Small ONNX models built with `onnx.helper` (random weights, fixed seed), and onnxruntime as
the reference, for the importer tests."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def make_model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    inits: dict[str, np.ndarray] | None = None,
    opset: int = 17,
    domains: tuple[str, ...] = (),
    check: bool = True,
) -> onnx.ModelProto:
    """A (checked) model of one graph; `inits` become initializers; `domains` get version 1."""
    tensors = [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()]
    graph = helper.make_graph(nodes, "g", inputs, outputs, tensors)
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    if check:
        onnx.checker.check_model(model)
    return model


def mlp_model(seed: int = 0) -> onnx.ModelProto:
    """x (4, 16) -> Gemm(transB) -> Relu -> MatMul + Add -> Tanh -> Softmax."""
    rng = np.random.default_rng(seed)
    inits = {
        "w1": rng.standard_normal((32, 16)).astype(np.float32) / 4,
        "b1": rng.standard_normal(32).astype(np.float32),
        "w2": rng.standard_normal((32, 8)).astype(np.float32) / 6,
        "b2": rng.standard_normal(8).astype(np.float32),
    }
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1", transB=1),
        helper.make_node("Relu", ["h"], ["hr"], name="act"),
        helper.make_node("MatMul", ["hr", "w2"], ["m"], name="fc2"),
        helper.make_node("Add", ["m", "b2"], ["logits"], name="fc2_bias"),
        helper.make_node("Tanh", ["logits"], ["t"], name="squash"),
        helper.make_node("Softmax", ["t"], ["probs"], name="softmax", axis=-1),
    ]
    ins = [helper.make_tensor_value_info("x", F, [4, 16])]
    outs = [
        helper.make_tensor_value_info("probs", F, [4, 8]),
        helper.make_tensor_value_info("logits", F, [4, 8]),
    ]
    return make_model(nodes, ins, outs, inits)


def block_model(
    seed: int = 0, b: int = 2, s: int = 8, d: int = 32, heads: int = 4, gelu_op: bool = False
) -> onnx.ModelProto:
    """A pre-norm transformer block as exporters write it: LayerNormalization, Q/K/V MatMul +
    bias, head split through a Shape/Gather/Concat/Reshape chain (folded at import), causal mask
    from Trilu + Where, Softmax, output projection, residuals, and an MLP with the Erf GELU
    pattern (or the opset-20 Gelu op)."""
    rng = np.random.default_rng(seed)
    dh = d // heads

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / math.sqrt(shape[0])).astype(np.float32)

    inits: dict[str, np.ndarray] = {
        "ln1_g": 1 + 0.1 * rng.standard_normal(d).astype(np.float32),
        "ln1_b": w(d) / 10,
        "ln2_g": 1 + 0.1 * rng.standard_normal(d).astype(np.float32),
        "ln2_b": w(d) / 10,
        "wq": w(d, d),
        "wk": w(d, d),
        "wv": w(d, d),
        "wo": w(d, d),
        "bq": w(d),
        "bv": w(d),
        "w_up": w(d, 4 * d),
        "w_down": w(4 * d, d),
        "scale": np.array(1 / math.sqrt(dh), np.float32),
        "ones": np.ones((s, s), np.float32),
        "neg": np.array(-1e9, np.float32),
        "i0": np.array([0], np.int64),
        "i1": np.array([1], np.int64),
        "heads_dh": np.array([heads, dh], np.int64),
        "minus1": np.array([-1], np.int64),
    }
    n = helper.make_node
    nodes = [
        n("LayerNormalization", ["x", "ln1_g", "ln1_b"], ["h"], name="ln1", axis=-1),
        n("Shape", ["h"], ["hs"], name="shape"),
        n("Gather", ["hs", "i0"], ["bdim"], name="batch_dim", axis=0),
        n("Gather", ["hs", "i1"], ["sdim"], name="seq_dim", axis=0),
        n("Concat", ["bdim", "sdim", "heads_dh"], ["split_shape"], name="split_shape", axis=0),
        n("Concat", ["bdim", "sdim", "minus1"], ["merge_shape"], name="merge_shape", axis=0),
    ]
    for p, bias in (("q", "bq"), ("k", None), ("v", "bv")):
        src = f"{p}0" if bias else f"{p}1"
        nodes.append(n("MatMul", ["h", f"w{p}"], [src], name=f"attn/{p}_proj"))
        if bias:
            nodes.append(n("Add", [src, bias], [f"{p}1"], name=f"attn/{p}_bias"))
        nodes.append(n("Reshape", [f"{p}1", "split_shape"], [f"{p}2"], name=f"attn/{p}_split"))
        perm = [0, 2, 3, 1] if p == "k" else [0, 2, 1, 3]
        nodes.append(n("Transpose", [f"{p}2"], [f"{p}h"], name=f"attn/{p}_heads", perm=perm))
    nodes += [
        n("MatMul", ["qh", "kh"], ["sc0"], name="attn/scores"),
        n("Mul", ["sc0", "scale"], ["sc1"], name="attn/scale"),
        n("Trilu", ["ones"], ["tri"], name="attn/tri", upper=0),
        n("Cast", ["tri"], ["keep"], name="attn/keep", to=TensorProto.BOOL),
        n("Where", ["keep", "sc1", "neg"], ["sc2"], name="attn/mask"),
        n("Softmax", ["sc2"], ["p"], name="attn/softmax", axis=-1),
        n("MatMul", ["p", "vh"], ["o0"], name="attn/pv"),
        n("Transpose", ["o0"], ["o1"], name="attn/merge_heads", perm=[0, 2, 1, 3]),
        n("Reshape", ["o1", "merge_shape"], ["o2"], name="attn/merge"),
        n("MatMul", ["o2", "wo"], ["o3"], name="attn/out_proj"),
        n("Add", ["x", "o3"], ["r1"], name="residual1"),
        n("LayerNormalization", ["r1", "ln2_g", "ln2_b"], ["h2"], name="ln2", axis=-1),
        n("MatMul", ["h2", "w_up"], ["u"], name="mlp/up"),
    ]
    if gelu_op:
        nodes.append(n("Gelu", ["u"], ["g"], name="mlp/gelu"))
    else:
        inits["half"], inits["one"] = np.array(0.5, np.float32), np.array(1.0, np.float32)
        inits["sqrt2"] = np.array(math.sqrt(2), np.float32)
        nodes += [
            n("Div", ["u", "sqrt2"], ["g0"], name="mlp/gelu_div"),
            n("Erf", ["g0"], ["g1"], name="mlp/gelu_erf"),
            n("Add", ["g1", "one"], ["g2"], name="mlp/gelu_add"),
            n("Mul", ["u", "g2"], ["g3"], name="mlp/gelu_mul"),
            n("Mul", ["g3", "half"], ["g"], name="mlp/gelu_half"),
        ]
    nodes += [
        n("MatMul", ["g", "w_down"], ["dn"], name="mlp/down"),
        n("Add", ["r1", "dn"], ["y"], name="residual2"),
    ]
    ins = [helper.make_tensor_value_info("x", F, [b, s, d])]
    outs = [helper.make_tensor_value_info("y", F, [b, s, d])]
    return make_model(nodes, ins, outs, inits, opset=20 if gelu_op else 17)


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxruntime's outputs by name (CPU, one thread: deterministic)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, ["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds), strict=True))
