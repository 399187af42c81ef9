"""`fuel-fuse-patterns` and the fused-kernel registry: each pattern's arm 1 vs arm 0 numerics on
random inputs (and both vs a float64 run of the same graph), cost from the decomposition, bake
picking the fused op, ONNX's two GELU forms, idempotence, registry and adoption."""

from __future__ import annotations

import math
import threading
from dataclasses import replace

import numpy as np
import pytest
from xdsl.dialects.builtin import IntegerAttr, i64

from frontends.builder import GraphBuilder
from fuel_dialect.branch import PICKED_ATTR, BranchOp
from passes.bake_variants import BakeVariantsPass
from passes.fuse_patterns import FUSED_ATTR, find_matches, fuse_patterns
from passes.fused.patterns import known_weights
from passes.fused.registry import (
    BUILTIN_ENTRIES,
    FusedKernel,
    FusedKernelRegistry,
    default_fused_registry,
    entry_cost,
)
from runtime.executor import Executor
from runtime.module import FuelModule

RNG = np.random.default_rng(3)
S, D, H, HKV, HD = 6, 32, 4, 2, 8


def softmax_graph(g: GraphBuilder, t: str, n: int = S) -> object:
    x = g.input("x", (n, D), t)
    e = g.exp(g.sub(x, g.reduce_max(x, -1, keepdim=True)))
    return g.div(e, g.reduce_sum(e, -1, keepdim=True))


def rms_graph(g: GraphBuilder, t: str, swap: bool = False, weight: bool = True) -> object:
    x, w = g.input("x", (S, D), t), g.input("w", (D,), t)
    r = g.rsqrt(g.add(g.reduce_mean(g.mul(x, x), -1, keepdim=True), 1e-6))
    n = g.mul(r, x) if swap else g.mul(x, r)
    if not weight:
        return g.add(n, g.reduce_sum(w, -1))  # w stays an input; the norm has no weight
    return g.mul(w, n) if swap else g.mul(n, w)


def layer_norm_graph(g: GraphBuilder, t: str, affine: int = 2) -> object:
    """`affine`: 2 weight and bias, 1 weight only, 0 neither."""
    x, w, b = g.input("x", (S, D), t), g.input("w", (D,), t), g.input("b", (D,), t)
    c = g.sub(x, g.reduce_mean(x, -1, keepdim=True))
    r = g.rsqrt(g.add(g.reduce_mean(g.mul(c, c), -1, keepdim=True), 1e-5))
    n = g.mul(c, r)
    if affine < 2:  # w and b stay inputs, read by another op: a residual-like add
        return g.add(g.mul(w, n) if affine else n, g.sub(x, b))
    return g.add(g.mul(n, w), b)


def gated_mlp_graph(g: GraphBuilder, t: str, n: int = S, sigmoid_form: bool = False) -> object:
    x = g.input("x", (2, n, D), t)
    gate = g.matmul(x, g.input("wg", (D, 48), t))
    h = g.mul(gate, g.sigmoid(gate)) if sigmoid_form else g.silu(gate)
    up = g.matmul(x, g.input("wu", (D, 48), t))
    return g.matmul(g.mul(up, h), g.input("wd", (48, D), t))


def linear_graph(act: str) -> object:
    def graph(g: GraphBuilder, t: str, n: int = S) -> object:
        x, w, b = g.input("x", (2, n, D), t), g.input("w", (D, 16), t), g.input("b", (16,), t)
        y = g.add(b, g.matmul(x, w))
        acts = {
            "relu": g.relu,
            "gelu": g.gelu,
            "silu": g.silu,
            "none": lambda v: v,
            "gelu_tanh": lambda v: g.gelu(v, "tanh"),
            "silu_mul": lambda v: g.mul(g.sigmoid(v), v),
            # GELU's erf form as primitives: torch.onnx's order, then HF's
            "gelu_erf_ops": lambda v: g.mul(
                g.mul(v, g.add(g.erf(g.div(v, math.sqrt(2))), 1.0)), 0.5
            ),
            "gelu_erf_hf": lambda v: g.mul(
                g.mul(0.5, v), g.add(1.0, g.erf(g.mul(v, math.sqrt(0.5))))
            ),
            # GELU's tanh form as GPT-2's NewGELU writes it, the cube as pow(v, 3)
            "gelu_tanh_ops": lambda v: g.mul(
                g.mul(v, 0.5),
                g.add(
                    g.tanh(g.mul(g.add(v, g.mul(g.pow(v, 3.0), 0.044715)), math.sqrt(2 / math.pi))),
                    1.0,
                ),
            ),
        }
        return acts[act](y)

    return graph


