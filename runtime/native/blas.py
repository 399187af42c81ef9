"""One thread pool per process: the BLAS libraries fuel's kernels call run on the calling
thread, so the only pool a plan wakes is fuel's native one (`runtime.native`).

Why: numpy's OpenBLAS and torch's OpenMP/MKL each keep a pool of their own whose idle threads
spin for a while after every call. A plan that mixed them with fuel's pool had two pools
spinning on the same two cores: 8 tiny batched products on torch-blas took 55 of a Llama
decode step's 64 ms with one other process busy on a core (issue 15). So every multithreaded
CPU kernel fuel runs is on fuel's pool (kernel_source `native`, `native-flashdecode`:
`POOL_KERNEL_SOURCES`); every other CPU kernel runs on the thread that calls it:

* numpy's BLAS (OpenBLAS) is limited to one thread while an executor runs or the Judge times a
  kernel (`one_thread`): the limit is set through the library's own `*_set_num_threads`
  entry point, found among the libraries this process has already loaded (`RTLD_NOLOAD`:
  nothing new is loaded), and restored when the scope ends, so a program that embeds fuel
  keeps its own setting outside fuel's calls.
* torch's intra-op threads are set to one around each torch-blas product
  (`torch_single_thread`; a get and two sets cost ~0.3 us).

`pool_of(kernel_source)` names the pool a CPU kernel uses: `"fuel"` or `"caller"`; nothing
else exists, so neither the cost model nor the Judge can choose a second pool.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

POOL_FUEL = "fuel"
"""The kernel runs its parallel parts on fuel's native pool (the executor's)."""
POOL_CALLER = "caller"
"""The kernel runs on the calling thread only (its BLAS limited to one thread)."""
POOL_KERNEL_SOURCES = frozenset({"native", "native-flashdecode"})
"""The CPU kernel sources whose kernels run on fuel's pool."""

_SETTERS = (
    "scipy_openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "openblas_set_num_threads",
)
_GETTERS = tuple(s.replace("set_num", "get_num") for s in _SETTERS)


def pool_of(kernel_source: str) -> str:
    """The thread pool a CPU kernel of this `kernel_source` uses: `POOL_FUEL` or
    `POOL_CALLER`."""
    return POOL_FUEL if kernel_source in POOL_KERNEL_SOURCES else POOL_CALLER


@functools.cache
def _openblas() -> tuple[tuple[Any, Any], ...]:
    """(get, set) of every OpenBLAS this process has loaded (numpy's, scipy's ...)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.rsplit("/", 1)[-1]}
    except OSError:
        return ()
    found = []
    for path in sorted(p for p in paths if p.startswith("/")):
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        except OSError:
            continue
        for get_name, set_name in zip(_GETTERS, _SETTERS, strict=True):
            get, put = getattr(lib, get_name, None), getattr(lib, set_name, None)
            if get is not None and put is not None:
                get.argtypes, get.restype = [], ctypes.c_int
                put.argtypes, put.restype = [ctypes.c_int], None
                found.append((get, put))
                break
    return tuple(found)


def openblas_threads() -> list[int]:
    """The thread count of each loaded OpenBLAS now (for tests and reports)."""
    import numpy  # noqa: F401 - numpy's OpenBLAS must be loaded to be found

    return [get() for get, _ in _openblas()]


_LOCK = threading.Lock()
_DEPTH = [0]
_SAVED: list[int] = []


@contextmanager
def one_thread() -> Iterator[None]:
    """numpy's BLAS on one thread inside the scope (re-entrant; restored at the outermost
    exit)."""
    import numpy  # noqa: F401 - numpy's OpenBLAS must be loaded to be found

    with _LOCK:
        _DEPTH[0] += 1
        if _DEPTH[0] == 1:
            libs = _openblas()
            _SAVED[:] = [get() for get, _ in libs]
            for (_, put), n in zip(libs, _SAVED, strict=True):
                if n != 1:
                    put(1)
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH[0] -= 1
            if _DEPTH[0] == 0:
                for (_, put), n in zip(_openblas(), _SAVED, strict=True):
                    if n != 1:
                        put(n)


@contextmanager
def torch_single_thread(torch: Any) -> Iterator[None]:
    """torch's intra-op threads set to one for the scope, then restored."""
    n = torch.get_num_threads()
    if n == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def torch_threads() -> int | None:
    """torch's intra-op thread count now, or None where torch is not imported."""
    torch = sys.modules.get("torch")
    return None if torch is None else int(torch.get_num_threads())


__all__ = [
    "POOL_CALLER",
    "POOL_FUEL",
    "POOL_KERNEL_SOURCES",
    "one_thread",
    "openblas_threads",
    "pool_of",
    "torch_single_thread",
    "torch_threads",
]
