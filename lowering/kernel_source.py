"""Generated kernel sources, regenerated from their bodies: the check that a `fuel.c_kernel`
or `fuel.triton_kernel` runs only what this fuel's own code generator writes.

A kernel symbol keeps the fused ops it was generated from (`fuel_dialect.kernel_body`).
`expected_source` runs this fuel's generator (`lowering.cpu.codegen.c_source`,
`lowering.triton.codegen.kernel_source`) over that body; `check_kernel_sources` refuses a
module whose kernel text differs, or that has a kernel without a body to check it against.
The bundle loader and the tools that read IR from files run it before anything is compiled or
loaded, so a source that came with the IR (a crafted bundle, an edited `.mlir`) is never
trusted as code unless the user says so (a signed bundle, `--allow-kernel-source`).
"""

from __future__ import annotations

from xdsl.ir import Operation

from fuel_dialect.kernel_body import KERNEL_SYMBOLS
from fuel_dialect.ops_cpu import CKernelOp
from fuel_dialect.ops_triton import TritonKernelOp
from lowering.cpu.codegen import c_source
from lowering.fusion import body_group
from lowering.triton.codegen import kernel_source
from runtime.loaders.c import CodegenError as CCodegenError
from runtime.loaders.triton import CodegenError as TritonCodegenError


class KernelSourceError(Exception):
    """A generated kernel whose source this fuel would not write from its ops."""


def expected_source(op: CKernelOp | TritonKernelOp) -> str:
    """The source this fuel's code generator writes for the kernel's body; `KernelSourceError`
    when the body is missing or is not one the generator handles."""
    name = op.sym_name.data
    try:
        group = body_group(op.body, op.space.get_values())
        if isinstance(op, CKernelOp):
            return c_source(group, name)
        return kernel_source(group, name)
    except (ValueError, KeyError, CCodegenError, TritonCodegenError) as e:
        raise KernelSourceError(f"{op.name} @{name}: {e}") from None


def check_kernel_sources(root: Operation, where: str) -> int:
    """Every generated kernel under `root` holds exactly `expected_source` of its body;
    `KernelSourceError` naming `where` and the kernel otherwise. Returns the kernels checked."""
    n = 0
    for op in root.walk():
        if op.name not in KERNEL_SYMBOLS:
            continue
        assert isinstance(op, CKernelOp | TritonKernelOp)
        try:
            want = expected_source(op)
        except KernelSourceError as e:
            raise KernelSourceError(
                f"{where}: {e}; refused (it would run source fuel did not generate)"
            ) from None
        if op.source.data != want:
            raise KernelSourceError(
                f"{where}: {op.name} @{op.sym_name.data}: its source is not what this fuel "
                "generates from its ops (edited or crafted); refused"
            )
        n += 1
    return n
