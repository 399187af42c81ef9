"""The one error boundary of fuel's command-line tools: `fuel` (every subcommand) and `fuel-opt`.

Each entry point's `main` runs its work through `run_guarded`, which turns whatever escapes
into one message on stderr and an exit code, never a traceback unless asked for:

| exit | when | stderr |
|---|---|---|
| 0 | success | |
| 1 | bad input: a file, argument or environment value | `PROG: error: <file>[:line:col]: <msg>` |
| 2 | an internal error: a bug in fuel | `PROG: internal error: <Type>: <msg>` |
| 130 | interrupted (Ctrl-C) | nothing |
| 141 | stdout closed early (piped into `head`), as SIGPIPE would end it | nothing |

A parse error keeps xDSL's source line and caret below its first line; an internal error adds
a line asking to rerun with `--verbose`, which (anywhere on the command line before a `--`)
prints the traceback before either kind of message, for bug reports. A bad command line is a
bad input too: `ArgumentParser` raises `UsageError` where argparse would print its usage and
exit 2.

Which exceptions are bad inputs is the table `USER_ERRORS`, by module and class name: an
exception can only be an instance of a class whose module is already imported, so the boundary
checks only those (and imports nothing: `fuel-opt` starts without fuel's runtime).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from functools import partial
from typing import NoReturn

VERBOSE = "--verbose"
EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 1, 2, 130, 141


class CliError(Exception):
    """A user-facing error of a command's own: printed as `PROG: error: <message>`, exit 1."""


class UsageError(CliError):
    """A command line argparse refuses (an unknown flag, a missing or malformed argument)."""


USER_ERRORS: tuple[tuple[str, str], ...] = (
    ("tools.errors", "CliError"),
    ("tools.explain_text", "ExplainError"),
    # runtime: modules, weights, bundles, kernels, the Judge, devices, knobs
    ("runtime.module", "ModuleError"),  # and the importers' OnnxImportError, TorchImportError
    ("runtime.weights", "WeightsError"),
    ("runtime.compiled", "ExecutionError"),
    ("runtime.binding_table", "BindingTableError"),
    ("runtime.bundle", "BundleError"),
    ("runtime.topology", "TopologyError"),
    ("runtime.judge", "ReportFormatError"),
    ("runtime.judge_profile", "JudgeError"),
    ("runtime.devices", "DeviceUnavailable"),
    ("runtime.knobs", "KnobError"),
    ("runtime.contracts.errors", "FkcError"),
    ("runtime.loaders.c", "CodegenError"),  # e.g. no C compiler, a failed compile
    ("runtime.loaders.triton", "CodegenError"),
    ("runtime.signing", "SigningError"),  # a bad key file, a signature that does not verify
    ("lowering.kernel_source", "KernelSourceError"),  # a kernel source fuel would not write
    # compiler: backends, AOT, the planner
    ("lowering.backend", "BackendError"),
    ("lowering.triton.aot", "AotError"),
    ("passes.picker.plan", "PlanError"),
    # xDSL: text that does not parse or verify, a pass that refuses its input, a bad -p spec
    ("xdsl.utils.exceptions", "ParseError"),
    ("xdsl.utils.exceptions", "DiagnosticException"),
    ("xdsl.utils.exceptions", "ArgSpecParseError"),
    # the operating system and the interpreter's limits
    ("builtins", "OSError"),
    ("builtins", "UnicodeDecodeError"),
    ("builtins", "RecursionError"),
    ("builtins", "MemoryError"),
)
"""The exceptions that mean a bad input (exit 1), as (module, class); anything else is a bug."""


def user_error_types() -> tuple[type[BaseException], ...]:
    """The classes of `USER_ERRORS` whose modules are loaded (no other can have been raised)."""
    loaded = (getattr(sys.modules[m], name, None) for m, name in USER_ERRORS if m in sys.modules)
    return tuple(c for c in loaded if isinstance(c, type) and issubclass(c, BaseException))


