"""The import driver: check an `ExportedProgram` as a whole, then walk its FX graph once.

Before any IR is built: every call's aten overload must be in the op table (otherwise one error
lists them all, sorted, with node counts) and every input dim static or one ranged `Dim` (a dim
symbol of the function; anything else is refused, naming the input). A symbolic scalar
(`sym_size`, `operator.mul` / `floordiv` on sizes) is the expression of the dim symbols torch
recorded for it, so shape arithmetic, `arange(seq)` and `view(1, seq, -1, 16)` import as
expressions (`fuel.iota` where a value depends on the symbols alone). Parameters, buffers and
lifted constants become numpy constants named by their state-dict key (weights in the IR once a
traced op reads them); user inputs become the function's arguments, named like `forward()`'s
parameters; user outputs its results. State the program updates (an input mutated in place, or
a buffer: a static KV cache) is a donated argument (`fuel.donate`; a buffer's named by its
state-dict key, its value the caller's), and its new value a result named like it, after the
user outputs: writes of rows into it (`aten_update`) run in the caller's array. The program is
imported as exported, without `run_decompositions()`: an in-place op torch kept (`index_copy_`
into a cache buffer, `copy_`, `add_` through a `.to()` alias: HF's static cache) imports as its
pure form and rebinds its target and that target's same-shape aliases, so later readers see the
new value and an updated buffer or input is donated state. Only a write through a view (or a
view taken before the write) is left to torch's functionalization (no op decomposed); torch's
failures there are an import error with the cause. The exported ATen set keeps
`scaled_dot_product_attention`, `linear` and `silu` whole, which map to single fuel ops, while
the core-ATen decomposition would split attention into a dozen primitives (`decompose=True`
imports that form instead). Each op carries its FX node's name and source line as location.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import fx
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, NameLoc, StringAttr, UnknownLoc
from xdsl.ir import Operation, OpResult, SSAValue

import frontends.torch_export.aten_movement  # noqa: F401 (fills the op table)
import frontends.torch_export.aten_nn  # noqa: F401 (fills the op table)
import frontends.torch_export.aten_update  # noqa: F401 (fills the op table)
from frontends.builder import BuilderError, GraphBuilder
from frontends.emit import (
    Emitter,
    Tensor,
    Unsupported,
    dtype_of,
    sanitize,
    sym_shape_t,
)
from frontends.torch_export.aten_ops import ATEN, Cx, dim_expr, fuel_dtype
from frontends.torch_export.errors import TorchImportError
from fuel_dialect.dims import dim_symbol
from runtime.module import FuelModule

_GETITEM = "<built-in function getitem>"


def supported_aten_ops() -> list[str]:
    """Every aten overload the importer maps, sorted (`aten.add.Tensor`, ...)."""
    return sorted(ATEN)


def import_exported_program(
    ep: ExportedProgram,
    *,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    name: str = "main",
    decompose: bool = False,
    dim_names: Mapping[str, Mapping[int, str]] | None = None,
) -> FuelModule:
    """Import `ep` into a verified `FuelModule` (see the module doc). `input_names` and
    `output_names` rename the user inputs and outputs (default: forward()'s parameter names
    and the FX names of the returned values). A user input's dim that is one `Dim` with a
    finite range stays a dim symbol, named by `dim_names[input][dim]`, else by the `Dim`'s
    name where torch keeps it, else `<input>_<dim>`."""
    if decompose:
        ep = _run_decompositions(ep, None)
    elif not _in_place_imports_directly(ep.graph):
        ep = _run_decompositions(ep, {})  # functionalize only: add_ -> add, no op decomposed
    _check_supported(ep.graph)
    _check_static(ep)
    imp = _ProgramImport(ep, input_names, output_names, name)
    imp.dim_names = {k: dict(v) for k, v in (dim_names or {}).items()}
    return imp.run()


def _run_decompositions(ep: ExportedProgram, table: dict[Any, Any] | None) -> ExportedProgram:
    """torch's re-trace of the program (functionalization, decomposition); its failures
    (torch asserts on programs it exported itself) are one import error naming the cause."""
    try:
        return ep.run_decompositions(table)
    except Exception as e:  # torch's own failure: still one line, no trace
        what = "decomposition" if table is None else "functionalization of its in-place ops"
        first = (str(e).strip().splitlines() or [""])[0]
        raise TorchImportError(
            f"torch's run_decompositions ({what}) failed on this program: "
            f"{type(e).__name__}: {first}"
        ) from e


_ALIASES = ("aten.alias.default", "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device")


def _alias_of(node: fx.Node) -> fx.Node | None:
    """The tensor `node` is a view of with the same shape and dtype (`alias`, a `.to()` that
    converts nothing returns its input itself), else None."""
    if node.op != "call_function" or _target(node) not in _ALIASES or not node.args:
        return None
    src, v = node.args[0], node.meta.get("val")
    w = src.meta.get("val") if isinstance(src, fx.Node) else None
    same = isinstance(v, torch.Tensor) and isinstance(w, torch.Tensor)
    return src if same and v.dtype == w.dtype and v.shape == w.shape else None


def _alias_chain(node: fx.Node) -> list[fx.Node]:
    """`node`, the tensor it aliases, that one's, ... (an in-place op on any of them updates
    them all); an in-place op's result is its target itself."""
    chain = [node]
    while True:
        x = chain[-1]
        nxt = _alias_of(x) or (
            x.args[0] if _in_place(x) and isinstance(x.args[0], fx.Node) else None
        )
        if nxt is None:
            return chain
        chain.append(nxt)


