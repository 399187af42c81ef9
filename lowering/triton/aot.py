"""Ahead-of-time compilation of fuel's Triton kernels to PTX and cubin (no GPU needed).

    from lowering.triton.aot import compile_kernel
    entry = table.lookup("matmul", ("f16", "f16", "f16"), "cuda")
    (mm,) = compile_kernel(entry, "sm_90", [(4096, 4096), (4096, 4096), (4096, 4096)],
                           ("f16", "f16", "f16"))
    mm.cubin, mm.kernel_name, mm.launch_grid, mm.shared_bytes  # what a launcher needs

`compile_kernel` asks a registered Triton kernel (a `BindingEntry` or the kernel object) for the
launches it makes at the given operand shapes / dtypes / op params (`TritonKernel.launches`) and
compiles each with `triton.compile` for the target; `compile_spec` compiles one
`TritonKernelSpec`. An `AotKernel` records, as plain data, everything needed to launch the
cubin: the entry symbol, the Triton signature (argument order: the non-constexpr entries, in
order; Triton 3.x appends two hidden global-scratch pointers, see `AotKernel.scratch`), the
constexprs, num_warps / num_stages, dynamic shared memory, and the grid both as expressions
over named sizes and evaluated for the shapes compiled. Compilation happens in-process and is
cached by Triton on disk (~0.5-2 s per kernel cold).
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lowering.triton.spec import Params, TritonKernelSpec

_TARGET = re.compile(r"^sm_(\d{2,3})a?$")
MIN_ARCH, MAX_ARCH = 75, 121
"""Compute capabilities Triton's NVIDIA backend accepts here (Turing .. Blackwell)."""


class AotError(ValueError):
    """A bad target, a kernel that is not a Triton kernel, or a failed compilation."""


def parse_target(target: str) -> Any:
    """`"sm_90"` (or `"sm_90a"`) -> `GPUTarget("cuda", 90, 32)`; `AotError` for anything else."""
    from triton.backends.compiler import GPUTarget

    m = _TARGET.match(target.strip()) if isinstance(target, str) else None
    if m is None:
        raise AotError(f"bad CUDA target {target!r}: expected 'sm_XY' such as 'sm_80' or 'sm_90'")
    arch = int(m.group(1))
    if not MIN_ARCH <= arch <= MAX_ARCH:
        raise AotError(
            f"unsupported CUDA target {target!r}: Triton needs compute capability "
            f"{MIN_ARCH // 10}.{MIN_ARCH % 10} .. {MAX_ARCH // 10}.{MAX_ARCH % 10}"
        )
    return GPUTarget("cuda", arch, 32)


@dataclass(frozen=True)
class AotKernel:
    """One compiled launch: the binaries and everything a launcher needs, as plain data."""

    name: str
    """fuel's name for the launch (op, variant, dtype), e.g. `matmul_64x64x32_f16`."""
    kernel_name: str
    """The PTX/cubin entry symbol (`cuModuleGetFunction`)."""
    target: str
    ptx: str
    cubin: bytes
    signature: Mapping[str, str]
    """Every argument in order -> Triton type; "constexpr" ones are baked in, not passed."""
    constexprs: Mapping[str, int | float | bool | str]
    num_warps: int
    num_stages: int
    shared_bytes: int
    """Dynamic shared memory to request at launch."""
    grid: tuple[str, ...]
    """One expression per grid axis over `sizes` (see `lowering.triton.spec`)."""
    sizes: Mapping[str, int] = field(default_factory=dict)
    launch_grid: tuple[int, ...] = ()
    """`grid` evaluated for `sizes` (the shapes compiled)."""
    scratch: Mapping[str, int] = field(default_factory=dict)
    """Triton 3.x hidden arguments: global / profile scratch sizes (bytes) and alignment."""

    @property
    def threads_per_block(self) -> int:
        return 32 * self.num_warps

    def runtime_args(self) -> list[str]:
        """Names of the arguments a launcher passes, in order (constexprs excluded)."""
        return [n for n, t in self.signature.items() if t != "constexpr"]


def interpreting() -> bool:
    """Whether this process's `@triton.jit` functions are interpreter objects."""
    import triton.language as tl

    return type(tl.cdiv).__name__ == "InterpretedFunction"


def compile_spec(spec: TritonKernelSpec, target: str) -> AotKernel:
    """Compile one launch for `target` ("sm_90", "sm_80", ...)."""
    return compile_specs([spec], target)[0]


