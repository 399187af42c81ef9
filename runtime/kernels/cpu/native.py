"""`native`: f32 products, gated_mlp, rms_norm, rope and attention on fuel's own C library
(`runtime.native`).

Registered after the `numpy` (and `torch-blas`) kernels at their keys, so they are never a
key's default; the picker chooses them by cost. What differs is the per-call overhead, and it
is priced as such: one ctypes call (~1.5 us) against numpy's 3 us per BLAS call, 5 numpy calls
for gated_mlp, ~10 numpy calls for rms_norm. The packed GEMM is priced like the BLAS kernels
where a SIMD micro-kernel runs (`native.simd_fma`: AVX-512 or AVX2), at 64x the FLOP time
elsewhere.

* `matmul`, `matmul_bias_act` and `gated_mlp` take the C path for every f32 product by a 2-D
  weight: the packed FMA GEMM, one FMA chain per output in k order (AVX-512 or AVX2
  micro-kernel; the portable one gives the same bits). Its weight is packed once when the
  executor is built (`prepare`: the operand is a bundle constant), else read in place (the
  same bits, slower). Fewer than `GEMV_ROWS` rows (a decode step) read the panels with
  kernels for exactly those rows (one row: two panels at once, each a sequential stream;
  measured 1.3-2.4x the GEMV's bandwidth on weights that miss the cache), where a SIMD kernel
  runs; a weight that is not in panels takes the GEMV, which streams the row-major weight once
  over all threads (pairwise sums of 8 terms: other bits). `matmul_bias_act` (kernel
  source `native`) adds the bias (and relu) as the packed products are stored and runs other
  activations as the numpy kernel does (f64); its `native-vecmath` sibling runs the whole
  epilogue in C on each output tile as it is finished (GEMV tiles, packed panels): `+ b` in
  f32, then the activation by c-vecmath (`runtime.native.vecmath`, 1 ulp; relu exact), priced
  at c-vecmath's FLOPs, so the default (no floor) picks it for gelu / silu and a BERT or GPT-2
  MLP runs as products without a numpy pass. `gated_mlp` on many rows runs silu * up in one
  vectorized C pass that rounds exactly like numpy's f64 silu (checked on 2M inputs).
  `matmul` by batched weights (attention written out as products, [1, h, 1, d] x
  [1, h, d, s]; numpy's broadcast of the batch dims) runs in C too (`fuel_native_gemm_batched`):
  each matrix on the path its rows take (the GEMV tile for fewer than 8, the FMA chain reading
  the weight in place for more), one pool chunk per matrix (or matrix x panel), so no product
  of a plan wakes numpy's or torch's BLAS pool (`runtime.native.blas`). A vector operand runs
  the numpy kernel's code, priced 0.5 us above it (one more Python frame).
* `rms_norm` takes the C path for every shape with a 1-D weight over the last dim, `layer_norm`
  for every shape with 1-D weight and bias (mean, variance and the affine map in f64, rounded
  once: within 1 ulp of float64, a constant row gives exactly the bias), `rope` for every f32
  shape (bit-identical to the numpy kernel: the same f64 operations; its cos/sin tables read in
  place when their rows are contiguous, as slices of full-width tables are).
* `transpose` and `concat` (f32): numpy's copy when called alone; in a native program, a record
  of row copies in C (exact), so the layout changes between an attention's products and
  around rope no longer cut a prefill layer's program into Python calls.
* `attention` (kernel_source `native-flashdecode`): flash decoding, split-KV over threads,
  reading only the first `kv_len` keys; decode shapes only (`Sq == 1`: any other raises and is
  priced infeasible, like `numpy-flashdecode`), so `fuel-emit-decode-flash` offers it as its
  flash arm. The exponentials and sums run in f64, rounded once.
* `attention` (kernel_source `native`): every query count, each query over its live keys
  (`kv_len`, and causal: numpy's mask). One query per head: the flash kernel. More (prefill):
  the scores and the weights times V on the packed GEMM, the softmax in double between them
  (0.6-0.8x torch's time on 64-512 queries). A prefill whose products run on fuel's pool then
  does not wake torch's as well (two pools spinning on the same cores slow both). A row's
  trailing keys of weight 0 are skipped by both products: those its mask sets to -inf or the
  lowest float (not scored, when every |scale q . k| is provably below 2^100; a row whose
  kept keys are all masked out gets them back) and those whose weight rounds to 0 (scored,
  then trimmed), so a causal mask written out costs what the `causal` flag does, with its
  bits.

Results are bit-stable on any machine and thread count (see `fuel_native.c`, `fuel_gemm.c`):
for a given shape the path, the summation order and every rounding are fixed.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from runtime import native
from runtime.binding_table import Kernel, KernelBindingTable, KernelCaps
from runtime.cost import CostEstimate, CostFn
from runtime.kernels.cpu import vecmath
from runtime.kernels.cpu._common import (
    F32,
    F64,
    OVERHEAD_NS,
    Arrays,
    Params,
    Shapes,
    add,
    copy_cost,
    exact,
    measured,
    numel,
    operand_bytes,
    ulp,
)
from runtime.kernels.cpu.activations import f32_activations
from runtime.kernels.cpu.flash import flash_cost
from runtime.kernels.cpu.fused import _gated_cost, _gated_mlp, _mba_cost, _part_costs
from runtime.kernels.cpu.linalg import matmul_claim, matmul_cost
from runtime.kernels.cpu.nn import _layer_norm, _rms_norm, _rope, attention_cost
from runtime.rounding import store

NATIVE = "native"
NATIVE_VECMATH = "native-vecmath"
"""`matmul_bias_act` with its bias and activation in C (c-vecmath): the default's fast sibling;
the `native` one (activation in numpy, f64) stays for a stated floor it does not meet."""
NATIVE_FLASH = "native-flashdecode"
"""The flash-decoding attention's kernel_source: `fuel-emit-decode-flash` offers it as arm 1."""
GEMV_ROWS = 8
"""Products with fewer rows than this take the C path (decode's one-token GEMVs): the weight
is read once for all rows, so up to 8 rows cost about what one does."""
CALL_NS = 1_500.0
"""One ctypes call into the library with its pointer arguments, on the reference VM."""
FRAME_NS = 500.0
"""The extra Python frame of a shape that falls back to the numpy code."""

_numpy_gated = _gated_mlp("f32")
_numpy_rms = _rms_norm(F32)
_numpy_ln = _layer_norm(F32)
_numpy_rope = _rope(F64)


def _rows(a: np.ndarray) -> int:
    return math.prod(a.shape[:-1])


