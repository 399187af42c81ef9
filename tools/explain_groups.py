"""Groups of decision points for the HTML view of `fuel explain`: collapsible blocks.

A group is a run of ops in program order sharing a block key taken from the op's location
(the ONNX importer gives every op its node's name, e.g. `/model/layers.0/self_attn/MatMul`
-> block `/model/layers.0`; a name without a numbered block keys on its parent path). Ops
with no name join the run before them; a run longer than GROUP_MAX is cut into parts, so a
plan with no names at all is grouped by fixed-size chunks of program order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from xdsl.dialects.builtin import NameLoc
from xdsl.ir import Operation

GROUP_MAX = 64
"""Most ops in one group: a longer block or run is cut into parts of at most this many."""

EXPAND_ALL_MAX = 60
"""Plans with up to this many ops start with every group expanded; larger ones collapsed."""

_NUMBERED_BLOCK = re.compile(r"^(.*?[A-Za-z_]\w*?[._]\d+)(?=[/.])")
"""`/model/layers.12/mlp/Mul` -> `/model/layers.12` (a numbered path step before the leaf)."""


@dataclass
class Group:
    """One collapsible block: a label and the indices of its ops (program order)."""

    index: int
    label: str
    ops: list[int]


def op_name(op: Operation) -> str | None:
    """The op's name from its location (`loc("/model/layers.0/MatMul")`), if it has one."""
    loc = op.location
    return loc.desc.data if isinstance(loc, NameLoc) and loc.desc.data else None


def block_key(name: str | None) -> str | None:
    """The block an op name belongs to: its numbered layer/block, else its parent path."""
    if not name:
        return None
    m = _NUMBERED_BLOCK.match(name)
    if m:
        return m.group(1)
    parent = name.rsplit("/", 1)[0] if "/" in name else ""
    return parent or None


def group_ops(names: list[str | None]) -> list[Group]:
    """Groups over ops 0..len(names)-1 from their names (see the module docstring)."""
    runs: list[tuple[str | None, list[int]]] = []
    for i, name in enumerate(names):
        key = block_key(name)
        if runs and (key is None or key == runs[-1][0]):
            runs[-1][1].append(i)
        else:
            runs.append((key, [i]))
    groups: list[Group] = []
    for key, ops in runs:
        parts = [ops[k : k + GROUP_MAX] for k in range(0, len(ops), GROUP_MAX)]
        for p, part in enumerate(parts, 1):
            label = key or "ops"
            if len(parts) > 1:
                label += f" (part {p}/{len(parts)})"
            groups.append(Group(len(groups), label, part))
    return groups
