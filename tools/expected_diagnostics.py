"""`fuel-opt --verify-diagnostics` with `expected-error` comments, checked as mlir-opt does.

    // expected-error @+1 {{is not a fuel.c_kernel}}
    %0 = "fuel.c_launch"(%x) <{kernel = @f}> : (tensor<4xf32>) -> tensor<4xf32>

A designator `expected-error {{TEXT}}` (also `-warning`, `-remark`, `-note`, which fuel never
emits) expects a diagnostic whose message contains TEXT: on its own line, `@+N`/`@-N` lines
below/above it, `@below`/`@above` on the next/previous line that holds no designator. Each
chunk of `--split-input-file` is checked on its own: every error it raises must be expected
there ("unexpected error"), every expectation met ("expected error ... was not produced");
fuel-opt then lists each failure as `file:line: ...` and exits 1.

An error is placed where fuel-opt reports it (`file:line:col`, runtime/ir_locations.py): a
parse error where the parser stopped, a verifier error at the first token of the op whose own
verification fails. xDSL stops at a chunk's first error, so a chunk meets one expectation. An
error with no place (a pass failing without naming an op) matches an expectation of its chunk
by text alone.

A file with no designator keeps xDSL's `--verify-diagnostics`: each error is printed to stdout
and fuel-opt exits 0 (tests/filecheck/dialect/invalid-*.mlir check those with FileCheck).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import accumulate

from xdsl.utils.exceptions import DiagnosticException, ParseError

_DESIGNATOR = re.compile(
    r"expected-(error|warning|remark|note)\s*(@[+-]\d+|@above|@below)?\s*\{\{(.*?)\}\}"
)


class ExpectationsFailed(DiagnosticException):
    """Diagnostics and `expected-*` designators disagree; the message lists each mismatch."""


@dataclass
class Expectation:
    """One designator: a diagnostic of `kind` containing `text`, expected on `line`."""

    kind: str
    text: str
    line: int
    at: int
    """The line the designator is written on."""
    met: bool = False


def has_designators(text: str) -> bool:
    return _DESIGNATOR.search(text) is not None


def expectations(text: str, first_line: int = 1) -> list[Expectation]:
    """The designators of `text`, whose first line is line `first_line` of the file."""
    lines = text.split("\n")
    marked = [_DESIGNATOR.search(line) is not None for line in lines]
    out = []
    for i, line in enumerate(lines):
        for m in _DESIGNATOR.finditer(line):
            kind, where, message = m.groups()
            target = _target(i, where, marked)
            out.append(Expectation(kind, message, first_line + target, first_line + i))
    return out


def _target(i: int, where: str | None, marked: list[bool]) -> int:
    """The line index a designator on line `i` points at (see the module doc)."""
    if where is None:
        return i
    if where in ("@below", "@above"):
        step = 1 if where == "@below" else -1
        j = i + step
        while 0 <= j < len(marked) and marked[j]:
            j += step
        return j
    return i + int(where[1:])


def check(
    expected: list[Expectation], errors: list[tuple[int | None, str]], name: str
) -> list[str]:
    """The mismatches between `expected` and the `(line, message)` errors of one chunk."""
    problems = []
    for line, message in errors:
        match = next(
            (
                e
                for e in expected
                if not e.met
                and e.kind == "error"
                and e.text in message
                and (line is None or e.line == line)
            ),
            None,
        )
        if match is not None:
            match.met = True
        else:
            problems.append(
                f"{name}:{line if line is not None else '?'}: unexpected error: {message}"
            )
    for e in expected:
        if not e.met:
            problems.append(f'{name}:{e.at}: expected {e.kind} "{e.text}" was not produced')
    return problems


def split_chunks(text: str, split: bool) -> list[tuple[str, int]]:
    """(chunk, lines before it) for each `// -----` chunk, as xDSL's `--split-input-file`."""
    if not split:
        return [(text, 0)]
    chunks = text.split("// -----")
    return list(zip(chunks, accumulate([0, *(c.count("\n") for c in chunks[:-1])]), strict=True))


def _located(text: str, name: str) -> re.Match[str] | None:
    """`name:line:col: ` at the start of a message the tools placed (runtime/ir_locations)."""
    return re.match(re.escape(name) + r":(\d+):\d+: ", text)


def error_line(error: Exception, name: str, offset: int) -> int | None:
    """The line of file `name` that `error` (raised in a chunk `offset` lines into it) is
    about; None when it has no place."""
    if isinstance(error, ParseError):
        return error.span.get_location().line + offset
    located = _located(str(error), name)
    return int(located.group(1)) if located else None


def message(error: Exception, name: str) -> str:
    """What `error` says, without its place or the IR printout xDSL adds as notes."""
    if isinstance(error, ParseError):
        return error.msg
    text = " ".join(str(error).split())  # IRDL's messages span lines
    located = _located(text, name)
    return text[located.end() :] if located else text
