"""SystemTopology: devices, substrates, transfer paths and estimates, declared files, detection,
the process-wide snapshot, and coverage/divergence against a binding table."""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from runtime import system as system_mod
from runtime import topology as topo_mod
from runtime.binding_table import KernelBindingTable
from runtime.cost import CostEstimate
from runtime.system import current_topology, refresh, use_topology_file
from runtime.topology import (
    TRANSFER_DEFAULTS,
    SystemTopology,
    TopologyError,
    TransferEstimator,
    TransferPath,
    UnknownDevice,
    cpu_device,
    gpu_class_for,
)
from runtime.topology_file import load_file

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "topologies" / "cpu_2gpu.toml"


def write(tmp_path: Path, text: str, name: str = "topo.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.fixture
def two_gpus() -> SystemTopology:
    return load_file(EXAMPLE)


@pytest.fixture
def unpeered(tmp_path: Path) -> SystemTopology:
    text = '[[devices]]\nname = "cuda:0"\n[[devices]]\nname = "cuda:1"\nclass = "a100"\n'
    return load_file(write(tmp_path, text))


# -- the host --------------------------------------------------------------------------------


def test_cpu_always_present_and_shares_storage_with_itself() -> None:
    t = SystemTopology.cpu_only()
    assert [d.name for d in t.devices] == ["cpu"] and t.host is t.device("cpu")
    assert t.backends_on("cpu") == ("cpu",) and t.devices_for_backend("cpu") == (t.host,)
    assert t.substrate("cpu") == "host"
    assert t.shares_storage(("cpu", "cpu"), ("cpu", "cpu"))
    assert t.estimate_transfer_ns("cpu", "cpu", 1 << 30) == 0.0


def test_cpu_priors_scale_with_cores_until_the_socket_caps_bandwidth(monkeypatch) -> None:
    monkeypatch.setattr(topo_mod.os, "cpu_count", lambda: 4)
    d = cpu_device()
    assert (d.flops_per_ns, d.bytes_per_ns) == (64.0, 40.0)
    big = cpu_device(cores=64)
    assert (big.flops_per_ns, big.bytes_per_ns) == (1024.0, 100.0)
    monkeypatch.setattr(topo_mod.os, "cpu_count", lambda: None)
    assert cpu_device().flops_per_ns == 16.0


def test_a_topology_without_a_cpu_gets_one() -> None:
    t = SystemTopology((topo_mod.gpu_device("cuda:0", "h100"),))
    assert t.host.name == "cpu" and len(t.devices) == 2


def test_unknown_device_is_a_typed_error(two_gpus: SystemTopology) -> None:
    with pytest.raises(UnknownDevice, match=r"'cuda:7'.*cpu, cuda:0, cuda:1"):
        two_gpus.estimate_transfer_ns("cpu", "cuda:7", 8)
    assert issubclass(UnknownDevice, TopologyError)


# -- the example file ------------------------------------------------------------------------


def test_example_file(two_gpus: SystemTopology) -> None:
    assert [d.name for d in two_gpus.devices] == ["cpu", "cuda:0", "cuda:1"]
    g = two_gpus.device("cuda:1")
    assert (g.kind, g.device_class, g.flops_per_ns, g.bytes_per_ns) == ("cuda", "h200", 5e4, 4e3)
    assert g.memory_bytes == 141 * 10**9
    assert two_gpus.host.flops_per_ns == 32 * 16  # cores = 32
    assert [d.name for d in two_gpus.devices_for_backend("cuda")] == ["cuda:0", "cuda:1"]
    assert two_gpus.source == str(EXAMPLE)


def test_json_and_toml_agree(tmp_path: Path, two_gpus: SystemTopology) -> None:
    data = {
        "peer_groups": [["cuda:0", "cuda:1"]],
        "devices": [
            {"name": "cpu", "cores": 32},
            {"name": "cuda:0", "class": "h200"},
            {"name": "cuda:1", "class": "h200"},
        ],
        "transfers": [{"src": "cuda:0", "dst": "cuda:1", "latency_ns": 10000, "gb_per_s": 300}],
    }
    j = load_file(write(tmp_path, json.dumps(data), "t.json"))
    assert j.devices == two_gpus.devices
    assert dict(j.transfers) == dict(two_gpus.transfers)


# -- paths and estimates ---------------------------------------------------------------------


def test_transfer_paths(two_gpus: SystemTopology, unpeered: SystemTopology) -> None:
    P = TransferPath
    assert two_gpus.transfer_path("cuda:0", "cuda:0") is P.SAME_DEVICE
    assert two_gpus.transfer_path("cpu", "cuda:0") is P.DEVICE_COPY
    assert two_gpus.transfer_path("cuda:1", "cpu") is P.DEVICE_COPY
    assert two_gpus.transfer_path("cuda:0", "cuda:1") is P.PEER
    assert unpeered.transfer_path("cuda:0", "cuda:1") is P.HOST_STAGING


def test_class_defaults_and_declared_override(two_gpus: SystemTopology) -> None:
    copy = TRANSFER_DEFAULTS[TransferPath.DEVICE_COPY]
    assert two_gpus.transfer_estimate("cpu", "cuda:0") == copy
    nv = two_gpus.transfer_estimate("cuda:1", "cuda:0")  # bidirectional by default
    assert (nv.latency_ns, nv.bytes_per_ns, nv.path) == (10_000, 300, TransferPath.PEER)
    assert two_gpus.estimate_transfer_ns("cuda:0", "cuda:1", 3_000_000) == 10_000 + 10_000


def test_estimates_are_zero_on_one_device_and_monotone(two_gpus: SystemTopology) -> None:
    names = [d.name for d in two_gpus.devices]
    sizes = [0, 1, 1 << 10, 1 << 20, 1 << 30]
    for src in names:
        for dst in names:
            ns = [two_gpus.estimate_transfer_ns(src, dst, n) for n in sizes]
            assert ns == sorted(ns) and all(math.isfinite(x) for x in ns)
            assert (src != dst) == (ns[-1] > 0)
    assert two_gpus.estimate_transfer_ns("cpu", "cuda:0", 0) == 0.0  # nothing moves


def test_host_staging_composes_two_legs(unpeered: SystemTopology) -> None:
    est = unpeered.transfer_estimate("cuda:0", "cuda:1")
    assert (est.latency_ns, est.bytes_per_ns) == (60_000, 4.0)  # 2 x (30 us + 8 GB/s)
    assert est.path is TransferPath.HOST_STAGING


def test_host_staging_uses_the_real_legs(tmp_path: Path) -> None:
    text = (
        '[[devices]]\nname = "cuda:0"\n[[devices]]\nname = "cuda:1"\n'
        '[[transfers]]\nsrc = "cuda:0"\ndst = "cpu"\nlatency_ns = 1000\ngb_per_s = 24\n'
        "bidirectional = false\n"
    )
    t = load_file(write(tmp_path, text))
    est = t.transfer_estimate("cuda:0", "cuda:1")
    assert est.latency_ns == 1000 + 30_000
    assert est.bytes_per_ns == pytest.approx(1 / (1 / 24 + 1 / 8))
    assert t.transfer_estimate("cpu", "cuda:0").latency_ns == 30_000  # one way only


def test_unified_memory_device_uses_shared_memory(tmp_path: Path) -> None:
    t = load_file(write(tmp_path, '[[devices]]\nname = "metal:0"\nunified_memory = true\n'))
    assert t.transfer_path("cpu", "metal:0") is TransferPath.SHARED_MEMORY
    assert t.substrate("metal") == "metal"


def test_topology_is_a_transfer_estimator(two_gpus: SystemTopology) -> None:
    assert isinstance(two_gpus, TransferEstimator)


def test_compute_estimate_uses_the_device_rates(two_gpus: SystemTopology) -> None:
    est = CostEstimate(flops=1e6, bytes_moved=1e3, overhead_ns=100)
    assert two_gpus.estimate_compute_ns(est, "cuda:0") == 1e6 / 5e4 + 100
    assert two_gpus.estimate_compute_ns(est, "cpu") == 1e6 / 512 + 100


# -- storage sharing -------------------------------------------------------------------------


def test_shares_storage(two_gpus: SystemTopology) -> None:
    assert two_gpus.shares_storage(("cuda", "cuda:0"), ("cuda", "cuda:0"))
    assert not two_gpus.shares_storage(("cuda", "cuda:0"), ("cuda", "cuda:1"))
    assert not two_gpus.shares_storage(("cpu", "cpu"), ("cuda", "cuda:0"))
    assert not two_gpus.shares_storage(("cuda", "cuda:0"), ("vulkan", "cuda:0"))


def test_declared_backends_and_substrates(tmp_path: Path) -> None:
    text = (
        '[substrates]\nmkl = "host"\n'
        '[[devices]]\nname = "cpu"\nbackends = ["cpu", "mkl", "onednn"]\n'
    )
    t = load_file(write(tmp_path, text))
    assert t.shares_storage(("cpu", "cpu"), ("mkl", "cpu"))
    assert t.substrate("onednn") == "host"  # unlisted: the substrate of the kind it runs on
    assert t.substrate("nowhere") == "nowhere"


# -- malformed files -------------------------------------------------------------------------

DEV = '[[devices]]\nname = "cuda:0"\n'
BAD_FILES = [
    ("topo.toml", "devices = [", "not valid TOML"),
    ("topo.json", "{devices: 1}", "not valid JSON"),
    ("topo.json", "[1, 2]", "top level must be a table"),
    ("topo.yaml", "devices: []", "unsupported file type '.yaml'"),
    ("topo.toml", "gpus = 2\n", "unknown key 'gpus'"),
    ("topo.toml", "devices = 3\n", "devices must be a list"),
    ("topo.toml", "devices = [3]\n", "devices[0] must be a table"),
    ("topo.toml", '[[devices]]\nname = "cuda:0"\nspeed = 1\n', "unknown key 'speed'"),
    ("topo.toml", '[[devices]]\nname = "gpu0"\n', "bad device name 'gpu0'"),
    ("topo.toml", "[[devices]]\nkind = 'cuda'\n", "bad device name None"),
    ("topo.toml", '[[devices]]\nname = "cpu:1"\n', "the host is named 'cpu'"),
    ("topo.toml", DEV + "flops_per_ns = -5\n", "flops_per_ns must be a positive finite"),
    ("topo.toml", DEV + "bytes_per_ns = 0\n", "bytes_per_ns must be a positive"),
    ("topo.toml", DEV + "bytes_per_ns = nan\n", "bytes_per_ns must be a positive"),
    ("topo.toml", DEV + "flops_per_ns = true\n", "flops_per_ns must be a positive"),
    ("topo.toml", DEV + 'flops_per_ns = "fast"\n', "flops_per_ns must be a positive"),
    ("topo.toml", DEV + "memory_bytes = 1.5\n", "memory_bytes must be a positive integer"),
    ("topo.toml", DEV + 'class = "h900"\n', "unknown class 'h900'"),
    ("topo.toml", DEV + 'kind = "vulkan"\n', "kind 'vulkan' contradicts the name"),
    ("topo.toml", DEV + "cores = 8\n", "'cores' applies to the cpu only"),
    ("topo.toml", DEV + 'backends = ["Cuda!"]\n', "invalid backend name 'Cuda!'"),
    ("topo.toml", DEV + "backends = []\n", "backends must be a non-empty list"),
    ("topo.toml", DEV + "unified_memory = 1\n", "unified_memory must be true or false"),
    ("topo.toml", '[[devices]]\nname = "cpu"\nclass = "h200"\n', "cpu's class must be 'cpu'"),
    ("topo.toml", '[[devices]]\nname = "cpu"\ncores = 0\n', "cores must be a positive integer"),
    ("topo.toml", DEV + DEV, "device 'cuda:0' is declared twice"),
    ("topo.toml", 'peer_groups = [["cuda:0", "cuda:5"]]\n' + DEV, "unknown device 'cuda:5'"),
    ("topo.toml", 'peer_groups = [["cpu", "cuda:0"]]\n' + DEV, "two or more distinct non-cpu"),
    ("topo.toml", 'peer_groups = [["cuda:0"]]\n' + DEV, "two or more distinct non-cpu"),
    ("topo.toml", 'peer_groups = "all"\n', "peer_groups must be a list"),
    (
        "topo.toml",
        DEV + '[[transfers]]\nsrc = "cpu"\ndst = "cuda:9"\ngb_per_s = 1\n',
        "unknown device 'cuda:9'",
    ),
    (
        "topo.toml",
        DEV + '[[transfers]]\nsrc = "cuda:0"\ndst = "cuda:0"\ngb_per_s = 1\n',
        "src and dst are both 'cuda:0'",
    ),
    (
        "topo.toml",
        DEV + '[[transfers]]\nsrc = "cpu"\ndst = "cuda:0"\nlatency_ns = -1\n',
        "latency_ns must be a non-negative finite",
    ),
    (
        "topo.toml",
        DEV + '[[transfers]]\nsrc = "cpu"\ndst = "cuda:0"\n',
        "needs latency_ns or gb_per_s",
    ),
    (
        "topo.toml",
        DEV + '[[transfers]]\nsrc = "cpu"\ndst = "cuda:0"\ngb_per_s = 1\npath = "pcie"\n',
        "unknown path 'pcie'",
    ),
    (
        "topo.toml",
        DEV + '[[transfers]]\nsrc = "cpu"\ndst = "cuda:0"\ngb_per_s = 1\nhops = 2\n',
        "unknown key 'hops'",
    ),
    (
        "topo.toml",
        DEV + ('[[transfers]]\nsrc = "cpu"\ndst = "cuda:0"\ngb_per_s = 1\n') * 2,
        "transfer cpu -> cuda:0 is declared twice",
    ),
    ("topo.toml", '[substrates]\n"Bad Name" = "host"\n', "substrates: bad entry"),
]


@pytest.mark.parametrize(("name", "text", "problem"), BAD_FILES)
def test_malformed_file_names_the_file_and_the_problem(
    tmp_path: Path, name: str, text: str, problem: str
) -> None:
    path = write(tmp_path, text, name)
    with pytest.raises(TopologyError) as e:
        load_file(path)
    assert e.value.path == str(path)
    assert str(e.value).startswith(f"{path}: ")
    assert problem in e.value.problem


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="cannot read the file") as e:
        load_file(tmp_path / "absent.toml")
    assert e.value.path == str(tmp_path / "absent.toml")


