"""The op table of the ONNX importer: `(domain, op_type) -> handler`, and the `Node` a handler
reads its inputs and attributes from.

A handler maps one ONNX node to fuel values: `handler(node) -> outputs` (one value or a tuple,
in ONNX output order; None for an optional output it does not produce). It raises `Unsupported`
for a variant fuel cannot express. Each registration lists the attributes the handler
understands: a node carrying any other attribute is rejected before the handler runs, so a new
ONNX attribute can never be silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper

from frontends.emit import Emitter, NeedsConstant, Tensor, Unsupported
from frontends.onnx.dtypes import fuel_dtype

DEFAULT_DOMAINS = ("", "ai.onnx")
"""Both spellings of the standard operator set's domain."""

Outputs = Tensor | Sequence[Tensor | None]
Handler = Callable[["Node"], Outputs]


@dataclass(frozen=True)
class OpSpec:
    """A registered ONNX op: its handler and the attributes the handler understands."""

    handler: Handler
    attrs: frozenset[str]


OPS: dict[tuple[str, str], OpSpec] = {}
"""(domain, op_type) -> spec; the standard domain is keyed as ""."""


def onnx_op(*op_types: str, attrs: str = "", domain: str = "") -> Callable[[Handler], Handler]:
    """Register `handler` for `op_types`; `attrs` lists the attribute names it reads."""

    def register(handler: Handler) -> Handler:
        for t in op_types:
            OPS[(domain, t)] = OpSpec(handler, frozenset(attrs.split()))
        return handler

    return register


def op_key(domain: str, op_type: str) -> tuple[str, str]:
    return ("" if domain in DEFAULT_DOMAINS else domain, op_type)


def display_name(domain: str, op_type: str) -> str:
    """`Conv`, or `com.microsoft.FusedMatMul` outside the standard domain."""
    return op_type if domain in DEFAULT_DOMAINS else f"{domain}.{op_type}"


class Node:
    """One ONNX node during import: its values, attributes and the opset it was written for."""

    def __init__(self, proto: onnx.NodeProto, inputs: list[Tensor | None], opset: int, em: Emitter):
        self.proto, self.inputs, self.opset, self.em = proto, inputs, opset, em
        self._attrs = {a.name: a for a in proto.attribute}

    @property
    def op_type(self) -> str:
        return self.proto.op_type

    def attr(self, name: str, default: Any = None) -> Any:
        """An attribute's Python value (bytes decoded to str), or `default`."""
        a = self._attrs.get(name)
        if a is None:
            return default
        if a.ref_attr_name:
            raise Unsupported(f"attribute '{name}' refers to a function attribute")
        v = helper.get_attribute_value(a)
        return v.decode() if isinstance(v, bytes) else v

    def has_attr(self, name: str) -> bool:
        return name in self._attrs

    def input(self, i: int) -> Tensor | None:
        """Input `i`, or None when the model omits it (missing or empty name)."""
        return self.inputs[i] if i < len(self.inputs) else None

    def x(self, i: int = 0) -> Tensor:
        """A required input."""
        t = self.input(i)
        if t is None:
            raise Unsupported(f"required input {i} is missing")
        return t

    def const(self, i: int, what: str) -> np.ndarray | None:
        """Input `i` as a constant (None if omitted); a traced value is `Unsupported`."""
        t = self.input(i)
        if t is None or isinstance(t, np.ndarray):
            return t
        raise NeedsConstant(
            self.proto.input[i], f"{what} (input {i}) must be a constant known at import time"
        )

    def ints(self, i: int, what: str) -> list[int] | None:
        """A constant integer input as a list (None if omitted)."""
        c = self.const(i, what)
        return None if c is None else [int(v) for v in np.asarray(c).reshape(-1)]

    def wants(self, k: int) -> bool:
        """Whether the model uses output `k` (present with a non-empty name)."""
        return k < len(self.proto.output) and self.proto.output[k] != ""

    def dtype_attr(self, name: str, default: int | None = None) -> str:
        """A dtype attribute (`to`, `dtype`) as a fuel dtype."""
        v = self.attr(name, default)
        if v is None:
            raise Unsupported(f"attribute '{name}' is required")
        return fuel_dtype(int(v), f"attribute '{name}'")
