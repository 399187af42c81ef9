"""The Triton backend: lower a fuel module for a CUDA target (`sm_80`, `sm_90`, ...).

Stages (`add_stages`), each a short step:

- `convert`: on a copy of the module, fused ops without a Triton kernel (`fuel.gated_mlp`,
  `fuel.matmul_bias_act`) become their decomposition; other kernel ops the Triton registry
  cannot serve (e.g. `fuel.transpose`) stay on the host, stamped with their CPU kernel; then
  `convert-fuel-to-triton` (fusion groups -> generated `fuel.triton_kernel`s + launches, other
  kernel ops -> `fuel.library_call`s), verified. The executor places the launches and calls on
  `cuda:0` and moves values across with `fuel.copy` (`runtime.lowered.place_lowered`);
- `aot`: every generated kernel and every library kernel a call names, compiled with Triton for
  the target (`lowering.triton.aot`; no GPU needed);
- `artifacts`: one `KernelArtifact` per kernel: its source, `.ptx` and `.cubin` per launch, and
  meta (signature, constexprs, grid, num_warps, shared memory, target); plus one CPU kernel
  artifact (id + revision, as the CPU backend writes them) per host kernel the IR keeps.

A converted module runs on `runtime.executor.Executor` like any other: under
`TRITON_INTERPRET=1`, on an emulated `cuda:0` (`runtime.devices.TorchDevice(emulate=True)`),
this is how the lowering is checked without a GPU.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Block, Operation, SSAValue

from fuel_dialect import ops_elementwise as ew
from fuel_dialect.attrs import DEVICE_ATTR, KERNEL_ATTR, KernelRefAttr
from fuel_dialect.base import KernelOp
from fuel_dialect.dialect import fuel_context
from fuel_dialect.dtypes import shape_of
from fuel_dialect.kernel_body import program_ops
from fuel_dialect.ops_fused import GatedMlpOp, MatmulBiasActOp
from fuel_dialect.ops_movement import ReshapeOp
from fuel_dialect.ops_nn import MatmulOp
from fuel_dialect.ops_triton import MAX_BLOCK, LibraryCallOp, TritonKernelOp
from lowering.backend import BackendError, KernelArtifact, Stage
from lowering.cpu.backend import artifacts_stage as cpu_artifacts
from lowering.fusion import FUSIBLE
from lowering.triton.convert_fuel_to_triton import ConvertFuelToTritonPass, eligible
from runtime.binding_table import BindingTableError, NoKernelForOp, digest64
from runtime.compiled import compile_node, library_entry, library_kernel_id
from runtime.kernels import global_bindings
from runtime.loaders.triton import KernelPlan, cache_dir, load_kernel
from runtime.module import FuelModule

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
    op = getattr(module, "op", module)
    if not isinstance(op, ModuleOp):
        raise BackendError(f"the triton backend lowers a fuel module, got {type(module).__name__}")
    lowered = op.clone()
    for f in [f for f in lowered.ops if isinstance(f, func.FuncOp)]:
        decompose_fused(f.body.block, options.placed_only)
        keep_on_host(f.body.block, options.placed_only)
    ConvertFuelToTritonPass(block=options.block, placed_only=options.placed_only).apply(
        fuel_context(), lowered
    )
    _stamp_host_ops(lowered)
    lowered.verify()
    metadata["lowered"] = lowered
    return lowered


def _decomposition(op: Operation) -> list[Operation] | None:
    """The primitive ops computing a fused op (`passes.fused` matches exactly these chains),
    the last one producing its result; None for an op that is not fused."""

    def mk(cls: type[Operation], args: list[SSAValue], like: SSAValue, **props: Any) -> Operation:
        return cls.create(operands=args, result_types=[like.type], properties=props)

    out = op.results[0] if op.results else None
    if isinstance(op, MatmulBiasActOp):
        mm = mk(MatmulOp, [op.input, op.weight], op.result)
        chain = [mm, mk(ew.AddOp, [mm.results[0], op.bias], op.result)]
        act = _ACTIVATIONS[op.act.data]
        if act is not None:
            chain.append(mk(act[0], [chain[-1].results[0]], op.result, **act[1]()))
        return chain
    if isinstance(op, GatedMlpOp):
        assert out is not None
        x, wg, wu = op.input, op.gate, op.up
        rows = shape_of(x.type)[:-1]
        hidden = TensorType(out.type.element_type, [*rows, shape_of(wg.type)[-1]])  # type: ignore[attr-defined]
        g = MatmulOp.create(operands=[x, wg], result_types=[hidden])
        u = MatmulOp.create(operands=[x, wu], result_types=[hidden])
        s = mk(ew.SiluOp, [g.results[0]], g.results[0])
        m = mk(ew.MulOp, [s.results[0], u.results[0]], g.results[0])
        return [g, u, s, m, mk(MatmulOp, [m.results[0], op.down], out)]
    return None


def _act_table() -> dict[str, tuple[type[Operation], Any] | None]:
    from xdsl.dialects.builtin import UnitAttr

    return {
        "none": None,
        "relu": (ew.ReluOp, dict),
        "silu": (ew.SiluOp, dict),
        "gelu": (ew.GeluOp, dict),
        "gelu_tanh": (ew.GeluOp, lambda: {"tanh": UnitAttr()}),
    }


_ACTIVATIONS = _act_table()
"""`fuel.matmul_bias_act` act -> (activation op class, its properties) or None (identity)."""


def decompose_fused(block: Block, placed_only: bool) -> None:
    """Replace each fused op the Triton backend would convert by its decomposition (the
    registry has no fused kernels; the decomposition's matmuls become library calls and its
    elementwise tail a generated kernel). The op's `#fuel.device` placement carries over."""
    for op in list(block.ops):
        if not eligible(op, placed_only):
            continue
        chain = _decomposition(op)
        if chain is None:
            continue
        keep = {k: v for k, v in op.attributes.items() if k == DEVICE_ATTR}
        for new in chain:
            new.attributes.update(keep)
            block.insert_op_before(new, op)
        op.results[0].replace_all_uses_with(chain[-1].results[0])
        block.erase_op(op)


