"""The Triton backend: lower a fuel module for a CUDA target (`sm_80`, `sm_90`, ...).

Stages (`add_stages`), each a short step:

- `convert`: `convert-fuel-to-triton` on a copy of the module (fusion groups -> generated
  `fuel.triton_kernel`s + launches, other kernel ops -> `fuel.library_call`s), verified;
- `aot`: every generated kernel and every library kernel a call names, compiled with Triton for
  the target (`lowering.triton.aot`; no GPU needed);
- `artifacts`: one `KernelArtifact` per kernel: its source, `.ptx` and `.cubin` per launch, and
  meta (signature, constexprs, grid, num_warps, shared memory, target).

`run_lowered` runs a converted module on torch tensors (generated kernels through their
launcher, library calls through the Triton binding table): under `TRITON_INTERPRET=1` this is
how the lowering is checked without a GPU.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.traits import SymbolTable

from fuel_dialect.dialect import fuel_context
from fuel_dialect.dispatch import CopyOp
from fuel_dialect.dtypes import dtype_name, shape_of
from fuel_dialect.ops_movement import ConstantOp, ReshapeOp, WeightOp
from fuel_dialect.ops_triton import MAX_BLOCK, LibraryCallOp, TritonKernelOp, TritonLaunchOp
from lowering.backend import BackendError, KernelArtifact, Stage
from lowering.triton.codegen import GeneratedKernel, KernelPlan, cache_dir, load_kernel
from runtime.module import entry_function, io_names

_TARGET = re.compile(r"sm_(\d{2,3})a?")
BACKEND = "cuda"
OPTION_TYPES = {"num_warps": int, "block": int, "placed_only": bool}
"""Options `parse_options` accepts, with their types."""


@dataclass(frozen=True)
class TritonOptions:
    """Parsed Triton backend options (hashable)."""

    target: str
    num_warps: int = 4
    """Warps per program of the generated kernels (1, 2, 4, 8, 16 or 32)."""
    block: int = 1024
    """Elements per program of the generated kernels (a power of two)."""
    placed_only: bool = False
    """Convert only ops placed on a cuda device (see `convert-fuel-to-triton`)."""


def _parse_value(key: str, text: str) -> int | bool:
    kind = OPTION_TYPES[key]
    if kind is bool:
        if text.lower() not in ("true", "false", "1", "0"):
            raise BackendError(f"option {key}={text!r}: expected true or false")
        return text.lower() in ("true", "1")
    try:
        return int(text)
    except ValueError:
        raise BackendError(f"option {key}={text!r}: expected an integer") from None


class TritonBackend:
    """Lowers fuel modules to Triton kernels compiled for an NVIDIA `sm_XY` target."""

    name = "triton"

    def supports_target(self, target: str) -> bool:
        return _TARGET.fullmatch(target) is not None

    def parse_options(self, target: str, options: Mapping[str, str]) -> TritonOptions:
        if not self.supports_target(target):
            raise BackendError(f"the triton backend lowers for 'sm_XY' targets, not {target!r}")
        unknown = sorted(set(options) - set(OPTION_TYPES))
        if unknown:
            raise BackendError(
                f"unknown triton option(s) {', '.join(unknown)} (known: {', '.join(OPTION_TYPES)})"
            )
        values = {k: _parse_value(k, str(v)) for k, v in options.items()}
        opts = TritonOptions(target, **values)  # type: ignore[arg-type]
        if opts.num_warps not in (1, 2, 4, 8, 16, 32):
            raise BackendError(f"num_warps must be a power of two in 1..32, got {opts.num_warps}")
        if opts.block < 1 or opts.block > MAX_BLOCK or opts.block & (opts.block - 1):
            raise BackendError(f"block must be a power of two in 1..{MAX_BLOCK}, got {opts.block}")
        return opts

    def add_stages(self, stages: dict[str, Stage], options: TritonOptions) -> None:
        stages["convert"] = lambda module, md: convert_stage(module, md, options)
        stages["aot"] = lambda module, md: aot_stage(module, md, options)
        stages["artifacts"] = lambda compiled, md: artifacts_stage(compiled, md, options)


def make_backend() -> TritonBackend:
    return TritonBackend()


# -- stages -----------------------------------------------------------------------------------


def convert_stage(module: Any, metadata: dict[str, Any], options: TritonOptions) -> ModuleOp:
    """A converted, verified copy of `module` (a ModuleOp or a FuelModule)."""
    from passes.convert_fuel_to_triton import ConvertFuelToTritonPass

    op = getattr(module, "op", module)
    if not isinstance(op, ModuleOp):
        raise BackendError(f"the triton backend lowers a fuel module, got {type(module).__name__}")
    lowered = op.clone()
    ConvertFuelToTritonPass(block=options.block, placed_only=options.placed_only).apply(
        fuel_context(), lowered
    )
    lowered.verify()
    metadata["lowered"] = lowered
    return lowered


@dataclass(frozen=True)
class Compiled:
    """One kernel compiled for the target: its id, revision, source text and launches."""

    kernel_id: str
    kind: str  # "generated" | "library"
    revision: int
    source: str
    launches: tuple[Any, ...]  # lowering.triton.aot.AotKernel
    extra: Mapping[str, Any]


def aot_stage(module: ModuleOp, metadata: dict[str, Any], options: TritonOptions) -> list[Compiled]:
    """Compile every generated kernel and every distinct library call for the target, in one
    `lowering.triton.aot.compile_specs` batch (under the interpreter that is one child process,
    which imports the generated kernels from `cache_dir()`)."""
    from lowering.triton.aot import AotError, compile_specs, parse_target

    try:
        parse_target(options.target)
    except AotError as e:
        raise BackendError(str(e)) from None
    kernels = [_generated(KernelPlan.from_op(op), options) for op in module.ops
               if isinstance(op, TritonKernelOp)]  # fmt: skip
    kernels += _library_specs(module)
    specs = [s for k in kernels for s in k[2]]
    path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(cache_dir()), path) if p)
    try:
        launches = compile_specs(specs, options.target)
    except AotError as e:
        raise BackendError(str(e)) from None
    finally:
        _restore("PYTHONPATH", path)
    out, i = [], 0
    for kernel_id, kind, kspecs, source, extra in kernels:
        revision = extra.pop("revision")
        batch = tuple(launches[i : i + len(kspecs)])
        i += len(kspecs)
        out.append(Compiled(kernel_id, kind, revision, source, batch, extra))
    return out


def _restore(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


Kernel = tuple[str, str, tuple[Any, ...], str, dict[str, Any]]
"""(kernel id, kind, launch specs, source text, meta) of one kernel to compile."""


def _generated(plan: KernelPlan, options: TritonOptions) -> Kernel:
    from lowering.triton.spec import TritonKernelSpec

    spec = TritonKernelSpec(
        name=plan.name,
        fn=load_kernel(plan.name, plan.source),
        signature=plan.signature(),
        constexprs={"BLOCK": plan.block},
        grid=(f"cdiv(N, {plan.block})",),
        sizes={"N": plan.numel},
        num_warps=options.num_warps,
        num_stages=1,
    )
    revision = int.from_bytes(hashlib.sha256(plan.source.encode()).digest()[:8], "big")
    extra = {"space": list(plan.space), "block": plan.block, "revision": revision}
    return (plan.name, "generated", (spec,), plan.source, extra)


def _library_specs(module: ModuleOp) -> list[Kernel]:
    """(kernel id, launch specs, meta) per distinct library call (key, shapes, params)."""
    from lowering.triton.aot import kernel_specs
    from lowering.triton.registry import triton_kernel_table
    from runtime.binding_table import BindingTableError

    out, seen = [], set()
    for op in module.walk():
        if not isinstance(op, LibraryCallOp):
            continue
        name, dtypes, backend = op.key()
        shapes = [shape_of(v.type) for v in (*op.args, *op.res)]
        params = op.kernel_params()
        dims = "_".join("x".join(map(str, s)) or "scalar" for s in shapes)
        kernel_id = f"{name}_{'_'.join(dtypes)}_{dims}"
        if (kernel_id, repr(sorted(params.items()))) in seen:
            continue
        seen.add((kernel_id, repr(sorted(params.items()))))
        try:
            entry = triton_kernel_table().lookup(name, dtypes, backend)
        except BindingTableError as e:
            raise BackendError(f"library call '{name}': {e}") from None
        specs = kernel_specs(entry, shapes, dtypes, params)
        extra = {"key": [name, list(dtypes), backend], "params": _jsonable(params),
                 "revision": entry.revision_hash}  # fmt: skip
        source = "\n\n".join(dict.fromkeys(inspect.getsource(_py(s.fn)) for s in specs))
        out.append((kernel_id, "library", specs, source, extra))
    return out


def _py(fn: Any) -> Any:
    return getattr(fn, "fn", fn)  # a JITFunction / InterpretedFunction wraps the function


def _jsonable(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}


def artifacts_stage(
    compiled: list[Compiled], metadata: dict[str, Any], options: TritonOptions
) -> list[KernelArtifact]:
    """One `KernelArtifact` per compiled kernel, with its files and launch meta."""
    out = []
    for c in compiled:
        files = {f"{c.kernel_id}/{c.kernel_id}.py": c.source.encode()}
        launches = []
        for a in c.launches:
            files[f"{c.kernel_id}/{a.name}.ptx"] = a.ptx.encode()
            files[f"{c.kernel_id}/{a.name}.cubin"] = a.cubin
            launches.append(_launch_meta(a))
        meta = {"kind": c.kind, "target": options.target, **c.extra, "launches": launches}
        out.append(KernelArtifact(c.kernel_id, c.revision, BACKEND, files, meta))
    return out


def _launch_meta(a: Any) -> dict[str, Any]:
    return {
        "name": a.name,
        "kernel_name": a.kernel_name,
        "signature": dict(a.signature),
        "constexprs": dict(a.constexprs),
        "grid": list(a.launch_grid),
        "grid_expr": list(a.grid),
        "sizes": dict(a.sizes),
        "num_warps": a.num_warps,
        "num_stages": a.num_stages,
        "shared_bytes": a.shared_bytes,
        "scratch": dict(a.scratch),
    }


# -- running a converted module ----------------------------------------------------------------


def run_lowered(
    module: Any,
    inputs: Mapping[str, np.ndarray],
    weights: Mapping[str, np.ndarray] | None = None,
    table: Any = None,
    num_warps: int = 4,
) -> dict[str, np.ndarray]:
    """Run a converted module's entry function on torch tensors; numpy in, numpy out.

    Generated kernels run through `GeneratedKernel`, library calls through `table` (default:
    the Triton kernels' own table); anything else the lowering leaves (constants, weights,
    reshapes, host copies) is a view or a value. Raises BackendError naming the op it cannot run.
    """
    import torch

    op = getattr(module, "op", module)
    weights = weights if weights is not None else getattr(module, "weights", {})
    fn = entry_function(op)
    in_names, out_names = io_names(fn)
    missing = [n for n in in_names if n not in inputs]
    if missing:
        raise BackendError(f"missing input(s) {', '.join(missing)} (takes {', '.join(in_names)})")
    env: dict[Any, torch.Tensor] = {
        a: to_torch(inputs[n]) for a, n in zip(fn.body.block.args, in_names, strict=True)
    }
    kernels: dict[str, GeneratedKernel] = {}
    for inner in fn.body.block.ops:
        if isinstance(inner, func.ReturnOp):
            return {n: to_numpy(env[v]) for n, v in zip(out_names, inner.operands, strict=True)}
        args = [env[v] for v in inner.operands]
        outs = [torch.empty(shape_of(r.type), dtype=_torch_dtype(r.type)) for r in inner.results]
        if isinstance(inner, TritonLaunchOp):
            sym = inner.kernel.string_value()
            if sym not in kernels:
                target = SymbolTable.lookup_symbol(inner, inner.kernel)
                if not isinstance(target, TritonKernelOp):
                    raise BackendError(f"fuel.triton_launch: no fuel.triton_kernel @{sym}")
                kernels[sym] = GeneratedKernel(KernelPlan.from_op(target), num_warps)
            kernels[sym](args, outs, {})
        elif isinstance(inner, LibraryCallOp):
            _library(inner, table)(args, outs, inner.kernel_params())
        elif isinstance(inner, ConstantOp | WeightOp):
            outs = [_value(inner, weights)]
        elif isinstance(inner, ReshapeOp | CopyOp):
            outs = [args[0].reshape(shape_of(inner.results[0].type))]
        else:
            raise BackendError(f"run_lowered cannot run '{inner.name}' (convert the module first)")
        env.update(zip(inner.results, outs, strict=True))
    raise BackendError("the entry function has no func.return")


def _library(call: LibraryCallOp, table: Any) -> Any:
    from lowering.triton.registry import triton_kernel_table
    from runtime.binding_table import BindingTableError

    table = table if table is not None else _default_table(triton_kernel_table)
    try:
        return table.lookup(*call.key()).kernel
    except BindingTableError as e:
        raise BackendError(f"fuel.library_call: {e}") from None


_TABLE: list[Any] = []


def _default_table(make: Any) -> Any:
    if not _TABLE:
        _TABLE.append(make())
    return _TABLE[0]


def _value(op: ConstantOp | WeightOp, weights: Mapping[str, np.ndarray]) -> Any:
    from runtime.executor import constant_array

    if isinstance(op, ConstantOp):
        return to_torch(constant_array(op.value))
    name = op.sym_name.data
    if name not in weights:
        raise BackendError(f"weight '{name}' has no data")
    return to_torch(weights[name])


def _torch_dtype(t: Any) -> Any:
    from lowering.triton.spec import TORCH_DTYPES

    return TORCH_DTYPES[dtype_name(t)]


def to_torch(a: np.ndarray) -> Any:
    """A torch CPU tensor with `a`'s values (bf16 through its bits)."""
    import torch

    a = np.array(a, order="C", copy=True)  # keeps 0-d shapes (ascontiguousarray does not)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def to_numpy(t: Any) -> np.ndarray:
    """The numpy array of a torch CPU tensor (bf16 as ml_dtypes.bfloat16)."""
    import ml_dtypes
    import torch

    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()
