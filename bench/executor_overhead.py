"""Executor overhead: fuel's bundle executor vs onnxruntime and PyTorch eager (issue 5 §6).

Two workloads, each compiled by fuel to a kernel bundle (`write_bundle` with fuel-optimize on,
in a temp dir), loaded with `load_bundle(...).executor()` and timed interleaved with its peers:

* **chain**: dispatch_overhead's 200 elementwise ops on f32[64] (its graph and peer runners);
  work per op is negligible, so µs per op is the per-op cost. onnxruntime and torch run with
  1 thread (more only add overhead here). Target: fuel <= onnxruntime.
* **mlp**: x f32[32, 1024] -> 4096 -> 4096 -> 1024, bias + ReLU (or `--act gelu`, exact erf)
  between layers, no activation after the last. onnxruntime: CPU EP, all graph optimizations,
  2 intra-op threads; torch eager: 2 threads; fuel's numpy BLAS uses its default pool (all
  cores; printed; `OPENBLAS_NUM_THREADS=N` sets it). Each block of timed runs starts after an
  idle pause (`_timing.SETTLE_S`) so one runner's spinning worker threads do not slow the next.
  Target: fuel <= 1.1x onnxruntime.

Every runner's output is checked before timing against a float64 numpy reference:
max|got - ref| <= tol * max(1, max|ref|) with tol 1e-5 (chain) and 1e-4 (mlp); a mismatch
exits 1. `fuel` is the CPU backend's defaults (`codegen=auto`: generated C where a compiler
exists); `fuel codegen=none` (library kernels only) is a separate row when that default
generates C. Every runner hands back fresh output arrays.

    .venv/bin/python bench/executor_overhead.py [--quick] [--only chain|mlp] [--act gelu]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]

from _timing import (  # noqa: E402
    SETTLE_S,
    Runner,
    Stats,
    blas_threads,
    measure,
    mismatch,
    table,
    with_torch_threads,
)
from dispatch_overhead import assert_live, chain_module  # noqa: E402
from dispatch_overhead import ort_runner as chain_ort  # noqa: E402
from dispatch_overhead import reference as chain_reference  # noqa: E402
from dispatch_overhead import torch_runner as chain_torch  # noqa: E402

from runtime.module import FuelModule  # noqa: E402

MLP_DIMS = (1024, 4096, 4096, 1024)
MLP_BATCH = 32
NO_CODEGEN = {"codegen": "none"}  # the CPU backend option of the library-kernels-only variant
TOL = {"chain": 1e-5, "mlp": 1e-4}


# -- fuel: compile to a bundle, load, run ------------------------------------------------------


def codegen_default() -> bool:
    """True when the CPU backend's default generates C here (`codegen=auto` on a machine with
    a compiler): then a `fuel codegen=none` row shows what the generated kernels are worth."""
    from lowering.cpu.backend import make_backend

    return make_backend().parse_options("cpu", {}).generates_c


def fuel_variants() -> dict[str, dict[str, str]]:
    """Row name -> CPU backend options of every fuel variant worth timing here."""
    return {"fuel": {}, **({"fuel codegen=none": dict(NO_CODEGEN)} if codegen_default() else {})}


@dataclass
class Compiled:
    """A bundle's executor as a runner, with what building and loading it cost (s)."""

    run: Runner
    compile_s: float
    load_s: float
    ops: int


def compile_bundle(
    module: FuelModule,
    feeds: Mapping[str, np.ndarray],
    out_dir: Path,
    name: str,
    options: Mapping[str, str],
) -> Compiled:
    """`module` -> bundle `out_dir/name.bundle` (fuel-optimize on) -> its executor; the runner
    returns the outputs as a list in the executor's output order."""
    from lowering.bundle import load_bundle, write_bundle

    t0 = time.perf_counter()
    path = write_bundle(module, out_dir / f"{name}.bundle", options={"cpu": dict(options)})
    t1 = time.perf_counter()
    ex = load_bundle(path).executor()
    t2 = time.perf_counter()
    return Compiled(lambda: list(ex.run(feeds).values()), t1 - t0, t2 - t1, len(ex))


@dataclass
class Fuel:
    """The compiled fuel variants of one workload, and the ones that could not be built."""

    runners: dict[str, Compiled] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    def notes(self) -> list[str]:
        """One line per variant: compile and load seconds, schedule length, or why skipped."""
        built = [
            f"{n}: bundle compile {c.compile_s:.2f} s, load {c.load_s:.2f} s, {c.ops} "
            "schedule items"
            for n, c in self.runners.items()
        ]
        return built + [f"{n}: skipped ({why})" for n, why in self.skipped.items()]


