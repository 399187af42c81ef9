"""The executor across devices: a declared cpu + cuda topology served on this machine (cuda:N
emulated with CPU torch tensors, a worker-thread stream and Triton kernels under the
interpreter), real copies, completion handles and the wait set, per-device memory peaks."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

from frontends.builder import GraphBuilder  # noqa: E402
from fuel_dialect.attrs import KERNEL_ATTR, DeviceAttr, KernelRefAttr  # noqa: E402
from fuel_dialect.base import KernelOp  # noqa: E402
from fuel_dialect.dispatch import PIN_ATTR  # noqa: E402
from passes.picker.plan import PlanOptions, compile_plan  # noqa: E402
from passes.picker.support import clear_decisions, stamp_device, stamp_kernel  # noqa: E402
from passes.select import insert_copies  # noqa: E402
from runtime.binding_table import KernelBindingTable  # noqa: E402
from runtime.compiled import READY, ExecutionError  # noqa: E402
from runtime.cost import CostEstimate  # noqa: E402
from runtime.devices import DeviceUnavailable, OutOfDeviceMemory, TorchDevice  # noqa: E402
from runtime.executor import Executor  # noqa: E402
from runtime.kernels import global_bindings  # noqa: E402
from runtime.module import FuelModule  # noqa: E402
from runtime.topology import SystemTopology  # noqa: E402
from runtime.topology_file import load_file  # noqa: E402

TOPO = load_file(Path(__file__).parents[2] / "examples/topologies/cpu_2gpu.toml")


# -- test-local Triton kernels in fuel's destination-passing protocol --------------------------


@triton.jit
def _binary(a, b, o, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    x = tl.load(a + i, mask=m)
    y = tl.load(b + i, mask=m)
    if OP == 0:
        r = x + y
    else:
        r = x * y
    tl.store(o + i, r, mask=m)


@triton.jit
def _rowsum(x, o, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    j = tl.arange(0, BLOCK)
    v = tl.load(x + row * cols + j, mask=j < cols, other=0.0)
    tl.store(o + row, tl.sum(v, axis=0))


def _launch(ins, outs, op: int) -> None:
    a, b = ins
    if a.shape != b.shape:
        raise ValueError("this test kernel does not broadcast")
    n = outs[0].numel()
    block = min(triton.next_power_of_2(n), 1 << 14)
    _binary[(triton.cdiv(n, block),)](a, b, outs[0], n, OP=op, BLOCK=block)


def triton_add(ins, outs, params) -> None:
    _launch(ins, outs, 0)


def triton_mul(ins, outs, params) -> None:
    _launch(ins, outs, 1)


def triton_row_sum(ins, outs, params) -> None:
    x = ins[0]
    if tuple(params["axes"]) != (x.dim() - 1,) or not params["keepdim"]:
        raise ValueError("this test kernel sums the last axis with keepdim only")
    cols = x.shape[-1]
    _rowsum[(x.numel() // cols,)](x, outs[0], cols, BLOCK=triton.next_power_of_2(cols))


def cheap(shapes, dtypes, params) -> CostEstimate:
    return CostEstimate(overhead_ns=1.0)


def cuda_table() -> KernelBindingTable:
    """The global table plus the test kernels on backend "cuda" (source "triton")."""
    t = global_bindings().copy()
    for op, fn in (("add", triton_add), ("mul", triton_mul)):
        t.register(op, ("f32", "f32", "f32"), "cuda", fn, kernel_source="triton", cost=cheap)
    t.register(
        "reduce_sum", ("f32", "f32"), "cuda", triton_row_sum, kernel_source="triton", cost=cheap
    )
    return t


# -- graphs ------------------------------------------------------------------------------------

T = "tensor<4x8xf32>"
D0, D1 = '{fuel.device = #fuel.device<"cuda:0">}', '{fuel.device = #fuel.device<"cuda:1">}'
TWO_DEVICES = f"""
func.func @main(%x: {T} {{fuel.name = "x"}}, %y: {T} {{fuel.name = "y"}})
    -> ({T} {{fuel.name = "d"}}, tensor<4x1xf32> {{fuel.name = "s"}}) {{
  %half = fuel.constant dense<0.5> : {T}
  %a = fuel.add %x, %y : {T}, {T} -> {T}
  %b = fuel.copy %a to "cuda:0" : {T}
  %yc = fuel.copy %y to "cuda:0" : {T}
  %c = fuel.mul %b, %yc {D0} : {T}, {T} -> {T}
  %d = fuel.add %c, %half {D0} : {T}, {T} -> {T}
  %d1 = fuel.copy %d to "cuda:1" : {T}
  %e = fuel.mul %d1, %d1 {D1} : {T}, {T} -> {T}
  %s = fuel.reduce_sum %e axes = [-1] keepdim {D1} : {T} -> tensor<4x1xf32>
  %h = fuel.copy %s to "cpu" : tensor<4x1xf32>
  %n = fuel.neg %h : tensor<4x1xf32>
  func.return %d, %n : {T}, tensor<4x1xf32>
}}
"""


def host_only(text: str) -> FuelModule:
    """The same graph with every placement and copy dropped: the all-host reference."""
    lines = []
    for line in text.splitlines():
        if "fuel.copy" in line:
            dst, src = line.split("=")[0].strip(), line.split("fuel.copy")[1].split()[0]
            lines.append(
                f"  {dst} = fuel.reshape {src} : {T} -> {T}"
                if "4x1" not in line
                else f"  {dst} = fuel.reshape {src} : tensor<4x1xf32> -> tensor<4x1xf32>"
            )
        else:
            lines.append(line.replace(D0, "").replace(D1, ""))
    return FuelModule.parse("\n".join(lines))


def inputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal((4, 8)).astype(np.float32) for k in ("x", "y")}


def test_two_device_graph_matches_the_host_run() -> None:
    ex = Executor(FuelModule.parse(TWO_DEVICES), cuda_table(), topology=TOPO)
    assert {"fuel.add", "fuel.mul", "fuel.reduce_sum", "fuel.copy"} <= set(ex.op_names)
    ref = Executor(host_only(TWO_DEVICES)).run(inputs())
    for seed in (0, 1):  # twice: buffers and completion slots are reused across runs
        got = ex.run(inputs(seed))
        want = Executor(host_only(TWO_DEVICES)).run(inputs(seed)) if seed else ref
        for name in ("d", "s"):
            assert isinstance(got[name], np.ndarray) and got[name].dtype == np.float32
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)
    x, y = inputs(1)["x"], inputs(1)["y"]
    d = (x + y) * y + 0.5
    np.testing.assert_allclose(got["s"], -(d * d).sum(-1, keepdims=True), rtol=1e-5, atol=1e-5)


def test_wait_set_holds_only_the_producers_of_copies() -> None:
    ex = Executor(FuelModule.parse(TWO_DEVICES), cuda_table(), topology=TOPO)
    # %a is on the host (no completion); %d (cuda:0 -> cuda:1) and %s (cuda:1 -> host) are
    # waited; %c and %e are stream-ordered and record nothing
    assert ex.wait_set == ["fuel.add", "fuel.reduce_sum"]


def test_memory_peak_by_device_counts_residents_and_live_buffers() -> None:
    ex = Executor(FuelModule.parse(TWO_DEVICES), cuda_table(), topology=TOPO)
    ex.run(inputs())
    peak = ex.memory_peak_by_device()
    f = 4 * 8 * 4  # one f32[4, 8]
    # cpu: the constant (f) + %a (f, pinned: an async copy reads it) + %h and %n (4x1 each)
    assert peak["cpu"] == f + f + 16 + 16
    # cuda:0: the uploaded constant + %b, %yc, %c live together at %c (%d reuses %b)
    assert peak["cuda:0"] == f + 3 * f
    # cuda:1: %d1 and %e at %e; by %s, %d1 is free again (%e + 16 bytes)
    assert peak["cuda:1"] == 2 * f
    assert ex.memory_by_device["cuda:0"].buffers == 3


def test_a_host_op_reading_a_device_value_without_a_copy_is_refused() -> None:
    bad = TWO_DEVICES.replace("%n = fuel.neg %h", "%n = fuel.neg %s")
    with pytest.raises(
        ExecutionError,
        match=r"'fuel.neg' runs on cpu but reads a value resident "
        r"on cuda:1; a fuel.copy must move it",
    ):
        Executor(FuelModule.parse(bad), cuda_table(), topology=TOPO)


def test_an_asynchronous_kernel_failure_names_the_op_and_device() -> None:
    t = cuda_table()

    def broken(ins, outs, params):
        raise RuntimeError("boom")

    t.register("add", ("f32", "f32", "f32"), "cuda", broken, kernel_source="broken")
    m = FuelModule.parse(TWO_DEVICES)
    op = next(o for o in m.entry.walk() if o.name == "fuel.add" and "fuel.device" in o.attributes)
    rev = t.lookup_alternatives("add", ("f32",) * 3, "cuda")[1].revision_hash
    op.attributes[KERNEL_ATTR] = KernelRefAttr.get("add", ("f32",) * 3, "cuda", "broken", rev)
    ex = Executor(m, t, topology=TOPO)
    with pytest.raises(ExecutionError, match=r"'fuel.add' on cuda:0 failed: RuntimeError: boom"):
        ex.run(inputs())
    op.attributes.pop(KERNEL_ATTR)
    want = Executor(host_only(TWO_DEVICES)).run(inputs())["d"]
    np.testing.assert_allclose(Executor(m, t, topology=TOPO).run(inputs())["d"], want, rtol=1e-6)


def test_an_undeclared_device_is_refused() -> None:
    topo = SystemTopology.cpu_only()
    with pytest.raises(ExecutionError, match=r"uses device 'cuda:0'"):
        Executor(FuelModule.parse(TWO_DEVICES), cuda_table(), topology=topo)


# -- the picker places, fuel-select's copy insertion, the executor runs -----------------------


def select(module: FuelModule, table: KernelBindingTable) -> None:
    """`fuel-select` over a test table: stamp every decision's winner, insert copies."""
    plan = compile_plan(module.op, PlanOptions(topology=TOPO, table=table))
    clear_decisions(module.op)
    for op, d in plan.decisions.items():
        stamp_device(op, d.device)
        stamp_kernel(op, d.winner)
    insert_copies(plan, TOPO, "cpu")


