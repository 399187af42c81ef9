"""The small module the bad-input tests save, compile and break."""

from __future__ import annotations

from frontends.builder import GraphBuilder
from runtime.module import FuelModule


def small_module(seed: int = 0) -> FuelModule:
    """y = tanh(x @ w): x 2x4, w 4x3 (a weight, seeded)."""
    g = GraphBuilder(seed=seed)
    x = g.input("x", (2, 4))
    return g.build(outputs={"y": g.tanh(g.matmul(x, g.weight("w", (4, 3))))})
