"""Fused ops: one kernel for a chain of primitives that `fuel-fuse-patterns` recognises.

Each op's semantics is exactly its decomposition (the reference `fuel-fuse-patterns` leaves in
arm 0); a kernel may keep the intermediates in a wider compute dtype.
"""

from __future__ import annotations

from typing import Any, ClassVar

from xdsl.dialects.builtin import StringAttr, TensorType
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

from fuel_dialect.base import (
    KernelOp,
    check_ranked,
    dims_differ,
    fail,
    require_float,
    require_same_elem,
    require_shape,
    shape,
)
from fuel_dialect.dtypes import fmt_shape

ACTIVATIONS = ("none", "relu", "gelu", "gelu_tanh", "silu")
"""`fuel.matmul_bias_act` activations: identity, max(x, 0), erf GELU, tanh GELU, x*sigmoid(x)."""


def _require_matrix(op: IRDLOperation, w: Any, rows: int, what: str) -> int:
    """`w` is a (rows, n) matrix; returns n."""
    s = shape(w)
    if len(s) != 2 or dims_differ(s[0], rows):
        raise fail(op, f"{what} must be a ({rows}, n) matrix, got {fmt_shape(s)}")
    return s[1]


def _require_rows(op: IRDLOperation, x: Any) -> tuple[int, ...]:
    s = shape(x)
    if len(s) < 2:
        raise fail(op, f"input must have rank >= 2, got {fmt_shape(s)}")
    return s


@irdl_op_definition
class MatmulBiasActOp(IRDLOperation, KernelOp):
    """A linear layer with its activation: `act(matmul(x, w) + b)`.

    `x (..., m, k)`, `w (k, n)`, `b (n)` -> `(..., m, n)`; `act` is one of `none`, `relu`,
    `gelu` (erf form), `gelu_tanh`, `silu`.

    Example: `%y = fuel.matmul_bias_act %x, %w, %b act = "relu" : tensor<4x8xf32>,
    tensor<8x16xf32>, tensor<16xf32> -> tensor<4x16xf32>`
    """

    name = "fuel.matmul_bias_act"
    KERNEL_OP: ClassVar[str] = "matmul_bias_act"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = operand_def(TensorType)
    result = result_def(TensorType)
    act = prop_def(StringAttr)
    traits = traits_def(Pure())
    assembly_format = (
        "$input `,` $weight `,` $bias `act` `=` $act attr-dict `:` type($input) `,` "
        "type($weight) `,` type($bias) `->` type($result)"
    )

    def verify_(self) -> None:
        check_ranked(self)
        require_float(self, self.input)
        require_same_elem(self, self.input, self.weight, self.bias, self.result)
        if self.act.data not in ACTIVATIONS:
            raise fail(self, f"act must be one of {', '.join(ACTIVATIONS)}, got '{self.act.data}'")
        x = _require_rows(self, self.input)
        n = _require_matrix(self, self.weight, x[-1], "weight")
        require_shape(self, shape(self.bias), (n,), "bias")
        require_shape(self, shape(self.result), (*x[:-1], n), "result")

    def kernel_params(self) -> dict[str, Any]:
        return {"act": self.act.data}


@irdl_op_definition
class GatedMlpOp(IRDLOperation, KernelOp):
    """A SiLU-gated MLP (SwiGLU): `matmul(silu(matmul(x, wg)) * matmul(x, wu), wd)`.

    `x (..., m, d)`, `wg, wu (d, f)`, `wd (f, e)` -> `(..., m, e)`.

    Example: `%y = fuel.gated_mlp %x, %wg, %wu, %wd : tensor<4x8xf32>, tensor<8x16xf32>,
    tensor<8x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>`
    """

    name = "fuel.gated_mlp"
    KERNEL_OP: ClassVar[str] = "gated_mlp"
    input = operand_def(TensorType)
    gate = operand_def(TensorType)
    up = operand_def(TensorType)
    down = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$input `,` $gate `,` $up `,` $down attr-dict `:` type($input) `,` type($gate) `,` "
        "type($up) `,` type($down) `->` type($result)"
    )

    def verify_(self) -> None:
        check_ranked(self)
        require_float(self, self.input)
        require_same_elem(self, self.input, self.gate, self.up, self.down, self.result)
        x = _require_rows(self, self.input)
        f = _require_matrix(self, self.gate, x[-1], "gate weight")
        require_shape(self, shape(self.up), (x[-1], f), "up weight")
        e = _require_matrix(self, self.down, f, "down weight")
        require_shape(self, shape(self.result), (*x[:-1], e), "result")


FUSED_OPS = (MatmulBiasActOp, GatedMlpOp)