def _in_place_imports_directly(graph: fx.Graph) -> bool:
    """In-place ops import as their pure forms, each rebinding its target (and the tensors it
    aliases) to the new value, so later readers see the update and a buffer or input updated
    this way is donated state: no re-trace by torch. Refused (False: torch functionalizes)
    where a view other than a same-shape alias was taken of a target before the update, as
    its readers after the update would see stale data."""
    order = {n: k for k, n in enumerate(graph.nodes)}
    for node in graph.nodes:
        if not _in_place(node) or not isinstance(node.args[0], fx.Node):
            continue
        chain = _alias_chain(node.args[0])
        if _is_view(chain[-1]):  # `cache[i].index_copy_(...)`: torch writes through the view
            return False
        for x in chain:
            for u in x.users:
                if u is node or u in chain or order[u] > order[node] or _alias_of(u):
                    continue
                if _is_view(u) and not _in_place(u):
                    return False
    return True


def _is_view(node: fx.Node) -> bool:
    """A call whose result may share its operand's data (an unknown call may)."""
    if node.op != "call_function":
        return False
    schema = getattr(node.target, "_schema", None)
    return schema is None or any(r.alias_info is not None for r in schema.returns)


def _mutated_inputs(graph: fx.Graph) -> list[str]:
    """Placeholders an in-place op updates (through same-shape aliases), in input order."""
    out: set[str] = set()
    for node in graph.nodes:
        if _in_place(node) and isinstance(node.args[0], fx.Node):
            out.update(x.name for x in _alias_chain(node.args[0]) if x.op == "placeholder")
    return [n.name for n in graph.nodes if n.name in out]


def _target(node: fx.Node) -> str:
    return str(node.target)


def _in_place(node: fx.Node) -> bool:
    """An aten call that mutates its first operand (`add_`, `copy_`, ...)."""
    parts = _target(node).split(".")
    name = parts[1] if len(parts) > 1 else ""
    return node.op == "call_function" and parts[0] == "aten" and _mutates(name)


def _on_a_temporary(node: fx.Node) -> bool:
    """An in-place op whose target nothing else reads or aliases: a fresh result of an op
    that returns no view (`x = a + b; x += c`), read only by this op. It imports as its
    out-of-place form (T5's position buckets), sparing a re-trace of the whole program."""
    x = node.args[0] if node.args else None
    if not isinstance(x, fx.Node) or x.op != "call_function" or set(x.users) != {node}:
        return False
    schema = getattr(x.target, "_schema", None)
    return schema is not None and all(r.alias_info is None for r in schema.returns)


def _functional(target: str) -> str:
    """`aten.add_.Tensor` -> `aten.add.Tensor`."""
    parts = target.split(".")
    return ".".join([parts[0], parts[1][:-1], *parts[2:]]) if len(parts) > 2 else target


def _handler(node: fx.Node) -> Any:
    t = _target(node)
    return ATEN.get(t) or (ATEN.get(_functional(t)) if _in_place(node) else None)


def _mutates(name: str) -> bool:
    """`add_`, `copy_` mutate their first operand; `__and__` is a plain operator."""
    return name.endswith("_") and not name.startswith("__")


