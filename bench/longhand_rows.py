"""Longhand reductions no fuse pattern knows: kernels per run and median ms.

A log-softmax, an L2 normalization and a norm with its eps outside the square root, written out
op by op over f32[64, 1024] and compiled with `fuel compile`'s defaults (`compile_module`):
generated C row kernels (`lowering/cpu/codegen_rows.py`) make each one kernel. Each result is
checked against the same graph run in float64 and on a second input (it must change).

    .venv/bin/python bench/longhand_rows.py [--rows 64] [--cols 1024] [--runs 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from xdsl.dialects import func  # noqa: E402

from frontends.builder import GraphBuilder  # noqa: E402
from lowering.bundle import compile_module  # noqa: E402
from runtime.executor import Executor  # noqa: E402
from runtime.module import FuelModule  # noqa: E402

Graph = Callable[[GraphBuilder, object, str], object]


def log_softmax(g: GraphBuilder, x: object, dt: str) -> object:
    d = g.sub(x, g.reduce_max(x, -1, keepdim=True))
    return g.sub(d, g.log(g.reduce_sum(g.exp(d), -1, keepdim=True)))


def l2_normalize(g: GraphBuilder, x: object, dt: str) -> object:
    n = g.sqrt(g.reduce_sum(g.mul(x, x), -1, keepdim=True))
    return g.div(x, g.max(n, 1e-12))


def norm_eps_outside(g: GraphBuilder, x: object, dt: str) -> object:
    d = g.sub(x, g.reduce_mean(x, -1, keepdim=True))
    sd = g.sqrt(g.reduce_mean(g.mul(d, d), -1, keepdim=True))
    return g.div(d, g.add(sd, 1e-5))


GRAPHS = {
    "log-softmax": log_softmax,
    "l2-normalize": l2_normalize,
    "norm-eps-out": norm_eps_outside,
}


def build(graph: Graph, shape: tuple[int, int], dt: str) -> FuelModule:
    g = GraphBuilder()
    x = g.input("x", shape, dt)
    return g.build({"y": graph(g, x, dt)})


def kernels(m: FuelModule) -> int:
    skip = ("fuel.constant", "fuel.weight", "func.return")
    f = next(op for op in m.op.ops if isinstance(op, func.FuncOp))
    return sum(op.name not in skip for op in f.body.block.ops)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--cols", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args()
    shape = (args.rows, args.cols)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(shape).astype(np.float32) * 3 for _ in range(2))
    for name, graph in GRAPHS.items():
        m, _ = compile_module(build(graph, shape, "f32"))
        ex = Executor(m)
        got, other = ex.run({"x": a})["y"], ex.run({"x": b})["y"]
        ref = Executor(build(graph, shape, "f64")).run({"x": a.astype(np.float64)})["y"]
        err = np.abs(got - ref).max() / np.abs(ref).max()
        if err > 1e-6 or (got == other).all():
            print(f"{name}: WRONG RESULT (normwise error {err:.1e}) or output independent of x")
            return 1
        ts = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            ex.run({"x": a})
            ts.append(time.perf_counter() - t0)
        med = statistics.median(ts) * 1e3
        print(f"{name:13s} {kernels(m)} kernel(s)  median {med:.3f} ms  error {err:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
