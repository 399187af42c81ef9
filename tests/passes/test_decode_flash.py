"""Flash decoding: the numpy-flashdecode kernel vs a float64 reference, the gates of
`fuel-emit-decode-flash`, its idempotence, and the composed emit -> bake -> execute pipeline."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, i64

from fuel_dialect.attrs import KERNEL_ATTR
from fuel_dialect.branch import PICKED_ATTR, BranchOp, collapse_branch
from fuel_dialect.ops_nn import AttentionOp
from passes.bake_variants import BakeVariantsPass, bake_choice
from passes.emit_decode_flash import EmitDecodeFlashPass
from passes.picker.plan import PlanOptions
from runtime import native
from runtime.binding_table import KernelBindingTable
from runtime.dtypes import NUMPY_DTYPES
from runtime.executor import Executor
from runtime.judge import HashMapJudge, size_class
from runtime.kernels import global_bindings
from runtime.kernels.cpu.flash import SOURCE, _kernel, flash_cost, flash_decode
from runtime.kernels.cpu.native import NATIVE_FLASH
from runtime.kernels.cpu.torch_blas import available as torch_available
from runtime.module import FuelModule
from runtime.topology import SystemTopology

RNG = np.random.default_rng(7)

DEFAULT = "torch-blas" if torch_available() else "numpy"  # f32 attention's sibling 0


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, n: int, scale: float) -> np.ndarray:
    """float64 one-query attention over the first n keys, one head at a time."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    b, hq, _, _ = q.shape
    g = hq // k.shape[1]
    out = np.zeros((b, hq, 1, v.shape[3]))
    for bi in range(b):
        for h in range(hq):
            s = k[bi, h // g, :n] @ q[bi, h, 0] * scale
            p = np.exp(s - s.max()) if n else s
            out[bi, h, 0] = p @ v[bi, h // g, :n] / p.sum() if n else 0.0
    return out


def qkv(b: int, hq: int, hkv: int, sk: int, d: int, dtype: str = "f32") -> list[np.ndarray]:
    dt = NUMPY_DTYPES[dtype]
    shapes = [(b, hq, 1, d), (b, hkv, sk, d), (b, hkv, sk, d)]
    return [RNG.standard_normal(s).astype(dt) for s in shapes]


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize(
    ("hq", "hkv", "sk", "n", "chunk"),
    [
        (8, 2, 64, 37, 16),
        (4, 4, 64, 64, 16),
        (8, 1, 48, 1, 16),
        (6, 3, 40, 32, 16),
        (6, 3, 40, 33, 16),
        (32, 8, 1024, 300, 256),
        (4, 2, 16, 0, 8),
    ],
)
def test_kernel_matches_f64_reference(
    hq: int, hkv: int, sk: int, n: int, chunk: int, dtype: str
) -> None:
    """GQA, kv_len < capacity, == 1, == capacity, chunk-boundary and zero live lengths."""
    q, k, v = qkv(2, hq, hkv, sk, 32, dtype)
    got = flash_decode(q, k, v, n, 0.17, chunk=chunk)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, reference(q, k, v, n, 0.17), rtol=5e-6, atol=5e-6)


def test_kernel_reads_only_the_live_prefix_and_clamps() -> None:
    q, k, v = qkv(1, 4, 2, 64, 16)
    k[:, :, 20:], v[:, :, 20:] = np.nan, np.nan  # dead slots: never read
    assert np.isfinite(flash_decode(q, k, v, 20, 0.25, chunk=8)).all()
    q, k, v = qkv(1, 4, 2, 64, 16)
    np.testing.assert_array_equal(flash_decode(q, k, v, 999, 0.25), flash_decode(q, k, v, 64, 0.25))


def test_kernel_refuses_more_than_one_query_and_its_cost_is_infeasible() -> None:
    q = np.zeros((1, 2, 3, 8), np.float32)
    k = np.zeros((1, 2, 8, 8), np.float32)
    with pytest.raises(ValueError, match="one query"):
        flash_decode(q, k, k, 4, 1.0)
    assert flash_cost([q.shape, k.shape, k.shape, q.shape], ["f32"] * 4, {}).flops == np.inf


def test_registered_kernel_writes_the_output_and_is_bit_stable() -> None:
    q, k, v = qkv(1, 8, 2, 512, 64, "f16")
    outs = [np.empty((1, 8, 1, 64), np.float16) for _ in range(2)]
    for o in outs:
        _kernel(True)([q, k, v, np.array(300)], [o], {"scale": 0.125, "causal": True})
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], reference(q, k, v, 300, 0.125), rtol=2e-3, atol=2e-3)


def test_cost_charges_the_live_length_when_known() -> None:
    shapes = [(1, 32, 1, 64), (1, 8, 4096, 64), (1, 8, 4096, 64), (), (1, 32, 1, 64)]
    dts = ["f32", "f32", "f32", "i64", "f32"]
    full, live = flash_cost(shapes, dts, {}), flash_cost(shapes, dts, {"kv_len": 128})
    assert live.flops * 32 == full.flops and live.bytes_moved < full.bytes_moved / 16


# -- the pass ---------------------------------------------------------------------------------


def decode(sq: int = 1, d: int = 64, t: str = "f32", cap: int = 1024, kv_len: bool = True) -> str:
    qt, kt = f"tensor<1x8x{sq}x{d}x{t}>", f"tensor<1x2x{cap}x{d}x{t}>"
    n = "kv_len(%n : tensor<i64>) " if kv_len else ""
    return f"""func.func @main(%q: {qt}, %k: {kt}, %v: {kt}, %n: tensor<i64>) -> {qt} {{
  %o = fuel.attention %q, %k, %v {n}causal scale = 0.125 : {qt}, {kt}, {kt} -> {qt}
  func.return %o : {qt}
}}"""


