"""The route picker: placement branches resolved at run time from free memory, device load and
the Judge, cached by a coarse memory fingerprint; arms' device buffers allocated per run."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from fuel_dialect.attrs import KERNEL_ATTR, KernelRefAttr  # noqa: E402
from fuel_dialect.base import KernelOp  # noqa: E402
from fuel_dialect.branch import PICKED_ATTR  # noqa: E402
from runtime.binding_table import KernelBindingTable  # noqa: E402
from runtime.compiled import ExecutionError  # noqa: E402
from runtime.executor import Executor  # noqa: E402
from runtime.judge import HashMapJudge, size_class  # noqa: E402
from runtime.kernels import global_bindings  # noqa: E402
from runtime.module import FuelModule  # noqa: E402
from runtime.route import ArmProfile, RoutePicker, bucket, pressure_tier  # noqa: E402
from runtime.topology import SystemTopology  # noqa: E402
from runtime.topology_file import load_file

T = "tensor<64x64xf32>"
F = 64 * 64 * 4  # bytes of one value
BRANCHY = f"""
func.func @main(%x: {T} {{fuel.name = "x"}}, %y: {T} {{fuel.name = "y"}}) -> ({T} {{fuel.name = "s"}}) {{
  %r = fuel.branch placement -> {T} arm {{
    %a = fuel.mul %x, %y {{fuel.device = #fuel.device<"cpu">}} : {T}, {T} -> {T}
    fuel.yield %a : {T}
  }} arm {{
    %xc = fuel.copy %x to "cuda:0" : {T}
    %yc = fuel.copy %y to "cuda:0" : {T}
    %b = fuel.mul %xc, %yc {{fuel.device = #fuel.device<"cuda:0">}} : {T}, {T} -> {T}
    %bh = fuel.copy %b to "cpu" : {T}
    fuel.yield %bh : {T}
  }}
  %s = fuel.add %r, %x : {T}, {T} -> {T}
  func.return %s : {T}
}}
"""  # noqa: E501


def mul_on_cuda(ins, outs, params) -> None:  # a torch kernel: the backend is what matters here
    outs[0].copy_(ins[0] * ins[1])


def table() -> KernelBindingTable:
    t = global_bindings().copy()
    t.register("mul", ("f32",) * 3, "cuda", mul_on_cuda, kernel_source="torch")
    return t


def module(t: KernelBindingTable) -> FuelModule:
    """BRANCHY with each arm's mul stamped with its kernel (the Judge's key)."""
    m = FuelModule.parse(BRANCHY)
    for op in m.op.walk():
        if isinstance(op, KernelOp) and op.name == "fuel.mul":
            backend = "cuda" if "cuda" in str(op.attributes["fuel.device"]) else "cpu"
            e = t.lookup_with_caps("mul", ("f32",) * 3, backend)
            op.attributes[KERNEL_ATTR] = KernelRefAttr.get(
                "mul", ("f32",) * 3, backend, e.kernel_source, e.revision_hash
            )
    return m


def judge(t: KernelBindingTable, cpu_ns: float = 1e6, cuda_ns: float = 100.0) -> HashMapJudge:
    """Measured mul latencies; the cuda arm also pays ~100 us of estimated copies."""
    j = HashMapJudge()
    sc = size_class("mul", [(64, 64)] * 3)
    for backend, ns in (("cpu", cpu_ns), ("cuda", cuda_ns)):
        source = t.lookup_with_caps("mul", ("f32",) * 3, backend).kernel_source
        j.insert("mul", "f32", sc, backend, source, ns)
    return j


def topology(tmp_path: Path, cuda_bytes: int) -> SystemTopology:
    p = tmp_path / f"topo_{cuda_bytes}.toml"
    cuda = f'name = "cuda:0"\nclass = "h100"\nmemory_bytes = {cuda_bytes}'
    p.write_text(f'[[devices]]\nname = "cpu"\ncores = 4\n\n[[devices]]\n{cuda}\n')
    return load_file(p)


def feed() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {k: rng.standard_normal((64, 64)).astype(np.float32) for k in ("x", "y")}


def expected() -> np.ndarray:
    f = feed()
    return f["x"] * f["y"] + f["x"]


def test_without_signals_the_route_is_arm_0(tmp_path: Path) -> None:
    t = table()
    ex = Executor(module(t), t, topology=topology(tmp_path, 1 << 30))
    np.testing.assert_allclose(ex.run(feed())["s"], expected(), rtol=1e-6)
    assert ex.last_route() == (0,)
    assert ex.memory_peak_by_device().get("cuda:0", 0) == 0  # arm 1's buffers never existed


def test_judge_picks_the_faster_arm_unless_cuda_memory_is_short(tmp_path: Path) -> None:
    t = table()
    roomy = Executor(module(t), t, topology=topology(tmp_path, 1 << 30), judge=judge(t))
    np.testing.assert_allclose(roomy.run(feed())["s"], expected(), rtol=1e-6)
    assert roomy.last_route() == (1,)
    assert roomy.memory_peak_by_device()["cuda:0"] == 3 * F  # %xc, %yc, %b, allocated per run
    assert roomy.runtimes["cuda:0"].allocated == 0  # returned at the end of the run
    for cuda_bytes in (4 * F, 2 * F):  # tight (needs over half the free memory), then won't fit
        tight = Executor(module(t), t, topology=topology(tmp_path, cuda_bytes), judge=judge(t))
        np.testing.assert_allclose(tight.run(feed())["s"], expected(), rtol=1e-6)
        assert tight.last_route() == (0,)
    slow_cuda = Executor(
        module(t), t, topology=topology(tmp_path, 1 << 30), judge=judge(t, cpu_ns=50_000.0)
    )
    slow_cuda.run(feed())
    assert slow_cuda.last_route() == (0,)


def test_route_cache_re_resolves_only_when_the_fingerprint_changes(tmp_path: Path) -> None:
    t = table()
    capacity = 64 * F
    ex = Executor(module(t), t, topology=topology(tmp_path, capacity), judge=judge(t))
    picker = ex.route_picker
    assert picker is not None
    for _ in range(3):
        ex.run(feed())
    assert (picker.resolutions, ex.last_route()) == (1, (1,))
    cuda = ex.runtimes["cuda:0"]
    cuda.reserve(F)  # 63/64 free: the same eighth, so no re-resolution
    ex.run(feed())
    assert (picker.resolutions, ex.last_route()) == (1, (1,))
    cuda.reserve(capacity - 3 * F)  # someone else holds almost everything: arm 1 won't fit
    for _ in range(2):
        np.testing.assert_allclose(ex.run(feed())["s"], expected(), rtol=1e-6)
    assert (picker.resolutions, ex.last_route()) == (2, (0,))
    cuda.reserve(-(capacity - 3 * F))  # back to the first fingerprint: a cache hit
    ex.run(feed())
    assert (picker.resolutions, ex.last_route()) == (2, (1,))


def test_an_explicit_route_that_does_not_fit_fails_clearly(tmp_path: Path) -> None:
    t = table()
    m = module(t)
    branch = next(op for op in m.op.walk() if op.name == "fuel.branch")
    from xdsl.dialects.builtin import IntegerAttr, i64

    branch.attributes[PICKED_ATTR] = IntegerAttr(1, i64)
    ex = Executor(m, t, topology=topology(tmp_path, 2 * F))
    assert ex.route_picker is None  # an explicit route is not re-picked
    with pytest.raises(ExecutionError, match=r"'fuel.branch'.*cuda:0: cannot allocate 16384"):
        ex.run(feed())
    ok = Executor(m, t, topology=topology(tmp_path, 4 * F))
    np.testing.assert_allclose(ok.run(feed())["s"], expected(), rtol=1e-6)
    assert ok.last_route() == (1,)


def test_a_saturated_device_loses_to_an_idle_one(tmp_path: Path) -> None:
    t = table()
    topo = topology(tmp_path, 1 << 30)
    busy = Executor(module(t), t, topology=topo, judge=judge(t)).runtimes["cuda:0"]
    gate = threading.Event()
    for _ in range(64):
        busy.submit(gate.wait, (10,), "someone else's work")
    try:
        ex = Executor(module(t), t, topology=topo, judge=judge(t), devices={"cuda:0": busy})
        ex.route_picker.refresh()  # type: ignore[union-attr]
        assert ex.route_picker.branches[0][1] == [0]  # type: ignore[union-attr]
    finally:
        gate.set()
    np.testing.assert_allclose(ex.run(feed())["s"], expected(), rtol=1e-6)


class _Fake:
    def __init__(self, free: int | None, capacity: int | None, load: int = 0):
        self._free, self.capacity, self._load = free, capacity, load

    def free_bytes(self) -> int | None:
        return self._free

    def load(self) -> int:
        return self._load


def test_selector_tiers_and_fingerprint_buckets() -> None:
    arm = ArmProfile({"cuda:0": 100}, frozenset({"cuda:0"}))
    assert pressure_tier(arm, {"cuda:0": 1000}) == 0
    assert pressure_tier(arm, {"cuda:0": 150}) == 1
    assert pressure_tier(arm, {"cuda:0": 99}) is None
    assert pressure_tier(arm, {"cuda:0": None}) == 0
    assert [bucket(f, 800) for f in (0, 99, 100, 699, 700, 800)] == [0, 0, 1, 6, 7, 7]
    assert bucket(None, 800) is None and bucket(1 << 20, None) == 6
    host = ArmProfile({"cpu": 100}, frozenset({"cpu"}), latency_ns=900.0)
    fast = ArmProfile({"cuda:0": 100}, frozenset({"cuda:0"}), latency_ns=10.0)
    picker = RoutePicker({"cpu": _Fake(None, None), "cuda:0": _Fake(10_000, 10_000)})  # type: ignore[dict-item]
    assert picker.choose([host, fast], {"cpu": None, "cuda:0": 10_000}) == 1
    assert picker.choose([host, fast], {"cpu": None, "cuda:0": 50}) == 0  # won't fit
    untimed = ArmProfile({"cuda:0": 100}, frozenset({"cuda:0"}))
    assert picker.choose([host, untimed], {"cuda:0": 10_000}) == 0  # no figure: index order
    saturated = RoutePicker({"cuda:0": _Fake(10_000, 10_000, load=64)})  # type: ignore[dict-item]
    assert saturated.choose([host, fast], {"cuda:0": 10_000}) == 0
