"""Stage 3, lower: turn a validated contract into binding-table registrations.

* dtype fan-out: every free dtype variable (an input's `dtypes`, an output's `any(...)`)
  ranges over its choices, ties (`same_as`) follow; one registration per combination, in the
  order the choices are written;
* entry point: resolved once to a declared function (`entry.py`); a factory is called once
  per dtype key, a kernel entry is the kernel;
* caps projection: `strided_input` when every input walks strides (strided and broadcast
  accepted), `requires_broadcast` when an input requires a stride-0 view;
* precision lowering: `audited: false` => UNAUDITED; audited with nothing claimed =>
  `PrecisionGuarantee.none(notes)`; otherwise the claimed bounds, a `measured` one as a name
  in `PrecisionGuarantee.measured` (the ledger gives its value);
* revision hash over the canonical re-serialization of the block (comments and formatting do
  not change it), the provider, and the source of the code it runs;
* cost expressions were compiled once at validation; here they become one `CostFn`.
"""

from __future__ import annotations

import inspect
import itertools
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime.binding_table import Kernel, KernelCaps, digest64
from runtime.contracts.entry import BuiltKernel, Declared, resolve_entry_point
from runtime.contracts.errors import BadEntryArgs, FactoryFailed, FkcError
from runtime.contracts.model import CostSpec, KernelContract, Operand
from runtime.cost import BadCostOperands, CostEstimate, CostFn
from runtime.precision import UNAUDITED, PrecisionGuarantee


@dataclass(frozen=True)
class LoweredKernel:
    """One registration: a contract at one dtype key."""

    contract: KernelContract
    dtypes: tuple[str, ...]
    kernel: Kernel
    direct: Callable[..., Any] | None
    caps: KernelCaps
    precision: PrecisionGuarantee
    """The claim as written (before the ledger gate)."""
    cost: CostFn
    revision: int

    @property
    def op(self) -> str:
        return self.contract.op

    @property
    def backend(self) -> str:
        return self.contract.provider.backend

    @property
    def kernel_source(self) -> str:
        return self.contract.provider.kernel_source

    @property
    def name(self) -> str:
        return self.contract.name

    @property
    def where(self) -> str:
        """The contract's `file:line`."""
        return self.contract.where

    def view_runs(self) -> tuple[bool, bool]:
        """(strided views, offset views): whether every input's layout accepts them."""
        layouts = [o.layout for o in self.contract.inputs]
        return (
            all(lay is not None and lay.strided == "accepted" for lay in layouts),
            all(lay is not None and lay.offset == "accepted" for lay in layouts),
        )

    def accepts(self, shapes: Sequence[Sequence[int]]) -> bool:
        """Whether operand shapes (inputs then outputs) meet the contract's ranks, shape
        constraints and output shape rules."""
        ops = self.contract.operands
        if len(shapes) != len(ops):
            return False
        if not all(o.rank.accepts(len(s)) for o, s in zip(ops, shapes, strict=True)):
            return False
        if not all(c.check(shapes, self.dtypes) for o in ops for c in o.shape):
            return False
        by_name = {o.name: tuple(s) for o, s in zip(ops, shapes, strict=True)}
        outs = zip(self.contract.outputs, shapes[len(self.contract.inputs) :], strict=True)
        return all(_fits(o.shape_rule, by_name, tuple(s)) for o, s in outs)


def _matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
        return None
    return (*np.broadcast_shapes(a[:-2], b[:-2]), a[-2], b[-1])


SHAPE_RULES: dict[str, Callable[..., tuple[int, ...] | None]] = {
    "same_as": lambda x: x,
    "broadcast": lambda *xs: tuple(np.broadcast_shapes(*xs)),
    "matmul": _matmul_shape,
}
"""Output shape rules: input shapes -> the output's shape (None: the inputs do not fit)."""

BY_OP = "by_op"
"""`shape_rule: by_op(x, ...)`: the output's shape follows from the named inputs and the op's
params (fuel's shape inference decides it); the contract does not restate it."""


def infer_shape(
    rule: tuple[str, tuple[str, ...]] | None, shapes: dict[str, tuple[int, ...]]
) -> tuple[int, ...] | None:
    """The output shape `rule` gives for the named input `shapes`; None if they do not fit."""
    if rule is None:
        return None
    kind, names = rule
    if kind == BY_OP:
        return None
    try:
        return SHAPE_RULES[kind](*(shapes[n] for n in names))
    except ValueError:  # not broadcastable
        return None


def _fits(
    rule: tuple[str, tuple[str, ...]] | None,
    shapes: dict[str, tuple[int, ...]],
    out: tuple[int, ...],
) -> bool:
    """Whether an output shape meets its rule; `by_op` outputs (shaped by the op's params:
    reshape, transpose, reductions, attention) are the op's shape inference's business."""
    if rule is not None and rule[0] == BY_OP:
        return True
    return infer_shape(rule, shapes) == out


def fan_out(contract: KernelContract) -> list[tuple[str, ...]]:
    """Every dtype key (inputs then outputs) the contract registers, in written order."""
    ops = contract.operands
    free = [o for o in ops if o.dtype.same_as is None]
    by_name = {o.name: o for o in ops}
    keys = []
    for combo in itertools.product(*(o.dtype.choices for o in free)):
        chosen = {o.name: t for o, t in zip(free, combo, strict=True)}
        keys.append(tuple(_dtype_of(o, chosen, by_name) for o in ops))
    return keys


def _dtype_of(o: Operand, chosen: dict[str, str], by_name: dict[str, Operand]) -> str:
    while o.dtype.same_as is not None:
        o = by_name[o.dtype.same_as]
    return chosen[o.name]


