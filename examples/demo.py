"""`make demo`: build a Llama-style decoder block, optimize it, run both forms, check them.

1. build     GraphBuilder -> verified fuel IR (weights beside it)
2. optimize  `fuel-optimize`: fix dtypes -> the picker (candidates per op from the binding
             table, filtered, priced, placed) -> rewrite pathfinders -> stamp the winners ->
             bake variants -> copies; every decision is written into the IR
3. run       the executor runs the block before and after optimization (exactly the stamped
             kernels after), each checked against an independent float64 numpy reference
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from examples.decoder_block import BlockConfig, build_decoder_block, reference  # noqa: E402
from fuel_dialect.dispatch import ALTERNATIVES_ATTR  # noqa: E402
from passes.optimize import optimize_graph  # noqa: E402
from passes.picker_support import PickerOptions  # noqa: E402
from runtime.executor import Executor  # noqa: E402
from runtime.explain import explain_text  # noqa: E402
from runtime.module import FuelModule  # noqa: E402

ATOL, RTOL = 1e-4, 1e-4  # f32 kernels against a float64 reference over a 64-wide block


def median_us(ex: Executor, feed: dict, runs: int = 50) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        ex.run(feed, copy_outputs=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def without_alternatives(module: FuelModule) -> str:
    """The IR with the candidate lists dropped (they are for `fuel explain`): the decisions."""
    m = FuelModule.parse(str(module.op))
    for op in m.op.walk():
        op.attributes.pop(ALTERNATIVES_ATTR, None)
    return str(m.op)


def check(name: str, module: FuelModule, cfg: BlockConfig, x: np.ndarray) -> bool:
    ex = Executor(module)
    y = ex.run({"x": x})["y"]
    err = float(np.abs(y - reference(cfg, module.weights, x)).max())
    ok = err <= ATOL + RTOL * float(np.abs(y).max())
    us = median_us(ex, {"x": x})
    verdict = "OK" if ok else "MISMATCH"
    print(f"  {name:10s} {len(ex)} kernels, max |fuel - numpy f64| = {err:.2e} ({verdict}), "
          f"median {us:.0f} us/run")  # fmt: skip
    return ok


def main() -> int:
    cfg = BlockConfig()
    before = build_decoder_block(cfg, seed=0)
    print("== 1. build: a Llama-style decoder block in fuel IR ==")
    print(before)

    print("\n== 2. optimize: fuel-optimize (the picker explains its choices) ==")
    after = FuelModule.parse(str(before.op))
    after.weights = before.weights
    options = PickerOptions(judge="none")
    view = optimize_graph(after.op, options)
    text = explain_text(view.plans[0], "decoder_block", options.plan_options(), judge_label="none")
    lines = text.splitlines()
    cut = next(i for i, ln in enumerate(lines) if ln.startswith("#3 "))  # header + 3 decisions
    print("\n".join(lines[:cut]))
    print(f"   ... {len(view.plans[0].decisions) - 3} more decisions: `fuel explain` shows all")
    print(f"\nafter fuel-optimize ({view.branch_count()} branches left for the runtime):")
    print(without_alternatives(after))

    print("\n== 3. run on the CPU, before and after ==")
    x = np.random.default_rng(1).standard_normal((1, cfg.seq, cfg.hidden)).astype(np.float32)
    ok = check("before", before, cfg, x) & check("after", after, cfg, x)
    print(
        "\nTry the tools on the saved copy of this block:\n"
        "  .venv/bin/fuel explain examples/decoder_block.mlir --html block.html\n"
        "  .venv/bin/fuel-opt examples/decoder_block.mlir -p fuel-optimize\n"
        "  .venv/bin/fuel run examples/decoder_block.mlir --random-inputs --repeat 20"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