def fuel_runners(
    module: FuelModule, feeds: Mapping[str, np.ndarray], out_dir: Path, tag: str
) -> Fuel:
    """Every fuel variant of `module` compiled and loaded; "fuel" itself must build, an
    optional variant that fails to build is reported as skipped."""
    from lowering.backend import BackendError
    from runtime.bundle import BundleError

    got = Fuel()
    for name, opts in fuel_variants().items():
        try:
            got.runners[name] = compile_bundle(
                module, feeds, out_dir, f"{tag}-{len(got.runners)}", opts
            )
        except (BackendError, BundleError) as e:
            if name == "fuel":
                raise
            got.skipped[name] = f"{type(e).__name__}: {e}".splitlines()[0][:120]
    return got


def ort_session(model: Any, feeds: Mapping[str, np.ndarray], threads: int) -> Runner:
    """onnxruntime (CPU EP, all graph optimizations, `threads` intra-op threads) on a
    ModelProto, bytes or path; the runner returns the outputs in graph order."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    src = model.SerializeToString() if hasattr(model, "SerializeToString") else str(model)
    sess = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    feed = dict(feeds)
    return lambda: sess.run(None, feed)


# -- the chain -----------------------------------------------------------------------------------


def chain_x(size: int = 64) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(size).astype(np.float32)


# -- the MLP -------------------------------------------------------------------------------------


def mlp_params(dims: Sequence[int] = MLP_DIMS, seed: int = 0) -> list[tuple[np.ndarray, ...]]:
    """(W [in, out], b [out]) per layer, f32, fixed seed."""
    rng = np.random.default_rng(seed)
    return [
        (
            (rng.standard_normal((i, o)) / math.sqrt(i)).astype(np.float32),
            (0.1 * rng.standard_normal(o)).astype(np.float32),
        )
        for i, o in zip(dims[:-1], dims[1:], strict=True)
    ]


def mlp_x(batch: int = MLP_BATCH, dim: int = MLP_DIMS[0]) -> np.ndarray:
    return np.random.default_rng(1).standard_normal((batch, dim)).astype(np.float32)


def _gelu64(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def mlp_reference(x: np.ndarray, params: Sequence[tuple[np.ndarray, ...]], act: str) -> np.ndarray:
    h = x.astype(np.float64)
    for i, (w, b) in enumerate(params):
        h = h @ w.astype(np.float64) + b
        if i < len(params) - 1:
            h = np.maximum(h, 0.0) if act == "relu" else _gelu64(h)
    return h


def mlp_onnx(params: Sequence[tuple[np.ndarray, ...]], act: str, batch: int = MLP_BATCH) -> Any:
    """The MLP as an ONNX model (MatMul + Add + Relu/Gelu; opset 20 for Gelu)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, prev = [], [], "x"
    for i, (w, b) in enumerate(params):
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"])]
        last = i == len(params) - 1
        nodes += [helper.make_node("Add", [f"m{i}", f"b{i}"], ["y" if last else f"a{i}"])]
        if not last:
            nodes += [helper.make_node(act.capitalize(), [f"a{i}"], [f"h{i}"])]
            prev = f"h{i}"
    dims = [params[0][0].shape[0], params[-1][0].shape[1]]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, dims[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, dims[1]])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    onnx.checker.check_model(model)
    return model


def mlp_torch(x: np.ndarray, params: Sequence[tuple[np.ndarray, ...]], act: str) -> Runner:
    import torch
    import torch.nn.functional as F

    t = torch.from_numpy(x)
    ps = [(torch.from_numpy(w.T.copy()), torch.from_numpy(b)) for w, b in params]
    fn = torch.relu if act == "relu" else F.gelu

    def run() -> np.ndarray:
        with torch.inference_mode():
            h = t
            for i, (w, b) in enumerate(ps):
                h = F.linear(h, w, b)
                if i < len(ps) - 1:
                    h = fn(h)
            return h.numpy()

    return run


def mlp_module(params: Sequence[tuple[np.ndarray, ...]], act: str) -> FuelModule:
    """The same ONNX model through fuel's ONNX importer (same weights as onnxruntime's)."""
    from frontends.onnx import import_onnx

    return import_onnx(mlp_onnx(params, act))


# -- a workload: build, check, time, report --------------------------------------------------


@dataclass
class Workload:
    """Runners of one benchmark case, checked against `want` before any timing."""

    name: str
    runners: dict[str, Runner]
    want: list[np.ndarray]
    tol: float
    notes: list[str] = field(default_factory=list)
    floor_us: float | None = None
    """A physical lower bound on one run (µs), where the bench knows one."""
    torch_threads: int = 0
    """The intra-op threads the torch runner is pinned to (0: not pinned yet)."""

    prechecked: list[str] = field(default_factory=list)
    """Mismatches found on a shorter, input-dependent variant of this workload."""

    def check(self) -> list[str]:
        """The mismatching runners, each with its error."""
        bad = list(self.prechecked)
        for name, fn in self.runners.items():
            why = mismatch(fn(), self.want, self.tol)
            if why is not None:
                bad.append(f"{self.name}: {name}: WRONG RESULT ({why})")
        return bad

    def pin_torch(self, threads: int) -> None:
        """Run the torch runner with `threads` intra-op threads from now on."""
        self.runners["torch eager"] = with_torch_threads(self.runners["torch eager"], threads)
        self.torch_threads = threads


