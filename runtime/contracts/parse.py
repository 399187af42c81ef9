"""Stage 1, parse: split a `*.fkc.md` file into front-matter and `##` sections, load each
section's single ```fkc block with the restricted YAML loader.

Layout of a file: a `---` front-matter block first; then free prose (a `#` title, an intro);
then one `##` section per kernel, holding prose and exactly one ```fkc fence. Headings inside
fences are text, and other fences (```python examples) are allowed anywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import runtime.contracts.yaml_subset as yaml_subset
from runtime.contracts.errors import (
    BlockOutsideSection,
    MultipleBlocks,
    NoFrontMatter,
    NotUtf8,
    SectionWithoutBlock,
    UnclosedFence,
)
from runtime.contracts.yaml_subset import FieldPath

_FENCE = re.compile(r"^(?P<run>`{3,}|~{3,})\s*(?P<info>[^\s`]*)")
_SECTION = re.compile(r"^##\s+(?P<title>\S.*?)\s*$")


@dataclass(frozen=True)
class Block:
    """One loaded YAML block: its data and the absolute line of each field."""

    data: Any
    lines: dict[FieldPath, int]
    line: int
    """Line of the block's opening fence (or of the front-matter's `---`)."""


@dataclass(frozen=True)
class Section:
    """A `##` section: its title, prose and its single fkc block."""

    title: str
    line: int
    prose: str
    block: Block


@dataclass(frozen=True)
class ContractFile:
    path: str
    front: Block
    sections: list[Section] = field(default_factory=list)


@dataclass
class _Open:
    """A section being scanned."""

    title: str
    line: int
    prose: list[str] = field(default_factory=list)
    block: Block | None = None


def parse_text(text: str, path: str) -> ContractFile:
    """Parse the text of one contract file (`path` is used in errors only)."""
    rows = text.splitlines()
    front, body_start = _front_matter(rows, path)
    sections: list[Section] = []
    current: _Open | None = None
    i = body_start
    while i < len(rows):
        row = rows[i]
        fence = _FENCE.match(row)
        if fence:
            end = _fence_end(rows, i, fence.group("run"), path)
            if fence.group("info") == "fkc":
                if current is None:
                    raise BlockOutsideSection(path, i + 1, "```fkc block before the first `##`")
                if current.block is not None:
                    raise MultipleBlocks(
                        path,
                        i + 1,
                        f"second ```fkc block in section '{current.title}' "
                        f"(the first is at line {current.block.line})",
                    )
                text_block = "\n".join(rows[i + 1 : end])
                data, lines = yaml_subset.load(text_block, path, i + 2)
                lines[()] = i + 1  # the block as a whole is blamed at its opening fence
                current.block = Block(data, lines, i + 1)
            elif current is not None:
                current.prose.extend(rows[i : end + 1])
            i = end + 1
            continue
        heading = _SECTION.match(row)
        if heading:
            if current is not None:
                sections.append(_close(current, path))
            current = _Open(heading.group("title"), i + 1)
        elif current is not None:
            current.prose.append(row)
        i += 1
    if current is not None:
        sections.append(_close(current, path))
    return ContractFile(path, front, sections)


def parse_file(path: str | Path) -> ContractFile:
    """Read and parse one `*.fkc.md` file (OSError propagates)."""
    p = Path(path)
    data = p.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise NotUtf8(str(p), line, f"not UTF-8 text (byte {e.start} is invalid)") from None
    return parse_text(text, str(p))


def _front_matter(rows: list[str], path: str) -> tuple[Block, int]:
    if not rows or rows[0].strip() != "---":
        raise NoFrontMatter(path, 1, "a contract file starts with a `---` front-matter block")
    for end in range(1, len(rows)):
        if rows[end].strip() in ("---", "..."):
            data, lines = yaml_subset.load("\n".join(rows[1:end]), path, 2)
            return Block(data, lines, 1), end + 1
    raise NoFrontMatter(path, 1, "the front-matter block is not closed by `---`")


def _fence_end(rows: list[str], start: int, run: str, path: str) -> int:
    """Index of the row closing the fence opened at `start` (same char, at least as long)."""
    for j in range(start + 1, len(rows)):
        close = rows[j].strip()
        if close and set(close) == {run[0]} and len(close) >= len(run):
            return j
    raise UnclosedFence(path, start + 1, f"fence '{run}' opened here is never closed")


def _close(s: _Open, path: str) -> Section:
    if s.block is None:
        raise SectionWithoutBlock(path, s.line, f"section '{s.title}' has no ```fkc block")
    return Section(s.title, s.line, "\n".join(s.prose).strip(), s.block)
