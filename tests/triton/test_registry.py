"""The Triton binding-table rows: keys, sources, claims, costs, and one-call registration."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from triton_helpers import table

from runtime.binding_table import KernelBindingTable
from runtime.kernels import global_bindings
from runtime.kernels.triton.registry import register_triton_kernels, triton_kernel_table

ROOT = Path(__file__).resolve().parents[2]


def test_every_key_is_a_cpu_key_on_cuda() -> None:
    cpu = global_bindings()
    for op, dtypes, backend in table().iter_keys():
        assert backend == "cuda"
        assert cpu.lookup_alternatives(op, dtypes, "cpu"), f"({op}, {dtypes}) is not a CPU key"


def test_entries_carry_audited_claims_costs_and_revisions() -> None:
    seen_sources: dict[tuple, list[str]] = {}
    for key, e in table().iter_entries():
        assert e.kernel_source == "triton" or e.kernel_source.startswith("triton-")
        assert not e.precision.is_unaudited(), key
        assert e.precision.bit_stable, key
        assert e.cost is not None and e.revision_hash != 0 and e.caps.strided_input
        assert callable(getattr(e.kernel, "launches", None))
        seen_sources.setdefault(key, []).append(e.kernel_source)
    for key, sources in seen_sources.items():  # a stamp tells siblings apart by source
        assert len(set(sources)) == len(sources) and sources[0] == "triton", key


def test_family_coverage() -> None:
    ops = {op for op, _, _ in table().iter_keys()}
    want = {
        "exp",
        "gelu",
        "add",
        "pow",
        "lt",
        "cast",
        "matmul",
        "softmax",
        "rms_norm",
        "layer_norm",
        "rope",
        "attention",
        "reduce_sum",
        "reduce_mean",
        "reduce_max",
        "reduce_min",
        "transpose",
        "slice",
        "broadcast",
        "concat",
        "gather",
        "where",
    }
    assert want <= ops
    for key in (
        ("transpose", ("i1", "i1")),
        ("gather", ("f64", "i32", "f64")),
        ("where", ("i1", "u8", "u8", "u8")),
    ):
        assert table().lookup_alternatives(*key, "cuda"), key
    for t in ("f32", "f16", "bf16"):
        flash = table().lookup_alternatives("attention", (t, t, t, "i64", t), "cuda")
        assert [e.kernel_source for e in flash] == ["triton", "triton-flashdecode"]


def test_registering_is_one_call_and_leaves_the_global_table_alone() -> None:
    merged = global_bindings().copy()
    before = len(merged)
    register_triton_kernels(merged)
    merged.finalize()
    assert len(merged) == before + len(triton_kernel_table())
    assert "cuda" not in global_bindings().backends()
    fresh = KernelBindingTable()
    register_triton_kernels(fresh)
    assert fresh.backends() == ["cuda"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU default")
def test_import_selects_the_interpreter_without_a_gpu() -> None:
    code = "import os, runtime.kernels.triton; print(os.environ.get('TRITON_INTERPRET'))"
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "FUEL_GPU")}

    def interp(extra: dict[str, str]) -> str:
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env | extra,
            check=True,
        )
        return done.stdout.strip()

    assert interp({}) == "1"  # torch is CPU-only here
    assert interp({"FUEL_GPU": "1"}) == "None"
