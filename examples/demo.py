"""`make demo`: fuel's main job, on the CPU, end to end.

Part A, a Llama-style decoder block built in fuel IR:
  1. build     GraphBuilder -> verified fuel IR (weights beside it)
  2. optimize  `fuel-optimize`: the picker (candidates per op from the binding table, filtered,
               priced, placed) -> rewrite pathfinders (fused patterns, decode flash) -> stamp
               the winners -> bake variants; every decision is written into the IR
  3. run       the block before and after, each checked against a float64 numpy reference

Part B, a small Llama-style decoder (4 layers, hidden 512) defined in PyTorch:
  4. import    torch.export of its prefill (a dynamic prompt length) and decode-step graphs
               -> fuel IR; the KV caches are inputs the graphs update in place
  5. compile   `fuel compile` each graph to a kernel bundle on disk (build/demo/)
  6. generate  load both bundles, generate tokens greedily from prompts of three lengths with
               the one prefill bundle (a decode step writes one cache row per layer, in the
               caller's buffer), compare with eager PyTorch
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from examples.decoder_block import BlockConfig, build_decoder_block, reference  # noqa: E402
from fuel_dialect.dispatch import ALTERNATIVES_ATTR  # noqa: E402
from passes.optimize import optimize_graph  # noqa: E402
from passes.picker.support import PickerOptions  # noqa: E402
from runtime.executor import Executor  # noqa: E402
from runtime.module import FuelModule  # noqa: E402
from tools.explain_text import explain_text  # noqa: E402

ATOL, RTOL = 1e-4, 1e-4  # f32 kernels against a float64 reference over a 64-wide block
LOGITS_ATOL = 1e-4  # fuel's f32 logits against PyTorch's f32 logits (measured ~5e-6)
OUT = ROOT / "build" / "demo"


def median_us(ex: Executor, feed: dict, runs: int = 50) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        ex.run(feed, copy_outputs=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def without_alternatives(module: FuelModule) -> str:
    """The IR with the candidate lists dropped (they are for `fuel explain`): the decisions."""
    m = FuelModule.parse(str(module.op))
    for op in m.op.walk():
        op.attributes.pop(ALTERNATIVES_ATTR, None)
    return str(m.op)


def check(name: str, module: FuelModule, cfg: BlockConfig, x: np.ndarray) -> bool:
    ex = Executor(module)
    y = ex.run({"x": x})["y"]
    err = float(np.abs(y - reference(cfg, module.weights, x)).max())
    ok = err <= ATOL + RTOL * float(np.abs(y).max())
    us = median_us(ex, {"x": x})
    verdict = "OK" if ok else "MISMATCH"
    print(
        f"  {name:10s} {len(ex)} kernels, max |fuel - numpy f64| = {err:.2e} ({verdict}), "
        f"median {us:.0f} us/run"
    )
    return ok


def decoder_block() -> bool:
    cfg = BlockConfig()
    before = build_decoder_block(cfg, seed=0)
    print("== 1. build: a Llama-style decoder block in fuel IR ==")
    print(before)

    print("\n== 2. optimize: fuel-optimize (the picker explains its choices) ==")
    after = FuelModule.parse(str(before.op))
    after.weights = before.weights
    options = PickerOptions(judge="none")
    view = optimize_graph(after.op, options)
    text = explain_text(view.plans[0], "decoder_block", options.plan_options(), judge_label="none")
    lines = text.splitlines()
    cut = next(i for i, ln in enumerate(lines) if ln.startswith("#3 "))  # header + 3 decisions
    print("\n".join(lines[:cut]))
    print(f"   ... {len(view.plans[0].decisions) - 3} more decisions: `fuel explain` shows all")
    print(f"\nafter fuel-optimize ({view.branch_count()} branches left for the runtime):")
    print(without_alternatives(after))

    print("\n== 3. run on the CPU, before and after ==")
    x = np.random.default_rng(1).standard_normal((1, cfg.seq, cfg.hidden)).astype(np.float32)
    return check("before", before, cfg, x) & check("after", after, cfg, x)


PROMPTS = (5, 19, 42)
"""Prompt lengths of part B: one prefill bundle serves them all (its `seq` dim)."""


def llama(tokens: int = 16, prompt_len: int = 8) -> bool:
    import torch

    from examples.llama.export import example_inputs, import_graph
    from examples.llama.generate import FuelDecoder, generate_torch
    from examples.llama.model import SMALL, Llama, new_cache
    from lowering.bundle import load_bundle, write_bundle

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Llama(SMALL).eval()
    ex = example_inputs(model, prompt_len)
    params = sum(p.numel() for p in model.parameters()) / 1e6
    print(f"\n== 4. import: Llama-style decoder, {params:.1f}M params (random, seed 0) ==")
    t = time.perf_counter()
    graphs = {g: import_graph(model, ex, g, "torch") for g in ("prefill", "decode")}
    for g, m in graphs.items():
        n = sum(1 for op in m.entry.body.walk() if op.name.startswith("fuel."))
        arg = m.entry.body.block.args[0]
        print(f"  {g:8s} torch.export -> {n} fuel ops, first input {arg.type}")
    print(
        f"  ({time.perf_counter() - t:.1f} s; prefill exported with a dynamic prompt length "
        f"`seq` in [1, {SMALL.max_seq}]; the caches are donated inputs, updated in place)"
    )

    print("\n== 5. compile: one kernel bundle per graph (fuel-optimize + CPU backend) ==")
    loaded = {}
    for g, m in graphs.items():
        t = time.perf_counter()
        path = write_bundle(m, OUT / f"llama-small-{g}.fuelbundle")
        b = load_bundle(path)
        kernels = len(b.manifest["targets"]["cpu"]["kernels"])
        size = (
            sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
            if path.is_dir()
            else (path.stat().st_size)
        )
        print(
            f"  {g:8s} -> {path.relative_to(ROOT)} ({size / 2**20:.1f} MiB, {kernels} distinct "
            f"kernels, {time.perf_counter() - t:.1f} s)"
        )
        loaded[g] = b
    srcs = sorted(
        {
            str(op.attributes["fuel.kernel"]).split(", ")[-2].strip('"')
            for op in loaded["decode"].module.entry.body.walk()
            if op.name == "fuel.attention" and "fuel.kernel" in op.attributes
        }
    )
    print(f"  decode attention (one query over the live KV length) runs: {', '.join(srcs)}")

    print(f"\n== 6. generate: {tokens} tokens greedily, prompts of {PROMPTS} tokens ==")
    prefill_ex, decode_ex = loaded["prefill"].executor(), loaded["decode"].executor()
    dec = FuelDecoder(prefill_ex, decode_ex)
    cache = dec.k_cache.nbytes
    row = cache // SMALL.max_seq // SMALL.layers
    print(
        f"  a decode step writes {len(decode_ex.in_place)} cache rows in place "
        f"({row} B each, into the caller's {cache / 2**20:.1f} MiB caches; planned buffers "
        f"{decode_ex.memory.planned_bytes / 2**10:.0f} KiB)"
    )
    ok = True
    gen = torch.Generator().manual_seed(1)
    for n in PROMPTS:
        prompt = torch.randint(0, SMALL.vocab, (1, n), generator=gen)
        kc, vc = new_cache(SMALL)
        with torch.no_grad():
            want = model.prefill(prompt, torch.arange(n), kc, vc).numpy()
        t = time.perf_counter()
        dec.generate(prompt.numpy(), 2)  # the first run of this length specialises the bundle
        first = time.perf_counter() - t
        got = prefill_ex.run(
            {
                "tokens": prompt.numpy(),
                "positions": np.arange(n, dtype=np.int64),
                "k_cache": np.zeros_like(dec.k_cache),
                "v_cache": np.zeros_like(dec.v_cache),
            }
        )["logits"]
        err = float(np.abs(got.astype(np.float64) - want).max())
        generate_torch(model, prompt, 2)
        fuel = min((dec.generate(prompt.numpy(), tokens) for _ in range(3)), key=_decode_s)
        ref = min((generate_torch(model, prompt, tokens) for _ in range(3)), key=_decode_s)
        same = fuel.tokens == ref.tokens
        good = same and err <= LOGITS_ATOL
        print(
            f"  prompt {n:3d}: prefill logits max |fuel - torch| = {err:.1e}; first run "
            f"{first * 1e3:.0f} ms (specialise + 2 tokens); tokens "
            f"{'match' if same else 'DIFFER from'} eager PyTorch{'' if good else ' (MISMATCH)'}"
        )
        for name, r in (("fuel", fuel), ("torch", ref)):
            print(
                f"    {name:5s} prefill {r.prefill_s * 1e3:6.1f} ms, decode "
                f"{r.decode_tokens_per_s:6.1f} tokens/s: {r.tokens}"
            )
        ok = ok and good
    print("  (1 thread each; best of 3 per prompt)")
    return ok


def _decode_s(r: object) -> float:
    return r.decode_s  # type: ignore[attr-defined]


def main() -> int:
    ok = decoder_block()
    ok = llama() and ok
    print(
        "\nTry the tools:\n"
        "  .venv/bin/fuel explain examples/decoder_block.mlir --html block.html\n"
        "  .venv/bin/fuel-opt examples/decoder_block.mlir -p fuel-optimize\n"
        "  .venv/bin/fuel compile examples/decoder_block.mlir -o build/block.fuelbundle\n"
        "  .venv/bin/fuel run build/block.fuelbundle --random-inputs --repeat 20\n"
        "  .venv/bin/python -m examples.llama.generate --config small --tokens 32"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
