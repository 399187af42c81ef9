"""`python bench/zoo.py`: fuel against onnxruntime on models fuel did not write.

Models from the `transformers` library, built from small configs with random weights (seeded,
no download): GPT-2, Llama, Mistral, BERT and a T5 encoder (`--models` adds Qwen2, Phi-3,
GPT-NeoX and Gemma). Each is exported three ways —
`torch.onnx` legacy (TorchScript), `torch.onnx` dynamo, and `torch.export` — and each export is
run by fuel (imported from that export, compiled to a bundle with the default options) and by
onnxruntime (CPU EP, all graph optimizations, 2 intra-op threads; the `torch.export` route is
compared with the dynamo ONNX file, the same program), in one process, interleaved
(`_timing.measure`, each block of runs after `_timing.SETTLE_S` idle: the other runner's
spinning pool does not slow its first runs). Graphs: prefill of `--tokens` tokens, and for the
decoders one decode step after `--tokens - 1` cached positions (the KV cache in and out as
tensors).

Every fuel result is checked against eager PyTorch before timing, and again on a second,
different input (the outputs must change: a graph whose result does not depend on its input
cannot flatter the table). A route that fails to export, import, compile or check is a row
saying where and why; the rest still runs. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import gc
import logging
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import executor_overhead as eo  # noqa: E402
from _timing import SETTLE_S, measure, mismatch, runs_for_budget  # noqa: E402

VOCAB = 4096
ROUTES = ("onnx-legacy", "onnx-dynamo", "torch-export")
GRAPHS = ("prefill", "decode")
TOL = 2e-4
"""Relative tolerance of a result against eager PyTorch (f32 end to end)."""


@dataclass(frozen=True)
class ModelSpec:
    """A transformers model built from a small config: `decoder` ones have a decode graph."""

    name: str
    build: Callable[[], Any]
    decoder: bool


def _specs() -> dict[str, ModelSpec]:
    import transformers as tf

    common = {"vocab_size": VOCAB}
    llama = {
        "num_hidden_layers": 4,
        "hidden_size": 512,
        "intermediate_size": 1408,
        "num_attention_heads": 8,
        "max_position_embeddings": 1024,
        **common,
    }
    return {
        "gpt2": ModelSpec(
            "gpt2",
            lambda: tf.GPT2LMHeadModel(
                tf.GPT2Config(n_layer=4, n_embd=512, n_head=8, n_positions=1024, **common)
            ),
            True,
        ),
        "llama": ModelSpec(
            "llama",
            lambda: tf.LlamaForCausalLM(tf.LlamaConfig(num_key_value_heads=8, **llama)),
            True,
        ),
        "mistral": ModelSpec(
            "mistral",
            lambda: tf.MistralForCausalLM(
                tf.MistralConfig(num_key_value_heads=2, sliding_window=None, **llama)
            ),
            True,
        ),
        "bert": ModelSpec(
            "bert",
            lambda: tf.BertModel(
                tf.BertConfig(
                    num_hidden_layers=4,
                    hidden_size=512,
                    intermediate_size=2048,
                    num_attention_heads=8,
                    **common,
                ),
                add_pooling_layer=False,
            ),
            False,
        ),
        "t5-encoder": ModelSpec(
            "t5-encoder",
            lambda: tf.T5EncoderModel(
                tf.T5Config(d_model=512, d_ff=1408, d_kv=64, num_layers=4, num_heads=8, **common)
            ),
            False,
        ),
        # more architectures, by name only (`--models qwen2 phi3 ...`)
        "qwen2": ModelSpec(  # biased q, k, v projections
            "qwen2",
            lambda: tf.Qwen2ForCausalLM(tf.Qwen2Config(num_key_value_heads=4, **llama)),
            True,
        ),
        "phi3": ModelSpec(  # fused qkv and gate-up projections
            "phi3",
            lambda: tf.Phi3ForCausalLM(
                tf.Phi3Config(num_key_value_heads=8, pad_token_id=0, **llama)
            ),
            True,
        ),
        "gpt-neox": ModelSpec(  # rope on a quarter of each head, parallel residual
            "gpt-neox",
            lambda: tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(rotary_pct=0.25, **llama)),
            True,
        ),
        "gemma": ModelSpec(  # GELU-tanh gated MLP, (1 + w) RMSNorm, scaled embedding
            "gemma",
            lambda: tf.GemmaForCausalLM(
                tf.GemmaConfig(num_key_value_heads=4, head_dim=64, **llama)
            ),
            True,
        ),
    }


DEFAULT_MODELS = ("gpt2", "llama", "mistral", "bert", "t5-encoder")
"""The table `bench/zoo.py` prints by default: the issue's five architectures."""
MODELS = (*DEFAULT_MODELS, "qwen2", "phi3", "gpt-neox", "gemma")


# -- the graphs: wrappers whose inputs and outputs are plain tensors ---------------------------