def describe(e: BaseException) -> str:
    """The message of a bad-input exception: what the builtin ones lack (a file name, a
    reason) spelled out; xDSL's `file:line:col` / source line / caret / message led by
    `file:line:col: message`, the source line and caret kept below it."""
    if isinstance(e, UnicodeDecodeError):
        return f"not UTF-8 text (byte {e.start} is invalid)"
    if isinstance(e, OSError) and e.filename is not None:
        names = f"{e.filename}" if e.filename2 is None else f"{e.filename} -> {e.filename2}"
        return f"{names}: {e.strerror or e}"
    if isinstance(e, RecursionError):
        return "the input is nested too deeply"
    if isinstance(e, MemoryError):
        return f"out of memory{f' ({e})' if str(e) else ''}"
    return _lead_with_location(str(e)) or type(e).__name__


def _lead_with_location(msg: str) -> str:
    lines = msg.rstrip().splitlines()
    if len(lines) >= 3 and lines[0].count(":") >= 2 and "^" in lines[-2]:
        return f"{lines[0]}: {lines[-1].strip()}\n" + "\n".join(lines[1:-1])
    return msg.rstrip()


def run_guarded(prog: str, argv: Sequence[str] | None, body: Callable[[list[str]], int]) -> int:
    """`body(argv)` (default: `sys.argv[1:]`) with every exception turned into a message on
    stderr and the exit code of the table in this module's docstring."""
    args = list(sys.argv[1:] if argv is None else argv)
    verbose = VERBOSE in (args[: args.index("--")] if "--" in args else args)
    try:
        return _flushed(body, args)
    except KeyboardInterrupt:
        if verbose:
            traceback.print_exc()
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except user_error_types() as e:
        _report(f"{prog}: error: {describe(e)}", e, verbose)
        return EXIT_BAD_INPUT
    except Exception as e:  # noqa: BLE001 - the boundary: a bug is reported, not a traceback
        first = (str(e).strip().splitlines() or [""])[0]
        message = f"{prog}: internal error: {type(e).__name__}{': ' if first else ''}{first}"
        if not verbose:
            message += f"\n{prog}: this is a bug in fuel; rerun with {VERBOSE} for the traceback"
        _report(message, e, verbose)
        return EXIT_INTERNAL


def _flushed(body: Callable[[list[str]], int], args: list[str]) -> int:
    """`body(args)`, then stdout flushed, even on the way out of argparse's `--help`: a
    closed pipe shows here, inside the boundary, not in the interpreter's last flush."""
    try:
        return body(args)
    finally:
        sys.stdout.flush()


def _report(message: str, e: BaseException, verbose: bool) -> None:
    if verbose:
        traceback.print_exception(e)
    print(message, file=sys.stderr)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush into the closed pipe does
    not print an error of its own (Python's documented way to die quietly of a broken pipe)."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # not a real file (a test's capture): nothing will flush
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _usage_error(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    raise UsageError(f"{message} (see '{parser.prog} --help')")


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser (its subparsers too), with a bad command line raised as `UsageError`
    (one `PROG: error:` line and exit 1 through the boundary) instead of usage and exit 2."""

    def error(self, message: str) -> NoReturn:
        _usage_error(self, message)


def route_usage_errors(parser: argparse.ArgumentParser) -> None:
    """Make a parser built elsewhere (xDSL builds fuel-opt's) raise `UsageError` too."""
    parser.error = partial(_usage_error, parser)  # type: ignore[method-assign]


def add_verbose(parser: argparse.ArgumentParser, top: bool = True) -> None:
    """Add `--verbose`; `top=False` for a subcommand, whose unset flag must not reset the one
    given before the subcommand name (run_guarded reads the command line itself anyway)."""
    parser.add_argument(
        VERBOSE,
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="on an error, print the traceback too (for bug reports)",
    )


def run_parser(prog: str, parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    """Parse `argv` and call the chosen subcommand's `fn(args)`, inside the boundary."""

    def body(args: list[str]) -> int:
        ns = parser.parse_args(args)
        return ns.fn(ns)

    return run_guarded(prog, argv, body)
