"""`fuel-opt`: parse fuel IR, run a `-p` pipeline (verifying after each pass), print.

fuel-opt model.mlir -p cse,canonicalize --print-ir-after-all
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from fuel_dialect.dialect import Fuel
from lowering import LOWERING_PASSES
from passes import get_all_passes, lazy_pass


class FuelOptMain(xDSLOptMain):
    """xdsl-opt with the fuel dialect, fuel's passes and IR dumps around each pass."""

    def __init__(self, args: Sequence[str] | None = None):
        super().__init__(description="fuel modular optimizer driver", args=args)

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        self.ctx.register_dialect("fuel", lambda: Fuel)

    def register_all_passes(self) -> None:
        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)
        for name, (module, cls) in LOWERING_PASSES.items():
            self.register_pass(name, lazy_pass(module, cls))

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--print-ir-before-all", action="store_true", help="print the IR before each pass"
        )
        arg_parser.add_argument(
            "--print-ir-after-all", action="store_true", help="print the IR after each pass"
        )

    def setup_pipeline(self) -> None:
        def dump(when: str, p: ModulePass, module: ModuleOp) -> None:
            print(f"// -----// IR Dump {when} {p.name} //----- //", file=sys.stderr)
            Printer(stream=sys.stderr).print_op(module)
            print("\n", file=sys.stderr)

        def callback(prev: ModulePass | None, module: ModuleOp, nxt: ModulePass | None) -> None:
            if not self.args.disable_verify:
                module.verify()  # the parsed input too (prev is None), as xdsl-opt does
            if prev is not None and self.args.print_ir_after_all:
                dump("After", prev, module)
            if nxt is not None and self.args.print_ir_before_all:
                dump("Before", nxt, module)

        self.pipeline = PassPipeline.parse_spec(self.available_passes, self.args.passes, callback)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: diagnostics go to stderr as one message, exit 1, never a traceback."""
    try:
        FuelOptMain(argv).run()
    except ParseError as e:
        print(str(e), file=sys.stderr)
        return 1
    except (DiagnosticException, ArgSpecParseError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except FileNotFoundError as e:
        print(f"error: cannot read {e.filename}: {e.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
