"""Layer-1 cost model: hand-computed formulas per family, the roofline, fused pricing, coverage."""

from __future__ import annotations

import math

import pytest

from fuel_dialect.dialect import OPS
from runtime.cost import (
    BASELINE_BYTES_PER_NS,
    BASELINE_FLOPS_PER_NS,
    COST_TABLE,
    DTYPE_BYTES,
    BadCostOperands,
    CostError,
    CostEstimate,
    UnknownCostOp,
    causal_pairs,
    composite_ns,
    cost_fn_for,
    dtype_bytes,
    fused_cost,
    io_bytes,
    layer1_cost,
)

F32 = "f32"


def cost(op: str, shapes, dtypes=None, **params) -> CostEstimate:
    return layer1_cost(op, shapes, dtypes or [F32] * len(shapes), params)


# -- coverage --------------------------------------------------------------------------------


def test_every_kernel_op_of_the_dialect_has_a_cost() -> None:
    kernel_ops = {getattr(op, "KERNEL_OP", None) for op in OPS} - {None}
    assert kernel_ops, "the dialect lists no kernel ops"
    assert sorted(kernel_ops - set(COST_TABLE)) == []


def test_unknown_op_is_typed_and_named() -> None:
    with pytest.raises(UnknownCostOp, match="'conv2d'") as e:
        cost_fn_for("conv2d")
    assert not isinstance(e.value, KeyError) and e.value.op == "conv2d"
    with pytest.raises(UnknownCostOp):
        layer1_cost("fuel.conv2d", [(1,)], [F32], {})


def test_dialect_prefix_is_accepted() -> None:
    assert cost("fuel.relu", [(4,), (4,)]) == cost("relu", [(4,), (4,)])


def test_bad_operands_are_typed() -> None:
    with pytest.raises(BadCostOperands, match="matmul"):
        cost("matmul", [(4,), (4,), ()])
    with pytest.raises(CostError, match="unknown dtype 'f8'"):
        cost("add", [(2,), (2,), (2,)], ["f8"] * 3)


def test_dtype_bytes() -> None:
    want = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i8": 1, "u8": 1, "i1": 1}
    assert {d: dtype_bytes(d) for d in want} == want == dict(DTYPE_BYTES)


# -- elementwise -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "per_elem"),
    [
        ("neg", 1),
        ("abs", 1),
        ("relu", 1),
        ("exp", 10),
        ("log", 10),
        ("sqrt", 10),
        ("rsqrt", 10),
        ("recip", 10),
        ("tanh", 10),
        ("sin", 10),
        ("cos", 10),
        ("sigmoid", 12),
        ("silu", 13),
    ],
)
def test_unary(op: str, per_elem: int) -> None:
    assert cost(op, [(4, 8), (4, 8)]) == CostEstimate(32 * per_elem, 2 * 32 * 4, 50)


def test_gelu_exact_costs_more_than_tanh() -> None:
    assert cost("gelu", [(4, 8), (4, 8)], approximate="tanh").flops == 17 * 32
    assert cost("gelu", [(4, 8), (4, 8)], approximate="none").flops == 23 * 32
    assert cost("gelu", [(4, 8), (4, 8)]).flops == 23 * 32  # erf form is the default


@pytest.mark.parametrize(
    ("op", "per_elem"),
    [("add", 1), ("sub", 1), ("mul", 1), ("div", 1), ("max", 1), ("min", 1), ("pow", 20)],
)
def test_binary_reads_a_broadcast_operand_once(op: str, per_elem: int) -> None:
    # (4,8) + (8,) -> (4,8): the bias row is 8 elements, not 32
    assert cost(op, [(4, 8), (8,), (4, 8)]) == CostEstimate(32 * per_elem, (32 + 8 + 32) * 4, 50)


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_compare_writes_one_byte_per_element(op: str) -> None:
    assert cost(op, [(4,), (4,), (4,)], [F32, F32, "i1"]) == CostEstimate(4, 16 + 16 + 4, 50)