def build_chain(n_ops: int, out_dir: Path, torch_threads: int | None = 1) -> Workload:
    """The chain; onnxruntime and torch with 1 thread (`torch_threads=None`: left unpinned)."""
    x = chain_x()
    fuel = fuel_runners(chain_module(x.shape, n_ops), {"x": x}, out_dir, "chain")
    runners: dict[str, Runner] = {n: c.run for n, c in fuel.runners.items()}
    runners["onnxruntime"] = chain_ort(x, n_ops)
    runners["torch eager"] = chain_torch(x, n_ops)
    notes = [*fuel.notes(), "onnxruntime: 1 intra-op thread (dispatch_overhead's runner)"]
    w = Workload(
        f"chain ({n_ops} elementwise ops, f32[{x.size}])",
        runners,
        [chain_reference(x, n_ops)],
        TOL["chain"],
        notes,
    )
    if torch_threads:
        w.pin_torch(torch_threads)
    assert_live(n_ops, x.size)
    return w


def build_mlp(act: str, out_dir: Path, torch_threads: int | None = 2) -> Workload:
    """The MLP; onnxruntime with 2 threads, torch with `torch_threads` (None: unpinned)."""
    params, x = mlp_params(), mlp_x()
    fuel = fuel_runners(mlp_module(params, act), {"x": x}, out_dir, "mlp")
    runners: dict[str, Runner] = {n: c.run for n, c in fuel.runners.items()}
    runners["onnxruntime"] = ort_session(mlp_onnx(params, act), {"x": x}, threads=2)
    runners["torch eager"] = mlp_torch(x, params, act)
    dims = " -> ".join(map(str, MLP_DIMS[1:]))
    w = Workload(
        f"mlp ({MLP_BATCH}x{MLP_DIMS[0]} -> {dims}, {act})",
        runners,
        [mlp_reference(x, params, act)],
        TOL["mlp"],
        fuel.notes(),
    )
    if torch_threads:
        w.pin_torch(torch_threads)
    return w


def report(title: str, stats: Mapping[str, Stats], unit: str, scale: float, target: float) -> bool:
    """Print the table (`scale` divides µs per run into `unit`); True when fuel's default
    (the `fuel` row) meets `fuel median <= target x onnxruntime median`. Other fuel variants
    are marked too, for information."""
    ort = stats["onnxruntime"].median
    rows, met = [], True
    for name, s in stats.items():
        ratio = s.median / ort
        ok = "" if not name.startswith("fuel") else ("met" if ratio <= target else "NOT MET")
        met &= name != "fuel" or ok != "NOT MET"
        rows.append(
            [
                name,
                f"{s.median / scale:.3f}",
                f"{s.p10 / scale:.3f}",
                f"{s.p90 / scale:.3f}",
                f"{ratio:.2f}x",
                ok,
            ]
        )
    print(f"\n{title}")
    print(
        table(
            rows,
            ["runner", f"median {unit}", "p10", "p90", "/ onnxruntime", f"target <= {target:g}x"],
        )
    )
    return met


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=200)
    ap.add_argument("--chain-runs", type=int, default=2000)
    ap.add_argument("--mlp-runs", type=int, default=200)
    ap.add_argument("--act", choices=("relu", "gelu"), default="relu")
    ap.add_argument("--only", choices=("chain", "mlp"))
    ap.add_argument("--quick", action="store_true", help="10x fewer runs (checks the script)")
    args = ap.parse_args(argv)
    div = 10 if args.quick else 1
    # name, workload, timed runs, (unit, µs per unit), target ratio to onnxruntime, settle
    cases: list[tuple[str, Callable[[Path], Workload], int, tuple[str, float], float, float]] = [
        (
            "chain",
            lambda d: build_chain(args.ops, d),
            args.chain_runs // div,
            ("µs/op", args.ops),
            1.0,
            0.0,
        ),  # single-threaded peers: nothing spins
        ("mlp", lambda d: build_mlp(args.act, d), args.mlp_runs // div, ("ms", 1e3), 1.1, SETTLE_S),
    ]
    failed, met = [], True
    print(f"fuel's numpy BLAS threads: {blas_threads()}")
    with tempfile.TemporaryDirectory(prefix="fuel-bench-") as tmp:
        for name, build, runs, (unit, scale), target, settle in cases:
            if args.only not in (None, name):
                continue
            w = build(Path(tmp))
            bad = w.check()
            if bad:
                print("\n".join(bad))
                failed += bad
                continue
            stats = measure(w.runners, runs, settle_s=settle)
            met &= report(f"{w.name}, {runs} runs each", stats, unit, scale, target)
            print("\n".join(f"  {note}" for note in w.notes))
    print("\nall targets met" if met else "\nsome targets NOT MET")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
