"""fuel against its peers (issue 6 §4): same machine, same inputs, one run.

fuel (its kernel bundle executor; each model compiled once per run with fuel-optimize on, in a
temp dir) vs onnxruntime (CPU EP, all graph optimizations, 2 intra-op threads) vs PyTorch eager
(`--torch-threads`: 1, 2, or `auto`, the faster of the two per case; the table says which), on:

* decode step and prefill of the Llama-style decoders of examples/llama (SMALL, GPT2_SMALL):
  prefill of a `--prompt-len` prompt, decode at cache position `--prompt-len`. onnxruntime runs
  the ONNX export of examples/llama/export.py, fuel imports that same file (`--importer onnx`,
  the default) or the torch.export graph (`--importer torch`): same random weights (seed 0);
* the MLP (1024->4096->4096->1024, batch 32, bias + ReLU) and dispatch_overhead's 200-op chain
  (onnxruntime runs the chain with 1 thread there: faster at 64 elements).

Per case: median, p10, p90 latency, the ratio to the best peer (the faster of onnxruntime and
torch), and for decode the ratio to onnxruntime (target: fuel <= 1.5x on both decoders) and the
physical floor: bytes a decode step must read (every weight once — the embedding one row unless
it is the tied lm head — plus the live KV cache) / memory bandwidth measured here (numpy
read and copy over a large array, 2 threads; the best is used).

Every runner is checked before timing: decoders against eager PyTorch, the MLP and chain against
float64 numpy; max|got - ref| <= tol * max(1, max|ref|) per output (tol 1e-4; chain 1e-5);
a mismatch exits 1.

    .venv/bin/python bench/peers.py [--quick] [--only decode-small] [--only mlp] [--importer torch]
"""

from __future__ import annotations

import argparse
import gc
import logging
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]

import executor_overhead as eo  # noqa: E402
from _timing import (  # noqa: E402
    SETTLE_S,
    Runner,
    Stats,
    blas_threads,
    faster_torch_threads,
    measure,
    runs_for_budget,
    table,
)
from executor_overhead import Workload  # noqa: E402

DECODERS = ("small", "gpt2-small")
GRAPHS = ("decode", "prefill")
DECODE_TARGET = 1.5  # fuel decode step <= 1.5x onnxruntime
TOL = 1e-4


# -- memory bandwidth and the decode floor ------------------------------------------------------