def test_where() -> None:
    got = cost("where", [(4,), (4,), (), (4,)], ["i1", F32, F32, F32])
    assert got == CostEstimate(4, 4 + 16 + 4 + 16, 50)


def test_cast_moves_both_widths_and_computes_nothing() -> None:
    assert cost("cast", [(10,), (10,)], [F32, "f16"]) == CostEstimate(0, 10 * (4 + 2), 50)


# -- reductions, row-wise ops ----------------------------------------------------------------


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min"])
def test_reductions(op: str) -> None:
    assert cost(op, [(4, 8), (4,)], axes=(1,)) == CostEstimate(32, (32 + 4) * 4, 50)


def test_softmax() -> None:
    assert cost("softmax", [(4, 8), (4, 8)], axis=1) == CostEstimate(160, 256, 50)
    assert cost("softmax", [(4, 8), (4, 8)], axis=0).flops == 160


def test_norms_count_elements_rows_and_read_weights_once() -> None:
    # rms: 4/elem + one rsqrt (10) per row; layer: 8/elem + 10 per row
    assert cost("rms_norm", [(4, 8), (8,), (4, 8)]) == CostEstimate(4 * 32 + 40, 72 * 4, 50)
    got = cost("layer_norm", [(4, 8), (8,), (8,), (4, 8)])
    assert got == CostEstimate(8 * 32 + 40, 80 * 4, 50)


def test_rope_reads_the_tables_once() -> None:
    got = cost("rope", [(1, 2, 6, 8), (6, 4), (6, 4), (1, 2, 6, 8)])
    assert got == CostEstimate(3 * 96, (96 + 24 + 24 + 96) * 4, 50)


# -- matmul ----------------------------------------------------------------------------------


def test_matmul_from_real_shapes() -> None:
    got = cost("matmul", [(2, 3, 4), (4, 5), (2, 3, 5)])
    assert got == CostEstimate(2 * 2 * 3 * 4 * 5, (24 + 20 + 30) * 4, 100)


def test_matmul_broadcast_batch() -> None:
    # (2,1,3,4) x (5,4,6) -> (2,5,3,6): batch 10 from the broadcast result
    got = cost("matmul", [(2, 1, 3, 4), (5, 4, 6), (2, 5, 3, 6)])
    assert got.flops == 2 * 10 * 3 * 4 * 6
    assert got.bytes_moved == (24 + 120 + 180) * 4


def test_matmul_weight_is_read_once_not_per_batch() -> None:
    got = cost("matmul", [(8, 3, 4), (4, 5), (8, 3, 5)], ["bf16"] * 3)
    assert got.bytes_moved == (96 + 20 + 120) * 2 < 8 * (12 + 20 + 15) * 2


# -- attention -------------------------------------------------------------------------------


def test_causal_pairs() -> None:
    assert causal_pairs(4, 4) == 10  # Sq(Sq+1)/2
    assert causal_pairs(1, 8) == 8  # decode sees every key
    assert causal_pairs(2, 6) == 5 + 6  # bottom-right aligned
    assert causal_pairs(4, 2) == 0 + 1 + 2  # the first query sees nothing
    assert causal_pairs(5, 0) == 0


def test_attention_prefill() -> None:
    shapes = [(1, 2, 4, 8), (1, 1, 4, 8), (1, 1, 4, 8), (1, 2, 4, 8)]  # GQA: 2 q heads, 1 kv
    full = cost("attention", shapes, causal=False, scale=0.35)
    assert full == CostEstimate(4 * 2 * 4 * 4 * 8 + 5 * 2 * 4 * 4, (64 + 32 + 32 + 64) * 4, 200)
    causal = cost("attention", shapes, causal=True, scale=0.35)
    assert causal.flops == 2 * 10 * (2 * 8 + 2 * 8 + 5)  # 10 of 16 pairs visible
    assert causal.bytes_moved == full.bytes_moved