def _gemv_shape(a: np.ndarray, b: np.ndarray) -> bool:
    """A C-path product: f32 x [..., k] (fewer than GEMV_ROWS rows) by a 2-D f32 weight."""
    return a.dtype == F32 and b.dtype == F32 and b.ndim == 2 and _rows(a) < GEMV_ROWS


def _weights_2d(x: np.ndarray, wg: np.ndarray, wu: np.ndarray, wd: np.ndarray) -> bool:
    """f32 x [..., k] times 2-D f32 weights wg, wu [k, f] and wd [f, n]."""
    arrays = (x, wg, wu, wd)
    return (
        all(a.dtype == F32 for a in arrays)
        and wg.ndim == wd.ndim == 2
        and wu.shape == wg.shape
        and x.shape[-1] == wg.shape[0]
        and wd.shape[0] == wg.shape[1]
    )


def _writable(out: np.ndarray) -> bool:
    return out.dtype == F32 and out.flags.c_contiguous and out.flags.writeable


def _fma_shape(a: np.ndarray, b: np.ndarray, packed: np.ndarray | None = None) -> bool:
    """A packed-GEMM product: f32 x [..., k] by a 2-D f32 weight, with at least GEMV_ROWS rows
    or the weight in panels already (`packed`: a constant; a decode step's few rows then read
    each panel front to back, fuel_gemm.c's `pk_few`, instead of the GEMV's row-major tiles)."""
    few = packed is not None and _rows(a) > 0
    return a.dtype == F32 and b.dtype == F32 and b.ndim == 2 and (_rows(a) >= GEMV_ROWS or few)


def pack(w: np.ndarray, cache: dict | None = None) -> np.ndarray:
    """The 2-D f32 weight `w` in the packed GEMM's panel layout (`fuel_native_pack`); with a
    `cache` (an executor's: its constants never move nor change), each weight once."""
    key = (native.ptr(w), w.shape, w.strides) if cache is not None else None
    if key is not None and key in cache:
        return cache[key]
    w = np.ascontiguousarray(w, dtype=F32)
    lib = native.library()
    packed = np.empty(lib.fuel_native_packed_floats(*w.shape), F32)
    lib.fuel_native_pack(native.ptr(w), native.ptr(packed), *w.shape)
    if key is not None:
        cache[key] = packed
    return packed


def _weight(w: np.ndarray, packed: np.ndarray | None) -> np.ndarray:
    """A product's weight as its kernel reads it: where its panels are given (`packed`, a
    prepared kernel's constant) only its shape is read, so a strided view (a column slice of
    a fused projection, `passes.canonical.products`) is not copied per call; else dense f32."""
    return w if packed is not None else np.ascontiguousarray(w, dtype=F32)


def _fma_gemm(
    x: np.ndarray,
    w: np.ndarray | None,
    packed: np.ndarray | None,
    bias: np.ndarray | None,
    out: np.ndarray,
    act: int = 0,
) -> None:
    """out = act(x @ w (+ bias)) on the packed FMA GEMM: C-contiguous f32 x [..., k], the
    weight `w` [k, n] (packed per call) or its `packed` form, bias [n] or None, `act` an
    epilogue code (`native.ACT_CODES`; 0: none, 1: relu)."""
    k, n = x.shape[-1], out.shape[-1]
    y = out if _writable(out) else np.empty(out.shape, F32)
    p, lib = native.ptr, native.library()
    b = 0 if bias is None else p(bias)
    if packed is not None:
        rc = lib.fuel_native_gemm_packed(p(x), p(packed), b, p(y), _rows(x), k, n, act)
    else:
        rc = lib.fuel_native_gemm_fma(p(x), p(w), b, p(y), _rows(x), k, n, act)
    if rc:
        raise MemoryError("fuel native gemm: out of memory for its packed operands")
    if y is not out:
        np.copyto(out, y)


