"""The Judge: size classes, report persistence, oracles, the profiler, the CLI, DispatchTable."""

from __future__ import annotations

import io
import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from runtime import judge, judge_profile
from runtime.binding_table import KernelBindingTable
from runtime.judge import (
    PREFILL_BIT,
    REPORT_VERSION,
    Criterion,
    DispatchTable,
    HashMapJudge,
    ProfileEntry,
    ProfileJudgeOracle,
    ProfileReport,
    hardware_fingerprint,
    load_report,
    save_report,
    size_class,
    try_load_report,
)
from runtime.judge_profile import (
    Cell,
    JudgeError,
    Timing,
    default_ladder,
    run_judge,
)
from runtime.kernels import global_bindings
from tools.judge import ProgressBar, main

F32x3 = ("f32", "f32", "f32")
FAST = Timing(warmups=1, min_runs=3, cell_target_s=0.0)
ADD_LADDER = {"add": [Cell(((8, 8), (8, 8)), (8, 8))]}


def k_add(ins, outs, params):
    np.add(ins[0], ins[1], out=outs[0])


def k_add_wrong(ins, outs, params):
    np.add(ins[0], ins[1] + 1.0, out=outs[0])


def k_add_boom(ins, outs, params):
    raise RuntimeError("boom")


def k_add_f64(ins, outs, params):
    np.add(ins[0], ins[1], out=outs[0])


def k_add_slow(ins, outs, params):
    time.sleep(0.01)
    np.add(ins[0], ins[1], out=outs[0])


def _entry(**kw) -> ProfileEntry:
    base = dict(
        op="add",
        dtype="f32",
        size_class=6,
        backend="cpu",
        device="cpu",
        kernel_source="numpy",
        revision_hash=0,
        latency_ns=100.0,
        p10_ns=90.0,
        p90_ns=110.0,
        iterations=7,
        max_rel_error=0.0,
        shape=((8, 8), (8, 8)),
        dtypes=F32x3,
    )
    return ProfileEntry(**(base | kw))


def _report(*entries: ProfileEntry, fingerprint: str | None = None) -> ProfileReport:
    fp = hardware_fingerprint() if fingerprint is None else fingerprint
    return ProfileReport(fp, "2025-01-01T00:00:00+00:00", entries)


# -- size classes ---------------------------------------------------------------------------


def test_size_class_default_is_log2_of_first_input() -> None:
    assert size_class("softmax", [(32, 128)]) == 12
    assert size_class("add", [(3, 5), (3, 5)]) == 3  # floor(log2(15))
    assert size_class("add", []) == 0
    assert size_class("add", [(0, 4)]) == 0
    assert size_class("matmul", [(0, 4), (4, 4)]) == 0


def test_size_class_gemv_differs_from_square_with_same_output() -> None:
    gemv = size_class("matmul", [(1, 16), (16, 64)])  # 64 outputs
    square = size_class("matmul", [(8, 8), (8, 8)])  # 64 outputs
    assert gemv != square and gemv >> 16 == square >> 16 == 6
    assert gemv == 6 << 16 | 0 << 8 | 4


def test_size_class_matmul_folds_batch_into_m() -> None:
    assert size_class("matmul", [(2, 4, 8), (2, 8, 16)]) == size_class("matmul", [(8, 8), (8, 16)])
    assert size_class("matmul", [(4, 8), (3, 8, 16)]) == size_class("matmul", [(12, 8), (8, 16)])


def test_size_class_attention_decode_and_prefill_differ() -> None:
    kv = (1, 8, 128, 64)
    decode = size_class("attention", [(1, 32, 1, 64), kv, kv])
    prefill = size_class("attention", [(1, 32, 16, 64), kv, kv])
    assert decode == (_lg(32 * 128 * 64) << 16 | 7 << 8 | 6)
    assert prefill == decode | PREFILL_BIT
    longer = size_class("attention", [(1, 32, 1, 64), (1, 8, 4096, 64), (1, 8, 4096, 64)])
    assert longer != decode


def _lg(n: int) -> int:
    return n.bit_length() - 1


