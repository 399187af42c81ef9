"""`torch-blas`: matmul (f32, f64) and the f32 fused matmuls on PyTorch's CPU BLAS.

The same numpy matmul semantics as `linalg` (rank >= 2, batch dims broadcast, operands made
C-contiguous first so the bits depend only on shapes and values), but the GEMM/GEMV runs in
PyTorch's CPU BLAS (MKL / oneDNN) instead of numpy's OpenBLAS: measured on a 2-thread x86 VM,
32x4096x4096 6.8 ms vs ~10 ms. GEMV-shaped products (`GEMV_ROWS`) stay on numpy.

Arrays cross as zero-copy `torch.from_numpy` views; the result is written straight into the
output when it is a writable C-contiguous array. torch is imported on the first call, never at
registration (`fuel-opt` and the passes must not pay the ~1.5 s import); the kernels are
registered only where `importlib.util.find_spec("torch")` finds it. Threads: one. Every product
runs with torch's intra-op threads set to one (`blas.torch_single_thread`, restored after the
call): the only thread pool a plan wakes is fuel's native one (`runtime.native.blas`); two pools
spinning on two cores slowed a Llama decode step to 4.2x onnxruntime with one core busy. Where
fuel's native kernels exist they cover every f32 product (batched ones too) at a lower
per-call cost, so the picker leaves these to f64 and to machines without a C compiler.

Registered **before** the `numpy` kernel at each key (vendor BLAS first): sibling order is the
tie-breaker of the executor's default and of the picker's ranking, and both kernels declare the
same cost and the same claim (no error bound, bit-stable for one BLAS build and thread count),
so the faster library wins every tie. The fused kernels keep numpy's bias add and activation,
so f32 still equals the primitive chain run on this BLAS bit for bit.
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from runtime.binding_table import KernelBindingTable
from runtime.contracts.entry import BuiltKernel, kernel_entry, kernel_factory
from runtime.kernels.cpu import nn
from runtime.kernels.cpu._common import F32, Arrays, Params, add, measured
from runtime.kernels.cpu.activations import f32_activations
from runtime.kernels.cpu.linalg import matmul_claim, matmul_cost
from runtime.kernels.cpu.nn import attention_cost
from runtime.native.blas import torch_single_thread
from runtime.rounding import store

TORCH_BLAS = "torch-blas"
MATMUL_DTYPES = ("f32", "f64")

_TORCH: list[Any] = []


def available() -> bool:
    """torch is installed (checked without importing it)."""
    return importlib.util.find_spec("torch") is not None


def _torch() -> Any:
    """torch, imported on first use. `from_numpy` of a read-only array (a bundle's mapped
    weights) warns once per process that writes would be undefined; these kernels never write
    their inputs, so the one warning is consumed here, silently."""
    if not _TORCH:
        import torch

        frozen = np.zeros(1, np.float32)
        frozen.flags.writeable = False
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.from_numpy(frozen)
        _TORCH.append(torch)
    return _TORCH[0]


GEMV_ROWS = 8
"""Products with fewer rows than this (decode's GEMVs: one token) stay on numpy's BLAS. They
are memory-bound, where the two libraries measured alike on this VM (57-211 us vs 130-138 us
per 512x1408 product across runs), and torch adds ~4 us per call; from 8 rows on torch's GEMM
was up to 2x faster (8 rows) and 20-45% faster on large GEMMs. The path depends only on shapes,
so results stay bit-stable."""


def _mm(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """`a @ b` of contiguous operands in torch's BLAS (numpy's for fewer than `GEMV_ROWS`
    rows), into `out` when it can be written in place (a writable C-contiguous array of the
    result dtype), else into a fresh array."""
    if a.size < GEMV_ROWS * a.shape[-1]:
        if out is not None and out.flags.c_contiguous and out.dtype == a.dtype:
            return np.matmul(a, b, out=out)
        y = np.matmul(a, b)
        if out is not None:
            store(out, y)
        return y
    torch = _torch()
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    writable = out is not None and out.flags.c_contiguous and out.flags.writeable
    with torch_single_thread(torch):  # one pool: fuel's (runtime/native/blas.py)
        if writable and out.dtype == a.dtype:
            torch.matmul(ta, tb, out=torch.from_numpy(out))
            return out
        y = torch.matmul(ta, tb).numpy()
    if out is not None:
        store(out, y)
    return y


@kernel_entry
def _matmul_torch(inputs: Arrays, outputs: Arrays, params: Params) -> None:
    """numpy matmul semantics on torch's BLAS; contiguous operands first (bits from values)."""
    a, b = (np.ascontiguousarray(v) for v in inputs)
    _mm(a, b, outputs[0])


def _matmul_bias_act_torch(inputs: Arrays, outputs: Arrays, params: Params) -> None:
    """`fused._matmul_bias_act` (f32) with the matmul on torch's BLAS."""
    x, w, b = (np.ascontiguousarray(a, dtype=F32) for a in inputs)
    out, act = outputs[0], params["act"]
    if out.dtype == F32 and out.flags.c_contiguous and out.flags.writeable:
        _mm(x, w, out)
        out += b
        if act != "none":
            f32_activations()[act](out, out)
        return
    y = _mm(x, w)
    y += b
    f32_activations()[act](y, out)


def _gated_mlp_torch(inputs: Arrays, outputs: Arrays, params: Params) -> None:
    """`fused._gated_mlp` (f32) with the three matmuls on torch's BLAS."""
    x, wg, wu, wd = (np.ascontiguousarray(a, dtype=F32) for a in inputs)
    g = _mm(x, wg)
    f32_activations()["silu"](g, g)
    g *= _mm(x, wu)
    _mm(g, wd, outputs[0])


@kernel_factory
def attention_torch(dtypes: Sequence[str], kv_len: bool, mask: bool = False) -> BuiltKernel:
    """The numpy attention kernel (f32) with its two batched products on torch's BLAS: where
    torch-blas runs a graph's matmuls, its attentions must not wake numpy's OpenBLAS pool as
    well (two spinning BLAS pools on the same cores slowed a Llama prefill ~4x). `mask`: the
    additive-mask key form."""
    kernel = nn._attention(F32, kv_len, _mm, with_mask=mask)
    return BuiltKernel(kernel, depends_on=(nn._sdpa, nn._mask, nn._compute, _mm, _torch))


def register_torch_blas_matmul(table: KernelBindingTable) -> None:
    """matmul f32/f64 and attention f32; call before `register_linalg` and `register_nn`
    (vendor BLAS first). No-op without torch."""
    if not available():
        return
    for t in MATMUL_DTYPES:
        add(
            table,
            "matmul",
            (t, t, t),
            _matmul_torch,
            matmul_claim(t),
            matmul_cost,
            also=(_mm, _torch),
            source=TORCH_BLAS,
        )
    claim = measured("softmax-weighted sums (cancellation): normwise relative error measured")
    keys = (
        (("f32",) * 4, False, False),
        (("f32", "f32", "f32", "i64", "f32"), True, False),
        (("f32",) * 5, False, True),
    )
    for key, kv_len, mask in keys:
        built = attention_torch(key, kv_len, mask)
        add(
            table,
            "attention",
            key,
            built.kernel,
            claim,
            attention_cost,
            also=built.depends_on,
            source=TORCH_BLAS,
        )


__all__ = [
    "MATMUL_DTYPES",
    "TORCH_BLAS",
    "available",
    "register_torch_blas_matmul",
]
