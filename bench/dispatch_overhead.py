"""Dispatch overhead: a chain of 200 tiny elementwise ops on a 64-element f32 vector.

fuel's executor vs onnxruntime (CPU EP, all graph optimizations, 1 intra-op thread: more
threads only add overhead at this size) vs PyTorch eager, same process, same inputs. The work
per op is negligible, so time per op is the per-op dispatch cost. Prints median and p10/p90
microseconds per op and the ratios to fuel.

    .venv/bin/python bench/dispatch_overhead.py [--ops 200] [--runs 2000]
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

from frontends.builder import GraphBuilder  # noqa: E402
from runtime.executor import Executor  # noqa: E402

# The chain cycles through these (op, constant operand or None).
CYCLE = [("add", 0.5), ("mul", 0.75), ("tanh", None), ("neg", None), ("relu", None), ("sub", 0.25)]

INFORMATIVE_OPS = 9
"""The longest prefix of the chain whose output still depends on its input: relu in the second
cycle maps every element to 0, so the full chain's output is a constant. Runners are checked on
this prefix too, or a wrong kernel past it would go unnoticed."""


def reference(x: np.ndarray, n_ops: int) -> np.ndarray:
    y = x.astype(np.float64)
    fns = {"add": np.add, "mul": np.multiply, "sub": np.subtract}
    for i in range(n_ops):
        op, c = CYCLE[i % len(CYCLE)]
        if c is not None:
            y = fns[op](y, c)
        else:
            y = {"tanh": np.tanh, "neg": np.negative, "relu": lambda v: np.maximum(v, 0)}[op](y)
    return y


def fuel_runner(
    x: np.ndarray, n_ops: int, picked: bool = False, codegen: bool = False
) -> Callable[[], np.ndarray]:
    """The chain through fuel's executor; `picked` runs the picker (fuel-select) first;
    `codegen` lowers it with `convert-fuel-to-c` (one generated C kernel for the chain)."""
    g = GraphBuilder()
    v = g.input("x", x.shape)
    consts = {c: g.constant(c) for _, c in CYCLE if c is not None}
    for i in range(n_ops):
        op, c = CYCLE[i % len(CYCLE)]
        v = getattr(g, op)(v, consts[c]) if c is not None else getattr(g, op)(v)
    module = g.build(outputs={"y": v})
    if picked:
        from xdsl.context import Context

        from passes.select import SelectPass

        SelectPass(judge="none").apply(Context(), module.op)
    if codegen:
        from xdsl.context import Context

        from lowering.cpu.convert_fuel_to_c import ConvertFuelToCPass
        from runtime.loaders.c import find_compiler

        if find_compiler() is None:
            raise ImportError("no C compiler", name="cc")
        ConvertFuelToCPass().apply(Context(), module.op)
    ex = Executor(module)
    feed = {"x": x}
    return lambda: ex.run(feed)["y"]


def ort_runner(x: np.ndarray, n_ops: int) -> Callable[[], np.ndarray]:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    names = {"add": "Add", "mul": "Mul", "sub": "Sub", "tanh": "Tanh", "neg": "Neg", "relu": "Relu"}
    inits = [
        helper.make_tensor(f"c{j}", TensorProto.FLOAT, [], [c])
        for j, (_, c) in enumerate(CYCLE)
        if c is not None
    ]
    nodes, prev = [], "x"
    for i in range(n_ops):
        j = i % len(CYCLE)
        op, c = CYCLE[j]
        ins = [prev, f"c{j}"] if c is not None else [prev]
        out = "y" if i == n_ops - 1 else f"t{i}"
        nodes.append(helper.make_node(names[op], ins, [out]))
        prev = out
    graph = helper.make_graph(
        nodes, "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x.shape))],
        inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feed = {"x": x}
    return lambda: sess.run(None, feed)[0]


def torch_runner(x: np.ndarray, n_ops: int) -> Callable[[], np.ndarray]:
    import torch

    torch.set_num_threads(1)
    t = torch.from_numpy(x)
    fns = {"add": torch.add, "mul": torch.mul, "sub": torch.sub}
    un = {"tanh": torch.tanh, "neg": torch.neg, "relu": torch.relu}
    steps = [
        (lambda v, f=fns[op], c=c: f(v, c)) if c is not None else un[op]
        for op, c in (CYCLE[i % len(CYCLE)] for i in range(n_ops))
    ]

    def run() -> np.ndarray:
        with torch.inference_mode():
            v = t
            for s in steps:
                v = s(v)
            return v.numpy()

    return run


def measure(fns: dict[str, Callable[[], np.ndarray]], runs: int, rounds: int = 20) -> dict:
    """Interleaved: each round times `runs // rounds` runs of every runner in turn, so the
    machine's slow and fast phases hit all of them alike."""
    for fn in fns.values():
        for _ in range(max(20, runs // 10)):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(max(1, runs // rounds)):
                t0 = time.perf_counter_ns()
                fn()
                times[name].append((time.perf_counter_ns() - t0) / 1e3)
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=200)
    ap.add_argument("--runs", type=int, default=2000)
    args = ap.parse_args()
    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    ref = reference(x, args.ops)
    fns: dict[str, Callable[[], np.ndarray]] = {}
    for name, make in (
        ("fuel", fuel_runner),
        ("fuel picked", lambda x, n: fuel_runner(x, n, picked=True)),
        ("fuel codegen", lambda x, n: fuel_runner(x, n, codegen=True)),
        ("onnxruntime", ort_runner),
        ("torch eager", torch_runner),
    ):
        try:
            fn = make(x, args.ops)
            short = make(x, INFORMATIVE_OPS)
        except ImportError as e:
            print(f"{name:12s} skipped ({e.name} not installed; `make bench` installs it)")
            continue
        for got, want in ((fn(), ref), (short(), reference(x, INFORMATIVE_OPS))):
            if not np.allclose(got, want, rtol=1e-5, atol=1e-5):
                print(f"{name}: WRONG RESULT (max err {np.abs(got - want).max():.2e})")
                return 1
        fns[name] = fn
    results = measure(fns, args.runs)
    print(f"\n{args.ops} elementwise ops on f32[64], {args.runs} runs each, microseconds per op:")
    base = statistics.median(results["fuel"]) / args.ops
    ort = statistics.median(results["onnxruntime"]) / args.ops if "onnxruntime" in results else 0
    for name, t in results.items():
        q = statistics.quantiles(t, n=10)
        med = statistics.median(t) / args.ops
        print(f"  {name:12s} median {med:6.3f}  p10 {q[0] / args.ops:6.3f}  p90 "
              f"{q[-1] / args.ops:6.3f}   {name} / fuel = {med / base:5.2f}x"
              + (f"   / onnxruntime = {med / ort:5.2f}x" if ort else ""))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