def linear_no_bias_graph(g: GraphBuilder, t: str, n: int = S) -> object:
    """gelu(matmul(x, w)): the exporters drop an all-zero bias."""
    return g.gelu(g.matmul(g.input("x", (2, n, D), t), g.input("w", (D, 16), t)), "tanh")


def half_tables(g: GraphBuilder, t: str, form: str) -> tuple[object, object]:
    ang = np.outer(np.arange(S), 1.0 / 10000 ** (np.arange(0, HD, 2) / HD))
    if form == "concat":
        c, s = g.input("cos", (S, HD // 2), t), g.input("sin", (S, HD // 2), t)
        return g.concat([c, c], -1), g.concat([s, s], -1)
    if form == "trig":  # HF: emb = cat(freqs, freqs); cos = emb.cos()
        f = g.input("freqs", (1, 1, S, HD // 2), t)
        emb = g.concat([f, f], -1)
        return g.cos(emb), g.sin(emb)
    full = np.concatenate([ang, ang], -1)
    return g.constant(np.cos(full), t), g.constant(np.sin(full), t)


def rope_graph(form: str) -> object:
    def graph(g: GraphBuilder, t: str) -> object:
        x = g.input("x", (1, H, S, HD), t)
        cos, sin = half_tables(g, t, form)
        x1 = g.slice(x, [0, 0, 0, 0], [1, H, S, HD // 2])
        x2 = g.slice(x, [0, 0, 0, HD // 2], [1, H, S, HD])
        rot = g.concat([g.neg(x2), x1], -1)
        return g.add(g.mul(x, cos), g.mul(sin, rot))

    return graph


def repeat_kv(g: GraphBuilder, v: object, rep: int) -> object:
    b, hkv, s, d = 1, HKV, S, HD
    e = g.broadcast(g.reshape(v, (b, hkv, 1, s, d)), (b, hkv, rep, s, d))
    return g.reshape(e, (b, hkv * rep, s, d))


def attention_graph(mask: str, gqa: bool = False, primitive: bool = False) -> object:
    def graph(g: GraphBuilder, t: str) -> object:
        hk = HKV if gqa else H
        q = g.input("q", (1, H, S, HD), t)
        k, v = g.input("k", (1, hk, S, HD), t), g.input("v", (1, hk, S, HD), t)
        if gqa:
            k, v = repeat_kv(g, k, H // HKV), repeat_kv(g, v, H // HKV)
        s = g.matmul(q, g.transpose(k, (0, 1, 3, 2)))
        s = g.div(s, float(np.sqrt(HD))) if mask == "div" else g.mul(s, 1 / np.sqrt(HD))
        keep = np.tril(np.ones((S, S), bool))
        if mask == "add":
            s = g.add(s, g.constant(np.where(keep, 0.0, -1e9)[None, None], t))
        elif mask == "where":
            s = g.where(g.constant(keep, "i1"), s, g.constant(-1e9, t))
        if primitive:
            e = g.exp(g.sub(s, g.reduce_max(s, -1, keepdim=True)))
            p = g.div(e, g.reduce_sum(e, -1, keepdim=True))
        else:
            p = g.softmax(s, -1)
        return g.matmul(p, v)

    return graph


GRAPHS = {
    "softmax": softmax_graph,
    "rms_norm": rms_graph,
    "layer_norm": layer_norm_graph,
    "rms_norm/no_weight": lambda g, t: rms_graph(g, t, weight=False),
    "layer_norm/weight_only": lambda g, t: layer_norm_graph(g, t, affine=1),
    "layer_norm/no_affine": lambda g, t: layer_norm_graph(g, t, affine=0),
    "gated_mlp": gated_mlp_graph,
    "gated_mlp/sigmoid": lambda g, t: gated_mlp_graph(g, t, sigmoid_form=True),
    **{
        f"matmul_bias_act/{a}": linear_graph(a)
        for a in (
            "relu",
            "gelu",
            "gelu_tanh",
            "gelu_erf_ops",
            "gelu_erf_hf",
            "gelu_tanh_ops",
            "silu",
            "silu_mul",
            "none",
        )
    },
    "matmul_bias_act/no_bias": linear_no_bias_graph,
    **{f"rope/{f}": rope_graph(f) for f in ("concat", "trig", "const")},
    "attention/plain": attention_graph("none"),
    "attention/causal": attention_graph("add"),
    "attention/where": attention_graph("where"),
    "attention/gqa": attention_graph("add", gqa=True),
    "attention/primitive": attention_graph("div", primitive=True),
}


def build(name: str, t: str = "f32", n: int | None = None) -> FuelModule:
    """The `name` graph in dtype `t` (`n`: another row count, where the graph takes one)."""
    g = GraphBuilder(seed=1)
    return g.build([GRAPHS[name](g, t) if n is None else GRAPHS[name](g, t, n)])


def branches(m: FuelModule) -> list[BranchOp]:
    return [op for op in m.op.walk() if isinstance(op, BranchOp)]


def random_inputs(m: FuelModule) -> dict[str, np.ndarray]:
    ex = Executor(m)
    return {
        n: RNG.standard_normal(shape)
        for n, (_, shape) in zip(ex.input_names, ex.input_specs, strict=True)
    }


MEASURED: dict[str, tuple[float, float]] = {}


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_fused_arm_matches_the_primitives(name: str) -> None:
    """Arm 1 (the fused kernel) agrees with arm 0 within the entry's declared precision on
    random inputs, and both agree with the float64 run of the same graph."""
    m, m64 = build(name), build(name, "f64")
    assert fuse_patterns(m.op) == 1
    (b,) = branches(m)
    fused = b.arms[1].block.last_op.operands[0].owner  # pyright: ignore
    entry = name.split("/")[0]
    assert fused.attributes[FUSED_ATTR].data == entry  # pyright: ignore
    ins = random_inputs(m)
    ref64 = Executor(m64).run(ins)["out"]
    ins32 = {k: v.astype(np.float32) for k, v in ins.items()}
    ref = Executor(m).run(ins32)["out"]
    b.attributes[PICKED_ATTR] = IntegerAttr(1, i64)
    got = Executor(m).run(ins32)["out"]
    p = default_fused_registry().lookup(entry).precision  # pyright: ignore
    err = np.abs(got.astype(np.float64) - ref).max()
    assert err <= p.max_absolute + p.max_relative * np.abs(ref).max(), err
    np.testing.assert_allclose(got, ref64, rtol=1e-4, atol=1e-5)  # f32 vs float64
    np.testing.assert_allclose(ref, ref64, rtol=1e-4, atol=1e-5)


def test_both_operand_orders_of_rms_norm_match() -> None:
    for swap in (False, True):
        g = GraphBuilder()
        assert fuse_patterns(g.build([rms_graph(g, "f32", swap)]).op) == 1


def test_layer_norm_is_claimed_whole_not_as_an_inner_rms_norm() -> None:
    found = find_matches(build("layer_norm").op, default_fused_registry())
    assert [e.name for e, _, _ in found] == ["layer_norm"]


def test_attention_is_claimed_whole_not_as_its_softmax() -> None:
    found = find_matches(build("attention/primitive").op, default_fused_registry())
    assert [e.name for e, _, _ in found] == ["attention"]
    (_, match, arm) = found[0]
    want = {"scale": pytest.approx(1 / np.sqrt(HD)), "causal": False, "perm": None, "mask": None}
    assert match.params == want
    assert [op.name for op in arm] == ["fuel.attention"]


def test_gqa_attention_reads_the_unexpanded_kv_heads() -> None:
    ((_, match, arm),) = find_matches(build("attention/gqa").op, default_fused_registry())
    assert match.params["causal"] and arm[0].operands[1].type == match.inputs[1].type
    assert [a.type.get_shape()[1] for a in arm[0].operands] == [H, HKV, HKV]  # pyright: ignore


def test_rope_arm_makes_the_half_tables_it_needs() -> None:
    names = {
        f: [op.name for op in find_matches(build(f"rope/{f}").op, default_fused_registry())[0][2]]
        for f in ("concat", "trig", "const")
    }
    assert names == {
        "concat": ["fuel.rope"],
        "trig": ["fuel.cos", "fuel.reshape", "fuel.sin", "fuel.reshape", "fuel.rope"],
        "const": ["fuel.constant", "fuel.constant", "fuel.rope"],
    }


T = 16
"""Rows of the weight rope tables (positions a decode step gathers from)."""


def rope_weight_module(form: str, t: str = "f32", halves: str = "equal") -> FuelModule:
    """Rope whose tables are rows of weights `rope_cos/sin (T, HD)`, as Llama exports them:
    "gather" (decode: `gather(W, pos)` rows, x (1, H, 1, HD)), "weight" (prefill: `W` itself,
    T rows) or "rows" (prefill: a row slice `W[:S]`). `halves="differ"`: not a rotate-half
    table (its two halves are unequal), which rope must not match."""
    ang = np.outer(np.arange(T), 1.0 / 10000 ** (np.arange(0, HD, 2) / HD))
    other = ang if halves == "equal" else ang + 0.5
    full = np.concatenate([ang, other], -1)
    g = GraphBuilder(seed=1)
    seq = {"gather": 1, "weight": T, "rows": S}[form]
    x = g.input("x", (1, H, seq, HD), t)
    pos = g.input("pos", (1,), "i64") if form == "gather" else None
    tables = []
    for name, fn in (("rope_cos", np.cos), ("rope_sin", np.sin)):
        w = g.weight(name, (T, HD), t, value=fn(full))
        if form == "gather":
            w = g.gather(w, pos, 0)
        elif form == "rows":
            w = g.slice(w, [0, 0], [S, HD])
        tables.append(w)
    x1 = g.slice(x, [0, 0, 0, 0], [1, H, seq, HD // 2])
    x2 = g.slice(x, [0, 0, 0, HD // 2], [1, H, seq, HD])
    rot = g.concat([g.neg(x2), x1], -1)
    return g.build([g.add(g.mul(x, tables[0]), g.mul(rot, tables[1]))])


def rope_reference(m: FuelModule, x: np.ndarray, p: int) -> np.ndarray:
    """x * cos + rotate_half(x) * sin in float64 from the module's full-width tables."""
    rows = np.arange(p, p + 1) if x.shape[-2] == 1 else np.arange(x.shape[-2])
    c, s = (m.weights[n].astype(np.float64)[rows] for n in ("rope_cos", "rope_sin"))
    h = x.shape[-1] // 2
    return x * c + np.concatenate([-x[..., h:], x[..., :h]], -1) * s


@pytest.mark.parametrize("form", ["gather", "weight", "rows"])
def test_rope_of_weight_rows_matches_only_with_known_weights(form: str) -> None:
    """Rows of a weight table match when its values are known and its halves are equal; the
    fused arm slices the table's first half (after the gather: one row per decode step) and
    agrees with arm 0 and with float64 at several positions."""
    m = rope_weight_module(form)
    assert fuse_patterns(m.op) == 0  # weight values unknown: the halves cannot be checked
    assert fuse_patterns(m.op, weights=m.weights) == 1
    (b,) = branches(m)
    assert [op.name for op in b.arms[1].block.ops] == ["fuel.slice"] * 2 + [
        "fuel.rope",
        "fuel.yield",
    ]
    p = default_fused_registry().lookup("rope").precision  # pyright: ignore
    x = RNG.standard_normal(Executor(m).input_specs[0][1])
    for pos in (0, 5, T - 1) if form == "gather" else (0,):
        feeds = {"x": x.astype(np.float32)} | ({"pos": np.array([pos])} if form == "gather" else {})
        b.attributes[PICKED_ATTR] = IntegerAttr(0, i64)
        ref = Executor(m).run(feeds)["out"]
        b.attributes[PICKED_ATTR] = IntegerAttr(1, i64)
        got = Executor(m).run(feeds)["out"]
        err = np.abs(got.astype(np.float64) - ref).max()
        assert err <= p.max_absolute + p.max_relative * np.abs(ref).max(), err
        want = rope_reference(m, x.astype(np.float32).astype(np.float64), pos)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ref, want, rtol=1e-5, atol=1e-6)


def test_rope_of_weight_rows_with_unequal_halves_is_not_matched() -> None:
    for form in ("gather", "weight", "rows"):
        m = rope_weight_module(form, halves="differ")
        with known_weights(m.weights):
            assert find_matches(m.op, default_fused_registry()) == []
        assert fuse_patterns(m.op, weights=m.weights) == 0


def test_known_weights_scope_is_what_fuse_patterns_reads() -> None:
    m = rope_weight_module("gather", "f64")
    with known_weights(m.weights):
        assert fuse_patterns(m.op) == 1
    assert fuse_patterns(rope_weight_module("gather").op) == 0  # the scope has ended


def test_no_arm_without_a_kernel() -> None:
    from runtime.binding_table import KernelBindingTable

    m = build("gated_mlp")
    uses = [sum(1 for _ in v.uses) for v in m.entry.body.block.args]
    assert find_matches(m.op, default_fused_registry(), KernelBindingTable()) == []
    assert [sum(1 for _ in v.uses) for v in m.entry.body.block.args] == uses  # built ops dropped


def test_undeclared_cost_comes_from_the_decomposition() -> None:
    g = GraphBuilder()
    x = g.input("x", (64, 1024))
    e = g.exp(g.sub(x, g.reduce_max(x, -1, keepdim=True)))
    m = g.build([g.div(e, g.reduce_sum(e, -1, keepdim=True))])
    ((entry, match, _),) = find_matches(m.op, default_fused_registry())
    assert entry.cost is None
    cost = entry_cost(entry, match)
    n = 64 * 1024
    # reduce_max + sub + exp (10) + reduce_sum + div: every primitive's FLOPs, counted once
    assert cost.flops == pytest.approx(n + n + 10 * n + n + n)
    assert cost.bytes_moved == 2 * n * 4  # boundary only: x in, y out
    declared = type(entry)(**{**entry.__dict__, "cost": lambda _m: cost.__class__(flops=1.0)})
    assert entry_cost(declared, match).flops == 1.0


@pytest.mark.parametrize(
    "name", ["softmax", "gated_mlp", "matmul_bias_act/relu", "matmul_bias_act/gelu_erf_ops"]
)
def test_bake_picks_the_fused_op_when_cheaper_and_results_match(name: str) -> None:
    """Large enough that the intermediates' bytes decide (at tiny sizes the numpy launch
    overheads tie and arm 0 stays)."""
    m = build(name, n=256)
    ins = {k: v.astype(np.float32) for k, v in random_inputs(m).items()}
    ref = Executor(m).run(ins)["out"]
    fuse_patterns(m.op)
    BakeVariantsPass(judge="none").apply(None, m.op)  # pyright: ignore
    # the GELU constants stay outside, unread (bake is surgical: no DCE)
    names = [op.name for op in m.entry.body.block.ops if op.name != "fuel.constant"]
    assert names == [f"fuel.{name.split('/')[0]}", "func.return"]
    np.testing.assert_allclose(Executor(m).run(ins)["out"], ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("graph", "act", "n_ops"),
    [("gelu_erf_hf", "gelu", 7), ("gelu_tanh_ops", "gelu_tanh", 10)],  # matmul, add, GELU's
)
def test_gelu_primitives_fuse_as_their_act(graph: str, act: str, n_ops: int) -> None:
    (_, match, arm) = find_matches(build(f"matmul_bias_act/{graph}").op, default_fused_registry())[
        0
    ]
    assert match.params == {"act": act} and len(match.ops) == n_ops
    assert [op.name for op in arm] == ["fuel.matmul_bias_act"]


@pytest.mark.parametrize("form", ["Gelu", "erf"])
def test_onnx_linear_gelu_is_offered_as_matmul_bias_act(form: str) -> None:
    """ONNX MatMul -> Add(bias) -> GELU, as the opset-20 Gelu op or as the Erf primitives
    exporters write before opset 20: imported, then offered as one act=gelu fused op."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from frontends.onnx import import_onnx

    rng = np.random.default_rng(0)
    inits = {
        "w": rng.standard_normal((16, 32)),
        "b": rng.standard_normal(32),
        "sqrt2": np.array(math.sqrt(2)),
        "one": np.array(1.0),
        "half": np.array(0.5),
    }
    n = helper.make_node
    nodes = [n("MatMul", ["x", "w"], ["m"]), n("Add", ["m", "b"], ["u"])]
    if form == "Gelu":
        nodes.append(n("Gelu", ["u"], ["y"]))
    else:
        nodes += [
            n("Div", ["u", "sqrt2"], ["g0"]),
            n("Erf", ["g0"], ["g1"]),
            n("Add", ["g1", "one"], ["g2"]),
            n("Mul", ["u", "g2"], ["g3"]),
            n("Mul", ["g3", "half"], ["y"]),
        ]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "mlp",
        [vi("x", TensorProto.FLOAT, [4, 16])],
        [vi("y", TensorProto.FLOAT, [4, 32])],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()],
    )
    opset = helper.make_opsetid("", 20 if form == "Gelu" else 17)
    m = import_onnx(helper.make_model(graph, opset_imports=[opset]))
    ((_, match, arm),) = find_matches(m.op, default_fused_registry())
    assert match.params == {"act": "gelu"} and [op.name for op in arm] == ["fuel.matmul_bias_act"]


def test_fuse_patterns_is_idempotent() -> None:
    m = build("attention/gqa")
    assert fuse_patterns(m.op) == 1
    text = str(m.op)
    assert fuse_patterns(m.op) == 0 and str(m.op) == text
    m.op.verify()


def test_register_is_idempotent_and_a_taken_name_is_an_error() -> None:
    reg = FusedKernelRegistry(BUILTIN_ENTRIES)
    assert len(reg) == len(BUILTIN_ENTRIES) and not reg.register_fused(BUILTIN_ENTRIES[0])
    clash = replace(BUILTIN_ENTRIES[0], pattern=BUILTIN_ENTRIES[1].pattern)
    with pytest.raises(ValueError, match="already registered"):
        reg.register_fused(clash)
    with pytest.raises(ValueError, match="need the entry's kernel_op"):
        reg.adopt(replace(clash, kernel_op=""), [FusedKernel(("f32",), print)])
    assert default_fused_registry() is default_fused_registry()


def _table_without_fused_kernels():  # noqa: ANN202
    from runtime.binding_table import KernelBindingTable
    from runtime.kernels.cpu.library import FAMILIES

    table = KernelBindingTable()
    for register in FAMILIES:
        if register.__name__ != "register_fused":
            register(table)
    table.finalize()
    return table.freeze()


def test_adopt_publishes_the_kernel_once_and_the_picker_and_executor_run_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A build without a matmul_bias_act kernel offers no arm; adopting one (8 threads at once)
    registers it once in the global table, the pass then offers the arm, bake picks it, the
    picker chooses the adopted kernel and the executor runs it, matching arm 0."""
    import runtime.kernels as bt
    from passes.picker.plan import compile_plan

    monkeypatch.setattr(bt._STATE, "table", _table_without_fused_kernels())
    reg = FusedKernelRegistry(BUILTIN_ENTRIES)
    m = build("matmul_bias_act/relu", n=64)
    assert find_matches(m.op, reg) == []
    runs: list[int] = []

    def relu_linear(inputs: list, outputs: list, params: dict) -> None:  # noqa: ARG001
        runs.append(1)
        np.maximum(np.matmul(inputs[0], inputs[1]) + inputs[2], 0, out=outputs[0])

    newer = replace(reg.lookup("matmul_bias_act"), revision=7)  # pyright: ignore
    kernel = FusedKernel(("f32",) * 4, relu_linear, kernel_source="runtime-test")
    results: list[bool] = []
    threads = [
        threading.Thread(target=lambda: results.append(reg.adopt(newer, [kernel])))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1 and reg.lookup("matmul_bias_act") is newer
    bound = bt.global_bindings().lookup_alternatives("matmul_bias_act", ("f32",) * 4, "cpu")
    assert [e.kernel for e in bound] == [relu_linear] and bound[0].revision_hash == 7
    assert not reg.adopt(newer, [kernel])  # the same kernel again: nothing to do
    ins = {k: v.astype(np.float32) for k, v in random_inputs(m).items()}
    ref = Executor(m).run(ins)["out"]
    assert fuse_patterns(m.op, reg) == 1
    BakeVariantsPass(judge="none").apply(None, m.op)  # pyright: ignore
    plan = compile_plan(m.op)
    (fused,) = [op for op in plan.decisions if op.name == "fuel.matmul_bias_act"]
    assert plan.decisions[fused].winner.entry.kernel_source == "runtime-test"
    np.testing.assert_allclose(Executor(m).run(ins)["out"], ref, rtol=1e-5, atol=1e-5)
    assert runs


def test_rms_norm_with_pow_square_matches_and_agrees() -> None:
    """torch.export writes the square as x.pow(2): the same fused arm, the same numbers."""
    g = GraphBuilder(seed=3)
    x = g.input("x", (3, 16))
    ms = g.reduce_mean(g.pow(x, g.constant(2.0)), axes=[-1], keepdim=True)
    n = g.mul(x, g.rsqrt(g.add(ms, g.constant(1e-5))))
    m = g.build({"out": g.mul(n, g.weight("w", (16,)))})
    xs = {"x": np.random.default_rng(4).standard_normal((3, 16)).astype(np.float32)}
    ref = Executor(m).run(xs)["out"]
    assert fuse_patterns(m.op) == 1
    (b,) = [op for op in m.op.walk() if isinstance(op, BranchOp)]
    b.attributes[PICKED_ATTR] = IntegerAttr(1, i64)
    got = Executor(m).run(xs)["out"]
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7)
