"""Triton reductions: `reduce_sum`, `reduce_mean`, `reduce_max`, `reduce_min` over given axes.

The host moves the reduced axes last (`permute`, then a contiguous copy only when the layout
needs one) and views the input as (rows, n); one program reduces one row in BLOCK-wide strips:
a BLOCK-lane f32 accumulator, then one tree reduction (`tl.sum` / `tl.max`). The order of
additions depends only on n and BLOCK, so results are bit-stable. max/min propagate NaN like
numpy (a NaN flag per lane) and are exact; f16/bf16 accumulate in f32.
"""

from collections.abc import Sequence

import torch
import triton
import triton.language as tl

from runtime.kernels.triton._common import f32, to_out
from runtime.kernels.triton.spec import TRITON_PTR, Params, Shapes, TritonKernelSpec, signature

BLOCK = 1024
OP_CODES = {"reduce_sum": 0, "reduce_mean": 1, "reduce_max": 2, "reduce_min": 3}


@triton.jit
def reduce_kernel(x, y, N, stride_row, OP: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = x + row * stride_row
    cols = tl.arange(0, BLOCK)
    if OP <= 1:
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for off in range(0, N, BLOCK):
            v = tl.load(base + off + cols, mask=off + cols < N, other=0.0)
            acc += f32(v)
        r = tl.sum(acc, axis=0)
        if OP == 1:
            r = tl.div_rn(r, N.to(tl.float32))
    else:
        fill = float("-inf") if OP == 2 else float("inf")
        acc = tl.full((BLOCK,), fill, dtype=tl.float32)
        nan = tl.zeros((BLOCK,), dtype=tl.int32)
        for off in range(0, N, BLOCK):
            v = f32(tl.load(base + off + cols, mask=off + cols < N, other=fill))
            nan = nan | (v != v).to(tl.int32)
            if OP == 2:
                acc = tl.where(v > acc, v, acc)
            else:
                acc = tl.where(v < acc, v, acc)
        if OP == 2:
            r = tl.max(acc, axis=0)
        else:
            r = tl.min(acc, axis=0)
        r = tl.where(tl.max(nan, axis=0) > 0, float("nan"), r)
    tl.store(y + row, to_out(r, y.dtype.element_ty))


def as_rows(x: torch.Tensor, axes: Sequence[int]) -> torch.Tensor:
    """`x` with `axes` moved last, viewed as (rows, n) with unit column stride."""
    keep = [d for d in range(x.dim()) if d not in axes]
    moved = x.permute(*keep, *axes)
    n = 1
    for a in axes:
        n *= x.shape[a]
    rows = moved.reshape(-1, n) if n else moved.reshape(-1, 0)
    return rows if rows.stride(-1) == 1 or n <= 1 else rows.contiguous()


class ReduceKernel:
    """One reduction op as a fuel Kernel on torch tensors (params: axes, keepdim)."""

    family = "reduction"

    def __init__(self, op: str) -> None:
        self.op = op
        self.__qualname__ = f"triton_{op}"

    def launches(
        self, shapes: Shapes, dtypes: Sequence[str], params: Params
    ) -> tuple[TritonKernelSpec, ...]:
        x = shapes[0]
        n = 1
        for a in params["axes"]:
            n *= int(x[a])
        rows = 1
        for d in x:
            rows *= int(d)
        rows = rows // n if n else 0
        types = {"x": TRITON_PTR[dtypes[0]], "y": TRITON_PTR[dtypes[1]]}
        types |= {"N": "i32", "stride_row": "i64"}
        const = {"OP": OP_CODES[self.op], "BLOCK": BLOCK}
        fn = reduce_kernel
        spec = TritonKernelSpec(
            f"{self.op}_{dtypes[0]}", fn, signature(fn, types), const, ("R",), {"R": rows, "N": n}
        )
        return (spec,)

    def __call__(
        self, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor], params: Params
    ) -> None:
        x, out = inputs[0], outputs[0]
        if out.numel() == 0:
            return
        rows = as_rows(x, tuple(params["axes"]))
        flat = (
            out.view(-1)
            if out.is_contiguous()
            else torch.empty(rows.shape[0], dtype=out.dtype, device=out.device)
        )
        (spec,) = self.launches([tuple(x.shape), tuple(out.shape)], ["f32", "f32"], params)
        spec.launch(rows, flat, rows.shape[1], rows.stride(0) if rows.dim() else 0)
        if not out.is_contiguous():
            out.copy_(flat.reshape(out.shape))
