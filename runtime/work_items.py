"""The executor's schedule items: plain functions called as `fn(*args)` per run.

Each item does one thing (run a branch's picked arm, submit a device kernel, copy between
devices, re-point a C kernel's per-run arrays, make a view) with everything it needs prebuilt
by the executor's compile step, so a run is a loop over `(fn, args)` tuples.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fuel_dialect.branch import GATE_COMPARE
from runtime import native
from runtime.compiled import READY, CompletionHandle
from runtime.devices import DeviceRuntime

Patch = tuple[list[Any], int, bool]  # (argument list, index, kernel needs contiguous input)


class Slot:
    """The completion of a device value's producer; recorded only if a copy waits on it."""

    __slots__ = ("handle", "waited")

    def __init__(self) -> None:
        self.waited = False
        self.handle: CompletionHandle = READY


def gate_holds(terms: list[tuple[str, int, int, str, int]], args: list[np.ndarray]) -> bool:
    """Evaluate a parsed gate over the branch's gate operands (shapes and 0-d values)."""
    for kind, i, axis, cmp, const in terms:
        got = args[i].shape[axis] if kind == "dim" else int(args[i])
        if not GATE_COMPARE[cmp](got, const):
            return False
    return True


def branch_item(
    arms: list,
    gates: list,
    gate_args: list,
    pick: list[int],
    consumers: list,
    out_slots: list[tuple[Slot, DeviceRuntime]],
    taken: list[int],
) -> None:
    p = pick[0]
    arm = p if p < len(arms) and gate_holds(gates[p], gate_args) else 0
    taken[0] = arm
    items, holder = arms[arm]
    for fn, args in items:
        fn(*args)
    for v, lst in zip(holder, consumers, strict=True):
        for target, j, contiguous in lst:
            target[j] = np.ascontiguousarray(v) if contiguous else v
    for slot, rt in out_slots:  # the arm's work is queued before this event
        if slot.waited:
            slot.handle = rt.record()


def arm_alloc_item(lazy: list, held: list[tuple[DeviceRuntime, Any]]) -> None:
    """Allocate a placement arm's device buffers (returned at the end of the run)."""
    for rt, dt, shape, consumers in lazy:
        raw, t = rt.alloc(dt, shape)
        held.append((rt, raw))
        for target, j, _ in consumers:
            target[j] = t


def device_item(
    rt: DeviceRuntime, kernel: Any, ins: list, outs: list, params: Any, slot: Slot, label: str
) -> None:
    rt.submit(kernel, (ins, outs, params), label)
    if slot.waited:
        slot.handle = rt.record()


def copy_in_item(rt: DeviceRuntime, ins: list, outs: list, slot: Slot) -> None:
    """Host -> device: the host producer is synchronous, so nothing to wait for."""
    rt.from_host(ins[0], outs[0])
    if slot.waited:
        slot.handle = rt.record()


def copy_out_item(rt: DeviceRuntime, ins: list, outs: list, src: Slot) -> None:
    """Device -> host: wait for the producer only, then read synchronously."""
    src.handle.wait()
    rt.to_host(ins[0], outs[0])


def copy_peer_item(rt: DeviceRuntime, ins: list, outs: list, src: Slot, slot: Slot) -> None:
    """Device -> another device: wait for the producer, then copy on the target's stream."""
    src.handle.wait()
    rt.from_peer(ins[0], outs[0])
    if slot.waited:
        slot.handle = rt.record()


def c_dynamic_item(fn: Any, ptrs: Any, arrays: list, dyn: list[int], seen: list) -> None:
    """A C kernel reading per-run values: re-point only arrays not seen in the last run
    (holding the last one keeps its buffer alive, so an identical object has the same data)."""
    for j in dyn:
        a = arrays[j]
        if a is not seen[j]:
            seen[j] = a
            ptrs[j] = a.ctypes.data
    fn(ptrs)


def view_item(
    ins: list[Any], consumers: list[Patch], shape: tuple[int, ...], index: tuple | None
) -> None:
    """A view of a per-run value (a reshape, or a basic `index` then a reshape): make it and
    hand it to its consumers."""
    v = (ins[0] if index is None else ins[0][index]).reshape(shape)
    for lst, j, contiguous in consumers:
        lst[j] = np.ascontiguousarray(v) if contiguous else v


def native_program_item(fn: Any, words: int, n: int, kernels: list[str]) -> None:
    """Run a native program (`runtime.native.program`): n kernel calls in one C call."""
    failed = fn(words, n)
    if failed >= 0:
        raise MemoryError(
            f"'{kernels[failed]}' (record {failed} of the native program) could "
            "not allocate its scratch"
        )


def fuse_native_runs(
    items: list[tuple[Any, list[Any]]], names: list[str], encoded: Mapping[int, Any], keep: list
) -> tuple[list[tuple[Any, list[Any]]], list[str]]:
    """Each run of consecutive items that have native records (at least one of them a native
    kernel's, not only ufunc adds or generated C calls) becomes one item calling the native
    program of their records, in order: the same calls, one Python call (a run of one native
    kernel too: its record skips the kernel's per-call checks and pointer reads). The program
    reaches every array only through raw pointers, so the replaced items' arguments (weights,
    planned buffers), the records' scratch arrays and the program's words are kept alive in
    `keep`."""
    out_items: list[tuple[Any, list[Any]]] = []
    out_names: list[str] = []
    run: list[int] = []

    def flush() -> None:
        recs = [encoded[id(items[i][1])] for i in run]
        ufunc = (native.OP_ADD, native.OP_MUL, native.OP_CALL)  # alone: no native kernel yet
        if any(r.words[0] not in ufunc for r in recs):
            fn, words, n = native.program(recs)
            keep.extend([words, *(r.keep for r in recs), *(items[i][1] for i in run)])
            kernels = [names[i] for i in run]
            out_items.append((native_program_item, [fn, words.ctypes.data, n, kernels]))
            out_names.append(
                f"native program [{', '.join(k.removeprefix('fuel.') for k in kernels)}]"
            )
        else:
            out_items.extend(items[i] for i in run)
            out_names.extend(names[i] for i in run)
        run.clear()

    for i, item in enumerate(items):
        if id(item[1]) in encoded:
            run.append(i)
            continue
        flush()
        out_items.append(item)
        out_names.append(names[i])
    flush()
    return out_items, out_names