def test_picker_placed_graph_with_inserted_copies_matches_the_host_run() -> None:
    g = GraphBuilder(seed=0)
    x, y = g.input("x", (4, 8)), g.input("y", (4, 8))
    a = g.mul(g.add(x, y), y)
    s = g.reduce_sum(g.add(a, g.weight("w", (4, 8))), -1, keepdim=True)
    m = g.build(outputs={"s": g.neg(s)})
    want = Executor(m).run(inputs())["s"]
    for v in (a, s):  # pinned: the planner must respect them and move values across
        v.owner.attributes[PIN_ATTR] = DeviceAttr("cuda:0")
    t = cuda_table()
    select(m, t)
    copies = [op.target.data for op in m.op.walk() if op.name == "fuel.copy"]
    assert "cuda:0" in copies and "cpu" in copies
    got = Executor(m, t, topology=TOPO).run(inputs())["s"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# -- completion handles ------------------------------------------------------------------------


def test_pending_completes_only_after_wait() -> None:
    dev = TorchDevice("cuda:0", capacity=1 << 20)
    assert dev.emulated
    gate, done = threading.Event(), []
    dev.submit(lambda: (gate.wait(10), done.append(1)), (), "blocked")
    handle = dev.record()
    assert not handle.is_ready and not handle.pending.query()  # type: ignore[union-attr]
    assert done == [] and dev.load() == 2
    gate.set()
    handle.wait()
    assert done == [1] and handle.pending.query()  # type: ignore[union-attr]
    assert READY.is_ready and dev.load() == 0


def test_a_copy_waits_on_its_producer_not_on_unrelated_device_work() -> None:
    """cuda:0 runs %p (add), then %q (a kernel blocked on a gate); the copy of %p to the host
    and the host op after it run while %q is still blocked: no global sync."""
    t = cuda_table()
    gate, host_reached = threading.Event(), threading.Event()

    def blocked_neg(ins, outs, params):
        assert gate.wait(10), "the gate was never opened"
        outs[0].copy_(-ins[0])

    def probe_exp(ins, outs, params):
        host_reached.set()
        np.exp(ins[0], out=outs[0])

    neg = t.register("neg", ("f32", "f32"), "cuda", blocked_neg, kernel_source="gated")
    exp = t.register("exp", ("f32", "f32"), "cpu", probe_exp, kernel_source="probe")
    stamp_neg = f'#fuel.kernel<"neg", [f32, f32], "cuda", "gated", "{neg.revision_hash:016x}">'
    stamp_exp = f'#fuel.kernel<"exp", [f32, f32], "cpu", "probe", "{exp.revision_hash:016x}">'
    m = FuelModule.parse(f"""
func.func @main(%x: {T}) -> ({T}, {T}) {{
  %xc = fuel.copy %x to "cuda:0" : {T}
  %p = fuel.add %xc, %xc {D0} : {T}, {T} -> {T}
  %q = fuel.neg %xc {{fuel.device = #fuel.device<"cuda:0">, fuel.kernel = {stamp_neg}}} : {T}
  %ph = fuel.copy %p to "cpu" : {T}
  %r = fuel.exp %ph {{fuel.kernel = {stamp_exp}}} : {T}
  func.return %r, %q : {T}, {T}
}}""")
    ex = Executor(m, t, topology=TOPO)
    assert ex.wait_set == ["fuel.add"]
    x = inputs()["x"]
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(ex.run({"x": x})))
    runner.start()
    assert host_reached.wait(10), "the host op behind the copy never ran"
    assert runner.is_alive() and not result  # the run drains %q before it returns
    gate.set()
    runner.join(10)
    np.testing.assert_allclose(result["out0"], np.exp(2 * x), rtol=1e-6)
    np.testing.assert_array_equal(result["out1"], -x)