def test_default_ladder_cells_have_distinct_classes_and_decode_cells() -> None:
    ladder = default_ladder()
    for op, cells in ladder.items():
        classes = [size_class(op, c.inputs) for c in cells]
        assert len(set(classes)) == len(classes), op
        assert sum(c.tag != "decode" for c in cells) == 3, op
    gemvs = {c.label for c in ladder["matmul"] if c.tag == "decode"}
    assert "[1,2048]x[2048,8192]" in gemvs and "[1,512]x[512,512]" in gemvs
    assert {c.inputs[1][2] for c in ladder["attention"] if c.tag == "decode"} == {128, 4096}


# -- report persistence ---------------------------------------------------------------------


def test_report_round_trip(tmp_path: Path) -> None:
    skip = judge.SkippedCell("add", "f32", 6, "cpu", "broken", ((8, 8), (8, 8)), "boom")
    base = _report(_entry(), _entry(kernel_source="vendor", max_rel_error=None))
    report = ProfileReport(base.fingerprint, base.created, base.entries, (skip,), complete=False)
    path = save_report(report, tmp_path / "judge.json")
    assert load_report(path) == report
    assert len(path.read_text().splitlines()) == 13  # 2 entries + 1 skipped cell, one line each
    assert json.loads(path.read_text())["version"] == REPORT_VERSION


def test_atomic_save_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "judge.json"
    save_report(_report(_entry()), target)
    save_report(_report(_entry(latency_ns=5.0)), target)  # overwrite in place
    assert [p.name for p in target.parent.iterdir()] == ["judge.json"]
    assert load_report(target).entries[0].latency_ns == 5.0


def _corrupt(text: str) -> str:
    return text.replace('"entries"', '"entries_"')


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda t: t.replace(f'"version": {REPORT_VERSION}', '"version": 999'), "version 999"),
        (lambda t: "{not json", "corrupt JSON"),
        (lambda t: t[: len(t) // 2], "corrupt JSON"),
        (lambda t: "[1, 2]", "not a JSON object"),
        (_corrupt, "malformed"),
        (lambda t: t.replace('"size_class": 6', '"size_class": "x"'), "malformed"),
    ],
)
def test_bad_report_is_a_miss_not_an_error(tmp_path: Path, mutate, reason: str) -> None:
    path = save_report(_report(_entry()), tmp_path / "judge.json")
    path.write_text(mutate(path.read_text()))
    result = try_load_report(path)
    assert result.report is None and not result.hit and reason in result.reason
    assert load_report(path) is None


def test_missing_file_and_other_hardware_are_misses(tmp_path: Path) -> None:
    assert "no report" in try_load_report(tmp_path / "nope.json").reason
    path = save_report(_report(_entry(), fingerprint="Other-box | 128 cores"), tmp_path / "j.json")
    result = try_load_report(path)
    assert result.report is None and "Other-box" in result.reason


def test_undecodable_bytes_are_a_miss(tmp_path: Path) -> None:
    path = tmp_path / "judge.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    assert load_report(path) is None


def test_default_report_path_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FUEL_JUDGE_REPORT", str(tmp_path / "x.json"))
    assert judge.default_report_path() == tmp_path / "x.json"
    monkeypatch.delenv("FUEL_JUDGE_REPORT")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert judge.default_report_path() == tmp_path / "fuel" / "judge.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert judge.default_report_path() == tmp_path / "home" / ".cache" / "fuel" / "judge.json"


def test_fingerprint_is_stable_and_does_not_import_torch() -> None:
    had_torch = "torch" in sys.modules
    fp = hardware_fingerprint()
    assert fp == hardware_fingerprint() and "numpy" in fp and "cores" in fp
    assert had_torch or "torch" not in sys.modules


# -- oracles --------------------------------------------------------------------------------


def test_hash_map_judge_round_trip_and_distinctions() -> None:
    j = HashMapJudge()
    j.insert("matmul", "f32", 9, "cpu", "numpy", 100.0)
    j.insert("matmul", "f32", 9, "cpu", "vendor", 50.0)
    j.insert("matmul", "f32", 9, "cuda", "numpy", 7.0)
    assert j.measured_latency_ns("matmul", "f32", 9, "cpu", "numpy") == 100.0
    assert j.measured_latency_ns("matmul", "f32", 9, "cpu", "vendor") == 50.0
    assert j.measured_latency_ns("matmul", "f32", 9, "cuda", "numpy") == 7.0
    assert j.measured_latency_ns("matmul", "f32", 10, "cpu", "numpy") is None
    assert j.measured_latency_ns("matmul", "f16", 9, "cpu", "numpy") is None
    j.insert("matmul", "f32", 9, "cpu", "numpy", 300.0)  # last write wins
    assert j.measured_latency_ns("matmul", "f32", 9, "cpu", "numpy") == 300.0


