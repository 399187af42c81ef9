"""`fuel explain`: why the planner put each op where it did, as text or as one HTML page.

    fuel explain MODULE.mlir [--topology FILE] [--judge PATH|none] [--precision SPEC]
                 [--html OUT.html] [--op N]

The views are `tools/explain_text.py` (the plan's model and the terminal text) and
`tools/explain_html.py` (one self-contained page). The planner's options come from the same
flags as the picker passes (passes/picker/support.py). Every user error is one message on
stderr, exit 1, through the boundary (tools/errors.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xdsl.utils.exceptions import PassFailedException

from passes.optimize import (
    DecodeFlashPathfinder,
    FrontierConvergenceOptimizer,
    FusePatternsPathfinder,
    PassRegistry,
    optimize_graph,
)
from passes.picker.plan import PlanOptions, compile_plan, topology_kernels
from passes.picker.ranker import PrecisionRequirement
from passes.picker.support import PickerOptions
from runtime.bundle import is_bundle
from runtime.fsutil import atomic_write_text
from runtime.judge import ProfileJudgeOracle, default_report_path, try_load_report
from runtime.kernels import global_bindings
from runtime.module import FuelModule, read_ir_text
from runtime.topology import SystemTopology
from runtime.topology_file import load_file
from tools.errors import ArgumentParser, run_parser
from tools.explain_bundle import explain_bundle
from tools.explain_html import explain_html
from tools.explain_text import ExplainError, explain_text
from tools.import_onnx import add_input_shape_flag, load_any


def add_explain_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `explain` subcommand to an `add_subparsers()` object; it dispatches to
    cmd_explain."""
    p = subparsers.add_parser("explain", help="show why each op got its device and kernel")
    p.add_argument(
        "module",
        help="fuel IR file (.mlir; weights are not needed), an ONNX model (.onnx: imported as "
        "fuel compile imports it), or a kernel bundle (its plan, from the picker record it "
        "carries)",
    )
    add_input_shape_flag(p)
    p.add_argument("--topology", help="declared topology (TOML/JSON; default: detect)")
    p.add_argument("--judge", default="", help="Judge report path, or 'none' (default: cached)")
    p.add_argument("--precision", default="", help="precision floor, e.g. bit_stable,ulp=2")
    p.add_argument("--html", metavar="OUT.html", help="write a self-contained HTML page")
    p.add_argument("--op", type=int, metavar="N", help="show only decision point N (from 0)")
    p.add_argument(
        "--no-optimize",
        action="store_true",
        help="explain the graph as written, before fuel-optimize's rewrites (default: the "
        "optimized plan, as fuel compile builds it)",
    )
    p.set_defaults(fn=cmd_explain)
    return p


_REWRITES = PassRegistry(
    [DecodeFlashPathfinder(), FusePatternsPathfinder()], [FrontierConvergenceOptimizer()]
)
"""fuel-optimize's rewrites (fused ops, decode-flash variants, baked as fuel compile bakes
them) without its placement forks: the explained plan places each op on its planned device;
a bundle resolves the forks it carries at run time."""


def _judge(spec: str) -> tuple[Any, str]:
    """(oracle or None, header label) for `--judge`, as the picker passes read it."""
    if spec == "none":
        return None, "none (disabled by --judge none)"
    path = spec or default_report_path()
    loaded = try_load_report(path)
    if loaded.report is None:
        return None, f"none ({loaded.reason})"
    oracle = ProfileJudgeOracle(loaded.report, global_bindings())
    return oracle, f"{path} ({len(loaded.report.entries)} measurements)"


def _plan_options(args: argparse.Namespace) -> tuple[PlanOptions, str]:
    try:
        req = PrecisionRequirement.parse(args.precision or "")
    except ValueError as e:
        raise ExplainError(f"--precision: {e}") from None
    topo = load_file(args.topology) if args.topology else SystemTopology.detect()
    topology_kernels(topo)  # the cuda kernels join the table before the Judge's snapshot
    oracle, label = _judge(args.judge or "")
    return PlanOptions(topology=topo, precision=req, judge=oracle), label


def _load(args: argparse.Namespace) -> FuelModule:
    """An ONNX model imported (`--input-shape`, `--dim` as in fuel compile), else fuel IR
    parsed without its weights (the plan needs shapes, not values)."""
    if Path(args.module).suffix.lower() == ".onnx":
        return load_any(args.module, None, args.input_shape, args.dim)
    if args.input_shape or args.dim:
        raise ExplainError("--input-shape and --dim apply to ONNX models")
    return FuelModule.parse(read_ir_text(Path(args.module)), args.module)


def cmd_explain(args: argparse.Namespace) -> int:
    """Run `fuel explain` for parsed arguments (errors go to the caller's boundary)."""
    if is_bundle(args.module):
        if args.html or args.topology or args.judge or args.precision or args.no_optimize:
            raise ExplainError(
                "--html, --topology, --judge, --precision and --no-optimize apply to IR; a "
                "bundle is explained from the picker record it was compiled with"
            )
        sys.stdout.write(explain_bundle(Path(args.module), args.op))
        return 0
    module = _load(args)
    options, label = _plan_options(args)  # bad flags fail before any work
    if not args.no_optimize:  # the plan fuel compile builds: fused ops, baked variants
        picker = PickerOptions(args.topology or "", args.precision or "", args.judge or "")
        try:
            optimize_graph(module.op, picker, _REWRITES)
        except PassFailedException as e:
            raise ExplainError(str(e)) from None
    plan = compile_plan(module.op, options)
    if args.html:
        page = explain_html(plan, args.module, options, judge_label=label, op_index=args.op)
        try:
            atomic_write_text(args.html, page)
        except OSError as e:
            raise ExplainError(f"cannot write {args.html}: {e.strerror}") from None
        print(f"fuel explain: wrote {args.html} ({len(plan.decisions)} decision points)")
    else:
        sys.stdout.write(
            explain_text(plan, args.module, options, judge_label=label, op_index=args.op)
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """A standalone `fuel`-style entry point holding just the explain subcommand."""
    parser = ArgumentParser(prog="fuel")
    add_explain_parser(parser.add_subparsers(dest="command", required=True))
    return run_parser("fuel", parser, argv)


if __name__ == "__main__":
    sys.exit(main())
