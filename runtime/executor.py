"""The executor: compile a verified module once into a flat schedule, then run it many times.

Compilation resolves every kernel op through the binding table (`compile_op`, fail fast),
preallocates every intermediate from a static memory plan that reuses a buffer after its
last use, and turns reshapes into views. A run binds the graph inputs into the prebuilt
argument lists and walks the schedule: per op, one Python call into the kernel.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, IntegerAttr
from xdsl.ir import Operation, SSAValue

from fuel_dialect.base import KernelOp
from fuel_dialect.branch import PICKED_ATTR, BranchOp, YieldOp, parse_gate
from fuel_dialect.dispatch import CopyOp
from fuel_dialect.dtypes import dtype_name, shape_of
from fuel_dialect.ops_movement import ConstantOp, ReshapeOp, WeightOp
from runtime.binding_table import BindingTableError, KernelBindingTable, global_bindings
from runtime.compiled import compile_op
from runtime.dtypes import to_numpy
from runtime.module import FuelModule, io_names


class ExecutionError(Exception):
    """A module cannot be compiled or run; the message names the op or input at fault."""


class InputError(ExecutionError):
    """Graph inputs with a wrong name, shape or dtype."""


Patch = tuple[list[Any], int, bool]  # (argument list, index, kernel needs contiguous input)


@dataclass
class MemoryPlan:
    """Static buffer plan: buffers allocated vs. one buffer per intermediate."""

    buffers: int = 0
    planned_bytes: int = 0
    naive_bytes: int = 0


@dataclass
class _Storage:
    raw: np.ndarray | None  # pooled raw bytes; None for weights/constants (never reused)
    refs: int = 0


@dataclass
class _Compiler:
    """Walks the entry function once, building the schedule and the memory plan."""

    table: KernelBindingTable
    backend: str
    weights: Mapping[str, np.ndarray]
    items: list[tuple[Any, list[Any]]] = field(default_factory=list)
    """(callable, positional args): `kernel(ins, outs, params)` or `direct(*ins, *outs)`."""
    names: list[str] = field(default_factory=list)
    static: dict[SSAValue, np.ndarray] = field(default_factory=dict)
    patches: dict[SSAValue, list[Patch]] = field(default_factory=dict)
    storage: dict[SSAValue, _Storage] = field(default_factory=dict)
    free: list[np.ndarray] = field(default_factory=list)
    plan: MemoryPlan = field(default_factory=MemoryPlan)

    def alloc(self, v: SSAValue) -> np.ndarray:
        dt, shape = to_numpy(dtype_name(v.type)), shape_of(v.type)
        nbytes = max(1, math.prod(shape) * dt.itemsize)
        self.plan.naive_bytes += nbytes
        fits = [i for i, b in enumerate(self.free) if b.nbytes >= nbytes]
        if fits:  # best fit: the smallest free buffer that holds the value
            raw = self.free.pop(min(fits, key=lambda i: self.free[i].nbytes))
        else:
            raw = np.empty(nbytes, np.uint8)
            self.plan.buffers += 1
            self.plan.planned_bytes += nbytes
        self.storage[v] = _Storage(raw, 1)
        return raw[: math.prod(shape) * dt.itemsize].view(dt).reshape(shape)

    def operand_list(self, operands: Sequence[SSAValue], contiguous: bool) -> list[Any]:
        args: list[Any] = []
        for i, v in enumerate(operands):
            if v in self.static:
                a = self.static[v]
                args.append(a if not contiguous else np.ascontiguousarray(a))
            elif v in self.patches:
                args.append(None)
                self.patches[v].append((args, i, contiguous))
            else:
                raise ExecutionError(f"value {v} is used before it is defined")
        return args

    def release(self, v: SSAValue) -> None:
        st = self.storage.get(v)
        if st is None:
            return
        st.refs -= 1
        if st.refs == 0 and st.raw is not None:
            self.free.append(st.raw)

    def op(self, op: Operation) -> None:
        if isinstance(op, WeightOp):
            self.static[op.result] = _weight(self.weights, op)
        elif isinstance(op, ConstantOp):
            self.static[op.result] = constant_array(op.value)
        elif isinstance(op, ReshapeOp):
            self.reshape(op.input, op.result)
        elif isinstance(op, CopyOp):
            if op.target.data != "cpu":  # fail fast: this executor drives host memory only
                raise ExecutionError(
                    f"the module copies a value to device '{op.target.data}', which this "
                    "executor cannot reach; plan for this machine's topology"
                )
            self.reshape(op.input, op.result)  # host to host: the same bytes
        elif isinstance(op, KernelOp):
            self.kernel(op)
        elif isinstance(op, BranchOp):
            self.branch(op)
        else:
            raise ExecutionError(f"the executor cannot run '{op.name}'")

    def branch(self, op: BranchOp) -> None:
        """Each arm becomes a sub-schedule; one item evaluates the gate, runs the picked arm
        (`fuel.picked`, else arm 0; a failed gate falls back to arm 0) and hands its yielded
        arrays to the branch's consumers. Arm buffers are never reused (arms are small)."""
        outer_items, outer_names = self.items, self.names
        arms: list[tuple[list[Any], list[Any]]] = []
        for i in range(len(op.arms)):
            self.items, self.names = [], []
            for inner in op.arms[i].block.ops:
                if not isinstance(inner, YieldOp):
                    self.op(inner)
            holder = self.operand_list(list(op.yielded(i).values), contiguous=False)
            arms.append((self.items, holder))
        self.items, self.names = outer_items, outer_names
        gates = [parse_gate(op.gate(i)) if op.gate(i) else [] for i in range(len(op.arms))]
        gate_args = self.operand_list(list(op.gate_operands), contiguous=False)
        picked_attr = op.attributes.get(PICKED_ATTR)
        picked = picked_attr.value.data if isinstance(picked_attr, IntegerAttr) else 0
        consumers: list[list[Patch]] = []
        for r in op.outs:
            self.patches[r] = lst = []
            consumers.append(lst)
        self.items.append((_branch_kernel, [arms, gates, gate_args, picked, consumers]))
        self.names.append(op.name)

    def reshape(self, src: SSAValue, result: SSAValue) -> None:
        """`result` is a view of `src` (static: now; per-run value: a view step)."""
        shape = shape_of(result.type)
        if src in self.static:
            self.static[result] = self.static[src].reshape(shape)
            if src in self.storage:  # share the storage: it lives while either value does
                self.storage[result] = st = self.storage[src]
                st.refs += 1
            return
        self.patches[result] = consumers = []
        args = self.operand_list([src], contiguous=False)
        self.items.append((_view_kernel, [args, consumers, shape]))
        self.names.append(result.owner.name)  # type: ignore[union-attr]

    def kernel(self, op: Operation) -> None:
        try:
            node = compile_op(op, self.table, self.backend)
        except BindingTableError as e:
            raise ExecutionError(f"cannot compile '{op.name}': {e}") from None
        contiguous = not node.entry.caps.strided_input
        ins = self.operand_list(op.operands, contiguous)
        outs = [self.alloc(r) for r in op.results]
        for r, a in zip(op.results, outs, strict=True):
            self.static[r] = a
        if node.entry.direct is not None and not node.params:
            ins.extend(outs)  # one positional call straight into the ufunc; patches still index ins
            self.items.append((node.entry.direct, ins))
        else:
            self.items.append((node.entry.kernel, [ins, outs, node.params]))
        self.names.append(op.name)