def test_nan_in_json_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, '{"devices": [{"name": "cuda:0", "flops_per_ns": NaN}]}', "t.json")
    with pytest.raises(TopologyError, match="flops_per_ns must be a positive finite"):
        load_file(path)


# -- detection -------------------------------------------------------------------------------


def _hide_torch(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )


def _fake_torch(monkeypatch, names=("NVIDIA H200", "NVIDIA A100-SXM4-80GB"), peer=True):
    cuda = SimpleNamespace(
        is_available=lambda: True,
        device_count=lambda: len(names),
        get_device_properties=lambda i: SimpleNamespace(name=names[i], total_memory=(i + 1) << 30),
        can_device_access_peer=lambda i, j: peer,
    )
    fake = SimpleNamespace(cuda=cuda)
    real_spec, real_import = importlib.util.find_spec, importlib.import_module
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: object() if n == "torch" else real_spec(n, *a)
    )
    monkeypatch.setattr(
        importlib, "import_module", lambda n, *a: fake if n == "torch" else real_import(n, *a)
    )
    monkeypatch.setattr(topo_mod, "gpu_driver_present", lambda: True)
    return fake


def test_detect_without_torch(monkeypatch) -> None:
    _hide_torch(monkeypatch)
    monkeypatch.setattr(importlib, "import_module", lambda n, *a: pytest.fail("imported " + n))
    t = SystemTopology.detect()
    assert [d.name for d in t.devices] == ["cpu"] and t.source == "detect"