def project_caps(contract: KernelContract) -> KernelCaps:
    """fuel's `KernelCaps` from the inputs' layout flags (AND across inputs)."""
    layouts = [o.layout for o in contract.inputs if o.layout is not None]
    return KernelCaps(
        strided_input=bool(layouts) and all(lay.walks_strides for lay in layouts),
        requires_broadcast=any(lay.broadcast == "required" for lay in layouts),
    )


def lower_precision(contract: KernelContract) -> PrecisionGuarantee:
    """The claimed guarantee (see module docstring)."""
    p = contract.precision
    if not p.audited:
        return UNAUDITED
    return PrecisionGuarantee(
        bit_stable=p.bit_stable,
        max_ulp=p.max_ulp,
        max_relative=p.max_relative,
        max_absolute=p.max_absolute,
        audited=True,
        notes=p.notes,
        measured=p.measured,
    )


def lower_cost(contract: KernelContract) -> CostFn:
    """One `CostFn` evaluating the contract's compiled flops / bytes / overhead expressions."""
    spec: CostSpec = contract.cost
    n_operands, where = len(contract.operands), contract.where
    flops, nbytes, overhead = spec.flops, spec.bytes, spec.overhead_ns

    def cost(shapes: Sequence[tuple[int, ...]], dtypes: Sequence[str], params: Any) -> CostEstimate:
        if len(shapes) != n_operands or len(dtypes) != n_operands:
            raise BadCostOperands(f"{where}: expected {n_operands} operands, got {len(shapes)}")
        try:
            return CostEstimate(
                float(flops(shapes, dtypes)),
                float(nbytes(shapes, dtypes)),
                0.0 if overhead is None else float(overhead(shapes, dtypes)),
            )
        except (ZeroDivisionError, IndexError, OverflowError, KeyError) as e:
            raise BadCostOperands(f"{where}: cost of shapes {list(shapes)}: {e}") from None

    cost.__qualname__ = f"fkc_cost[{contract.name}]"
    return cost


_SOURCES: dict[object, str] = {}
"""Source text by code object: closures of one factory share their code, so each function
body is read (and tokenized, which dominates import time) once per process."""


_MARKER = re.compile(r"[ \t]*@[\w.]*\bkernel_(?:factory|entry)[ \t]*(?:#[^\n]*)?\n")
"""A `@kernel_factory` / `@kernel_entry` line: it declares the function for contracts and
changes nothing it computes, so it is not part of the revision."""


def _without_markers(text: str) -> str:
    """`text` less the contract-marker lines among its leading decorators."""
    lines = text.splitlines(keepends=True)
    head = 0
    while head < len(lines) and lines[head].lstrip().startswith("@"):
        head += 1
    return "".join([*(line for line in lines[:head] if not _MARKER.fullmatch(line)), *lines[head:]])


def _source_of(obj: Any) -> str:
    code = getattr(obj, "__code__", None)
    if code is not None and code in _SOURCES:
        return _SOURCES[code]
    try:
        text = _without_markers(inspect.getsource(obj))
    except (OSError, TypeError):
        text = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', repr(obj))}"
    if code is not None:
        _SOURCES[code] = text
    return text


def revision_of(contract: KernelContract, code: Sequence[Any]) -> int:
    """64-bit hash of the canonical block, the provider and the source of `code`."""
    prov = contract.provider
    text = "\n".join(
        [
            contract.canonical,
            prov.backend,
            prov.kernel_source,
            prov.revision_base,
            *(_source_of(c) for c in code),
        ]
    )
    return digest64(text)


def _build(contract: KernelContract, entry: Declared, dtypes: tuple[str, ...]) -> BuiltKernel:
    if entry.kind == "kernel":
        return BuiltKernel(entry.fn)
    try:
        built = entry.fn(dtypes, **(contract.entry_args or {}))
    except Exception as e:  # the factory is foreign code: any failure is the contract's
        raise FactoryFailed(
            contract.path,
            contract.line,
            f"factory '{contract.entry_point}' failed for dtypes {dtypes}: {type(e).__name__}: {e}",
        ) from None
    if not isinstance(built, BuiltKernel):
        built = BuiltKernel(built)
    if not callable(built.kernel):
        raise FactoryFailed(
            contract.path,
            contract.line,
            f"factory '{contract.entry_point}' returned {built.kernel!r} for "
            f"dtypes {dtypes}, not a kernel",
        )
    return built


def _resolve(contract: KernelContract, allow: Collection[str]) -> Declared:
    """The contract's declared entry point, its kind agreeing with `entry_args`."""
    where = contract.lines.get(("entry_point",), contract.line)
    try:
        entry = resolve_entry_point(contract.entry_point, allow)
    except FkcError as e:
        raise type(e)(contract.path, where, e.message) from None
    if entry.kind == "factory" and contract.entry_args is None:
        raise BadEntryArgs(
            contract.path,
            where,
            f"'{contract.entry_point}' is a kernel factory: give its entry_args ({{}} for none)",
        )
    if entry.kind == "kernel" and contract.entry_args is not None:
        raise BadEntryArgs(
            contract.path,
            contract.lines.get(("entry_args",), where),
            f"'{contract.entry_point}' is a kernel entry, not a factory: it takes no entry_args",
        )
    return entry


def lower(contract: KernelContract, allow: Collection[str] = ()) -> list[LoweredKernel]:
    """Every registration of one contract (no table is touched)."""
    entry = _resolve(contract, allow)
    caps, precision, cost = project_caps(contract), lower_precision(contract), lower_cost(contract)
    out = []
    for dtypes in fan_out(contract):
        built = _build(contract, entry, dtypes)
        revision = revision_of(contract, (entry.fn, built.kernel, *built.depends_on))
        out.append(
            LoweredKernel(
                contract, dtypes, built.kernel, built.direct, caps, precision, cost, revision
            )
        )
    return out
