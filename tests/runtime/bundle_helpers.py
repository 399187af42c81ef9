"""Shared by the bundle tests: a fake GPU backend (a test double for the storage layer only),
a helper that re-signs a hand-edited bundle so only the check under test can catch it, and the
kernel source the picker gives the test graphs' f32 matmul."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lowering import backend as backend_mod
from lowering.backend import KernelArtifact, Stage
from lowering.cpu.backend import make_backend as make_cpu_backend
from runtime import native
from runtime.bundle import CHECKSUM_KEY, MANIFEST, manifest_checksum, sha256

MM_SOURCE = (
    "native"
    if native.enabled() and native.simd_fma()
    else "torch-blas"
    if importlib.util.find_spec("torch")
    else "numpy"
)
"""The picker's matmul f32 on the test graphs' many-row products: fuel's packed FMA GEMM where
it runs at full speed (kernels/native.py: the BLAS roofline, one C call), else vendor BLAS
where torch is installed (kernels/torch_blas.py), else numpy."""

FAKE_FILES = {"matmul.py": b"@triton.jit\ndef matmul(): ...\n", "matmul.cubin": bytes(range(64))}


@dataclass(frozen=True)
class FakeGpuBackend:
    """Lowers for sm_90 to one artifact with two files; runs nothing."""

    name: str = "fake-gpu"

    def supports_target(self, target: str) -> bool:
        return target == "sm_90"

    def parse_options(self, target: str, options: Mapping[str, str]) -> dict[str, str]:
        return dict(options)

    def add_stages(self, stages: dict[str, Stage], options: Any) -> None:
        def kernels(module: Any, md: dict[str, Any]) -> list[KernelArtifact]:
            md["lowered"] = module.op.clone()
            return [KernelArtifact("matmul_f32", 0xABC, "fake-gpu", FAKE_FILES, {"grid": [1]})]

        stages["kernels"] = kernels


def use_fake_gpu_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backends for this test only: cpu, then the fake (ahead of any real sm_XY backend)."""
    monkeypatch.setattr(
        backend_mod, "_BACKENDS", {"cpu": make_cpu_backend, "fake-gpu": FakeGpuBackend}
    )


def resign(bundle: Path, edit: Any = None) -> None:
    """Recompute every file's size/sha256 and the manifest checksum of a bundle directory,
    after `edit(manifest)` (if given) changed the manifest."""
    m = json.loads((bundle / MANIFEST).read_text())
    if edit is not None:
        edit(m)
    for name in m["files"]:
        if (bundle / name).is_file():
            data = (bundle / name).read_bytes()
            m["files"][name] = {"size": len(data), "sha256": sha256(data)}
    m[CHECKSUM_KEY] = manifest_checksum(m)
    (bundle / MANIFEST).write_text(json.dumps(m, indent=1, sort_keys=True))
