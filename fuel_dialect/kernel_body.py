"""The body of a generated kernel symbol (`fuel.c_kernel`, `fuel.triton_kernel`).

A generated kernel keeps, beside its source text, the fused ops it was generated from: one
block whose arguments are the kernel's inputs (in `function_type` order), the splat constants
it inlines, the member ops in program order, and a `fuel.yield` of the values it stores. The
source is a function of the body, so whoever runs the kernel can regenerate it with its own
code generator and refuse a source that differs (`lowering.kernel_source`), instead of
trusting text that came with the IR or a bundle.

    fuel.c_kernel @c_fused_0 space = [4, 8] : (tensor<4x8xf32>, tensor<8xf32>)
        -> tensor<4x8xf32> source = "..." {
    ^bb0(%x: tensor<4x8xf32>, %b: tensor<8xf32>):
      %0 = fuel.add %x, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
      %1 = fuel.tanh %0 : tensor<4x8xf32> -> tensor<4x8xf32>
      fuel.yield %1 : tensor<4x8xf32>
    }

The ops of a body are not part of the program: walks over the program (`program_ops`) skip
them.
"""

from __future__ import annotations

from collections.abc import Iterator

from xdsl.dialects.builtin import FunctionType
from xdsl.ir import Operation, Region

from fuel_dialect.base import fail
from fuel_dialect.branch import YieldOp

KERNEL_SYMBOLS = ("fuel.c_kernel", "fuel.triton_kernel")
"""Ops whose region is a generated kernel's body, not program code."""


def verify_body(op: Operation, body: Region | None, function_type: FunctionType) -> None:
    """No body, or one block taking the kernel's inputs and yielding its outputs, with
    no value read from outside."""
    if body is None or not body.blocks:
        return
    if len(body.blocks) != 1:
        raise fail(op, f"body must have one block, got {len(body.blocks)}")
    block = body.block
    args = [a.type for a in block.args]
    if args != list(function_type.inputs.data):
        raise fail(op, "body arguments must be the kernel's input types")
    term = block.last_op
    yielded = [v.type for v in term.values] if isinstance(term, YieldOp) else None
    if yielded != list(function_type.outputs.data):
        raise fail(op, "body must end in fuel.yield of the kernel's output types")
    inside = {*block.args, *(r for o in block.ops for r in o.results)}
    for o in block.ops:
        for v in o.operands:
            if v not in inside:
                raise fail(op, f"body op '{o.name}' reads a value defined outside the kernel")


def program_ops(root: Operation) -> Iterator[Operation]:
    """`root.walk()` without the bodies of generated kernels (their ops do not run as ops)."""
    yield root
    if root.name in KERNEL_SYMBOLS:
        return
    for region in root.regions:
        for block in region.blocks:
            for op in block.ops:
                yield from program_ops(op)
