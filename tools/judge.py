"""`fuel judge`: run the Judge on this machine and save its report.

    fuel judge [--ops matmul,softmax,...] [--dtypes f32,f16] [--budget-s N] [--out PATH]

Progress goes to stderr (one overwritten line on a terminal, periodic plain lines otherwise);
the summary table and the saved path go to stdout. A bad argument is a `JudgeError`, one line
on stderr and exit code 1 through the boundary (tools/errors.py).
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from runtime import judge, judge_profile
from runtime.judge import ProfileReport
from runtime.judge_profile import JudgeError, format_shapes
from runtime.kernels import global_bindings
from tools.errors import ArgumentParser, describe, run_parser


def add_judge_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `judge` subcommand to an `add_subparsers()` object; it dispatches to cmd_judge."""
    p = subparsers.add_parser("judge", help="profile every kernel sibling on this machine")
    p.add_argument("--ops", help="comma-separated ops to profile (default: all profiled ops)")
    p.add_argument("--dtypes", default="f32", help="comma-separated dtypes (default: f32)")
    p.add_argument("--budget-s", type=float, help="stop after N seconds, keeping what was measured")
    p.add_argument("--out", help=f"report path (default: {judge.default_report_path()})")
    p.set_defaults(fn=cmd_judge)
    return p


def _fmt_s(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    return f"{seconds:.0f}s" if seconds < 120 else f"{seconds / 60:.1f}min"


class ProgressBar:
    """A `run_judge` progress callback: `\\r`-overwritten on a TTY, plain lines every
    `interval_s` otherwise (logs and CI capture keep one line per update)."""

    def __init__(self, stream: TextIO = sys.stderr, interval_s: float = 5.0, width: int = 24):
        self.stream, self.interval_s, self.width = stream, interval_s, width
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.done = self.total = 0
        self._last_emit = -math.inf
        self._dirty = False

    def __call__(self, done: int, total: int, eta_s: float, label: str) -> None:
        self.done, self.total = done, total
        frac = done / total if total else 1.0
        filled = round(frac * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        line = f"judge [{bar}] {done}/{total} {frac:4.0%} eta {_fmt_s(eta_s)}  {label}"
        if self.tty:
            cols = shutil.get_terminal_size().columns - 1
            self.stream.write("\r" + line[:cols].ljust(cols))
            self._dirty = True
        elif done == total or time.monotonic() - self._last_emit >= self.interval_s:
            self.stream.write(line.rstrip() + "\n")
            self._last_emit = time.monotonic()
        self.stream.flush()

    def close(self) -> None:
        """End the overwritten line so later output starts on a fresh one."""
        if self._dirty:
            self.stream.write("\n")
            self.stream.flush()
            self._dirty = False


def _fmt_class(sc: int) -> str:
    return f"{sc:#x}" if sc > 0xFFFF else str(sc)  # packed classes read best by field


def _fmt_err(err: float | None) -> str:
    return "-" if err is None else f"{err:.2e}"


def summary_table(report: ProfileReport) -> str:
    """One row per measured sibling: op, dtype, size class, shape, source, median, error."""
    header = ("op", "dtype", "size class", "shape", "kernel_source", "median µs", "max rel err")
    rows = [
        (
            e.op,
            e.dtype,
            _fmt_class(e.size_class),
            format_shapes(e.shape),
            e.kernel_source or "-",
            f"{e.latency_ns / 1e3:.1f}",
            _fmt_err(e.max_rel_error),
        )
        for e in sorted(report.entries, key=lambda e: (e.op, e.dtype, e.size_class, e.latency_ns))
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    numeric = {5, 6}  # right-align the number columns
    lines = [
        "  ".join(
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in [header, *rows]
    ]
    return "\n".join(lines)


def _split(csv: str | None) -> list[str] | None:
    if csv is None:
        return None
    return [x.strip() for x in csv.split(",") if x.strip()]


def _run(args: argparse.Namespace) -> int:
    if args.budget_s is not None and not args.budget_s > 0:  # NaN too
        raise JudgeError(f"--budget-s must be positive, got {args.budget_s:g}")
    ops, dtypes = _split(args.ops), _split(args.dtypes) or []
    if not dtypes:
        raise JudgeError("--dtypes is empty")
    bar = ProgressBar(sys.stderr)
    start = time.perf_counter()
    try:
        report = judge_profile.run_judge(
            global_bindings(), ops, dtypes, args.budget_s, progress=bar
        )
    finally:
        bar.close()
    wall = time.perf_counter() - start
    try:
        path = judge.save_report(report, args.out)
    except OSError as e:  # an unwritable --out: the measurements are lost, say where it failed
        raise JudgeError(f"cannot save the report: {describe(e)}") from None
    print(summary_table(report))
    for s in report.skipped:
        print(f"skipped {s.op} {s.dtype} {format_shapes(s.shape)} {s.kernel_source}: {s.reason}")
    if not report.complete:
        print(f"budget exhausted: measured {bar.done} of {bar.total} cells")
    print(f"judge: {len(report.entries)} measurements in {wall:.1f}s, saved to {path}")
    return 0


def cmd_judge(args: argparse.Namespace) -> int:
    """Run the Judge for the parsed `fuel judge` arguments."""
    return _run(args)


def main(argv: Sequence[str] | None = None) -> int:
    """A standalone `fuel`-style entry point holding just the judge subcommand."""
    parser = ArgumentParser(prog="fuel")
    add_judge_parser(parser.add_subparsers(dest="command", required=True))
    return run_parser("fuel", parser, argv)


if __name__ == "__main__":
    sys.exit(main())
