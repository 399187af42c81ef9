"""The fuel dialect: it imports, every op's docstring example round-trips, and every verifier
message has an invalid-IR test (so a new op or message without a test fails here)."""

from __future__ import annotations

import ast
import re
from io import StringIO
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError, VerifyException

import fuel_dialect
from fuel_dialect import OPS, fuel_context

ROOT = Path(__file__).resolve().parents[2]
DIALECT_SRC = sorted((ROOT / "fuel_dialect").glob("*.py"))
IR_TESTS = ROOT / "tests" / "filecheck" / "dialect"
INVALID_FILES = sorted(IR_TESTS.glob("invalid*.mlir"))

_ONE_ARG = (
    "neg abs relu exp log sqrt rsqrt recip tanh sigmoid silu sin cos erf gelu softmax reduce_sum "
    "reduce_mean reduce_max reduce_min transpose slice reshape copy"
)
_TWO_ARGS = "add sub mul div pow max min eq ne lt le gt ge"
EXAMPLE_ARGS: dict[str, str] = {
    **{f"fuel.{n}": "%x: tensor<4x8xf32>" for n in _ONE_ARG.split()},
    **{f"fuel.{n}": "%x: tensor<4x8xf32>, %y: tensor<8xf32>" for n in _TWO_ARGS.split()},
    "fuel.where": "%c: tensor<4x8xi1>, %x: tensor<4x8xf32>, %y: tensor<f32>",
    "fuel.cast": "%x: tensor<4xf32>",
    "fuel.broadcast": "%x: tensor<1x8xf32>",
    "fuel.matmul": "%x: tensor<2x4x8xf32>, %w: tensor<8x16xf32>",
    "fuel.rms_norm": "%x: tensor<2x8xf32>, %w: tensor<8xf32>",
    "fuel.layer_norm": "%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>",
    "fuel.rope": "%x: tensor<1x4x6x8xf32>, %cos: tensor<6x4xf32>, %sin: tensor<6x4xf32>",
    "fuel.attention": "%q: tensor<1x8x1x64xf32>, %k: tensor<1x2x128x64xf32>, "
    "%v: tensor<1x2x128x64xf32>, %n: tensor<i64>",
    "fuel.concat": "%a: tensor<2x8xf32>, %b: tensor<3x8xf32>",
    "fuel.matmul_bias_act": "%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>",
    "fuel.gated_mlp": "%x: tensor<4x8xf32>, %wg: tensor<8x16xf32>, %wu: tensor<8x16xf32>, "
    "%wd: tensor<16x8xf32>",
    "fuel.gather": "%table: tensor<100x16xf32>, %ids: tensor<2x5xi64>",
    "fuel.index_copy": "%c: tensor<4x1x2x256x64xf32>, %k: tensor<1x1x2x1x64xf32>, "
    "%pos: tensor<1xi64>",
    "fuel.constant": "",
    "fuel.weight": "",
    "fuel.iota": "",
    "fuel.branch": "%x: tensor<4xf32>",
    "fuel.yield": "%x: tensor<4xf32>",
    "fuel.triton_kernel": "",
    "fuel.triton_launch": "%x: tensor<4x8xf32>, %b: tensor<8xf32>",
    "fuel.library_call": "%x: tensor<4x8xf32>, %w: tensor<8x16xf32>",
    "fuel.c_kernel": "",
    "fuel.c_launch": "%x: tensor<4x8xf32>, %b: tensor<8xf32>",
}
"""Typed function arguments under which each op's docstring example is parsed."""

UNREACHABLE_FROM_IR: dict[str, str] = {
    "expects ranked tensors": "IRDL's operand_def(TensorType) rejects non-tensors first",
    "unknown dtype": "dtypes.element_type() is a Python API; IR spells types, not names",
    "arms must be independent": "SSA scoping rejects it at parse; see tests/runtime/test_branch.py",
}
"""Message prefixes in fuel_dialect/ that no IR can reach, each with the reason."""


def parse(text: str) -> ModuleOp:
    module = Parser(fuel_context(), text).parse_module()
    module.verify()
    return module


def _print(module: Operation, generic: bool) -> str:
    out = StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(module)
    return out.getvalue()


def example(op: type[Operation]) -> str:
    """The custom-syntax example between backticks after `Example:`, on one line."""
    match = re.search(r"Example:\s*`([^`]*)`", op.__doc__ or "")
    assert match, f"{op.name}: docstring has no `Example: `...``"
    return " ".join(match.group(1).split())


def test_dialect_imports() -> None:
    assert fuel_dialect.Fuel.name == "fuel"
    names = [op.name for op in OPS]
    assert len(names) == len(set(names)), "an op is listed twice in OPS"
    assert all(n.startswith("fuel.") for n in names)


