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

Value specialisation (what Triton's JIT does per call, decided here once per spec): a pointer
argument is compiled as 16-byte aligned and an integer argument whose value the spec fixes
(`sizes` names it) as divisible by 16 when it is, both as Triton's `tt.divisibility = 16`, which
lets loads and stores vectorise. `AotKernel.specialization` records what was assumed and
`AotKernel.accepts` checks a launch's argument values against it. See `specialization_of` for
why the pointer rule is sound.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from runtime import knobs
from runtime.kernels.triton.spec import Params, TritonKernelSpec

_TARGET = re.compile(r"^sm_(\d{2,3})a?$")
MIN_ARCH, MAX_ARCH = 75, 121
"""Compute capabilities Triton's NVIDIA backend accepts here (Turing .. Blackwell)."""


class AotError(ValueError):
    """A bad target, a kernel that is not a Triton kernel, or a failed compilation."""


ALIGN = 16
"""The divisibility Triton specialises on (`tt.divisibility`), in bytes or units."""

SPECIALIZATIONS: Mapping[str, tuple[str, str]] = {
    "aligned16": ("pointer", f"is not {ALIGN}-byte aligned"),
    "div16": ("integer", f"is not divisible by {ALIGN}"),
}
"""Specialisation name -> (what it applies to, how a launch value violates it). Both compile
to `tt.divisibility = 16` and hold when `value % 16 == 0` (a pointer's value: its address)."""

_INT_TYPES = frozenset({"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"})


def specialization_of(spec: TritonKernelSpec) -> dict[str, tuple[str, ...]]:
    """The value specialisation `spec`'s launch is compiled with: argument -> assumptions.

    - every pointer: `aligned16`. A fuel GPU run hands kernels whole buffers: each is the front
      of its own `torch.empty` allocation (`runtime.devices.TorchDevice.view`; CUDA's caching
      allocator aligns blocks to 512 bytes), views with offsets are made on the host only
      (`runtime.views.ViewPlanner`), and fuel's kernels pass those tensors (or fresh scratch)
      as is, carrying element offsets as integer arguments (`x_off`, ...). A pointer from
      anywhere else is caught by `AotKernel.accepts`.
    - an integer the spec fixes, i.e. one `sizes` names (kernels pass that size as the
      argument; `tests/triton/test_aot.py` checks every family), when it is a multiple of 16:
      `div16`. Triton's JIT would also turn an argument equal to 1 into a constant; AOT does
      not, since that drops the argument from the cubin's parameters and `runtime_args()`
      (a launcher's contract) would no longer be the spec's.
    """
    out: dict[str, tuple[str, ...]] = {}
    for name, ty in spec.signature.items():
        if ty.startswith("*"):
            out[name] = ("aligned16",)
        elif ty in _INT_TYPES and name in spec.sizes and int(spec.sizes[name]) % ALIGN == 0:
            out[name] = ("div16",)
    return out


def check_args(specialization: Mapping[str, Sequence[str]], args: Mapping[str, int]) -> str | None:
    """Why launch argument values (pointers as addresses) break `specialization`, or None.

    An argument it names must be in `args`; an unknown specialisation (a newer record) is a
    refusal, never ignored. A record without specialisation (`{}`) accepts anything.
    """
    for name, kinds in specialization.items():
        for kind in kinds:
            if kind not in SPECIALIZATIONS:
                return f"argument '{name}' has unknown specialisation {kind!r}"
            what, broken = SPECIALIZATIONS[kind]
            if name not in args:
                return f"{what} argument '{name}' is missing (compiled as {kind})"
            value = int(args[name])
            if value % ALIGN:
                shown = hex(value) if what == "pointer" else str(value)
                return f"{what} argument '{name}' = {shown} {broken} (compiled as {kind})"
    return None


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
    """One expression per grid axis over `sizes` (see `runtime.kernels.triton.spec`)."""
    sizes: Mapping[str, int] = field(default_factory=dict)
    launch_grid: tuple[int, ...] = ()
    """`grid` evaluated for `sizes` (the shapes compiled)."""
    scratch: Mapping[str, int] = field(default_factory=dict)
    """Triton 3.x hidden arguments: global / profile scratch sizes (bytes) and alignment."""
    specialization: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Argument -> value assumptions compiled in (`SPECIALIZATIONS`); empty: none."""

    @property
    def threads_per_block(self) -> int:
        return 32 * self.num_warps

    def runtime_args(self) -> list[str]:
        """Names of the arguments a launcher passes, in order (constexprs excluded)."""
        return [n for n, t in self.signature.items() if t != "constexpr"]

    def accepts(self, args: Mapping[str, int]) -> str | None:
        """None if the cubin may run on these argument values (pointers as addresses), else
        why not: a launcher must then JIT-compile the source instead (`check_args`)."""
        return check_args(self.specialization, args)

    def to_json(self) -> dict[str, Any]:
        """The record as JSON-ready data (the cubin base64)."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out |= {"cubin": base64.b64encode(self.cubin).decode(), "grid": list(self.grid)}
        out["launch_grid"] = list(self.launch_grid)
        for key in ("signature", "constexprs", "sizes", "scratch"):
            out[key] = dict(out[key])
        out["specialization"] = {k: list(v) for k, v in self.specialization.items()}
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AotKernel:
        """The record `to_json` wrote; one written before `specialization` existed has none."""
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in data.items() if k in known}
        kw |= {"cubin": base64.b64decode(data["cubin"]), "grid": tuple(data["grid"])}
        kw["launch_grid"] = tuple(data.get("launch_grid", ()))
        spec = data.get("specialization") or {}
        kw["specialization"] = {k: tuple(v) for k, v in spec.items()}
        return cls(**kw)


