"""Layer-1 cost estimates: the shared `CostEstimate` record and the cost-function signature.

The per-op-family cost table and the ranker that consumes it build on these types.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CostEstimate:
    """Work of one kernel launch: floating-point operations, bytes moved, fixed overhead."""

    flops: float = 0.0
    bytes_moved: float = 0.0
    overhead_ns: float = 0.0

    def composite_ns(self, flops_per_ns: float, bytes_per_ns: float) -> float:
        """Roofline time: the slower of compute and memory, plus the launch overhead."""
        compute = self.flops / flops_per_ns if flops_per_ns > 0 else 0.0
        memory = self.bytes_moved / bytes_per_ns if bytes_per_ns > 0 else 0.0
        return max(compute, memory) + self.overhead_ns


CostFn = Callable[[Sequence[tuple[int, ...]], Sequence[str], Mapping[str, Any]], CostEstimate]
"""(operand shapes, operand dtypes, op params) -> CostEstimate; operands are inputs then outputs."""
