"""Native programs: the executor runs consecutive native kernel calls (and same-shape f32
adds/muls) whose buffers never move as one C call (`runtime.work_items.fuse_native_runs`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import runtime.executor as rex
from frontends.builder import GraphBuilder
from passes.optimize import optimize_graph
from runtime import native
from runtime.compiled import ExecutionError
from runtime.executor import Executor
from runtime.module import FuelModule

pytestmark = pytest.mark.skipif(not native.enabled(), reason="no C compiler (or FUEL_NATIVE=0)")

D, F, H, HD = 64, 160, 4, 16  # hidden, mlp, heads, head dim


def block(seed: int = 0) -> FuelModule:
    """A decode-shaped block: rms_norm -> projections -> rope -> attention over a cache ->
    output projection + residual -> rms_norm -> MLP + residual, on one token."""
    g = GraphBuilder(seed=seed)
    x = g.input("x", (1, D))
    k = g.input("k", (1, H, 8, HD))
    v = g.input("v", (1, H, 8, HD))
    h = g.rms_norm(x, g.weight("n1", (D,)), eps=1e-5)
    q = g.reshape(g.matmul(h, g.weight("wq", (D, D))), (1, H, 1, HD))
    cos, sin = g.weight("cos", (1, HD // 2)), g.weight("sin", (1, HD // 2))
    q = g.rope(q, cos, sin)
    a = g.reshape(g.attention(q, k, v, scale=0.25), (1, D))
    x2 = g.add(x, g.matmul(a, g.weight("wo", (D, D))))
    h2 = g.rms_norm(x2, g.weight("n2", (D,)), eps=1e-5)
    up = g.mul(g.silu(g.matmul(h2, g.weight("wg", (D, F)))), g.matmul(h2, g.weight("wu", (D, F))))
    return g.build({"y": g.add(x2, g.matmul(up, g.weight("wd", (F, D))))})


def feeds(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal((1, D)).astype(np.float32),
        "k": rng.standard_normal((1, H, 8, HD)).astype(np.float32),
        "v": rng.standard_normal((1, H, 8, HD)).astype(np.float32),
    }


def optimized() -> FuelModule:
    m = block()
    optimize_graph(m.op)
    return m


def test_runs_of_native_kernels_become_one_program() -> None:
    ex = Executor(optimized())
    programs = [n for n in ex.op_names if n.startswith("native program")]
    assert programs, ex.op_names
    assert any("gated_mlp" in n or "matmul" in n for n in programs)


def test_programs_compute_exactly_what_the_kernels_do(monkeypatch: pytest.MonkeyPatch) -> None:
    m = optimized()
    fused = Executor(m)
    # the executor calls each (prepared) kernel: no runs fused into programs
    monkeypatch.setattr(rex, "fuse_native_runs", lambda items, names, encoded, keep: (items, names))
    plain = Executor(m)
    assert not any(n.startswith("native program") for n in plain.op_names)
    assert len(plain.op_names) > len(fused.op_names)
    for seed in (0, 1, 2):  # graph inputs change between runs; the programs' pointers do not
        got, want = fused.run(feeds(seed))["y"], plain.run(feeds(seed))["y"]
        assert got.tobytes() == want.tobytes()


def test_program_results_match_float64() -> None:
    m = block()
    ref = Executor(m).run(feeds(3))["y"].astype(np.float64)  # the numpy kernels
    got = Executor(optimized()).run(feeds(3))["y"]
    assert np.abs(got - ref).max() <= 1e-5 * max(1.0, np.abs(ref).max())


def test_outputs_are_fresh_and_repeat_runs_agree() -> None:
    ex = Executor(optimized())
    first = ex.run(feeds(4))["y"]
    again = ex.run(feeds(4))["y"]
    assert first is not again and first.tobytes() == again.tobytes()


def test_a_failing_record_names_its_kernel() -> None:
    from runtime.work_items import native_program_item

    with pytest.raises(MemoryError, match="'fuel.gated_mlp' \\(record 1"):
        native_program_item(lambda words, n: 1, 0, 2, ["fuel.matmul", "fuel.gated_mlp"])


def test_a_failing_program_is_an_execution_error_naming_it() -> None:
    ex = Executor(optimized())
    i = next(i for i, n in enumerate(ex.op_names) if n.startswith("native program"))
    fn, args = ex._items[i]
    ex._items[i] = (fn, [lambda words, n: 0, *args[1:]])  # the library reports record 0 failed
    with pytest.raises(ExecutionError, match="native program .* could not allocate"):
        ex.run(feeds(0))


def test_generated_c_kernels_join_programs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A generated C group (codegen=c) between native kernels runs inside their program."""
    from lowering.bundle import load_bundle, write_bundle

    g = GraphBuilder(seed=5)
    x = g.input("x", (1, D))
    h = g.rms_norm(g.relu(x), g.weight("n", (D,)), eps=1e-5)
    z = g.add(g.matmul(h, g.weight("w1", (D, F))), g.weight("b", (F,)))
    z = g.sub(g.mul(g.relu(z), g.weight("s", (F,))), g.weight("t", (F,)))  # one C group
    y = g.matmul(z, g.weight("w2", (F, D)))
    path = write_bundle(g.build({"y": y}), tmp_path / "b.bundle", options={"cpu": {"codegen": "c"}})
    fused = load_bundle(path).executor()
    programs = [n for n in fused.op_names if n.startswith("native program")]
    assert any("c_launch" in n for n in programs), fused.op_names
    monkeypatch.setattr(rex, "fuse_native_runs", lambda items, names, encoded, keep: (items, names))
    plain = load_bundle(path).executor()
    assert not any(n.startswith("native program") for n in plain.op_names)
    x_ = np.random.default_rng(6).standard_normal((1, D)).astype(np.float32)
    assert fused.run({"x": x_})["y"].tobytes() == plain.run({"x": x_})["y"].tobytes()