def keep_on_host(block: Block, placed_only: bool) -> None:
    """Stamp the host CPU kernel on each kernel op `convert-fuel-to-triton` would turn into a
    library call the Triton registry cannot serve, so the op stays a host op (the executor
    copies its operands over). BackendError naming the op if it is placed on a cuda device or
    the CPU has no kernel either."""
    # lazy: imports torch and triton
    from runtime.kernels.triton.registry import triton_kernel_table

    table = triton_kernel_table()
    for op in block.ops:
        if not isinstance(op, KernelOp) or isinstance(op, (*FUSIBLE, ReshapeOp)):
            continue
        if eligible(op, placed_only) and KERNEL_ATTR not in op.attributes:
            if table.backend_supports(op.KERNEL_OP, op.kernel_dtypes(), BACKEND):
                continue
            if DEVICE_ATTR in op.attributes:
                dtypes = ", ".join(op.kernel_dtypes())
                raise BackendError(
                    f"'{op.name}' is placed on {op.attributes[DEVICE_ATTR]} but "
                    f"the Triton registry has no kernel for {op.KERNEL_OP} "
                    f"[{dtypes}]"
                )
            _stamp_cpu(op)


def _stamp_cpu(op: Operation) -> None:
    assert isinstance(op, KernelOp)
    try:
        node = compile_node(op.KERNEL_OP, op.kernel_dtypes(), "cpu", {}, global_bindings())
    except NoKernelForOp as e:
        raise BackendError(f"'{op.name}' has neither a Triton nor a CPU kernel: {e}") from None
    op.attributes[KERNEL_ATTR] = KernelRefAttr.get(
        node.op, node.dtypes, "cpu", node.entry.kernel_source, node.entry.revision_hash
    )


def _stamp_host_ops(module: ModuleOp) -> None:
    """Every kernel op left after conversion (host ops, branch arms) runs its stamped CPU
    kernel; unstamped ones get the default one, so the bundle declares it."""
    for op in program_ops(module):
        if isinstance(op, KernelOp) and KERNEL_ATTR not in op.attributes:
            _stamp_cpu(op)


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
    from lowering.triton.aot import AotError, compile_specs, parse_target  # lazy: imports torch

    try:
        parse_target(options.target)
    except AotError as e:
        raise BackendError(str(e)) from None
    kernels = [
        _generated(KernelPlan.from_op(op), options)
        for op in module.ops
        if isinstance(op, TritonKernelOp)
    ]
    kernels += _library_specs(module)
    specs = [s for k in kernels for s in k[2]]
    try:
        launches = compile_specs(specs, options.target, python_path=(str(cache_dir()),))
    except AotError as e:
        raise BackendError(str(e)) from None
    out, i = [], 0
    for kernel_id, kind, kspecs, source, extra in kernels:
        revision = extra.pop("revision")
        batch = tuple(launches[i : i + len(kspecs)])
        i += len(kspecs)
        out.append(Compiled(kernel_id, kind, revision, source, batch, extra))
    return out


Kernel = tuple[str, str, tuple[Any, ...], str, dict[str, Any]]
"""(kernel id, kind, launch specs, source text, meta) of one kernel to compile."""


def _generated(plan: KernelPlan, options: TritonOptions) -> Kernel:
    from runtime.kernels.triton.spec import TritonKernelSpec  # lazy: imports torch

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
    revision = digest64(plan.source)
    extra = {"space": list(plan.space), "block": plan.block, "revision": revision}
    return (plan.name, "generated", (spec,), plan.source, extra)


def _library_specs(module: ModuleOp) -> list[Kernel]:
    """(kernel id, launch specs, meta) per distinct library call (key, shapes, params)."""
    from lowering.triton.aot import kernel_specs  # lazy: imports torch

    # lazy: imports torch and triton
    from runtime.kernels.triton.registry import triton_kernel_table

    out, seen = [], set()
    for op in module.walk():
        if not isinstance(op, LibraryCallOp):
            continue
        name, dtypes, backend = op.key()
        shapes = [shape_of(v.type) for v in (*op.args, *op.res)]
        params = op.kernel_params()
        kernel_id = library_kernel_id(op)
        if (kernel_id, repr(sorted(params.items()))) in seen:
            continue
        seen.add((kernel_id, repr(sorted(params.items()))))
        try:
            entry = library_entry(op, triton_kernel_table())
        except BindingTableError as e:
            raise BackendError(f"library call '{name}': {e}") from None
        specs = kernel_specs(entry, shapes, dtypes, params)
        extra = {
            "key": [name, list(dtypes), backend],
            "params": _jsonable(params),
            "source": entry.kernel_source,
            "revision": entry.revision_hash,
        }
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
    if isinstance(metadata.get("lowered"), ModuleOp):  # the host kernels the IR keeps
        out += cpu_artifacts(FuelModule(metadata["lowered"], {}), {})
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
        "specialization": {k: list(v) for k, v in a.specialization.items()},  # a.accepts(args)
    }