def _is_sym(node: fx.Node) -> bool:
    """A node whose value is a symbolic scalar (`sym_size`, `operator.mul` on sizes, a size
    comparison): torch recorded its value as an expression of the input dims."""
    return isinstance(node.meta.get("val"), torch.SymInt | torch.SymFloat | torch.SymBool)


def _check_supported(graph: fx.Graph) -> None:
    missing = Counter(
        _target(n)
        for n in graph.nodes
        if n.op == "call_function"
        and _handler(n) is None
        and _target(n) != _GETITEM
        and not _is_sym(n)
    )
    others = Counter(n.op for n in graph.nodes if n.op in ("call_module", "call_method"))
    missing.update({f"<{k}>": c for k, c in others.items()})
    if missing:
        listed = ", ".join(
            f"{t} ({c} node{'s' if c > 1 else ''})" for t, c in sorted(missing.items())
        )
        kinds = f"{len(missing)} op{'s' if len(missing) > 1 else ''}"
        inplace = any(_mutates(t.split(".")[1]) for t in missing if t.startswith("aten."))
        hint = " (in-place ops mutate state: fuel imports pure functions)" if inplace else ""
        raise TorchImportError(f"the program uses {kinds} fuel does not support: {listed}{hint}")


def _check_static(ep: ExportedProgram) -> None:
    """Symbolic dims only where fuel keeps them: a user input's dim that is one `Dim` symbol
    with a finite range (a dim symbol of the function); other values' symbolic dims and
    symbolic scalars (`sym_size`, shape arithmetic) are expressions of those symbols."""
    for n in ep.graph.nodes:
        if n.op != "placeholder":
            continue
        val = n.meta.get("val")
        for v in val if isinstance(val, list | tuple) else [val]:
            shape = getattr(v, "shape", ())
            dyn = [k for k, d in enumerate(shape) if not isinstance(d, int)]
            if dyn and not all(_symbol_of(ep, shape[k]) for k in dyn):
                raise TorchImportError(
                    f"input '{n.name}' has symbolic dimension {dyn[0]} ({shape[dyn[0]]}) in "
                    f"shape {list(shape)}; fuel keeps a dim that is one Dim with a finite "
                    "range (Dim(name, min=, max=)), or static shapes"
                )


def _symbol_of(ep: ExportedProgram, d: Any) -> tuple[str, int, int] | None:
    """(sympy name, lo, hi) of a dim that is one symbol with a finite range, else None."""
    expr = getattr(getattr(d, "node", None), "expr", None)
    if expr is None or not getattr(expr, "is_Symbol", False):
        return None
    vr = ep.range_constraints.get(expr)
    try:
        lo, hi = int(vr.lower), int(vr.upper)  # type: ignore[union-attr]
    except (AttributeError, TypeError, ValueError, OverflowError):
        return None
    return str(expr), max(lo, 1), hi


def _torch_dim_names(ep: ExportedProgram) -> dict[str, str]:
    """torch's symbol (`s27`) -> the name of the user's `Dim` (`seq`), where torch keeps it:
    the shape environment of the exported inputs' fake tensors maps each symbol to the input
    sizes it came from and those to the `Dim` names. Empty where torch kept none (a program
    read back by `torch.export.load`)."""
    envs = (
        getattr(getattr(n.meta.get("val"), "fake_mode", None), "shape_env", None)
        for n in ep.graph.nodes
        if n.op == "placeholder"
    )
    env = next((e for e in envs if e is not None), None)
    if env is None:
        return {}
    debug = getattr(env, "source_name_to_debug_name", None) or {}
    out: dict[str, str] = {}
    for sym, sources in (getattr(env, "var_to_sources", None) or {}).items():
        for src in sources:
            name = src.name() if callable(src.name) else src.name
            if debug.get(name):
                out[str(sym)] = str(debug[name])
                break
    return out


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16).copy()
    fuel_dtype(t.dtype)  # refuse dtypes fuel has no name for
    return t.numpy().copy()


def _location(node: fx.Node) -> NameLoc:
    """`loc("name"(file:line:0))`: the FX node and the last frame of its stack trace."""
    trace = node.meta.get("stack_trace") or ""
    frames = [ln.strip() for ln in trace.splitlines() if ln.strip().startswith("File ")]
    child: Any = UnknownLoc()
    if frames:
        try:
            file_part, line_part = frames[-1].split(", line ")[:2]
            line = int(line_part.split(",")[0])
            child = FileLineColLoc(StringAttr(file_part[6:-1]), IntAttr(line), IntAttr(0))
        except ValueError:
            pass
    return NameLoc(StringAttr(node.name), child)