def memory_bandwidth(mb: int = 512, threads: int = 2, reps: int = 5) -> dict[str, float]:
    """GB/s of a large numpy read (max) and copy (read + write bytes), split over `threads`
    threads (numpy releases the GIL on both); best of `reps`."""
    n = mb * 2**20 // 4
    src, dst = np.ones(n, np.float32), np.empty(n, np.float32)
    parts = [slice(i * n // threads, (i + 1) * n // threads) for i in range(threads)]
    jobs: dict[str, tuple[Callable[[slice], object], int]] = {
        "read": (lambda s: src[s].max(), n * 4),
        "copy": (lambda s: np.copyto(dst[s], src[s]), 2 * n * 4),
    }
    out = {}
    with ThreadPoolExecutor(threads) as pool:
        for name, (fn, nbytes) in jobs.items():
            best = float("inf")
            for _ in range(reps):
                t0 = time.perf_counter()
                list(pool.map(fn, parts))
                best = min(best, time.perf_counter() - t0)
            out[name] = nbytes / best / 1e9
    return out


def decode_bytes(model: Any, pos: int) -> tuple[int, int]:
    """(weight bytes, live KV bytes) a decode step of `model` (an examples.llama `Llama`) at
    cache position `pos` must read."""
    cfg = model.cfg
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    if not cfg.tie_embeddings:  # the embedding is gathered (one row), not read whole
        weights -= (cfg.vocab - 1) * cfg.hidden * 4
    kv = 2 * cfg.layers * cfg.kv_heads * (pos + 1) * cfg.head_dim * 4
    return weights, kv


# -- the decoders ---------------------------------------------------------------------------


def _quiet_export() -> None:
    """The ONNX exporter logs a warning per missing torchvision op; not ours to show."""
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")


def decoder_cases(
    config: str,
    graphs: Sequence[str],
    prompt_len: int,
    importer: str,
    out_dir: Path,
    bandwidth: float,
) -> Iterator[Workload]:
    """The decode and/or prefill cases of one decoder config (one model, seed 0), built one
    at a time (a GPT2_SMALL case holds ~1.5 GB: its bundles, session and ONNX weights)."""
    from examples.llama.export import example_inputs
    from examples.llama.model import CONFIGS, Llama

    _quiet_export()
    cfg = CONFIGS[config]
    if prompt_len >= cfg.max_seq:
        raise SystemExit(f"--prompt-len {prompt_len} must be < {config}'s max_seq {cfg.max_seq}")
    model = Llama(cfg).eval()
    ex = example_inputs(model, prompt_len)
    for graph in graphs:
        name = f"{graph}-{config}"
        w = decoder_case(model, ex, graph, importer, out_dir / name)
        w.name = f"{name} (T={prompt_len})" if graph == "prefill" else f"{name} (pos={prompt_len})"
        if graph == "decode":
            weights, kv = decode_bytes(model, prompt_len)
            w.floor_us = (weights + kv) / (bandwidth * 1e9) * 1e6
            w.notes.append(
                f"floor: {weights / 1e6:.1f} MB weights + {kv / 1e6:.2f} MB live KV "
                f"at {bandwidth:.1f} GB/s = {w.floor_us / 1e3:.3f} ms"
            )
        yield w
        del w  # before the next graph is built
        gc.collect()


def decoder_case(model: Any, ex: Any, graph: str, importer: str, out_dir: Path) -> Workload:
    """One graph of `model` (an examples.llama `Llama`) on the example inputs `ex`: exported to
    ONNX for onnxruntime, imported into fuel (from that file, or via torch.export) and compiled
    to bundles, all under `out_dir`; checked against eager PyTorch."""
    import torch

    from examples.llama.export import export_onnx, import_graph, torch_outputs
    from frontends.onnx import import_onnx

    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    onnx_path = export_onnx(model, ex, graph, out_dir)
    t1 = time.perf_counter()
    module = import_graph(model, ex, graph, "torch") if importer == "torch" else None
    module = import_onnx(onnx_path) if module is None else module
    t2 = time.perf_counter()
    feeds = ex.feeds(graph)
    fuel = eo.fuel_runners(module, feeds, out_dir, graph)
    del module
    runners: dict[str, Runner] = {n: c.run for n, c in fuel.runners.items()}
    t3 = time.perf_counter()
    runners["onnxruntime"] = eo.ort_session(onnx_path, feeds, threads=2)
    t4 = time.perf_counter()
    args = tuple(torch.from_numpy(a) for a in feeds.values())
    runners["torch eager"] = _torch_graph(
        model.prefill if graph == "prefill" else model.decode, args
    )
    notes = [
        f"onnx export {t1 - t0:.1f} s; onnxruntime session {t4 - t3:.1f} s; fuel "
        f"import ({importer}) {t2 - t1:.1f} s",
        *fuel.notes(),
    ]
    want = list(torch_outputs(model, ex, graph).values())
    return Workload(graph, runners, want, TOL, notes)


def _torch_graph(step: Callable, args: tuple) -> Runner:
    """The graph in eager PyTorch: the logits, then the two caches it updates in place."""
    import torch

    def run() -> list:
        with torch.inference_mode():
            logits = step(*args)
        return [logits.numpy(), args[-2].numpy(), args[-1].numpy()]

    return run


def pin_torch(w: Workload, threads: str) -> None:
    """Fix the torch runner's intra-op threads: the given count, or the faster of 1 and 2."""
    fn = w.runners["torch eager"]
    w.pin_torch(faster_torch_threads(fn, runs=4) if threads == "auto" else int(threads))


def report(case: Workload, stats: Mapping[str, Stats]) -> list[str]:
    """Print the case's table; returns the target lines (decode cases only)."""
    best = min(stats[p].median for p in ("onnxruntime", "torch eager"))
    ort = stats["onnxruntime"].median
    header = ["runner", "median ms", "p10", "p90", "/ best peer", "/ onnxruntime"]
    if case.floor_us is not None:
        header.append("/ floor")
    rows = []
    for name, s in stats.items():
        label = f"torch eager ({case.torch_threads}t)" if name == "torch eager" else name
        row = [label] + [f"{v / 1e3:.3f}" for v in (s.median, s.p10, s.p90)]
        row += [f"{s.median / best:.2f}x", f"{s.median / ort:.2f}x"]
        if case.floor_us is not None:
            row.append(f"{s.median / case.floor_us:.1f}x")
        rows.append(row)
    if case.floor_us is not None:
        rows.append(["floor (memory)", f"{case.floor_us / 1e3:.3f}", "", "", "", "", "1.0x"])
    runs = next(iter(stats.values())).runs
    print(f"\n{case.name}, {runs} runs each")
    print(table(rows, header))
    for note in case.notes:
        print(f"  {note}")
    if not case.name.startswith("decode"):
        return []
    verdict = {True: "met", False: "NOT MET"}
    return [
        f"{case.name.split(' ')[0]}: {name} / onnxruntime = {s.median / ort:.2f}x "
        f"(target <= {DECODE_TARGET}x: {verdict[s.median <= DECODE_TARGET * ort]})"
        for name, s in stats.items()
        if name.startswith("fuel")
    ]


def wanted(name: str, only: Sequence[str] | None) -> bool:
    """`--only` selects cases whose name contains any of the given words."""
    return not only or any(w in name for w in only)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer runs; decoders: SMALL only")
    ap.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="cases whose name contains NAME (decode-small, prefill-gpt2-small, "
        "decode, gpt2, mlp, chain, ...); repeatable",
    )
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--importer", choices=("onnx", "torch"), default="onnx")
    ap.add_argument("--torch-threads", choices=("1", "2", "auto"), default="auto")
    ap.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="timing seconds per case (default 30; --quick 4)",
    )
    ap.add_argument("--ops", type=int, default=200, help="chain length")
    return ap.parse_args(argv)


