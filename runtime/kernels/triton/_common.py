"""Triton helpers shared by the kernel families: strided offsets and output rounding."""

import triton
import triton.language as tl

from runtime import knobs

INTERPRET = tl.constexpr(knobs.triton_interpret())
"""Whether kernels run under Triton's interpreter (fixed when triton is first imported)."""


@triton.jit
def flat_index(BLOCK: tl.constexpr, BIG: tl.constexpr):
    """This program's BLOCK flat indices; i64 only when the tensor has >= 2^31 elements."""
    pid = tl.program_id(0)
    if BIG:
        pid = pid.to(tl.int64)
    return pid * BLOCK + tl.arange(0, BLOCK)


@triton.jit
def offset4(i, S1, S2, S3, st0, st1, st2, st3, NDIM: tl.constexpr):
    """Memory offset of flat index `i` of a (S0, S1, S2, S3) row-major walk, given strides.

    NDIM (the collapsed rank) skips the index divisions a walk does not need: a contiguous or
    scalar-broadcast operand (NDIM <= 1) is just `i * st3`.
    """
    if NDIM <= 1:
        off = i * st3
    elif NDIM == 2:
        off = (i // S3) * st2 + (i % S3) * st3
    else:
        i3 = i % S3
        r = i // S3
        i2 = r % S2
        r = r // S2
        off = (r // S1) * st0 + (r % S1) * st1 + i2 * st2 + i3 * st3
    return off


@triton.jit
def f32(x):
    """`x` widened to f32 (exact). Under the interpreter bf16 is widened on the bits: Triton
    3.9's interpreter flushes bf16 subnormals to zero when converting."""
    if INTERPRET:
        if x.dtype == tl.bfloat16:
            bits = x.to(tl.uint16, bitcast=True).to(tl.uint32) << 16
            return bits.to(tl.float32, bitcast=True)
    return x.to(tl.float32)


@triton.jit
def to_out(r, ty: tl.constexpr):
    """`r` converted to the output element type `ty`, rounding to nearest even.

    GPUs convert f32 -> bf16 with RNE (`cvt.rn.bf16.f32`), but Triton 3.9's interpreter
    truncates (its cast passes no rounding mode) and mangles subnormals. Under the interpreter
    only, the conversion is done on the bits: add half an ulp minus one plus the lsb (ties to
    even), keep the high 16 bits, bitcast. That is exact RNE for normals, subnormals, overflow
    to inf and signed zeros; NaN is kept quiet (0x7FC0 with its sign).
    """
    if INTERPRET:
        r = f32(r)
        if ty == tl.bfloat16:
            bits = r.to(tl.uint32, bitcast=True)
            high = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).to(tl.uint16)
            nan = ((bits >> 16) | 0x7FC0).to(tl.uint16)
            return tl.where(r != r, nan, high).to(tl.bfloat16, bitcast=True)
    return r.to(ty)


@triton.jit
def mma(x, y, acc, PRECISION: tl.constexpr):
    """`acc + x @ y` with an f32 accumulator (`tl.dot`).

    Triton 3.9's interpreter stores bf16 as uint16 and feeds it to an integer matmul; under the
    interpreter only, bf16 tiles are widened to f32 first (exact: bf16 products are exact in
    f32), which is what the tensor-core path computes.
    """
    if INTERPRET:
        if x.dtype == tl.bfloat16:
            x = f32(x)
            y = f32(y)
    return tl.dot(x, y, acc, input_precision=PRECISION)
