"""Register fuel's Triton kernels on backend `"cuda"`: `register_triton_kernels(table)`.

Keys are the CPU kernels' keys (op name, one dtype per operand, inputs then outputs) for the
float dtypes f32/f16/bf16, and for all nine dtypes the movement ops (transpose, slice,
broadcast, concat, gather, where), claimed exact (`MOVEMENT_CLAIM`: bit copies); reshape needs
no kernel, the executor makes it a view on every device.

kernel_source is `"triton"` for each key's first entry; extra siblings at a key carry
`"triton-<variant>"` (matmul tile configs, `triton-flashdecode`), because a `#fuel.kernel`
stamp names its kernel by (key, kernel_source) and the executor takes the first sibling with
that source: two siblings sharing one source could not be told apart.

Precision claims (`CLAIMS`) are checked against float64 by `tests/triton/` under the
interpreter, which runs numpy's arithmetic, not the GPU's; only a run on hardware verifies them:
`bench/gpu_check.py --write-ledger` on a GPU writes `ledger.json` beside this file (one record
per claim, kernel `op/kernel_source`, at the kernel's revision). A row registers its claim
gated by that ledger: proven claims as they are, every other one marked unaudited
(`audited=False`, the claim kept for display and ranking), which no precision floor admits. No
GPU run has written the ledger yet, so every Triton claim is unaudited.

Where the GPU evaluates a function with its fast approximate `ex2.approx.f32` (tl.exp: exp, tanh,
sigmoid, silu, pow, softmax's terms), f32 claims no static bound (`deterministic`); log/sin/cos/erf
go through libdevice (<= 2 ulp in f32). f16/bf16 results computed in f32 keep a 1-ulp bound because
the f32 error stays far below half an f16/bf16 ulp over their ranges.

Nothing here touches the process-wide table. The table loads these kernels lazily, the first
time planning or execution involves a device with the `cuda` backend
(`runtime.kernels.ensure_backend_kernels(["cuda"])`, through `BACKEND_PROVIDERS`), so
CPU-only work never imports torch or triton.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from runtime.binding_table import KernelBindingTable, KernelCaps
from runtime.contracts.ledger import Ledger
from runtime.cost import FAMILY_OVERHEAD_NS, CostEstimate, cost_fn_for, dtype_bytes, io_bytes
from runtime.dtypes import ALL_DTYPES
from runtime.kernels.triton import _common
from runtime.kernels.triton.attention import AttentionKernel
from runtime.kernels.triton.elementwise import (
    BINARY_CODES,
    UNARY_CODES,
    ElementwiseKernel,
)
from runtime.kernels.triton.flash_decode import BLOCK_N, FlashDecodeKernel
from runtime.kernels.triton.matmul import CONFIGS, MatmulKernel
from runtime.kernels.triton.movement import COPY_OPS, CopyKernel, GatherKernel, WhereKernel
from runtime.kernels.triton.norm import NormKernel
from runtime.kernels.triton.reduction import OP_CODES, ReduceKernel
from runtime.kernels.triton.rope import RopeKernel
from runtime.kernels.triton.softmax import SoftmaxKernel
from runtime.kernels.triton.spec import FLOAT_DTYPES, Params, Shapes, cdiv, source_revision
from runtime.precision import PrecisionGuarantee

BACKEND = "cuda"
SOURCE = "triton"
CAPS = KernelCaps(strided_input=True)
"""Every Triton kernel reads any strides (elementwise and matmul walk them, the row kernels
copy to a row-contiguous layout first), so the executor may pass views."""


def _exact(notes: str) -> PrecisionGuarantee:
    return PrecisionGuarantee(bit_stable=True, max_ulp=0, notes=notes)


def _ulp(n: int, notes: str) -> PrecisionGuarantee:
    return PrecisionGuarantee(bit_stable=True, max_ulp=n, notes=notes)


def _det(notes: str) -> PrecisionGuarantee:
    return PrecisionGuarantee(bit_stable=True, notes=notes)


_NARROW_1ULP = "computed in f32, error << half an f16/bf16 ulp, rounded once: <= 1 ulp"
_FAST_MATH = "exp via the GPU's ex2.approx.f32 (error grows with |x|): no static bound"
_LIBDEVICE = "libdevice __nv_logf/sinf/cosf/erff (CUDA: <= 2 ulp; numpy's under the interpreter)"
_CANCEL = "cancellation (1 + erf, a*c - b*s, centred sums): no static bound"
_SUMS = "fixed-order f32 accumulation (cancellation): no static bound"

CLAIMS: dict[tuple[str, str], PrecisionGuarantee] = {}
"""(op, 'f32' | 'narrow') -> claim, where 'narrow' is f16 and bf16; see the module docstring."""
for _op in (
    "neg",
    "abs",
    "relu",
    "sqrt",
    "recip",
    "add",
    "sub",
    "mul",
    "div",
    "max",
    "min",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "cast",
    "reduce_max",
    "reduce_min",
):
    for _k in ("f32", "narrow"):
        CLAIMS[(_op, _k)] = _exact("IEEE correctly rounded (f32 op, then one rounding), or exact")
for _op in (
    "exp",
    "log",
    "tanh",
    "sigmoid",
    "silu",
    "erf",
    "sin",
    "cos",
    "softmax",
    "rms_norm",
    "rope",
):
    CLAIMS[(_op, "narrow")] = _ulp(1, _NARROW_1ULP)
for _op in ("exp", "tanh", "sigmoid", "silu", "pow"):
    CLAIMS[(_op, "f32")] = _det(_FAST_MATH)
for _op in ("log", "sin", "cos", "erf"):
    CLAIMS[(_op, "f32")] = _ulp(2, _LIBDEVICE)
CLAIMS[("pow", "narrow")] = _det(_FAST_MATH + "; y * log2(x) amplifies it by |y|")
for _k in ("f32", "narrow"):
    CLAIMS[("gelu", _k)] = _det(_CANCEL)
    CLAIMS[("layer_norm", _k)] = _det(_CANCEL)
    for _op in ("reduce_sum", "reduce_mean", "matmul", "attention", "flash_decode"):
        CLAIMS[(_op, _k)] = _det(_SUMS)
CLAIMS[("rsqrt", "f32")] = _ulp(2, "1 / sqrt_rn(x), two IEEE roundings")
CLAIMS[("rsqrt", "narrow")] = _ulp(1, _NARROW_1ULP)
CLAIMS[("rope", "f32")] = _det(_CANCEL)
CLAIMS[("softmax", "f32")] = PrecisionGuarantee(
    bit_stable=True, max_absolute=1e-5, notes="f32, rows <= 65536: |err| <= (n/1024 + 16) 2^-24"
)
CLAIMS[("rms_norm", "f32")] = PrecisionGuarantee(
    bit_stable=True, max_relative=1e-5, notes="f32, rows <= 65536: positive sums, IEEE sqrt/div"
)


MOVEMENT_CLAIM = _exact("bit copy (each dtype moved as the integer of its width)")
"""transpose, slice, broadcast, concat, gather and where, at every dtype (ALL_DTYPES)."""


def claim(op: str, dtype: str) -> PrecisionGuarantee:
    """The precision claim of the Triton kernel for `op` at float dtype `dtype`."""
    return CLAIMS[(op, "f32" if dtype == "f32" else "narrow")]


def flash_decode_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """One query over the live keys (capacity when unknown); Sq != 1 is infeasible (inf)."""
    (bsz, hq, sq, d), (_, hkv, sk, _), dv = shapes[0], shapes[1], shapes[2][3]
    if sq != 1:
        return CostEstimate(float("inf"), float("inf"), float("inf"))
    kv_len = params.get("kv_len")
    live = min(max(int(kv_len), 0), sk) if isinstance(kv_len, int) else sk
    flops = bsz * hq * live * (2.0 * (d + dv) + 5.0)
    kv = bsz * hkv * live * (d * dtype_bytes(dtypes[1]) + dv * dtype_bytes(dtypes[2]))
    qo = bsz * hq * (d * dtype_bytes(dtypes[0]) + dv * dtype_bytes(dtypes[-1]))
    partials = bsz * hq * cdiv(max(sk, 1), BLOCK_N) * 4.0 * 2  # upper bound: m, l written, read
    return CostEstimate(flops, kv + qo + partials, 2 * FAMILY_OVERHEAD_NS["attention"])


def concat_cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
    """Every input read once and written once; one launch per input (`CopyKernel`)."""
    launches = max(len(shapes) - 1, 1) * FAMILY_OVERHEAD_NS["movement"]
    return CostEstimate(0.0, io_bytes(shapes, dtypes), launches)


def _revision(kernel: Any) -> int:
    """Source of the kernel's module and the shared helpers, plus its variant name."""
    module = sys.modules[type(kernel).__module__]
    return source_revision(
        module, _common, sys.modules[source_revision.__module__], kernel.__qualname__
    )


