"""Values that depend only on dim symbols: `fuel.iota` (ranges, fills, a dim's value).

These ops have no kernel: a run that binds the symbols folds each into a constant of the
specialised module (`runtime.shape_specialize`), so only static IR ever executes. They are
what an importer emits where a model computes from shapes: `arange(seq)` (ONNX `Range`), a
mask of shape `seq x seq` (`ConstantOfShape`), the value of `seq` itself (`Shape`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
)
from xdsl.irdl import IRDLOperation, irdl_op_definition, prop_def, result_def, traits_def
from xdsl.traits import Pure

from fuel_dialect.base import check_ranked, fail, shape
from fuel_dialect.shapes import expr_symbols, parse_dim, substitute


@irdl_op_definition
class IotaOp(IRDLOperation):
    """A range or a fill whose dims may be dim-symbol expressions: `start + step * i` along
    `axis`.

    `shape` gives each dim: an integer, or an expression of the function's dim symbols (a
    string: `"seq"`, `"2*seq + 1"`); `start` is a number or such an expression; `step = 0.0`
    makes a fill. The result type has `?` exactly where `shape` has an expression, e.g.
    `arange(seq)` is `fuel.iota shape = ["seq"] start = "0" step = 1.0 axis = 0
    : tensor<?xi64>`. No kernel runs it: binding the symbols folds it into a constant.

    Example: `%p = fuel.iota shape = [1, 4] start = "0" step = 1.0 axis = 1 : tensor<1x4xi64>`
    """

    name = "fuel.iota"
    shape = prop_def(ArrayAttr[IntegerAttr | StringAttr])
    start = prop_def(StringAttr)
    step = prop_def(FloatAttr)
    axis = prop_def(IntegerAttr[I64])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "`shape` `=` $shape `start` `=` $start `step` `=` $step `axis` `=` $axis attr-dict "
        "`:` type($result)"
    )

    def verify_(self) -> None:
        check_ranked(self)
        s = shape(self.result)
        if len(self.shape.data) != len(s):
            raise fail(self, f"shape has {len(self.shape.data)} dims, the result {len(s)}")
        for i, (d, t) in enumerate(zip(self.shape.data, s, strict=True)):
            if isinstance(d, StringAttr):
                parse_dim(d.data, self)
                if t >= 0:
                    raise fail(self, f"dim {i} is the expression '{d.data}': its type dim is ?")
            elif d.value.data != t:
                raise fail(self, f"dim {i} is {d.value.data}, its type dim {t}")
        start_value(self.start.data, {}, self)
        if s and not -len(s) <= self.axis.value.data < len(s):
            raise fail(self, f"axis {self.axis.value.data} is out of range for rank {len(s)}")

    def symbols(self) -> set[str]:
        """The dim symbols its shape and start name."""
        texts = [d.data for d in self.shape.data if isinstance(d, StringAttr)]
        out: set[str] = set()
        for text in (*texts, self.start.data):
            try:
                float(text)
            except ValueError:
                out |= expr_symbols(text)
        return out

    def dims(self, env: Mapping[str, Any]) -> list[Any]:
        """The result's dims with the symbols at `env` (ints or `DimExpr`s)."""
        return [
            substitute(parse_dim(d.data), env) if isinstance(d, StringAttr) else d.value.data
            for d in self.shape.data
        ]

    def fold(self, env: Mapping[str, int]) -> np.ndarray:
        """The value at `env` (the result's numpy dtype is the caller's cast)."""
        dims = [int(d) for d in self.dims(env)]
        start = start_value(self.start.data, env)
        step = self.step.value.data
        if not dims:
            return np.asarray(start + 0 * step)
        axis = self.axis.value.data % len(dims)
        ramp = np.arange(dims[axis], dtype=np.float64) * step + start
        view = [1] * len(dims)
        view[axis] = dims[axis]
        return np.broadcast_to(ramp.reshape(view), dims)


def start_value(text: str, env: Mapping[str, Any], op: Any = None) -> Any:
    """A `start`: a float literal (`-inf`, `0.5`), else a dim expression at `env` (with an
    empty `env`, only checked)."""
    try:
        return float(text)
    except ValueError:
        d = parse_dim(text, op)
        return substitute(d, env) if env else d


SHAPE_OPS = (IotaOp,)
