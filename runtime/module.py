"""`FuelModule`: fuel IR plus the weights its `fuel.weight` ops name, loaded and saved together.

On disk a module is `NAME.mlir` with `NAME.safetensors` beside it; the module attribute
`fuel.weights` names the weights file relative to the IR file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.parser import Parser
from xdsl.utils.exceptions import DiagnosticException, ParseError

from fuel_dialect.attrs import NAME_ATTR, WEIGHTS_ATTR
from fuel_dialect.dialect import fuel_context
from fuel_dialect.dtypes import dtype_name, shape_of
from fuel_dialect.ops_movement import WeightOp
from runtime.dtypes import to_numpy
from runtime.fsutil import atomic_write_text
from runtime.weights import WeightsError, load_weights, save_weights


class ModuleError(Exception):
    """A module cannot be loaded: bad IR (with file:line:col), no entry function, bad weights."""


@dataclass
class FuelModule:
    """A fuel IR module and its weights by name."""

    op: ModuleOp
    weights: dict[str, np.ndarray] = field(default_factory=dict)

    def __str__(self) -> str:
        return str(self.op)

    @property
    def entry(self) -> func.FuncOp:
        """The function that `fuel run` executes: `@main`, else the only function."""
        return entry_function(self.op)

    def weight_ops(self) -> Iterator[WeightOp]:
        for op in self.op.walk():
            if isinstance(op, WeightOp):
                yield op

    def check_weights(self) -> None:
        """Every `fuel.weight` has an array of its declared shape and dtype."""
        for w in self.weight_ops():
            name = w.sym_name.data
            if name not in self.weights:
                raise WeightsError(
                    f"weight '{name}' is used by the IR but missing from the weights"
                )
            arr, t = self.weights[name], w.result.type
            if arr.shape != shape_of(t) or arr.dtype != to_numpy(dtype_name(t)):
                raise WeightsError(
                    f"weight '{name}' is declared {t} but the file holds "
                    f"{arr.dtype}{list(arr.shape)}"
                )

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write `path` (IR text) and its weights beside it, each atomically."""
        p = Path(path)
        if self.weights:
            wpath = p.with_suffix(".safetensors")
            self.op.attributes[WEIGHTS_ATTR] = StringAttr(wpath.name)
            save_weights(wpath, self.weights)
        atomic_write_text(p, str(self.op) + "\n")
        return p

    @staticmethod
    def parse(text: str, name: str = "<string>") -> FuelModule:
        """Parse and verify IR text (no weights); `ModuleError` carries line:col."""
        try:
            module = Parser(fuel_context(), text, name).parse_module()
        except ParseError as e:
            raise ModuleError(str(e)) from None
        try:
            module.verify()
        except DiagnosticException as e:
            raise ModuleError(f"{name}: invalid IR: {e}") from None
        return FuelModule(module)

    @staticmethod
    def load(path: str | os.PathLike[str], weights: str | None = None) -> FuelModule:
        """Load IR from `path` and the weights it names (or `weights`, or NAME.safetensors)."""
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as e:
            raise ModuleError(f"cannot read {p}: {e.strerror}") from None
        m = FuelModule.parse(text, str(p))
        wfile = _weights_path(m.op, p, weights)
        if wfile is not None:
            m.weights = load_weights(wfile)
        m.check_weights()
        return m


def _weights_path(op: ModuleOp, path: Path, override: str | None) -> Path | None:
    if override is not None:
        return Path(override)
    attr = op.attributes.get(WEIGHTS_ATTR)
    if isinstance(attr, StringAttr):
        return path.parent / attr.data
    guess = path.with_suffix(".safetensors")
    return guess if guess.exists() else None


def entry_function(module: ModuleOp) -> func.FuncOp:
    funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
    for f in funcs:
        if f.sym_name.data == "main":
            return f
    if len(funcs) == 1:
        return funcs[0]
    names = ", ".join("@" + f.sym_name.data for f in funcs) or "none"
    raise ModuleError(f"no entry function: expected @main or a single function (found {names})")


def io_names(f: func.FuncOp) -> tuple[list[str], list[str]]:
    """Graph input and output names: `fuel.name` arg/result attributes, else SSA names."""

    def named(attrs: object, i: int, fallback: str) -> str:
        if attrs is not None:
            d = attrs.data[i].data  # type: ignore[attr-defined]
            if NAME_ATTR in d and isinstance(d[NAME_ATTR], StringAttr):
                return d[NAME_ATTR].data
        return fallback

    args = f.body.block.args
    ins = [named(f.arg_attrs, i, a.name_hint or f"arg{i}") for i, a in enumerate(args)]
    n_out = len(f.function_type.outputs.data)
    outs = [named(f.res_attrs, i, f"out{i}") for i in range(n_out)]
    return ins, outs
