"""GPU check of fuel's Triton kernels: claims vs float64, agreement with torch, speed.

Two phases, one table each:

1. claims: EVERY registered Triton entry (op x dtypes x sibling) runs once on random inputs and
   its precision claim is checked against a float64 torch reference on the same device (where
   the claim sets no numeric bound: a dtype tolerance relative to the largest reference value).
   On a GPU this is what verifies the fast-math claims on the hardware.
2. speed: representative LLM-sized launches (exp over 16M elements, a row-broadcast add, a cast,
   4096^3 matmul per tile config, reductions, vocab softmax, norms, rope, causal GQA prefill
   attention at S=4096, flash decoding with 32 query heads over an 8k KV cache, full and
   half live, tiled transposes (2-D bf16 8192^2; f32 [32, 2048, 1000] swapping the last two
   axes) against torch's `.transpose(...).contiguous()`, an embedding-row gather (its time
   includes the one error-flag read back per call) against torch indexing), each checked
   against float64 and torch, then timed with CUDA events (median of `--iters` after 3
   warm-ups) next to torch: cuBLAS for matmul (also as % of cuBLAS), SDPA for attention.
   TFLOP/s for matmul and attention, GB/s for memory-bound kernels, % of peak HBM bandwidth
   (`--peak-gbs`, H200: 4800) for flash decoding.

Without a GPU everything runs at small shapes under the Triton interpreter, prints
"no GPU: timings skipped", and takes well under 2 minutes. Exit status 1 on any mismatch.

**The Triton ledger.** Phase 1 checks each row's claim as declared (`triton_kernel_table(gate=
False)`), and bit-stability by running it twice. With `--write-ledger` on a GPU it records the
results in `runtime/kernels/triton/ledger.json` (one pass/fail record per claim, kernel
`op/kernel_source`, at the kernel's revision hash, with the device name and the case as
evidence): the registry's precision gate reads that file, so only then do the Triton claims
become audited and pass precision floors. Without a GPU `--write-ledger` writes nothing (the
interpreter runs numpy's arithmetic, not the hardware's: it proves nothing about a GPU), and the
movement rows (bit copies, not swept here) stay unaudited until a check covers them.

    .venv/bin/python bench/gpu_check.py [--iters 20] [--peak-gbs 4800] [--skip-claims]
                                        [--write-ledger]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

GPU = torch.cuda.is_available()
if GPU:  # must precede any triton import: compile for the device, never interpret
    os.environ["FUEL_GPU"] = "1"
    os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import runtime.kernels.triton  # noqa: E402, F401  (selects the interpreter on a CPU machine)
from runtime.binding_table import BindingEntry  # noqa: E402
from runtime.contracts.ledger import (  # noqa: E402
    PROTOCOL,
    Ledger,
    LedgerRecord,
    claims_of,
    revision_hex,
)
from runtime.kernels.triton.movement import COPY_OPS  # noqa: E402
from runtime.kernels.triton.registry import (  # noqa: E402
    BACKEND,
    LEDGER_PATH,
    ledger_kernel,
    triton_kernel_table,
)
from runtime.precision import ErrorReport, PrecisionGuarantee, measure_errors  # noqa: E402

DEV = "cuda" if GPU else "cpu"
TD = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i1": torch.bool}
TOL = {"f32": 2e-5, "f16": 2e-3, "bf16": 1.6e-2, "i1": 0.0}
MOVEMENT = {*COPY_OPS, "gather", "where"}
CHECK_ELEMS = 1 << 22
"""Elements compared against float64 per launch (a prefix of the flattened output)."""


@dataclass
class Case:
    """One launch: inputs, params, a float64 reference, torch's own kernel, work counts."""

    name: str
    op: str
    dtypes: tuple[str, ...]
    inputs: list[torch.Tensor]
    out_shape: tuple[int, ...]
    ref64: Callable[[], torch.Tensor]
    torch_fn: Callable[[], torch.Tensor] | None = None
    params: dict = field(default_factory=dict)
    source: str = "triton"
    flops: float = 0.0
    bytes_moved: float = 0.0
    kind: str = "GB/s"  # or "TFLOP/s" or "%peak"


