"""`FuelModule`: fuel IR plus the weights its `fuel.weight` ops name, loaded and saved together.

On disk a module is `NAME.mlir` with `NAME.safetensors` beside it; the module attribute
`fuel.weights` names the weights file relative to the IR file and `fuel.weights_sha256` records
its hash. `save` writes the weights first and the IR last, each atomically, after staging both,
so a failed save leaves the old pair; a crash between the two renames leaves new weights beside
the old IR, which `load` refuses (the hash differs) instead of running it with the wrong data.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException, ParseError

from fuel_dialect.attrs import NAME_ATTR, WEIGHTS_ATTR, WEIGHTS_SHA256_ATTR
from fuel_dialect.dialect import fuel_context
from fuel_dialect.dtypes import ELEMENT_TYPES, dtype_name, shape_of
from fuel_dialect.ops_movement import WeightOp
from runtime.dtypes import to_numpy
from runtime.fsutil import atomic_write_files, read_regular_file
from runtime.ir_locations import PARSER_FAILURES, LocatingParser, SourceMap, locate
from runtime.weights import WeightsError, weights_from_bytes, weights_to_bytes


class ModuleError(Exception):
    """A module cannot be loaded: bad IR (with file:line:col), no entry function, bad weights."""


@dataclass
class FuelModule:
    """A fuel IR module and its weights by name."""

    op: ModuleOp
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    name: str = field(default="", compare=False)
    """Where the IR was read from (its file), for messages; empty for IR built in memory."""

    def __str__(self) -> str:
        return str(self.op)

    def text(self, locations: bool = False) -> str:
        """The IR text; with `locations`, each op's location too (`loc("node name")`)."""
        out = StringIO()
        Printer(stream=out, print_debuginfo=locations).print_op(self.op)
        return out.getvalue()

    @property
    def entry(self) -> func.FuncOp:
        """The function that `fuel run` executes: `@main`, else the only function; a
        `ModuleError` naming the module's file if there is none."""
        try:
            return entry_function(self.op)
        except ModuleError as e:
            raise ModuleError(f"{self.name}: {e}" if self.name else str(e)) from None

    def function(self, name: str | None = None) -> func.FuncOp:
        """The function `@name` (`ModuleError` listing the others if there is none), or the
        entry function when `name` is None."""
        if name is None:
            return self.entry
        funcs = [op for op in self.op.ops if isinstance(op, func.FuncOp)]
        for f in funcs:
            if f.sym_name.data == name:
                return f
        names = ", ".join("@" + f.sym_name.data for f in funcs) or "none"
        raise ModuleError(f"no function @{name} in the module (it has: {names})")

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

    def save(self, path: str | os.PathLike[str], locations: bool = False) -> Path:
        """Write `path` (IR text, with each op's `loc(...)` if `locations`) and, when there are
        weights, `path` with the suffix `.safetensors` beside it: weights first, IR last, each
        atomically, both staged before either replaces an old file (a failed save leaves the
        old pair; see the module doc). The IR records the weights' file name and sha256
        (`fuel.weights_sha256`)."""
        p = Path(path)
        files: list[tuple[Path, bytes]] = []
        if self.weights:
            wpath = p.with_suffix(".safetensors")
            if wpath == p:
                raise ModuleError(f"{p}: the IR file cannot be named like its weights file")
            data = weights_to_bytes(self.weights)
            self.op.attributes[WEIGHTS_ATTR] = StringAttr(wpath.name)
            self.op.attributes[WEIGHTS_SHA256_ATTR] = StringAttr(hashlib.sha256(data).hexdigest())
            files.append((wpath, data))
        else:
            self.op.attributes.pop(WEIGHTS_SHA256_ATTR, None)  # no file of ours to vouch for
        files.append((p, (self.text(locations) + "\n").encode()))
        atomic_write_files(files)
        return p

    @staticmethod
    def parse(text: str, name: str = "<string>") -> FuelModule:
        """Parse and verify IR text (no weights); every `ModuleError` starts `name:line:col:`
        where the text has a position for it. Text the parser rejects in other ways (an
        attribute value out of range, nesting deeper than Python's stack) is a `ModuleError`
        at the parser's position; a verifier error, at the op that fails; so is a tensor type
        of more than `MAX_TENSOR_ELEMENTS` elements, or an entry signature fuel cannot run."""
        parser = LocatingParser(fuel_context(), text, name)
        try:
            module = parser.parse_module()
        except ParseError as e:
            raise ModuleError(str(e)) from None
        except PARSER_FAILURES as e:
            raise ModuleError(parser.failure(e)) from None
        verify_located(module, parser.source)
        check_types(module, name, parser.source)
        return FuelModule(module, name=name)

    @staticmethod
    def load(path: str | os.PathLike[str], weights: str | None = None) -> FuelModule:
        """Load IR from `path` and the weights it names (or `weights`, or NAME.safetensors).

        When the IR records `fuel.weights_sha256`, the weights file it names must have that
        hash, else `ModuleError` naming both files (a pair torn by an interrupted save, or a
        weights file from another save). IR without the hash (written by an older fuel, or by
        hand) still loads, checked only by the weights' names, shapes and dtypes: the hash
        guards against torn writes, not against a hostile author, who could write it too.
        An explicit `weights` file is the caller's choice and is not compared with the hash.
        """
        p = Path(path)
        m = FuelModule.parse(read_ir_text(p), str(p))
        wfile = _weights_path(m.op, p, weights)
        if wfile is not None:
            try:
                data = read_regular_file(wfile)
            except OSError as e:
                raise WeightsError(f"cannot read weights file {wfile}: {e.strerror}") from None
            m.weights = weights_from_bytes(data, str(wfile))
            if weights is None:
                _check_weights_hash(m.op, p, wfile, data)
        m.check_weights()
        return m