def _source(node: fx.Node) -> str:
    loc = _location(node).location
    return f" at {loc.filename.data}:{loc.line.data}" if isinstance(loc, FileLineColLoc) else ""


class _ProgramImport:
    """One program's import: the FX value environment, the builder and the emitter."""

    def __init__(
        self,
        ep: ExportedProgram,
        input_names: Sequence[str] | None,
        output_names: Sequence[str] | None,
        name: str,
    ):
        self.ep, self.b = ep, GraphBuilder(name)
        self.em = _Emitter(self.b)
        self.env: dict[fx.Node, Any] = {}
        self.input_names, self.output_names = input_names, output_names
        self.transposed: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.dim_names: dict[str, dict[int, str]] = {}
        self.user_name: dict[str, str] = {}
        self.torch_names = _torch_dim_names(ep)
        self.updated: list[str] = []

    def run(self) -> FuelModule:
        self._placeholders()
        for node in self.ep.graph.nodes:
            if node.op == "call_function":
                self._node(node)
        return self._outputs()

    def _placeholders(self) -> None:
        sig = self.ep.graph_signature
        specs = {s.arg.name: s for s in sig.input_specs}
        users = [s for s in sig.input_specs if s.kind == InputKind.USER_INPUT]
        names = list(self.input_names) if self.input_names else [s.arg.name for s in users]
        if len(names) != len(users):
            raise TorchImportError(f"{len(names)} input names given for {len(users)} inputs")
        user_name = dict(zip([s.arg.name for s in users], names, strict=True))
        self.user_name = user_name
        mutated = {o.target for o in sig.output_specs if o.kind == OutputKind.USER_INPUT_MUTATION}
        state = {o.target for o in sig.output_specs if o.kind == OutputKind.BUFFER_MUTATION}
        self.updated = [  # updated by in-place ops the graph kept (imported directly)
            n
            for n in _mutated_inputs(self.ep.graph)
            if n not in mutated and specs[n].target not in state
        ]
        for n in self.updated:
            if specs[n].kind not in (InputKind.BUFFER, InputKind.USER_INPUT):
                raise TorchImportError(
                    f"the program updates its {specs[n].kind.name.lower()} '{specs[n].target}' "
                    "in place (fuel updates inputs and buffers only; torch lifts a tensor it "
                    "does not find registered on the module as a constant: export with "
                    "strict=True, as transformers' export() does, keeps a KV cache a buffer)"
                )
            (state if specs[n].kind == InputKind.BUFFER else mutated).add(
                specs[n].target if specs[n].kind == InputKind.BUFFER else n
            )
        for node in self.ep.graph.nodes:
            if node.op != "placeholder":
                continue
            spec = specs[node.name]
            if spec.kind == InputKind.BUFFER and spec.target in state:
                # state the program updates (a static KV cache registered as buffers): a
                # donated input named by its state-dict key; the caller holds its value
                val = node.meta["val"]
                self.user_name[spec.target] = spec.target
                shape = self._input_shape(spec.target, val)
                dtype = self._dtype(val, node)
                self.env[node] = self.b.input(spec.target, shape, dtype, donate=True)
            elif spec.kind == InputKind.USER_INPUT:
                val = node.meta["val"]
                if not isinstance(val, torch.Tensor):
                    raise TorchImportError(f"input '{node.name}' is not a tensor ({val!r})")
                shape = self._input_shape(user_name[node.name], val)
                self.env[node] = self.b.input(
                    user_name[node.name],
                    shape,
                    self._dtype(val, node),
                    donate=node.name in mutated,  # updated in place: the caller's buffer
                )
            else:
                self.env[node] = self._constant(spec)

    def _input_shape(self, name: str, val: torch.Tensor) -> tuple[int | str, ...]:
        """Static dims as ints; a `Dim` symbol as a dim symbol of the function, named (at
        the first input dim that has it) as `dim_names` says, else as the user's `Dim` where
        torch kept its name, else after the input dim (`x_0`)."""
        out: list[int | str] = []
        for k, d in enumerate(val.shape):
            sym = None if isinstance(d, int) else _symbol_of(self.ep, d)
            if sym is None:
                out.append(int(d))
                continue
            if sym[0] not in self.em.symbols:
                given = (
                    self.dim_names.get(name, {}).get(k)
                    or self.torch_names.get(sym[0])
                    or f"{name}_{k}"
                )
                base = unique = dim_symbol(given)
                taken = set(self.em.symbols.values())
                for i in range(1, len(taken) + 2):
                    if unique not in taken:
                        break
                    unique = f"{base}_{i}"
                self.em.symbols[sym[0]] = self.b.dim(unique, sym[1], sym[2])
            out.append(self.em.symbols[sym[0]])
        return tuple(out)

    def _dtype(self, val: torch.Tensor, node: fx.Node) -> str:
        try:
            return fuel_dtype(val.dtype)
        except Unsupported as e:
            raise TorchImportError(f"input '{node.name}': {e}") from None

    def _constant(self, spec: Any) -> np.ndarray:
        target = spec.target
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            t = self.ep.state_dict.get(target)
            t = self.ep.constants.get(target) if t is None else t
            if not isinstance(t, torch.Tensor):
                raise TorchImportError(f"{spec.kind.name.lower()} '{target}' has no tensor value")
            try:
                arr = _to_numpy(t)
            except Unsupported as e:
                raise TorchImportError(f"{spec.kind.name.lower()} '{target}': {e}") from None
            self.em.name(arr, target)
            self.em.state.add(id(arr))
            return arr
        raise TorchImportError(
            f"input '{spec.arg.name}' of kind {spec.kind.name} is not supported (only tensors, "
            "parameters, buffers and constants)"
        )

    def _node(self, node: fx.Node) -> None:
        desc = f"node '{node.name}' ({_target(node)}){_source(node)}"
        self.em.node_name = node.name
        self.em.loc = _location(node)
        try:
            if _is_sym(node):
                out = _sym_value(node.meta["val"], self.em.symbols)
            elif _target(node) == _GETITEM:
                src, i = node.args
                out = self.env[src][i]
                if out is None:  # refused only if something reads it
                    out = _Missing(f"output {i} of '{src.name}' is not supported")
            else:
                args, kwargs = fx.node.map_arg((node.args, node.kwargs), self.env.__getitem__)
                _refuse_missing((args, kwargs))
                cx = Cx(self.em, node, self.b.weights, self.transposed)
                out = _handler(node)(cx, *args, **kwargs)
            self._check(node, out)
            if _in_place(node) and isinstance(node.args[0], fx.Node):
                for x in _alias_chain(node.args[0]):  # later readers see the update
                    self.env[x] = out
        except (Unsupported, BuilderError) as e:
            raise TorchImportError(f"{desc}: {e}") from None
        except TorchImportError as e:
            raise TorchImportError(f"{desc}: {e}") from None
        except Exception as e:  # an importer bug: still one line, no trace
            err = TorchImportError(f"{desc}: cannot import this node ({type(e).__name__}: {e})")
            err.internal = True
            raise err from e
        if isinstance(out, OpResult) and out.owner.location == self.em.loc:
            out.name_hint = sanitize(node.name)
        self.env[node] = out

    def _check(self, node: fx.Node, out: Any) -> None:
        """The result must have the shape and dtype torch recorded (never silently wrong)."""
        val = node.meta.get("val")
        pairs = zip(out, val, strict=False) if isinstance(out, tuple) else [(out, val)]
        for got, want in pairs:
            if got is None or isinstance(got, _Missing) or not isinstance(want, torch.Tensor):
                continue
            shape = tuple(
                int(d) if isinstance(d, int) else dim_expr(d, self.em.symbols) for d in want.shape
            )
            dtype = fuel_dtype(want.dtype)
            if sym_shape_t(self.em, got) != shape or dtype_of(got) != dtype:
                err = TorchImportError(
                    f"imports as {dtype_of(got)}{[str(d) for d in sym_shape_t(self.em, got)]}, "
                    f"torch recorded {dtype}{[str(d) for d in shape]}"
                )
                err.internal = True
                raise err

    def _outputs(self) -> FuelModule:
        self.em.loc = UnknownLoc()
        sig = self.ep.graph_signature
        mut = (OutputKind.USER_INPUT_MUTATION, OutputKind.BUFFER_MUTATION)
        bad = [s for s in sig.output_specs if s.kind not in (OutputKind.USER_OUTPUT, *mut)]
        if bad:
            what = ", ".join(f"{s.kind.name.lower()} of '{s.target}'" for s in bad)
            raise TorchImportError(
                f"the program mutates state ({what}); fuel imports pure functions and "
                "updates of inputs (return the new value, or update an input in place)"
            )
        out_node = next(n for n in self.ep.graph.nodes if n.op == "output")
        values = list(out_node.args[0])
        user = [k for k, o in enumerate(sig.output_specs) if o.kind == OutputKind.USER_OUTPUT]
        names = (
            list(self.output_names)
            if self.output_names
            else [sig.output_specs[k].arg.name for k in user]
        )
        if len(names) != len(user):
            raise TorchImportError(f"{len(names)} output names given for {len(user)} outputs")
        # the user outputs, then each updated input's new value, named like the input (its
        # input is donated: the executor writes the update into the caller's array)
        order = [(n, values[k]) for n, k in zip(names, user, strict=True)] + [
            (self.user_name[o.target], values[k])
            for k, o in enumerate(sig.output_specs)
            if o.kind in mut
        ]
        specs = {s.arg.name: s for s in sig.input_specs}
        for n in self.updated:  # the last value an in-place op gave it
            node = next(p for p in self.ep.graph.nodes if p.name == n)
            key = specs[n].target if specs[n].kind == InputKind.BUFFER else n
            order.append((self.user_name[key], node))
        results: dict[str, SSAValue] = {}
        for n, v in order:
            t = self.env.get(v) if isinstance(v, fx.Node) else None
            if t is None or not (isinstance(t, np.ndarray) or isinstance(t, SSAValue)):
                raise TorchImportError(f"output '{n}' is not a tensor")
            results[n] = self.em.value(t)
        _erase_dead(self.b, set(results.values()))
        try:
            return self.b.build(results)
        except BuilderError as e:
            raise TorchImportError(f"the imported graph does not verify: {e}") from None


