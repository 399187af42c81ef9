"""`fuel.attention` from the forms the exporters write (`passes.fused.attention_forms`): each
is fused, and the fused arm computes what the unfused graph does, fully masked rows included
(zeros where the NaN guard zeroes softmax's NaN, uniform weights where a finite fill leaves
every logit equal), against the float64 run of the unfused graph."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import IntegerAttr, i64

from frontends.builder import GraphBuilder
from fuel_dialect.branch import PICKED_ATTR, BranchOp
from passes.fuse_patterns import fuse_patterns
from runtime.executor import Executor
from runtime.module import FuelModule

S, H, HKV, HD = 5, 4, 2, 8
LOW = float(np.finfo(np.float32).min)


def _guard(g: GraphBuilder, p: object) -> object:
    return g.where(g.compare("ne", p, p), 0.0, p)


def sdpa(g: GraphBuilder, t: str) -> object:
    """torch.onnx's SDPA: sqrt(scale) on q and kᵀ, where(b, 0, -inf) added, the NaN guard."""
    q, k, v = (g.input(n, (1, H, S, HD), t) for n in "qkv")
    mask = g.where(g.input("b", (1, 1, S, S), "i1"), 0.0, g.constant(-np.inf, t, checked=False))
    c = float(HD**-0.25)
    s = g.matmul(g.mul(q, c), g.mul(g.transpose(k, (0, 1, 3, 2)), c))
    return g.matmul(_guard(g, g.softmax(g.add(s, mask), -1)), v)


def gpt2(g: GraphBuilder, t: str) -> object:
    """GPT-2 eager: kᵀ the (B, S, H, D) projection permuted, div scale, where with finfo.min."""
    q, v = g.input("q", (1, H, S, HD), t), g.input("v", (1, H, S, HD), t)
    x = g.input("x", (1, S, H, HD), t)
    s = g.div(g.matmul(q, g.transpose(x, (0, 2, 3, 1))), float(np.sqrt(HD)))
    s = g.where(g.input("b", (1, 1, S, S), "i1"), s, g.constant(LOW, t))
    return g.matmul(g.softmax(s, -1), v)


def t5(g: GraphBuilder, t: str) -> object:
    """T5: no scale; a position bias where the mask keeps, finfo.min elsewhere, added."""
    q, k, v = (g.input(n, (1, H, S, HD), t) for n in "qkv")
    bias = g.constant(np.random.default_rng(0).uniform(-2, 2, (1, H, S, S)), t)
    mask = g.where(g.input("b", (1, 1, S, S), "i1"), bias, g.constant(LOW, t))
    s = g.matmul(q, g.transpose(k, (0, 1, 3, 2)))
    return g.matmul(g.softmax(g.add(s, mask), -1), v)


