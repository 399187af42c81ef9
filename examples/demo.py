"""`make demo`: build a Llama-style decoder block, print its IR, run it on the CPU, check it.

Steps: GraphBuilder -> fuel IR (verified) -> Executor (binding-table kernels, static memory
plan) -> compare with an independent float64 numpy reference.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from examples.decoder_block import BlockConfig, build_decoder_block, reference  # noqa: E402
from runtime.executor import Executor  # noqa: E402

ATOL, RTOL = 1e-4, 1e-4  # f32 kernels against a float64 reference over a 64-wide block


def main() -> int:
    cfg = BlockConfig()
    module = build_decoder_block(cfg, seed=0)
    print("== fuel IR of a Llama-style decoder block ==")
    print(module)
    ex = Executor(module)
    print(
        f"\n== compiled: {len(ex)} kernels; memory plan {ex.memory.buffers} buffers, "
        f"{ex.memory.planned_bytes / 1024:.1f} KiB (naive {ex.memory.naive_bytes / 1024:.1f} KiB)"
    )
    x = np.random.default_rng(1).standard_normal((1, cfg.seq, cfg.hidden)).astype(np.float32)
    y = ex.run({"x": x})["y"]
    ref = reference(cfg, module.weights, x)
    err = float(np.abs(y - ref).max())
    ok = np.allclose(y, ref, atol=ATOL, rtol=RTOL)
    times = []
    for _ in range(50):
        t0 = time.perf_counter()
        ex.run({"x": x}, copy_outputs=False)
        times.append(time.perf_counter() - t0)
    print(
        f"== ran on the CPU: y {list(y.shape)} {y.dtype}, max |fuel - numpy f64| = {err:.2e} "
        f"(atol {ATOL}, rtol {RTOL}): {'OK' if ok else 'MISMATCH'}"
    )
    print(f"== median {statistics.median(times) * 1e6:.0f} us per run over {len(times)} runs")
    print(
        "\nTry the tools on the saved copy:\n"
        "  .venv/bin/fuel-opt examples/decoder_block.mlir -p cse\n"
        "  .venv/bin/fuel run examples/decoder_block.mlir --random-inputs --repeat 20"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
