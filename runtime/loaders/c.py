"""Generated C -> shared library -> fuel `Kernel` (run time): the compiler driver, the
cache and the loader.

Compiled with the system C compiler (`$CC`, else `cc`) as `-O2 -fPIC -shared -std=c11
-ffp-contract=off` (never -ffast-math or -march=native: the .so goes into portable bundles);
the library is cached by content hash (source, compiler, flags, machine) in `c_cache_dir()`,
unless a bundle registered a verified prebuilt one (`register_prebuilt`). `CKernel` is a fuel
`Kernel` on contiguous numpy arrays; `CKernel.fn` is the raw ctypes entry the executor calls
with a prebuilt pointer array. The emitter that writes the sources is `lowering.cpu.codegen`.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fuel_dialect.dtypes import io_signature
from runtime import knobs
from runtime.dtypes import to_numpy
from runtime.loaders.triton import cache_dir

CFLAGS = ("-O2", "-fPIC", "-shared", "-std=c11", "-ffp-contract=off", "-fno-math-errno")
"""Compiler flags: no fast-math, no FMA contraction (results stay the numpy kernels'), no
-march=native (bundles must run on any CPU of the architecture). -fno-math-errno only lets
sqrt be an instruction (errno is never read)."""


class CodegenError(Exception):
    """A group the C code generator cannot handle, a missing compiler or a failed compile."""


def c_cache_dir() -> Path:
    """Where compiled kernels are cached: `cpu/` beside the Triton cache (`cache_dir()`), so
    `$FUEL_CACHE_DIR` and `$XDG_CACHE_HOME` move both."""
    return cache_dir().parent / "cpu"


def find_compiler() -> list[str] | None:
    """The C compiler command (`$CC`, split like a shell word list, else `cc`), or None."""
    cmd = knobs.c_compiler()
    return cmd if cmd and shutil.which(cmd[0]) else None


@functools.lru_cache(maxsize=8)
def _compiler_id(cmd: tuple[str, ...]) -> str:
    try:
        res = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise CodegenError(f"C compiler {' '.join(cmd)!r} does not run: {e}") from None
    return res.stdout.splitlines()[0] if res.stdout else " ".join(cmd)


def library_key(source: str, flags: Sequence[str] = CFLAGS) -> str:
    """The cache key of `source`'s library: sha256 of the source, compiler, flags, machine."""
    cmd = find_compiler()
    who = _compiler_id(tuple(cmd)) if cmd else "no-compiler"
    text = "\0".join([source, who, " ".join(flags), platform.machine()])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def source_key(source: str) -> str:
    """The sha256 of a kernel's source (what a bundle's .so is registered under)."""
    return hashlib.sha256(source.encode()).hexdigest()[:24]


_PREBUILT: dict[str, Path] = {}
"""source_key -> a verified prebuilt library (from a bundle): used instead of compiling."""


def prebuilt(key: str) -> Path | None:
    """The registered prebuilt library for source key `key`, if any."""
    return _PREBUILT.get(key)


def register_prebuilt(source: str, path: Path) -> None:
    """Use the library at `path` for `source` (a bundle's .so, after hash verification)."""
    _PREBUILT[source_key(source)] = path


def compile_source(source: str, dest: Path, flags: Sequence[str] = CFLAGS) -> None:
    """Compile `source` into the shared library `dest` (atomically) with `flags`; CodegenError
    carries the compiler's stderr."""
    cmd = find_compiler()
    if cmd is None:
        raise CodegenError(
            f"no C compiler found (tried ${{CC}}={knobs.c_compiler_env()!r}, then 'cc'); "
            "install gcc or clang, or build with codegen=none"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".cc.") as tmp:
        src, so = Path(tmp) / "kernel.c", Path(tmp) / "kernel.so"
        src.write_text(source)
        try:
            res = subprocess.run(
                [*cmd, *flags, "-o", str(so), str(src), "-lm"],
                capture_output=True,
                text=True,
                timeout=300,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise CodegenError(f"C compiler {' '.join(cmd)!r} failed to run: {e}") from None
        if res.returncode != 0:
            raise CodegenError(
                f"C compile failed ({' '.join(cmd)} exit {res.returncode}):\n{res.stderr.strip()}"
            )
        os.replace(so, dest)


def library_path(source: str, flags: Sequence[str] = CFLAGS) -> Path:
    """The compiled library of `source`: a registered prebuilt one, else the cache entry
    (compiled now with `flags` if missing)."""
    pre = _PREBUILT.get(source_key(source))
    if pre is not None:
        return pre
    path = c_cache_dir() / f"k_{library_key(source, flags)}.so"
    if not path.exists():
        compile_source(source, path, flags)
    return path


_LOADED: dict[Path, ctypes.CDLL] = {}


def load_function(name: str, source: str) -> Any:
    """The ctypes function `name` of `source`'s library (compiled or taken from the cache);
    refused under `FUEL_NATIVE=0` (no native code at all)."""
    if not knobs.native_enabled():
        raise CodegenError(
            f"generated C kernel '{name}' is native code, which FUEL_NATIVE=0 forbids"
        )
    path = library_path(source)
    lib = _LOADED.get(path)
    if lib is None:
        try:
            lib = _LOADED[path] = ctypes.CDLL(str(path))
        except OSError as e:
            raise CodegenError(f"cannot load compiled kernel {path}: {e}") from None
    try:
        fn = getattr(lib, name)
    except AttributeError:
        raise CodegenError(f"{path} does not define '{name}'") from None
    fn.argtypes, fn.restype = None, None
    return fn


@dataclass(frozen=True)
class CPlan:
    """A generated C kernel as plain data (what a `fuel.c_kernel` op holds)."""

    name: str
    source: str
    inputs: tuple[tuple[tuple[int, ...], str], ...]
    outputs: tuple[tuple[tuple[int, ...], str], ...]

    @staticmethod
    def from_op(op: Any) -> CPlan:
        """From a `fuel.c_kernel` op."""
        return CPlan(op.sym_name.data, op.source.data, *io_signature(op.function_type))


def pointer_array(n: int) -> Any:
    """A ctypes array of `n` pointers (the `args` of a generated kernel)."""
    return (ctypes.c_void_p * n)()


class CKernel:
    """A fuel `Kernel` (`kernel(inputs, outputs, params)`, destination-passing) running a
    generated C kernel on numpy arrays; `fn(ptrs)` is the raw entry (a pointer array of
    C-contiguous buffers of the planned shapes and dtypes, inputs then outputs)."""

    def __init__(self, plan: CPlan) -> None:
        self.plan = plan
        self.fn = load_function(plan.name, plan.source)

    def __call__(self, inputs: Sequence[Any], outputs: Sequence[Any], params: Any) -> None:
        plan = self.plan
        for what, got, want in (("input", inputs, plan.inputs), ("output", outputs, plan.outputs)):
            if len(got) != len(want):
                raise CodegenError(f"{plan.name}: expected {len(want)} {what}s, got {len(got)}")
            for j, (a, (shape, dt)) in enumerate(zip(got, want, strict=True)):
                if not isinstance(a, np.ndarray) or a.shape != shape or a.dtype != to_numpy(dt):
                    have = f"{a.dtype}{list(a.shape)}" if isinstance(a, np.ndarray) else type(a)
                    raise CodegenError(
                        f"{plan.name}: {what} {j} must be {dt}{list(shape)}, got {have}"
                    )
        ins = [np.ascontiguousarray(a) for a in inputs]
        outs = [
            o
            if o.flags.c_contiguous and not any(np.may_share_memory(o, a) for a in ins)
            else np.empty(o.shape, o.dtype)
            for o in outputs
        ]
        ptrs = pointer_array(len(ins) + len(outs))
        for j, a in enumerate((*ins, *outs)):
            ptrs[j] = a.ctypes.data
        self.fn(ptrs)
        for o, t in zip(outs, outputs, strict=True):
            if o is not t:
                np.copyto(t, o)


_KERNELS: dict[CPlan, CKernel] = {}


def kernel_for(plan: CPlan) -> CKernel:
    """The loaded `CKernel` of `plan` (one per distinct plan in this process)."""
    k = _KERNELS.get(plan)
    if k is None:
        k = _KERNELS[plan] = CKernel(plan)
    return k
