"""Triton softmax along any axis: one program per row, online max/sum, then one write pass.

The host moves `axis` last (a copy only when that layout is not already row-contiguous). Pass
1 keeps a BLOCK-lane running max `m` and rescaled sum `l` (`l = l * e^(m_old - m) + e^(x - m)`),
combined across lanes at the end; pass 2 writes `e^(x - M) / L`. Fully masked lanes hold -inf
and are guarded so no NaN arises from `-inf - -inf`. Compute is f32 for every dtype.
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
    out_target,
    signature,
)

BLOCK = 1024


@triton.jit
def softmax_kernel(x, y, N, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x + row * sx
    yr = y + row * sy
    cols = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
    l = tl.zeros((BLOCK,), dtype=tl.float32)  # noqa: E741 - the flash-attention name
    for off in range(0, N, BLOCK):
        v = f32(tl.load(xr + off + cols, mask=off + cols < N, other=float("-inf")))
        m_new = tl.maximum(m, v)
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # no -inf - -inf = NaN
        l = l * tl.exp(m - shift) + tl.exp(v - shift)  # noqa: E741
        m = m_new
    big = tl.max(m, axis=0)
    big = tl.where(big == float("-inf"), 0.0, big)
    total = tl.sum(l * tl.exp(m - big), axis=0)
    inv = tl.div_rn(1.0, total)
    for off in range(0, N, BLOCK):
        mask = off + cols < N
        v = f32(tl.load(xr + off + cols, mask=mask, other=float("-inf")))
        tl.store(yr + off + cols, to_out(tl.exp(v - big) * inv, y.dtype.element_ty), mask=mask)


def rows_along(x: torch.Tensor, axis: int) -> torch.Tensor:
    """`x` with `axis` moved last, as (rows, n) with unit column stride."""
    moved = x.movedim(axis, -1)
    rows = moved.reshape(-1, x.shape[axis])
    return rows if rows.stride(-1) == 1 else rows.contiguous()


class SoftmaxKernel:
    """softmax (params: axis) as a fuel Kernel on torch tensors."""

    family = "softmax"

    def __init__(self) -> None:
        self.__qualname__ = "triton_softmax"

    def launches(
        self, shapes: Shapes, dtypes: Sequence[str], params: Params
    ) -> tuple[TritonKernelSpec, ...]:
        x = shapes[0]
        n = int(x[params["axis"]]) if x else 1
        total = 1
        for d in x:
            total *= int(d)
        types = {"x": TRITON_PTR[dtypes[0]], "y": TRITON_PTR[dtypes[1]]}
        types |= {"N": "i32", "sx": "i64", "sy": "i64"}
        fn = softmax_kernel
        sizes = {"R": total // n if n else 0, "N": n}
        return (
            TritonKernelSpec(
                f"softmax_{dtypes[0]}", fn, signature(fn, types), {"BLOCK": BLOCK}, ("R",), sizes
            ),
        )

    def __call__(
        self, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor], params: Params
    ) -> None:
        x, out = inputs[0], outputs[0]
        if out.numel() == 0:
            return
        axis = int(params["axis"]) % x.dim()
        rows = rows_along(x, axis)
        last = axis == x.dim() - 1
        y = out_target(out) if last else torch.empty_like(rows)
        yrows = y.view(-1, x.shape[axis]) if last else y
        (spec,) = self.launches([tuple(x.shape)], ["f32", "f32"], {"axis": axis})
        spec.launch(rows, yrows, rows.shape[1], rows.stride(0), yrows.stride(0))
        if last:
            finish(out, y)
        else:
            out.copy_(y.reshape(out.movedim(axis, -1).shape).movedim(-1, axis))