def test_decoder_block_on_the_triton_registry_matches_the_host_run() -> None:
    """Every op the Triton registry serves is pinned to cuda:0; the planner inserts the copies;
    the executor runs the kernels under the interpreter and reads the result back."""
    from examples.decoder_block import BlockConfig, build_decoder_block
    from runtime.kernels.triton.registry import register_triton_kernels

    cfg = BlockConfig()
    m = build_decoder_block(cfg)
    x = np.random.default_rng(3).standard_normal((1, cfg.seq, cfg.hidden)).astype(np.float32)
    want = Executor(m).run({"x": x})["y"]
    t = global_bindings().copy()
    register_triton_kernels(t)
    pinned = 0
    for op in m.entry.body.block.ops:
        if isinstance(op, KernelOp) and t.backend_supports(
            op.KERNEL_OP, op.kernel_dtypes(), "cuda"
        ):
            op.attributes[PIN_ATTR] = DeviceAttr("cuda:0")
            pinned += 1
    select(m, t)
    ex = Executor(m, t, topology=TOPO)
    assert pinned >= 10 and ex.wait_set  # the result is read back after its producer only
    np.testing.assert_allclose(ex.run({"x": x})["y"], want, rtol=1e-4, atol=1e-4)
    assert ex.memory_peak_by_device()["cuda:0"] > 0