def test_attention_decode_with_live_kv_len() -> None:
    shapes = [(1, 2, 1, 8), (1, 1, 16, 8), (1, 1, 16, 8), (), (1, 2, 1, 8)]
    dtypes = [F32, F32, F32, "i64", F32]
    got = layer1_cost("attention", shapes, dtypes, {"causal": True, "kv_len": 10})
    assert got.flops == 2 * 10 * (16 + 16 + 5)  # Skv = 10, causal decode keeps all of it
    assert got.bytes_moved == 64 + 64 + 2 * (10 * 8 * 4) + 8  # only 10 kv rows are read
    unknown = layer1_cost("attention", shapes, dtypes, {"causal": True})
    assert unknown.flops == 2 * 16 * 37  # without kv_len the cache capacity bounds it


def test_attention_with_value_dim_different_from_key_dim() -> None:
    got = cost("attention", [(1, 1, 2, 4), (1, 1, 3, 4), (1, 1, 3, 6), (1, 1, 2, 6)])
    assert got.flops == 1 * 1 * 2 * 3 * (2 * 4 + 2 * 6 + 5)


# -- movement and values ---------------------------------------------------------------------


def test_movement() -> None:
    assert cost("transpose", [(4, 8), (8, 4)]) == CostEstimate(0, 256, 50)
    assert cost("slice", [(10, 8), (5, 8)]) == CostEstimate(0, 2 * 40 * 4, 50)
    assert cost("concat", [(2, 8), (3, 8), (5, 8)], [F32, F32]) == CostEstimate(0, 80 * 4, 50)
    gather = cost("gather", [(100, 16), (2, 5), (2, 5, 16)], [F32, "i64", F32])
    assert gather == CostEstimate(0, 2 * 160 * 4 + 10 * 8, 50)


@pytest.mark.parametrize("op", ["reshape", "constant", "weight"])
def test_views_and_values_are_free(op: str) -> None:
    assert cost(op, [(4, 8), (32,)]) == CostEstimate()


def test_io_bytes_of_a_variadic_key() -> None:
    assert io_bytes([(2,), (3,), (5,)], ["f16", "f16"]) == 20


# -- roofline --------------------------------------------------------------------------------


def test_composite_flops_bound() -> None:
    assert composite_ns(CostEstimate(1000, 100, 50), 10, 10) == 100 + 50


def test_composite_memory_bound() -> None:
    assert composite_ns(CostEstimate(100, 4000, 50), 10, 10) == 400 + 50


def test_composite_overhead_is_serial_and_unscaled() -> None:
    est = CostEstimate(0, 0, 75)
    assert composite_ns(est, 1e9, 1e9) == composite_ns(est, 1, 1) == 75
    assert est.composite_ns(3, 3) == 75  # the method is the same function


@pytest.mark.parametrize("bad", [0.0, -5.0, math.nan, math.inf])
def test_composite_bad_rates_fall_back_to_the_cpu_baseline(bad: float) -> None:
    est = CostEstimate(1600, 1000, 0)
    assert composite_ns(est, bad, 1e9) == 1600 / BASELINE_FLOPS_PER_NS
    assert composite_ns(est, 1e9, bad) == 1000 / BASELINE_BYTES_PER_NS


# -- fused ops -------------------------------------------------------------------------------


def test_fused_cost_sums_flops_keeps_boundary_bytes_and_one_launch() -> None:
    s = (4, 8)
    relu_add = [("add", [s, s, s], [F32] * 3, {}), ("relu", [s, s], [F32] * 2, {})]
    got = fused_cost(relu_add, boundary_bytes=3 * 32 * 4)
    assert got == CostEstimate(64, 384, 50)  # relu(add) => 2n flops, intermediate elided
    linear = [("matmul", [(2, 4), (4, 8), s], [F32] * 3, {}), ("add", [s, (8,), s], [F32] * 3, {})]
    assert fused_cost(linear, 0).overhead_ns == 100  # the max component overhead


def test_fused_cost_is_never_free() -> None:
    assert fused_cost([("reshape", [(4,), (2, 2)], [F32] * 2, {})], 32).overhead_ns == 50
    assert fused_cost([], 16) == CostEstimate(0, 16, 50)
