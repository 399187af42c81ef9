"""`fuel-opt -t TARGET`: what fuel-opt prints instead of the IR (mlir-translate's role).

| target | prints |
|---|---|
| `mlir` | the IR (the default; xDSL's, with `--print-op-generic` and friends) |
| `fuel-c` | the C source of every `fuel.c_kernel` |
| `fuel-triton` | the Python source of every generated `fuel.triton_kernel` |
| `fuel-bundle` | `fuel compile`'s kernel bundle of the module (`-o NAME.fuelbundle`, `-o DIR`) |

`fuel-c` and `fuel-triton` print the kernels the module holds. A module holding none (fuel IR
not yet lowered) is lowered first, on a copy, as `fuel compile` lowers it: `convert-fuel-to-c`
with its defaults, or the Triton backend's `convert` stage (fused ops without a Triton kernel
decomposed, host-only ops kept on the host, then `convert-fuel-to-triton`); `{convert=false}`
prints only what is there. So `fuel-opt m.mlir -p fuel-optimize -t fuel-c` shows the C that
`fuel compile m.mlir` generates. A module with no fusible group prints a comment saying so.

`fuel-bundle{target=cpu,sm_90}` builds the bundle for those targets (default `cpu`; the cpu
target optimizes a module not yet optimized), refusing, as `fuel compile` does, IR whose
generated kernels hold a source fuel would not write from their ops (docs/bundles.md). Weights
come from the file the module names (`fuel.weights`, beside the input; `-` reads it relative
to the working directory). A bundle is binary, so, as LLVM tools refuse to write bitcode to a
terminal, it is written to `-o`, or to stdout only when stdout is not a terminal
(`fuel-opt m.mlir -t fuel-bundle > m.fuelbundle`).

xDSL's other targets (`llvm`, `x86-asm`, `riscv-asm`, `wgsl`, ...) print only their own
dialects, never fuel IR, so fuel-opt does not offer them.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import IO, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.utils.exceptions import DiagnosticException
from xdsl.utils.target import Target

from fuel_dialect.attrs import WEIGHTS_ATTR
from fuel_dialect.ops_cpu import CKernelOp
from fuel_dialect.ops_triton import LibraryCallOp, TritonKernelOp
from runtime.module import FuelModule, ModuleError
from runtime.weights import WeightsError, weights_from_bytes


def _signature(k: CKernelOp | TritonKernelOp) -> str:
    space = list(k.space.get_values())
    return f"@{k.sym_name.data} space {space}: {k.function_type}"


@dataclass(frozen=True)
class CTarget(Target):
    """The C source of every `fuel.c_kernel` (lowering a module that has none first)."""

    name: ClassVar[str] = "fuel-c"
    convert: bool = True
    """Lower a module without `fuel.c_kernel`s with `convert-fuel-to-c` (on a copy)."""

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        # lazy: the C lowering loads the executor and codegen (~0.4 s of every fuel-opt start)
        from lowering.cpu.convert_fuel_to_c import ConvertFuelToCPass

        kernels = [op for op in module.ops if isinstance(op, CKernelOp)]
        if not kernels and self.convert:
            module = module.clone()
            ConvertFuelToCPass().apply(ctx, module)
            kernels = [op for op in module.ops if isinstance(op, CKernelOp)]
            output.write("// fuel-opt -t fuel-c: lowered a copy with convert-fuel-to-c\n")
        if not kernels:
            output.write("// no fuel.c_kernel: no host fusion group pays off in C here\n")
        for k in kernels:
            output.write(f"\n// ----- fuel.c_kernel {_signature(k)}\n{k.source.data.rstrip()}\n")


@dataclass(frozen=True)
class TritonTarget(Target):
    """The source of every generated `fuel.triton_kernel` (lowering a module that has none
    first), and the library kernels its `fuel.library_call`s name."""

    name: ClassVar[str] = "fuel-triton"
    convert: bool = True
    """Lower a module without `fuel.triton_kernel`s as the Triton backend does (on a copy)."""
    block: int = 1024
    """Elements per program of the generated kernels (convert-fuel-to-triton's `block`)."""

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        kernels = [op for op in module.ops if isinstance(op, TritonKernelOp)]
        if not kernels and self.convert:
            # lowering.triton loads the Triton kernel table: only when this target is asked for
            from lowering.backend import BackendError
            from lowering.triton.backend import TritonOptions, convert_stage

            try:
                module = convert_stage(module, {}, TritonOptions("sm_90", block=self.block))
            except BackendError as e:
                raise DiagnosticException(f"-t fuel-triton: {e}") from None
            kernels = [op for op in module.ops if isinstance(op, TritonKernelOp)]
            output.write("# fuel-opt -t fuel-triton: lowered a copy as the Triton backend does\n")
        if not kernels:
            output.write("# no fuel.triton_kernel: no elementwise fusion group here\n")
        for k in kernels:
            output.write(
                f"\n# ----- fuel.triton_kernel {_signature(k)}\n{k.source.data.rstrip()}\n"
            )
        calls = sorted({_call(op) for op in module.walk() if isinstance(op, LibraryCallOp)})
        if calls:
            output.write("\n# library kernels called (runtime/kernels/triton):\n")
            output.writelines(f"#   {c}\n" for c in calls)


def _call(op: LibraryCallOp) -> str:
    name, dtypes, backend = op.key()
    return f"{name} [{', '.join(dtypes)}] on {backend}"


@dataclass(frozen=True)
class BundleTarget(Target):
    """A kernel bundle of the module (see the module doc): binary, written by `write`."""

    name: ClassVar[str] = "fuel-bundle"
    target: tuple[str, ...] = ("cpu",)
    """The bundle's targets (`cpu`, `sm_XY`), as `fuel compile --target`."""

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        raise DiagnosticException("fuel-bundle is binary: fuel-opt writes it with -o or to a pipe")

    def write(self, module: ModuleOp, input_dir: Path, dest: str | None, stdout: IO[bytes]) -> None:
        """Write the bundle to `dest` (archive or directory, by its suffix as `fuel compile`),
        else to `stdout` unless that is a terminal; a module that cannot be bundled is a
        `DiagnosticException` saying why (what fuel-opt reports as a bad input)."""
        # lazy: the bundle writer loads every backend's lowering (~0.6 s of every fuel-opt start)
        from lowering.backend import BackendError
        from lowering.bundle import build_bundle, write_archive_to, write_bundle
        from lowering.kernel_source import KernelSourceError, check_kernel_sources
        from runtime.bundle import BundleError

        if dest is None and stdout.isatty():
            raise DiagnosticException(
                "-t fuel-bundle writes a binary archive: give -o NAME.fuelbundle (or a "
                "directory), or redirect stdout"
            )
        try:
            check_kernel_sources(module, "-t fuel-bundle")  # as fuel compile: IR is data
            fm = with_weights(module, input_dir)
            if dest is not None:
                write_bundle(fm, dest, self.target, created_by=CREATED_BY)
                return
            files = build_bundle(fm, self.target, created_by=CREATED_BY)
        except KernelSourceError as e:
            raise DiagnosticException(str(e)) from None
        except (ModuleError, WeightsError, BundleError, BackendError, OSError) as e:
            raise DiagnosticException(f"-t fuel-bundle: {e}") from None
        buf = io.BytesIO()  # seekable: the same bytes as the file form
        write_archive_to(buf, files)
        stdout.write(buf.getvalue())
        stdout.flush()


CREATED_BY = "fuel-opt -t fuel-bundle"


def with_weights(module: ModuleOp, input_dir: Path) -> FuelModule:
    """`module` with the weights of the file it names (`fuel.weights`, relative to
    `input_dir`), checked against its `fuel.weight` ops."""
    attr = module.attributes.get(WEIGHTS_ATTR)
    weights = {}
    if isinstance(attr, StringAttr):
        path = input_dir / attr.data
        weights = weights_from_bytes(path.read_bytes(), str(path))
    fm = FuelModule(module, weights)
    fm.check_weights()
    return fm
