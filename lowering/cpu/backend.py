"""The CPU backend: target "cpu", kernels from the binding table's numpy rows.

    [passes ->] optimize -> stamp [-> codegen] -> artifacts

`passes` runs the pipeline of the `passes` option (a user's passes, `fuel.passes` plug-ins
included: docs/passes.md) before anything of fuel's; `optimize` runs `fuel-optimize` (unless
the module is already optimized or `optimize=0`); `stamp` makes sure every kernel op carries
its `#fuel.kernel` stamp (key, source, revision), stamping the executor's default sibling
where the picker left none; `artifacts` yields one `KernelArtifact` per distinct chosen CPU
kernel. Library artifacts carry no code files: the runtime resolves each kernel by id +
revision from the binding table and refuses a different revision. With `codegen=c`, the
`codegen` stage runs `convert-fuel-to-c` (host fusion groups become generated C kernels,
compiled now so a broken compiler fails the build) and each generated kernel is an artifact
carrying its C source and compiled .so (`c/<name>.c`, `c/<name>.so`; meta `kind: c` and the
machine it was built for).

Options (`fuel compile --option KEY=VALUE`, all strings):
| key | values | meaning |
|---|---|---|
| optimize | 1 (default), 0 | run `fuel-optimize` before stamping |
| precision | e.g. `bit_stable,ulp=2` | the picker's precision floor |
| topology | TOML/JSON path | plan for a declared topology (default: detect) |
| judge | path, `none` | the Judge report the picker reads (default: `none`: reproducible) |
| codegen | auto (default), c, none | generate C for host fusion groups (needs `$CC` or `cc`) |
| passes | a `fuel-opt -p` pipeline | run first, e.g. `cse,my-pass{flag=true}` (default: none) |
| hint | e.g. `seq=128,batch=2` | sizes the picker prices dim symbols at (`fuel compile --hint`) |

`codegen=c` is the fast path for dispatch-bound graphs (one C call per fused group instead of
one numpy call per op: a 200-op elementwise chain runs ~20x faster). `auto`, the default, is
`c` where fuel's native kernels are enabled (`runtime.native.enabled`: a C compiler exists
and FUEL_NATIVE is not 0), else `none`: the same switch decides whether the picker may choose
the native kernels (GEMV and packed GEMM products, gated MLP, norms, rope, attention). A
bundle that uses either carries the machine code it needs (the native library's source and
build: `native_artifact`; each generated kernel's source and .so), so it runs on a machine
without a compiler. A bundle holds no machine code only where neither is used (FUEL_NATIVE=0,
or `codegen=none` and no native kernel picked): then its bytes do not depend on the compiler
found.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import PassPipeline
from xdsl.utils.exceptions import ArgSpecParseError

from fuel_dialect.attrs import KERNEL_ATTR, KernelRefAttr
from fuel_dialect.base import KernelOp
from fuel_dialect.dialect import fuel_context
from fuel_dialect.ops_cpu import CKernelOp
from lowering.backend import BackendError, KernelArtifact, Stage
from lowering.cpu.convert_fuel_to_c import ConvertFuelToCPass
from passes import get_all_passes
from passes.fused.patterns import known_weights
from passes.optimize import optimize_graph
from passes.picker.ranker import PrecisionRequirement
from passes.picker.support import PickerOptions, parse_hints
from runtime import native
from runtime.binding_table import NoKernelForOp
from runtime.compiled import compile_node, kernel_id, kernel_ops
from runtime.kernels import global_bindings
from runtime.loaders.c import CFLAGS, CodegenError, library_path, source_key
from runtime.module import FuelModule

CPU_TARGET = "cpu"
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass(frozen=True)
class CpuOptions:
    """The CPU backend's parsed options (frozen, hashable)."""

    optimize: bool = True
    """Run `fuel-optimize` before stamping (an already optimized module is left as is)."""
    precision: str = ""
    """Precision floor for the picker (`bit_stable,ulp=2`; empty: unconstrained)."""
    topology: str = ""
    """Declared topology file; empty: detect this machine."""
    judge: str = "none"
    """Judge report path, or `none` (the default keeps builds reproducible)."""
    codegen: str = "auto"
    """`c`: lower host fusion groups to generated C kernels; `none`: library kernels only;
    `auto`: `c` where fuel's native kernels are enabled (`runtime.native.enabled`: a C
    compiler exists and FUEL_NATIVE is not 0), else `none`."""
    passes: str = ""
    """A pass pipeline in `fuel-opt -p` syntax run on the module before `optimize`: any pass
    `fuel-opt` knows (fuel's, xDSL's, an installed package's `fuel.passes` entry point)."""
    hint: str = ""
    """Sizes the picker prices dim symbols at, `seq=128,batch=2` (`PickerOptions.hint`)."""

    @property
    def generates_c(self) -> bool:
        """Whether the codegen stage runs (`auto` resolved on this machine)."""
        if self.codegen == "auto":
            return native.enabled()
        return self.codegen == "c"


