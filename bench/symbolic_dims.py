"""One bundle, many shapes: a module with dim symbols vs a static module of the same shape.

For each shape: the symbolic module's first run at that shape (specialisation: bind, clone,
verify, finish lowering for the shape (`lowering.cpu.specialize`), compile the static
executor) and then its later runs, timed interleaved with a
module compiled statically at that shape (medians). The outputs of both are checked against
float64 numpy first.

    python -m bench.symbolic_dims [--batches 8,32] [--runs 300]
    python -m bench.symbolic_dims --llama [--lengths 1,16,64] [--runs 100]

`--llama`: a `transformers` Llama from a small config (random weights), exported once by
torch.onnx (legacy, `dynamic_axes` seq) and imported with `--dim seq=1:256`, against the same
export imported pinned at each length; both checked against PyTorch first.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench._timing import measure, table
from frontends.builder import GraphBuilder
from lowering.bundle import compile_module
from lowering.cpu.specialize import shape_finisher
from runtime.module import FuelModule
from runtime.shape_specialize import make_executor

DIMS = (256, 1024, 256)


def mlp(batch: int | tuple[int, int]) -> FuelModule:
    """x (batch, 256) -> Linear + ReLU (1024) -> Linear (256); `batch` an int or a range."""
    g = GraphBuilder(seed=0)
    b = g.dim("batch", *batch) if isinstance(batch, tuple) else batch
    x = g.input("x", (b, DIMS[0]))
    h = g.relu(g.add(g.matmul(x, g.weight("w1", DIMS[:2])), g.weight("b1", DIMS[1:2])))
    return g.build(outputs={"y": g.matmul(h, g.weight("w2", DIMS[1:]))})


def reference(m: FuelModule, x: np.ndarray) -> np.ndarray:
    w = {k: v.astype(np.float64) for k, v in m.weights.items()}
    return np.maximum(x @ w["w1"] + w["b1"], 0) @ w["w2"]


def llama_rows(lengths: Sequence[int], runs: int) -> list[list[str]]:
    import io
    import warnings

    import onnx
    import torch
    import transformers as tf

    from frontends.onnx import import_onnx

    torch.manual_seed(0)
    cfg = tf.LlamaConfig(
        vocab_size=512,
        num_hidden_layers=2,
        hidden_size=256,
        intermediate_size=688,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
    )
    model = tf.LlamaForCausalLM(cfg).eval()

    class Prefill(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, ids: Any, mask: Any) -> Any:
            return self.m(input_ids=ids, attention_mask=mask, use_cache=False).logits

    prefill = Prefill().eval()
    ids = torch.zeros(1, 8, dtype=torch.int64)
    buf = io.BytesIO()
    axes = {"ids": {1: "seq"}, "mask": {1: "seq"}, "logits": {1: "seq"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            prefill,
            (ids, torch.ones_like(ids)),
            buf,
            input_names=["ids", "mask"],
            output_names=["logits"],
            dynamic_axes=axes,
            dynamo=False,
            opset_version=18,
        )
    proto = onnx.load_model_from_string(buf.getvalue())
    sym_module = compile_module(import_onnx(proto, dims={"seq": (1, 256)}))[0]
    sym = make_executor(sym_module, finish=shape_finisher())
    rows = []
    for n in lengths:
        ids = torch.randint(0, 512, (1, n), generator=torch.Generator().manual_seed(n))
        feed = {"ids": ids.numpy(), "mask": np.ones((1, n), np.int64)}
        with torch.inference_mode():
            want = prefill(ids, torch.ones_like(ids)).numpy()
        t0 = time.perf_counter()
        first = sym.run(feed)["logits"]
        first_s = time.perf_counter() - t0
        pinned = import_onnx(proto, input_shapes={"ids": (1, n), "mask": (1, n)})
        static = make_executor(compile_module(pinned)[0])
        for got in (first, static.run(feed)["logits"]):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        stats = measure({"symbolic": _runner(sym, feed), "static": _runner(static, feed)}, runs)
        s, st = stats["symbolic"].median, stats["static"].median
        spec = sym.specializations[-1][1]
        rows.append(
            [
                f"seq {n}",
                f"{first_s * 1e3:.1f}",
                f"{spec * 1e3:.1f}",
                f"{s:.1f}",
                f"{st:.1f}",
                f"{s / st:.3f}",
                f"{len(sym)} / {len(static)}",
            ]
        )
    return rows


def _runner(ex: Any, feed: dict[str, np.ndarray]) -> Any:
    return lambda: ex.run(feed)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", default="8,32")
    p.add_argument("--runs", type=int, default=300)
    p.add_argument("--llama", action="store_true", help="a transformers Llama, dynamic seq")
    p.add_argument("--lengths", default="1,16,64")
    args = p.parse_args(argv)
    header = ["shape", "first run ms", "specialise ms", "symbolic us", "static us", "ratio"]
    header.append("items sym / static")
    if args.llama:
        rows = llama_rows([int(s) for s in args.lengths.split(",")], args.runs)
        print(f"Llama (2 layers, hidden 256), f32; load average {os.getloadavg()[0]:.2f}")
        print(table(rows, header))
        return 0
    sym_module, _ = compile_module(mlp((1, 256)))
    sym = make_executor(sym_module, finish=shape_finisher())
    rows = []
    for b in (int(s) for s in args.batches.split(",")):
        x = np.random.default_rng(b).standard_normal((b, DIMS[0])).astype(np.float32)
        t0 = time.perf_counter()
        first = sym.run({"x": x})["y"]
        first_s = time.perf_counter() - t0
        static_module, _ = compile_module(mlp(b))
        static = make_executor(static_module)
        want = reference(static_module, x)
        for got in (first, static.run({"x": x})["y"]):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        feed = {"x": x}
        stats = measure(
            {"symbolic": _runner(sym, feed), "static": _runner(static, feed)}, args.runs
        )
        s, st = stats["symbolic"].median, stats["static"].median
        spec = sym.specializations[-1][1]
        rows.append(
            [
                f"batch {b}",
                f"{first_s * 1e3:.1f}",
                f"{spec * 1e3:.1f}",
                f"{s:.1f}",
                f"{st:.1f}",
                f"{s / st:.3f}",
                f"{len(sym)} / {len(static)}",
            ]
        )
    print(f"MLP {DIMS}, f32; load average {os.getloadavg()[0]:.2f}")
    print(table(rows, header))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