def test_attention_reads_its_transposed_operands_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exporter's attention: q, k, v products reshaped to [b, s, h, d] and transposed to
    [b, h, s, d], its output transposed back. The native attention reads those transposes as
    views (`strided_rows`) and writes the output's (`strided_out_rows`): no transpose is
    left, and the bits are those of the copying schedule."""
    from fuel_dialect.attrs import KERNEL_ATTR, KernelRefAttr
    from fuel_dialect.base import KernelOp
    from runtime.kernels import global_bindings
    from runtime.kernels.cpu.native import NATIVE
    from runtime.views import ViewPlanner

    S = 24
    g = GraphBuilder(seed=7)
    x = g.input("x", (1, S, D))
    heads = [
        g.transpose(g.reshape(g.matmul(x, g.weight(n, (D, D))), (1, S, H, HD)), (0, 2, 1, 3))
        for n in ("wq", "wk", "wv")
    ]
    o = g.reshape(g.transpose(g.attention(*heads, causal=True), (0, 2, 1, 3)), (1, S, D))
    m = g.build({"y": g.matmul(o, g.weight("wo", (D, D)))})
    optimize_graph(m.op)
    [att] = [op for op in m.op.walk() if isinstance(op, KernelOp) and op.KERNEL_OP == "attention"]
    entry = next(
        e
        for e in global_bindings().lookup_alternatives("attention", att.kernel_dtypes(), "cpu")
        if e.kernel_source == NATIVE
    )  # the picker's choice at this size may be numpy's; pin the kernel under test
    att.attributes[KERNEL_ATTR] = KernelRefAttr.get(
        "attention", att.kernel_dtypes(), "cpu", NATIVE, entry.revision_hash
    )
    viewed = Executor(m)
    names = " ".join(viewed.op_names)
    assert "attention" in names and "transpose" not in names, viewed.op_names
    monkeypatch.setattr(ViewPlanner, "plan_transposes", lambda self, ops: None)
    written = Executor(m)  # the output's transpose runs
    assert " ".join(written.op_names).count("transpose") == 1, written.op_names
    monkeypatch.setattr(ViewPlanner, "transpose_view", lambda self, op: False)
    copied = Executor(m)
    assert " ".join(copied.op_names).count("transpose") == 4, copied.op_names
    for seed in (0, 1):
        x_ = np.random.default_rng(seed).standard_normal((1, S, D)).astype(np.float32)
        want = copied.run({"x": x_})["y"].tobytes()
        assert viewed.run({"x": x_})["y"].tobytes() == want
        assert written.run({"x": x_})["y"].tobytes() == want


_RUN_BUNDLE = """
import sys
import numpy as np
import runtime.executor as rex
from runtime import native
from lowering.bundle import load_bundle
from runtime.signing import load_public_keys
assert not native.enabled()  # no C compiler in this process
trusted = load_public_keys(sys.argv[3:])
y = load_bundle(sys.argv[1], trusted=trusted).executor().run({"x": np.load(sys.argv[2])})["y"]
print(y.tobytes().hex())
"""


def test_a_signed_bundle_runs_its_native_kernels_where_no_compiler_is(tmp_path: Path) -> None:
    """The bundle ships fuel's native library (source + .so): a machine without a C
    compiler loads it instead of compiling, and computes the same bits, when the bundle is
    signed by a key the user trusts; unsigned (or not trusted), it is refused."""
    import os
    import subprocess
    import sys

    from lowering.bundle import load_bundle, write_bundle
    from runtime.signing import generate_key, load_private_key

    g = GraphBuilder(seed=7)
    x = g.input("x", (1, D))
    h = g.rms_norm(x, g.weight("n", (D,)), eps=1e-5)
    y = g.matmul(g.matmul(h, g.weight("w1", (D, F))), g.weight("w2", (F, D)))
    private, public = generate_key()
    (tmp_path / "k.key").write_bytes(private)
    (tmp_path / "k.pub").write_text(public)
    key = load_private_key(tmp_path / "k.key")
    path = write_bundle(g.build({"y": y}), tmp_path / "b.bundle", options={"cpu": {}}, sign_key=key)
    x_ = np.random.default_rng(8).standard_normal((1, D)).astype(np.float32)
    np.save(tmp_path / "x.npy", x_)
    want = load_bundle(path).executor().run({"x": x_})["y"].tobytes().hex()
    env = dict(os.environ, CC="/nonexistent/cc", FUEL_CACHE_DIR=str(tmp_path / "cache"))
    root = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "-c", _RUN_BUNDLE, str(path), str(tmp_path / "x.npy")]
    res = subprocess.run(
        [*cmd, str(tmp_path / "k.pub")], capture_output=True, text=True, cwd=root, env=env
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == want
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=root, env=env)
    assert res.returncode != 0
    assert "is loaded only from a bundle signed by a key you trust" in res.stderr


@pytest.mark.parametrize(("sq", "causal"), [(1, False), (6, True)])
def test_a_masked_attention_record_computes_what_its_kernel_does(sq: int, causal: bool) -> None:
    """The masked attention (a mask over keys and queries, broadcast over heads; GQA) as a
    program record: decode on the flash kernel, prefill on the GEMM, the bits of the call."""
    from runtime.kernels.cpu.native import _attention_native

    kernel = _attention_native(False, with_mask=True)
    rng = np.random.default_rng(4)
    q = rng.standard_normal((1, 4, sq, HD)).astype(np.float32)
    k, v = (rng.standard_normal((1, 2, 9, HD)).astype(np.float32) for _ in range(2))
    mask = np.where(rng.random((1, 1, sq, 9)) < 0.3, -np.inf, -rng.random((1, 1, sq, 9)))
    ins, params = [q, k, v, mask.astype(np.float32)], {"scale": 0.25, "causal": causal}
    want, got = np.full(q.shape, np.nan, np.float32), np.full(q.shape, np.nan, np.float32)
    kernel(ins, [want], params)
    fn, words, n = native.program([kernel.encode(ins, [got], params)])
    assert fn(words.ctypes.data, n) == -1
    assert got.tobytes() == want.tobytes() and np.isfinite(got).all()
    # q, k, v as transposed views: read at their strides by the GEMM kernel (prefill), no
    # record for the flash kernel (decode), which takes them dense
    views = [np.ascontiguousarray(a.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3) for a in ins[:3]]
    record = kernel.encode([*views, ins[3]], [got], params)
    if sq == 1:
        assert record is None
        return
    got[...] = np.nan
    fn, words, n = native.program([record])
    assert fn(words.ctypes.data, n) == -1
    assert got.tobytes() == want.tobytes()
    back = np.full((1, sq, 4, HD), np.nan, np.float32)  # the output at its strides too
    fn, words, n = native.program([kernel.encode(ins, [back.transpose(0, 2, 1, 3)], params)])
    assert fn(words.ctypes.data, n) == -1
    assert back.tobytes() == np.ascontiguousarray(want.transpose(0, 2, 1, 3)).tobytes()


def test_copy_records_are_numpys_copies() -> None:
    """Transpose and concat records (the C row copies a program runs) give numpy's bytes."""
    from runtime.kernels.cpu import native as nk

    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 5, 3, 4)).astype(np.float32)
    parts = [rng.standard_normal((2, 3, n, 4)).astype(np.float32) for n in (5, 1, 2)]
    cases = [
        (nk._encode_permute, [x], np.empty((2, 3, 5, 4), np.float32), {"perm": (0, 2, 1, 3)}),
        (nk._encode_permute, [x], np.empty((4, 3, 5, 2), np.float32), {"perm": (3, 2, 1, 0)}),
        (nk._encode_concat, parts, np.empty((2, 3, 8, 4), np.float32), {"axis": -2}),
    ]
    for encode, ins, out, params in cases:
        fn, words, n = native.program([encode(ins, [out], params)])
        assert fn(words.ctypes.data, n) == -1
        if "perm" in params:
            want = ins[0].transpose(params["perm"])
        else:
            want = np.concatenate(ins, axis=params["axis"])
        assert out.tobytes() == np.ascontiguousarray(want).tobytes()