def test_detect_skips_the_torch_import_without_a_gpu_driver(monkeypatch) -> None:
    monkeypatch.delitem(topo_mod.sys.modules, "torch", raising=False)
    monkeypatch.setattr(topo_mod, "gpu_driver_present", lambda: False)
    monkeypatch.setattr(importlib, "import_module", lambda n, *a: pytest.fail("imported " + n))
    assert [d.name for d in SystemTopology.detect().devices] == ["cpu"]


def test_detect_with_cuda_devices(monkeypatch) -> None:
    _fake_torch(monkeypatch)
    t = SystemTopology.detect(calibrate=False)
    assert [(d.name, d.device_class) for d in t.devices] == [
        ("cpu", "cpu"),
        ("cuda:0", "h200"),
        ("cuda:1", "a100"),
    ]
    assert t.device("cuda:1").memory_bytes == 2 << 30
    assert t.transfer_path("cuda:0", "cuda:1") is TransferPath.PEER


def test_detect_survives_a_broken_driver(monkeypatch) -> None:
    fake = _fake_torch(monkeypatch)
    fake.cuda.is_available = lambda: (_ for _ in ()).throw(RuntimeError("driver too old"))
    assert [d.name for d in SystemTopology.detect().devices] == ["cpu"]


def test_calibration_replaces_the_copy_default_and_is_cached_per_generation(monkeypatch) -> None:
    _fake_torch(monkeypatch, names=("NVIDIA H100 80GB HBM3",), peer=False)
    calls = []

    def timed(torch, device, nbytes, to_device):  # 5 us + 20 GB/s
        calls.append((device, nbytes, to_device))
        return 5_000.0 + nbytes / 20.0

    monkeypatch.setattr(topo_mod, "_median_copy_ns", timed)
    monkeypatch.setattr(topo_mod, "_CALIBRATION", {})
    t = SystemTopology.detect(generation=7)
    leg = t.transfer_estimate("cpu", "cuda:0")
    assert leg.path is TransferPath.DEVICE_COPY
    assert (leg.latency_ns, leg.bytes_per_ns) == pytest.approx((5_000.0, 20.0))
    assert len(calls) == 4  # two sizes, two directions
    SystemTopology.detect(generation=7)
    assert len(calls) == 4  # cached for the generation
    SystemTopology.detect(generation=8)
    assert len(calls) == 8


