"""The process-wide `SystemTopology`: detected, or read from a declared file.

`current_topology()` is cached until the binding-table generation moves (a backend's kernels
registered, say) or `refresh()` is called; `use_topology_file(path)` makes later snapshots the
declared topology. It lives apart from `runtime.topology` (the model) and
`runtime.topology_file` (the reader), which it both uses.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

from runtime.kernels import bindings_generation
from runtime.topology import SystemTopology
from runtime.topology_file import load_file


@dataclass
class _Current:
    snapshot: SystemTopology | None = None
    refreshes: int = 0
    declared: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


_CURRENT = _Current()


def _live_generation() -> int:
    # Both counters only grow, so their sum moves whenever either does.
    return bindings_generation() + _CURRENT.refreshes


def current_topology() -> SystemTopology:
    """The process-wide snapshot: cached until the binding-table generation moves or
    `refresh()` is called; built by `detect()` or from the file given to `use_topology_file`."""
    snap = _CURRENT.snapshot
    if snap is not None and snap.generation == _live_generation():
        return snap
    with _CURRENT.lock:
        # Read the generation before building: the label may lag the content (forcing one
        # extra rebuild later) but is never newer than it.
        gen = _live_generation()
        snap = _CURRENT.snapshot
        if snap is None or snap.generation != gen:
            declared = _CURRENT.declared
            snap = load_file(declared, gen) if declared else SystemTopology.detect(generation=gen)
            _CURRENT.snapshot = snap
        return snap


def refresh() -> int:
    """Invalidate the process-wide snapshot; returns the new generation."""
    with _CURRENT.lock:
        _CURRENT.refreshes += 1
    return _live_generation()


def use_topology_file(path: str | os.PathLike[str] | None) -> int:
    """Build future snapshots from a declared file (`None`: detect again); validates the file
    now and returns the new generation."""
    if path is not None:
        load_file(path)
    with _CURRENT.lock:
        _CURRENT.declared = None if path is None else os.fspath(path)
    return refresh()
