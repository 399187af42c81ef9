"""Moving a planned host buffer: every place a compiled schedule refers to it, found once.

A run hands its large host outputs to the caller without copying them: the caller gets the
executor's own planned buffer. The next run must not write into a buffer the caller still
holds, so it first moves the schedule off any such buffer onto a free one (one the caller has
dropped, else a new one) — a linker's relocations, applied only when needed. A caller that
drops each run's outputs (a benchmark loop) never causes a move: the same buffers serve every
run; one that keeps them (a decode loop feeding the KV cache back) moves a few pointers per
run instead of copying megabytes.

`census(raw, roots, words)` finds every reference to the bytes of `raw` (a planned buffer, a
1-D uint8 array owning its data) in what a run touches:

* ndarrays viewing it, in lists and dicts (an item's argument lists, the executor's outputs):
  replaced by the same view of the new buffer;
* pointers into it: ints in lists, `ctypes` pointer arrays (a generated C kernel's arguments),
  and the int64 words of native programs (`words`): moved by the same offset.

A reference it cannot rewrite (a view in a tuple or a closure, a pointer in a tuple) makes the
buffer immovable: `census` returns None and the executor copies that output, as before. A
buffer is held by the caller when its reference count exceeds the count the schedule alone
gives it (`Relocations.held`): numpy views keep their base alive, so any array the caller
derived from an output counts too.
"""

from __future__ import annotations

import ctypes
import functools
import sys
import types
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from runtime.native import ptr as _ptr

_MAX_DEPTH = 12


@dataclass
class Relocations:
    """The references to one planned buffer (`raw`), and how to move them to another."""

    raw: np.ndarray
    views: list[tuple[Any, Any, int, tuple[int, ...], tuple[int, ...], np.dtype]] = field(
        default_factory=list
    )
    """(container, key, byte offset, shape, strides, dtype) of each view of `raw`."""
    ints: list[tuple[Any, Any, int]] = field(default_factory=list)
    """(list or ctypes array, index, byte offset) of each pointer into `raw`."""
    words: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    """(program words, indices of the words pointing into `raw`)."""
    spare: list[np.ndarray] = field(default_factory=list)
    """Buffers moved off earlier, for reuse once nobody else holds them."""
    baseline: int = 0

    def settle(self) -> None:
        """Count the schedule's own references to `raw`: this object's, getrefcount's argument
        and one per distinct view (a numpy view holds its base). Anything else that holds it
        (an output the caller kept, an object the compile step left for the garbage collector)
        makes it `held`: a needless move at worst, never a write into a held buffer."""
        self.baseline = 2 + len({id(box[key]) for box, key, *_ in self.views})

    def held(self) -> bool:
        """Whether something besides the schedule refers to `raw` (the caller's outputs)."""
        return sys.getrefcount(self.raw) > self.baseline

    def move(self, keep_spare: int = 2) -> None:
        """Point the schedule at a buffer nobody else holds: a spare, else a new one."""
        old, new = self.raw, None
        for i in range(len(self.spare)):
            if sys.getrefcount(self.spare[i]) <= 2:  # the list's and the argument's
                new = self.spare.pop(i)
                break
        if new is None:
            new = np.empty_like(old)
        delta = _ptr(new) - _ptr(old)
        for box, key, off, shape, strides, dt in self.views:
            box[key] = np.ndarray(shape, dt, buffer=new, offset=off, strides=strides)
        for box, key, off in self.ints:
            box[key] = _ptr(new) + off
        for w, idx in self.words:
            w[idx] += delta
        self.raw = new
        if len(self.spare) < keep_spare:
            self.spare.append(old)
        del old
        self.settle()


def census(
    raw: np.ndarray, roots: Iterable[Any], words: Iterable[np.ndarray]
) -> Relocations | None:
    """Every reference to `raw`'s bytes reachable from `roots` (see the module's comment), or
    None where one cannot be rewritten."""
    lo = _ptr(raw)
    hi = lo + raw.nbytes
    rel = Relocations(raw)
    seen: set[int] = set()

    def inside(p: Any) -> bool:
        return isinstance(p, int) and not isinstance(p, bool) and lo <= p < hi

    def array_in(a: np.ndarray) -> bool:
        return a.size > 0 and lo <= _ptr(a) < hi

    def visit(x: Any, box: Any, key: Any, depth: int) -> bool:
        """False where a reference to `raw` sits somewhere it cannot be rewritten."""
        if isinstance(x, np.ndarray):
            if not array_in(x):
                return True
            if box is None:
                return False
            rel.views.append((box, key, _ptr(x) - lo, x.shape, x.strides, x.dtype))
            return True
        if isinstance(x, int):
            if not inside(x):
                return True
            if box is None:
                return False
            rel.ints.append((box, key, x - lo))
            return True
        if isinstance(x, ctypes.Array):
            for j in range(len(x)):
                p = x[j]
                if inside(p):
                    rel.ints.append((x, j, p - lo))
            return True
        if isinstance(x, ctypes._SimpleCData):
            return not inside(x.value)
        if isinstance(x, str | bytes | float | complex | type | types.ModuleType) or x is None:
            return True
        if id(x) in seen:
            return True
        if depth > _MAX_DEPTH:  # deeper than any schedule nests: unknown, so immovable
            return False
        seen.add(id(x))
        if isinstance(x, list):
            return all(visit(y, x, j, depth + 1) for j, y in enumerate(x))
        if isinstance(x, dict):
            return all(visit(y, x, k, depth + 1) for k, y in list(x.items()))
        if isinstance(x, tuple | set | frozenset):
            return all(visit(y, None, None, depth + 1) for y in x)
        if isinstance(x, functools.partial):
            parts = [x.func, *x.args, *x.keywords.values()]
            return all(visit(y, None, None, depth + 1) for y in parts)
        if hasattr(x, "__func__") and hasattr(x, "__self__"):  # a bound method
            return visit(x.__self__, None, None, depth + 1)
        closure = getattr(x, "__closure__", None)
        if closure is not None or hasattr(x, "__code__"):
            cells = [c.cell_contents for c in closure or () if _filled(c)]
            cells += list(getattr(x, "__defaults__", None) or ())
            return all(visit(y, None, None, depth + 1) for y in cells)
        state = list(getattr(x, "__dict__", {}).values())
        for cls in type(x).__mro__:
            for name in getattr(cls, "__slots__", ()):
                if isinstance(name, str) and hasattr(x, name):
                    state.append(getattr(x, name))
        return all(visit(y, None, None, depth + 1) for y in state)

    for root in roots:
        if not visit(root, None, None, 0):
            return None
    for w in words:
        idx = np.flatnonzero((w >= lo) & (w < hi))
        if idx.size:
            rel.words.append((w, idx))
    rel.settle()
    return rel


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:  # an empty cell
        return False
    return True
