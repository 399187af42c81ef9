"""The `fuel` dialect reference (docs/dialect.md), generated from the dialect itself: every op
and attribute with its docstring and its example, the element types, and the discardable
attribute names.

    python -m tools.dialect_doc > docs/dialect.md     # regenerate after changing a docstring

`tests/fuel_dialect/test_dialect_doc.py` fails when the committed file differs from this
output, when an op or attribute lacks a summary or an example, and when an example does not
parse and verify.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from xdsl.ir import Attribute, Operation
from xdsl.irdl import IRDLOperation, OptOperandDef, VarOperandDef, VarResultDef

from fuel_dialect import dims, dtypes
from fuel_dialect.dialect import Fuel

_EXAMPLE = re.compile(r"Examples?:\s*((?:`[^`]+`[\s,]*)+)\.?")
"""`Example: `...`` (or `Examples:` followed by several), where the op docstrings give them."""
_SPAN = re.compile(r"`([^`]+)`")
_ATTR_NAME_MODULES = ("attrs", "dispatch", "branch", "dims")
"""The `fuel_dialect` modules whose `*_ATTR` constants name discardable attributes."""


@dataclass(frozen=True)
class Entry:
    """One op or attribute: its name, summary, remaining prose and examples."""

    name: str
    cls: type
    summary: str
    body: str
    examples: tuple[str, ...]


def entry(cls: type[Operation] | type[Attribute]) -> Entry:
    """The docstring of `cls` split into summary, prose and examples (each example as written,
    its continuation lines indented)."""
    doc = inspect.getdoc(cls) or ""
    examples: list[str] = []
    for m in _EXAMPLE.finditer(doc):
        examples += [s.replace("\n", "\n    ") for s in _SPAN.findall(m.group(1))]
    text = _EXAMPLE.sub("", doc).strip()
    summary, _, body = text.partition("\n\n")
    return Entry(cls.name, cls, " ".join(summary.split()), body.strip(), tuple(examples))


def ops() -> list[Entry]:
    """Every op of the dialect, in its registration order."""
    return [entry(op) for op in Fuel.operations]


def attributes() -> list[Entry]:
    """Every attribute of the dialect, in its registration order."""
    return [entry(a) for a in Fuel.attributes]


def _signature(cls: type) -> str:
    """Operands, results, properties and regions by name (`x?` optional, `xs...` variadic),
    and the binding-table op a kernel contract names (`op:`)."""
    if not issubclass(cls, IRDLOperation):
        return ""
    d = cls.get_irdl_definition()

    def mark(name: str, definition: object) -> str:
        if isinstance(definition, OptOperandDef):
            return f"`{name}?`"
        if isinstance(definition, VarOperandDef | VarResultDef):
            return f"`{name}...`"
        return f"`{name}`"

    parts = [
        ("operands", [mark(n, o) for n, o in d.operands]),
        ("results", [mark(n, r) for n, r in d.results]),
        ("properties", [f"`{n}`" for n in d.properties if n != "operandSegmentSizes"]),
        ("regions", [f"`{n}`" for n, _ in d.regions]),
    ]
    line = "; ".join(f"{what}: {', '.join(names)}" for what, names in parts if names)
    kernel_op = getattr(cls, "KERNEL_OP", None)
    if isinstance(kernel_op, str) and kernel_op:
        line += f"; binding-table op `{kernel_op}`"
    return line[0].upper() + line[1:] + "." if line else ""


def _section(e: Entry, heading: str) -> list[str]:
    out = [f"{heading} `{e.name}` ({e.cls.__name__})", "", e.summary, ""]
    if e.body:
        out += [e.body, ""]
    for example in e.examples:
        out += ["```mlir", example, "```", ""]
    sig = _signature(e.cls)
    return out + ([sig, ""] if sig else [])


def _family(cls: type) -> tuple[str, str, str]:
    """(module name, the first paragraph of its docstring, the rest) of the module defining
    `cls`: the ops of one module are one family."""
    doc = inspect.getdoc(sys.modules[cls.__module__]) or cls.__module__
    title, _, rest = doc.partition("\n\n")
    return cls.__module__, " ".join(title.split()), rest.strip()


def attribute_names() -> list[tuple[str, str]]:
    """(name, docstring) of every `*_ATTR` constant of the dialect's modules, read from their
    source (a constant's docstring is the string literal after it)."""
    out = []
    for short in _ATTR_NAME_MODULES:
        path = Path(importlib.import_module(f"fuel_dialect.{short}").__file__ or "")
        body = ast.parse(path.read_text()).body
        for stmt, nxt in zip(body, body[1:], strict=False):
            if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant)):
                continue
            if not any(isinstance(t, ast.Name) and t.id.endswith("_ATTR") for t in stmt.targets):
                continue
            doc = nxt.value.value if isinstance(nxt, ast.Expr) else ""
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
                out.append((str(stmt.value.value), " ".join(str(doc).split())))
    return out


HEADER = """# The `fuel` dialect

Generated from the dialect's docstrings by `python -m tools.dialect_doc > docs/dialect.md`: edit
the docstrings, not this file (`tests/fuel_dialect/test_dialect_doc.py` checks that it is
current and that every example parses and verifies). How to write a pass over these ops:
`docs/passes.md`.

## Types

fuel defines no types of its own: every value is a builtin `tensor<...>` whose dims are static
or `?` (a dim symbol's value: below), of one of these element types (fuel's short name, then
its IR spelling):
"""


def render() -> str:
    """The whole reference, as Markdown."""
    lines = [*HEADER.splitlines(), "", "| name | IR |", "|---|---|"]
    lines += [f"| `{n}` | `{t}` |" for n, t in dtypes.ELEMENT_TYPES.items()]
    lines += [
        "",
        "## Dim symbols",
        "",
        *(dims.__doc__ or "").split("\n", 1)[1].strip().splitlines(),
    ]
    lines += ["", "## Attributes", ""]
    for e in attributes():
        lines += _section(e, "###")
    lines += ["## Attribute names", "", "| name | meaning |", "|---|---|"]
    lines += [f"| `{n}` | {doc} |" for n, doc in attribute_names()]
    lines += ["", "## Operations", ""]
    family = None
    for e in ops():
        module, title, prose = _family(e.cls)
        if module != family:
            family = module
            lines += [f"### {title.rstrip('.')}", "", f"`{module}`", ""]
            lines += [prose, ""] if prose else []
        lines += _section(e, "####")
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
