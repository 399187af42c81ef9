"""The restricted YAML of contract blocks: a safe load that also returns each field's line.

Contracts are data, so the subset is small: no tabs, no anchors or aliases (`&a` / `*a`), no
merge keys (`<<`), no duplicate keys. The pre-check runs on the token stream before anything is
constructed; loading uses PyYAML's safe constructor. Lines are absolute file lines (1-based).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from runtime.contracts.errors import TabInYaml, YamlAnchorOrAlias, YamlMergeKey, YamlSyntax

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"

FieldPath = tuple[str | int, ...]
LineMap = Mapping[FieldPath, int]


def load(text: str, path: str, first_line: int) -> tuple[Any, dict[FieldPath, int]]:
    """Safe-load `text` (which starts at file line `first_line`); returns (data, lines).

    `lines` maps a field path (`("inputs", 0, "name")`) to the line of its key or item.
    """
    for i, row in enumerate(text.splitlines()):
        if "\t" in row:
            raise TabInYaml(path, first_line + i, "tab character in a contract block")
    try:
        for tok in yaml.scan(text, Loader=_Loader):
            if isinstance(tok, yaml.AnchorToken | yaml.AliasToken):
                kind = "anchor" if isinstance(tok, yaml.AnchorToken) else "alias"
                line = first_line + tok.start_mark.line
                raise YamlAnchorOrAlias(path, line, f"YAML {kind} '{tok.value}' is not allowed")
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            lines: dict[FieldPath, int] = {(): first_line}
            if node is not None:
                _walk(node, (), lines, path, first_line)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = first_line + (mark.line if mark is not None else 0)
        raise YamlSyntax(path, line, f"YAML: {e.problem or e.context}") from None
    except yaml.YAMLError as e:
        raise YamlSyntax(path, first_line, f"YAML: {e}") from None
    return data, lines


def _walk(
    node: yaml.Node, at: FieldPath, lines: dict[FieldPath, int], path: str, first: int
) -> None:
    """Record every field's line; reject merge keys and duplicate keys on the way."""
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key, value in node.value:
            line = first + key.start_mark.line
            if key.tag == _MERGE_TAG:
                raise YamlMergeKey(path, line, "YAML merge key '<<' is not allowed")
            name = key.value if isinstance(key, yaml.ScalarNode) else repr(key.value)
            if name in seen:
                raise YamlSyntax(path, line, f"YAML: duplicate key '{name}'")
            seen.add(name)
            lines[(*at, name)] = line
            _walk(value, (*at, name), lines, path, first)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[(*at, i)] = first + item.start_mark.line
            _walk(item, (*at, i), lines, path, first)


def line_of(lines: LineMap, at: FieldPath) -> int:
    """The line of `at`, else of its nearest recorded ancestor."""
    while at not in lines and at:
        at = at[:-1]
    return lines.get(at, 0)
