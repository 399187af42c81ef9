"""The import driver: read and check a model, then walk its graph once in topological order.

Before any IR is built the model is checked as a whole: readable, its model-local functions
inlined, standard opset from `MIN_OPSET` to `MAX_OPSET`, every tensor name written once, and
every op type it uses registered (otherwise one error lists all unsupported op types, sorted,
with node counts). Graph inputs become function arguments named like the ONNX inputs (static shapes
only; `input_shapes` pins dynamic dims), initializers become constants (weights once a traced op
reads them), and the graph outputs become the function results, named like the ONNX outputs.
Every op built for a node carries the node's name as its location, and the value of each ONNX
output its tensor name as SSA name hint.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.inliner  # a submodule `import onnx` does not load
from xdsl.dialects.builtin import NameLoc, StringAttr, UnknownLoc
from xdsl.ir import OpResult, SSAValue

# each ops_* module fills the op table as it is imported
import frontends.onnx.ops_activation  # noqa: F401
import frontends.onnx.ops_attention  # noqa: F401
import frontends.onnx.ops_einsum  # noqa: F401
import frontends.onnx.ops_elementwise  # noqa: F401
import frontends.onnx.ops_layout  # noqa: F401
import frontends.onnx.ops_movement  # noqa: F401
import frontends.onnx.ops_nn  # noqa: F401
import frontends.onnx.ops_reduce  # noqa: F401
import frontends.onnx.ops_values  # noqa: F401
from frontends.builder import BuilderError, GraphBuilder
from frontends.emit import (
    Emitter,
    NeedsConstant,
    Tensor,
    Unsupported,
    dtype_of,
    sanitize,
    shape_of_t,
)
from frontends.onnx.dtypes import ONNX_TO_FUEL, fuel_dtype, onnx_type_name, to_array
from frontends.onnx.errors import OnnxImportError
from frontends.onnx.registry import OPS, Node, Outputs, display_name, op_key
from fuel_dialect.dims import dim_symbol
from runtime.dtypes import to_numpy
from runtime.module import MAX_TENSOR_ELEMENTS, FuelModule, ModuleError, check_types

MIN_OPSET = 7
"""Oldest standard opset imported: from 7 on, elementwise ops broadcast like numpy."""
MAX_OPSET = 28
"""Newest standard opset imported: the handlers follow the op definitions up to this opset
(onnx 1.23's newest); a newer model may use an op whose meaning changed, so it is refused."""

ModelLike = onnx.ModelProto | str | os.PathLike[str]


def supported_op_types() -> list[str]:
    """Every op type the importer maps, sorted (non-standard domains as `domain.Op`)."""
    return sorted(display_name(d or "", t) for d, t in OPS)


def import_onnx(
    model: ModelLike,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    constants: Mapping[str, np.ndarray] | None = None,
    name: str = "main",
    dims: Mapping[str, tuple[int, int]] | None = None,
) -> FuelModule:
    """Import an ONNX model (a `ModelProto` or a path) into a verified `FuelModule`.

    `input_shapes` pins the shapes of graph inputs with dynamic dims; `dims` gives the range
    `(lo, hi)` of each dynamic dim by its `dim_param` name instead, which then stays a dim
    symbol of the function (`fuel_dialect.dims`; a dynamic dim neither pinned nor ranged is
    refused, naming it); `constants` fixes graph
    inputs to known values (they are folded and leave the function's arguments), for inputs
    that fuel needs at import time, like a Reshape's shape (see `OnnxImportError.constant_input`).
    Every refusal is an `OnnxImportError`, its message starting with the model's path when
    `model` is one.
    """
    proto = load_model(model)
    try:
        if proto.functions:
            try:
                proto = onnx.inliner.inline_local_functions(proto)
            except Exception as e:  # noqa: BLE001 - onnx raises several types here
                raise OnnxImportError(f"cannot inline the model's local functions: {e}") from None
        opset = _default_opset(proto)
        _check_single_writer(proto.graph)
        _check_supported(proto.graph)
        frozen = {k: np.asarray(v) for k, v in (constants or {}).items()}
        imp = _GraphImport(proto.graph, opset, dict(input_shapes or {}), frozen, name)
        imp.dims = dict(dims or {})
        return imp.run()
    except OnnxImportError as e:
        if not isinstance(model, onnx.ModelProto):  # `fuel: error: model.onnx: ...`
            e.args = (f"{os.fspath(model)}: {e}",)
        raise


def load_any(path: str | os.PathLike[str], weights: str | None = None) -> FuelModule:
    """Import a `.onnx` file, else load fuel IR (and its weights). The CLI uses the lazy twin
    `tools.import_onnx.load_any`, which imports onnx only for `.onnx` paths."""
    if Path(path).suffix.lower() == ".onnx":
        return import_onnx(path)
    return FuelModule.load(path, weights)


def load_model(model: ModelLike) -> onnx.ModelProto:
    """A `ModelProto` from a path (external data loaded beside it) or as given."""
    if isinstance(model, onnx.ModelProto):
        proto = model
    else:
        try:
            proto = onnx.load(os.fspath(model))
        except OSError as e:
            raise OnnxImportError(f"cannot read {model}: {e.strerror or e}") from None
        except Exception as e:  # noqa: BLE001 - protobuf and onnx raise many types here
            raise OnnxImportError(f"{model} is not a readable ONNX model: {e}") from None
    if not proto.HasField("graph") or not proto.graph.output:
        where = "the model" if isinstance(model, onnx.ModelProto) else str(model)
        raise OnnxImportError(f"{where} is not a readable ONNX model (it has no graph outputs)")
    return proto


def _dim_params(graph: onnx.GraphProto, skip: set[str]) -> set[str]:
    """The `dim_param` names of the dynamic dims of graph inputs not in `skip`."""
    return {
        d.dim_param
        for vi in graph.input
        if vi.name not in skip and vi.type.HasField("tensor_type")
        for d in vi.type.tensor_type.shape.dim
        if d.dim_param and not d.HasField("dim_value")
    }


def _default_opset(proto: onnx.ModelProto) -> int:
    versions = {o.domain: o.version for o in proto.opset_import}
    opset = versions.get("", versions.get("ai.onnx", 0))
    if opset < MIN_OPSET and any(n.domain in ("", "ai.onnx") for n in proto.graph.node):
        raise OnnxImportError(
            f"the model imports standard opset {opset}; fuel imports opset {MIN_OPSET} or newer "
            "(upgrade it with onnx.version_converter)"
        )
    if opset > MAX_OPSET:
        raise OnnxImportError(
            f"the model imports standard opset {opset}, newer than fuel knows (opsets "
            f"{MIN_OPSET} to {MAX_OPSET}); convert it with onnx.version_converter or use a "
            "newer fuel"
        )
    return opset


def _check_single_writer(graph: onnx.GraphProto) -> None:
    """Every tensor name is written once (ONNX graphs are SSA): by a graph input or
    initializer (an initializer may also be listed as an input), or by one node output."""
    writer: dict[str, str | int] = {t.name: "an initializer" for t in graph.initializer}
    writer |= {vi.name: "a graph input" for vi in graph.input if vi.name not in writer}
    for i, node in enumerate(graph.node):
        for name in filter(None, node.output):
            if name in writer:
                w = writer[name]
                first = node_desc(graph.node[w], w) if isinstance(w, int) else w
                raise OnnxImportError(
                    f"{node_desc(node, i)} writes tensor '{name}', which {first} already "
                    "writes (tensor names must be unique)"
                )
            writer[name] = i


def _check_supported(graph: onnx.GraphProto) -> None:
    """One error naming every op type without a handler, sorted, with node counts."""
    missing = Counter(
        display_name(n.domain, n.op_type)
        for n in graph.node
        if op_key(n.domain, n.op_type) not in OPS
    )
    if missing:
        listed = ", ".join(
            f"{t} ({c} node{'s' if c > 1 else ''})" for t, c in sorted(missing.items())
        )
        kinds = f"{len(missing)} op type{'s' if len(missing) > 1 else ''}"
        raise OnnxImportError(f"the model uses {kinds} fuel does not support: {listed}")


def node_desc(node: onnx.NodeProto, index: int) -> str:
    """`node 'attn/MatMul' (MatMul)`, or by index and first output for an unnamed node."""
    kind = display_name(node.domain, node.op_type)
    if node.name:
        return f"node '{node.name}' ({kind})"
    out = next((o for o in node.output if o), "")
    return f"node #{index} ({kind}, output '{out}')"


class _GraphImport:
    """One graph's import: the value environment, the builder and the emitter."""

    def __init__(
        self,
        graph: onnx.GraphProto,
        opset: int,
        shapes: dict[str, Sequence[int]],
        frozen: dict[str, np.ndarray],
        name: str,
    ):
        self.graph, self.opset, self.shapes, self.frozen = graph, opset, shapes, frozen
        self.b = GraphBuilder(name)
        self.em = Emitter(self.b)
        self.env: dict[str, Tensor] = {}
        self.dims: dict[str, tuple[int, int]] = {}
        """`--dim` ranges by dim_param name (those of the model's dynamic input dims)."""

    def run(self) -> FuelModule:
        self._initializers()
        self._inputs()
        for i, node in enumerate(self.graph.node):
            self._node(i, node)
        return self._outputs()

    def _initializers(self) -> None:
        for t in self.graph.initializer:
            arr = to_array(t, f"initializer '{t.name}'")
            self.em.name(arr, t.name)
            self.env[t.name] = arr
        if self.graph.sparse_initializer:
            raise OnnxImportError("sparse initializers are not supported")

    def _inputs(self) -> None:
        names = {i.name for i in self.graph.input}
        unknown = sorted((set(self.shapes) | set(self.frozen)) - names)
        if unknown:
            raise OnnxImportError(f"no graph input is named {', '.join(map(repr, unknown))}")
        params = _dim_params(self.graph, set(self.shapes) | set(self.frozen))
        stray = sorted(set(self.dims) - params)
        if stray:
            known = ", ".join(sorted(params)) or "none"
            raise OnnxImportError(
                f"--dim {stray[0]}: no dynamic input dim is named '{stray[0]}' "
                f"(dynamic dims: {known})"
            )
        for vi in self.graph.input:
            if vi.name in self.env:  # an initializer listed as input (IR version < 4)
                continue
            if vi.name in self.frozen:
                self.env[vi.name] = self._frozen(vi)
                continue
            dtype, shape = self._input_type(vi)
            if any(isinstance(d, str) for d in shape):
                self.env[vi.name] = self.b.input(vi.name, shape, dtype)
            elif np.prod(shape, dtype=np.int64) == 0:  # no elements: nothing to read at run time
                self.b.input(vi.name, shape, dtype)
                self.env[vi.name] = np.zeros(shape, to_numpy(dtype))
            else:
                self.env[vi.name] = self.b.input(vi.name, shape, dtype)

    def _frozen(self, vi: onnx.ValueInfoProto) -> np.ndarray:
        what = f"graph input '{vi.name}'"
        dtype = fuel_dtype(vi.type.tensor_type.elem_type, what)
        arr = np.asarray(self.frozen[vi.name]).astype(to_numpy(dtype), order="C")
        self.em.name(arr, vi.name)
        return arr

    def _input_type(self, vi: onnx.ValueInfoProto) -> tuple[str, tuple[Any, ...]]:
        what = f"graph input '{vi.name}'"
        if not vi.type.HasField("tensor_type"):
            raise OnnxImportError(
                f"{what} is not a tensor (sequences, maps and optionals are unsupported)"
            )
        tt = vi.type.tensor_type
        dtype = fuel_dtype(tt.elem_type, what)
        if vi.name in self.shapes:
            return dtype, _bounded(what, [int(d) for d in self.shapes[vi.name]])
        if not tt.HasField("shape"):
            raise OnnxImportError(f"{what} has no shape (unknown rank); fuel needs static shapes")
        dims: list[Any] = []
        for k, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value >= 0:
                dims.append(d.dim_value)
            elif d.dim_param and d.dim_param in self.dims:
                dims.append(self.b.dim(dim_symbol(d.dim_param), *self.dims[d.dim_param]))
            else:
                param = d.dim_param
                how = f"give its range with --dim {param}=LO:HI, or " if param else ""
                raise OnnxImportError(
                    f"{what} has a dynamic dimension {k}"
                    + (f" ('{param}')" if param else "")
                    + f"; {how}pin the input with --input-shape {vi.name}=..."
                )
        static = [d for d in dims if isinstance(d, int)]
        _bounded(what, static)
        return dtype, tuple(dims)

    def _node(self, index: int, proto: onnx.NodeProto) -> None:
        spec = OPS[op_key(proto.domain, proto.op_type)]
        desc = node_desc(proto, index)
        self.em.node_name = proto.name or next(iter(proto.output), f"node{index}")
        self.em.loc = NameLoc(StringAttr(self.em.node_name), UnknownLoc())
        try:
            extra = sorted({a.name for a in proto.attribute} - spec.attrs)
            if extra:
                raise Unsupported(f"attribute {', '.join(map(repr, extra))} is not supported")
            inputs = [self._lookup(n) if n else None for n in proto.input]
            outs = _as_tuple(spec.handler(Node(proto, inputs, self.opset, self.em)))
            self._bind(proto, outs)
        except (Unsupported, BuilderError) as e:
            err = OnnxImportError(f"{desc}: {e}")
            if isinstance(e, NeedsConstant) and e.name in {i.name for i in self.graph.input}:
                err.constant_input = e.name
            raise err from None
        except OnnxImportError as e:
            raise OnnxImportError(f"{desc}: {e}") from None
        except Exception as e:  # a malformed node or an importer bug: still one line, no trace
            err = OnnxImportError(f"{desc}: cannot import this node ({type(e).__name__}: {e})")
            err.internal = True
            raise err from e

    def _lookup(self, name: str) -> Tensor:
        if name not in self.env:
            raise Unsupported(f"input '{name}' is not produced by any earlier node")
        return self.env[name]

    def _bind(self, proto: onnx.NodeProto, outs: tuple[Tensor | None, ...]) -> None:
        for k, name in enumerate(proto.output):
            if not name:
                continue
            v = outs[k] if k < len(outs) else None
            if v is None:
                raise Unsupported(f"output {k} ('{name}') is not supported")
            if isinstance(v, np.ndarray):
                self.em.name(v, name)
            elif isinstance(v, OpResult) and v.owner.location == self.em.loc:
                v.name_hint = sanitize(name)
            self.env[name] = v

    def _outputs(self) -> FuelModule:
        self.em.loc = UnknownLoc()
        results: dict[str, SSAValue] = {}
        for vi in self.graph.output:
            if vi.name not in self.env:
                raise OnnxImportError(f"graph output '{vi.name}' is not produced by any node")
            t = self.env[vi.name]
            _check_declared(vi, t)
            results[vi.name] = self.em.value(t)
        try:
            module = self.b.build(results)
            check_types(module.op, "the imported graph")
        except BuilderError as e:
            raise OnnxImportError(f"the imported graph does not verify: {e}") from None
        except ModuleError as e:
            raise OnnxImportError(str(e)) from None
        return module


def _bounded(what: str, dims: list[int]) -> tuple[int, ...]:
    """`dims`, unless they hold more than `MAX_TENSOR_ELEMENTS` elements (refused by name)."""
    if math.prod(dims) > MAX_TENSOR_ELEMENTS:
        raise OnnxImportError(
            f"{what} has shape {dims}: more than {MAX_TENSOR_ELEMENTS} "
            "elements, the most a tensor may have"
        )
    return tuple(dims)


def _as_tuple(outs: Outputs) -> tuple[Tensor | None, ...]:
    if isinstance(outs, np.ndarray | SSAValue):
        return (outs,)
    return tuple(outs)


def _check_declared(vi: onnx.ValueInfoProto, t: Tensor) -> None:
    """A graph output's declared dtype and static shape must match the imported value (a
    mismatch is a malformed model or an importer bug: `internal`, never silently wrong)."""
    if not vi.type.HasField("tensor_type"):
        return
    tt = vi.type.tensor_type
    got_dtype, got_shape = dtype_of(t), shape_of_t(t)
    problem = ""
    if tt.elem_type and ONNX_TO_FUEL.get(tt.elem_type) != got_dtype:
        problem = f"is declared {onnx_type_name(tt.elem_type)} but imports as {got_dtype}"
    elif tt.HasField("shape"):
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if len(dims) != len(got_shape) or any(
            d is not None and g >= 0 and d != g  # a `?` dim: checked when a run binds it
            for d, g in zip(dims, got_shape, strict=True)
        ):
            problem = f"is declared with shape {dims} but imports as {list(got_shape)}"
    if problem:
        err = OnnxImportError(f"graph output '{vi.name}' {problem}")
        err.internal = True
        raise err