def emit(text: str, **options: str) -> FuelModule:
    m = FuelModule.parse(text)
    EmitDecodeFlashPass(judge="none", **options).apply(Context(), m.op)
    m.op.verify()
    return m


def branches(m: FuelModule) -> list[BranchOp]:
    return [op for op in m.op.walk() if isinstance(op, BranchOp)]


@pytest.mark.parametrize("kv_len", [True, False])
def test_pass_wraps_decode_attention_in_a_gated_variant_branch(kv_len: bool) -> None:
    m = emit(decode(kv_len=kv_len))
    (b,) = branches(m)
    arm0, arm1 = (next(o for o in b.arms[i].walk() if isinstance(o, AttentionOp)) for i in (0, 1))
    assert b.kind.data == "variant" and b.gate(0) == ""
    assert b.gate(1) == ("dim($0, 2) == 1 && value($1) <= 1024" if kv_len else "dim($0, 2) == 1")
    assert arm0.attributes[KERNEL_ATTR].kernel_source.data == DEFAULT  # the default it runs
    # the cheapest flash kernel bound: fuel's C one where it is registered (one C call against
    # numpy's ~25 calls), else numpy's
    want = NATIVE_FLASH if native.enabled() else SOURCE
    assert arm1.attributes[KERNEL_ATTR].kernel_source.data == want


def test_f16_decode_gets_the_numpy_flash_kernel() -> None:
    (b,) = branches(emit(decode(t="f16")))
    arm1 = next(o for o in b.arms[1].walk() if isinstance(o, AttentionOp))
    assert arm1.attributes[KERNEL_ATTR].kernel_source.data == SOURCE  # the C kernel is f32 only


@pytest.mark.parametrize(
    "text",
    [decode(sq=2), decode(t="f64"), decode(d=512), decode(d=288)],
    ids=["seq_q", "f64", "head_dim_512", "head_dim_288"],
)
def test_pass_declines_unsupported_shapes(text: str) -> None:
    assert not branches(emit(text))


def test_pass_declines_without_a_flash_kernel_on_the_topology(tmp_path) -> None:  # noqa: ANN001
    topo = tmp_path / "t.toml"
    topo.write_text('[[devices]]\nname = "cpu"\nbackends = ["nocpu"]\n')
    assert not branches(emit(decode(), topology=str(topo)))


def test_pass_is_idempotent() -> None:
    once = emit(decode())
    twice = FuelModule.parse(str(once.op))
    EmitDecodeFlashPass(judge="none").apply(Context(), twice.op)
    assert str(twice.op) == str(once.op)


# -- composition ------------------------------------------------------------------------------


def inputs(cap: int, n: int) -> dict[str, np.ndarray]:
    q, k, v = qkv(1, 8, 2, cap, 64)
    return {"q": q, "k": k, "v": v, "n": np.array(n, np.int64)}


@pytest.mark.parametrize("n", [1, 100, 1024])
def test_flash_arm_matches_the_unoptimized_module(n: int) -> None:
    args = inputs(1024, n)
    want = Executor(FuelModule.parse(decode())).run(args)["out0"]
    m = emit(decode())
    (b,) = branches(m)
    collapse_branch(b, 1)  # what a bake that picks flash leaves
    got = Executor(m).run(args)["out0"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, reference(*list(args.values())[:3], n, 0.125), atol=5e-6)


def test_picked_flash_arm_runs_only_while_its_gate_holds() -> None:
    m = emit(decode())
    branches(m)[0].attributes[PICKED_ATTR] = IntegerAttr(1, i64)
    plain, ex = Executor(FuelModule.parse(decode())), Executor(m)
    live, over = inputs(1024, 100), inputs(1024, 5000)  # 5000 > capacity: the gate fails
    np.testing.assert_allclose(ex.run(live)["out0"], plain.run(live)["out0"], atol=1e-6)
    np.testing.assert_array_equal(ex.run(over)["out0"], plain.run(over)["out0"])


def test_bake_collapses_the_branch_and_results_match() -> None:
    """Whichever arm the bake keeps (each arm is priced at its stamped kernel), the result
    matches the unoptimized module within the kernels' precision."""
    m = emit(decode())
    BakeVariantsPass(judge="none").apply(Context(), m.op)
    assert not branches(m)
    args = inputs(1024, 100)
    want = Executor(FuelModule.parse(decode())).run(args)["out0"]
    np.testing.assert_allclose(Executor(m).run(args)["out0"], want, atol=1e-6)


def test_judge_measured_flash_wins_the_bake() -> None:
    m = emit(decode(cap=4096))
    (b,) = branches(m)
    arm = next(o for o in b.arms[0].walk() if isinstance(o, AttentionOp))
    judge = HashMapJudge()
    sc = size_class("attention", [tuple(v.type.get_shape()) for v in (*arm.operands, arm.result)])
    judge.insert("attention", "f32", sc, "cpu", "numpy", 2_700_000.0)
    judge.insert("attention", "f32", sc, "cpu", SOURCE, 120_000.0)
    opts = PlanOptions(SystemTopology.cpu_only(), judge=judge, table=global_bindings())
    assert bake_choice(b, opts) == 1


def test_flash_kernel_is_a_sibling_not_the_default() -> None:
    t: KernelBindingTable = global_bindings()
    key = ("attention", ("f32", "f32", "f32", "i64", "f32"), "cpu")
    assert t.lookup_with_caps(*key).kernel_source == DEFAULT
    assert SOURCE in [e.kernel_source for e in t.lookup_alternatives(*key)]
