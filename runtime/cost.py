"""Layer-1 cost model: what one kernel launch costs, computed from the op's real operand shapes.

A `CostEstimate` counts floating-point operations (an FMA is 2), bytes moved between memory and
the compute units, and a fixed launch overhead. `composite_ns` turns it into time with a device's
peak rates (roofline: compute and memory overlap, the overhead is serial). Layer 2 (the Judge)
replaces these estimates with measurements; Layer 1 only has to be directionally right.

`COST_TABLE` maps every fuel kernel op name (`KERNEL_OP`, e.g. `"matmul"`, `"reduce_sum"`) to a
`CostFn`. Unlike the original, which priced matmul and attention at zero when the planner had no
op params, every formula here reads the geometry from the operand shapes themselves.

Conventions: `shapes` and `dtypes` list the operands, inputs then outputs (`shapes[-1]` is the
result). Bytes count every operand once at its real size and dtype, so a broadcast operand (a
`(k, n)` weight under a batched matmul, a bias row) is read once. `concat` is keyed with two
dtypes (input, output) whatever its arity; the input dtype then applies to every input.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Shapes = Sequence[Sequence[int]]
Params = Mapping[str, Any]

# -- the record and the roofline -------------------------------------------------------------

BASELINE_FLOPS_PER_NS = 16.0
"""One CPU core's sustained f32 SIMD rate: 8 lanes (AVX2) x 2 (FMA) at ~1 op/ns issued; a
conservative share of the ~100 FLOP/ns a 3 GHz core peaks at with two FMA ports."""

BASELINE_BYTES_PER_NS = 10.0
"""One CPU core's sustained streaming bandwidth (10 GB/s: a single core cannot saturate DRAM)."""


@dataclass(frozen=True)
class CostEstimate:
    """Work of one kernel launch: floating-point operations, bytes moved, fixed overhead."""

    flops: float = 0.0
    bytes_moved: float = 0.0
    overhead_ns: float = 0.0

    def composite_ns(self, flops_per_ns: float, bytes_per_ns: float) -> float:
        """Roofline time on a device with these peak rates; see `composite_ns`."""
        return composite_ns(self, flops_per_ns, bytes_per_ns)


CostFn = Callable[[Sequence[tuple[int, ...]], Sequence[str], Mapping[str, Any]], CostEstimate]
"""(operand shapes, operand dtypes, op params) -> CostEstimate; operands are inputs then outputs."""


def _rate(value: float, fallback: float) -> float:
    # A missing or corrupt rate (0, negative, NaN, inf) must not price a kernel at zero or at
    # infinity: the one-core CPU baseline is a pessimistic but finite stand-in.
    return value if math.isfinite(value) and value > 0 else fallback


def composite_ns(cost: CostEstimate, flops_per_ns: float, bytes_per_ns: float) -> float:
    """`max(flops / rate, bytes / bandwidth) + overhead_ns`.

    Compute and memory traffic overlap, so the slower one bounds the kernel; the launch overhead
    is serial and never scaled. Non-finite or non-positive rates fall back to the one-core CPU
    baseline (`BASELINE_FLOPS_PER_NS`, `BASELINE_BYTES_PER_NS`).
    """
    compute = cost.flops / _rate(flops_per_ns, BASELINE_FLOPS_PER_NS)
    memory = cost.bytes_moved / _rate(bytes_per_ns, BASELINE_BYTES_PER_NS)
    return max(compute, memory) + cost.overhead_ns


# -- element sizes and operand helpers -------------------------------------------------------

DTYPE_BYTES: Mapping[str, int] = {
    "f64": 8,
    "f32": 4,
    "f16": 2,
    "bf16": 2,
    "i64": 8,
    "i32": 4,
    "i8": 1,
    "u8": 1,
    "i1": 1,
}
"""Storage bytes per element; i1 is stored one byte per element (numpy bool)."""


class CostError(Exception):
    """Base class of cost-model errors."""


class UnknownCostOp(CostError, LookupError):
    """No cost function is registered for the op name."""

    def __init__(self, op: str):
        self.op = op
        super().__init__(f"no Layer-1 cost function for op '{op}' (known: {', '.join(COST_TABLE)})")


class BadCostOperands(CostError, ValueError):
    """The shapes or dtypes do not fit the op's operand layout."""


def dtype_bytes(name: str) -> int:
    """Bytes per element of a fuel dtype name; `CostError` names an unknown dtype."""
    try:
        return DTYPE_BYTES[name]
    except KeyError:
        raise CostError(f"unknown dtype '{name}' (known: {', '.join(DTYPE_BYTES)})") from None


