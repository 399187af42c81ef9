"""Where each op of parsed IR text came from, so a verifier error can say `file:line:col`.

xDSL's parser reports its own errors with a position, but the ops it builds keep none (unless
the text spells a `loc(...)`), and a verifier error names no op. `LocatingParser` records the
offset of every op's first token while it parses; `failing_op` finds the op a verifier
exception came from by verifying each op on its own; `SourceMap.where` turns that op into
`file:line:col` (the file alone for an op the text did not spell, such as the implicit module).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import DiagnosticException


@dataclass
class SourceMap:
    """The text of one IR file and the offset at which each op parsed from it starts."""

    name: str
    text: str
    starts: dict[Operation, int] = field(default_factory=dict)
    line_offset: int = 0
    """Lines of the file before `text` (a chunk of `--split-input-file`)."""

    def at(self, pos: int) -> str:
        """`name:line:col` of the offset `pos` in `text`."""
        return f"{self.name}:{line_col(self.text, pos, self.line_offset)}"

    def where(self, op: Operation | None) -> str:
        """`name:line:col` of `op`'s first token, or `name` for an op the text did not spell."""
        start = self.starts.get(op) if op is not None else None
        return self.name if start is None else self.at(start)


class LocatingParser(Parser):
    """xDSL's `Parser`, filling `source.starts` with the offset of each op it parses."""

    def __init__(self, ctx: Context, text: str, name: str) -> None:
        super().__init__(ctx, text, name)
        self.source = SourceMap(name, text)

    def parse_operation(self) -> Operation:
        start = self.pos  # the first token of the op: its result list, else its name
        op = super().parse_operation()
        self.source.starts[op] = start
        return op

    def failure(self, error: BaseException) -> str:
        """`name:line:col: message` for one of `PARSER_FAILURES` that escaped the parser."""
        what = "nested too deeply" if isinstance(error, RecursionError) else str(error)
        return f"{self.source.at(self.pos)}: {what}"


PARSER_FAILURES = (DiagnosticException, RecursionError, ValueError, OverflowError)
"""What else xDSL's parser raises on bad text, without a position: an attribute value out of
range, nesting deeper than Python's stack (a `ParseError` says where itself)."""


def line_col(text: str, pos: int, line_offset: int = 0) -> str:
    """`line:col` (both from 1) of the offset `pos` in `text` (`line_offset` lines later)."""
    line = text.count("\n", 0, pos) + 1 + line_offset
    return f"{line}:{pos - text.rfind(chr(10), 0, pos)}"


def failing_op(root: Operation, error: Exception) -> Operation | None:
    """The op under `root` whose own verification raises `error`'s message (else the first op
    that fails on its own): `root.verify()` raised `error` but does not say where."""
    first = None
    for op in root.walk():
        try:
            op.verify(verify_nested_ops=False)
        except (DiagnosticException, ValueError) as e:
            if str(e) == str(error):
                return op
            first = first or op
    return first


def locate(source: SourceMap, root: Operation, error: Exception) -> str:
    """`file:line:col: 'op.name': message` for a verifier `error` that `root.verify()` raised
    (the op named unless the message starts with it; the file alone where no op is found)."""
    op = failing_op(root, error)
    message = str(error)
    if op is not None and not message.startswith(f"'{op.name}'"):
        message = f"'{op.name}': {message}"
    return f"{source.where(op)}: {message}"
