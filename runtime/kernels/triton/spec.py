"""What one Triton launch is, as data: `TritonKernelSpec`, and the `TritonKernel` protocol.

A registered Triton kernel is a `TritonKernel`: a fuel `Kernel` (`kernel(inputs, outputs,
params)` on torch tensors) that can also say, for concrete operand shapes, dtypes and op params,
which `@triton.jit` launches it makes (`launches(...)`), each as a `TritonKernelSpec`: the jit
function, its Triton signature, constexprs, num_warps/num_stages and the launch grid. The
in-process call and AOT compilation (`lowering.triton.aot`) read the same specs, so a compiled
cubin is launched exactly as the interpreter ran it.

Grids are data: a tuple of expressions (one per axis) over the spec's named `sizes`, e.g.
`("cdiv(M, 64) * cdiv(N, 64)", "B")`, evaluated by a tiny arithmetic evaluator (names, integer
literals, + - * // %, `cdiv`, `max`, `min`), so a bundle writer or codegen can re-evaluate them
for other sizes or print them into C.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from runtime.binding_table import digest64
from runtime.dtypes import TORCH_NAMES, torch_dtype

Shapes = Sequence[tuple[int, ...]]
Params = Mapping[str, Any]

TORCH_DTYPES: Mapping[str, torch.dtype] = {name: torch_dtype(name) for name in TORCH_NAMES}
"""fuel dtype name -> torch dtype (`runtime.dtypes.TORCH_NAMES`)."""

TRITON_PTR: Mapping[str, str] = {
    "f32": "*fp32",
    "f16": "*fp16",
    "bf16": "*bf16",
    "f64": "*fp64",
    "i64": "*i64",
    "i32": "*i32",
    "i8": "*i8",
    "u8": "*u8",
    "i1": "*i1",
}
"""fuel dtype name -> Triton pointer type in a signature."""

FLOAT_DTYPES = ("f32", "f16", "bf16")
"""The float dtypes every Triton float kernel is registered for."""


class TritonSpecError(ValueError):
    """A spec, shape or grid expression that fuel's Triton kernels cannot handle."""


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(n: int) -> int:
    """The smallest power of two >= max(n, 1) (tl.arange needs power-of-two extents)."""
    return 1 << max(int(n) - 1, 0).bit_length()


@dataclass(frozen=True)
class TritonKernelSpec:
    """One Triton launch: everything AOT compilation and a launcher need, as plain data.

    `signature` maps every argument of `fn` (in order) to a Triton type (`"*fp32"`, `"i32"`,
    `"i64"`, `"fp32"`, `"constexpr"`); `constexprs` gives the constexpr values; `grid` holds one
    expression per grid axis over `sizes` (see the module docstring). An integer argument named
    like a size is launched with exactly that value: AOT compilation specialises on it
    (`lowering.triton.aot.specialization_of`).
    """

    name: str
    fn: Any
    signature: Mapping[str, str]
    constexprs: Mapping[str, int | float | bool]
    grid: tuple[str, ...]
    sizes: Mapping[str, int] = field(default_factory=dict)
    num_warps: int = 4
    num_stages: int = 2

    def launch_grid(self, sizes: Mapping[str, int] | None = None) -> tuple[int, ...]:
        """The grid evaluated for `sizes` (default: the spec's own)."""
        env = dict(self.sizes if sizes is None else sizes)
        return tuple(max(1, eval_grid_expr(e, env)) for e in self.grid)

    def launch(self, *args: Any) -> None:
        """Run `fn` on positional runtime `args` (the non-constexpr signature entries)."""
        self.fn[self.launch_grid()](
            *args, **self.constexprs, num_warps=self.num_warps, num_stages=self.num_stages
        )


_GRID_OPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}
_GRID_FNS = {"cdiv": cdiv, "max": max, "min": min}


def eval_grid_expr(expr: str, sizes: Mapping[str, int]) -> int:
    """Evaluate a grid expression over named integer sizes (no Python `eval`)."""

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in sizes:
                raise TritonSpecError(f"grid expression '{expr}' names unknown size '{node.id}'")
            return int(sizes[node.id])
        if isinstance(node, ast.BinOp) and type(node.op) in _GRID_OPS:
            return _GRID_OPS[type(node.op)](ev(node.left), ev(node.right))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _GRID_FNS
        ):
            return _GRID_FNS[node.func.id](*(ev(a) for a in node.args))
        raise TritonSpecError(f"unsupported construct in grid expression '{expr}'")

    return ev(ast.parse(expr, mode="eval").body)


def signature(fn: Any, types: Mapping[str, str]) -> dict[str, str]:
    """The full Triton signature of `fn`: `types` for runtime args, "constexpr" for the rest.

    Raises `TritonSpecError` when `types` misses a runtime argument or names an unknown one.
    """
    params = inspect.signature(getattr(fn, "fn", fn)).parameters.values()
    names = [p.name for p in params]
    const = {p.name for p in params if "constexpr" in str(p.annotation)}
    unknown = set(types) - set(names)
    missing = [n for n in names if n not in const and n not in types]
    if unknown or missing:
        raise TritonSpecError(
            f"{fn.__name__}: signature unknown {sorted(unknown)}, missing {missing}"
        )
    return {n: ("constexpr" if n in const else types[n]) for n in names}


class TritonKernel(Protocol):
    """A fuel Kernel over torch tensors that also describes its launches for AOT."""

    family: str

    def __call__(
        self, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor], params: Params
    ) -> None: ...

    def launches(
        self, shapes: Shapes, dtypes: Sequence[str], params: Params
    ) -> tuple[TritonKernelSpec, ...]: ...


def source_revision(*objs: Any) -> int:
    """A 64-bit revision over the source text of `objs` (jit functions, classes, functions)."""
    parts = [b"triton"]
    for obj in objs:
        target = getattr(obj, "fn", obj)  # a JITFunction wraps the Python function as .fn
        try:
            parts.append(inspect.getsource(target).encode())
        except (OSError, TypeError):
            parts.append(repr(target).encode())
    return digest64(b"".join(parts))


def out_target(out: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor to write (the output itself when contiguous, else a scratch copy)."""
    return (
        out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    )


def finish(out: torch.Tensor, written: torch.Tensor) -> None:
    """Copy a scratch result back into a non-contiguous destination."""
    if written is not out:
        out.copy_(written)