def rand(shape, dtype: str, std: float = 1.0) -> torch.Tensor:
    return (torch.randn(shape, device=DEV, dtype=torch.float32) * std).to(TD[dtype])


def nbytes(*ts: torch.Tensor) -> float:
    return float(sum(t.numel() * t.element_size() for t in ts))


def sdpa64(q, k, v, n: int, causal: bool, scale: float) -> torch.Tensor:
    """fuel.attention in float64: GQA, the first n keys, bottom-right causal, empty rows 0."""
    g = q.shape[1] // k.shape[1]
    k, v = (t[:, :, :n].double().repeat_interleave(g, 1) for t in (k, v))
    s = q.double() @ k.transpose(-1, -2) * scale
    if causal:
        i = torch.arange(q.shape[2], device=DEV)[:, None]
        s = s.masked_fill(torch.arange(n, device=DEV)[None, :] > i + n - q.shape[2], -torch.inf)
    return torch.softmax(s, -1).nan_to_num(0.0) @ v


def rope64(x, c, s, interleaved: bool) -> torch.Tensor:
    x, c, s = x.double(), c.double(), s.double()
    h = x.shape[-1] // 2
    a, b = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., :h], x[..., h:])
    ra, rb = a * c - b * s, b * c + a * s
    return torch.stack([ra, rb], -1).flatten(-2) if interleaved else torch.cat([ra, rb], -1)


# -- phase 1: one launch per registered entry ---------------------------------------------------

UNARY64 = {
    "neg": torch.neg,
    "abs": torch.abs,
    "relu": lambda x: torch.where(x.isnan() | (x > 0), x, 0.0),  # numpy's: relu(-0.0) = 0.0
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "recip": torch.reciprocal,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    "sin": torch.sin,
    "cos": torch.cos,
    "erf": torch.erf,
    "gelu": F.gelu,
}
BINARY64 = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "pow": torch.pow,
    "max": torch.maximum,
    "min": torch.minimum,
    "eq": torch.eq,
    "ne": torch.ne,
    "lt": torch.lt,
    "le": torch.le,
    "gt": torch.gt,
    "ge": torch.ge,
}
REDUCE64 = {
    "reduce_sum": torch.sum,
    "reduce_mean": torch.mean,
    "reduce_max": torch.amax,
    "reduce_min": torch.amin,
}


def _unary_input(op: str, t: str, n: int) -> torch.Tensor:
    x = torch.randn(n, device=DEV, dtype=torch.float64) * 3
    if op in ("log", "sqrt", "rsqrt"):
        x = x.abs() * 10 + 1e-3
    if op == "exp":  # the dtype's finite range, subnormal results included
        x = x.clamp(-10, 10) if t == "f16" else (x * 20).clamp(-100, 88)
    if op not in ("log", "sqrt", "rsqrt"):  # signed zeros: Triton's unary minus loses -0.0
        x[:2] = torch.tensor([0.0, -0.0])
    return x.to(TD[t])