def gqa(g: GraphBuilder, t: str) -> object:
    """Mistral: kv heads repeated (reshape, broadcast, reshape), a float mask input, guard."""
    q = g.input("q", (1, H, S, HD), t)
    k, v = g.input("k", (1, HKV, S, HD), t), g.input("v", (1, HKV, S, HD), t)

    def rep(x: object) -> object:
        e = g.broadcast(g.reshape(x, (1, HKV, 1, S, HD)), (1, HKV, H // HKV, S, HD))
        return g.reshape(e, (1, H, S, HD))

    s = g.mul(g.matmul(q, g.transpose(rep(k), (0, 1, 3, 2))), float(HD**-0.5))
    s = g.add(s, g.input("m", (1, 1, S, S), t))
    return g.matmul(_guard(g, g.softmax(s, -1)), rep(v))


def gqa_dynamo(g: GraphBuilder, t: str) -> object:
    """torch.onnx dynamo on Mistral: kᵀ read straight off repeat_kv's expansion through
    (B*H, S, D), a 3-d transpose and back; the same scale constant on q and kᵀ."""
    q = g.input("q", (1, H, S, HD), t)
    k, v = g.input("k", (1, HKV, S, HD), t), g.input("v", (1, HKV, S, HD), t)
    r = H // HKV
    ek = g.broadcast(g.reshape(k, (1, HKV, 1, S, HD)), (1, HKV, r, S, HD))
    kt = g.reshape(g.transpose(g.reshape(ek, (H, S, HD)), (0, 2, 1)), (1, H, HD, S))
    ev = g.broadcast(g.reshape(v, (1, HKV, 1, S, HD)), (1, HKV, r, S, HD))
    c = g.constant(float(HD**-0.25), t)
    s = g.add(g.matmul(g.mul(q, c), g.mul(kt, c)), g.input("m", (1, 1, S, S), t))
    return g.matmul(_guard(g, g.softmax(s, -1)), g.reshape(ev, (1, H, S, HD)))


def torch_export(g: GraphBuilder, t: str, guard_value: float = -np.inf) -> object:
    """torch.export's SDPA: scores scaled, where(b, 0, -inf) added, the row guard
    `where(rowmax(logits) == -inf, 0, softmax(logits))`."""
    q, k, v = (g.input(n, (1, H, S, HD), t) for n in "qkv")
    ninf = g.constant(-np.inf, t, checked=False)
    mask = g.where(g.input("b", (1, 1, S, S), "i1"), 0.0, ninf)
    s = g.mul(g.matmul(q, g.transpose(k, (0, 1, 3, 2))), float(HD**-0.5))
    logits = g.add(s, mask)
    empty = g.compare(
        "eq", g.reduce_max(logits, -1, keepdim=True), g.constant(guard_value, t, checked=False)
    )
    return g.matmul(g.where(empty, 0.0, g.softmax(logits, -1)), v)


FORMS = {
    "sdpa": sdpa,
    "gpt2": gpt2,
    "t5": t5,
    "gqa": gqa,
    "gqa_dynamo": gqa_dynamo,
    "torch_export": torch_export,
}


def _inputs(m: FuelModule) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4)
    keep = np.tril(np.ones((S, S), bool)) & (rng.random((S, S)) < 0.8)
    keep[np.arange(S), np.arange(S)] = True
    keep[1] = False  # a query with no key
    ins: dict[str, np.ndarray] = {}
    ex = Executor(m)
    for name, (_, shape) in zip(ex.input_names, ex.input_specs, strict=True):
        if name == "b":
            ins[name] = keep[None, None]
        elif name == "m":
            ins[name] = np.where(keep, 0.0, -np.inf)[None, None]
        else:
            ins[name] = rng.standard_normal(shape)
    return ins


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the unfused NaN row
@pytest.mark.parametrize("form", sorted(FORMS))
def test_exporter_form_fuses_and_keeps_the_unfused_semantics(form: str) -> None:
    g, g64 = GraphBuilder(seed=1), GraphBuilder(seed=1)
    m, m64 = g.build([FORMS[form](g, "f32")]), g64.build([FORMS[form](g64, "f64")])
    assert fuse_patterns(m.op) == 1
    (b,) = [op for op in m.op.walk() if isinstance(op, BranchOp)]
    fused_op = b.arms[1].block.last_op.operands[0].owner  # pyright: ignore
    assert fused_op.name == "fuel.attention"
    if form.startswith("gqa"):  # the kv heads unexpanded
        assert fused_op.operands[1].type.get_shape()[1] == HKV
    ins = _inputs(m)
    ins32 = {k: v.astype(np.float32) if v.dtype != bool else v for k, v in ins.items()}
    ref64 = Executor(m64).run(ins)["out"]
    unfused = Executor(m).run(ins32)["out"]
    b.attributes[PICKED_ATTR] = IntegerAttr(1, i64)
    fused = Executor(m).run(ins32)["out"]
    assert not np.isnan(fused).any() and not np.isnan(unfused).any()
    if form in (
        "sdpa",
        "gqa",
        "gqa_dynamo",
        "torch_export",
    ):  # -inf in all of query 1: NaN, guarded to 0
        assert not fused[0, :, 1].any() and not unfused[0, :, 1].any()
    else:  # finfo.min everywhere in query 1: every logit equal, the mean of v
        v = ins32["v"].astype(np.float64)[0]
        np.testing.assert_allclose(fused[0, :, 1], v.mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fused, unfused, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fused, ref64, rtol=1e-5, atol=1e-6)


def test_a_guard_of_another_value_is_no_guard() -> None:
    """torch.export's row guard compares the row max with -inf; against 0 it zeroes rows the
    kernel would not: not fused."""
    g = GraphBuilder(seed=1)
    m = g.build([torch_export(g, "f32", guard_value=0.0)])
    assert fuse_patterns(m.op) == 0