def _gemv(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    y = out if _writable(out) else np.empty(out.shape, F32)
    rc = native.library().fuel_native_gemm(
        native.ptr(a), native.ptr(b), native.ptr(y), _rows(a), a.shape[-1], b.shape[1]
    )
    if rc:
        raise MemoryError("fuel native gemm: out of memory for its partial sums")
    if y is not out:
        np.copyto(out, y)


def _batched_shape(a: np.ndarray, b: np.ndarray) -> bool:
    """A batched C-path product: f32 [..., m, k] by f32 [..., k, n] with batch dims (numpy's
    broadcast) on the weight."""
    return a.dtype == F32 and b.dtype == F32 and a.ndim >= 2 and b.ndim >= 3


@functools.lru_cache(maxsize=256)
def _batch_offsets(
    a_shape: tuple[int, ...], b_shape: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray, int]:
    """(each output matrix's x offset, its w offset, in floats; the batch count) of a batched
    product of C-contiguous operands: numpy's broadcast of the batch dims."""
    batch = np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
    (m, k), n = a_shape[-2:], b_shape[-1]

    def offsets(own: tuple[int, ...], stride: int) -> np.ndarray:
        index = np.arange(math.prod(own), dtype=np.int64).reshape(own)
        return np.ascontiguousarray(np.broadcast_to(index, batch).ravel() * stride)

    return offsets(a_shape[:-2], m * k), offsets(b_shape[:-2], k * n), math.prod(batch)


def _batched(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """out = a @ b (batched weights) in C: `fuel_native_gemm_batched`."""
    xoff, woff, batch = _batch_offsets(a.shape, b.shape)
    y = out if _writable(out) else np.empty(out.shape, F32)
    p, (m, k), n = native.ptr, a.shape[-2:], b.shape[-1]
    rc = native.library().fuel_native_gemm_batched(
        p(a), p(b), p(y), batch, m, k, n, p(xoff), p(woff)
    )
    if rc:
        raise MemoryError("fuel native batched gemm: out of memory for its packed operands")
    if y is not out:
        np.copyto(out, y)


def _matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray, packed: np.ndarray | None) -> None:
    if _fma_shape(a, b, packed):
        _fma_gemm(a, b, packed, None, out)
    elif _gemv_shape(a, b):
        _gemv(a, b, out)
    elif _batched_shape(a, b):
        _batched(a, b, out)
    else:
        np.matmul(a, b, out=out)


def _matmul_native(inputs: Arrays, outputs: Arrays, params: Params) -> None:
    """numpy matmul semantics; 2-D f32 weights in C (GEMV or packed GEMM), others in numpy."""
    a, b = (np.ascontiguousarray(v) for v in inputs)
    _matmul(a, b, outputs[0], None)


def _bias_1d(b: np.ndarray, n: int) -> bool:
    return b.dtype == F32 and b.shape == (n,)


def _matmul_bias_act_native(
    inputs: Arrays, outputs: Arrays, params: Params, packed: np.ndarray | None = None
) -> None:
    """`fused._matmul_bias_act` (f32): the product in C, bias [n] (and relu) added as the
    packed GEMM stores; other activations (and GEMV shapes) as the numpy kernel: `out += b`,
    then the activation in place."""
    x, b = (np.ascontiguousarray(a, dtype=F32) for a in (inputs[0], inputs[2]))
    w = _weight(inputs[1], packed)
    out, act = outputs[0], params["act"]
    y = out if _writable(out) else np.empty(out.shape, F32)
    if _fma_shape(x, w, packed) and _bias_1d(b, w.shape[1]):
        relu = act == "relu"
        _fma_gemm(x, w, packed, b, y, int(relu))
        if not relu and act != "none":
            f32_activations()[act](y, y)
    else:
        _matmul(x, w, y, packed)
        y += b
        if act != "none":
            f32_activations()[act](y, y)
    if y is not out:
        store(out, y)


def _matmul_bias_act_vecmath(
    inputs: Arrays, outputs: Arrays, params: Params, packed: np.ndarray | None = None
) -> None:
    """`matmul_bias_act` (f32) with its whole epilogue in C: the product's bits are the
    `native` sibling's (GEMV tiles or the packed GEMM), then `+ b` in f32 (numpy's `out += b`)
    and the activation by the c-vecmath functions (1 ulp; relu exact) on each output tile as
    it is finished (`act_cols` in fuel_native.c). Batched weights: the product in C, then the
    same epilogue in one more C call."""
    x, b = (np.ascontiguousarray(a, dtype=F32) for a in (inputs[0], inputs[2]))
    w = _weight(inputs[1], packed)
    out, code = outputs[0], native.ACT_CODES[params["act"]]
    y = out if _writable(out) else np.empty(out.shape, F32)
    n, p, lib = y.shape[-1], native.ptr, native.library()
    bias = _bias_1d(b, n)
    if bias and _fma_shape(x, w, packed):
        _fma_gemm(x, w, packed, b, y, code)
    elif bias and _gemv_shape(x, w):
        rc = lib.fuel_native_gemm_bias_act(p(x), p(w), p(b), p(y), _rows(x), x.shape[-1], n, code)
        if rc:
            raise MemoryError("fuel native gemm: out of memory for its partial sums")
    else:
        _matmul(x, w, y, packed)
        if not bias:
            y += b
        lib.fuel_native_bias_act(p(y), p(b) if bias else 0, y.size // max(n, 1), n, code)
    if y is not out:
        store(out, y)


def _gated_mlp_native(
    inputs: Arrays,
    outputs: Arrays,
    params: Params,
    packed: Sequence[np.ndarray | None] = (None,) * 3,
) -> None:
    """silu(x @ wg) * (x @ wu) @ wd (f32, 2-D weights): on weights in panels (`packed`: the
    constants of a prepared kernel) or many rows, the three products on the packed GEMM and
    silu * up in one vectorized C pass; GEMV shapes of weights not in panels in one C call;
    anything else in the numpy kernel."""
    x = np.ascontiguousarray(inputs[0])
    in_panels = all(w is not None for w in packed) and _rows(x) > 0
    wg, wu, wd = (w if in_panels else np.ascontiguousarray(w) for w in inputs[1:4])
    out = outputs[0]
    if not _weights_2d(x, wg, wu, wd):
        _numpy_gated(inputs, outputs, params)
        return
    if in_panels or not (_gemv_shape(x, wg) and _gemv_shape(x, wd)):
        y = out if _writable(out) else np.empty(out.shape, F32)
        record = _gated_packed_record(x, (wg, wu, wd), packed, y)
        entry, words, count = native.program([record])
        if entry(native.ptr(words), count) != -1:
            raise MemoryError("fuel native gated_mlp: out of memory for its packed operands")
        if y is not out:
            np.copyto(out, y)
        return
    m, (k, f), n = _rows(x), wg.shape, wd.shape[1]
    g, u = np.empty((m, f), F32), np.empty((m, f), F32)
    y = out if _writable(out) else np.empty(out.shape, F32)
    p = native.ptr
    rc = native.library().fuel_native_gated_mlp(
        p(x), p(wg), p(wu), p(wd), p(g), p(u), p(y), m, k, f, n
    )
    if rc:
        raise MemoryError("fuel native gated_mlp: out of memory for its partial sums")
    if y is not out:
        np.copyto(out, y)


def _gated_packed_record(
    x: np.ndarray,
    weights: Sequence[np.ndarray],
    packed: Sequence[np.ndarray | None],
    out: np.ndarray,
) -> native.Record:
    """The gated MLP of many rows as one program record (`fuel_native_gated_packed`): the
    packed weights where all three are, else the weights read in place; its g, u scratch."""
    m, (k, f), n = _rows(x), weights[0].shape, weights[2].shape[1]
    in_panels = [w for w in packed if w is not None]
    ws = in_panels if len(in_panels) == 3 else list(weights)
    g, u = np.empty((m, f), F32), np.empty((m, f), F32)
    words = [native.OP_GATED_PACKED, *(_p(a) for a in (x, *ws, g, u, out)), m, k, f, n]
    return R([*words, int(ws is in_panels)], [g, u, *ws])


def _rms_norm_native(inputs: Arrays, outputs: Arrays, params: Params) -> None:
    """x / sqrt(mean(x^2, last dim) + eps) * w, each row in C (the mean of squares in f64)."""
    x, w = (np.ascontiguousarray(v) for v in inputs)
    out = outputs[0]
    if not (x.dtype == w.dtype == F32 and w.shape == x.shape[-1:] and x.size):
        _numpy_rms(inputs, outputs, params)
        return
    y = out if _writable(out) else np.empty(out.shape, F32)
    native.library().fuel_native_rms_norm(
        native.ptr(x), native.ptr(w), native.ptr(y), _rows(x), x.shape[-1], float(params["eps"])
    )
    if y is not out:
        np.copyto(out, y)


def _ln_shape(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> bool:
    return x.dtype == w.dtype == b.dtype == F32 and w.shape == b.shape == x.shape[-1:] and x.size


def _layer_norm_native(inputs: Arrays, outputs: Arrays, params: Params) -> None:
    """(x - mean) / sqrt(var + eps) * w + b, each row in C: in f64 from the f32 inputs, rounded
    once (`fuel_native_layer_norm`); other shapes (broadcast weights) in the numpy kernel."""
    x, w, b = (np.ascontiguousarray(v) for v in inputs)
    out = outputs[0]
    if not _ln_shape(x, w, b):
        _numpy_ln(inputs, outputs, params)
        return
    y = out if _writable(out) else np.empty(out.shape, F32)
    p = native.ptr
    native.library().fuel_native_layer_norm(
        p(x), p(w), p(b), p(y), _rows(x), x.shape[-1], float(params["eps"])
    )
    if y is not out:
        np.copyto(out, y)


def _flash_decode_native(with_kv_len: bool) -> Kernel:
    attention = _attention_native(with_kv_len)

    def flash_decode_native(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        """One query per head over the live prefix of the keys, split-KV, in C (f32): the
        native attention's one-query path, refusing any other query count."""
        if inputs[0].shape[2] != 1:
            raise ValueError(
                f"flash decoding takes one query per head (Sq == 1), got q {inputs[0].shape}"
            )
        attention(inputs, outputs, params)

    flash_decode_native.encode = _encode_flash  # type: ignore[attr-defined]
    return flash_decode_native


def _flash_native_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """`flash.flash_cost`'s FLOPs and bytes (infeasible unless Sq == 1), one C call."""
    base = flash_cost(shapes, dtypes, params)
    return CostEstimate(
        base.flops, base.bytes_moved, math.inf if math.isinf(base.flops) else CALL_NS
    )


def _mask_view(mask: np.ndarray, full: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """An additive mask as contiguous f32 data and its element strides over `full` (B, Hq, Sq,
    Sk), 0 along the dims it broadcasts over (the C kernels read it in place)."""
    data = np.ascontiguousarray(mask, dtype=F32)
    view = np.broadcast_to(data, full)
    return data, np.array([st // F32.itemsize for st in view.strides], np.int64)


ROWS_CAPS = KernelCaps(strided_input=True, strided_rows=True)
"""Rope's: x with dense rows read where they are, no numpy copy first."""
ATTN_CAPS = KernelCaps(strided_input=True, strided_rows=True, strided_out_rows=True)
"""The packed-GEMM attention's: q, k, v with dense rows taken at their strides and the output
written at its own: K packed from where it is, a strided q or v gathered into the thread's
scratch per head group where the products read it, a strided output's rows copied there
from scratch (one query per head: the flash kernel takes and makes them dense, a decode
step's few bytes)."""


def _qkv_strides(*arrays: np.ndarray) -> np.ndarray:
    """The element strides of q, k, v and the output along batch, head and position (their
    rows dense), as `fuel_native_attention_gemm` takes them."""
    return np.array([st // F32.itemsize for a in arrays for st in a.strides[:3]], np.int64)


def _attention_native(with_kv_len: bool, with_mask: bool = False) -> Kernel:
    def attention_native(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        """Every query over its live keys (causal: numpy's mask; an additive mask added to the
        scaled scores in f32), f32 in C: one query per head on the flash kernel (split-KV, f64
        sums, dense operands), more on the packed GEMM (scores, then the weights times V;
        `fuel_native_attention_gemm`), which takes q, k, v and the output at their strides."""
        sq = inputs[0].shape[2]
        q, k, v = (
            a if sq > 1 and native.rows_f32(a) else np.ascontiguousarray(a, dtype=F32)
            for a in inputs[:3]
        )
        (bsz, hq, sq, d), (hkv, sk), dv = q.shape, k.shape[1:3], v.shape[3]
        kv_len = min(max(int(inputs[3]), 0), sk) if with_kv_len else sk
        lib, out = native.library(), outputs[0]
        strided = sq > 1 and native.rows_f32(out) and out.flags.writeable
        y = out if _writable(out) or strided else np.empty(out.shape, F32)
        p, causal, scale = native.ptr, int(bool(params["causal"])), float(params["scale"])
        mask, ms = _mask_view(inputs[3], (bsz, hq, sq, sk)) if with_mask else (None, None)
        mp, msp = (p(mask), p(ms)) if mask is not None and ms is not None else (None, None)
        dims = (bsz, hq, hkv, sq, sk, d, dv, kv_len, causal, scale, mp, msp)
        if sq > 1:
            st = _qkv_strides(q, k, v, y)
            if lib.fuel_native_attention_gemm(p(q), p(k), p(v), p(y), *dims, p(st)):
                raise MemoryError("fuel native attention: out of memory for its scores")
        else:
            part = np.empty(bsz * hq * lib.fuel_native_flash_splits(kv_len) * (dv + 2))
            lib.fuel_native_flash_attention(p(q), p(k), p(v), p(y), p(part), *dims)
        if y is not out:
            store(out, y)

    if with_mask and not with_kv_len:
        attention_native.encode = _encode_attention  # type: ignore[attr-defined]
    return attention_native


def _attention_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """`nn.attention_cost`'s FLOPs and bytes, one C call. Many queries run on the packed GEMM:
    measured 0.6-0.8x torch's time (8-12 heads, 64-512 queries) where a SIMD micro-kernel
    runs; the portable one is priced like the GEMM's (`PORTABLE_SLOWDOWN`). One query runs
    the flash kernel: about torch's time."""
    base = attention_cost(shapes, dtypes, params)
    portable = shapes[0][2] > 1 and not native.simd_fma()
    return CostEstimate(
        base.flops * (PORTABLE_SLOWDOWN if portable else 1.0), base.bytes_moved, CALL_NS
    )


def _row_strided(t: np.ndarray) -> int | None:
    """The row stride (elements) of a 2-D f32 table whose rows are contiguous, else None."""
    ok = t.dtype == F32 and t.ndim == 2 and (t.strides[1] == 4 or t.shape[1] <= 1)
    return t.strides[0] // 4 if ok and t.strides[0] % 4 == 0 and t.strides[0] > 0 else None


def _rope_tables(c: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """cos and sin as the C kernel reads them: in place where both have contiguous rows at one
    stride (a slice of a wider table), else packed copies."""
    ld = _row_strided(c)
    if ld is not None and ld == _row_strided(s):
        return c, s, ld
    c, s = np.ascontiguousarray(c), np.ascontiguousarray(s)
    return c, s, c.shape[-1]


def _rope_x(x: np.ndarray) -> tuple[np.ndarray, int, int, np.ndarray | None]:
    """x as the C kernel reads it, [n0, n1, s, d]: a 4-D f32 view with dense rows in place at
    its strides (a transposed view: `KernelCaps.strided_rows`), else a dense copy."""
    if x.ndim == 4 and native.rows_f32(x) and not x.flags.c_contiguous:
        return x, x.shape[0], x.shape[1], np.array([st // 4 for st in x.strides[:3]], np.int64)
    x = np.ascontiguousarray(x)
    return x, _rows(x) // x.shape[-2], 1, None


def _rope_native(inputs: Arrays, outputs: Arrays, params: Params) -> None:
    """x (..., S, D) rotated by cos/sin (S, D/2) in C: the numpy kernel's f64 arithmetic. The
    tables are read in place when their rows are contiguous (a slice of a full-width table),
    and x when its rows are (a transposed view)."""
    x, out = inputs[0], outputs[0]
    if not (x.dtype == inputs[1].dtype == inputs[2].dtype == F32):
        _numpy_rope(inputs, outputs, params)
        return
    x, n0, n1, xs = _rope_x(x)
    c, s, ld = _rope_tables(inputs[1], inputs[2])
    y = out if _writable(out) else np.empty(out.shape, F32)
    p = native.ptr
    native.library().fuel_native_rope(
        p(x),
        p(c),
        p(s),
        p(y),
        n0,
        n1,
        x.shape[-2],
        x.shape[-1],
        int(bool(params["interleaved"])),
        ld,
        None if xs is None else p(xs),
    )
    if y is not out:
        np.copyto(out, y)


RECORD_NS = 300.0
"""A copy's overhead as a program record (between native kernels a run is one C call); alone
it is a ctypes call, about numpy's own copy call."""


def _permute_args(x: np.ndarray, perm: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """The sizes and element strides of `x.transpose(perm)` (x C-contiguous f32)."""
    view = x.transpose(perm)
    return (
        np.array(view.shape, np.int64),
        np.array([st // F32.itemsize for st in view.strides], np.int64),
    )


def _copyable(x: np.ndarray, out: np.ndarray) -> bool:
    return native.contiguous_f32(x, out) and 0 < x.ndim <= 8 and x.size > 0


def _transpose_native(inputs: Arrays, outputs: Arrays, params: Params) -> None:
    """out = x.transpose(perm). Called alone it is numpy's copy (building the C call's
    arguments costs more than the copy); in a native program, its record
    (`fuel_native_permute`: the output's rows gathered by x's permuted strides). Exact."""
    np.copyto(outputs[0], inputs[0].transpose(params["perm"]))


def _encode_permute(ins: Arrays, outs: Arrays, params: Params) -> native.Record | None:
    x, out = ins[0], outs[0]
    if not _copyable(x, out):
        return None
    size, stride = _permute_args(x, params["perm"])
    return R([native.OP_PERMUTE, _p(x), _p(out), x.ndim, _p(size), _p(stride)], [size, stride])


def _concat_args(ins: Arrays, out: np.ndarray, axis: int) -> tuple[int, np.ndarray, np.ndarray]:
    """(outer, input addresses, inner sizes) of a concat of C-contiguous arrays on `axis`."""
    axis %= out.ndim
    outer = math.prod(out.shape[:axis])
    inner = np.array([math.prod(a.shape[axis:]) for a in ins], np.int64)
    return outer, np.array([_p(a) for a in ins], np.int64), inner


def _concat_native(inputs: Arrays, outputs: Arrays, params: Params) -> None:
    """numpy concatenate. Called alone it is numpy's; in a native program, its record
    (`fuel_native_concat`: row copies of C-contiguous f32 arrays). Exact."""
    np.concatenate(inputs, axis=params["axis"], out=outputs[0])


def _encode_concat(ins: Arrays, outs: Arrays, params: Params) -> native.Record | None:
    out = outs[0]
    if not (native.contiguous_f32(*ins, out) and out.ndim and out.size):
        return None
    outer, src, inner = _concat_args(ins, out, params["axis"])
    return R([native.OP_CONCAT, _p(out), outer, len(ins), _p(src), _p(inner)], [src, inner])


def _copy_native_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """`copy_cost`'s bytes, the overhead of a program record (`RECORD_NS`)."""
    return CostEstimate(0.0, copy_cost(shapes, dtypes, params).bytes_moved, RECORD_NS)


# -- program records: the same calls, encoded for `native.program` (see the executor) --------
# Each returns None where the kernel would not take its C path (the Python call then runs).

R = native.Record
_p = native.ptr


def _encode_matmul(ins: Arrays, outs: Arrays, params: Params) -> native.Record | None:
    (a, b), out = ins, outs[0]
    if not native.contiguous_f32(a, b, out):
        return None
    if _gemv_shape(a, b):
        return R([native.OP_GEMM, _p(a), _p(b), _p(out), _rows(a), a.shape[-1], b.shape[1]])
    if not _batched_shape(a, b):
        return None
    xoff, woff, batch = _batch_offsets(a.shape, b.shape)
    (m, k), n = a.shape[-2:], b.shape[-1]
    words = [native.OP_GEMM_BATCHED, _p(a), _p(b), _p(out), batch, m, k, n, _p(xoff), _p(woff)]
    return R(words, [xoff, woff])


def _encode_gated(ins: Arrays, outs: Arrays, params: Params) -> native.Record | None:
    (x, wg, wu, wd), out = ins, outs[0]
    if not (
        native.contiguous_f32(x, wg, wu, wd, out)
        and _gemv_shape(x, wg)
        and wu.shape == wg.shape
        and _gemv_shape(x, wd)
    ):
        return None
    m, (k, f), n = _rows(x), wg.shape, wd.shape[1]
    g, u = np.empty((m, f), F32), np.empty((m, f), F32)
    words = [native.OP_GATED, _p(x), _p(wg), _p(wu), _p(wd), _p(g), _p(u), _p(out), m, k, f, n]
    return R(words, [g, u])


def _encode_rms(ins: Arrays, outs: Arrays, params: Params) -> native.Record | None:
    (x, w), out = ins, outs[0]
    if not (native.contiguous_f32(x, w, out) and w.shape == x.shape[-1:] and x.size):
        return None
    eps = native.f64_bits(float(params["eps"]))
    return R([native.OP_RMS, _p(x), _p(w), _p(out), _rows(x), x.shape[-1], eps])


def _encode_ln(ins: Arrays, outs: Arrays, params: Params) -> native.Record | None:
    (x, w, b), out = ins, outs[0]
    if not (native.contiguous_f32(x, w, b, out) and _ln_shape(x, w, b)):
        return None
    eps = native.f64_bits(float(params["eps"]))
    return R([native.OP_LN, _p(x), _p(w), _p(b), _p(out), _rows(x), x.shape[-1], eps])


def _encode_rope(ins: Arrays, outs: Arrays, params: Params) -> native.Record | None:
    (x, c, s), out = ins, outs[0]
    ld = _row_strided(c) if isinstance(c, np.ndarray) else None
    if ld is None or ld != _row_strided(s) or not native.contiguous_f32(out):
        return None
    if not (native.contiguous_f32(x) or (x.ndim == 4 and native.rows_f32(x))):
        return None
    x, n0, n1, xs = _rope_x(x)
    seq, d, flag = x.shape[-2], x.shape[-1], int(bool(params["interleaved"]))
    words = [native.OP_ROPE, _p(x), _p(c), _p(s), _p(out), n0, n1, seq, d, flag, ld]
    return R([*words, 0 if xs is None else _p(xs)], [] if xs is None else [xs])


def _encode_flash(ins: Arrays, outs: Arrays, params: Params) -> native.Record | None:
    (q, k, v), out, n = ins[:3], outs[0], ins[3] if len(ins) > 3 else None
    if not (native.contiguous_f32(q, k, v, out) and q.shape[2] == 1):
        return None
    if n is not None and not (n.dtype == np.int64 and n.size == 1 and n.flags.c_contiguous):
        return None
    (bsz, hq, _, d), (hkv, sk), dv = q.shape, k.shape[1:3], v.shape[3]
    part = np.empty(bsz * hq * native.library().fuel_native_flash_splits(sk) * (dv + 2))
    words = [
        native.OP_FLASH,
        _p(q),
        _p(k),
        _p(v),
        _p(out),
        _p(part),
        bsz,
        hq,
        hkv,
        sk,
        d,
        dv,
        0 if n is None else _p(n),
        native.f64_bits(float(params["scale"])),
    ]
    return R(words, [part])


def _encode_attention(ins: Arrays, outs: Arrays, params: Params) -> native.Record | None:
    """The masked attention (any query count) as one record: the mask read in place by its
    broadcast strides, and (several queries) q, k, v and the output at theirs, as
    `_attention_native` takes them."""
    (q, k, v, mask), out = ins, outs[0]
    sq = q.shape[2]
    if not native.contiguous_f32(mask) or not (
        native.rows_f32(q, k, v, out) if sq > 1 else native.contiguous_f32(q, k, v, out)
    ):
        return None
    (bsz, hq, sq, d), (hkv, sk), dv = q.shape, k.shape[1:3], v.shape[3]
    _, ms = _mask_view(mask, (bsz, hq, sq, sk))
    st = _qkv_strides(q, k, v, out)
    part = np.empty(bsz * hq * native.library().fuel_native_flash_splits(sk) * (dv + 2))
    words = [native.OP_ATTN, *(_p(a) for a in (q, k, v, out, part)), bsz, hq, hkv, sq, sk, d]
    scale = native.f64_bits(float(params["scale"]))
    words += [dv, int(bool(params["causal"])), scale, _p(mask), _p(ms), _p(st)]
    return R(words, [part, ms, st])


_UFUNC_OPS = {np.add: native.OP_ADD, np.multiply: native.OP_MUL}


def encode_ufunc(fn: object, arrays: Arrays) -> native.Record | None:
    """A direct `np.add` / `np.multiply` call on same-shape C-contiguous f32 arrays (IEEE: the
    program computes exactly what numpy does), else None."""
    op = _UFUNC_OPS.get(fn)  # type: ignore[call-overload]
    if op is None or len(arrays) != 3 or not native.contiguous_f32(*arrays):
        return None
    a, b, out = arrays
    if not (a.shape == b.shape == out.shape):
        return None
    return R([op, _p(a), _p(b), _p(out), a.size])


def _encode_packed(
    x: np.ndarray, packed: np.ndarray, bias: np.ndarray | None, out: np.ndarray, act: int
) -> native.Record | None:
    if not native.contiguous_f32(x, out, *(() if bias is None else (bias,))):
        return None
    words = [
        native.OP_GEMM_PACKED,
        _p(x),
        _p(packed),
        0 if bias is None else _p(bias),
        _p(out),
        _rows(x),
        x.shape[-1],
        out.shape[-1],
        act,
    ]
    return R(words, [packed])


def _encode_mba_vecmath(ins: Arrays, outs: Arrays, params: Params) -> native.Record | None:
    (x, w, b), out = ins, outs[0]
    if not (native.contiguous_f32(x, w, b, out) and _gemv_shape(x, w) and _bias_1d(b, w.shape[1])):
        return None
    code = native.ACT_CODES[params["act"]]
    words = [native.OP_GEMM_ACT, _p(x), _p(w), _p(b), _p(out), _rows(x), x.shape[-1]]
    return R([*words, w.shape[1], code])


_matmul_native.encode = _encode_matmul  # type: ignore[attr-defined]
_matmul_bias_act_vecmath.encode = _encode_mba_vecmath  # type: ignore[attr-defined]
_gated_mlp_native.encode = _encode_gated  # type: ignore[attr-defined]
_rms_norm_native.encode = _encode_rms  # type: ignore[attr-defined]
_layer_norm_native.encode = _encode_ln  # type: ignore[attr-defined]
_rope_native.encode = _encode_rope  # type: ignore[attr-defined]
_transpose_native.encode = _encode_permute  # type: ignore[attr-defined]
_concat_native.encode = _encode_concat  # type: ignore[attr-defined]


# -- prepare: a kernel specialised to its constant operands when the executor is built ------
# `prepare(constants, shapes, params, cache)`: `constants[i]` is operand i's array where it is
# a bundle constant (a weight: it never moves nor changes), else None; `shapes` are all the
# operands' shapes. Returns the kernel to call instead (same signature, with `encode`), or None.
# The packed weights live in `cache` (the executor's), so a weight read by several ops packs
# once.

Prepared = Kernel


def _fma_rows(shapes: Shapes) -> bool:
    """The product by a 2-D weight runs on its panels: rows enough for the packed GEMM, or a
    few rows where a SIMD kernel reads the panels (`pk_few`; the portable one is slower than
    the GEMV's tiles)."""
    rows = numel(shapes[0][:-1])
    few = rows > 0 and native.simd_fma()
    return len(shapes[1]) == 2 and (rows >= GEMV_ROWS or few)


def _packed_weight(
    constants: Sequence[np.ndarray | None], shapes: Shapes, cache: dict
) -> np.ndarray | None:
    """Operand 1 packed, where it is an f32 constant and the product takes the packed GEMM."""
    w = constants[1]
    if w is None or w.dtype != F32 or not _fma_rows(shapes):
        return None
    return pack(w, cache)


def _prepare_matmul(
    constants: Sequence[np.ndarray | None], shapes: Shapes, params: Params, cache: dict
) -> Prepared | None:
    packed = _packed_weight(constants, shapes, cache)
    if packed is None:
        return None

    def matmul_packed(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        _matmul(np.ascontiguousarray(inputs[0]), inputs[1], outputs[0], packed)

    def encode(ins: Arrays, outs: Arrays, params: Params) -> native.Record | None:
        (a, b), out = ins, outs[0]
        if not (isinstance(a, np.ndarray) and _fma_shape(a, b, packed)):
            return None
        return _encode_packed(a, packed, None, out, 0)

    matmul_packed.encode = encode  # type: ignore[attr-defined]
    return matmul_packed


def _prepare_mba(
    constants: Sequence[np.ndarray | None], shapes: Shapes, params: Params, cache: dict
) -> Prepared | None:
    packed = _packed_weight(constants, shapes, cache)
    if packed is None:
        return None

    def matmul_bias_act_packed(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        _matmul_bias_act_native(inputs, outputs, params, packed)

    def encode(ins: Arrays, outs: Arrays, params: Params) -> native.Record | None:
        (x, w, b), out, act = ins, outs[0], params["act"]
        if not (
            act in ("none", "relu")
            and isinstance(x, np.ndarray)
            and _fma_shape(x, w, packed)
            and isinstance(b, np.ndarray)
            and _bias_1d(b, w.shape[1])
        ):
            return None
        return _encode_packed(x, packed, b, out, int(act == "relu"))

    matmul_bias_act_packed.encode = encode  # type: ignore[attr-defined]
    return matmul_bias_act_packed


def _prepare_mba_vecmath(
    constants: Sequence[np.ndarray | None], shapes: Shapes, params: Params, cache: dict
) -> Prepared | None:
    packed = _packed_weight(constants, shapes, cache)
    if packed is None:
        return None

    def matmul_bias_act_vecmath_packed(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        _matmul_bias_act_vecmath(inputs, outputs, params, packed)

    def encode(ins: Arrays, outs: Arrays, params: Params) -> native.Record | None:
        (x, w, b), out = ins, outs[0]
        if not (
            isinstance(x, np.ndarray)
            and _fma_shape(x, w, packed)
            and isinstance(b, np.ndarray)
            and _bias_1d(b, w.shape[1])
        ):
            return None
        return _encode_packed(x, packed, b, out, native.ACT_CODES[params["act"]])

    matmul_bias_act_vecmath_packed.encode = encode  # type: ignore[attr-defined]
    return matmul_bias_act_vecmath_packed


def _prepare_gated(
    constants: Sequence[np.ndarray | None], shapes: Shapes, params: Params, cache: dict
) -> Prepared | None:
    ws = constants[1:4]
    if any(w is None or w.dtype != F32 or w.ndim != 2 for w in ws) or not _fma_rows(shapes):
        return None
    packed = [pack(w, cache) for w in ws]  # type: ignore[arg-type]

    def gated_mlp_packed(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        _gated_mlp_native(inputs, outputs, params, packed)

    def encode(ins: Arrays, outs: Arrays, params: Params) -> native.Record | None:
        x, out = ins[0], outs[0]
        if not (native.contiguous_f32(x, out) and _rows(x) > 0):
            return None
        return _gated_packed_record(x, ins[1:4], packed, out)

    gated_mlp_packed.encode = encode  # type: ignore[attr-defined]
    return gated_mlp_packed


_matmul_native.prepare = _prepare_matmul  # type: ignore[attr-defined]
_matmul_bias_act_native.prepare = _prepare_mba  # type: ignore[attr-defined]
_matmul_bias_act_vecmath.prepare = _prepare_mba_vecmath  # type: ignore[attr-defined]
_gated_mlp_native.prepare = _prepare_gated  # type: ignore[attr-defined]


PORTABLE_SLOWDOWN = 64.0
"""The portable micro-kernel (one libm fmaf per term) against the AVX-512 one: measured 69x
(32x1024x1024) and 85x (64x512x1408); its FLOPs are priced at 64x, so where it is the only
one (`native.simd_fma` false) the picker leaves products of 8+ rows to the BLAS libraries."""


def _product_cost(base: CostEstimate, rows: int) -> CostEstimate:
    """A C-path product of `rows` rows: the roofline's FLOPs and bytes, one C call."""
    flops = base.flops if rows < GEMV_ROWS or native.simd_fma() else base.flops * PORTABLE_SLOWDOWN
    return CostEstimate(flops, base.bytes_moved, CALL_NS)


def _matmul_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    base = matmul_cost(shapes, dtypes, params)
    if len(shapes[1]) != 2:  # batched weights: per matrix, its rows decide the path
        if len(shapes[0]) < 2:  # a vector: the numpy kernel's code, one more frame
            return CostEstimate(base.flops, base.bytes_moved, base.overhead_ns + FRAME_NS)
        return _product_cost(base, shapes[0][-2])
    return _product_cost(base, numel(shapes[0][:-1]))


def _mba_native_cost(costs: dict) -> CostFn:
    composed = _mba_cost(costs)

    def cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
        """The composed FLOPs and bytes; one C call, plus a numpy pass for the bias of a GEMV
        and one for an activation the packed GEMM does not fuse (all but relu)."""
        base = composed(shapes, dtypes, params)
        if len(shapes[1]) != 2:
            return CostEstimate(base.flops, base.bytes_moved, base.overhead_ns + FRAME_NS)
        rows, act = numel(shapes[0][:-1]), params.get("act", "none")
        est = _product_cost(base, rows)
        fused = ("none",) if rows < GEMV_ROWS else ("none", "relu")
        passes = (rows < GEMV_ROWS) + (act not in fused)
        return CostEstimate(
            est.flops, est.bytes_moved, est.overhead_ns + passes * OVERHEAD_NS["ufunc"]
        )

    return cost


def _act_flops(act: str) -> float:
    """FLOPs per element of a c-vecmath epilogue (the standalone kernels' declared figures;
    gelu's tanh form scaled from gelu's by their measured times)."""
    if act in ("none", "relu"):
        return 1.0
    if act in vecmath.FLOPS:
        return vecmath.FLOPS[act]
    ns = vecmath.NS_PER_ELEMENT
    return vecmath.FLOPS["gelu"] * ns[act] / ns["gelu"]


def _mba_vecmath_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """The product's roofline, the bias and the activation's FLOPs (c-vecmath's declared
    ones), the boundary operands' bytes, one C call (two for batched weights)."""
    x, w, _, out = shapes
    base = matmul_cost([x, w, out], [dtypes[0], dtypes[1], dtypes[3]], params)
    n, act = numel(out), params.get("act", "none")
    epilogue = n * (1.0 + _act_flops(act))
    if len(w) != 2:
        est = _product_cost(base, x[-2] if len(x) >= 2 else 1)
        overhead = est.overhead_ns + CALL_NS + (FRAME_NS if len(x) < 2 else 0.0)
    else:
        est = _product_cost(base, numel(x[:-1]))
        overhead = est.overhead_ns
    return CostEstimate(est.flops + epilogue, operand_bytes(shapes, dtypes), overhead)


def _gated_native_cost(costs: dict) -> CostFn:
    composed = _gated_cost(costs)

    def cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
        """One C call for GEMV shapes; else three packed products and one C pass (silu * up)."""
        base = composed(shapes, dtypes, params)
        rows = numel(shapes[0][:-1])
        est = _product_cost(base, rows)
        return CostEstimate(
            est.flops, est.bytes_moved, CALL_NS if rows < GEMV_ROWS else 4 * CALL_NS
        )

    return cost


def _rope_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    return CostEstimate(3.0 * numel(shapes[0]), operand_bytes(shapes, dtypes), CALL_NS)


def _rms_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    return CostEstimate(4.0 * numel(shapes[0]), operand_bytes(shapes, dtypes), CALL_NS)


def _ln_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    return CostEstimate(8.0 * numel(shapes[0]), operand_bytes(shapes, dtypes), CALL_NS)


def register_native(table: KernelBindingTable, force: bool = False) -> None:
    """Register the native f32 kernels (after numpy's at each key); no-op where they are
    disabled or no C compiler exists (`native.enabled`), unless `force` (a bundle that ships
    the compiled library). Compiles nothing: the library is built on the first call."""
    if not (force or native.enabled()):
        return
    code = native.revision_text()
    t = "f32"
    claim = measured("matmul accumulation (cancellation): normwise relative error measured")
    packed = (_fma_shape, _fma_gemm, _fma_rows, _packed_weight, pack, _encode_packed, _writable)
    add(
        table,
        "matmul",
        (t, t, t),
        _matmul_native,
        matmul_claim(t),
        _matmul_cost,
        also=(*packed, _gemv_shape, _gemv, _matmul, _prepare_matmul, _batched_shape, _batched)
        + (_batch_offsets,),
        source=NATIVE,
        code=code,
    )
    costs = _part_costs(table, t)
    add(
        table,
        "matmul_bias_act",
        (t,) * 4,
        _matmul_bias_act_native,
        claim,
        _mba_native_cost(costs),
        also=(*packed, _gemv_shape, _gemv, _matmul, _bias_1d, _prepare_mba),
        source=NATIVE,
        code=code,
    )
    add(
        table,
        "matmul_bias_act",
        (t,) * 4,
        _matmul_bias_act_vecmath,
        measured(
            "matmul accumulation (cancellation): normwise relative error measured; the "
            "epilogue's activation by c-vecmath (1 ulp, relu exact)",
            with_ulp=False,
        ),
        _mba_vecmath_cost,
        also=(*packed, _gemv_shape, _matmul, _bias_1d, _prepare_mba_vecmath)
        + (_encode_mba_vecmath, _batched_shape, _batched),
        source=NATIVE_VECMATH,
        code=code,
    )
    add(
        table,
        "gated_mlp",
        (t,) * 5,
        _gated_mlp_native,
        claim,
        _gated_native_cost(costs),
        also=(*packed, _gemv_shape, _weights_2d, _numpy_gated, _prepare_gated)
        + (_gated_packed_record,),
        source=NATIVE,
        code=code,
    )
    add(
        table,
        "rms_norm",
        (t, t, t),
        _rms_norm_native,
        measured("positive sum of squares, then products: ulp and rel measured", with_ulp=True),
        _rms_cost,
        also=(_numpy_rms,),
        source=NATIVE,
        code=code,
    )
    add(
        table,
        "layer_norm",
        (t,) * 4,
        _layer_norm_native,
        measured("mean, variance and the affine map in f64, rounded once: rel measured"),
        _ln_cost,
        also=(_numpy_ln, _ln_shape, _encode_ln),
        source=NATIVE,
        code=code,
    )
    add(
        table,
        "rope",
        (t,) * 4,
        _rope_native,
        ulp(
            1,
            "computed in f64: exact products, one "
            "rounding, then the final one (the numpy kernel's operations)",
        ),
        _rope_cost,
        also=(_numpy_rope, _row_strided, _rope_tables, _rope_x),
        source=NATIVE,
        caps=ROWS_CAPS,
        code=code,
    )
    copy = exact("exact copy (C row copies)")
    for op, kernel, helpers in (
        ("transpose", _transpose_native, (_copyable, _permute_args, _encode_permute)),
        ("concat", _concat_native, (_concat_args, _encode_concat)),
    ):
        add(
            table,
            op,
            (t, t),
            kernel,
            copy,
            _copy_native_cost,
            also=helpers,
            source=NATIVE,
            code=code,
        )
    attn = measured("softmax-weighted sums (cancellation): exponentials and sums in f64")
    for key, with_kv_len in (((t,) * 4, False), ((t, t, t, "i64", t), True)):
        add(
            table,
            "attention",
            key,
            _flash_decode_native(with_kv_len),
            attn,
            _flash_native_cost,
            also=(_writable, _attention_native),
            source=NATIVE_FLASH,
            code=code,
        )
        add(
            table,
            "attention",
            key,
            _attention_native(with_kv_len),
            attn,
            _attention_cost,
            also=(_writable, _qkv_strides),
            source=NATIVE,
            caps=ATTN_CAPS,
            code=code,
        )
    add(
        table,
        "attention",
        (t,) * 5,
        _attention_native(False, with_mask=True),
        attn,
        _attention_cost,
        also=(_writable, _mask_view, _qkv_strides),
        source=NATIVE,
        caps=ATTN_CAPS,
        code=code,
    )


__all__ = [
    "GEMV_ROWS",
    "NATIVE",
    "NATIVE_FLASH",
    "NATIVE_VECMATH",
    "encode_ufunc",
    "pack",
    "register_native",
]