def _rows() -> list[tuple[str, tuple[str, ...], Any, str, PrecisionGuarantee, Any]]:
    """(op, dtypes, kernel, source, claim, cost) in registration order."""
    rows: list[tuple[str, tuple[str, ...], Any, str, PrecisionGuarantee, Any]] = []
    for t in FLOAT_DTYPES:
        for op in UNARY_CODES:
            if op != "gelu_tanh":
                k = ElementwiseKernel("unary", op)
                rows.append((op, (t, t), k, SOURCE, claim(op, t), cost_fn_for(op)))
        for op, code in BINARY_CODES.items():
            out = "i1" if code >= 10 else t
            k = ElementwiseKernel("binary", op)
            rows.append((op, (t, t, out), k, SOURCE, claim(op, t), cost_fn_for(op)))
        for dst in FLOAT_DTYPES:
            k = ElementwiseKernel("cast", "cast")
            rows.append(("cast", (t, dst), k, SOURCE, claim("cast", t), cost_fn_for("cast")))
        for i, cfg in enumerate(CONFIGS):
            src = SOURCE if i == 0 else f"{SOURCE}-{cfg.tag}"
            k = MatmulKernel(cfg)
            rows.append(("matmul", (t, t, t), k, src, claim("matmul", t), cost_fn_for("matmul")))
        for op in OP_CODES:
            rows.append((op, (t, t), ReduceKernel(op), SOURCE, claim(op, t), cost_fn_for(op)))
        rows.append(
            (
                "softmax",
                (t, t),
                SoftmaxKernel(),
                SOURCE,
                claim("softmax", t),
                cost_fn_for("softmax"),
            )
        )
        for op, n in (("rms_norm", 3), ("layer_norm", 4)):
            rows.append((op, (t,) * n, NormKernel(op), SOURCE, claim(op, t), cost_fn_for(op)))
        rows.append(("rope", (t,) * 4, RopeKernel(), SOURCE, claim("rope", t), cost_fn_for("rope")))
        for kv in (False, True):
            key = (t, t, t, "i64", t) if kv else (t, t, t, t)
            rows.append(
                (
                    "attention",
                    key,
                    AttentionKernel(kv),
                    SOURCE,
                    claim("attention", t),
                    cost_fn_for("attention"),
                )
            )
            rows.append(
                (
                    "attention",
                    key,
                    FlashDecodeKernel(kv),
                    f"{SOURCE}-flashdecode",
                    claim("flash_decode", t),
                    flash_decode_cost,
                )
            )
    for t in ALL_DTYPES:
        for op in COPY_OPS:
            cost = concat_cost if op == "concat" else cost_fn_for(op)
            rows.append((op, (t, t), CopyKernel(op), SOURCE, MOVEMENT_CLAIM, cost))
        for ix in ("i64", "i32"):
            rows.append(
                (
                    "gather",
                    (t, ix, t),
                    GatherKernel(),
                    SOURCE,
                    MOVEMENT_CLAIM,
                    cost_fn_for("gather"),
                )
            )
        rows.append(
            ("where", ("i1", t, t, t), WhereKernel(), SOURCE, MOVEMENT_CLAIM, cost_fn_for("where"))
        )
    return rows


