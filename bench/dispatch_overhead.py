"""Dispatch overhead: a chain of 200 tiny elementwise ops on a 64-element f32 vector, live data.

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
from runtime.module import FuelModule  # noqa: E402

CYCLE = ("add_x", "mul", "tanh", "add", "mul", "sub")
"""The chain's ops, in a cycle. `add_x` adds the chain's input back and the binary ops take a
constant vector of their own (one per op, as an exporter writes them), so every op's operands
depend on the input and the output does in every element: no op can be folded away, and a
runner that skipped work would give a wrong result. (The chain used to map every element to
one constant after its ninth op, which let a fused kernel look faster than it is.)"""

Step = tuple[str, "np.ndarray | None"]


def chain_steps(n_ops: int, size: int, seed: int = 1) -> list[Step]:
    """(op, constant vector or None) for each op of the chain on f32[size]."""
    rng = np.random.default_rng(seed)
    steps: list[Step] = []
    for i in range(n_ops):
        op = CYCLE[i % len(CYCLE)]
        lo, hi = (0.5, 1.5) if op == "mul" else (-0.5, 0.5)
        c = rng.uniform(lo, hi, size).astype(np.float32) if op in ("mul", "add", "sub") else None
        steps.append((op, c))
    return steps


def reference(x: np.ndarray, n_ops: int) -> np.ndarray:
    y, x64 = x.astype(np.float64), x.astype(np.float64)
    fns = {"add": np.add, "mul": np.multiply, "sub": np.subtract}
    for op, c in chain_steps(n_ops, x.size):
        y = np.tanh(y) if op == "tanh" else y + x64 if op == "add_x" else fns[op](y, c)
    return y


def assert_live(n_ops: int, size: int = 64) -> None:
    """The chain's output changes in every element when its input does."""
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal(size).astype(np.float32) for _ in range(2))
    assert (reference(a, n_ops) != reference(b, n_ops)).all(), "the chain's output is constant"


def chain_module(shape: tuple[int, ...], n_ops: int) -> FuelModule:
    """The chain as a fuel module: input "x", output "y"."""
    g = GraphBuilder()
    x = v = g.input("x", shape)
    for op, c in chain_steps(n_ops, int(np.prod(shape))):
        if op == "add_x":
            v = g.add(v, x)
        else:
            v = g.tanh(v) if c is None else getattr(g, op)(v, g.constant(c))
    return g.build(outputs={"y": v})


def fuel_runner(
    x: np.ndarray,
    n_ops: int,
    picked: bool = False,
    codegen: bool = False,
    compiled: bool = False,
) -> Callable[[], np.ndarray]:
    """The chain through fuel's executor; `picked` runs the picker (fuel-select) first;
    `codegen` lowers it with `convert-fuel-to-c` (one generated C kernel for the chain);
    `compiled` is what `fuel compile` / `fuel run` do with default options."""
    module = chain_module(x.shape, n_ops)
    if compiled:
        from lowering.bundle import compile_module

        module, _ = compile_module(module)
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

    names = {"add": "Add", "add_x": "Add", "mul": "Mul", "sub": "Sub", "tanh": "Tanh"}
    inits, nodes, prev = [], [], "x"
    for i, (op, c) in enumerate(chain_steps(n_ops, x.size)):
        ins = [prev, "x"] if op == "add_x" else [prev]
        if c is not None:
            inits.append(helper.make_tensor(f"c{i}", TensorProto.FLOAT, [c.size], c.tolist()))
            ins.append(f"c{i}")
        out = "y" if i == n_ops - 1 else f"t{i}"
        nodes.append(helper.make_node(names[op], ins, [out]))
        prev = out
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x.shape))],
        inits,
    )
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
    steps = [
        (op, None if c is None else torch.from_numpy(c)) for op, c in chain_steps(n_ops, x.size)
    ]

    def run() -> np.ndarray:
        with torch.inference_mode():
            v = t
            for op, c in steps:
                v = torch.tanh(v) if op == "tanh" else v + t if op == "add_x" else fns[op](v, c)
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
    assert_live(args.ops)
    ref = reference(x, args.ops)
    fns: dict[str, Callable[[], np.ndarray]] = {}
    for name, make in (
        ("fuel", fuel_runner),
        ("fuel picked", lambda x, n: fuel_runner(x, n, picked=True)),
        ("fuel codegen", lambda x, n: fuel_runner(x, n, codegen=True)),
        ("fuel compile", lambda x, n: fuel_runner(x, n, compiled=True)),
        ("onnxruntime", ort_runner),
        ("torch eager", torch_runner),
    ):
        try:
            fn = make(x, args.ops)
        except ImportError as e:
            print(f"{name:12s} skipped ({e.name} not installed; `make bench` installs it)")
            continue
        got = fn()
        if not np.allclose(got, ref, rtol=1e-4, atol=1e-5):
            print(f"{name}: WRONG RESULT (max err {np.abs(got - ref).max():.2e})")
            return 1
        fns[name] = fn
    results = measure(fns, args.runs)
    print(f"\n{args.ops} elementwise ops on f32[64], {args.runs} runs each, microseconds per op:")
    base = statistics.median(results["fuel"]) / args.ops
    ort = statistics.median(results["onnxruntime"]) / args.ops if "onnxruntime" in results else 0
    for name, t in results.items():
        q = statistics.quantiles(t, n=10)
        med = statistics.median(t) / args.ops
        print(
            f"  {name:12s} median {med:6.3f}  p10 {q[0] / args.ops:6.3f}  p90 "
            f"{q[-1] / args.ops:6.3f}   {name} / fuel = {med / base:5.2f}x"
            + (f"   / onnxruntime = {med / ort:5.2f}x" if ort else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
