"""The executor: compile a verified module once into a flat schedule, then run it many times.

Compilation resolves every kernel op through the binding table (`compile_op`, fail fast; with
the process-wide table, a device's backends load on its first op: `ensure_backend_kernels`),
preallocates every intermediate from a static memory plan per device that reuses a buffer
after its last use, turns reshapes, slices and single-index gathers into views, and lets the
producers of a concat's inputs write straight into its output (`runtime.views`). A run binds
the graph inputs into the prebuilt argument lists and walks the schedule: per op, one Python
call, except that each run of consecutive calls into fuel's native C library (and same-shape
f32 adds, and generated C kernels) whose buffers never move is one native program: one C call
(`runtime.work_items.fuse_native_runs`; a decode step: ~100 Python calls -> ~40).

Where an op runs is its `#fuel.device` placement (else its `fuel.pin`, else the host); the
backend is the one its `#fuel.kernel` stamp names, else the device's (`cpu` for the host, the
executor's `backend` argument there; `cuda` for `cuda:N`). Host ops are called inline with
numpy arrays, exactly as in a host-only module; a `fuel.c_launch` (generated C for a fused
group, `lowering/cpu/codegen.py`) is one ctypes call on a pointer array built here. Work on
another device is submitted to that device's stream (`runtime/devices.py`) and completes
asynchronously:

* `fuel.copy` moves bytes for real. It waits only on its producer's completion (the *wait
  set*: a device op records a completion event only when a copy reads its result), never on a
  global sync. A host buffer that an asynchronous copy reads is kept out of reuse until the
  end of the run; device buffers are only touched by their own stream, so stream order makes
  their reuse safe.
* Weights and constants are resident wherever they are used: uploaded once per device.
* A placement branch (`fuel.branch placement`) without a `fuel.picked` route is resolved by
  the `RoutePicker` (runtime/route.py) at the start of a run, cached by a memory fingerprint.
  The device buffers of a placement arm are allocated when the arm runs and returned at the end
  of the run, so free memory is what the picker weighs. Variant branches keep their baked or
  picked arm; gates are evaluated per run (a failed gate falls back to arm 0).
* The end of a run drains every device stream; outputs come back as numpy arrays.

A module lowered by the Triton backend (`fuel.triton_launch` of generated `fuel.triton_kernel`s,
`fuel.library_call`s of binding-table keys) runs the same way: `place_lowered` places every
launch and call on `cuda:0` unless a `#fuel.device` says otherwise and inserts the `fuel.copy`s
that move graph inputs, host-op operands and results across; a launch runs its kernel's source
(`runtime.loaders.triton.GeneratedKernel`: JIT-compiled by Triton on a real GPU, interpreted on
an emulated device), a library call the table's kernel at its key (the stamped sibling, if any).
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Operation, SSAValue
from xdsl.traits import SymbolTable

from fuel_dialect.attrs import DONATE_ATTR
from fuel_dialect.base import KernelOp
from fuel_dialect.branch import PICKED_ATTR, BranchOp, YieldOp, parse_gate
from fuel_dialect.dispatch import CopyOp, placed_device
from fuel_dialect.dtypes import dtype_name, shape_of
from fuel_dialect.ops_cpu import CKernelOp, CLaunchOp
from fuel_dialect.ops_movement import (
    ConstantOp,
    GatherOp,
    IndexCopyOp,
    ReshapeOp,
    SliceOp,
    TransposeOp,
    WeightOp,
)
from fuel_dialect.ops_triton import LibraryCallOp, TritonKernelOp, TritonLaunchOp
from runtime import native
from runtime.binding_table import BindingTableError, KernelBindingTable
from runtime.compiled import ExecutionError, InputError, compile_op, library_entry
from runtime.constants import dense_array
from runtime.devices import (
    DeviceRuntime,
    DeviceUnavailable,
    DeviceWorkError,
    OutOfDeviceMemory,
    make_runtime,
)
from runtime.dtypes import to_numpy
from runtime.in_place import InPlacePlanner
from runtime.judge import JudgeOracle
from runtime.kernels import ensure_backend_kernels, global_bindings
from runtime.kernels.cpu.native import encode_ufunc
from runtime.loaders.c import CodegenError as CCodegenError
from runtime.loaders.c import CPlan, kernel_for
from runtime.loaders.triton import CodegenError as TritonCodegenError
from runtime.loaders.triton import GeneratedKernel, KernelPlan
from runtime.lowered import is_lowered, place_lowered
from runtime.module import FuelModule, io_names
from runtime.native import blas
from runtime.relocate import Relocations, census
from runtime.route import ArmProfile, RoutePicker, arm_latency_ns
from runtime.topology import DEFAULT_BACKENDS, SystemTopology, TopologyError
from runtime.views import ViewPlanner, moves_unit_dims
from runtime.work_items import (
    Patch,
    Slot,
    arm_alloc_item,
    branch_item,
    c_dynamic_item,
    copy_in_item,
    copy_out_item,
    copy_peer_item,
    device_item,
    fuse_native_runs,
)

HOST = "cpu"


@dataclass
class MemoryPlan:
    """Static buffer plan of one device: buffers allocated vs. one buffer per intermediate."""

    buffers: int = 0
    planned_bytes: int = 0
    naive_bytes: int = 0


@dataclass
class _Storage:
    raw: Any | None  # a pooled raw buffer
    refs: int = 1
    device: str = HOST
    pinned: bool = False  # read by another stream's asynchronous copy: held to the end of a run


class _Devices:
    """The runtimes of the devices a module touches, made on first use."""

    def __init__(self, topology: SystemTopology | None, runtimes: Mapping[str, DeviceRuntime]):
        self.topology = topology
        self.runtimes: dict[str, DeviceRuntime] = dict(runtimes)

    def get(self, name: str) -> DeviceRuntime:
        rt = self.runtimes.get(name)
        if rt is None:
            capacity = None
            if self.topology is not None:
                try:
                    capacity = self.topology.device(name).memory_bytes
                except TopologyError as e:
                    raise ExecutionError(f"the module uses device '{name}': {e}") from None
            try:
                rt = self.runtimes[name] = make_runtime(name, capacity)
            except DeviceUnavailable as e:
                raise ExecutionError(f"cannot run on {name}: {e}") from None
        return rt

    def backends(self, name: str) -> tuple[str, ...]:
        if self.topology is not None:
            return self.topology.backends_on(name)
        return DEFAULT_BACKENDS.get(name.split(":")[0], ())


@dataclass
class _Compiler(ViewPlanner, InPlacePlanner):
    """Walks the entry function once, building the schedule and the memory plans."""

    table: KernelBindingTable
    backend: str
    weights: Mapping[str, np.ndarray]
    devices: _Devices
    judge: JudgeOracle | None = None
    global_table: bool = False
    """`table` is a process-wide snapshot: a device's backends load into it on first use."""
    items: list[tuple[Any, list[Any]]] = field(default_factory=list)
    """(callable, positional args): `kernel(ins, outs, params)` or `direct(*ins, *outs)`."""
    names: list[str] = field(default_factory=list)
    static: dict[SSAValue, Any] = field(default_factory=dict)
    """Values whose array is fixed at compile time: planned buffers, weights, constants."""
    anywhere: set[SSAValue] = field(default_factory=set)
    """Weights, constants and their views: resident on every device that reads them."""
    patches: dict[SSAValue, list[Patch]] = field(default_factory=dict)
    storage: dict[SSAValue, _Storage] = field(default_factory=dict)
    where: dict[SSAValue, str] = field(default_factory=dict)  # absent: the host
    slots: dict[SSAValue, Slot] = field(default_factory=dict)
    uploads: dict[tuple[SSAValue, str], Any] = field(default_factory=dict)
    pools: dict[str, list[Any]] = field(default_factory=dict)
    plan: MemoryPlan = field(default_factory=MemoryPlan)
    plans: dict[str, MemoryPlan] = field(default_factory=dict)
    live: dict[str, int] = field(default_factory=dict)
    """Bytes of planned buffers holding a live value, per device (top level)."""
    resident: dict[str, int] = field(default_factory=dict)
    """Bytes of weights and constants per device (host arrays and device uploads)."""
    trace: list[dict[str, int]] = field(default_factory=list)
    marks: list[tuple[int, list[dict[str, int]], list[int]]] = field(default_factory=list)
    """Top-level branches: (schedule index, bytes per device of each arm, taken-arm cell)."""
    routes: list[tuple[BranchOp, list[ArmProfile], list[int]]] = field(default_factory=list)
    used: set[str] = field(default_factory=set)  # non-host devices with work
    wait_set: list[str] = field(default_factory=list)  # producers a copy waits on, by op name
    held: list[tuple[DeviceRuntime, Any]] = field(default_factory=list)
    arm_owned: set[SSAValue] = field(default_factory=set)
    arm_bytes: dict[str, int] | None = None  # set while compiling an arm
    arm_transfers: list[tuple[str, str, int]] | None = None
    lazy: list[tuple[DeviceRuntime, np.dtype, tuple[int, ...], list[Patch]]] | None = None
    top_index: int = 0
    into: dict[SSAValue, tuple[SSAValue, tuple]] = field(default_factory=dict)
    """Producer results written straight into a block of a concat's output: (concat result,
    basic index of the block); see `plan_concats`."""
    into_t: dict[SSAValue, tuple[SSAValue, tuple[int, ...]]] = field(default_factory=dict)
    """Producer results written straight into a transpose's output, seen through the inverse
    permutation: (transpose result, inverse perm); see `plan_transposes`."""
    elided: set[Operation] = field(default_factory=set)
    """Concats whose every input is written in place, transposes whose input is written
    transposed: nothing left to copy."""
    input_views: set[SSAValue] = field(default_factory=set)
    """Graph inputs and the views of them: a returned one is copied even with
    `copy_outputs=False` (an output never aliases the caller's input)."""
    keep: list[Any] = field(default_factory=list)
    """Arrays a generated C kernel reaches only through a raw pointer: kept alive here."""
    generated: dict[str, Any] = field(default_factory=dict)
    """Generated Triton kernels by symbol name (one load per `fuel.triton_kernel`)."""
    encoded: dict[int, Any] = field(default_factory=dict)
    """id(args) of a top-level item -> its `runtime.native.Record`: the same call, as a
    record of a native program (see `runtime.work_items.fuse_native_runs`)."""
    native: bool = False
    """fuel's native library may run programs here (`runtime.native.available()`)."""
    prepared: dict[Any, Any] = field(default_factory=dict)
    """What kernels derived once from constant operands (`prepare`: packed weights), shared
    by every op that reads the same constant; held for the executor's life."""
    donated: set[SSAValue] = field(default_factory=set)
    """Donated graph inputs and the in-place updates of them (`runtime.in_place`)."""
    in_place: list[str] = field(default_factory=list)
    view_last: dict[SSAValue, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.plans[HOST] = self.plan
        self.native = native.available()

    def hold(self, device: str, nbytes: int) -> None:
        counts = self.live if self.arm_bytes is None else self.arm_bytes
        counts[device] = counts.get(device, 0) + nbytes

    def alloc(self, v: SSAValue, device: str = HOST) -> Any:
        """A planned buffer for `v` on `device`, or None for a lazily allocated arm value
        (then `patches[v]` receives it when the arm runs)."""
        dt, shape = to_numpy(dtype_name(v.type)), shape_of(v.type)
        nbytes = max(1, math.prod(shape) * dt.itemsize)
        rt = self.devices.get(device)
        if device != HOST:
            self.where[v] = device
            if self.lazy is not None:
                self.patches[v] = consumers = []
                self.lazy.append((rt, dt, shape, consumers))
                self.hold(device, nbytes)
                return None
        plan = self.plans.setdefault(device, MemoryPlan())
        plan.naive_bytes += nbytes
        free = self.pools.setdefault(device, [])
        fits = [i for i, b in enumerate(free) if rt.nbytes(b) >= nbytes]
        if fits:  # best fit: the smallest free buffer that holds the value
            raw = free.pop(min(fits, key=lambda i: rt.nbytes(free[i])))
        else:
            try:
                raw = rt.raw(nbytes)
            except OutOfDeviceMemory as e:
                raise ExecutionError(f"the memory plan does not fit: {e}") from None
            plan.buffers += 1
            plan.planned_bytes += nbytes
        self.storage[v] = _Storage(raw, 1, device)
        self.hold(device, rt.nbytes(raw))
        return rt.view(raw, dt, shape)

    def outputs(self, results: Sequence[SSAValue], device: str) -> list[Any]:
        outs: list[Any] = []
        for j, r in enumerate(results):
            a = self.alloc(r, device)
            outs.append(a)
            if a is None:
                self.patches[r].append((outs, j, False))
            else:
                self.static[r] = a
        return outs

    def upload(self, v: SSAValue, device: str) -> Any:
        """A weight or constant, resident on `device` (uploaded once)."""
        key = (v, device)
        if key not in self.uploads:
            arr = np.ascontiguousarray(self.static[v])
            try:
                self.uploads[key] = self.devices.get(device).adopt(arr)
            except OutOfDeviceMemory as e:
                raise ExecutionError(f"weights do not fit: {e}") from None
            self.resident[device] = self.resident.get(device, 0) + arr.nbytes
        return self.uploads[key]

    def operand_list(
        self,
        operands: Sequence[SSAValue],
        contiguous: bool,
        device: str | None = HOST,
        user: str = "",
    ) -> list[Any]:
        """The argument list of an item on `device` (None: wherever each value lives)."""
        args: list[Any] = []
        for i, v in enumerate(operands):
            if device not in (None, HOST) and v in self.anywhere:
                args.append(self.upload(v, device))
                continue
            at = self.where.get(v, HOST)
            if device is not None and at != device and v not in self.anywhere:
                raise ExecutionError(
                    f"'{user}' runs on {device} but reads a value resident on {at}; a "
                    "fuel.copy must move it (plan with fuel-select)"
                )
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
        if st is None or v in self.arm_owned:  # arm buffers are never reused
            return
        st.refs -= 1
        if st.refs == 0 and st.raw is not None and not st.pinned:
            self.pools[st.device].append(st.raw)
            self.live[st.device] -= self.devices.get(st.device).nbytes(st.raw)

    def op(self, op: Operation) -> None:
        if isinstance(op, WeightOp | ConstantOp):
            arr = _weight(self.weights, op) if isinstance(op, WeightOp) else dense_array(op.value)
            self.static[op.result] = arr
            self.anywhere.add(op.result)
            self.resident[HOST] = self.resident.get(HOST, 0) + arr.nbytes
        elif isinstance(op, ReshapeOp) or (isinstance(op, TransposeOp) and moves_unit_dims(op)):
            self.reshape(op.input, op.result)
        elif isinstance(op, GatherOp | SliceOp) and self.select_view(op):
            pass
        elif isinstance(op, TransposeOp) and self.transpose_view(op):
            pass
        elif op in self.elided:  # its inputs were written into its output (or transposed)
            pass
        elif isinstance(op, IndexCopyOp) and self.index_copy_in_place(op):
            pass
        elif isinstance(op, CopyOp):
            self.copy(op)
        elif isinstance(op, KernelOp):
            device = placed_device(op)
            if device is None or device == HOST:
                self.kernel(op)
            else:
                self.device_kernel(op, device)
        elif isinstance(op, BranchOp):
            self.branch(op)
        elif isinstance(op, CLaunchOp):
            self.c_launch(op)
        elif isinstance(op, TritonLaunchOp):
            self.triton_launch(op)
        elif isinstance(op, LibraryCallOp):
            self.library_call(op)
        else:
            raise ExecutionError(f"the executor cannot run '{op.name}'")

    def branch(self, op: BranchOp) -> None:
        """Each arm becomes a sub-schedule; one item evaluates the gate, runs the picked arm
        (a failed gate falls back to arm 0) and hands its yielded values to the branch's
        consumers. The pick is `fuel.picked` (else arm 0) for a variant branch or a placement
        branch given an explicit route; otherwise the route picker's. Arm buffers are never
        reused (arms are small); a placement arm's device buffers are allocated per run."""
        placement = op.kind.data == "placement"
        outer = (self.items, self.names, self.lazy, self.arm_bytes, self.arm_transfers)
        compiled = [self.arm(op, i, placement, outer[2]) for i in range(len(op.arms))]
        self.items, self.names, self.lazy, self.arm_bytes, self.arm_transfers = outer
        arms = [(items, holder) for items, holder, _, _ in compiled]
        needs = [n for _, _, n, _ in compiled]
        if self.arm_bytes is not None:  # nested: every arm counts toward the enclosing arm
            for n in needs:
                for d, b in n.items():
                    self.hold(d, b)
        gates = [parse_gate(op.gate(i)) if op.gate(i) else [] for i in range(len(op.arms))]
        gate_args = self.operand_list(list(op.gate_operands), contiguous=False, device=None)
        picked_attr = op.attributes.get(PICKED_ATTR)
        pick = [picked_attr.value.data if isinstance(picked_attr, IntegerAttr) else 0]
        if placement and len(arms) > 1 and picked_attr is None:
            profiles = [self.profile(op, i, c[2], c[3]) for i, c in enumerate(compiled)]
            self.routes.append((op, profiles, pick))
        taken = [0]
        if self.arm_bytes is None:
            self.marks.append((self.top_index, needs, taken))
        consumers, out_slots = self.branch_results(op)
        self.items.append(
            (branch_item, [arms, gates, gate_args, pick, consumers, out_slots, taken])
        )
        self.names.append(op.name)

    def arm(self, op: BranchOp, i: int, placement: bool, outer_lazy: list | None) -> tuple:
        """Compile arm `i`: (items, yielded values, bytes per device, transfers)."""
        self.items, self.names, self.arm_bytes, self.arm_transfers = [], [], {}, []
        self.lazy = [] if placement and outer_lazy is None else outer_lazy
        for inner in op.arms[i].block.ops:
            if not isinstance(inner, YieldOp):
                self.op(inner)
            for r in inner.results:
                self.arm_owned.add(r)
        holder = self.operand_list(list(op.yielded(i).values), False, None)
        if self.lazy and self.lazy is not outer_lazy:
            self.items.insert(0, (arm_alloc_item, [self.lazy, self.held]))
        return self.items, holder, self.arm_bytes, self.arm_transfers

    def branch_results(self, op: BranchOp) -> tuple[list[list[Patch]], list]:
        """Consumer lists of the results, and a completion slot per device-resident result."""
        consumers: list[list[Patch]] = []
        out_slots: list[tuple[Slot, DeviceRuntime]] = []
        for j, r in enumerate(op.outs):
            self.patches[r] = lst = []
            consumers.append(lst)
            homes = {self.where.get(op.yielded(i).values[j], HOST) for i in range(len(op.arms))}
            if len(homes) > 1:
                raise ExecutionError(
                    f"the arms of '{op.name}' yield result {j} on different "
                    f"devices ({', '.join(sorted(homes))})"
                )
            home = homes.pop()
            if home != HOST:
                self.where[r] = home
                self.slots[r] = slot = Slot()
                out_slots.append((slot, self.devices.get(home)))
        return consumers, out_slots

    def profile(
        self, op: BranchOp, i: int, needs: dict[str, int], transfers: list[tuple[str, str, int]]
    ) -> ArmProfile:
        ops = [o for o in op.arms[i].walk() if isinstance(o, KernelOp)]
        devices = {placed_device(o) or HOST for o in ops} | {d for _, d, _ in transfers}
        topo = self.devices.topology
        return ArmProfile(
            dict(needs), frozenset(devices), arm_latency_ns(ops, transfers, self.judge, topo)
        )

    def kernel(self, op: Operation) -> None:
        try:
            node = compile_op(op, self.table, self.backend)
        except BindingTableError as e:
            raise ExecutionError(f"cannot compile '{op.name}': {e}") from None
        contiguous = not node.entry.caps.strided_input
        ins = self.operand_list(op.operands, contiguous, HOST, op.name)
        outs = [self.alloc_into(r) for r in op.results]
        for r, a in zip(op.results, outs, strict=True):
            self.static[r] = a
        static = all(a is not None for a in ins)  # no per-run operand
        if node.entry.direct is not None and not node.params:
            ins.extend(outs)  # one positional call straight into the ufunc; patches still index ins
            self.items.append((node.entry.direct, ins))
            if static and self.native and self.arm_bytes is None:
                self.encode(ins, encode_ufunc(node.entry.direct, ins))
        else:
            kernel = self.prepare(node.entry.kernel, op, ins, node.params)
            self.items.append((kernel, args := [ins, outs, node.params]))
            encode = getattr(kernel, "encode", None)
            if encode is not None and static and self.native and self.arm_bytes is None:
                self.encode(args, encode(ins, outs, node.params))
        self.names.append(op.name)

    def prepare(self, kernel: Any, op: KernelOp, ins: list[Any], params: Any) -> Any:
        """`kernel`, or what its `prepare` makes of it given the operands that are constants
        (weights never move nor change: a native GEMM packs them once, here). The bytes it
        derives count as resident, like the weights."""
        prepare = getattr(kernel, "prepare", None)
        if prepare is None or not self.native:
            return kernel
        constants = [
            a if v in self.anywhere else None for v, a in zip(op.operands, ins, strict=True)
        ]
        had = len(self.prepared)  # a dict keeps insertion order: the new entries come last
        made = prepare(constants, [shape_of(v.type) for v in op.operands], params, self.prepared)
        grown = sum(a.nbytes for a in list(self.prepared.values())[had:])
        self.resident[HOST] = self.resident.get(HOST, 0) + grown
        return kernel if made is None else made

    def encode(self, args: list[Any], record: Any) -> None:
        if record is not None:
            self.encoded[id(args)] = record

    def c_launch(self, op: CLaunchOp) -> None:
        """A generated C kernel (`fuel.c_launch`): one ctypes call on a prebuilt pointer array.
        Planned buffers, weights and constants never move, so their pointers are set now; a
        per-run value (a graph input) is re-pointed only when a run binds another array."""
        device = placed_device(op)
        if device not in (None, HOST):
            raise ExecutionError(
                f"'{op.name}' @{op.kernel.string_value()} is placed on {device}; "
                "generated C kernels run on the host"
            )
        sym = SymbolTable.lookup_symbol(op, op.kernel)
        if not isinstance(sym, CKernelOp):
            raise ExecutionError(
                f"'{op.name}': no fuel.c_kernel @{op.kernel.string_value()} in the module"
            )
        try:
            fn = kernel_for(CPlan.from_op(sym)).fn
        except CCodegenError as e:
            raise ExecutionError(f"cannot load C kernel @{sym.sym_name.data}: {e}") from None
        arrays = self.operand_list(op.args, True, HOST, op.name)
        outs = [self.alloc_into(r) for r in op.results]  # a result may fill a concat's block
        for r, a in zip(op.results, outs, strict=True):
            self.static[r] = a
        arrays.extend(outs)  # patches still index the inputs
        ptrs = (ctypes.c_void_p * len(arrays))()
        dyn = [j for j, a in enumerate(arrays) if a is None]
        for j, a in enumerate(arrays):
            if a is not None:
                ptrs[j] = a.ctypes.data
        self.keep.append(arrays)
        if dyn:
            self.items.append((c_dynamic_item, [fn, ptrs, arrays, dyn, [None] * len(arrays)]))
        else:
            self.items.append((fn, args := [ptrs]))
            if self.native and self.arm_bytes is None:  # a native program may call it too
                addr = ctypes.cast(fn, ctypes.c_void_p).value
                self.encode(args, native.Record([native.OP_CALL, addr, ctypes.addressof(ptrs)]))
        self.names.append(f"{op.name} @{sym.sym_name.data}")

    def device_kernel(self, op: Operation, device: str) -> None:
        """Submit the kernel to `device`'s stream; its completion is recorded only when a copy
        waits on it (the slot is marked while compiling that copy)."""
        rt = self.devices.get(device)
        try:
            node = compile_op(op, self.table_for(device), rt.backend)
        except BindingTableError as e:
            raise ExecutionError(f"cannot compile '{op.name}' for {device}: {e}") from None
        self.check_backend(op.name, node.backend, device)
        self.submit(op, device, node.entry.kernel, node.params, op.name)

    def table_for(self, device: str) -> KernelBindingTable:
        """The table to compile `device`'s ops with: with the process-wide table, first load
        the kernels of `device`'s backends (the cuda backend's on first use)."""
        if self.global_table:
            missing = ensure_backend_kernels(self.devices.backends(device))
            if missing:
                raise ExecutionError(f"cannot run on {device}: {'; '.join(missing.values())}")
            self.table = global_bindings()
        return self.table

    def check_backend(self, name: str, backend: str, device: str) -> None:
        if backend not in self.devices.backends(device):
            raise ExecutionError(
                f"'{name}' is placed on {device} but its kernel runs on backend "
                f"'{backend}', which {device} does not serve"
            )

    def submit(self, op: Operation, device: str, kernel: Any, params: Any, label: str) -> None:
        """One item submitting `kernel(ins, outs, params)` to `device`'s stream."""
        rt = self.devices.get(device)
        ins = self.operand_list(op.operands, False, device, op.name)
        outs = self.outputs(op.results, device)
        slot = Slot()
        for r in op.results:
            self.slots[r] = slot
        self.used.add(device)
        self.items.append((device_item, [rt, kernel, ins, outs, params, slot, label]))
        self.names.append(label)

    def lowered_device(self, op: Operation) -> str:
        device = placed_device(op)
        if device is None or not device.startswith("cuda:"):
            raise ExecutionError(
                f"'{op.name}' must be placed on a cuda device, not "
                f"{device or 'the host'} (see place_lowered)"
            )
        return device

    def triton_launch(self, op: TritonLaunchOp) -> None:
        """A generated Triton kernel: its `fuel.triton_kernel` source, loaded once per symbol."""
        device, name = self.lowered_device(op), op.kernel.string_value()
        if name not in self.generated:
            sym = SymbolTable.lookup_symbol(op, op.kernel)
            if not isinstance(sym, TritonKernelOp):
                raise ExecutionError(f"'{op.name}': no fuel.triton_kernel @{name} in the module")
            try:
                self.generated[name] = GeneratedKernel(KernelPlan.from_op(sym))
            except (TritonCodegenError, SyntaxError) as e:
                raise ExecutionError(f"cannot load Triton kernel @{name}: {e}") from None
        self.submit(op, device, self.generated[name], {}, f"{op.name} @{name}")

    def library_call(self, op: LibraryCallOp) -> None:
        """A binding-table kernel by key (honouring a `fuel.kernel` stamp's sibling)."""
        device = self.lowered_device(op)
        name, dtypes, backend = op.key()
        self.check_backend(op.name, backend, device)
        try:
            entry = library_entry(op, self.table_for(device))
        except BindingTableError as e:
            raise ExecutionError(
                f"cannot run library call '{name}' [{', '.join(dtypes)}] on "
                f"{device} (does the table hold the Triton kernels? "
                f"runtime.kernels.triton.registry.register_triton_kernels): "
                f"{e}"
            ) from None
        self.submit(op, device, entry.kernel, op.kernel_params(), f"{op.name} {name}")

    def copy(self, op: CopyOp) -> None:
        """A real transfer between devices; see the module doc for waits and buffer reuse."""
        src_v, result, dst = op.input, op.result, op.target.data
        dst_rt = self.devices.get(dst)
        if src_v in self.anywhere:  # a weight or constant: resident wherever it is read
            self.static[result] = self.static[src_v]
            self.anywhere.add(result)
            return
        src = self.where.get(src_v, HOST)
        if src == dst:  # the same bytes
            self.reshape(src_v, result)
            return
        if self.arm_transfers is not None:
            self.arm_transfers.append((src, dst, _nbytes(result)))
        ins = self.operand_list([src_v], False, src, op.name)
        outs = self.outputs([result], dst)
        src_slot = self.slots.get(src_v)
        if src_slot is not None:
            src_slot.waited = True
            self.wait_set.append(src_v.owner.name)  # type: ignore[union-attr]
        dst_slot = Slot()
        if dst != HOST:
            self.slots[result] = dst_slot
            self.used.add(dst)
        if src == HOST:
            self.pin(src_v)
            self.items.append((copy_in_item, [dst_rt, ins, outs, dst_slot]))
        elif dst == HOST:
            self.used.add(src)
            self.items.append((copy_out_item, [self.devices.get(src), ins, outs, src_slot]))
        else:
            self.pin(src_v)
            self.items.append((copy_peer_item, [dst_rt, ins, outs, src_slot, dst_slot]))
        self.names.append(op.name)

    def pin(self, v: SSAValue) -> None:
        """An asynchronous copy reads `v` from another stream: keep its buffer out of reuse."""
        st = self.storage.get(v)
        if st is not None:
            st.pinned = True


def _nbytes(v: SSAValue) -> int:
    return math.prod(shape_of(v.type)) * to_numpy(dtype_name(v.type)).itemsize


MOVE_BYTES = 64 * 1024
"""Outputs from this size are handed over uncopied (`runtime.relocate`); below it a copy costs
less than moving the schedule off a buffer the caller kept."""


def _movable_outputs(
    c: _Compiler, items: list[Any], outputs: list[Any], pipelined: bool
) -> list[Relocations | None]:
    """Per output, the references to its planned host buffer where every one can be moved
    (`runtime.relocate.census`), else None (a weight, a view of an input, a donated input, a
    small output, or a buffer some reference pins: those are copied)."""
    moves: list[Relocations | None] = [None] * len(outputs)
    if pipelined:
        return moves
    planned = {id(st.raw): st.raw for st in c.storage.values() if st.device == HOST}
    words = [k for k in c.keep if isinstance(k, np.ndarray) and k.dtype == np.int64]
    found: dict[int, Relocations | None] = {}
    for i, a in enumerate(outputs):
        raw = a.base if isinstance(a, np.ndarray) else None
        if raw is None or id(raw) not in planned or raw.nbytes < MOVE_BYTES:
            continue
        if id(raw) not in found:
            found[id(raw)] = census(raw, [items, outputs, c.keep], words)
        moves[i] = found[id(raw)]
    return moves


def _donated(fn: func.FuncOp, i: int) -> bool:
    """Argument `i` carries `fuel.donate` (the run may update its buffer in place)."""
    return fn.arg_attrs is not None and DONATE_ATTR in fn.arg_attrs.data[i].data


def _weight(weights: Mapping[str, np.ndarray], op: WeightOp) -> np.ndarray:
    name = op.sym_name.data
    if name not in weights:
        raise ExecutionError(f"weight '{name}' has no data (is the .safetensors file missing?)")
    arr, dt, shape = weights[name], to_numpy(dtype_name(op.result.type)), shape_of(op.result.type)
    if arr.shape != shape or arr.dtype != dt:
        raise ExecutionError(
            f"weight '{name}' is {arr.dtype}{list(arr.shape)}, IR declares {op.result.type}"
        )
    return arr


def route_peak(
    trace: list[dict[str, int]],
    marks: Sequence[tuple[int, list[dict[str, int]], Any]],
    route: Sequence[int],
    resident: Mapping[str, int],
) -> dict[str, int]:
    """Peak bytes per device along one route: resident bytes + the live planned buffers at each
    top-level op + the buffers of every arm taken so far (held to the end of the run)."""
    peak: dict[str, int] = {}
    extra: dict[str, int] = {}
    k = 0
    for t, live in enumerate(trace):
        while k < len(marks) and marks[k][0] <= t:
            for d, b in marks[k][1][route[k]].items():
                extra[d] = extra.get(d, 0) + b
            k += 1
        for d in live.keys() | extra.keys():
            peak[d] = max(peak.get(d, 0), live.get(d, 0) + extra.get(d, 0))
    for d, b in resident.items():
        peak[d] = peak.get(d, 0) + b
    return peak


class Executor:
    """Runs a module's entry function (or `function`) from a precompiled flat schedule: on the
    host, and on the devices its ops are placed on (`topology` gives their capacities and
    backends; `devices` shares runtimes between executors; `judge` feeds the route picker). A
    lowered module (`is_lowered`) first goes through `place_lowered(module, lowered_device)`."""

    def __init__(
        self,
        module: FuelModule,
        table: KernelBindingTable | None = None,
        backend: str = "cpu",
        *,
        topology: SystemTopology | None = None,
        devices: Mapping[str, DeviceRuntime] | None = None,
        judge: JudgeOracle | None = None,
        lowered_device: str = "cuda:0",
        function: str | None = None,
    ):
        if is_lowered(module):
            module = place_lowered(module, lowered_device)
        fn = module.function(function)
        self.input_names, self.output_names = io_names(fn)
        args = list(fn.body.block.args)
        self.input_specs = [(to_numpy(dtype_name(a.type)), shape_of(a.type)) for a in args]
        self._devices = _Devices(topology, devices or {})
        c = _Compiler(
            global_bindings() if table is None else table,
            backend,
            module.weights,
            self._devices,
            judge,
            global_table=table is None,
        )
        for a in args:
            c.patches[a] = []
        c.input_views.update(args)
        self._donated = [_donated(fn, i) for i in range(len(args))]
        c.donated.update(a for a, d in zip(args, self._donated, strict=True) if d)
        self._compile_body(c, fn)
        self.call_names = list(c.names)
        """The op of every call a run makes, in order (`op_names` per schedule item: a native
        program item stands for several calls)."""
        if c.encoded and not (c.used or c.marks):  # host only, no top-level branch indices
            c.items, c.names = fuse_native_runs(c.items, c.names, c.encoded, c.keep)
        self._items, self.op_names, self.memory = c.items, c.names, c.plan
        self.memory_by_device = c.plans
        self.wait_set = c.wait_set
        """Ops whose completion a copy waits on (one entry per copy of a device value)."""
        self._input_patches = [c.patches[a] for a in args]
        self.in_place = c.in_place
        """The ops that write into their operand's buffer (`runtime.in_place`)."""
        self._keep = c.keep
        self._held, self._used = c.held, [self._devices.get(d) for d in sorted(c.used)]
        self._trace, self._marks, self._resident = c.trace, c.marks, c.resident
        self._peaks: dict[tuple[int, ...], dict[str, int]] = {}
        self._peak = self._route_peak(tuple(0 for _ in c.marks))
        self.route_picker: RoutePicker | None = None
        if c.routes:
            self.route_picker = RoutePicker(self._devices.runtimes)
            for _, profiles, cell in c.routes:
                self.route_picker.add(profiles, cell)
        self._pipelined = bool(c.used or c.marks)
        self._moves = _movable_outputs(c, self._items, self._outputs, self._pipelined)
        """Per output, the references to its planned buffer (`runtime.relocate`), or None:
        an output that has them is handed over uncopied; a run first moves the schedule off
        any such buffer the caller still holds."""
        self._movers = list({id(r): r for r in self._moves if r is not None}.values())

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
        c.plan_concats(ops)
        c.plan_transposes(ops)
        c.plan_in_place(ops, last_use)
        for v, i in last_use.items():
            if i < len(ops) - 1:
                dying.setdefault(i, []).append(v)
        for i, op in enumerate(ops[:-1]):
            c.top_index = i
            c.op(op)
            c.trace.append(dict(c.live))
            for r in op.results:  # results nobody reads are dead at once
                if r not in last_use:
                    c.release(r)
            for v in dying.get(i, ()):
                c.release(v)
        self._outputs: list[Any] = [None] * len(ret.operands)
        self._out_static = [False] * len(ret.operands)
        self._out_where = [c.where.get(v, HOST) for v in ret.operands]
        self._out_alias = [v in c.input_views for v in ret.operands]
        self.donated_outputs = [v in c.donated for v in ret.operands]
        """Outputs that are a donated input's array, updated in place: handed back uncopied."""
        for i, v in enumerate(ret.operands):
            if v in c.anywhere:
                self._out_where[i] = HOST
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
        """Run once. Outputs are fresh copies unless `copy_outputs=False`, in which case host
        outputs are the executor's own buffers, valid until the next run (outputs resident on
        a device are always read back into fresh arrays; a view of an input is always copied:
        an output never aliases the caller's input, except a donated input's in-place update,
        which is the caller's array: `donated_outputs`). A large host output (`MOVE_BYTES`)
        is handed over uncopied either way: the caller gets the executor's buffer, which no
        later run writes while the caller holds it (`runtime.relocate`)."""
        self._bind(inputs)
        with blas.one_thread():  # one pool: numpy's BLAS on the calling thread (blas.py)
            if self._pipelined:
                return self._run_pipelined(copy_outputs)
            self._walk()
        outs = self._outputs
        return dict(zip(self.output_names, self._handed(outs, copy_outputs), strict=True))

    def _handed(self, outs: Sequence[Any], copy_outputs: bool) -> list[Any]:
        """Host outputs as handed back: copies, or (`copy_outputs=False`) the executor's own
        buffers; a view of an input is always copied. A movable output is its buffer, as a
        new view (which holds the buffer: the next run sees the caller keep it)."""
        return [
            a.view()
            if move is not None
            else np.array(a, copy=True)
            if (copy_outputs or alias) and not mine
            else a
            for a, alias, mine, move in zip(
                outs, self._out_alias, self.donated_outputs, self._moves, strict=True
            )
        ]

    def profile_items(
        self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray], runs: int = 20
    ) -> list[tuple[str, int, float]]:
        """Time every schedule item alone over `runs` runs (after one untimed run): one row
        per distinct item name, `(name, items per run, median seconds per run)`, slowest
        first. A native program's name lists its kernels. Host schedules only (a device's
        work completes asynchronously: its items would time their submission)."""
        import statistics
        import time

        if self._pipelined:
            raise ExecutionError("profiling times host schedules; this one drives devices")
        self._bind(inputs)
        per_run = []
        with blas.one_thread():
            self._walk()
            for _ in range(max(1, runs)):
                t = [0.0] * len(self._items)
                for i, (fn, args) in enumerate(self._items):
                    t0 = time.perf_counter()
                    fn(*args)
                    t[i] = time.perf_counter() - t0
                per_run.append(t)
        rows: dict[str, tuple[int, float]] = {}
        for i, name in enumerate(self.op_names):
            n, total = rows.get(name, (0, 0.0))
            rows[name] = (n + 1, total + statistics.median(t[i] for t in per_run))
        return sorted(((n, c, s) for n, (c, s) in rows.items()), key=lambda r: -r[2])

    def _walk(self) -> None:
        i = 0
        try:
            for i, (fn, args) in enumerate(self._items):  # noqa: B007
                fn(*args)
        except Exception as e:  # name the op that failed, keep the kernel's message
            raise ExecutionError(
                f"'{self.op_names[i]}' (schedule item {i}) failed: {type(e).__name__}: {e}"
            ) from e

    def _run_pipelined(self, copy_outputs: bool) -> dict[str, np.ndarray]:
        """Resolve the route (cached), walk, drain every device, read device outputs back."""
        if self.route_picker is not None:
            self.route_picker.refresh()
        try:
            self._walk()
            self._drain()
            outs: list[Any] = []
            for a, at, alias, mine in zip(
                self._outputs, self._out_where, self._out_alias, self.donated_outputs, strict=True
            ):
                if at == HOST:
                    copy = (copy_outputs or alias) and not mine
                    outs.append(np.array(a, copy=True) if copy else a)
                else:
                    outs.append(self._read_back(a, at))
        except BaseException:
            self._drain(quiet=True)  # leave no work queued behind a failed run
            raise
        finally:
            for rt, raw in self._held:
                rt.free(raw)
            self._held.clear()
        self._measure()
        return dict(zip(self.output_names, outs, strict=True))

    def _read_back(self, t: Any, device: str) -> np.ndarray:
        arr = np.empty(tuple(t.shape), to_numpy(_numpy_name(t)))
        self._devices.get(device).to_host(t, arr)
        return arr

    def _drain(self, quiet: bool = False) -> None:
        for rt in self._used:
            try:
                rt.synchronize()
            except DeviceWorkError as e:
                if not quiet:
                    raise ExecutionError(str(e)) from e

    def _measure(self) -> None:
        if not self._marks:
            return
        peak = self._route_peak(self.last_route())
        for d, b in peak.items():
            self._peak[d] = max(self._peak.get(d, 0), b)

    def _route_peak(self, route: tuple[int, ...]) -> dict[str, int]:
        if route not in self._peaks:
            self._peaks[route] = route_peak(self._trace, self._marks, route, self._resident)
        return dict(self._peaks[route])

    @property
    def runtimes(self) -> Mapping[str, DeviceRuntime]:
        """The device runtimes this executor drives (the host's included), by device name."""
        return self._devices.runtimes

    def last_route(self) -> tuple[int, ...]:
        """The arm each top-level branch ran in the last run, in schedule order."""
        return tuple(cell[0] for _, _, cell in self._marks)

    def memory_peak_by_device(self) -> dict[str, int]:
        """Peak bytes per device over the runs so far (before any run: the all-arm-0 route).

        Counted: weights and constants resident on the device (host arrays once; each device
        upload once; what kernels derived from them, such as packed weights), plus the planned
        buffers holding a live value at each top-level op (a pooled buffer counts its full size
        from the op defining its value until the value's last use; a host buffer pinned by an
        asynchronous copy counts to the end of the run), plus the buffers of each branch arm
        that ran, from the branch to the end of the run. Not counted: the caller's input arrays
        and the output copies handed back. A schedule without branches has one route, so its
        peak is known from compilation.
        """
        return dict(self._peak)

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
                raise InputError(
                    f"expected {len(self.input_names)} inputs "
                    f"({', '.join(self.input_names)}), got {len(arrays)}"
                )
        for name, arr, (dt, shape), patches, donated in zip(
            self.input_names,
            arrays,
            self.input_specs,
            self._input_patches,
            self._donated,
            strict=False,
        ):
            if not isinstance(arr, np.ndarray) or arr.dtype != dt or arr.shape != shape:
                got = (
                    f"{arr.dtype}{list(arr.shape)}"
                    if isinstance(arr, np.ndarray)
                    else type(arr).__name__
                )  # noqa: E501
                raise InputError(f"input '{name}' must be {dt}{list(shape)}, got {got}")
            if donated and not (arr.flags.writeable and arr.flags.c_contiguous):
                raise InputError(
                    f"input '{name}' is donated (updated in place): it must be a writable "
                    "C-contiguous array"
                )
            for lst, j, contiguous in patches:
                lst[j] = np.ascontiguousarray(arr) if contiguous else arr
        for rel in self._movers:  # never write into an output the caller still holds
            if rel.held():
                rel.move()


_TORCH_TO_FUEL = {
    "float64": "f64",
    "float32": "f32",
    "float16": "f16",
    "bfloat16": "bf16",
    "int64": "i64",
    "int32": "i32",
    "int8": "i8",
    "uint8": "u8",
    "bool": "i1",
}


def _numpy_name(t: Any) -> str:
    """The fuel dtype name of a torch tensor."""
    return _TORCH_TO_FUEL[str(t.dtype).removeprefix("torch.")]


def _name_error(missing: list[str], extra: list[str], expected: list[str]) -> str:
    parts = []
    if missing:
        parts.append(f"missing input(s) {', '.join(missing)}")
    if extra:
        parts.append(f"unknown input(s) {', '.join(extra)}")
    return f"{'; '.join(parts)} (the module takes: {', '.join(expected)})"
