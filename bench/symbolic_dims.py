"""One bundle, many shapes: a module with dim symbols vs a static module of the same shape.

For each shape: the symbolic module's first run at that shape (specialisation: bind, clone,
verify, compile the static executor) and then its later runs, timed interleaved with a
module compiled statically at that shape (medians). The outputs of both are checked against
float64 numpy first.

    python -m bench.symbolic_dims [--batches 8,32] [--runs 300]
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


def _runner(ex: Any, feed: dict[str, np.ndarray]) -> Any:
    return lambda: ex.run(feed)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", default="8,32")
    p.add_argument("--runs", type=int, default=300)
    args = p.parse_args(argv)
    sym_module, _ = compile_module(mlp((1, 256)))
    sym = make_executor(sym_module)
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
            [str(b), f"{first_s * 1e3:.1f}", f"{spec * 1e3:.1f}", f"{s:.1f}", f"{st:.1f}",
             f"{s / st:.3f}"]
        )  # fmt: skip
    print(f"MLP {DIMS}, f32; load average {os.getloadavg()[0]:.2f}")
    header = ["batch", "first run ms", "specialise ms", "symbolic us", "static us", "ratio"]
    print(table(rows, header))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
