"""docs/dialect.md is what `python -m tools.dialect_doc` generates, and what it documents holds:
every op and attribute has a summary and an example, and every example parses and verifies."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.parser import Parser

from fuel_dialect.dialect import Fuel, fuel_context
from tools.dialect_doc import Entry, attributes, ops, render

ROOT = Path(__file__).resolve().parents[2]
ENTRIES = [*ops(), *attributes()]


def test_the_committed_reference_is_current() -> None:
    committed = (ROOT / "docs" / "dialect.md").read_text()
    assert committed == render(), "regenerate: python -m tools.dialect_doc > docs/dialect.md"


def test_every_op_and_attribute_is_documented() -> None:
    assert [e.name for e in ENTRIES] == [
        *(op.name for op in Fuel.operations),
        *(a.name for a in Fuel.attributes),
    ]
    for e in ENTRIES:
        assert e.summary and e.summary[0].isupper(), f"{e.name}: no one-line summary"
        assert e.examples, f"{e.name}: no `Example: `...`` in its docstring"
        assert f"`{e.name}` ({e.cls.__name__})" in render()


@pytest.mark.parametrize("e", ENTRIES, ids=lambda e: e.name)
def test_every_example_parses_and_verifies(e: Entry) -> None:
    """An op example's operands are free values typed by the example (forward references
    the parser types from the custom syntax); the op it parses to must verify, inside a module
    (its symbol references may dangle: whoever runs a module reports those)."""
    for text in e.examples:
        parser = Parser(fuel_context(), text, f"{e.name} example")
        if issubclass(e.cls, Operation):
            op = parser.parse_op()
            assert op.name == e.name or any(o.name == e.name for o in op.walk())
            ModuleOp([op])  # a symbol user needs a symbol table around it
            op.verify()
        else:
            attr = parser.parse_attribute()
            assert type(attr) is e.cls
            attr.verify()
        assert parser.pos == len(text), f"{e.name}: trailing text after the example"