def interpreting() -> bool:
    """Whether this process's `@triton.jit` functions are interpreter objects."""
    import triton.language as tl

    return type(tl.cdiv).__name__ == "InterpretedFunction"


def compile_spec(spec: TritonKernelSpec, target: str, specialize: bool = True) -> AotKernel:
    """Compile one launch for `target` ("sm_90", "sm_80", ...)."""
    return compile_specs([spec], target, specialize)[0]


def compile_specs(
    specs: Sequence[TritonKernelSpec],
    target: str,
    specialize: bool = True,
    python_path: tuple[str, ...] = (),
) -> tuple[AotKernel, ...]:
    """Compile launches for `target`, in order, value-specialised (`specialization_of`)
    unless `specialize` is False. `python_path`: where the child process (below) also finds
    the kernels' modules (e.g. the generated kernels' cache).

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
        return tuple(_from_json(_build(_request(s, specialize), target), s) for s in specs)
    requests = [_request(s, specialize) for s in specs]
    payload = json.dumps({"target": target, "specs": requests})
    root = str(Path(__file__).resolve().parents[2])
    env = knobs.child_env((root, *python_path), TRITON_INTERPRET="0", FUEL_GPU="1")
    proc = subprocess.run(
        [sys.executable, "-m", "lowering.triton.aot"],
        input=payload,
        capture_output=True,
        text=True,
        cwd=root,
        env=env,
        timeout=1800,
    )
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["(no message)"]
        raise AotError(f"AOT compile for {target} failed: {tail[0]}")
    built = json.loads(proc.stdout)
    return tuple(_from_json(b, s) for b, s in zip(built, specs, strict=True))


def _request(spec: TritonKernelSpec, specialize: bool) -> dict[str, Any]:
    py = spec.fn.fn  # JITFunction and InterpretedFunction both wrap the Python function
    special = specialization_of(spec) if specialize else {}
    return {
        "name": spec.name,
        "module": py.__module__,
        "fn": py.__name__,
        "signature": dict(spec.signature),
        "constexprs": dict(spec.constexprs),
        "num_warps": spec.num_warps,
        "num_stages": spec.num_stages,
        "specialization": {k: list(v) for k, v in special.items()},
    }


def _attrs(fn: Any, specialization: Mapping[str, Sequence[str]]) -> dict[tuple[int, ...], Any]:
    """Triton's per-argument attributes (`ASTSource(attrs=...)`, keyed by argument path)."""
    return {
        (fn.arg_names.index(name),): [["tt.divisibility", ALIGN]]
        for name, kinds in specialization.items()
        if kinds
    }


def _build(req: Mapping[str, Any], target: str) -> dict[str, Any]:
    """Compile one request in this (non-interpreting) process; JSON-ready result."""
    import importlib

    import triton
    from triton.compiler import ASTSource

    fn = getattr(importlib.import_module(req["module"]), req["fn"])
    special = req.get("specialization", {})
    src = ASTSource(
        fn=fn,
        signature=dict(req["signature"]),
        constexprs=dict(req["constexprs"]),
        attrs=_attrs(fn, special),
    )
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
        "specialization": special,
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
        specialization={k: tuple(v) for k, v in b["specialization"].items()},
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
