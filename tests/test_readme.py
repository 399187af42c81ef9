"""The README's IR example parses and verifies, so the first thing a newcomer reads is true."""

from __future__ import annotations

import re
from pathlib import Path

from runtime.module import FuelModule

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_ir_example_verifies() -> None:
    blocks = re.findall(r"```mlir\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README.md has no ```mlir example"
    for text in blocks:
        FuelModule.parse(text, "README.md")