def is_optimized(module: FuelModule) -> bool:
    """True when every top-level kernel op already carries the picker's stamp."""
    for f in module.op.ops:
        if isinstance(f, func.FuncOp):
            for op in f.body.block.ops:
                if isinstance(op, KernelOp) and KERNEL_ATTR not in op.attributes:
                    return False
    return True


def _bool(key: str, value: str) -> bool:
    v = value.strip().lower()
    if v in _TRUE or v in _FALSE:
        return v in _TRUE
    raise BackendError(f"cpu backend option {key}={value!r}: expected 0 or 1")


def _precision(value: str) -> str:
    try:
        PrecisionRequirement.parse(value)
    except ValueError as e:
        raise BackendError(f"cpu backend option precision={value!r}: {e}") from None
    return value


def _topology(value: str) -> str:
    if value and not Path(value).is_file():
        raise BackendError(f"cpu backend option topology={value!r}: no such file")
    return value


def _passes(value: str) -> str:
    """`value` if it parses as a pipeline of known passes with valid options."""
    if value:
        try:
            PassPipeline.parse_spec(get_all_passes(), value)
        except (ValueError, ArgSpecParseError, ImportError, AttributeError) as e:
            # unknown pass or option (ValueError), bad syntax, a plug-in that does not load
            first = str(e).strip().splitlines()[0 if isinstance(e, ValueError) else -1]
            raise BackendError(f"cpu backend option passes={value!r}: {first.strip()}") from None
    return value


def _hint(value: str) -> str:
    try:
        parse_hints(value)
    except ValueError as e:
        raise BackendError(f"cpu backend option hint={value!r}: {e}") from None
    return value


def _codegen(value: str) -> str:
    if value not in ("auto", "c", "none"):
        raise BackendError(f"cpu backend option codegen={value!r}: expected auto, c or none")
    return value


_PARSERS = {
    "optimize": lambda v: _bool("optimize", v),
    "precision": _precision,
    "topology": _topology,
    "judge": lambda v: v,
    "codegen": _codegen,
    "passes": _passes,
    "hint": _hint,
}  # option key -> validating converter


@dataclass(frozen=True)
class CpuBackend:
    """The `Backend` for target "cpu" (see the module doc)."""

    name: str = "cpu"

    def supports_target(self, target: str) -> bool:
        return target == CPU_TARGET

    def parse_options(self, target: str, options: Mapping[str, str]) -> CpuOptions:
        if not self.supports_target(target):
            raise BackendError(f"the cpu backend does not lower for target {target!r}")
        unknown = sorted(set(options) - set(_PARSERS))
        if unknown:
            raise BackendError(
                f"unknown cpu backend option(s) {', '.join(unknown)} (known: {', '.join(_PARSERS)})"
            )
        return CpuOptions(**{k: _PARSERS[k](str(v)) for k, v in options.items()})

    def add_stages(self, stages: dict[str, Stage], options: Any) -> None:
        assert isinstance(options, CpuOptions)
        if options.passes:
            stages["passes"] = lambda m, md: passes_stage(m, md, options.passes)
        stages["optimize"] = lambda m, md: optimize_stage(m, md, options)
        stages["stamp"] = stamp_stage
        if options.generates_c:
            stages["codegen"] = lambda m, md: codegen_stage(m, md, options.precision)
        stages["artifacts"] = artifacts_stage


def make_backend() -> CpuBackend:
    """The factory `lowering.backend` registers for "cpu"."""
    return CpuBackend()


def passes_stage(module: FuelModule, md: dict[str, Any], spec: str) -> FuelModule:
    """The pipeline `spec` applied to the module in place, verified after each pass."""
    from xdsl.utils.exceptions import DiagnosticException

    def verify(_prev: Any, op: ModuleOp, _next: Any) -> None:
        op.verify()

    pipeline = PassPipeline.parse_spec(get_all_passes(), spec, verify)
    try:
        pipeline.apply(fuel_context(), module.op)
        module.op.verify()
    except DiagnosticException as e:  # PassFailedException and VerifyException included
        raise BackendError(f"passes={spec!r}: {e}") from None
    md["passes"] = [p.name for p in pipeline.passes]
    return module


def optimize_stage(module: FuelModule, md: dict[str, Any], options: CpuOptions) -> FuelModule:
    """`fuel-optimize` in place, unless disabled or already done (`md["optimized"]` says)."""
    from xdsl.utils.exceptions import PassFailedException

    if not options.optimize or is_optimized(module):
        md["optimized"] = False
        return module
    picker = PickerOptions(
        topology=options.topology,
        precision=options.precision,
        judge=options.judge,
        hint=options.hint,
    )
    try:
        with known_weights(module.weights):  # rope tables gathered from weights: halves checked
            optimize_graph(module.op, picker)
    except PassFailedException as e:
        raise BackendError(f"fuel-optimize failed: {e}") from None
    md["optimized"] = True
    return module


