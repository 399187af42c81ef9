"""Fused kernels: `matmul_bias_act` and `gated_mlp`, one launch for a chain of primitives.

Each kernel runs its decomposition's numpy calls back to back with the intermediates kept in
the compute dtype (`runtime.dtypes.compute_dtype`: f32 for f16/bf16/f32, f64 for f64) and
rounds once into the output. The activation is evaluated by the very composite the standalone
kernel uses (silu, gelu in f64, relu exact), so for f32 every intermediate is rounded exactly
where the decomposition rounds it: the result equals the primitive chain's bit for bit on the
same BLAS build (checked in tests/passes/test_fuse_patterns.py). f16/bf16 skip the
decomposition's intermediate roundings to the narrow dtype, so they may differ from it by the
narrow dtype's rounding. Where torch is installed, f32 also has `torch-blas` siblings registered
first (`torch_blas._matmul_bias_act_torch`, `_gated_mlp_torch`): the same steps with the matmuls
on PyTorch's CPU BLAS, equal to the chain run on that BLAS.

Cost: the CPU parts' own cost functions summed (FLOPs and the numpy calls' overheads) with the
bytes of the boundary operands only: fusion never materialises an intermediate in the output
dtype or hands it back to the executor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from runtime import special
from runtime.binding_table import Kernel, KernelBindingTable
from runtime.cost import CostEstimate
from runtime.dtypes import compute_dtype
from runtime.kernels.cpu._common import (
    Arrays,
    F,
    Params,
    Shapes,
    add,
    half,
    measured,
    operand_bytes,
)
from runtime.kernels.cpu.activations import _activations
from runtime.kernels.cpu.linalg import matmul_cost
from runtime.kernels.cpu.torch_blas import (
    TORCH_BLAS,
    _gated_mlp_torch,
    _matmul_bias_act_torch,
    _mm,
    _torch,
)
from runtime.kernels.cpu.torch_blas import available as torch_available
from runtime.rounding import store


def _matmul_bias_act(t: str) -> Kernel:
    cdt = compute_dtype(t)
    acts = _activations(cdt)

    def matmul_bias_act(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        x, w, b = (np.ascontiguousarray(a, dtype=cdt) for a in inputs)
        out, act = outputs[0], params["act"]
        if out.dtype == cdt and out.flags.c_contiguous:  # work in the output: no temporary
            np.matmul(x, w, out=out)
            out += b
            if act != "none":
                acts[act](out, out)
            return
        y = np.matmul(x, w)
        y += b
        acts[act](y, out)

    return matmul_bias_act


def _gated_mlp(t: str) -> Kernel:
    cdt = compute_dtype(t)
    silu = _activations(cdt)["silu"]

    def gated_mlp(inputs: Arrays, outputs: Arrays, params: Params) -> None:
        x, wg, wu, wd = (np.ascontiguousarray(a, dtype=cdt) for a in inputs)
        g = np.matmul(x, wg)
        silu(g, g)  # the standalone silu kernel: evaluated wide chunk by chunk, rounded to cdt
        g *= np.matmul(x, wu)
        store(outputs[0], np.matmul(g, wd))

    return gated_mlp


def _part_costs(table: KernelBindingTable, t: str) -> dict[str, Callable[..., CostEstimate]]:
    """The standalone CPU kernels' cost functions the fused costs are composed from."""
    out: dict[str, Callable[..., CostEstimate]] = {"matmul": matmul_cost}
    for op in ("add", "mul", "relu", "silu", "gelu"):
        cost = table.lookup(op, (t,) * (3 if op in ("add", "mul") else 2), "cpu").cost
        if cost is None:
            raise ValueError(f"fused kernels need the cpu '{op}' kernel's cost registered first")
        out[op] = cost
    return out


_ACT_PART = {"none": None, "relu": "relu", "silu": "silu", "gelu": "gelu", "gelu_tanh": "gelu"}


def _composed(
    parts: list[tuple[str, Shapes, Params]], costs: dict, shapes: Shapes, dtypes: Sequence[str]
) -> CostEstimate:
    estimates = [costs[op](s, [dtypes[-1]] * len(s), p) for op, s, p in parts]
    return CostEstimate(
        sum(e.flops for e in estimates),
        operand_bytes(shapes, dtypes),
        sum(e.overhead_ns for e in estimates),
    )


def _mba_cost(costs: dict) -> Callable[..., CostEstimate]:
    def cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
        x, w, b, out = shapes
        act = _ACT_PART[params.get("act", "none")]
        approx = {"approximate": "tanh" if params.get("act") == "gelu_tanh" else "none"}
        parts = [("matmul", [x, w, out], {}), ("add", [out, b, out], {})]
        parts += [(act, [out, out], approx)] if act else []
        return _composed(parts, costs, shapes, dtypes)

    return cost


def _gated_cost(costs: dict) -> Callable[..., CostEstimate]:
    def cost(shapes: Shapes, dtypes: Sequence[str], params: Params) -> CostEstimate:
        x, wg, wu, wd, out = shapes
        h = (*x[:-1], wg[-1])
        parts = [
            ("matmul", [x, wg, h], {}),
            ("matmul", [x, wu, h], {}),
            ("silu", [h, h], {}),
            ("mul", [h, h, h], {}),
            ("matmul", [h, wd, out], {}),
        ]
        return _composed(parts, costs, shapes, dtypes)

    return cost


def register_fused(table: KernelBindingTable) -> None:
    """Register matmul_bias_act and gated_mlp for F; after the elementwise family, whose cost
    functions the fused costs are composed from."""
    acts = (special.silu, special.gelu_erf, special.gelu_tanh)
    for t in F:
        claim = measured(
            "matmul accumulation (cancellation): normwise relative error measured; f32 equals "
            "the chain",
            with_ulp=half(t),
        )
        costs = _part_costs(table, t)
        if t == "f32" and torch_available():  # vendor BLAS first: the tie-breaker (torch_blas)
            add(
                table,
                "matmul_bias_act",
                (t,) * 4,
                _matmul_bias_act_torch,
                claim,
                _mba_cost(costs),
                also=(_mm, _torch, *acts),
                source=TORCH_BLAS,
            )
            add(
                table,
                "gated_mlp",
                (t,) * 5,
                _gated_mlp_torch,
                claim,
                _gated_cost(costs),
                also=(_mm, _torch, special.silu),
                source=TORCH_BLAS,
            )
        add(
            table,
            "matmul_bias_act",
            (t,) * 4,
            _matmul_bias_act(t),
            claim,
            _mba_cost(costs),
            also=acts,
        )
        add(
            table,
            "gated_mlp",
            (t,) * 5,
            _gated_mlp(t),
            claim,
            _gated_cost(costs),
            also=(special.silu,),
        )