def _binary_input(op: str, t: str, rows: int, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = rand((rows, d), t, 3.0), rand((d,), t, 3.0)
    if op == "pow":
        a, b = a.abs() + 0.1, b.clamp(-4, 4)
    if op in BINARY64 and op in ("eq", "ne", "lt", "le", "gt", "ge"):
        a, b = a.round(), b.round()
    if op == "div":
        b = torch.where(b.abs() < 0.1, torch.full_like(b, 0.5), b)
    return a, b


def sweep_case(op: str, dtypes: tuple[str, ...], source: str, big: bool) -> Case:
    """Inputs and the float64 reference for one entry (small shapes without a GPU)."""
    t, n, (rows, d) = dtypes[0], (1 << 20) if big else 2048, (512, 384) if big else (6, 70)
    if op in UNARY64:
        x = _unary_input(op, t, n)
        return Case(op, op, dtypes, [x], x.shape, lambda: UNARY64[op](x.double()))
    if op in BINARY64:
        a, b = _binary_input(op, t, rows, d)
        return Case(op, op, dtypes, [a, b], a.shape, lambda: BINARY64[op](a.double(), b.double()))
    if op == "cast":
        x = rand((n,), t, 100.0)
        return Case(op, op, dtypes, [x], x.shape, lambda: x.double())
    if op == "matmul":
        a, b = rand((rows, d), t), rand((d, 96), t)
        return Case(
            op, op, dtypes, [a, b], (rows, 96), lambda: a.double() @ b.double(), source=source
        )
    x = rand((rows, d), t, 2.0)
    if op in REDUCE64:
        p = {"axes": (1,), "keepdim": False}
        return Case(op, op, dtypes, [x], (rows,), lambda: REDUCE64[op](x.double(), 1), params=p)
    if op == "softmax":
        return Case(op, op, dtypes, [x], x.shape, lambda: x.double().softmax(1), params={"axis": 1})
    w, bias = rand((d,), t), rand((d,), t)
    if op == "rms_norm":
        ref = lambda: F.rms_norm(x.double(), (d,), w.double(), 1e-6)  # noqa: E731
        return Case(op, op, dtypes, [x, w], x.shape, ref, params={"eps": 1e-6})
    if op == "layer_norm":
        ref = lambda: F.layer_norm(x.double(), (d,), w.double(), bias.double(), 1e-5)  # noqa: E731
        return Case(op, op, dtypes, [x, w, bias], x.shape, ref, params={"eps": 1e-5})
    if op == "rope":
        xr, c, s = rand((2, 4, 16, 64), t), rand((16, 32), t), rand((16, 32), t)
        return Case(
            op,
            op,
            dtypes,
            [xr, c, s],
            xr.shape,
            lambda: rope64(xr, c, s, False),
            params={"interleaved": False},
        )
    return _attention_case(dtypes, source)


def _attention_case(dtypes: tuple[str, ...], source: str) -> Case:
    t, sq = dtypes[0], 1 if source.endswith("flashdecode") else 37
    q, k, v = rand((2, 8, sq, 64), t), rand((2, 2, 300, 64), t), rand((2, 2, 300, 64), t)
    n = 200 if len(dtypes) == 5 else 300
    ins = [q, k, v] + ([torch.tensor(n, device=DEV)] if len(dtypes) == 5 else [])
    p = {"causal": True, "scale": 0.125}
    return Case(
        "attention",
        "attention",
        dtypes,
        ins,
        q.shape,
        lambda: sdpa64(q, k, v, n, True, 0.125),
        params=p,
        source=source,
    )


# -- phase 2: LLM-sized launches ----------------------------------------------------------------


def speed_cases(big: bool) -> list[Case]:
    """Representative launches; `big`: LLM-sized (GPU), else interpreter-sized."""
    return [*_memory_cases(big), *_matmul_cases(big), *_attention_cases(big)]


def _memory_cases(big: bool) -> list[Case]:
    n, (rows, d) = (1 << 24) if big else 4096, (16384, 4096) if big else (8, 96)
    x, c = rand((n,), "bf16", 2.0), rand((n,), "f32", 100.0)
    a, b = rand((rows, d), "f16"), rand((d,), "f16")
    r, h = rand((rows, d), "f32"), rand((rows, d), "bf16")
    w, bias = rand((d,), "bf16"), rand((d,), "bf16")
    vocab = rand((rows // 4, 32000 if big else 1000), "bf16", 3.0)
    s, hd = (4096, 128) if big else (16, 32)
    xr = rand((1, 32, s, hd), "bf16")
    freq = 1e4 ** (-torch.arange(hd // 2, device=DEV) / (hd // 2))
    ang = torch.arange(s, device=DEV)[:, None] * freq
    cos, sin = ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16)
    t2 = rand((8192, 8192) if big else (40, 96), "bf16")
    tb = rand((32, 2048, 1000) if big else (3, 40, 70), "f32")  # 1000: not a multiple of 64
    emb = rand((32000, 4096) if big else (100, 96), "bf16")
    ids = torch.randint(-emb.shape[0], emb.shape[0], (4096 if big else 40,), device=DEV)
    return [
        Case(
            "exp",
            "exp",
            ("bf16",) * 2,
            [x],
            x.shape,
            lambda: x.double().exp(),
            x.exp,
            bytes_moved=nbytes(x, x),
        ),
        Case(
            "add (row broadcast)",
            "add",
            ("f16",) * 3,
            [a, b],
            a.shape,
            lambda: a.double() + b.double(),
            lambda: a + b,
            bytes_moved=nbytes(a, a, b),
        ),
        Case(
            "cast f32->bf16",
            "cast",
            ("f32", "bf16"),
            [c],
            c.shape,
            c.double,
            lambda: c.to(torch.bfloat16),
            bytes_moved=6.0 * n,
        ),
        Case(
            "reduce_sum (last axis)",
            "reduce_sum",
            ("f32",) * 2,
            [r],
            (rows,),
            lambda: r.double().sum(1),
            lambda: r.sum(1),
            {"axes": (1,), "keepdim": False},
            bytes_moved=nbytes(r),
        ),
        Case(
            "softmax (vocab rows)",
            "softmax",
            ("bf16",) * 2,
            [vocab],
            vocab.shape,
            lambda: vocab.double().softmax(1),
            lambda: vocab.softmax(1),
            {"axis": 1},
            bytes_moved=nbytes(vocab, vocab),
        ),
        Case(
            "rms_norm",
            "rms_norm",
            ("bf16",) * 3,
            [h, w],
            h.shape,
            lambda: F.rms_norm(h.double(), (d,), w.double(), 1e-6),
            lambda: F.rms_norm(h, (d,), w, 1e-6),
            {"eps": 1e-6},
            bytes_moved=nbytes(h, h, w),
        ),
        Case(
            "layer_norm",
            "layer_norm",
            ("bf16",) * 4,
            [h, w, bias],
            h.shape,
            lambda: F.layer_norm(h.double(), (d,), w.double(), bias.double(), 1e-5),
            lambda: F.layer_norm(h, (d,), w, bias, 1e-5),
            {"eps": 1e-5},
            bytes_moved=nbytes(h, h, w, bias),
        ),
        Case(
            "rope (half-split)",
            "rope",
            ("bf16",) * 4,
            [xr, cos, sin],
            xr.shape,
            lambda: rope64(xr, cos, sin, False),
            lambda: torch.cat(
                [
                    xr[..., : hd // 2] * cos - xr[..., hd // 2 :] * sin,
                    xr[..., hd // 2 :] * cos + xr[..., : hd // 2] * sin,
                ],
                -1,
            ),
            {"interleaved": False},
            bytes_moved=nbytes(xr, xr, cos, sin),
        ),
        Case(
            "transpose (2-D, tiled)",
            "transpose",
            ("bf16",) * 2,
            [t2],
            t2.T.shape,
            lambda: t2.double().T,
            lambda: t2.transpose(0, 1).contiguous(),
            {"perm": (1, 0)},
            bytes_moved=nbytes(t2, t2),
        ),
        Case(
            "transpose (last two, tiled)",
            "transpose",
            ("f32",) * 2,
            [tb],
            tb.transpose(1, 2).shape,
            lambda: tb.double().transpose(1, 2),
            lambda: tb.transpose(1, 2).contiguous(),
            {"perm": (0, 2, 1)},
            bytes_moved=nbytes(tb, tb),
        ),
        Case(
            "gather (embedding rows)",
            "gather",
            ("bf16", "i64", "bf16"),
            [emb, ids],
            (ids.shape[0], emb.shape[1]),
            lambda: emb.double()[ids],
            lambda: emb[ids],
            {"axis": 0},
            bytes_moved=2.0 * ids.shape[0] * emb.shape[1] * 2 + nbytes(ids),
        ),
    ]


def _matmul_cases(big: bool) -> list[Case]:
    mm, out = 4096 if big else 96, []
    for t in ("f16", "bf16", "f32"):
        a, b = rand((mm, mm), t), rand((mm, mm), t)
        for src in ("triton", "triton-128x128x32", "triton-32x32x32"):
            if t == "f32" and src != "triton":
                continue  # true-f32 FMA (no TF32): one config shows the rate
            out.append(
                Case(
                    f"matmul {mm}^3",
                    "matmul",
                    (t,) * 3,
                    [a, b],
                    (mm, mm),
                    lambda a=a, b=b: a.double() @ b.double(),
                    lambda a=a, b=b: a @ b,
                    source=src,
                    flops=2.0 * mm**3,
                    kind="TFLOP/s",
                )
            )
    return out


def _attention_cases(big: bool) -> list[Case]:
    sq, sk, scale = (4096, 8192, 128**-0.5) if big else (64, 512, 128**-0.5)
    q, k, v = (rand((1, h, sq, 128), "bf16") for h in (32, 8, 8))
    tail = min(256, sq)  # the float64 reference covers the last `tail` queries
    out = [
        Case(
            f"attention prefill causal S={sq}",
            "attention",
            ("bf16",) * 4,
            [q, k, v],
            q.shape,
            lambda: sdpa64(q[:, :, -tail:], k, v, sq, True, scale),
            lambda: F.scaled_dot_product_attention(
                q, k, v, is_causal=True, scale=scale, enable_gqa=True
            ),
            {"causal": True, "scale": scale},
            flops=32 * sq * (sq + 1) / 2 * 4 * 128,
            kind="TFLOP/s",
        )
    ]
    qd, kc, vc = (rand(s, "bf16") for s in ((1, 32, 1, 128), (1, 8, sk, 128), (1, 8, sk, 128)))
    for live in (sk, sk // 2):
        n = torch.tensor(live, device=DEV)
        for src in ("triton-flashdecode", "triton"):
            out.append(
                Case(
                    f"decode 32h x {live}/{sk} kv",
                    "attention",
                    ("bf16",) * 3 + ("i64", "bf16"),
                    [qd, kc, vc, n],
                    qd.shape,
                    lambda live=live: sdpa64(qd, kc, vc, live, True, scale),
                    lambda live=live: F.scaled_dot_product_attention(
                        qd, kc[:, :, :live], vc[:, :, :live], scale=scale, enable_gqa=True
                    ),
                    {"causal": True, "scale": scale},
                    source=src,
                    bytes_moved=nbytes(kc[:, :, :live], vc[:, :, :live]),
                    kind="%peak",
                )
            )
    return out


# -- checking and timing ------------------------------------------------------------------------


def _as_numpy(t: torch.Tensor) -> np.ndarray:
    flat = t.reshape(-1)[:CHECK_ELEMS]
    if t.dtype == torch.bfloat16:
        return flat.float().cpu().numpy().astype(ml_dtypes.bfloat16)
    return flat.cpu().numpy()


def measure(case: Case, got: torch.Tensor) -> tuple[np.ndarray, np.ndarray, ErrorReport | None]:
    """(output, float64 reference, errors) of the compared prefix; no report for booleans."""
    ref = case.ref64()
    if ref.shape != got.shape:  # prefill speed case: the reference holds the last queries
        got = got[:, :, -ref.shape[2] :]
    g, r = _as_numpy(got), ref.reshape(-1)[:CHECK_ELEMS].double().cpu().numpy()
    return g, r, None if g.dtype == np.bool_ else measure_errors(g, r)


def check(case: Case, got: torch.Tensor, claim: PrecisionGuarantee) -> tuple[bool, str]:
    """The claim (or, with no numeric bound, the dtype tolerance) against float64."""
    g, r, rep = measure(case, got)
    if rep is None:
        bad = int((g != r.astype(bool)).sum())
        return bad == 0, f"{bad} wrong"
    if claim.max_ulp is None and claim.max_relative is None and claim.max_absolute is None:
        finite = np.isfinite(r)
        worst = float(np.abs(g.astype(np.float64) - r)[finite].max(initial=0.0))
        limit = TOL[case.dtypes[-1]] * max(1.0, float(np.abs(r[finite]).max(initial=0.0)))
        return worst <= limit, f"abs {worst:.2e} <= {limit:.1e}"
    what = f"ulp {rep.max_ulp} abs {rep.max_absolute:.1e} ({claim.describe()})"
    return rep.satisfies(claim), what


def run_case(entry: BindingEntry, case: Case) -> tuple[bool, str, torch.Tensor | None]:
    out = torch.empty(case.out_shape, dtype=TD[case.dtypes[-1]], device=DEV)
    try:
        entry.kernel(case.inputs, [out], case.params)
        ok, what = check(case, out, entry.precision)
    except Exception as err:  # a failing kernel is a reported mismatch, not a crash
        return False, f"error: {type(err).__name__}: {err}"[:70], None
    return ok, what, out


def ledger_records(
    key: tuple[str, tuple[str, ...]], entry: BindingEntry, case: Case, out: torch.Tensor | None
) -> list[LedgerRecord]:
    """One record per declared claim of `entry` from this GPU run (`out`: its first output, None
    if it raised): bit-stability by a second run into a fresh buffer, bounds from the errors."""
    op, dtypes = key
    base = dict(
        kernel=ledger_kernel(op, entry.kernel_source),
        backend=BACKEND,
        dtypes=dtypes,
        revision=revision_hex(entry.revision_hash),
        protocol=PROTOCOL,
    )
    evidence = {"device": torch.cuda.get_device_name(), "case": case.name, "by": "gpu_check"}
    rep = None if out is None else measure(case, out)[2]
    records = []
    for claim, bound in claims_of(entry.precision):
        if out is None:
            ok, value = False, None
        elif claim == "bit_stable":
            again = torch.empty_like(out)
            entry.kernel(case.inputs, [again], case.params)
            ok, value = bool(torch.equal(out.view(torch.uint8), again.view(torch.uint8))), None
        elif rep is None:  # a boolean result: exact or not
            ok, value = check(case, out, entry.precision)[0], None
        else:
            value = float(getattr(rep, claim))
            ok = bound is not None and value <= float(bound)
        measured = value if value is not None and np.isfinite(value) else None
        records.append(
            LedgerRecord(
                **base,
                claim=claim,
                result="pass" if ok else "fail",
                bound=bound,
                measured=measured,
                evidence=evidence,
            )
        )
    return records


def time_ms(fn: Callable[[], object], iters: int) -> float:
    """Median CUDA-event time of `fn` in milliseconds, after 3 warm-up calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def rate(case: Case, ms: float, peak_gbs: float) -> str:
    if case.kind == "TFLOP/s":
        return f"{case.flops / ms / 1e9:7.1f} TFLOP/s"
    gbs = case.bytes_moved / ms / 1e6
    peak = f" ({100 * gbs / peak_gbs:.0f}% peak)" if case.kind == "%peak" else ""
    return f"{gbs:7.0f} GB/s{peak}"


def claims_phase(table, big: bool, records: list[LedgerRecord] | None = None) -> int:
    """Check every entry's declared claim; on a GPU, append its ledger records to `records`."""
    print(f"\n== claims: every registered entry vs float64 ({'GPU' if big else 'interpreter'})")
    failures = 0
    for (op, dtypes, _), e in table.iter_entries():
        if op in MOVEMENT:  # bit copies: tests/triton/test_kernels_movement.py (FUEL_GPU=1 too)
            continue
        case = sweep_case(op, dtypes, e.kernel_source, big)
        ok, what, out = run_case(e, case)
        failures += not ok
        if records is not None:
            records += ledger_records((op, dtypes), e, case, out)
        if not ok or big:
            print(
                f"{op:11} {','.join(dtypes):22} {e.kernel_source:19} {what:52} "
                f"{'ok' if ok else 'FAIL'}"
            )
    print(f"{len(table)} entries, {failures} failed")
    return failures


def write_ledger(records: list[LedgerRecord]) -> None:
    """Upsert this GPU run's records into the Triton ledger the registry's gate reads."""
    ledger = Ledger.load(LEDGER_PATH)
    ledger.upsert(records)
    passed = sum(r.passed for r in records)
    print(f"wrote {len(records)} records ({passed} pass) to {ledger.save(LEDGER_PATH)}")


def speed_phase(table, iters: int, peak_gbs: float) -> int:
    print("\n== speed: LLM-sized launches" + ("" if GPU else " (no GPU: timings skipped)"))
    failures = 0
    for case in speed_cases(big=GPU):
        e = next(
            x
            for x in table.lookup_alternatives(case.op, case.dtypes, "cuda")
            if x.kernel_source == case.source
        )
        ok, what, out = run_case(e, case)
        if ok and out is not None and case.torch_fn is not None:
            what += f" |vs torch| {float((out.float() - case.torch_fn().float()).abs().max()):.1e}"
        failures += not ok
        verdict = "ok" if ok else "FAIL"
        line = f"{case.name:28} {case.dtypes[0]:4} {case.source:19} {what:58} {verdict}"
        if GPU and ok and case.torch_fn is not None:
            ms = time_ms(lambda e=e, c=case, o=out: e.kernel(c.inputs, [o], c.params), iters)
            ref_ms = time_ms(case.torch_fn, iters)
            line += f" | {ms:8.3f} ms {rate(case, ms, peak_gbs)} | torch {ref_ms:8.3f} ms "
            line += rate(case, ref_ms, peak_gbs)
            if case.op == "matmul":
                line += f" | {100 * ref_ms / ms:5.1f}% of cuBLAS"
        print(line, flush=True)
    return failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--peak-gbs", type=float, default=4800.0, help="HBM peak (H200: 4800)")
    ap.add_argument("--skip-claims", action="store_true", help="only the speed phase")
    ap.add_argument(
        "--write-ledger",
        action="store_true",
        help="on a GPU: record the claims phase in runtime/kernels/triton/ledger.json",
    )
    args = ap.parse_args()
    if args.write_ledger and not GPU:
        print("--write-ledger: no GPU, nothing written (the interpreter proves nothing about one)")
        return 1
    torch.manual_seed(0)
    if GPU:
        torch.backends.cuda.matmul.allow_tf32 = False  # cuBLAS f32 in true f32, like ours
        print(f"device: {torch.cuda.get_device_name()}")
    else:
        print("no GPU: kernels run under the Triton interpreter at small shapes; timings skipped")
    table = triton_kernel_table(gate=False)  # the claims as declared: what this run checks
    t0 = time.perf_counter()
    records: list[LedgerRecord] | None = [] if args.write_ledger else None
    failures = 0 if args.skip_claims else claims_phase(table, big=GPU, records=records)
    if records:
        write_ledger(records)
    failures += speed_phase(table, args.iters, args.peak_gbs)
    print(f"\n{failures} mismatches; {time.perf_counter() - t0:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