def test_nearest_ties_go_to_the_larger_class() -> None:
    j = HashMapJudge()
    j.insert("add", "f32", 10, "cpu", "numpy", 1.0)
    j.insert("add", "f32", 14, "cpu", "numpy", 2.0)
    assert j.nearest("add", "f32", 12, "cpu", "numpy") == (14, 2.0)
    assert j.nearest("add", "f32", 11, "cpu", "numpy") == (10, 1.0)
    assert j.nearest("add", "f32", 12, "cpu", "vendor") is None


def test_nearest_compares_packed_classes_field_by_field() -> None:
    square, gemv = (
        size_class("matmul", [(64, 64)] * 2),
        size_class("matmul", [(1, 2048), (2048, 2048)]),
    )
    big_gemv = size_class("matmul", [(1, 4096), (4096, 4096)])
    assert judge.nearest_class(big_gemv, [square, gemv]) == gemv  # integer distance says square
    kv = (1, 8, 128, 64)
    decode = size_class("attention", [(1, 32, 1, 64), kv, kv])
    prefill = size_class("attention", [(1, 32, 64, 64), (1, 8, 64, 64), (1, 8, 64, 64)])
    long_decode = size_class("attention", [(1, 32, 1, 64), (1, 8, 8192, 64), (1, 8, 8192, 64)])
    assert judge.nearest_class(long_decode, [decode, prefill]) == decode


def _table_with(*kernels) -> KernelBindingTable:
    t = KernelBindingTable()
    for fn, source in kernels:
        t.register("add", F32x3, "cpu", fn, kernel_source=source)
    return t


def test_profile_oracle_ignores_stale_revisions_and_takes_min_over_devices() -> None:
    table = _table_with((k_add, "numpy"), (k_add_wrong, "vendor"))
    numpy_rev, vendor_rev = (
        e.revision_hash for e in table.lookup_alternatives("add", F32x3, "cpu")
    )
    report = _report(
        _entry(revision_hash=numpy_rev, device="cpu:0", latency_ns=300.0),
        _entry(revision_hash=numpy_rev, device="cpu:1", latency_ns=200.0),
        _entry(kernel_source="vendor", revision_hash=vendor_rev ^ 1, latency_ns=1.0),  # stale
    )
    oracle = ProfileJudgeOracle(report, table)
    assert oracle.measured_latency_ns("add", "f32", 6, "cpu", "numpy") == 200.0
    assert oracle.measured_latency_ns("add", "f32", 6, "cpu", "vendor") is None
    assert oracle.nearest("add", "f32", 20, "cpu", "numpy") == (6, 200.0)
    assert oracle.nearest("add", "f32", 20, "cpu", "vendor") is None
    assert DispatchTable.from_report(report, table).pick("add", "f32", 6).kernel_source == "numpy"


def test_profile_oracle_of_other_version_is_empty() -> None:
    table = _table_with((k_add, "numpy"))
    rev = table.lookup("add", F32x3, "cpu").revision_hash
    old = ProfileReport("fp", "t", (_entry(revision_hash=rev),), version=REPORT_VERSION - 1)
    assert len(ProfileJudgeOracle(old, table)) == 0
    assert len(ProfileJudgeOracle(_report(_entry(revision_hash=rev)), table)) == 1


def test_load_with_table_drops_stale_entries(tmp_path: Path) -> None:
    table = _table_with((k_add, "numpy"))
    rev = table.lookup("add", F32x3, "cpu").revision_hash
    path = save_report(_report(_entry(revision_hash=rev), _entry(size_class=7)), tmp_path / "j")
    result = try_load_report(path, table)
    assert result.hit and result.stale_dropped == 1 and len(result.report.entries) == 1


# -- the profiler ---------------------------------------------------------------------------