def stamp_stage(module: FuelModule, md: dict[str, Any]) -> FuelModule:
    """Every kernel op gets a `#fuel.kernel` stamp: unstamped ones get the sibling the executor
    would run by default (first dense-safe entry on "cpu"), so the bundle pins it."""
    table = global_bindings()
    stamped = 0
    for op in kernel_ops(module):
        if isinstance(op.attributes.get(KERNEL_ATTR), KernelRefAttr):
            continue
        assert isinstance(op, KernelOp)
        try:
            node = compile_node(op.KERNEL_OP, op.kernel_dtypes(), CPU_TARGET, {}, table)
        except NoKernelForOp as e:
            raise BackendError(f"cannot stamp '{op.name}': {e}") from None
        op.attributes[KERNEL_ATTR] = KernelRefAttr.get(
            node.op, node.dtypes, CPU_TARGET, node.entry.kernel_source, node.entry.revision_hash
        )
        stamped += 1
    md["stamped"] = stamped
    return module


def artifacts_stage(module: FuelModule, md: dict[str, Any]) -> list[KernelArtifact]:
    """One artifact per distinct CPU kernel stamp (id + revision; meta: key, source,
    precision, caps); stamps naming another backend belong to another target."""
    table = global_bindings()
    out: dict[str, KernelArtifact] = {}
    for op in kernel_ops(module):
        stamp = op.attributes[KERNEL_ATTR]
        assert isinstance(stamp, KernelRefAttr)
        name, dtypes, backend = stamp.key()
        if backend != CPU_TARGET:
            continue
        kid = kernel_id(stamp)
        if kid in out:
            if out[kid].revision != stamp.revision_int():
                seen = f"{out[kid].revision:016x}"
                raise BackendError(
                    f"kernel {kid} is stamped with two revisions ({seen}, {stamp.revision.data})"
                )
            continue
        entry = resolve(table, name, dtypes, stamp.kernel_source.data, stamp.revision_int(), kid)
        meta = {
            "op": name,
            "dtypes": list(dtypes),
            "backend": backend,
            "source": entry.kernel_source,
            "precision": entry.precision.describe(),
            "caps": {
                "strided_input": entry.caps.strided_input,
                "requires_broadcast": entry.caps.requires_broadcast,
            },
        }
        out[kid] = KernelArtifact(kid, entry.revision_hash, "cpu", {}, meta)
    out |= {a.kernel_id: a for a in c_artifacts(module)}
    if any(a.meta.get("source", "").startswith("native") for a in out.values()):
        out[NATIVE_LIBRARY] = native_artifact()
    md["kernels"] = len(out)
    return list(out.values())


NATIVE_LIBRARY = "native/fuel_native"
"""The artifact id of fuel's native C library in a bundle that stamps native kernels."""


def native_artifact() -> KernelArtifact:
    """fuel's native library (`runtime.native`) as a bundle artifact: its compiled source
    and library, so the bundle runs where no C compiler is (same machine architecture)."""
    import platform

    source = native.source()
    files = {
        f"{NATIVE_LIBRARY}.c": source.encode(),
        f"{NATIVE_LIBRARY}.so": library_path(source, native.FLAGS).read_bytes(),
    }
    meta = {"kind": "native", "machine": platform.machine(), "cflags": list(native.FLAGS)}
    return KernelArtifact(NATIVE_LIBRARY, int(source_key(source)[:16], 16), CPU_TARGET, files, meta)


def codegen_stage(module: FuelModule, md: dict[str, Any], precision: str = "") -> FuelModule:
    """`convert-fuel-to-c` in place under the picker's precision floor (which f32
    transcendentals may use their `c-vecmath` function), then compile every generated kernel
    (cached)."""
    from xdsl.context import Context

    ConvertFuelToCPass(precision=precision).apply(Context(), module.op)
    module.op.verify()
    kernels = [op for op in module.op.ops if isinstance(op, CKernelOp)]
    for k in kernels:
        try:
            library_path(k.source.data)
        except CodegenError as e:
            raise BackendError(f"C kernel @{k.sym_name.data}: {e}") from None
    md["c_kernels"] = len(kernels)
    return module


def c_artifacts(module: FuelModule) -> list[KernelArtifact]:
    """One artifact per generated C kernel: its source and compiled library as files."""
    import platform

    out = []
    for k in module.op.ops:
        if not isinstance(k, CKernelOp):
            continue
        name, source = k.sym_name.data, k.source.data
        files = {f"c/{name}.c": source.encode(), f"c/{name}.so": library_path(source).read_bytes()}
        meta = {"kind": "c", "symbol": name, "machine": platform.machine(), "cflags": list(CFLAGS)}
        key = source_key(source)
        out.append(KernelArtifact(f"c/{name}", int(key[:16], 16), CPU_TARGET, files, meta))
    return out


def resolve(table: Any, op: str, dtypes: tuple[str, ...], source: str, revision: int, kid: str):  # noqa: ANN201
    """The table's entry for a CPU kernel id at exactly `revision`; BackendError otherwise."""
    for entry in table.lookup_alternatives(op, dtypes, CPU_TARGET):
        if entry.kernel_source != source:
            continue
        if entry.revision_hash != revision:
            raise BackendError(
                f"kernel {kid}: stamped revision {revision:016x}, this fuel has "
                f"{entry.revision_hash:016x}; re-run the picker (fuel-optimize)"
            )
        return entry
    raise BackendError(f"kernel {kid} is not in the binding table")