_CMP = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b, "<": lambda a, b: a < b, ">": lambda a, b: a > b,
}  # fmt: skip


def gate_holds(terms: list[tuple[str, int, int, str, int]], args: list[np.ndarray]) -> bool:
    """Evaluate a parsed gate over the branch's gate operands (shapes and 0-d values)."""
    for kind, i, axis, cmp, const in terms:
        got = args[i].shape[axis] if kind == "dim" else int(args[i])
        if not _CMP[cmp](got, const):
            return False
    return True


def _branch_kernel(arms: list, gates: list, gate_args: list, picked: int, consumers: list) -> None:
    arm = picked if picked < len(arms) and gate_holds(gates[picked], gate_args) else 0
    items, holder = arms[arm]
    for fn, args in items:
        fn(*args)
    for v, lst in zip(holder, consumers, strict=True):
        for target, j, contiguous in lst:
            target[j] = np.ascontiguousarray(v) if contiguous else v


def _view_kernel(ins: list[np.ndarray], consumers: list[Patch], shape: tuple[int, ...]) -> None:
    """A reshape of a per-run value: make the view and hand it to its consumers."""
    v = ins[0].reshape(shape)
    for lst, j, contiguous in consumers:
        lst[j] = np.ascontiguousarray(v) if contiguous else v


def _weight(weights: Mapping[str, np.ndarray], op: WeightOp) -> np.ndarray:
    name = op.sym_name.data
    if name not in weights:
        raise ExecutionError(f"weight '{name}' has no data (is the .safetensors file missing?)")
    arr, dt, shape = weights[name], to_numpy(dtype_name(op.result.type)), shape_of(op.result.type)
    if arr.shape != shape or arr.dtype != dt:
        raise ExecutionError(f"weight '{name}' is {arr.dtype}{list(arr.shape)}, IR declares "
                             f"{op.result.type}")  # fmt: skip
    return arr


