"""Generated Triton source -> `@triton.jit` function -> fuel `Kernel` (run time).

`cache_dir()` holds the generated sources (Triton needs real files); `load_kernel` runs a
source under its cache file's name; `KernelPlan` is what a `fuel.triton_kernel` op holds,
and `GeneratedKernel` launches it on torch tensors. The emitter that writes the sources is
`lowering.triton.codegen`. torch and triton are imported lazily.
"""

from __future__ import annotations

import hashlib
import importlib.util
import linecache
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuel_dialect.dtypes import io_signature
from runtime import knobs
from runtime.dtypes import torch_dtype
from runtime.fsutil import atomic_write_text

POINTER = {
    "f64": "*fp64",
    "f32": "*fp32",
    "f16": "*fp16",
    "bf16": "*bf16",
    "i64": "*i64",
    "i32": "*i32",
    "i8": "*i8",
    "u8": "*u8",
    "i1": "*i1",
}
"""fuel dtype -> Triton pointer type in a kernel signature."""


class CodegenError(Exception):
    """A group or kernel that the Triton code generator cannot handle."""


def cache_dir() -> Path:
    """Where generated kernel sources are written: `$FUEL_CACHE_DIR/triton`, else
    `$XDG_CACHE_HOME/fuel/triton`, else `~/.cache/fuel/triton`."""
    return knobs.cache_root() / "triton"


def source_file(name: str, source: str) -> Path:
    """The cache file holding `source` (content-addressed; written atomically if missing)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    path = cache_dir() / f"{name}_{digest}.py"
    if not path.exists() or path.read_text() != source:
        atomic_write_text(path, source)
    return path


_LOADED: dict[tuple[Path, bool], Any] = {}


def load_kernel(name: str, source: str, *, compiled: bool = False) -> Any:
    """The `@triton.jit` function `name` defined by `source`, executed from `source` itself
    under the name of its cache file (which the AOT child process imports).

    `compiled=True` imports it with Triton's interpreter switched off, so the kernel and its
    helpers are real `JITFunction`s that `triton.compile` accepts even when this process runs
    kernels under `TRITON_INTERPRET=1`.
    """
    path = source_file(name, source)
    key = (path, compiled)
    if key not in _LOADED:
        from triton import knobs

        # the module is named like its file, so a child process with cache_dir() on its
        # PYTHONPATH imports the same kernel (lowering.triton.aot compiles there)
        modname = path.stem + ("_aot" if compiled else "")
        spec = importlib.util.spec_from_file_location(modname, path)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        # Run `source` itself, never the file's current bytes: the file is only where the
        # code claims to come from. linecache serves the same text to Triton's
        # inspect.getsource (no mtime: never re-read from disk).
        linecache.cache[str(path)] = (len(source), None, source.splitlines(True), str(path))
        code = compile(source, str(path), "exec")
        saved = knobs.runtime.interpret
        knobs.runtime.interpret = saved and not compiled
        try:
            sys.modules[modname] = module
            exec(code, module.__dict__)  # noqa: S102 (a generated, verified kernel source)
        finally:
            knobs.runtime.interpret = saved
        _LOADED[key] = getattr(module, name)
    return _LOADED[key]


@dataclass(frozen=True)
class KernelPlan:
    """A generated kernel as plain data (what a `fuel.triton_kernel` op holds)."""

    name: str
    source: str
    space: tuple[int, ...]
    block: int
    inputs: tuple[tuple[tuple[int, ...], str], ...]
    outputs: tuple[tuple[tuple[int, ...], str], ...]

    @staticmethod
    def from_op(op: Any) -> KernelPlan:
        """From a `fuel.triton_kernel` op."""
        ins, outs = io_signature(op.function_type)
        return KernelPlan(
            op.sym_name.data,
            op.source.data,
            tuple(op.space.get_values()),
            op.block.value.data,
            ins,
            outs,
        )

    @property
    def numel(self) -> int:
        return math.prod(self.space)

    @property
    def grid(self) -> tuple[int]:
        return (max(1, -(-self.numel // self.block)),)

    def signature(self) -> dict[str, str]:
        """The Triton signature: pointers for inputs then outputs, N, the BLOCK constexpr."""
        sig = {f"in{j}": POINTER[dt] for j, (_, dt) in enumerate(self.inputs)}
        sig |= {f"out{j}": POINTER[dt] for j, (_, dt) in enumerate(self.outputs)}
        sig["N"] = "i64" if self.numel >= 2**31 else "i32"
        sig["BLOCK"] = "constexpr"
        return sig


class GeneratedKernel:
    """A fuel `Kernel` (`kernel(inputs, outputs, params)`, destination-passing) that launches a
    generated kernel on torch tensors; inputs and outputs are checked against the plan."""

    def __init__(self, plan: KernelPlan, num_warps: int = 4) -> None:
        self.plan, self.num_warps = plan, num_warps
        self.fn = load_kernel(plan.name, plan.source)

    def __call__(self, inputs: Sequence[Any], outputs: Sequence[Any], params: Any) -> None:
        plan = self.plan
        for what, got, want in (("input", inputs, plan.inputs), ("output", outputs, plan.outputs)):
            if len(got) != len(want):
                raise CodegenError(f"{plan.name}: expected {len(want)} {what}s, got {len(got)}")
            for j, (t, (shape, dt)) in enumerate(zip(got, want, strict=True)):
                if tuple(t.shape) != shape or t.dtype != torch_dtype(dt):
                    raise CodegenError(
                        f"{plan.name}: {what} {j} must be {dt}{list(shape)}, "
                        f"got {t.dtype}{list(t.shape)}"
                    )
        ins = [t.contiguous() for t in inputs]
        outs = [t if t.is_contiguous() else t.new_empty(t.shape) for t in outputs]
        self.fn[plan.grid](*ins, *outs, plan.numel, BLOCK=plan.block, num_warps=self.num_warps)
        for t, o in zip(outputs, outs, strict=True):
            if o is not t:
                t.copy_(o)