def test_example_table_covers_every_op() -> None:
    assert set(EXAMPLE_ARGS) == {op.name for op in OPS}


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_docstring_example_round_trips(op: type[Operation]) -> None:
    text = example(op)
    assert f" {op.name} " in f" {text} ", f"{op.name}: example uses another op: {text}"
    source = f"func.func @f({EXAMPLE_ARGS[op.name]}) {{\n  {text}\n  func.return\n}}"
    m1 = parse(source)
    assert any(o.name == op.name for o in m1.walk())
    m2 = parse(str(m1))
    assert str(m1) == str(m2)
    m3 = parse(_print(m1, generic=True))
    assert str(m3) == str(m1)


def test_every_op_has_a_round_trip_test() -> None:
    text = "\n".join(
        p.read_text() for p in IR_TESTS.glob("*.mlir") if not p.name.startswith("invalid")
    )
    missing = [op.name for op in OPS if not re.search(rf"\b{re.escape(op.name)}\b", text)]
    assert not missing, f"ops without a tests/filecheck/dialect round-trip case: {missing}"


# -- verifier messages ----------------------------------------------------------------------


def _message_regex(node: ast.expr) -> str | None:
    """A regex for a message literal: f-string holes become `.*`; None when not a literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.escape(node.value)
    if isinstance(node, ast.JoinedStr):
        parts = [re.escape(v.value) if isinstance(v, ast.Constant) else ".*" for v in node.values]
        return "".join(parts)
    return None


def dialect_messages() -> list[tuple[str, str]]:
    """(where, regex) for every literal message given to fail / VerifyException / ValueError /
    raise_error in fuel_dialect/."""
    found: list[tuple[str, str]] = []
    for path in DIALECT_SRC:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            f = node.func
            name = getattr(f, "id", None) or getattr(f, "attr", "")
            index = {"fail": 1, "VerifyException": 0, "ValueError": 0, "raise_error": 0}.get(name)
            if index is None or len(node.args) <= index:
                continue
            regex = _message_regex(node.args[index])
            # Skip wrappers that only decorate another message, like fail()'s "'{op.name}' {m}".
            if regex is not None and len(regex.replace(".*", "").strip("\\ '")) >= 3:
                found.append((f"{path.name}:{node.lineno}", regex))
    return found


def invalid_chunks() -> list[tuple[str, str, str]]:
    """(id, CHECK text, IR) for every `// -----` chunk of the invalid*.mlir files."""
    chunks: list[tuple[str, str, str]] = []
    for path in INVALID_FILES:
        for i, chunk in enumerate(path.read_text().split("// -----")):
            checks = re.findall(r"^// CHECK: (.*)$", chunk, re.M)
            assert len(checks) == 1, f"{path.name} chunk {i}: want one CHECK line, got {checks}"
            chunks.append((f"{path.stem}-{i}", checks[0], chunk))
    return chunks


def test_message_scan_finds_the_verifiers() -> None:
    regexes = [r for _, r in dialect_messages()]
    assert len(regexes) >= 30
    sample = "'fuel.matmul' contraction dims differ: lhs 4x8 has k=8, rhs 4x16 has k=4"
    assert any(re.search(r, sample) for r in regexes)
    assert not any(re.search(r, "'fuel.matmul' frobnicated") for r in regexes), "a catch-all"


def test_every_verifier_message_has_an_invalid_test() -> None:
    checks = [check for _, check, _ in invalid_chunks()]
    untested = [
        f"{where}: {regex}"
        for where, regex in dialect_messages()
        if not any(re.search(regex, c) for c in checks)
        and not any(regex.startswith(re.escape(p)) for p in UNREACHABLE_FROM_IR)
    ]
    assert not untested, "verifier messages without an invalid*.mlir chunk:\n" + "\n".join(untested)


def test_unreachable_list_is_current() -> None:
    regexes = [r for _, r in dialect_messages()]
    for prefix in UNREACHABLE_FROM_IR:
        assert any(r.startswith(re.escape(prefix)) for r in regexes), f"stale entry {prefix!r}"


@pytest.mark.parametrize(
    ("check", "ir"), [pytest.param(check, ir, id=id_) for id_, check, ir in invalid_chunks()]
)
def test_invalid_chunk_fails_with_its_message(check: str, ir: str) -> None:
    """Each chunk fails in-process, for the reason its CHECK line names (lit checks the CLI)."""
    with pytest.raises((VerifyException, ParseError)) as info:
        parse(ir)
    assert check in str(info.value)
