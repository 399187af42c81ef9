"""The README and docs/*.md are true: their IR examples verify and their Python blocks run.

Every ```python block of README.md and docs/*.md runs as written, in order, in a scratch
folder (one namespace per document). A fenced block right after a line that is only a path in
backticks and a colon (`` `mykernels/__init__.py`: ``) is that file's content: it is written
into the scratch folder before the document's code runs, so examples that define a package use
it as a reader would.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from runtime.module import FuelModule

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(
    r"^(?:`(?P<path>[^`\n]+)`:\n\n?)?"  # an optional "`path`:" line before the fence
    r"(?P<fence>`{3,})(?P<info>[^\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$",
    re.S | re.M,
)


def blocks(doc: Path) -> list[tuple[str | None, str, str]]:
    """(file path or None, info string, body) of every top-level fenced block of `doc`."""
    return [(m["path"], m["info"].strip(), m["body"]) for m in FENCE.finditer(doc.read_text())]


def test_readme_ir_example_verifies() -> None:
    mlir = [body for _, info, body in blocks(README) if info == "mlir"]
    assert mlir, "README.md has no ```mlir example"
    for text in mlir:
        FuelModule.parse(text, "README.md")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_python_blocks_run(doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = blocks(doc)
    code = [body for path, info, body in found if info == "python" and path is None]
    if not code:
        pytest.skip(f"{doc.name} has no Python example")
    for path, _, body in found:
        if path is not None:
            target = tmp_path / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    namespace: dict[str, object] = {"__name__": f"doc_{doc.stem}"}
    for i, body in enumerate(code):
        try:
            exec(compile(body, f"{doc.name} python block {i + 1}", "exec"), namespace)
        except Exception as e:
            pytest.fail(f"{doc.name}, python block {i + 1}: {type(e).__name__}: {e}")
    for name in [m for m in sys.modules if m.split(".")[0] in _packages(tmp_path)]:
        del sys.modules[name]


def _packages(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