LEDGER_PATH = Path(__file__).resolve().parent / "ledger.json"
"""What GPU runs of `bench/gpu_check.py --write-ledger` proved (absent until one has run)."""


def ledger_kernel(op: str, source: str) -> str:
    """A Triton row's kernel name in the ledger: `op/kernel_source` (unique at a key)."""
    return f"{op}/{source}"


def gated(
    op: str, dtypes: tuple[str, ...], source: str, revision: int, claim: PrecisionGuarantee
) -> PrecisionGuarantee:
    """`claim` as `LEDGER_PATH` proves it: resolved when every claim has a pass record at
    `revision`, else marked unaudited (kept for display and ranking, refused by every floor)."""
    ledger = _ledger()
    precision, missing = ledger.resolve(ledger_kernel(op, source), BACKEND, dtypes, revision, claim)
    if not missing:
        return precision
    return replace(claim, audited=False, notes=f"{claim.notes}; unaudited: no GPU run proved it")


@functools.cache
def _ledger() -> Ledger:
    return Ledger.load(LEDGER_PATH)


def register_triton_kernels(table: KernelBindingTable, *, gate: bool = True) -> None:
    """Register every Triton kernel on backend "cuda" into `table` (appended; not finalized),
    claims gated by the GPU ledger (`gate=False`: as declared, for the checks that verify them)."""
    for op, dtypes, kernel, source, precision, cost in _rows():
        revision = _revision(kernel)
        table.register(
            op,
            dtypes,
            BACKEND,
            kernel,
            caps=CAPS,
            precision=gated(op, dtypes, source, revision, precision) if gate else precision,
            cost=cost,
            kernel_source=source,
            revision=revision,
        )


def triton_kernel_table(*, gate: bool = True) -> KernelBindingTable:
    """A fresh, finalized table holding only the Triton kernels (for tests and tools)."""
    table = KernelBindingTable()
    register_triton_kernels(table, gate=gate)
    table.finalize()
    return table