def constant_array(attr: DenseIntOrFPElementsAttr) -> np.ndarray:
    """The numpy value of a dense constant attribute."""
    t = attr.get_type()
    dt, shape = to_numpy(dtype_name(t)), shape_of(t)
    vals = list(attr.get_values())
    arr = np.asarray(vals, dtype=np.float64 if dt.kind == "V" or dt.kind == "f" else None)
    if arr.size == 1 and math.prod(shape) != 1:
        arr = np.full(shape, arr.reshape(()))
    return arr.astype(dt).reshape(shape)


class Executor:
    """Runs a module's entry function on the CPU from a precompiled flat schedule."""

    def __init__(
        self,
        module: FuelModule,
        table: KernelBindingTable | None = None,
        backend: str = "cpu",
    ):
        fn = module.entry
        self.input_names, self.output_names = io_names(fn)
        args = list(fn.body.block.args)
        self.input_specs = [(to_numpy(dtype_name(a.type)), shape_of(a.type)) for a in args]
        c = _Compiler(global_bindings() if table is None else table, backend, module.weights)
        for a in args:
            c.patches[a] = []
        self._compile_body(c, fn)
        self._items, self.op_names, self.memory = c.items, c.names, c.plan
        self._input_patches = [c.patches[a] for a in args]

    def _compile_body(self, c: _Compiler, fn: func.FuncOp) -> None:
        ops = list(fn.body.block.ops)
        last_use: dict[SSAValue, int] = {}
        for i, op in enumerate(ops):
            for inner in op.walk():  # values read inside branch arms count as read by the branch
                for v in inner.operands:
                    last_use[v] = i
        ret = ops[-1]
        assert isinstance(ret, func.ReturnOp)
        dying: dict[int, list[SSAValue]] = {}
        for v, i in last_use.items():
            if i < len(ops) - 1:
                dying.setdefault(i, []).append(v)
        for i, op in enumerate(ops[:-1]):
            c.op(op)
            for r in op.results:  # results nobody reads are dead at once
                if r not in last_use:
                    c.release(r)
            for v in dying.get(i, ()):
                c.release(v)
        self._outputs = [None] * len(ret.operands)
        self._out_static = [False] * len(ret.operands)
        for i, v in enumerate(ret.operands):
            if v in c.static:
                self._outputs[i] = c.static[v]
                self._out_static[i] = True
            else:
                c.patches[v].append((self._outputs, i, False))

    def __len__(self) -> int:
        return len(self._items)

    def run(
        self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray], copy_outputs: bool = True
    ) -> dict[str, np.ndarray]:
        """Run once. Outputs are fresh copies unless `copy_outputs=False`, in which case they
        are the executor's own buffers, valid until the next run."""
        self._bind(inputs)
        i = 0
        try:
            for i, (fn, args) in enumerate(self._items):  # noqa: B007
                fn(*args)
        except Exception as e:  # name the op that failed, keep the kernel's message
            raise ExecutionError(
                f"'{self.op_names[i]}' (schedule item {i}) failed: {type(e).__name__}: {e}"
            ) from e
        outs = self._outputs
        if copy_outputs:
            return {n: np.array(a, copy=True) for n, a in zip(self.output_names, outs, strict=True)}
        return dict(zip(self.output_names, outs, strict=True))

    def _bind(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> None:
        if isinstance(inputs, Mapping):
            missing = [n for n in self.input_names if n not in inputs]
            extra = [n for n in inputs if n not in self.input_names]
            if missing or extra:
                raise InputError(_name_error(missing, extra, self.input_names))
            arrays = [inputs[n] for n in self.input_names]
        else:
            arrays = list(inputs)
            if len(arrays) != len(self.input_names):
                raise InputError(f"expected {len(self.input_names)} inputs "
                                 f"({', '.join(self.input_names)}), got {len(arrays)}")  # fmt: skip
        for name, arr, (dt, shape), patches in zip(
            self.input_names, arrays, self.input_specs, self._input_patches, strict=False
        ):
            if not isinstance(arr, np.ndarray) or arr.dtype != dt or arr.shape != shape:
                got = (
                    f"{arr.dtype}{list(arr.shape)}"
                    if isinstance(arr, np.ndarray)
                    else type(arr).__name__
                )  # noqa: E501
                raise InputError(f"input '{name}' must be {dt}{list(shape)}, got {got}")
            for lst, j, contiguous in patches:
                lst[j] = np.ascontiguousarray(arr) if contiguous else arr


def _name_error(missing: list[str], extra: list[str], expected: list[str]) -> str:
    parts = []
    if missing:
        parts.append(f"missing input(s) {', '.join(missing)}")
    if extra:
        parts.append(f"unknown input(s) {', '.join(extra)}")
    return f"{'; '.join(parts)} (the module takes: {', '.join(expected)})"