Builder = Callable[[Path], Iterable[Workload]]


def builders(args: argparse.Namespace, bandwidth: float) -> list[Builder]:
    """The selected cases, grouped by what they share (a decoder builds its model once)."""
    gpt2_named = any("gpt2" in w for w in args.only or ())  # --quick runs it only when named
    out: list[Builder] = []
    for c in DECODERS:
        graphs = [g for g in GRAPHS if wanted(f"{g}-{c}", args.only)]
        if graphs and (c == "small" or not args.quick or gpt2_named):
            out.append(
                lambda d, c=c, graphs=graphs: decoder_cases(
                    c, graphs, args.prompt_len, args.importer, d, bandwidth
                )
            )
    if wanted("mlp", args.only):
        out.append(lambda d: [eo.build_mlp("relu", d, torch_threads=None)])
    if wanted("chain", args.only):
        out.append(lambda d: [eo.build_chain(args.ops, d, torch_threads=None)])
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    budget = args.budget_s or (4.0 if args.quick else 30.0)
    lo, hi = (5, 200) if args.quick else (20, 2000)
    bw = memory_bandwidth(256 if args.quick else 1024)
    bandwidth = max(bw["read"], bw["copy"])
    print(
        f"memory bandwidth (numpy, 2 threads): read {bw['read']:.1f} GB/s, copy "
        f"{bw['copy']:.1f} GB/s; the decode floor uses {bandwidth:.1f} GB/s"
    )
    print(f"fuel's numpy BLAS threads: {blas_threads()}")
    failed, targets = [], []
    with tempfile.TemporaryDirectory(prefix="fuel-peers-") as tmp:
        for build in builders(args, bandwidth):
            for case in build(Path(tmp)):
                bad = case.check()
                failed += bad
                if bad:
                    print("\n".join(bad))
                    continue
                pin_torch(case, args.torch_threads)
                runs = runs_for_budget(case.runners, budget, lo, hi)
                targets += report(case, measure(case.runners, runs, warmup=2, settle_s=SETTLE_S))
                del case
                gc.collect()
    if targets:
        print("\ntargets:\n  " + "\n  ".join(targets))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
