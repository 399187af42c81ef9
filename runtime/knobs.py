"""Every environment variable and switch fuel reads, in one place (as Triton's `knobs`).

Each knob is read when it is asked for, never at import, so a caller (or a test) that sets
the environment first is seen. No other module of fuel reads or writes `os.environ`; the
generated Triton sources read `TRITON_INTERPRET` themselves, in the process that runs them.

| variable | read by | meaning |
|---|---|---|
| `FUEL_CACHE_DIR` | `cache_root` | root of fuel's caches (generated Triton, compiled C) |
| `XDG_CACHE_HOME` | `cache_root`, `judge_report` | else `~/.cache` (fuel's go to `fuel/`) |
| `FUEL_JUDGE_REPORT` | `judge_report` | the Judge report the picker reads |
| `CC` | `c_compiler` | the C compiler command (a shell word list), else `cc` |
| `FUEL_NATIVE` | `native_enabled` | `0`: no native code (native library, generated C) |
| `FUEL_NUM_THREADS` | `num_threads` | the native library's pool size |
| `FUEL_EMULATE_GPU` | `emulate_gpu` | `1`: GPU targets count as runnable, emulated |
| `FUEL_GPU` | `configure_triton` | `1`: compile Triton kernels for real even without a GPU |
| `TRITON_INTERPRET` | `triton_interpret` | `1`: Triton kernels run in Triton's interpreter |
| `TRITON_DEFAULT_FP_FUSION` | `configure_triton` | defaults to `1` (FMA contraction, as before) |
| `FUEL_SHAPE_CACHE` | `shape_cache_size` | shapes a symbolic-dims executor keeps specialised (8) |
| `FUEL_LOG` | `log_level` | `info`: log each compile stage's time; `debug`: and its start |

A value fuel cannot use (`FUEL_NUM_THREADS=abc`, `FUEL_NATIVE=yes`: fuel's switches are `0` or
`1`) is a `KnobError` naming the variable, which the command-line tools report as a bad input.
"""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path


class KnobError(ValueError):
    """An environment variable of fuel's holds a value fuel cannot use; the message names it."""


def _switch(name: str, default: str) -> bool:
    """A 0/1 variable: `1` is on, `0` (or unset/empty: `default`) off; anything else a
    `KnobError` (a typo such as `yes` must not quietly mean off)."""
    value = os.environ.get(name, "").strip() or default
    if value not in ("0", "1"):
        raise KnobError(f"{name} must be 0 or 1, got {value!r}")
    return value == "1"


EMULATE_ENV = "FUEL_EMULATE_GPU"
"""`FUEL_EMULATE_GPU=1`: GPU targets count as runnable, emulated (CPU tensors + the Triton
interpreter) where this machine lacks the GPU."""


def xdg_cache_home() -> Path:
    """`$XDG_CACHE_HOME`, else `~/.cache`."""
    return Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"))


def cache_root() -> Path:
    """`$FUEL_CACHE_DIR`, else `$XDG_CACHE_HOME/fuel`, else `~/.cache/fuel`."""
    root = os.environ.get("FUEL_CACHE_DIR")
    return Path(root) if root else xdg_cache_home() / "fuel"


def judge_report() -> Path:
    """`$FUEL_JUDGE_REPORT`, else `$XDG_CACHE_HOME/fuel/judge.json`, else ~/.cache/fuel/."""
    explicit = os.environ.get("FUEL_JUDGE_REPORT")
    return Path(explicit) if explicit else xdg_cache_home() / "fuel" / "judge.json"


def c_compiler_env() -> str:
    """`$CC` as given ("" when unset)."""
    return os.environ.get("CC", "")


def c_compiler() -> list[str]:
    """The C compiler command: `$CC` split like a shell word list, else `["cc"]`."""
    return shlex.split(c_compiler_env() or "cc")


def native_enabled() -> bool:
    """`FUEL_NATIVE` is not `0` (unset: on)."""
    return _switch("FUEL_NATIVE", "1")


def num_threads() -> str:
    """`$FUEL_NUM_THREADS` as given ("" when unset); the native library parses it."""
    return os.environ.get("FUEL_NUM_THREADS", "")


def shape_cache_size() -> int:
    """`$FUEL_SHAPE_CACHE`: how many input-shape specialisations an executor of a module with
    dim symbols keeps (least recently used dropped first); default 8, at least 1."""
    value = os.environ.get("FUEL_SHAPE_CACHE", "").strip() or "8"
    if not value.isdigit() or int(value) < 1:
        raise KnobError(f"FUEL_SHAPE_CACHE must be a positive integer, got {value!r}")
    return int(value)


def emulate_gpu() -> bool:
    """`FUEL_EMULATE_GPU=1` (unset: off)."""
    return _switch(EMULATE_ENV, "0")


def triton_interpret() -> bool:
    """`TRITON_INTERPRET=1`: this process runs Triton kernels in Triton's interpreter."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def request_triton_interpreter() -> None:
    """Ask for the interpreter unless the environment already decided (`fuel run --emulate`);
    only effective before anything imports triton."""
    os.environ.setdefault("TRITON_INTERPRET", "1")


def configure_triton(gpu_present: Callable[[], bool]) -> None:
    """Decide how Triton kernels run in this process, BEFORE anything imports triton (Triton
    reads `TRITON_INTERPRET` once, at its import): the interpreter where `gpu_present()` says
    no, unless `FUEL_GPU=1` forces real compilation; an explicit `TRITON_INTERPRET` wins."""
    # Triton 3.9 warns when this is unset; "1" keeps its historical default (FMA contraction).
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    if os.environ.get("FUEL_GPU") == "1" or "TRITON_INTERPRET" in os.environ:
        return
    if not gpu_present():
        os.environ["TRITON_INTERPRET"] = "1"


LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}
"""`FUEL_LOG` values and the `logging` level each sets on the `fuel` logger."""


def log_level() -> int | None:
    """`FUEL_LOG` as a `logging` level (None when unset); `KnobError` for another value."""
    value = os.environ.get("FUEL_LOG", "").strip().lower()
    if not value:
        return None
    if value not in LOG_LEVELS:
        raise KnobError(f"FUEL_LOG must be one of {', '.join(LOG_LEVELS)}, got {value!r}")
    return LOG_LEVELS[value]


def child_env(python_path: tuple[str, ...] = (), **overrides: str) -> Mapping[str, str]:
    """The environment of a child process: this one's, with `overrides`, and `python_path`
    put in front of `$PYTHONPATH` (this process's own environment is left as it is)."""
    env = dict(os.environ, **overrides)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (*python_path, env.get("PYTHONPATH")) if p)
    return env
