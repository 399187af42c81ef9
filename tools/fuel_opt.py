"""`fuel-opt`: parse fuel IR, run a `-p` pipeline (verifying after each pass), print.

    fuel-opt model.mlir -p cse,canonicalize --print-ir-after-all
    fuel-opt model.mlir -p fuel-optimize --dump-dir dump/ --time-passes -t fuel-c
    cat model.mlir | fuel-opt - -p fuel-optimize -t fuel-bundle -o m.fuelbundle

What an mlir-opt user expects: `-` (or no file) reads stdin; `--print-ir-after-all` and
`--print-ir-before-all` dump around each pass and around each stage inside one (fuel-optimize's
stages, `passes.instrument`); `--print-between-passes` prints the IR between passes on stdout
(xDSL's); `--dump-dir DIR` writes `00-parse.mlir` then one numbered file per pass and stage;
`--time-passes` prints MLIR's execution time report (parse, each pass and its stages, verify,
output) on stderr; `-t` picks an output target (`tools.targets`: mlir, fuel-c, fuel-triton,
fuel-bundle); `--verify-diagnostics` checks `expected-error` designators as mlir-opt does
(`tools.expected_diagnostics`). `FUEL_LOG=info` logs each stage's time.

Errors go through the boundary of every fuel tool (tools/errors.py): `fuel-opt: error: ...` and
exit 1 for a bad input (a verifier error says `file:line:col` of the op at fault), exit 2 for a
bug; `--verbose` adds the traceback.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, cast

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.arg_spec import parse_spec
from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException
from xdsl.utils.target import Target
from xdsl.xdsl_opt_main import xDSLOptMain

from fuel_dialect.dialect import Fuel
from lowering import LOWERING_PASSES
from passes import get_all_passes, lazy_pass
from passes.instrument import stage
from runtime.ir_locations import PARSER_FAILURES, LocatingParser, SourceMap, locate
from tools import expected_diagnostics as ed
from tools.errors import CliError, UsageError, add_verbose, route_usage_errors, run_guarded
from tools.stages import IrPrinter, compile_view

if TYPE_CHECKING:
    from tools.targets import BundleTarget

BUNDLE = "fuel-bundle"
FUEL_TARGETS = {"fuel-c": "CTarget", "fuel-triton": "TritonTarget", BUNDLE: "BundleTarget"}
"""fuel's `-t` targets: name -> class in `tools.targets`, imported when asked for (it imports
the runtime and the backends: fuel-opt starts without them)."""
XDSL_TARGETS_FOR_FUEL = ("mlir",)
"""xDSL's targets that print fuel IR (the others print only their own dialects)."""


def target_class(name: str) -> Callable[[], type[Target]]:
    """The factory of fuel target `name`, as xDSL's `available_targets` holds them."""

    def load() -> type[Target]:  # xDSL tells a target factory by its empty signature
        import importlib

        return getattr(importlib.import_module("tools.targets"), FUEL_TARGETS[name])

    return load