def read_ir_text(path: Path) -> str:
    """The IR text of `path`, read as bytes and decoded; `ModuleError` if unreadable or not
    UTF-8 (naming the file and the byte offset)."""
    try:
        raw = read_regular_file(path)
    except OSError as e:
        raise ModuleError(f"cannot read {path}: {e.strerror}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ModuleError(f"{path}: not UTF-8 text (byte {e.start} is invalid)") from None


def verify_located(module: ModuleOp, source: SourceMap) -> None:
    """`module.verify()`; a failure is a `ModuleError` at the failing op (`file:line:col:`)."""
    try:
        module.verify()
    except (DiagnosticException, ValueError) as e:
        raise ModuleError(locate(source, module, e)) from None
    except RecursionError:
        raise ModuleError(f"{source.name}: invalid IR: nested too deeply") from None


def _check_weights_hash(op: ModuleOp, path: Path, wfile: Path, data: bytes) -> None:
    """The weights file's sha256 is the one the IR recorded (if it recorded one)."""
    want = op.attributes.get(WEIGHTS_SHA256_ATTR)
    if want is None:
        return
    if not isinstance(want, StringAttr):
        raise ModuleError(f"{path}: the module attribute {WEIGHTS_SHA256_ATTR} must be a string")
    have = hashlib.sha256(data).hexdigest()
    if have != want.data.lower():
        raise ModuleError(
            f"{path}: its weights file {wfile} is not the one it was saved with (sha256 "
            f"{have[:16]}..., the IR records {want.data[:16]}...): a save was interrupted or "
            "one of the two files was replaced; save or import the module again"
        )


MAX_TENSOR_ELEMENTS = 1 << 36
"""The most elements a tensor type may declare (256 GiB of f32): a bound checked when IR is
read, so an absurd declared shape is refused before anything is allocated for it."""


def check_types(module: ModuleOp, name: str, source: SourceMap | None = None) -> None:
    """Every tensor type within `MAX_TENSOR_ELEMENTS`, the entry signature in fuel's dtypes;
    else `ModuleError` starting with `name` (for IR built in memory, like an import's), or
    with `name:line:col` of the op at fault when `source` says where it was parsed from."""
    where = source.where if source is not None else lambda op: name
    for op in module.walk():
        values = [*op.results, *(a for r in op.regions for b in r.blocks for a in b.args)]
        for v in values:
            if isinstance(v.type, TensorType) and _elements(v.type) > MAX_TENSOR_ELEMENTS:
                raise ModuleError(
                    f"{where(op)}: '{op.name}' declares {v.type}, more than "
                    f"{MAX_TENSOR_ELEMENTS} elements"
                )
    try:
        f = entry_function(module)
    except ModuleError:
        return  # no entry: fine until something runs it
    name = where(f)
    for kind, types in (("argument", f.function_type.inputs), ("result", f.function_type.outputs)):
        for i, t in enumerate(types.data):
            try:
                dtype_name(t)
            except ValueError:
                raise ModuleError(
                    f"{name}: @{f.sym_name.data} {kind} {i} has type {t}, which "
                    "fuel cannot pass in or out (element types: "
                    f"{', '.join(ELEMENT_TYPES)})"
                ) from None


def _elements(t: TensorType) -> int:
    n = 1
    for d in t.get_shape():
        n *= max(d, 1)  # a dynamic dim (-1) counts as 1 here
    return n


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