class Prefill:
    """`model(ids, attention_mask)` -> logits (decoders) or the last hidden state."""

    def __new__(cls, model: Any, decoder: bool) -> Any:
        import torch

        class _Prefill(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.m = model

            def forward(self, ids: Any, mask: Any) -> Any:
                if decoder:
                    return self.m(input_ids=ids, attention_mask=mask, use_cache=False).logits
                return self.m(input_ids=ids, attention_mask=mask).last_hidden_state

        return _Prefill().eval()


class Decode:
    """One decode step: (ids[1, 1], mask[1, past + 1], k_0, v_0, k_1, ...) -> (logits, the
    present k_0, v_0, ...): the cache crosses the graph boundary as tensors."""

    def __new__(cls, model: Any) -> Any:
        import torch
        from transformers import DynamicCache

        layers = model.config.num_hidden_layers

        class _Decode(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.m = model

            def forward(self, ids: Any, mask: Any, *kv: Any) -> Any:
                cache = DynamicCache(config=self.m.config)
                for i in range(layers):
                    cache.update(kv[2 * i], kv[2 * i + 1], i)
                out = self.m(
                    input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True
                )
                present = out.past_key_values
                flat = []
                for i in range(layers):
                    flat += [present.layers[i].keys, present.layers[i].values]
                return (out.logits, *flat)

        return _Decode().eval()


@dataclass
class Graph:
    """One graph of one model: the module to export, its named inputs, eager outputs."""

    module: Any
    names: list[str]
    args: tuple[Any, ...]
    alt_args: tuple[Any, ...]
    """A second, different input: the outputs must change with it."""
    want: list[np.ndarray] = field(default_factory=list)

    def feeds(self, alt: bool = False) -> dict[str, np.ndarray]:
        args = self.alt_args if alt else self.args
        return {n: a.numpy() for n, a in zip(self.names, args, strict=True)}


def _kv_shape(model: Any, past: int) -> tuple[int, int, int, int]:
    cfg = model.config
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    return (1, heads, past, head_dim)


def make_graph(spec: ModelSpec, model: Any, graph: str, tokens: int, seed: int) -> Graph:
    import torch

    gen = torch.Generator().manual_seed(seed)

    def ids(n: int) -> Any:
        return torch.randint(0, VOCAB, (1, n), generator=gen)

    if graph == "prefill":
        names = ["ids", "mask"]
        args = (ids(tokens), torch.ones(1, tokens, dtype=torch.int64))
        alt = (ids(tokens), args[1])
        g = Graph(Prefill(model, spec.decoder), names, args, alt)
    else:
        past = tokens - 1
        layers = model.config.num_hidden_layers
        shape = _kv_shape(model, past)
        kv = tuple(torch.randn(shape, generator=gen) for _ in range(2 * layers))
        names = ["ids", "mask", *(f"{t}_{i}" for i in range(layers) for t in ("k", "v"))]
        mask = torch.ones(1, tokens, dtype=torch.int64)
        args = (ids(1), mask, *kv)
        alt = (ids(1), mask, *(torch.randn(shape, generator=gen) for _ in range(2 * layers)))
        g = Graph(Decode(model), names, args, alt)
    with torch.inference_mode():
        out = g.module(*g.args)
    g.want = [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]
    return g


# -- exporting and importing -----------------------------------------------------------------


def _quiet() -> None:
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    logging.getLogger("onnxscript").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")


def export_onnx(g: Graph, path: Path, dynamo: bool) -> Path:
    import torch

    torch.onnx.export(
        g.module,
        g.args,
        str(path),
        input_names=g.names,
        dynamo=dynamo,
        opset_version=18,
        external_data=False,
        verbose=False,
    )
    return path


def import_route(g: Graph, route: str, onnx_path: Path) -> Any:
    """The fuel module of `g` through `route`."""
    if route.startswith("onnx"):
        from frontends.onnx import import_onnx

        return import_onnx(onnx_path)
    import torch

    from frontends.torch_export import import_exported_program

    ep = torch.export.export(g.module, g.args, strict=False)
    return import_exported_program(ep, input_names=g.names)


# -- one row ---------------------------------------------------------------------------------


@dataclass
class Row:
    model: str
    route: str
    graph: str
    fuel_ms: float | None = None
    ort_ms: float | None = None
    status: str = "ok"

    def line(self) -> str:
        ratio = f"{self.fuel_ms / self.ort_ms:5.2f}x" if self.fuel_ms and self.ort_ms else "    -"
        f = f"{self.fuel_ms:8.2f}" if self.fuel_ms is not None else "       -"
        o = f"{self.ort_ms:8.2f}" if self.ort_ms is not None else "       -"
        return (
            f"| {self.model:10} | {self.route:12} | {self.graph:7} | {f} | {o} | {ratio} | "
            f"{self.status} |"
        )


def _executor(module: Any, out_dir: Path, tag: str) -> Any:
    from lowering.bundle import load_bundle, write_bundle

    path = write_bundle(module, out_dir / f"{tag}.bundle", options={"cpu": {}})
    return load_bundle(path).executor()


def _export_any(
    g: Graph, keys: list[str], onnx: dict[str, Path | Exception], out_dir: Path, required: bool
) -> str:
    """The first of `keys` whose ONNX export works (each exported once per graph)."""
    for key in keys:
        if key not in onnx:
            try:
                onnx[key] = export_onnx(g, out_dir / f"{key}.onnx", dynamo=key == "dynamo")
            except Exception as e:  # the exporter's failure, kept for the row
                onnx[key] = e
        if not isinstance(onnx[key], Exception):
            return key
        if required:
            raise onnx[key]
    raise onnx[keys[-1]]


def run_row(
    spec: ModelSpec,
    g: Graph,
    route: str,
    onnx: dict[str, Path | Exception],
    out_dir: Path,
    budget_s: float,
) -> Row:
    row = Row(spec.name, route, "")
    stage = "export"
    try:
        # the torch.export route's onnxruntime baseline is the dynamo file (the same program),
        # else the legacy one where the dynamo exporter fails
        keys = {"onnx-legacy": ["legacy"], "onnx-dynamo": ["dynamo"]}.get(
            route, ["dynamo", "legacy"]
        )
        key = _export_any(g, keys, onnx, out_dir, required=route.startswith("onnx"))
        stage = "import"
        module = import_route(g, route, onnx[key])
        stage = "compile"
        ex = _executor(module, out_dir, route)
        del module
        stage = "check"
        feeds, alt = g.feeds(), g.feeds(alt=True)
        got = list(ex.run(feeds).values())
        why = mismatch(got, g.want, TOL)
        if why is not None:
            row.status = f"WRONG RESULT ({why})"
            return row
        if all(np.array_equal(a, b) for a, b in zip(got, ex.run(alt).values(), strict=True)):
            row.status = "WRONG: the output does not depend on the input"
            return row
        stage = "onnxruntime"
        runners = {"fuel": lambda: ex.run(feeds), "ort": eo.ort_session(onnx[key], feeds, 2)}
        why = mismatch(runners["ort"](), g.want, TOL)
        if why is not None:
            row.status = f"onnxruntime disagrees with torch ({why})"
        stage = "timing"
        runs = runs_for_budget(runners, budget_s, lo=10, hi=2000)
        stats = measure(runners, runs, rounds=10, settle_s=SETTLE_S)
        row.fuel_ms, row.ort_ms = stats["fuel"].median / 1e3, stats["ort"].median / 1e3
    except Exception as e:  # a failing route is a row, not the end of the table
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        row.status = f"FAILED at {stage}: {type(e).__name__}: {first[:160]}"
        if "--verbose" in sys.argv:
            traceback.print_exc()
    return row


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--models",
        nargs="*",
        default=None,
        choices=MODELS,
        help=f"models (default: {' '.join(DEFAULT_MODELS)})",
    )
    p.add_argument("--routes", nargs="*", default=list(ROUTES), choices=ROUTES)
    p.add_argument("--graphs", nargs="*", default=list(GRAPHS), choices=GRAPHS)
    p.add_argument("--tokens", type=int, default=128, help="prefill length; decode's past + 1")
    p.add_argument("--budget", type=float, default=6.0, help="seconds of timing per row")
    p.add_argument("--verbose", action="store_true", help="print the traceback of a failure")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    import torch

    args = parse_args(argv)
    _quiet()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    specs = _specs()
    names = args.models or list(DEFAULT_MODELS)
    print("| model      | route        | graph   | fuel ms  | ORT ms   | ratio | status |")
    print("|---|---|---|---|---|---|---|")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="fuel-zoo-") as tmp:
        for name in names:
            spec = specs[name]
            model = spec.build().eval()
            for graph in args.graphs:
                if graph == "decode" and not spec.decoder:
                    continue
                g = make_graph(spec, model, graph, args.tokens, seed=1)
                onnx: dict[str, Path | Exception] = {}
                for route in args.routes:
                    out_dir = Path(tmp) / f"{name}-{graph}-{route}"
                    out_dir.mkdir()
                    t0 = time.perf_counter()
                    row = run_row(spec, g, route, onnx, out_dir, args.budget)
                    row.graph = graph
                    rows.append(row)
                    print(row.line(), f"({time.perf_counter() - t0:.0f} s)", flush=True)
                    gc.collect()
                if onnx:
                    onnx.clear()
            del model
            gc.collect()
    timed = [r for r in rows if r.fuel_ms and r.ort_ms]
    worst = max(timed, key=lambda r: r.fuel_ms / r.ort_ms, default=None)
    print(f"\n{len(timed)} of {len(rows)} rows timed", end="")
    if worst is not None:
        print(
            f"; worst fuel/ORT: {worst.fuel_ms / worst.ort_ms:.2f}x "
            f"({worst.model} {worst.route} {worst.graph})"
        )
    else:
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
