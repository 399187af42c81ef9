"""Cast elision: a mixed-precision chain before and after `fuel-fuse-casts`.

Two 24-layer chains in the style of onnxruntime issue 25824 (a converter wraps every layer in
casts), on a (B, H) activation:
- `f16 islands`: an f32 graph where every layer is `cast f32->f16, op@f16, cast f16->f32`;
  the f16->f32->f16 seams between layers are exact round trips.
- `f32 islands`: an f16 graph where every layer runs in f32 (`cast f16->f32, op@f32,
  cast f32->f16`); exact ops (neg/relu/max...) fold back to f16 by default, the rest only
  under `allow_semantic_change`.
Layers cycle through relu, exp, neg, tanh, max(., w), mul(., w). For each chain and option set:
number of casts, median microseconds per run on fuel's executor (variants timed round-robin,
one run each per round, so machine noise hits all alike), and max |difference| to the
unrewritten module.

    .venv/bin/python bench/cast_elision.py [--layers 24] [--shape 64 256] [--rounds 300]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from xdsl.context import Context  # noqa: E402

from frontends.builder import GraphBuilder  # noqa: E402
from fuel_dialect.ops_elementwise import CastOp  # noqa: E402
from passes.fuse_casts import FuseCastsPass  # noqa: E402
from runtime.dtypes import to_numpy  # noqa: E402
from runtime.executor import Executor  # noqa: E402
from runtime.module import FuelModule  # noqa: E402

OPS = ("relu", "exp", "neg", "tanh", "max", "mul")
OPTIONS = {
    "before": None,
    "default": {},
    "semantic": {"allow_semantic_change": True},
    "semantic+all": {"allow_semantic_change": True, "elide_round_trips": "all"},
}


def chain(outer: str, inner: str, layers: int, shape: tuple[int, int]) -> FuelModule:
    g = GraphBuilder(seed=0)
    h = g.input("x", shape, outer)
    for i in range(layers):
        op = OPS[i % len(OPS)]
        x = g.cast(h, inner)
        if op in ("max", "mul"):
            w = g.weight(f"w{i}", shape[-1:], inner)
            y = getattr(g, op)(x, w)
        else:
            y = getattr(g, op)(g.mul(x, 0.5) if op == "exp" else x)
        h = g.cast(y, outer)
    return g.build([h])


def fused(module: FuelModule, opts: dict | None) -> FuelModule:
    out = FuelModule(module.op.clone(), dict(module.weights))
    if opts is not None:
        FuseCastsPass(judge="none", **opts).apply(Context(), out.op)
    return out


def n_casts(module: FuelModule) -> int:
    return sum(isinstance(op, CastOp) for op in module.op.walk())


def bench(name: str, base: FuelModule, x: np.ndarray, rounds: int) -> None:
    variants = {k: fused(base, o) for k, o in OPTIONS.items()}
    exes = {k: Executor(m) for k, m in variants.items()}
    ref = exes["before"].run({"x": x})["out"].astype(np.float64)
    times: dict[str, list[float]] = {k: [] for k in exes}
    for _ in range(10):
        for e in exes.values():
            e.run({"x": x}, copy_outputs=False)
    for _ in range(rounds):  # round-robin: one run of each variant per round
        for k, e in exes.items():
            t = time.perf_counter_ns()
            e.run({"x": x}, copy_outputs=False)
            times[k].append((time.perf_counter_ns() - t) / 1e3)
    base_us = statistics.median(times["before"])
    for k, m in variants.items():
        out = exes[k].run({"x": x})["out"].astype(np.float64)
        med = statistics.median(times[k])
        err = float(np.nanmax(np.abs(out - ref)))
        print(
            f"| {name} | {k} | {n_casts(m)} | {len(exes[k])} | {med:.1f} | "
            f"{base_us / med:.2f}x | {err:.3g} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--shape", type=int, nargs=2, default=(64, 256))
    ap.add_argument("--rounds", type=int, default=300)
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # unaudited-kernel notices are not this benchmark's news
    shape = tuple(args.shape)
    rng = np.random.default_rng(0)
    print(f"{args.layers} layers, activation {shape[0]}x{shape[1]}, {args.rounds} rounds")
    print("| chain | options | casts | kernels run | median us/run | speedup | max abs diff |")
    print("|---|---|---|---|---|---|---|")
    for name, outer, inner in (("f16 islands", "f32", "f16"), ("f32 islands", "f16", "f32")):
        x = rng.standard_normal(shape).astype(to_numpy(outer))
        bench(name, chain(outer, inner, args.layers, shape), x, args.rounds)


if __name__ == "__main__":
    main()
