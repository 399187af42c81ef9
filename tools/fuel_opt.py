"""`fuel-opt`: parse fuel IR, run a `-p` pipeline (verifying after each pass), print.

fuel-opt model.mlir -p cse,canonicalize --print-ir-after-all

Errors go through the boundary of every fuel tool (tools/errors.py): `fuel-opt: error: ...` and
exit 1 for a bad input (a verifier error says `file:line:col` of the op at fault), exit 2 for a
bug; `--verbose` adds the traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException, VerifyException
from xdsl.xdsl_opt_main import xDSLOptMain

from fuel_dialect.dialect import Fuel
from lowering import LOWERING_PASSES
from passes import get_all_passes, lazy_pass
from runtime.ir_locations import PARSER_FAILURES, LocatingParser, SourceMap, locate
from tools.errors import CliError, UsageError, add_verbose, route_usage_errors, run_guarded


class FuelOptMain(xDSLOptMain):
    """xdsl-opt with the fuel dialect, fuel's passes, IR dumps around each pass, and verifier
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
        return super().parse_chunk(chunk, file_extension, start_offset)

    def _parse_mlir(self, stream: IO[bytes]) -> ModuleOp:
        """Read bytes, decode them (a clear error naming the file if they are not UTF-8) and
        parse them, remembering where each op starts."""
        name = self.get_input_name()
        try:
            text = stream.read().decode("utf-8")
        except UnicodeDecodeError as e:
            raise CliError(f"{name}: not UTF-8 text (byte {e.start} is invalid)") from None
        parser = LocatingParser(self.ctx, text, name)
        parser.source.line_offset = self._line_offset
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


def _run(argv: list[str]) -> int:
    FuelOptMain(argv).run()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: every error through the tools' one boundary (tools/errors.py)."""
    return run_guarded("fuel-opt", argv, _run)


if __name__ == "__main__":
    sys.exit(main())