def test_calibration_discards_unusable_timings(monkeypatch) -> None:
    _fake_torch(monkeypatch, names=("Some GPU",), peer=False)
    monkeypatch.setattr(topo_mod, "_median_copy_ns", lambda *a: 1000.0)  # no slope
    monkeypatch.setattr(topo_mod, "_CALIBRATION", {})
    t = SystemTopology.detect(generation=1)
    assert t.device("cuda:0").device_class == "gpu"
    assert t.transfer_estimate("cpu", "cuda:0") == TRANSFER_DEFAULTS[TransferPath.DEVICE_COPY]


def test_gpu_class_for() -> None:
    assert gpu_class_for("NVIDIA H200") == "h200"
    assert gpu_class_for("NVIDIA H100 PCIe") == "h100"
    assert gpu_class_for("NVIDIA A100-SXM4-40GB") == "a100"
    assert gpu_class_for("NVIDIA L4") == "l4"
    assert gpu_class_for("NVIDIA L40S") == "gpu"


# -- the process-wide snapshot ---------------------------------------------------------------


@pytest.fixture
def fresh_current(monkeypatch):
    monkeypatch.setattr(system_mod, "_CURRENT", system_mod._Current())
    gen = {"bindings": 3}
    monkeypatch.setattr(system_mod, "bindings_generation", lambda: gen["bindings"])
    return gen