def test_run_judge_measures_every_sibling_and_its_error() -> None:
    table = _table_with((k_add, "numpy"), (k_add_wrong, "vendor"), (k_add_boom, "broken"))
    calls = []
    report = run_judge(table, progress=lambda *a: calls.append(a), ladder=ADD_LADDER, timing=FAST)
    by_source = {e.kernel_source: e for e in report.entries}
    assert set(by_source) == {"numpy", "vendor"} and report.complete
    good, bad = by_source["numpy"], by_source["vendor"]
    assert good.max_rel_error < 1e-6 and bad.max_rel_error > 0.1  # numpy reference (no f64 key)
    assert good.iterations >= 3 and good.p10_ns <= good.latency_ns <= good.p90_ns
    assert good.size_class == 6 and good.shape == ((8, 8), (8, 8)) and good.dtypes == F32x3
    assert good.revision_hash == table.lookup("add", F32x3, "cpu").revision_hash
    (skip,) = report.skipped
    assert skip.kernel_source == "broken" and skip.reason == "RuntimeError: boom"
    assert calls[0][:2] == (0, 1) and calls[-1][:2] == (1, 1) and "add f32 [8,8]" in calls[-1][3]


def test_run_judge_prefers_the_f64_sibling_over_the_numpy_reference() -> None:
    table = _table_with((k_add, "numpy"))
    table.register("add", ("f64",) * 3, "cpu", k_add_f64)
    assert run_judge(table, ladder=ADD_LADDER, timing=FAST).entries[0].max_rel_error < 1e-6
    off = _table_with((k_add, "numpy"))
    off.register("add", ("f64",) * 3, "cpu", k_add_wrong)  # a wrong reference shows up as error
    assert run_judge(off, ladder=ADD_LADDER, timing=FAST).entries[0].max_rel_error > 0.1


def test_run_judge_without_any_reference_records_none() -> None:
    table = KernelBindingTable()
    table.register("mystery", ("f32", "f32"), "cpu", lambda i, o, p: o[0].fill(1))
    cells = {"mystery": [Cell(((4,),), (4,))]}
    (e,) = run_judge(table, ladder=cells, timing=FAST).entries
    assert e.max_rel_error is None and e.kernel_source == ""


def test_run_judge_unwritten_output_scores_the_cap() -> None:
    table = _table_with((lambda i, o, p: None, "lazy"))
    (e,) = run_judge(table, ladder=ADD_LADDER, timing=FAST).entries
    assert e.max_rel_error == judge_profile.ERROR_CAP


def test_run_judge_respects_budget() -> None:
    table = _table_with((k_add_slow, "slow"))
    ladder = {"add": [Cell(((n, 4), (n, 4)), (n, 4)) for n in (2, 4, 8, 16, 32, 64)]}
    t0 = time.perf_counter()
    report = run_judge(table, budget_s=0.05, ladder=ladder, timing=FAST)
    assert time.perf_counter() - t0 < 0.5
    assert not report.complete and 1 <= len(report.entries) < 6


def test_budget_cuts_a_slow_kernels_timing_short() -> None:
    table = _table_with((k_add_slow, "slow"))
    t0 = time.perf_counter()
    report = run_judge(table, budget_s=0.03, ladder=ADD_LADDER, timing=Timing(0, 50, 0.0))
    assert time.perf_counter() - t0 < 0.3 and report.entries[0].iterations < 50


def test_malformed_cell_is_skipped() -> None:
    report = run_judge(_table_with((k_add, "numpy")), ladder={"add": [Cell(((-1,), (-1,)), (1,))]})
    assert report.entries == () and "cannot build inputs" in report.skipped[0].reason


def test_run_judge_rejects_unknown_ops_and_dtypes_and_skips_missing_keys() -> None:
    table = _table_with((k_add, "numpy"))
    with pytest.raises(JudgeError, match="unknown op.*bogus"):
        run_judge(table, ops=["bogus"], ladder=ADD_LADDER)
    with pytest.raises(JudgeError, match="unknown dtype.*f33"):
        run_judge(table, dtypes=["f33"], ladder=ADD_LADDER)
    report = run_judge(table, dtypes=["f16"], ladder=ADD_LADDER, timing=FAST)
    assert report.entries == () and "no kernel at (add, [f16, f16, f16], cpu)" in (
        report.skipped[0].reason
    )


