"""Export the decoder's prefill and decode-step graphs to ONNX and through torch.export, import
both into fuel, run them with fuel's executor and compare with PyTorch.

    python -m examples.llama.export --config tiny --out /tmp/llama   # prints the errors

ONNX goes through torch's dynamo exporter at opset 23 (it needs `onnxscript`): there
`scaled_dot_product_attention` becomes one ONNX `Attention` node, which fuel imports as one
`fuel.attention` (the legacy TorchScript exporter spells attention as a dozen primitives, and
the decode step would lose the `kv_len` that `fuel-emit-decode-flash` keys on).

Both importers see the same graph interface:
prefill `tokens -> logits, k_cache, v_cache`; decode `token, pos, k_cache, v_cache -> logits,
k_cache_out, v_cache_out` (ONNX forbids an output named like an input).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from examples.llama.model import CONFIGS, Decode, Llama, LlamaConfig, Prefill
from runtime.executor import Executor
from runtime.fsutil import atomic_write_bytes
from runtime.module import FuelModule

PREFILL_IO = (["tokens"], ["logits", "k_cache", "v_cache"])
DECODE_IO = (["token", "pos", "k_cache", "v_cache"], ["logits", "k_cache_out", "v_cache_out"])
GRAPHS = ("prefill", "decode")
IMPORTERS = ("torch", "onnx")
ONNX_OPSET = 23


@dataclass
class Example:
    """Example inputs of both graphs (the decode step continues the prompt)."""

    tokens: torch.Tensor
    decode: tuple[torch.Tensor, ...]

    def feeds(self, graph: str) -> dict[str, np.ndarray]:
        args = (self.tokens,) if graph == "prefill" else self.decode
        names = PREFILL_IO[0] if graph == "prefill" else DECODE_IO[0]
        return {n: a.numpy() for n, a in zip(names, args, strict=True)}


def example_inputs(model: Llama, prompt_len: int, seed: int = 0) -> Example:
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, model.cfg.vocab, (1, prompt_len), generator=gen)
    with torch.no_grad():
        logits, kc, vc = model.prefill(tokens)
    nxt = logits[0, -1].argmax().view(1, 1)
    return Example(tokens, (nxt, torch.tensor([prompt_len]), kc, vc))


def _module(model: Llama, graph: str) -> torch.nn.Module:
    return (Prefill if graph == "prefill" else Decode)(model).eval()


def _args(ex: Example, graph: str) -> tuple[torch.Tensor, ...]:
    return (ex.tokens,) if graph == "prefill" else ex.decode


def _io(graph: str) -> tuple[list[str], list[str]]:
    return PREFILL_IO if graph == "prefill" else DECODE_IO


def export_torch(model: Llama, ex: Example, graph: str) -> torch.export.ExportedProgram:
    return torch.export.export(_module(model, graph), _args(ex, graph), strict=False)


def export_onnx(model: Llama, ex: Example, graph: str, out_dir: str | Path) -> Path:
    """`<out_dir>/<graph>.onnx`, written atomically (weights inside the file)."""
    ins, outs = _io(graph)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = torch.onnx.export(
            _module(model, graph),
            _args(ex, graph),
            dynamo=True,
            opset_version=ONNX_OPSET,
            input_names=ins,
            output_names=outs,
            verbose=False,
        )
    path = Path(out_dir) / f"{graph}.onnx"
    atomic_write_bytes(path, prog.model_proto.SerializeToString())
    return path


def import_graph(
    model: Llama, ex: Example, graph: str, importer: str, out_dir: str | Path | None = None
) -> FuelModule:
    """One graph through one importer ("torch" or "onnx"; ONNX files go to `out_dir`)."""
    ins, outs = _io(graph)
    if importer == "torch":
        from frontends.torch_export import import_exported_program

        ep = export_torch(model, ex, graph)
        return import_exported_program(ep, input_names=ins, output_names=outs)
    if importer == "onnx":
        import tempfile

        from frontends.onnx import import_onnx

        if out_dir is None:
            with tempfile.TemporaryDirectory() as tmp:
                return import_onnx(export_onnx(model, ex, graph, tmp))
        return import_onnx(export_onnx(model, ex, graph, out_dir))
    raise ValueError(f"unknown importer '{importer}' (expected one of {', '.join(IMPORTERS)})")


def torch_outputs(model: Llama, ex: Example, graph: str) -> dict[str, np.ndarray]:
    with torch.no_grad():
        outs = (
            model.prefill(*_args(ex, graph))
            if graph == "prefill"
            else model.decode(*_args(ex, graph))
        )
    return {n: o.numpy() for n, o in zip(_io(graph)[1], outs, strict=True)}


def max_errors(module: FuelModule, model: Llama, ex: Example, graph: str) -> dict[str, float]:
    """Max absolute difference per output between fuel's executor and eager PyTorch."""
    got = Executor(module).run(ex.feeds(graph))
    want = torch_outputs(model, ex, graph)
    return {n: float(np.abs(got[n].astype(np.float64) - want[n]).max()) for n in want}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    p.add_argument("--prompt-len", type=int, default=8)
    p.add_argument("--out", default=None, help="directory for the .onnx and fuel IR files")
    p.add_argument("--importer", choices=IMPORTERS, action="append")
    args = p.parse_args(argv)
    cfg: LlamaConfig = CONFIGS[args.config]
    model = Llama(cfg).eval()
    ex = example_inputs(model, args.prompt_len)
    for importer in args.importer or IMPORTERS:
        for graph in GRAPHS:
            m = import_graph(model, ex, graph, importer, args.out)
            if args.out:
                m.save(Path(args.out) / f"{graph}.{importer}.mlir")
            errs = ", ".join(f"{k} {v:.2e}" for k, v in max_errors(m, model, ex, graph).items())
            print(f"{args.config} {graph:7s} via {importer:5s}: max |fuel - torch|: {errs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
