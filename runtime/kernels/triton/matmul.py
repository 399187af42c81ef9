"""Triton tiled matmul `(..., m, k) x (..., k, n) -> (..., m, n)` with broadcast batch dims.

Each program computes one BLOCK_M x BLOCK_N output tile, walking K in BLOCK_K steps with an f32
accumulator (`tl.dot`; f16/bf16 inputs use tensor cores, f32 inputs `input_precision="ieee"`,
i.e. true f32 products, never TF32). Tiles are visited in GROUP_M-row super-groups so
neighbouring programs share B tiles in L2. Batch dims broadcast through strides (stride 0),
collapsed to at most two; grid axis 1 enumerates the batch. No split-K and no atomics: every
output is one fixed-order sum, so results are bit-stable run to run.

Tile configs are *variant siblings*: `CONFIGS` are registered at the same binding key in order,
so the picker (or the Judge) chooses among them; arm 0 is the mid-size tile.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from runtime.kernels.triton._common import mma, to_out
from runtime.kernels.triton.elementwise import collapse_dims
from runtime.kernels.triton.spec import (
    TRITON_PTR,
    Params,
    Shapes,
    TritonKernelSpec,
    finish,
    out_target,
    signature,
)


@dataclass(frozen=True)
class TileConfig:
    """One tile shape and its launch parameters."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int
    group_m: int = 8

    @property
    def tag(self) -> str:
        return f"{self.block_m}x{self.block_n}x{self.block_k}"


CONFIGS = (
    TileConfig(64, 64, 32, num_warps=4, num_stages=3),
    TileConfig(128, 128, 32, num_warps=8, num_stages=3),
    TileConfig(32, 32, 32, num_warps=4, num_stages=2),
)
"""Variant siblings in registration order: general, large-problem, small/skinny."""


@triton.jit
def matmul_kernel(
    a,
    b,
    c,
    M,
    N,
    K,
    B1,
    sa0,
    sa1,
    sam,
    sak,
    sb0,
    sb1,
    sbk,
    sbn,
    sc0,
    sc1,
    scm,
    scn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    PRECISION: tl.constexpr,
):
    pid = tl.program_id(0)
    bid = tl.program_id(1)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    width = GROUP_M * grid_n
    first_m = (pid // width) * GROUP_M
    group = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % group
    pid_n = (pid % width) // group
    b0 = (bid // B1).to(tl.int64)
    b1 = (bid % B1).to(tl.int64)
    a += b0 * sa0 + b1 * sa1
    b += b0 * sb0 + b1 * sb1
    c += b0 * sc0 + b1 * sc1
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        x = tl.load(
            a + rm[:, None] * sam + kk[None, :] * sak,
            mask=(rm[:, None] < M) & (kk[None, :] < K),
            other=0.0,
        )
        y = tl.load(
            b + kk[:, None] * sbk + rn[None, :] * sbn,
            mask=(kk[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc = mma(x, y, acc, PRECISION)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, to_out(acc, c.dtype.element_ty), mask=mask)


def batch_layout(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, list[int], list[list[int]]]:
    """a, b viewed at c's batch shape; the batch collapsed to (B0, B1) with per-operand strides.

    Returns the (possibly materialised) views, [B0, B1] and [[s0, s1] for a, b, c].
    """
    batch = tuple(c.shape[:-2])
    av = a.broadcast_to((*batch, *a.shape[-2:]))
    bv = b.broadcast_to((*batch, *b.shape[-2:]))
    strides = [list(t.stride()[:-2]) for t in (av, bv, c)]
    dims, merged = collapse_dims(batch, strides)
    if len(dims) > 2:  # a batch no two strides describe: materialise the broadcast inputs
        av, bv = av.contiguous(), bv.contiguous()
        strides = [list(t.stride()[:-2]) for t in (av, bv, c)]
        dims, merged = collapse_dims(batch, strides)
    pad = 2 - len(dims)
    return av, bv, [1] * pad + dims, [[0] * pad + s for s in merged]


class MatmulKernel:
    """The tiled matmul at one `TileConfig`, as a fuel Kernel on torch tensors."""

    family = "matmul"

    def __init__(self, config: TileConfig) -> None:
        self.config = config
        self.__qualname__ = f"triton_matmul_{config.tag}"

    def launches(
        self, shapes: Shapes, dtypes: Sequence[str], params: Params
    ) -> tuple[TritonKernelSpec, ...]:
        cfg, out = self.config, shapes[-1]
        m, n, k = int(out[-2]), int(out[-1]), int(shapes[0][-1])
        nb = 1
        for d in out[:-2]:
            nb *= int(d)
        types = {"a": TRITON_PTR[dtypes[0]], "b": TRITON_PTR[dtypes[1]], "c": TRITON_PTR[dtypes[2]]}
        types |= {s: "i32" for s in ("M", "N", "K", "B1")}
        types |= {f"s{o}{i}": "i64" for o in "abc" for i in ("0", "1")}
        types |= {s: "i64" for s in ("sam", "sak", "sbk", "sbn", "scm", "scn")}
        const = {
            "BLOCK_M": cfg.block_m,
            "BLOCK_N": cfg.block_n,
            "BLOCK_K": cfg.block_k,
            "GROUP_M": cfg.group_m,
            "PRECISION": "ieee",
        }
        grid = (f"cdiv(M, {cfg.block_m}) * cdiv(N, {cfg.block_n})", "B")
        fn = matmul_kernel
        return (
            TritonKernelSpec(
                f"matmul_{cfg.tag}_{dtypes[0]}",
                fn,
                signature(fn, types),
                const,
                grid,
                {"M": m, "N": n, "K": k, "B": nb},
                cfg.num_warps,
                cfg.num_stages,
            ),
        )

    def __call__(
        self, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor], params: Params
    ) -> None:
        a, b = inputs
        out = outputs[0]
        if out.numel() == 0:
            return
        c = out_target(out)
        if a.shape[-1] == 0:
            c.zero_()
            finish(out, c)
            return
        av, bv, (_, b1), st = batch_layout(a, b, c)
        (spec,) = self.launches([tuple(a.shape), tuple(b.shape), tuple(c.shape)], ["f32"] * 3, {})
        m, n, k = c.shape[-2], c.shape[-1], a.shape[-1]
        spec.launch(
            av,
            bv,
            c,
            m,
            n,
            k,
            b1,
            *st[0],
            *av.stride()[-2:],
            *st[1],
            *bv.stride()[-2:],
            *st[2],
            *c.stride()[-2:],
        )
        finish(out, c)