def compile_specs(specs: Sequence[TritonKernelSpec], target: str) -> tuple[AotKernel, ...]:
    """Compile launches for `target`, in order.

    In a process running the Triton interpreter, every `@triton.jit` function (Triton's own
    `tl.cdiv`, `tl.sum`, ... included) is an interpreter object that `triton.compile` cannot
    lower, and fuel's kernels select interpreter-only workarounds. There the specs are compiled
    by one child process started without the interpreter (`python -m lowering.triton.aot`, JSON
    over stdin/stdout, binaries base64): ~3 s of imports, once per call, so batch the specs.
    """
    parse_target(target)
    if not specs:
        return ()
    if not interpreting():
        return tuple(_from_json(_build(_request(s), target), s) for s in specs)
    payload = json.dumps({"target": target, "specs": [_request(s) for s in specs]})
    env = dict(os.environ, TRITON_INTERPRET="0", FUEL_GPU="1")
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, "-m", "lowering.triton.aot"],
        input=payload, capture_output=True, text=True, cwd=root, env=env, timeout=1800,
    )  # fmt: skip
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["(no message)"]
        raise AotError(f"AOT compile for {target} failed: {tail[0]}")
    built = json.loads(proc.stdout)
    return tuple(_from_json(b, s) for b, s in zip(built, specs, strict=True))


def _request(spec: TritonKernelSpec) -> dict[str, Any]:
    py = spec.fn.fn  # JITFunction and InterpretedFunction both wrap the Python function
    return {
        "name": spec.name, "module": py.__module__, "fn": py.__name__,
        "signature": dict(spec.signature), "constexprs": dict(spec.constexprs),
        "num_warps": spec.num_warps, "num_stages": spec.num_stages,
    }  # fmt: skip


def _build(req: Mapping[str, Any], target: str) -> dict[str, Any]:
    """Compile one request in this (non-interpreting) process; JSON-ready result."""
    import importlib

    import triton
    from triton.compiler import ASTSource

    fn = getattr(importlib.import_module(req["module"]), req["fn"])
    src = ASTSource(fn=fn, signature=dict(req["signature"]), constexprs=dict(req["constexprs"]))
    options = {"num_warps": req["num_warps"], "num_stages": req["num_stages"]}
    try:
        compiled = triton.compile(src, target=parse_target(target), options=options)
    except Exception as e:  # triton raises CompilationError, RuntimeError, AssertionError ...
        raise AotError(f"Triton failed to compile {req['name']} for {target}: {e}") from e
    md = compiled.metadata
    return {
        "kernel_name": str(md.name),
        "ptx": str(compiled.asm["ptx"]),
        "cubin": base64.b64encode(bytes(compiled.asm["cubin"])).decode(),
        "num_warps": int(md.num_warps),
        "num_stages": int(md.num_stages),
        "shared_bytes": int(md.shared),
        "target": target,
        "scratch": {
            "global_scratch_size": int(getattr(md, "global_scratch_size", 0) or 0),
            "global_scratch_align": int(getattr(md, "global_scratch_align", 1) or 1),
            "profile_scratch_size": int(getattr(md, "profile_scratch_size", 0) or 0),
        },
    }


def _from_json(b: Mapping[str, Any], spec: TritonKernelSpec) -> AotKernel:
    return AotKernel(
        name=spec.name,
        kernel_name=b["kernel_name"],
        target=b["target"],
        ptx=b["ptx"],
        cubin=base64.b64decode(b["cubin"]),
        signature=dict(spec.signature),
        constexprs=dict(spec.constexprs),
        num_warps=b["num_warps"],
        num_stages=b["num_stages"],
        shared_bytes=b["shared_bytes"],
        grid=spec.grid,
        sizes=dict(spec.sizes),
        launch_grid=spec.launch_grid(),
        scratch=dict(b["scratch"]),
    )


def kernel_specs(
    entry_or_kernel: Any,
    shapes: Sequence[Sequence[int]],
    dtypes: Sequence[str],
    params: Params | None = None,
) -> tuple[TritonKernelSpec, ...]:
    """The launches a Triton kernel (or its `BindingEntry`) makes for these operands."""
    kernel = getattr(entry_or_kernel, "kernel", entry_or_kernel)
    launches = getattr(kernel, "launches", None)
    if launches is None:
        name = getattr(kernel, "__qualname__", repr(kernel))
        raise AotError(f"{name} is not a Triton kernel (it has no `launches`): cannot AOT it")
    return launches([tuple(int(d) for d in s) for s in shapes], tuple(dtypes), dict(params or {}))


def compile_kernel(
    entry_or_kernel: Any,
    target: str,
    shapes: Sequence[Sequence[int]],
    dtypes: Sequence[str],
    params: Params | None = None,
) -> tuple[AotKernel, ...]:
    """Compile every launch of a Triton kernel at these operand shapes (inputs then outputs),
    dtypes and op params, for `target`; in launch order (flash decoding gives two)."""
    return compile_specs(kernel_specs(entry_or_kernel, shapes, dtypes, params), target)


def _main() -> int:
    """Child-process entry of `compile_specs`: JSON request on stdin, JSON list on stdout."""
    req = json.load(sys.stdin)
    try:
        out = [_build(r, req["target"]) for r in req["specs"]]
    except AotError as e:
        print(f"error: {e}".replace("\n", " "), file=sys.stderr)
        return 1
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