def numel(shape: Sequence[int]) -> int:
    """Element count of a shape (1 for a scalar)."""
    return math.prod(int(d) for d in shape)


def _dtype_of(shapes: Shapes, dtypes: Sequence[str], i: int) -> str:
    # One dtype per operand, except variadic ops keyed (input dtype, output dtype).
    if len(dtypes) == len(shapes):
        return dtypes[i]
    return dtypes[-1] if i == len(shapes) - 1 else dtypes[0]


def io_bytes(shapes: Shapes, dtypes: Sequence[str]) -> float:
    """Bytes of every operand read or written once (inputs then outputs)."""
    return float(
        sum(numel(s) * dtype_bytes(_dtype_of(shapes, dtypes, i)) for i, s in enumerate(shapes))
    )


# -- per-family formulas ---------------------------------------------------------------------

FAMILY_OVERHEAD_NS: Mapping[str, float] = {
    "elementwise": 50.0,  # one launch of a streaming kernel
    "reduction": 50.0,
    "normalization": 50.0,  # softmax, norms, rope: one fused row-wise kernel
    "movement": 50.0,  # transpose, slice, concat, gather: a copy kernel
    "matmul": 100.0,  # tile setup and (on GPUs) a heavier launch
    "attention": 200.0,  # multi-phase kernel (scores, softmax, PV)
    "view": 0.0,  # reshape: metadata only, nothing launches
    "value": 0.0,  # constant / weight: already materialised
}
"""Fixed per-launch overhead by family, added serially by `composite_ns`."""
_OH = FAMILY_OVERHEAD_NS

ELEMENTWISE_FLOPS: Mapping[str, float] = {
    # cheap: one ALU op per element
    "neg": 1,
    "abs": 1,
    "relu": 1,
    "add": 1,
    "sub": 1,
    "mul": 1,
    "div": 1,
    "max": 1,
    "min": 1,
    "eq": 1,
    "ne": 1,
    "lt": 1,
    "le": 1,
    "gt": 1,
    "ge": 1,
    "where": 1,
    # transcendental: a ~10-op polynomial/range reduction each (sqrt, rsqrt and recip are
    # hardware ops but have ~10x the reciprocal throughput of an add)
    "exp": 10,
    "log": 10,
    "sqrt": 10,
    "rsqrt": 10,
    "recip": 10,
    "tanh": 10,
    "sin": 10,
    "cos": 10,
    "erf": 20,  # a rational/series evaluation plus exp, like gelu's exact form
    "sigmoid": 12,  # exp + add + divide
    "silu": 13,  # sigmoid + multiply
    "pow": 20,  # exp(y * log(x))
    "cast": 0,  # conversion is free next to the memory traffic
}
"""FLOPs per output element of the elementwise ops (`gelu` depends on its params, below)."""

GELU_FLOPS: Mapping[str, float] = {"tanh": 17.0, "none": 23.0}
"""tanh form: tanh (10) + 7 mul/add; exact form: erf by a ~20-op rational approximation + 3."""

ROW_FLOPS: Mapping[str, tuple[float, float]] = {
    "softmax": (5.0, 0.0),  # max, sub, exp (counted 1: fused polynomial), sum, scale
    "rms_norm": (4.0, 10.0),  # square, accumulate, scale, weight; one rsqrt per row
    "layer_norm": (8.0, 10.0),  # mean, centre, square, accumulate, scale, weight, bias
    "rope": (3.0, 0.0),  # a*cos - b*sin: two multiplies and one add per output
}
"""(FLOPs per element, FLOPs per row over the last dim) of the row-wise ops."""


def _elementwise(flops_per_elem: float) -> CostFn:
    def cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
        n = numel(shapes[-1])
        return CostEstimate(flops_per_elem * n, io_bytes(shapes, dtypes), _OH["elementwise"])

    return cost


