"""Triton last-dim normalisations: `rms_norm` (x, w; eps) and `layer_norm` (x, w, b; eps).

One program per row of the input viewed as (rows, d), in BLOCK-wide strips with f32 lane
accumulators. rms_norm: `y = x * (1 / sqrt_rn(sum(x^2) / d + eps)) * w`, two passes (sum of
squares, write). layer_norm: three passes, the mean m, then the sums of the *centred* values
c = x - m and of their squares (no E[x^2] - E[x]^2 cancellation), which correct the mean by
delta = sum(c) / d (the corrected two-pass mean) and give var = sum(c^2) / d - delta^2, then
`(x - (m + delta)) * rstd * w + b`. A constant row's corrected mean is exactly its value (m's
rounding error r is exact, and so are d r and d r / d), so it gives exactly the bias.
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
def rms_norm_kernel(x, w, y, D, sx, sy, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x + row * sx
    yr = y + row * sy
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, D, BLOCK):
        v = f32(tl.load(xr + off + cols, mask=off + cols < D, other=0.0))
        acc += v * v
    ms = tl.div_rn(tl.sum(acc, axis=0), D.to(tl.float32)) + eps
    inv = tl.div_rn(1.0, tl.sqrt_rn(ms))
    for off in range(0, D, BLOCK):
        mask = off + cols < D
        v = f32(tl.load(xr + off + cols, mask=mask, other=0.0))
        g = f32(tl.load(w + off + cols, mask=mask, other=0.0))
        tl.store(yr + off + cols, to_out(v * inv * g, y.dtype.element_ty), mask=mask)


@triton.jit
def layer_norm_kernel(x, w, b, y, D, sx, sy, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x + row * sx
    yr = y + row * sy
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, D, BLOCK):
        acc += f32(tl.load(xr + off + cols, mask=off + cols < D, other=0.0))
    mean = tl.div_rn(tl.sum(acc, axis=0), D.to(tl.float32))
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    sq = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, D, BLOCK):
        mask = off + cols < D
        v = f32(tl.load(xr + off + cols, mask=mask, other=0.0))
        c = tl.where(mask, v - mean, 0.0)
        acc += c
        sq += c * c
    delta = tl.div_rn(tl.sum(acc, axis=0), D.to(tl.float32))
    var = tl.maximum(tl.div_rn(tl.sum(sq, axis=0), D.to(tl.float32)) - delta * delta, 0.0)
    mean += delta
    rstd = tl.div_rn(1.0, tl.sqrt_rn(var + eps))
    for off in range(0, D, BLOCK):
        mask = off + cols < D
        v = f32(tl.load(xr + off + cols, mask=mask, other=0.0))
        g = f32(tl.load(w + off + cols, mask=mask, other=0.0))
        h = f32(tl.load(b + off + cols, mask=mask, other=0.0))
        tl.store(yr + off + cols, to_out((v - mean) * rstd * g + h, y.dtype.element_ty), mask=mask)


def last_dim_rows(x: torch.Tensor) -> torch.Tensor:
    """`x` as (rows, d) with unit column stride (a copy only when needed)."""
    rows = x.reshape(-1, x.shape[-1])
    return rows if rows.stride(-1) == 1 else rows.contiguous()


class NormKernel:
    """rms_norm or layer_norm (params: eps) as a fuel Kernel on torch tensors."""

    family = "norm"

    def __init__(self, op: str) -> None:
        self.op = op
        self.__qualname__ = f"triton_{op}"

    def launches(
        self, shapes: Shapes, dtypes: Sequence[str], params: Params
    ) -> tuple[TritonKernelSpec, ...]:
        x = shapes[0]
        d = int(x[-1])
        rows = 1
        for s in x[:-1]:
            rows *= int(s)
        fn = rms_norm_kernel if self.op == "rms_norm" else layer_norm_kernel
        names = ["x", "w", "y"] if self.op == "rms_norm" else ["x", "w", "b", "y"]
        types = {nm: TRITON_PTR[dt] for nm, dt in zip(names, dtypes, strict=True)}
        types |= {"D": "i32", "sx": "i64", "sy": "i64", "eps": "fp32"}
        sizes = {"R": rows, "D": d}
        spec = TritonKernelSpec(
            f"{self.op}_{dtypes[0]}", fn, signature(fn, types), {"BLOCK": BLOCK}, ("R",), sizes
        )
        return (spec,)

    def __call__(
        self, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor], params: Params
    ) -> None:
        out = outputs[0]
        if out.numel() == 0:
            return
        x = last_dim_rows(inputs[0])
        consts = [p.contiguous() for p in inputs[1:]]
        y = out_target(out)
        yr = y.view(-1, y.shape[-1])
        (spec,) = self.launches([tuple(out.shape)], ["f32"] * (len(inputs) + 1), params)
        spec.launch(x, *consts, yr, x.shape[1], x.stride(0), yr.stride(0), float(params["eps"]))
        finish(out, y)