def _sym_value(v: Any, symbols: dict[str, str]) -> Any:
    """A symbolic scalar's value: a size as its `DimExpr` over the function's dim symbols (an
    int once constant); a size comparison (read only by `_assert_scalar`) as nothing."""
    if isinstance(v, torch.SymInt):
        return dim_expr(v, symbols)
    if isinstance(v, torch.SymBool):
        return None
    raise Unsupported(f"a symbolic float ({v}) is not supported")


class _Missing:
    """An output a handler does not make (e.g. native_layer_norm's mean): fine until read."""

    def __init__(self, why: str):
        self.why = why


def _refuse_missing(tree: Any) -> None:
    if isinstance(tree, _Missing):
        raise Unsupported(tree.why)
    if isinstance(tree, list | tuple):
        for t in tree:
            _refuse_missing(t)
    elif isinstance(tree, dict):
        for t in tree.values():
            _refuse_missing(t)


class _Emitter(Emitter):
    """The shared emitter, except that parameters, buffers and constants the program holds
    (and their import-time transposes) are always named weights, however small."""

    def __init__(self, builder: GraphBuilder):
        super().__init__(builder)
        self.state: set[int] = set()
        self.symbols: dict[str, str] = {}
        """torch's symbol (`s31`) -> the function's dim symbol (read by `Cx.shape`)."""

    def value(self, t: Tensor) -> SSAValue:
        if isinstance(t, np.ndarray) and id(t) in self.state and id(t) not in self._values:
            v = self.b.weight(self._weight_name(t), t.shape, dtype_of(t), t)
            assert isinstance(v.owner, Operation)
            v.owner.location = self.loc
            self._values[id(t)] = (t, v)
        return super().value(t)


def _erase_dead(b: GraphBuilder, outputs: set[SSAValue]) -> None:
    """Drop ops nobody reads (a live-length mask replaced by `kv_len`, unused weights)."""
    for op in reversed(list(b.block.ops)):
        if all(not r.uses and r not in outputs for r in op.results) and _pure(op):
            b.block.erase_op(op)
    live = {op.sym_name.data for op in b.block.ops if hasattr(op, "sym_name")}
    for k in [k for k in b.weights if k not in live]:
        del b.weights[k]
        b._weight_values.pop(k, None)  # noqa: SLF001


def _pure(op: Operation) -> bool:
    from xdsl.traits import Pure

    return op.has_trait(Pure) or op.name in ("fuel.weight", "fuel.constant")