class FuelOptMain(xDSLOptMain):
    """xdsl-opt with the fuel dialect, fuel's passes and targets, each pass a stage that
    `--dump-dir`, `--time-passes` and the IR dumps see (see the module doc), and verifier
    errors located at the op at fault (`file:line:col`)."""

    version_format = "fuel-opt, built on xDSL {xdsl_version}"
    source: SourceMap | None = None
    """Where the ops of the chunk being processed were parsed from."""
    _line_offset = 0

    def __init__(self, args: Sequence[str] | None = None):
        super().__init__(description="fuel modular optimizer driver", args=args)

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        self.ctx.register_dialect("fuel", lambda: Fuel)

    def register_all_frontends(self) -> None:
        super().register_all_frontends()
        self.available_frontends["mlir"] = self._parse_mlir

    def register_all_targets(self) -> None:
        super().register_all_targets()
        xdsl = {k: v for k, v in self.available_targets.items() if k in XDSL_TARGETS_FOR_FUEL}
        fuel = {name: target_class(name) for name in FUEL_TARGETS}
        self.available_targets = {**xdsl, **fuel}

    def register_all_passes(self) -> None:
        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)
        for name, (module, cls) in LOWERING_PASSES.items():
            self.register_pass(name, lazy_pass(module, cls))

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.prog = "fuel-opt"
        route_usage_errors(arg_parser)
        arg_parser.add_argument(
            "--print-ir-before-all", action="store_true", help="print the IR before each pass"
        )
        arg_parser.add_argument(
            "--print-ir-after-all", action="store_true", help="print the IR after each pass"
        )
        arg_parser.add_argument(
            "--dump-dir",
            metavar="DIR",
            help="write the parsed input and the IR after each pass and stage to DIR as "
            "numbered files (00-parse.mlir, 01-fuel-fix-dtypes.mlir, ...)",
        )
        add_verbose(arg_parser)

    def prepare_input(self) -> tuple[list[tuple[IO[bytes], int]], str]:
        try:
            return super().prepare_input()
        except ValueError as e:  # xDSL: no frontend for the file's extension
            name = self.get_input_name()
            raise CliError(f"{name}: {e} (fuel-opt reads .mlir files; -f mlir reads any)") from None

    def parse_chunk(
        self, chunk: IO[bytes], file_extension: str, start_offset: int = 0
    ) -> ModuleOp | None:
        self._line_offset = start_offset  # --split-input-file: the chunk's first line
        with stage("parse") as s:
            s.product = super().parse_chunk(chunk, file_extension, start_offset)
        return s.product

    def _parse_mlir(self, stream: IO[bytes]) -> ModuleOp:
        """Read bytes, decode them (a clear error naming the file if they are not UTF-8) and
        parse them, remembering where each op starts."""
        name = self.get_input_name()
        try:
            text = stream.read().decode("utf-8")
        except UnicodeDecodeError as e:
            raise CliError(f"{name}: not UTF-8 text (byte {e.start} is invalid)") from None
        return self._parse_text(text, self._line_offset)

    def _parse_text(self, text: str, line_offset: int) -> ModuleOp:
        """Parse `text` (`line_offset` lines into the input), remembering where each op
        starts (`self.source`); errors the parser raises without a place are located."""
        parser = LocatingParser(self.ctx, text, self.get_input_name())
        parser.source.line_offset = line_offset
        self.source = parser.source
        try:
            return parser.parse_module(not self.args.no_implicit_module)
        except DiagnosticException as e:  # an attribute's verifier: located, still a
            raise type(e)(parser.failure(e)) from None  # diagnostic (--verify-diagnostics)
        except PARSER_FAILURES as e:
            raise CliError(parser.failure(e)) from None

    def _verify(self, module: ModuleOp) -> None:
        """`module.verify()`, its error prefixed with `file:line:col:` of the op at fault."""
        try:
            module.verify()
        except DiagnosticException as e:
            if self.source is None:
                raise
            located = VerifyException(locate(self.source, module, e))
            for note in getattr(e, "__notes__", []):
                located.add_note(note)
            raise located from None
        except RecursionError:
            raise CliError(f"{self.get_input_name()}: nested too deeply") from None

    def setup_pipeline(self) -> None:
        def dump(when: str, p: ModulePass, module: ModuleOp) -> None:
            print(f"// -----// IR Dump {when} {p.name} //----- //", file=sys.stderr)
            Printer(stream=sys.stderr).print_op(module)
            print("\n", file=sys.stderr)

        def callback(prev: ModulePass | None, module: ModuleOp, nxt: ModulePass | None) -> None:
            if not self.args.disable_verify:
                self._verify(module)  # the parsed input too (prev is None), as xdsl-opt does
            if prev is not None and self.args.print_ir_after_all:
                dump("After", prev, module)
            if nxt is not None and self.args.print_ir_before_all:
                dump("Before", nxt, module)

        try:
            self.pipeline = PassPipeline.parse_spec(
                self.available_passes, self.args.passes, callback
            )
        except ValueError as e:  # an unknown pass, an option of the wrong type or name
            raise UsageError(f"-p '{self.args.passes}': {e}") from None

    # -- input: `-` is stdin, read once (the verify-diagnostics check reads it first) ---------

    _input: bytes | None = None

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        name = self.args.input_file
        stdin = name in (None, "-")
        if self._input is None:
            if stdin:
                self._input = sys.stdin.buffer.read()
            else:
                with open(name, "rb") as f:
                    self._input = f.read()
        extension = "mlir" if stdin else os.path.splitext(name)[1].removeprefix(".")
        return io.BytesIO(self._input), extension

    def get_input_name(self) -> str:
        return "<stdin>" if self.args.input_file in (None, "-") else self.args.input_file

    # -- stages: parse, each pass (with the stages inside it), verify, output -----------------

    def run(self) -> None:
        printer = IrPrinter(self.args.print_ir_before_all, self.args.print_ir_after_all)
        with compile_view(self.args.dump_dir, self.args.time_passes, extra=(printer,)):
            if self.args.verify_diagnostics and self._has_designators():
                self.run_expecting()
            else:
                super().run()

    def apply_passes(self, prog: ModuleOp) -> None:
        """The pipeline as xDSL's `PassPipeline.apply` runs it, each pass a stage (what
        `--time-passes`, `--dump-dir` and the progress bar see) and the callback (verify,
        dumps) a `verify` stage."""
        passes, callback = self.pipeline.passes, self.pipeline.callback
        steps = [(None, passes[0] if passes else None)]
        steps += [(p, passes[i + 1] if i + 1 < len(passes) else None) for i, p in enumerate(passes)]
        for done, nxt in steps:
            if done is not None:
                with stage(done.name, prog):
                    done.apply(self.ctx, prog)
                if nxt is not None and self.args.print_between_passes:  # as xdsl-opt prints it
                    print(f"IR after {done.name}:")
                    Printer(stream=sys.stdout).print_op(prog)
                    print("\n\n\n")
            if callback is not None:
                with stage("verify"):
                    callback(done, prog, nxt)

    def prepare_output(self) -> IO[str]:
        if self._target_name() == BUNDLE:
            return sys.stdout  # the bundle goes to -o itself (a directory or an archive)
        return super().prepare_output()

    def output_resulting_program(self, prog: ModuleOp) -> str:
        with stage("output"):
            if self._target_name() != BUNDLE:
                return super().output_resulting_program(prog)
            spec = parse_spec(self.args.target)
            target = cast("BundleTarget", target_class(BUNDLE)().from_spec(spec))
            name = self.args.input_file
            where = Path(name).parent if name not in (None, "-") else Path.cwd()
            target.write(prog, where, self.args.output_file, sys.stdout.buffer)
            return ""

    def _target_name(self) -> str:
        return parse_spec(self.args.target).name

    # -- --verify-diagnostics with expected-error designators ---------------------------------

    def _has_designators(self) -> bool:
        stream, _ = self.get_input_stream()
        return ed.has_designators(stream.read().decode("utf-8", "replace"))

    def run_expecting(self) -> None:
        """Process each chunk, collect its error, check it against the chunk's designators
        (`tools.expected_diagnostics`); `ExpectationsFailed` lists every mismatch."""
        stream, _ = self.get_input_stream()
        text = stream.read().decode("utf-8")
        output = self.prepare_output()
        problems: list[str] = []
        try:
            for i, (chunk, offset) in enumerate(ed.split_chunks(text, self.args.split_input_file)):
                if i > 0:
                    output.write("// -----\n")
                problems += self._check_chunk(chunk, offset, output)
        finally:
            if output is not sys.stdout:
                output.close()
        if problems:
            raise ed.ExpectationsFailed(
                f"{len(problems)} diagnostic expectation(s) not met:\n" + "\n".join(problems)
            )

    def _check_chunk(self, chunk: str, offset: int, output: IO[str]) -> list[str]:
        """Parse, transform and print one chunk (`offset` lines into the file); the mismatches
        between the error it raised, if any, and its designators."""
        name = self.get_input_name()
        errors: list[tuple[int | None, str]] = []
        try:
            with stage("parse") as s:
                s.product = module = self._parse_text(chunk, offset)
            self.apply_passes(module)
            output.write(self.output_resulting_program(module))
        except (ParseError, DiagnosticException, CliError) as e:
            errors.append((ed.error_line(e, name, offset), ed.message(e, name)))
        return ed.check(ed.expectations(chunk, offset + 1), errors, name)


def _run(argv: list[str]) -> int:
    FuelOptMain(argv).run()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: every error through the tools' one boundary (tools/errors.py)."""
    return run_guarded("fuel-opt", argv, _run)


if __name__ == "__main__":
    sys.exit(main())
