"""Symbolic dimensions: named, ranged symbols a function declares for its dynamic (`?`) dims.

A function whose arguments have dynamic dims declares each symbol once, with its inclusive
range, in the function attribute `fuel.dims`, and names the symbol of every `?` of an argument,
in order, in the argument attribute `fuel.dim_names`:

```mlir
func.func @main(%ids: tensor<1x?xi64> {fuel.name = "ids", fuel.dim_names = ["seq"]},
                %x: tensor<?x?x64xf32> {fuel.dim_names = ["batch", "seq"]})
    -> tensor<?x?x64xf32> attributes {fuel.dims = {batch = #fuel.dim<1, 8>,
                                                   seq = #fuel.dim<1, 2048>}} {
  %y = fuel.relu %x : tensor<?x?x64xf32>
  func.return %y : tensor<?x?x64xf32>
}
```

Two `?` with one name are one dim: a run binds `seq` from `%ids` and checks `%x` against it.
Dims of other values are `?` in their types where they are not static; each is an expression
of the symbols that the ops' shape rules give (`fuel_dialect.shapes`: `symbolic_shapes`), and
op verifiers check what is static (a `?` matches any dim until a run binds it). A run
specialises the function per input-shape signature: symbols bound from the inputs and checked
against their ranges, every `?` replaced by its value, the clone verified and compiled
(`runtime.shape_specialize`). Like MLIR's `verifyRegionArgAttribute`, the dialect checks
these attributes on `func.func` itself (`verify_function_dims`, installed on `func.FuncOp`
when the dialect loads).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, StringAttr, TensorType
from xdsl.ir import Data
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from fuel_dialect.dtypes import DYNAMIC

DIMS_ATTR = "fuel.dims"
"""Function attribute: `{name = #fuel.dim<lo, hi>, ...}`, the function's dim symbols."""
DIM_NAMES_ATTR = "fuel.dim_names"
"""Argument attribute: the symbol of each dynamic dim of the argument, in dim order."""

_NAME_RE = re.compile(r"[a-z_][a-z0-9_]*")


@irdl_attr_definition
class DimAttr(Data[tuple[int, int]]):
    """The inclusive range `[lo, hi]` of a dim symbol, `1 <= lo <= hi`.

    Example: `#fuel.dim<1, 2048>`
    """

    name = "fuel.dim"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> tuple[int, int]:
        with parser.in_angle_brackets():
            lo = parser.parse_integer(allow_boolean=False)
            parser.parse_punctuation(",")
            hi = parser.parse_integer(allow_boolean=False)
        return (lo, hi)

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string(f"<{self.data[0]}, {self.data[1]}>")

    def verify(self) -> None:
        lo, hi = self.data
        if not 1 <= lo <= hi:
            raise VerifyException(f"invalid dim range [{lo}, {hi}] (expected 1 <= lo <= hi)")


def dim_symbol(text: str) -> str:
    """A valid dim symbol for a name from elsewhere (an ONNX `dim_param`, an input name):
    lower case, `[a-z0-9_]`, not digit-first."""
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in text.lower())
    return name if name and not name[0].isdigit() else f"d_{name}"


def function_dims(f: func.FuncOp) -> dict[str, tuple[int, int]]:
    """The symbols `f` declares, name -> (lo, hi); empty for a function of static shapes."""
    attr = f.attributes.get(DIMS_ATTR)
    if not isinstance(attr, DictionaryAttr):
        return {}
    return {k: v.data for k, v in attr.data.items() if isinstance(v, DimAttr)}


def arg_dim_names(f: func.FuncOp, i: int) -> tuple[str, ...]:
    """The symbol names of argument `i`'s dynamic dims (empty if it has none or no names)."""
    if f.arg_attrs is None:
        return ()
    attr = f.arg_attrs.data[i].data.get(DIM_NAMES_ATTR)
    if not isinstance(attr, ArrayAttr):
        return ()
    return tuple(a.data for a in attr.data if isinstance(a, StringAttr))


