"""Seeing inside a compile: stages and observers (`passes.instrument`), `fuel compile
--dump-dir` / `--time-passes`, `FUEL_LOG`, and the progress bar of a long compile."""

from __future__ import annotations

import io
import json
import logging
import sys
import time
from pathlib import Path

import pytest

from frontends.builder import GraphBuilder
from lowering.bundle import compile_module
from passes.instrument import (
    LOGGER,
    Stage,
    StageObserver,
    TimingObserver,
    apply_fuel_log,
    expect,
    instrumented,
    run_stage,
    stage,
)
from runtime import native
from runtime.bundle import read_container
from runtime.module import FuelModule
from tools.fuel import main as fuel_main
from tools.stages import Progress


class Recorder(StageObserver):
    def __init__(self) -> None:
        self.events: list[tuple[str, tuple[str, ...], object]] = []
        self.expected = 0

    def expect(self, count: int) -> None:
        self.expected += count

    def started(self, stage: Stage) -> None:
        self.events.append(("start", stage.path, stage.product))

    def finished(self, stage: Stage) -> None:
        self.events.append(("end", stage.path, stage.product))


def test_stages_nest_and_report_their_products() -> None:
    rec = Recorder()
    with instrumented(rec):
        expect(2)
        with stage("outer", "module") as outer:
            assert run_stage("inner", lambda p, k: p + k, 1, 2) == 3
        assert outer.children == 1 and outer.seconds > 0
    assert rec.expected == 2
    assert rec.events == [
        ("start", ("outer",), "module"),
        ("start", ("outer", "inner"), 1),
        ("end", ("outer", "inner"), 3),
        ("end", ("outer",), "module"),
    ]
    with stage("unobserved"):  # outside `instrumented`: nobody is told
        pass
    assert len(rec.events) == 4


def test_a_failing_stage_is_not_reported_finished() -> None:
    rec = Recorder()
    with instrumented(rec), pytest.raises(ZeroDivisionError), stage("bad"):
        1 / 0  # noqa: B018
    assert rec.events == [("start", ("bad",), None)]


def test_timing_report_adds_up_repeats_in_first_run_order() -> None:
    timing = TimingObserver()
    with instrumented(timing):
        for name in ("a", "b", "a"):
            with stage(name), stage("child"):
                time.sleep(0.001)
    rows = [line.split(")  ", 1)[1] for line in timing.report().splitlines() if "%)  " in line]
    assert rows == ["a (2)", "  child (2)", "b", "  child", "Total"]


def _elementwise() -> FuelModule:
    g = GraphBuilder(seed=0)
    x = g.input("x", (16, 32))
    y = g.relu(g.add(g.exp(x), g.matmul(x, g.weight("w", (32, 32)))))
    return g.build(outputs={"y": y})


@pytest.mark.skipif(not native.enabled(), reason="generated C needs a C compiler")
def test_compile_dump_dir_holds_each_stage_the_c_sources_and_the_picker_record(
    tmp_path: Path, capsys
) -> None:
    src = _elementwise().save(tmp_path / "m.mlir")
    dump, out = tmp_path / "dump", tmp_path / "m.fuelbundle"
    args = ["compile", str(src), "-o", str(out), "--dump-dir", str(dump), "--time-passes"]
    assert fuel_main(args) == 0
    names = sorted(p.name for p in dump.iterdir())
    assert names[0] == "00-load.mlir" and "03-fuel-canonicalize.mlir" not in names
    for stem in ("fuel-fix-dtypes", "fuel-fuse-patterns", "picked", "cpu-stamp", "cpu-codegen"):
        assert any(n.endswith(f"-{stem}.mlir") for n in names), stem
    [codegen] = dump.glob("*-cpu-codegen.mlir")
    assert "fuel.c_kernel @c_fused_0" in codegen.read_text()
    [artifacts] = dump.glob("*-cpu-artifacts")
    assert "void c_fused_0(void **args)" in (artifacts / "c" / "c_fused_0.c").read_text()
    index = json.loads((artifacts / "artifacts.json").read_text())
    assert {"c/c_fused_0.c", "c/c_fused_0.so"} <= set(
        next(k for k in index if k["id"] == "c/c_fused_0")["files"]
    )
    assert not (artifacts / "c" / "c_fused_0.so").exists()  # binaries listed, not copied
    [record] = dump.glob("*-picker-record.json")
    assert json.loads(record.read_text()) == json.loads(read_container(out)["picker.json"])
    err = capsys.readouterr().err
    assert "Execution time report" in err and "\n    " in err and "cpu-optimize" in err


def test_fuel_log_info_logs_each_stage_time(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("FUEL_LOG", "info")
    try:
        compile_module(_elementwise(), {"codegen": "none"})
        err = capsys.readouterr().err
        assert "fuel: INFO: fuel-fuse-patterns (cpu-optimize): " in err and " ms\n" in err
        assert "fuel: INFO: cpu-stamp: " in err and "DEBUG" not in err
        monkeypatch.setenv("FUEL_LOG", "debug")
        compile_module(_elementwise(), {"codegen": "none"})
        assert "fuel: DEBUG: cpu-stamp ..." in capsys.readouterr().err
    finally:
        monkeypatch.delenv("FUEL_LOG")
        apply_fuel_log()  # unset again: fuel's handler goes, the logger is the app's again
    assert not LOGGER.handlers and LOGGER.level == logging.NOTSET
    compile_module(_elementwise(), {"codegen": "none"})
    assert "fuel:" not in capsys.readouterr().err


def test_fuel_log_refuses_an_unknown_level(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUEL_LOG", "loud")
    with pytest.raises(ValueError, match="FUEL_LOG must be one of debug, info, warning"):
        apply_fuel_log()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _stages_under(progress: Progress) -> None:
    with instrumented(progress):
        expect(2)
        with stage("cpu-optimize"):
            with stage("fuel-fuse-patterns"):
                time.sleep(0.01)
        with stage("cpu-stamp"):
            pass
    progress.close()


def test_progress_bar_shows_the_stage_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", _Terminal())
    _stages_under(Progress(delay=0))
    shown = sys.stderr.getvalue()
    assert "cpu-optimize > fuel-fuse-patterns" in shown and "stages" in shown


def test_progress_bar_stays_silent_for_a_short_compile_or_off_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stderr", _Terminal())
    _stages_under(Progress())  # done well within the 2 s delay
    assert sys.stderr.getvalue() == ""
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # a pipe, a log file
    _stages_under(Progress(delay=0))
    assert sys.stderr.getvalue() == ""