def test_numpy_references_agree_with_the_global_f64_kernels() -> None:
    table = global_bindings()
    for op, cells in default_ladder().items():
        cell = cells[0]
        rng = np.random.default_rng(0)
        lo = 0.5 if op in judge_profile._POSITIVE_INPUTS else -2.0
        xs = [rng.uniform(lo, 2.0, s) for s in cell.inputs]
        out = np.full(cell.output, np.nan)
        table.lookup(op, ("f64",) * (len(xs) + 1), "cpu").kernel(xs, [out], cell.params)
        assert (
            judge_profile.max_rel_error(out, judge_profile.NUMPY_REFERENCES[op](xs, cell.params))
            < 1e-10
        ), op


# -- the CLI --------------------------------------------------------------------------------

TINY = {
    "matmul": [Cell(((4, 8), (8, 4)), (4, 4)), Cell(((1, 8), (8, 8)), (1, 8), tag="decode")],
    "softmax": [Cell(((4, 16),), (4, 16), {"axis": 1})],
}


def test_cli_writes_a_report(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(judge_profile, "default_ladder", lambda: TINY)
    out = tmp_path / "judge.json"
    assert main(["judge", "--ops", "matmul,softmax", "--out", str(out)]) == 0
    table = global_bindings()
    report = load_report(out, table)
    # every sibling of every cell is timed: one entry per (cell, sibling)
    cells = {"matmul": 2, "softmax": 1}  # TINY's cells per op (f32)
    expected = sum(
        n * len(table.lookup_alternatives(op, d, "cpu"))
        for op, n, d in (
            ("matmul", cells["matmul"], ("f32",) * 3),
            ("softmax", cells["softmax"], ("f32",) * 2),
        )
    )
    assert report is not None and len(report.entries) == expected and report.complete
    stdout, stderr = capsys.readouterr()
    assert "[1,8]x[8,8]" in stdout and "max rel err" in stdout and str(out) in stdout
    assert "3/3" in stderr  # progress counts cells
    assert "\r" not in stderr  # captured stderr is not a TTY


def test_cli_rejects_unknown_op_and_dtype(tmp_path: Path, capsys) -> None:
    assert main(["judge", "--ops", "matmul,bogus", "--out", str(tmp_path / "j")]) == 1
    assert main(["judge", "--dtypes", "f33", "--out", str(tmp_path / "j")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "unknown op(s) bogus" in err[0] and "unknown dtype(s) f33" in err[1]
    assert not (tmp_path / "j").exists()


def test_progress_bar_overwrites_on_a_tty() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    bar = ProgressBar(stream)
    bar(1, 4, 3.0, "matmul f32 [4,4]")
    bar(2, 4, 2.0, "softmax f32 [4,4]")
    bar.close()
    text = stream.getvalue()
    assert text.count("\r") == 2 and "2/4" in text and "eta 2s" in text and text.endswith("\n")


# -- DispatchTable --------------------------------------------------------------------------


def test_dispatch_table_criteria() -> None:
    report = _report(
        _entry(kernel_source="fast", latency_ns=100.0, max_rel_error=0.1),
        _entry(kernel_source="exact_slow", latency_ns=300.0, max_rel_error=0.0),
        _entry(kernel_source="exact_slower", latency_ns=400.0, max_rel_error=0.0),
        _entry(kernel_source="middle", latency_ns=150.0, max_rel_error=1e-3),
        _entry(kernel_source="unchecked", latency_ns=120.0, max_rel_error=None),
    )
    dt = DispatchTable.from_report(report)
    assert dt.pick("add", "f32", 6, Criterion.FASTEST).kernel_source == "fast"
    assert dt.pick("add", "f32", 6, Criterion.MOST_ACCURATE).kernel_source == "exact_slow"
    assert dt.pick("add", "f32", 6, Criterion.BALANCED).kernel_source == "middle"  # 165 < 300
    assert dt.pick("add", "f32", 7) is None and dt.pick("mul", "f32", 6) is None


def test_dispatch_table_pick_nearest() -> None:
    report = _report(
        _entry(size_class=10, kernel_source="a"), _entry(size_class=14, kernel_source="b")
    )
    dt = DispatchTable.from_report(report)
    assert dt.pick_nearest("add", "f32", 10).kernel_source == "a"
    tie = dt.pick_nearest("add", "f32", 12)
    assert tie.kernel_source == "b" and tie.size_class == 14  # ties go to the larger class
    assert dt.pick_nearest("add", "f32", 11).size_class == 10
    assert dt.pick_nearest("add", "f16", 11) is None
