"""Run a module with dim symbols: one static executor per input-shape signature, cached.

A function that declares dim symbols (`fuel.dims`, `fuel_dialect.dims`) takes inputs of any
shape in their ranges. On the first run of a new signature `SymbolicExecutor` binds each
symbol from the inputs (`bind_dims`: ranges and agreement checked, the dim named), clones the
module with every `?` replaced by its value under the ops' shape rules (`specialize`:
`fuel_dialect.shapes`; the clone is verified, so every check the rules left to run time is
made here; a branch gated on dims takes the arm its sizes select), and compiles a static
`Executor` for it: its schedule, memory plan and prepared kernels (packed weights, native
calls sized for this shape). Later runs of that signature run
that executor, so they cost what a static bundle of that shape costs. Between the clone and
the executor a `finish` given by the compiler (`lowering.cpu.specialize.shape_finisher`) may
lower the clone further for its concrete shape (the picker at the bound sizes, fused patterns
whose precondition is a static fact, generated C); its time is part of the first run's. At
most `knobs.shape_cache_size()` signatures are kept, the least recently used dropped first.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, FunctionType, IntegerAttr, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from fuel_dialect.base import KernelOp
from fuel_dialect.branch import PICKED_ATTR, BranchOp, collapse_branch, static_choice
from fuel_dialect.dims import DIM_NAMES_ATTR, DIMS_ATTR, arg_symbols, function_dims, is_symbolic
from fuel_dialect.dtypes import dtype_name
from fuel_dialect.ops_movement import ConstantOp, ReshapeOp, WeightOp
from fuel_dialect.ops_shape import IotaOp
from fuel_dialect.shapes import ShapeError, propagate
from runtime import knobs
from runtime.binding_table import BindingTableError
from runtime.compiled import ExecutionError, InputError, compile_op
from runtime.constants import dense_array
from runtime.dtypes import to_numpy
from runtime.executor import Executor, placed_device
from runtime.kernels import global_bindings
from runtime.module import FuelModule, io_names

Env = tuple[tuple[str, int], ...]
"""A shape signature: each symbol's value, sorted by name."""


def bind_dims(f: func.FuncOp, names: Sequence[str], arrays: Sequence[Any]) -> dict[str, int]:
    """Each dim symbol's value in `arrays` (the inputs of `f`, named `names`); `InputError`
    naming the input and the dim for a wrong rank, two values of one symbol, or a value
    outside the symbol's declared range."""
    ranges = function_dims(f)
    env: dict[str, int] = {}
    seen: dict[str, str] = {}
    for name, arr, syms in zip(names, arrays, arg_symbols(f), strict=True):
        shape = getattr(arr, "shape", None)
        if shape is None or len(shape) != len(syms):
            want = "[" + ", ".join(map(str, syms)) + "]"
            raise InputError(f"input '{name}' must have shape {want}, got {_shape_of(arr)}")
        for i, (d, n) in enumerate(zip(syms, shape, strict=True)):
            where = f"input '{name}' dim {i}"
            if not isinstance(d, str):
                if d != n:
                    raise InputError(f"{where} must be {d}, got {n} (shape {list(shape)})")
                continue
            if d in env and env[d] != n:
                raise InputError(f"dim '{d}' is {env[d]} in {seen[d]} but {n} in {where}")
            lo, hi = ranges[d]
            if not lo <= n <= hi:
                raise InputError(f"dim '{d}' = {n} ({where}) is outside its range [{lo}, {hi}]")
            env[d], seen[d] = n, where
    return env


def _shape_of(a: Any) -> str:
    return str(list(a.shape)) if hasattr(a, "shape") else type(a).__name__


def specialize(module: FuelModule, env: Mapping[str, int], function: str | None = None):  # noqa: ANN201
    """A verified static clone of `module` with its dim symbols bound to `env`."""
    op = module.op.clone()
    f = FuelModule(op, module.weights, module.name).function(function)
    seeded = {
        a: tuple(env[d] if isinstance(d, str) else d for d in syms)
        for a, syms in zip(f.body.block.args, arg_symbols(f), strict=True)
    }
    label = ", ".join(f"{k}={v}" for k, v in sorted(env.items()))
    try:
        shapes = propagate(f.body.block, dict(seeded), dict(env))
    except ShapeError as e:
        raise InputError(f"at {label}: {e}") from None
    for v, s in shapes.items():
        t = v.type
        if isinstance(t, TensorType) and any(d < 0 for d in t.get_shape()):
            v._type = TensorType(t.element_type, [int(d) for d in s])  # noqa: SLF001
    ret = f.body.block.last_op
    assert ret is not None
    f.function_type = FunctionType.from_lists(
        [a.type for a in f.body.block.args], [v.type for v in ret.operands]
    )
    _collapse_gated(f)
    weights = _fold_iotas(f, env, dict(module.weights))
    _fold_derived(f, weights)
    f.attributes.pop(DIMS_ATTR, None)
    for r in [o for o in f.walk() if isinstance(o, ReshapeOp)]:
        r.attributes.pop("dims", None)  # written in the symbols; its type is static now
    if f.arg_attrs is not None:
        f.arg_attrs = ArrayAttr(
            [
                DictionaryAttr({k: v for k, v in d.data.items() if k != DIM_NAMES_ATTR})
                for d in f.arg_attrs.data
            ]
        )
    try:
        op.verify()
    except (DiagnosticException, ValueError) as e:
        raise InputError(f"at {label}: {e}") from None
    return FuelModule(op, weights, module.name)


