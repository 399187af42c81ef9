"""`fuel explain`: why the planner put each op where it did, as text or as one HTML page.

    fuel explain MODULE.mlir [--topology FILE] [--judge PATH|none] [--precision SPEC]
                 [--html OUT.html] [--op N]

The views are `tools/explain_text.py` (the plan's model and the terminal text) and
`tools/explain_html.py` (one self-contained page). The planner's options come from the same
flags as the picker passes (passes/picker/support.py). Every user error is one message on
stderr, exit 1.
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
from passes.picker.plan import PlanError, PlanOptions, compile_plan, topology_kernels
from passes.picker.ranker import PrecisionRequirement
from passes.picker.support import PickerOptions
from runtime.binding_table import BindingTableError
from runtime.bundle import BundleError, is_bundle
from runtime.fsutil import atomic_write_text
from runtime.judge import ProfileJudgeOracle, default_report_path, try_load_report
from runtime.kernels import global_bindings
from runtime.module import FuelModule, ModuleError
from runtime.topology import SystemTopology, TopologyError
from runtime.topology_file import load_file
from tools.explain_bundle import explain_bundle
from tools.explain_html import explain_html
from tools.explain_text import ExplainError, explain_text


def add_explain_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `explain` subcommand to an `add_subparsers()` object; it dispatches to
    cmd_explain."""
    p = subparsers.add_parser("explain", help="show why each op got its device and kernel")
    p.add_argument(
        "module",
        help="fuel IR file (.mlir; weights are not needed), or a kernel bundle (its plan, "
        "from the picker record it carries)",
    )
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


def _run(args: argparse.Namespace) -> int:
    if is_bundle(args.module):
        if args.html or args.topology or args.judge or args.precision or args.no_optimize:
            raise ExplainError(
                "--html, --topology, --judge and --precision apply to IR; a bundle is "
                "explained from the picker record it was compiled with"
            )
        sys.stdout.write(explain_bundle(Path(args.module), args.op))
        return 0
    try:
        text = Path(args.module).read_text(encoding="utf-8")
    except OSError as e:
        raise ModuleError(f"cannot read {args.module}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ModuleError(f"cannot read {args.module}: not UTF-8 text ({e.reason})") from None
    module = FuelModule.parse(text, args.module)  # explain needs no weights
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
        atomic_write_text(args.html, page)
        print(f"fuel explain: wrote {args.html} ({len(plan.decisions)} decision points)")
    else:
        sys.stdout.write(
            explain_text(plan, args.module, options, judge_label=label, op_index=args.op)
        )
    return 0


def _one_message(msg: str) -> str:
    """xDSL parse errors read `file:line:col`, the source line, a caret, the message; lead
    with `file:line:col: message` and keep the snippet below it."""
    lines = msg.rstrip().splitlines()
    if len(lines) >= 3 and lines[0].count(":") >= 2 and "^" in lines[-2]:
        return f"{lines[0]}: {lines[-1].strip()}\n" + "\n".join(lines[1:-1])
    return msg.rstrip()


def cmd_explain(args: argparse.Namespace) -> int:
    """Run `fuel explain` for parsed arguments; every user error is one message and exit 1."""
    try:
        return _run(args)
    except (
        ExplainError,
        ModuleError,
        TopologyError,
        PlanError,
        BindingTableError,
        BundleError,
    ) as e:
        print(f"fuel: error: {_one_message(str(e))}", file=sys.stderr)
    except OSError as e:  # an unwritable --html
        print(f"fuel: error: cannot write {args.html}: {e.strerror}", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """A standalone `fuel`-style entry point holding just the explain subcommand."""
    parser = argparse.ArgumentParser(prog="fuel")
    add_explain_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
