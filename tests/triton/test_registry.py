"""The Triton binding-table rows: keys, sources, claims, costs, and one-call registration."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
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


def test_entries_declare_audited_claims_costs_and_revisions() -> None:
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


def test_claims_no_gpu_run_proved_are_unaudited_and_no_floor_admits_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The gate: without a GPU ledger every Triton claim registers unaudited (kept for display
    and ranking) and fails every precision floor; a pass record at the revision proves it."""
    from passes.picker.ranker import PrecisionRequirement
    from runtime.contracts.ledger import Ledger, LedgerRecord, claims_of, revision_hex
    from runtime.kernels.triton import registry

    monkeypatch.setattr(registry, "_ledger", lambda: Ledger())
    gated = triton_kernel_table()
    floors = [PrecisionRequirement.parse(s) for s in ("bit_stable", "ulp=2", "rel=1e-3")]
    for (op, dtypes, _), e in gated.iter_entries():
        declared = next(
            d
            for d in table().lookup_alternatives(op, dtypes, "cuda")
            if d.kernel_source == e.kernel_source
        )
        assert e.precision.is_unaudited() and "unaudited" in e.precision.describe()
        assert replace(e.precision, audited=True) == declared.precision
        assert not any(f.admits(e.precision) for f in floors), (op, dtypes)
    e = declared = table().lookup("exp", ("f32", "f32"), "cuda")
    rows = [
        LedgerRecord(
            registry.ledger_kernel("exp", "triton"),
            "cuda",
            ("f32", "f32"),
            revision_hex(e.revision_hash),
            claim,
            "pass",
            bound,
        )
        for claim, bound in claims_of(declared.precision)
    ]
    monkeypatch.setattr(registry, "_ledger", lambda: Ledger(rows))
    proven = triton_kernel_table().lookup("exp", ("f32", "f32"), "cuda").precision
    assert proven == declared.precision and PrecisionRequirement.parse("bit_stable").admits(proven)


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


def test_gpu_check_records_ledger_rows_per_declared_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    """`bench/gpu_check.py --write-ledger`'s record builder, run here under the interpreter with
    a stand-in device name (the records stay in memory: only a GPU run writes the ledger)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "bench" / "gpu_check.py")
    assert spec is not None and spec.loader is not None
    gpu_check = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gpu_check", gpu_check)  # its dataclasses look it up
    spec.loader.exec_module(gpu_check)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "stand-in")
    e = table().lookup("rms_norm", ("f32",) * 3, "cuda")
    case = gpu_check.sweep_case("rms_norm", ("f32",) * 3, "triton", big=False)
    ok, _, out = gpu_check.run_case(e, case)
    records = gpu_check.ledger_records(("rms_norm", ("f32",) * 3), e, case, out)
    assert ok and [r.claim for r in records] == ["bit_stable", "max_relative"]
    assert all(r.result == "pass" and r.backend == "cuda" for r in records)
    assert records[0].kernel == "rms_norm/triton" and records[1].measured is not None
    assert records[1].evidence["device"] == "stand-in"
    failed = gpu_check.ledger_records(("rms_norm", ("f32",) * 3), e, case, None)
    assert {r.result for r in failed} == {"fail"}
