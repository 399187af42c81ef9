"""Triton rotary position embedding: x (..., S, D) by cos, sin (S, D/2).

One program per (leading..., s) row of x viewed as (rows, D); position `s = row % S` selects
the cos/sin row. Half-split (default) pairs x[i] with x[i + D/2]; `interleaved` pairs x[2i] with
x[2i + 1]; each pair (a, b) becomes (a cos - b sin, b cos + a sin), computed in f32. For
f16/bf16 inputs both products are exact in f32 (11 + 11 and 8 + 8 significant bits <= 24), so
the difference is rounded once in f32 and once to the output: faithful (<= 1 ulp).
"""

from collections.abc import Sequence

import torch
import triton
import triton.language as tl

from runtime.kernels.triton._common import f32, to_out
from runtime.kernels.triton.spec import (
    TRITON_PTR,
    Params,
    Shapes,
    TritonKernelSpec,
    finish,
    next_pow2,
    out_target,
    signature,
)


@triton.jit
def rope_kernel(x, c, s, y, S, HALF, INTERLEAVED: tl.constexpr, BLOCK_H: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    pos = row % S
    i = tl.arange(0, BLOCK_H)
    mask = i < HALF
    if INTERLEAVED:
        ia = 2 * i
        ib = 2 * i + 1
    else:
        ia = i
        ib = i + HALF
    base = row * 2 * HALF
    a = f32(tl.load(x + base + ia, mask=mask, other=0.0))
    b = f32(tl.load(x + base + ib, mask=mask, other=0.0))
    cv = f32(tl.load(c + pos * HALF + i, mask=mask, other=0.0))
    sv = f32(tl.load(s + pos * HALF + i, mask=mask, other=0.0))
    tl.store(y + base + ia, to_out(a * cv - b * sv, y.dtype.element_ty), mask=mask)
    tl.store(y + base + ib, to_out(b * cv + a * sv, y.dtype.element_ty), mask=mask)


class RopeKernel:
    """rope (params: interleaved) as a fuel Kernel on torch tensors."""

    family = "rope"

    def __init__(self) -> None:
        self.__qualname__ = "triton_rope"

    def launches(
        self, shapes: Shapes, dtypes: Sequence[str], params: Params
    ) -> tuple[TritonKernelSpec, ...]:
        x = shapes[0]
        rows = 1
        for d in x[:-1]:
            rows *= int(d)
        half = int(x[-1]) // 2
        types = {nm: TRITON_PTR[dt] for nm, dt in zip("xcsy", dtypes, strict=True)}
        types |= {"S": "i32", "HALF": "i32"}
        const = {"INTERLEAVED": bool(params.get("interleaved")), "BLOCK_H": next_pow2(half)}
        fn = rope_kernel
        sizes = {"R": rows, "S": int(x[-2]), "HALF": half}
        return (
            TritonKernelSpec(f"rope_{dtypes[0]}", fn, signature(fn, types), const, ("R",), sizes),
        )

    def __call__(
        self, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor], params: Params
    ) -> None:
        out = outputs[0]
        if out.numel() == 0:
            return
        x, c, s = (t.contiguous() for t in inputs)
        y = out_target(out)
        (spec,) = self.launches([tuple(x.shape)], ["f32"] * 4, params)
        spec.launch(x, c, s, y, x.shape[-2], x.shape[-1] // 2)
        finish(out, y)
