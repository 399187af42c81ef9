"""Greedy generation with fuel: prefill once, then one decode step per token.

    python -m examples.llama.generate --config small --tokens 16 [--importer onnx]

Builds the decoder (random weights, fixed seed), exports and imports both graphs, runs
`fuel-optimize` on each, generates greedily with fuel's executor, and checks the tokens against
eager PyTorch running the same two graphs; prints tokens/s for both.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from examples.llama.export import IMPORTERS, example_inputs, import_graph
from examples.llama.model import CONFIGS, Llama, LlamaConfig, cache_shape, new_cache
from runtime.module import FuelModule
from runtime.shape_specialize import make_executor


@dataclass
class Generation:
    tokens: list[int]
    prefill_s: float
    decode_s: float

    @property
    def decode_tokens_per_s(self) -> float:
        return (len(self.tokens) - 1) / self.decode_s if self.decode_s > 0 else float("inf")


def optimize(module: FuelModule) -> FuelModule:
    """`fuel-optimize` in place (the picker, variant arms such as flash decoding, bake)."""
    from passes.optimize import optimize_graph

    optimize_graph(module.op)
    module.op.verify()
    return module


class FuelDecoder:
    """The two imported graphs as a greedy generator over one KV cache pair it owns."""

    def __init__(self, prefill: Any, decode: Any, cache: tuple[int, ...] | None = None):
        """From the two modules, or from ready executors (e.g. a kernel bundle's, which may
        be shape-specialising: anything with `run`); `cache`: the KV cache shape (default:
        the decode step's `k_cache` input)."""
        self.prefill, self.decode = (
            make_executor(g) if isinstance(g, FuelModule) else g for g in (prefill, decode)
        )
        if cache is None:
            names, specs = self.decode.input_names, self.decode.input_specs
            cache = specs[names.index("k_cache")][1]
        self.k_cache, self.v_cache = np.zeros(cache, np.float32), np.zeros(cache, np.float32)

    def _caches(self, out: dict[str, np.ndarray]) -> None:
        """The updated caches: the arrays passed in (updated in place, handed back), or a
        functional graph's new `*_out` arrays."""
        self.k_cache = out.get("k_cache", out.get("k_cache_out"))
        self.v_cache = out.get("v_cache", out.get("v_cache_out"))

    def generate(self, prompt: np.ndarray, steps: int) -> Generation:
        n = prompt.shape[1]
        self.k_cache[...] = 0  # a new sequence (its slots are written before they are read)
        self.v_cache[...] = 0
        t0 = time.perf_counter()
        out = self.prefill.run(
            {
                "tokens": prompt,
                "positions": np.arange(n, dtype=np.int64),
                "k_cache": self.k_cache,
                "v_cache": self.v_cache,
            }
        )
        tokens = [int(out["logits"][0, -1].argmax())]
        self._caches(out)
        t1 = time.perf_counter()
        pos = n
        for _ in range(steps - 1):
            feeds = {
                "token": np.array([[tokens[-1]]], np.int64),
                "pos": np.array([pos]),
                "k_cache": self.k_cache,
                "v_cache": self.v_cache,
            }
            out = self.decode.run(feeds)
            tokens.append(int(out["logits"][0, -1].argmax()))
            self._caches(out)
            pos += 1
        return Generation(tokens, t1 - t0, time.perf_counter() - t1)


@torch.no_grad()
def generate_torch(model: Llama, prompt: torch.Tensor, steps: int) -> Generation:
    """The same loop in eager PyTorch (the reference tokens and speed)."""
    kc, vc = new_cache(model.cfg)
    t0 = time.perf_counter()
    logits = model.prefill(prompt, torch.arange(prompt.shape[1]), kc, vc)
    tokens = [int(logits[0, -1].argmax())]
    t1 = time.perf_counter()
    pos = prompt.shape[1]
    for _ in range(steps - 1):
        logits = model.decode(torch.tensor([[tokens[-1]]]), torch.tensor([pos]), kc, vc)
        tokens.append(int(logits[0, -1].argmax()))
        pos += 1
    return Generation(tokens, t1 - t0, time.perf_counter() - t1)


def build(
    cfg: LlamaConfig, prompt_len: int, importer: str = "torch", optimized: bool = True
) -> tuple[Llama, torch.Tensor, FuelDecoder]:
    """The model, its example prompt and the fuel generator for it."""
    model = Llama(cfg).eval()
    ex = example_inputs(model, prompt_len)
    mods = [import_graph(model, ex, g, importer) for g in ("prefill", "decode")]
    if optimized:
        mods = [optimize(m) for m in mods]
    return model, ex.tokens, FuelDecoder(*mods)


def fastest(runs: list[Generation]) -> Generation:
    """The run with the fastest decode (the machine is shared: the best run is the signal)."""
    return min(runs, key=lambda g: g.decode_s)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", choices=sorted(CONFIGS), default="small")
    p.add_argument("--importer", choices=IMPORTERS, default="torch")
    p.add_argument("--prompt-len", type=int, default=8)
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--no-optimize", action="store_true")
    p.add_argument("--repeat", type=int, default=3, help="runs per engine; the fastest counts")
    p.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="PyTorch intra-op threads (1: stable on a shared machine)",
    )
    args = p.parse_args(argv)
    cfg = CONFIGS[args.config]
    torch.set_num_threads(max(1, args.torch_threads))
    if args.prompt_len + args.tokens > cfg.max_seq:
        p.error(f"prompt + tokens must fit the cache ({cfg.max_seq} slots)")
    t = time.perf_counter()
    model, prompt, dec = build(cfg, args.prompt_len, args.importer, not args.no_optimize)
    params = sum(p.numel() for p in model.parameters()) / 1e6
    steps = "export + import" + ("" if args.no_optimize else " + optimize")
    print(
        f"{args.config}: {params:.1f}M params, cache {list(cache_shape(cfg))}; "
        f"{steps} ({args.importer}): {time.perf_counter() - t:.1f} s"
    )
    dec.generate(prompt.numpy(), 2)  # warm-up
    generate_torch(model, prompt, 2)
    runs = max(1, args.repeat)
    fuel = fastest([dec.generate(prompt.numpy(), args.tokens) for _ in range(runs)])
    ref = fastest([generate_torch(model, prompt, args.tokens) for _ in range(runs)])
    print(f"best of {runs} runs each; torch uses {torch.get_num_threads()} threads")
    for name, g in (("fuel", fuel), ("torch", ref)):
        print(
            f"{name:5s}: prefill {g.prefill_s * 1e3:7.1f} ms, decode "
            f"{g.decode_tokens_per_s:7.1f} tokens/s  {g.tokens}"
        )
    same = fuel.tokens == ref.tokens
    print("tokens match PyTorch" if same else "TOKENS DIFFER from PyTorch")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