def _collapse_gated(f: func.FuncOp) -> None:
    """Each branch whose picked arm's gate tests dims alone (`fuel-emit-dim-branches`: the
    kernel that wins at this size) becomes the arm the bound shapes select."""
    for b in reversed([op for op in f.walk() if isinstance(op, BranchOp)]):
        picked = b.attributes.get(PICKED_ATTR)
        if isinstance(picked, IntegerAttr) and picked.value.data > 0:
            choice = static_choice(b, picked.value.data)
            if choice is not None:
                collapse_branch(b, choice)


def _fold_iotas(
    f: func.FuncOp, env: Mapping[str, int], weights: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """Each `fuel.iota` (a value of the symbols alone) becomes a weight holding its value."""
    for i, op in enumerate([o for o in f.walk() if isinstance(o, IotaOp)]):
        arr = np.asarray(op.fold(env), to_numpy(dtype_name(op.result.type)), order="C")
        name = f"fuel.iota.{i}"
        w = WeightOp(name, op.result.type)  # type: ignore[arg-type]
        assert op.parent is not None
        op.parent.insert_op_before(w, op)
        op.result.replace_all_uses_with(w.result)
        op.detach()
        op.erase()
        weights[name] = arr
    return weights


FOLD_LIMIT = 1 << 22
"""The most elements a value derived from the symbols alone may have to be folded."""


def _fold_derived(f: func.FuncOp, weights: dict[str, np.ndarray]) -> None:
    """Fold the ops that compute from the symbols alone (a `fuel.iota`'s value, through casts,
    arithmetic, masks: what a static import folds) into weights, running the kernel each op
    is stamped with once; later runs of the shape skip them. An op whose kernel the process
    table lacks, or with a result over `FOLD_LIMIT` elements, is left to run."""
    known: dict[SSAValue, np.ndarray] = {}
    derived: set[SSAValue] = set()
    table = global_bindings()
    for op in list(f.body.block.ops):
        if isinstance(op, WeightOp):
            known[op.result] = weights[op.sym_name.data]
            if op.sym_name.data.startswith("fuel.iota."):
                derived.add(op.result)
        elif isinstance(op, ConstantOp):
            known[op.result] = dense_array(op.value)
        elif _foldable(op, known, derived):
            out = _run_once(op, [known[v] for v in op.operands], table)
            if out is None:
                continue
            name = f"fuel.derived.{len(weights)}"
            w = WeightOp(name, op.results[0].type)  # type: ignore[arg-type]
            f.body.block.insert_op_before(w, op)
            op.results[0].replace_all_uses_with(w.result)
            op.detach()
            op.erase()
            weights[name] = out
            known[w.result] = out
            derived.add(w.result)
    for op in list(f.body.block.ops):  # folded inputs nobody reads any more
        if isinstance(op, WeightOp) and not op.result.uses and op.sym_name.data in weights:
            if op.sym_name.data.startswith(("fuel.iota.", "fuel.derived.")):
                del weights[op.sym_name.data]
                op.detach()
                op.erase()


def _foldable(op: Operation, known: Mapping[SSAValue, Any], derived: set[SSAValue]) -> bool:
    if not isinstance(op, KernelOp) or len(op.results) != 1 or op.regions:
        return False
    if placed_device(op) not in (None, "cpu"):
        return False
    if not all(v in known for v in op.operands) or not any(v in derived for v in op.operands):
        return False
    t = op.results[0].type
    return isinstance(t, TensorType) and math.prod(t.get_shape()) <= FOLD_LIMIT


def _run_once(op: Operation, arrays: list[np.ndarray], table: Any) -> np.ndarray | None:
    t = op.results[0].type
    assert isinstance(t, TensorType)
    out = np.empty(tuple(t.get_shape()), to_numpy(dtype_name(t)))
    try:
        node = compile_op(op, table)
        with np.errstate(all="ignore"):
            ins = [np.asarray(a, order="C") for a in arrays]  # 0-d stays 0-d
            node.entry.kernel(ins, [out], node.params)
    except (ExecutionError, BindingTableError):
        return None
    return out


class SymbolicExecutor:
    """An `Executor` for a module with dim symbols: specialises per input-shape signature
    (see the module docstring). `make(module)` builds the static executor of one shape
    (`Executor(module, ...)` with the caller's table, devices and function)."""

    def __init__(
        self,
        module: FuelModule,
        make: Callable[[FuelModule], Any],
        function: str | None = None,
        finish: Callable[[FuelModule], FuelModule] | None = None,
    ):
        self._module, self._make, self._function = module, make, function
        self._finish = finish
        self._fn = module.function(function)
        self.input_names, self.output_names = io_names(self._fn)
        self.dims = function_dims(self._fn)
        """Each symbol's declared range, name -> (lo, hi)."""
        self._cache: OrderedDict[tuple[Any, ...], tuple[Env, Any]] = OrderedDict()
        """Input shapes -> (signature, executor), least recently used first."""
        self._capacity = knobs.shape_cache_size()
        self.specializations: list[tuple[Env, float]] = []
        """Every specialisation made: (signature, seconds to bind, clone, verify, finish,
        compile)."""
        self.phases: list[dict[str, float]] = []
        """Per specialisation, its seconds by phase: `clone` (bind, clone, verify, fold),
        `lower` (the `finish`), `executor` (schedule, memory plan, prepared kernels)."""
        self._last: Any = None

    @property
    def input_specs(self) -> list[tuple[np.dtype, tuple[int, ...]]]:
        """(dtype, shape) per input with each symbol at its range's low end (the shapes
        `fuel run --random-inputs` draws)."""
        out = []
        for a, syms in zip(self._fn.body.block.args, arg_symbols(self._fn), strict=True):
            shape = tuple(self.dims[d][0] if isinstance(d, str) else d for d in syms)
            out.append((to_numpy(dtype_name(a.type)), shape))
        return out

    def executor_for(self, inputs: Mapping[str, Any] | Sequence[Any]) -> Any:
        """The static executor of these inputs' shape signature (made on first need)."""
        arrays = self._arrays(inputs)
        shapes = tuple(getattr(a, "shape", None) for a in arrays)
        hit = self._cache.get(shapes)  # one dict lookup on a shape seen before
        if hit is not None:
            self._cache.move_to_end(shapes)
            self._last = hit[1]
            return hit[1]
        env = bind_dims(self._fn, self.input_names, arrays)  # every dim checked once
        key: Env = tuple(sorted(env.items()))
        t0 = time.perf_counter()
        clone = specialize(self._module, env, self._function)
        t1 = time.perf_counter()
        clone = clone if self._finish is None else self._finish(clone)
        t2 = time.perf_counter()
        ex = self._make(clone)
        t3 = time.perf_counter()
        self.specializations.append((key, t3 - t0))
        self.phases.append({"clone": t1 - t0, "lower": t2 - t1, "executor": t3 - t2})
        self._cache[shapes] = (key, ex)
        while len(self._cache) > self._capacity:
            self._cache.popitem(last=False)
        self._last = ex
        return ex

    def _arrays(self, inputs: Mapping[str, Any] | Sequence[Any]) -> list[Any]:
        if isinstance(inputs, Mapping):
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise InputError(
                    f"missing input(s) {', '.join(missing)} (the module takes: "
                    f"{', '.join(self.input_names)})"
                )
            return [inputs[n] for n in self.input_names]
        arrays = list(inputs)
        if len(arrays) != len(self.input_names):
            raise InputError(
                f"expected {len(self.input_names)} inputs ({', '.join(self.input_names)}), "
                f"got {len(arrays)}"
            )
        return arrays

    def run(
        self, inputs: Mapping[str, Any] | Sequence[Any], copy_outputs: bool = True
    ) -> dict[str, np.ndarray]:
        """Run once at the inputs' shapes (see `Executor.run`)."""
        return self.executor_for(inputs).run(inputs, copy_outputs)

    def profile_items(
        self, inputs: Mapping[str, Any] | Sequence[Any], runs: int = 20
    ) -> list[tuple[str, int, float]]:
        """`Executor.profile_items` of the inputs' shape."""
        return self.executor_for(inputs).profile_items(inputs, runs)

    def __len__(self) -> int:
        return len(self._last) if self._last is not None else 0

    @property
    def cached_signatures(self) -> list[Env]:
        """The signatures whose executors are kept, least recently used first."""
        return [env for env, _ in self._cache.values()]

    def __getattr__(self, name: str) -> Any:
        """Anything else (`memory`, `op_names`, ...): the last run shape's executor's."""
        if name.startswith("_") or self.__dict__.get("_last") is None:
            raise AttributeError(name)
        return getattr(self._last, name)


def make_executor(
    module: FuelModule,
    function: str | None = None,
    finish: Callable[[FuelModule], FuelModule] | None = None,
    **kwargs: Any,
) -> Any:
    """`Executor(module, function=function, **kwargs)`, or a `SymbolicExecutor` making one
    per shape when the function declares dim symbols (each specialised clone lowered by
    `finish` first, where given)."""
    if not is_symbolic(module.function(function)):
        return Executor(module, function=function, **kwargs)
    return SymbolicExecutor(
        module, lambda m: Executor(m, function=function, **kwargs), function, finish
    )