def test_device_accounting_capacity_and_byte_exact_transfers(monkeypatch) -> None:
    dev = TorchDevice("cuda:0", capacity=1024)
    raw, t = dev.alloc(np.dtype(np.float32), (4, 8))
    assert (dev.allocated, dev.free_bytes()) == (128, 896)
    src = np.arange(32, dtype=np.float32).reshape(4, 8)[:, ::-1]  # strided: staged densely
    dev.from_host(src, t)
    back = np.empty((4, 8), np.float32)
    dev.synchronize()
    dev.to_host(t, back)
    np.testing.assert_array_equal(back, src)
    dev.reserve(800)
    with pytest.raises(OutOfDeviceMemory, match=r"cuda:0: cannot allocate 128 bytes, 96 of 1024"):
        dev.alloc(np.dtype(np.float32), (4, 8))
    dev.free(raw)
    assert dev.allocated == 0
    monkeypatch.delenv("TRITON_INTERPRET")
    with pytest.raises(DeviceUnavailable, match="set TRITON_INTERPRET=1"):
        TorchDevice("cuda:0")


@pytest.mark.gpu
def test_two_devices_on_a_real_gpu() -> None:
    """The same graph on real CUDA (compiled Triton kernels, streams and events); run with
    FUEL_GPU=1 so Triton compiles instead of interpreting. cuda:1 folds onto cuda:0 when the
    machine has one GPU."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    text = TWO_DEVICES if torch.cuda.device_count() > 1 else TWO_DEVICES.replace("cuda:1", "cuda:0")
    ex = Executor(FuelModule.parse(text), cuda_table(), topology=TOPO)
    assert not ex.runtimes["cuda:0"].emulated  # type: ignore[attr-defined]
    want = Executor(host_only(TWO_DEVICES)).run(inputs())
    for _ in range(2):
        got = ex.run(inputs())
        for name in ("d", "s"):
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)