def arg_symbols(f: func.FuncOp) -> list[tuple[str | int, ...]]:
    """Per argument, its shape with each dynamic dim replaced by its symbol's name."""
    out: list[tuple[str | int, ...]] = []
    for i, t in enumerate(f.function_type.inputs.data):
        names = iter(arg_dim_names(f, i))
        shape = t.get_shape() if isinstance(t, TensorType) else ()
        out.append(tuple(next(names, "?") if d == DYNAMIC else d for d in shape))
    return out


def is_symbolic(f: func.FuncOp) -> bool:
    """Does `f` declare dim symbols (so a run resolves its dynamic dims from its inputs)?"""
    return DIMS_ATTR in f.attributes


def verify_function_dims(f: func.FuncOp) -> None:
    """`fuel.dims` is a dict of `#fuel.dim` ranges with valid names; every dynamic dim of an
    argument names a declared symbol (one `fuel.dim_names` entry per `?`); every declared
    symbol is named by some argument (else no run could bind it)."""
    where = f"'func.func' @{f.sym_name.data}"
    declared = _declared(f, where)
    used: set[str] = set()
    for i, t in enumerate(f.function_type.inputs.data):
        if not isinstance(t, TensorType):
            continue
        n_dyn = sum(1 for d in t.get_shape() if d == DYNAMIC)
        names = _names_attr(f, i, where)
        if names is None and n_dyn == 0:
            continue
        names = names or ()
        if len(names) != n_dyn:
            raise VerifyException(
                f"{where} argument {i} ({t}) has {n_dyn} dynamic dim(s) but "
                f"{DIM_NAMES_ATTR} names {len(names)}"
            )
        for n in names:
            if n not in declared:
                known = ", ".join(sorted(declared)) or "none"
                raise VerifyException(
                    f"{where} argument {i} names dim '{n}', which {DIMS_ATTR} does not declare "
                    f"(declared: {known})"
                )
            used.add(n)
    for n in sorted(set(declared) - used):
        raise VerifyException(f"{where} declares dim '{n}' but no argument dim names it")
    for op in f.walk():
        names = getattr(op, "symbols", None)
        written = op.name in ("fuel.iota", "fuel.reshape")  # dims written in symbols
        for n in sorted(names() - set(declared)) if written and names else ():
            raise VerifyException(f"{where} '{op.name}' uses dim '{n}', which it does not declare")


def _declared(f: func.FuncOp, where: str) -> Mapping[str, tuple[int, int]]:
    attr = f.attributes.get(DIMS_ATTR)
    if attr is None:
        return {}
    if not isinstance(attr, DictionaryAttr):
        raise VerifyException(f"{where} {DIMS_ATTR} must be a dictionary of #fuel.dim ranges")
    for k, v in attr.data.items():
        if not _NAME_RE.fullmatch(k):
            raise VerifyException(f"{where} invalid dim name '{k}' (expected [a-z_][a-z0-9_]*)")
        if not isinstance(v, DimAttr):
            raise VerifyException(f"{where} dim '{k}' must be a #fuel.dim<lo, hi> range, got {v}")
    return function_dims(f)


def _names_attr(f: func.FuncOp, i: int, where: str) -> tuple[str, ...] | None:
    if f.arg_attrs is None:
        return None
    attr = f.arg_attrs.data[i].data.get(DIM_NAMES_ATTR)
    if attr is None:
        return None
    if not isinstance(attr, ArrayAttr) or not all(isinstance(a, StringAttr) for a in attr.data):
        raise VerifyException(f"{where} argument {i} {DIM_NAMES_ATTR} must be an array of names")
    return tuple(a.data for a in attr.data)  # type: ignore[union-attr]


def install_func_verifier() -> None:
    """Check `fuel.dims` / `fuel.dim_names` whenever a `func.func` verifies (idempotent)."""
    if getattr(func.FuncOp.verify_, "_fuel_dims", False):
        return
    base = func.FuncOp.verify_

    def verify_(self: func.FuncOp) -> None:
        base(self)
        verify_function_dims(self)

    verify_._fuel_dims = True  # type: ignore[attr-defined]
    func.FuncOp.verify_ = verify_  # type: ignore[method-assign]
