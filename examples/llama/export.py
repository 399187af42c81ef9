"""Export the decoder's prefill and decode-step graphs to ONNX and through torch.export, import
both into fuel, run them with fuel's executor and compare with PyTorch.

    python -m examples.llama.export --config tiny --out /tmp/llama   # prints the errors

ONNX goes through torch's dynamo exporter at opset 23 (it needs `onnxscript`): there
`scaled_dot_product_attention` becomes one ONNX `Attention` node, which fuel imports as one
`fuel.attention` (the legacy TorchScript exporter spells attention as a dozen primitives, and
the decode step would lose the `kv_len` that `fuel-emit-decode-flash` keys on).

Both graphs update the KV cache in place (`examples.llama.model`): prefill `tokens, positions,
k_cache, v_cache -> logits`, decode `token, pos, k_cache, v_cache -> logits`. Through
torch.export the prefill's prompt length is one dynamic dim (`seq`, 1 .. max_seq): one module
for every prompt. Imported, each graph returns `logits` and the updated `k_cache`, `v_cache`
(the caller's arrays, donated: the executor writes the new rows into them). The ONNX route
exports static shapes (at the example's prompt length) and returns the caches as new outputs
`k_cache_out`, `v_cache_out` (ONNX has no in-place update, and forbids an output named like
an input).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from examples.llama.model import CONFIGS, Decode, Llama, LlamaConfig, Prefill, new_cache
from runtime.fsutil import atomic_write_bytes
from runtime.module import FuelModule
from runtime.shape_specialize import make_executor

PREFILL_IO = (["tokens", "positions", "k_cache", "v_cache"], ["logits"])
DECODE_IO = (["token", "pos", "k_cache", "v_cache"], ["logits"])
CACHES = ("k_cache", "v_cache")
GRAPHS = ("prefill", "decode")
IMPORTERS = ("torch", "onnx")
ONNX_OPSET = 23


@dataclass
class Example:
    """Example inputs of both graphs (the decode step continues the prompt)."""

    tokens: torch.Tensor
    decode: tuple[torch.Tensor, ...]

    def args(self, graph: str) -> tuple[torch.Tensor, ...]:
        """Fresh copies (the graphs update the caches in place)."""
        if graph == "prefill":
            n = self.tokens.shape[1]
            kc, vc = (torch.zeros_like(c) for c in self.decode[2:])
            return self.tokens, torch.arange(n), kc, vc
        return tuple(a.clone() for a in self.decode)

    def feeds(self, graph: str) -> dict[str, np.ndarray]:
        return {n: a.numpy() for n, a in zip(_io(graph)[0], self.args(graph), strict=True)}


def example_inputs(model: Llama, prompt_len: int, seed: int = 0) -> Example:
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, model.cfg.vocab, (1, prompt_len), generator=gen)
    kc, vc = new_cache(model.cfg)
    with torch.no_grad():
        logits = model.prefill(tokens, torch.arange(prompt_len), kc, vc)
    nxt = logits[0, -1].argmax().view(1, 1)
    return Example(tokens, (nxt, torch.tensor([prompt_len]), kc, vc))


class _Functional(torch.nn.Module):
    """A graph whose caches are new outputs, not updated inputs (for ONNX): the model writes
    into per-layer copies (`model.write_rows`' ONNX form), stacked into the outputs."""

    def __init__(self, inner: torch.nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, *args: torch.Tensor):
        *rest, kc, vc = args
        ks, vs = ([c[i].clone() for i in range(c.shape[0])] for c in (kc, vc))
        return self.inner(*rest, ks, vs), torch.stack(ks), torch.stack(vs)


def _module(model: Llama, graph: str) -> torch.nn.Module:
    return (Prefill if graph == "prefill" else Decode)(model).eval()


def _io(graph: str) -> tuple[list[str], list[str]]:
    return PREFILL_IO if graph == "prefill" else DECODE_IO


def dynamic_shapes(model: Llama, graph: str) -> dict[str, Any] | None:
    """The prefill's prompt length as one `Dim` (1 .. max_seq); the decode step is static."""
    if graph != "prefill":
        return None
    seq = torch.export.Dim("seq", min=1, max=model.cfg.max_seq)
    return {"tokens": {1: seq}, "positions": {0: seq}, "k_cache": None, "v_cache": None}


def export_torch(model: Llama, ex: Example, graph: str) -> torch.export.ExportedProgram:
    return torch.export.export(
        _module(model, graph),
        ex.args(graph),
        dynamic_shapes=dynamic_shapes(model, graph),
        strict=False,
    )


def export_onnx(model: Llama, ex: Example, graph: str, out_dir: str | Path) -> Path:
    """`<out_dir>/<graph>.onnx`, written atomically (weights inside the file)."""
    ins, outs = _io(graph)
    outs = [*outs, *(f"{c}_out" for c in CACHES)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = torch.onnx.export(
            _Functional(_module(model, graph)),
            ex.args(graph),
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
        dims = {"tokens": {1: "seq"}, "positions": {0: "seq"}} if graph == "prefill" else None
        return import_exported_program(ep, input_names=ins, output_names=outs, dim_names=dims)
    if importer == "onnx":
        import tempfile

        from frontends.onnx import import_onnx

        if out_dir is None:
            with tempfile.TemporaryDirectory() as tmp:
                return import_onnx(export_onnx(model, ex, graph, tmp))
        return import_onnx(export_onnx(model, ex, graph, out_dir))
    raise ValueError(f"unknown importer '{importer}' (expected one of {', '.join(IMPORTERS)})")


def torch_outputs(model: Llama, ex: Example, graph: str) -> dict[str, np.ndarray]:
    """Eager PyTorch's logits and updated caches (named like the torch.export import's)."""
    args = ex.args(graph)
    with torch.no_grad():
        logits = (model.prefill if graph == "prefill" else model.decode)(*args)
    return {"logits": logits.numpy(), "k_cache": args[-2].numpy(), "v_cache": args[-1].numpy()}


def max_errors(module: FuelModule, model: Llama, ex: Example, graph: str) -> dict[str, float]:
    """Max absolute difference per output between fuel's executor and eager PyTorch (the
    caches as updated in place, or as the ONNX route's `*_out` outputs)."""
    got = make_executor(module).run(ex.feeds(graph))
    want = torch_outputs(model, ex, graph)
    return {
        n: float(np.abs(got.get(n, got.get(f"{n}_out")).astype(np.float64) - w).max())
        for n, w in want.items()
    }


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