def test_current_topology_is_cached_until_refresh(fresh_current, monkeypatch) -> None:
    _hide_torch(monkeypatch)
    first = current_topology()
    assert current_topology() is first and first.generation == 3
    assert refresh() == 4
    second = current_topology()
    assert second is not first and second.generation == 4
    assert current_topology() is second


def test_current_topology_follows_the_binding_generation(fresh_current, monkeypatch) -> None:
    _hide_torch(monkeypatch)
    first = current_topology()
    fresh_current["bindings"] += 1
    assert current_topology() is not first
    assert current_topology().generation == first.generation + 1


def test_current_topology_from_a_declared_file(fresh_current, tmp_path: Path) -> None:
    gen = use_topology_file(EXAMPLE)
    t = current_topology()
    assert t.generation == gen and t.source == str(EXAMPLE) and len(t.devices) == 3
    with pytest.raises(TopologyError):
        use_topology_file(write(tmp_path, "oops = 1\n"))
    assert current_topology() is t  # a bad file changes nothing


# -- coverage and divergence -----------------------------------------------------------------


def _kernel(ins, outs, params) -> None:
    np.copyto(outs[0], ins[0])


def _other(ins, outs, params) -> None:
    np.copyto(outs[0], ins[0])


def test_coverage_and_divergence(two_gpus: SystemTopology) -> None:
    table = KernelBindingTable()
    table.register("add", ("f32", "f32", "f32"), "cpu", _kernel)
    table.register("cast", ("f32", "f16"), "cpu", _kernel)
    table.register("cast", ("f32", "f16"), "cpu", _other)
    assert two_gpus.coverage(table) == {"cpu": {("add", "f32"), ("cast", "f16")}}
    assert [d.device for d in two_gpus.divergence(table)] == ["cuda:0", "cuda:1"]
    assert "no kernel for any of its backends (cuda)" in str(two_gpus.divergence(table)[0])

    table.register("matmul", ("f16", "f16", "f16"), "cuda", _kernel)
    table.register("relu", ("f32", "f32"), "vulkan", _kernel)
    assert two_gpus.coverage(table)["cuda"] == {("matmul", "f16")}
    warnings = two_gpus.divergence(table)
    assert [(w.device, w.backends) for w in warnings] == [(None, ("vulkan",))]
    assert "backend 'vulkan' has kernels but runs on no device" in str(warnings[0])