def _gelu(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    per = GELU_FLOPS.get(str(params.get("approximate", "none")), GELU_FLOPS["none"])
    return _elementwise(per)(shapes, dtypes, params)


def _reduce(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    # One accumulate per input element; the output (far smaller) is written once.
    flops = float(sum(numel(s) for s in shapes[:-1]))
    return CostEstimate(flops, io_bytes(shapes, dtypes), _OH["reduction"])


def _row_wise(op: str) -> CostFn:
    per_elem, per_row = ROW_FLOPS[op]

    def cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
        out = shapes[-1]
        n = numel(out)
        # softmax may run along any axis; the row count is n / (length of that axis)
        axis = int(params.get("axis", len(out) - 1)) if out else 0
        rows = n // max(int(out[axis]), 1) if out else 1
        flops = per_elem * n + per_row * rows
        return CostEstimate(flops, io_bytes(shapes, dtypes), _OH["normalization"])

    return cost


def _matmul(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """`(..., m, k) x (..., k, n)`: 2*batch*m*n*k FLOPs with batch from the broadcast result.

    Bytes are the operands at their own sizes, so a broadcast weight is read once, not per batch.
    """
    a, out = shapes[0], shapes[-1]
    m, k, n = int(a[-2]), int(a[-1]), int(out[-1])
    batch = numel(out[:-2])
    return CostEstimate(2.0 * batch * m * n * k, io_bytes(shapes, dtypes), _OH["matmul"])


def causal_pairs(sq: int, skv: int) -> int:
    """(query, key) pairs a bottom-right-aligned causal mask keeps: query i sees keys
    `j <= i + skv - sq`. Sq == Skv gives Sq(Sq+1)/2; decode (Sq = 1) keeps all Skv."""
    off = skv - sq
    first_row = max(0, -(off + 1))  # rows before this one see no key at all
    count = sq - first_row
    if count <= 0:
        return 0
    return (first_row + off + 1 + skv) * count // 2  # arithmetic series up to skv


def _attention(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """q (B,Hq,Sq,D), k (B,Hkv,Sk,D), v (B,Hkv,Sk,Dv)[, kv_len], out (B,Hq,Sq,Dv).

    Skv = `params["kv_len"]` when the caller knows the live length, else Sk. Per visible
    (query, key) pair: 2D (QK^T) + 2Dv (PV) + 5 (scale, max, exp, sum, normalise) FLOPs, i.e.
    4*B*Hq*Sq*Skv*D + 5*B*Hq*Sq*Skv when Dv = D. `causal` counts only the pairs the mask keeps
    (exactly, via `causal_pairs`): what a block-skipping flash kernel does; a kernel that masks a
    dense score matrix should register its own cost. Bytes: q + out + the first Skv rows of k
    and v (GQA: Hkv heads, each read once) + the kv_len scalar.
    """
    (b, hq, sq, d), k, v = (int(x) for x in shapes[0]), shapes[1], shapes[2]
    sk, dv = int(k[2]), int(v[3])
    kv_len = params.get("kv_len")
    known = isinstance(kv_len, numbers.Integral) and not isinstance(kv_len, bool)
    skv = min(max(int(kv_len), 0), sk) if known else sk
    pairs = causal_pairs(sq, skv) if params.get("causal") else sq * skv
    flops = b * hq * pairs * (2.0 * d + 2.0 * dv + 5.0)
    kv_fraction = skv / sk if sk else 0.0
    moved = io_bytes(shapes, dtypes)
    unread = (1.0 - kv_fraction) * io_bytes([k, v], [dtypes[1], dtypes[2]])
    return CostEstimate(flops, moved - unread, _OH["attention"])


def _copy(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    # transpose / concat: every input element is read once and written once.
    return CostEstimate(0.0, io_bytes(shapes, dtypes), _OH["movement"])


def _select(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """slice / gather: only the selected elements are read (out x 2), plus any index operand."""
    out_bytes = numel(shapes[-1]) * dtype_bytes(_dtype_of(shapes, dtypes, len(shapes) - 1))
    indices = io_bytes(shapes[1:-1], dtypes[1:-1]) if len(dtypes) == len(shapes) else 0.0
    return CostEstimate(0.0, 2.0 * out_bytes + indices, _OH["movement"])


def _write_rows(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """index_copy: the source rows and the index read, the rows written (run in place: the
    dest's other rows are not touched)."""
    moved = io_bytes(shapes[1:3], dtypes[1:3]) if len(dtypes) == len(shapes) else 0.0
    src = numel(shapes[1]) * dtype_bytes(_dtype_of(shapes, dtypes, 1))
    return CostEstimate(0.0, moved + src, _OH["movement"])


def _free(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    return CostEstimate()


ACT_OPS: Mapping[str, tuple[tuple[str, Params], ...]] = {
    "none": (),
    "relu": (("relu", {}),),
    "silu": (("silu", {}),),
    "gelu": (("gelu", {"approximate": "none"}),),
    "gelu_tanh": (("gelu", {"approximate": "tanh"}),),
}
"""`matmul_bias_act`'s activation as the primitive op (and its params) it stands for."""


def _matmul_bias_act(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """Composed from the decomposition: matmul, bias add, activation (`fused_cost`)."""
    (x, w, b, out), t = shapes, dtypes[-1]
    parts = [("matmul", [x, w, out], [t] * 3, {}), ("add", [out, b, out], [t] * 3, {})]
    parts += [(op, [out, out], [t] * 2, p) for op, p in ACT_OPS[str(params.get("act", "none"))]]
    return fused_cost(parts, io_bytes(shapes, dtypes))


def _gated_mlp(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """Composed from the decomposition: two matmuls, silu, mul, the down matmul."""
    (x, wg, wu, wd, out), t = shapes, dtypes[-1]
    h = (*x[:-1], wg[-1])
    parts = [
        ("matmul", [x, wg, h], [t] * 3, {}),
        ("matmul", [x, wu, h], [t] * 3, {}),
        ("silu", [h, h], [t] * 2, {}),
        ("mul", [h, h, h], [t] * 3, {}),
        ("matmul", [h, wd, out], [t] * 3, {}),
    ]
    return fused_cost(parts, io_bytes(shapes, dtypes))


COST_TABLE: Mapping[str, CostFn] = {
    **{op: _elementwise(f) for op, f in ELEMENTWISE_FLOPS.items()},
    "gelu": _gelu,
    **{op: _reduce for op in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min")},
    **{op: _row_wise(op) for op in ROW_FLOPS},
    "matmul": _matmul,
    "attention": _attention,
    "transpose": _copy,
    "broadcast": _copy,  # the input read once (it is no larger than the output), the output written
    "concat": _copy,
    "slice": _select,
    "gather": _select,
    "index_copy": _write_rows,
    "reshape": _free,  # a row-major reshape is a view
    "constant": _free,
    "weight": _free,
    "matmul_bias_act": _matmul_bias_act,  # fused ops: priced from their decomposition
    "gated_mlp": _gated_mlp,
}
"""Every fuel kernel op name -> its Layer-1 cost function."""


# -- entry points ----------------------------------------------------------------------------


def cost_fn_for(op: str) -> CostFn:
    """The cost function of `op` (`"matmul"` or `"fuel.matmul"`); `UnknownCostOp` otherwise."""
    try:
        return COST_TABLE[op.removeprefix("fuel.")]
    except KeyError:
        raise UnknownCostOp(op) from None


def layer1_cost(op: str, shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """Layer-1 estimate of one `op` launch; `UnknownCostOp` / `BadCostOperands` on bad input."""
    fn = cost_fn_for(op)
    try:
        return fn([tuple(s) for s in shapes], tuple(dtypes), params)
    except CostError:
        raise
    except (IndexError, ValueError, TypeError) as e:
        raise BadCostOperands(
            f"cannot price '{op}' with shapes {list(map(tuple, shapes))} and dtypes "
            f"{list(dtypes)}: {e}"
        ) from None


CostComponent = tuple[str, Shapes, Sequence[str], Params]
"""One primitive of a fused op's decomposition: (op, shapes, dtypes, params)."""


def fused_cost(decomposition: Sequence[CostComponent], boundary_bytes: float) -> CostEstimate:
    """Price a fused op from its decomposition (concepts doc section 7).

    FLOPs are the sum over the components; bytes are the fused op's boundary I/O only (fusion
    keeps intermediates on chip); the overhead is one launch: the largest component overhead,
    floored at the elementwise launch cost (a fusion of views still launches a kernel).
    """
    parts = [layer1_cost(*c) for c in decomposition]
    overhead = max((p.overhead_ns for p in parts), default=0.0)
    return CostEstimate(
        flops=sum(p.flops for p in parts),
        bytes_moved=float(boundary_bytes),
        overhead_ns=max(overhead, FAMILY_OVERHEAD_NS["elementwise"]),
    )


# -- units ---------------------------------------------------------------------------------

_TIME_UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"))
_BYTE_UNITS = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))
_FLOP_UNITS = ((1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP"), (1e3, "kFLOP"))


def _scaled(x: float, units: tuple[tuple[float, str], ...], base: str) -> str:
    for scale, name in units:
        if abs(x) >= scale:
            v = x / scale
            return f"{v:.1f} {name}" if abs(v) < 100 else f"{v:.0f} {name}"
    return f"{x:.0f} {base}"


def fmt_ns(ns: float) -> str:
    """Nanoseconds in human units: `980 ns`, `1.2 µs`, `45.0 ms`; `0` for nothing."""
    if ns == 0:
        return "0"
    return "∞" if math.isinf(ns) else _scaled(ns, _TIME_UNITS, "ns")


def fmt_bytes(n: float) -> str:
    """Bytes in binary units: `512 B`, `24.0 KiB`, `1.5 MiB`."""
    return _scaled(n, _BYTE_UNITS, "B")


def fmt_flops(n: float) -> str:
    """Operations in decimal units: `512 FLOP`, `1.2 GFLOP`."""
    return _scaled(n, _FLOP_UNITS, "FLOP")
