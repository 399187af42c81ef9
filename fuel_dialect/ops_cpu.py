"""Lowered-level fuel ops for generated host code: C kernels and their launches.

`convert-fuel-to-c` turns each host fusion group into a module-level `fuel.c_kernel` symbol
holding its C source, launched from the function body by `fuel.c_launch`; every other op stays
as it was (the executor runs it through the binding table), so the plan is still the graph:

    fuel.c_kernel @fused_0 space = [4, 8] : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
        source = "void fused_0(void **args) { ... }"
    func.func @main(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
      %0 = fuel.c_launch @fused_0(%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
      func.return %0 : tensor<4x8xf32>
    }
"""

from __future__ import annotations

import re

from xdsl.dialects.builtin import (
    DenseArrayBase,
    FunctionType,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    opt_region_def,
    prop_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import SymbolOpInterface

from fuel_dialect.base import fail, verify_launch
from fuel_dialect.dtypes import dtype_name, shape_of
from fuel_dialect.kernel_body import verify_body

C_DTYPES = ("f64", "f32", "f16", "bf16", "i64", "i32", "i8", "u8", "i1")
"""Element types a generated C kernel reads and writes (f16/bf16 as 16-bit storage computed in
f32, rounded after every op: see lowering/cpu/codegen_half.py)."""


@irdl_op_definition
class CKernelOp(IRDLOperation):
    """A generated C kernel: a module-level symbol holding its source text.

    The source defines `void <sym>(void **args)`: `args` holds one pointer per input then per
    output (in `function_type` order), each to a C-contiguous buffer of its type. It runs over
    the row-major iteration `space`; inputs and outputs broadcast into `space` (numpy rules).

    Example: `fuel.c_kernel @fused_0 space = [4, 8] : (tensor<4x8xf32>, tensor<8xf32>) ->
    tensor<4x8xf32> source = "void fused_0(void **args) {}"`
    """

    name = "fuel.c_kernel"
    sym_name = prop_def(SymbolNameConstraint())
    space = prop_def(DenseArrayBase.constr(i64))
    function_type = prop_def(FunctionType)
    source = prop_def(StringAttr)
    body = opt_region_def()
    traits = traits_def(SymbolOpInterface())
    assembly_format = (
        "$sym_name `space` `=` $space attr-dict `:` $function_type `source` `=` $source ($body^)?"
    )

    def verify_(self) -> None:
        space = tuple(self.space.get_values())
        if any(d < 0 for d in space):
            raise fail(self, f"space dims must be >= 0, got {list(space)}")
        if not self.function_type.outputs.data:
            raise fail(self, "needs at least one result")
        for t in (*self.function_type.inputs.data, *self.function_type.outputs.data):
            if not _c_tensor(t):
                raise fail(
                    self,
                    f"signature types must be static tensors of {', '.join(C_DTYPES)}, got {t}",
                )
            padded = (1,) * (len(space) - len(shape_of(t))) + shape_of(t)
            if len(padded) > len(space) or any(
                d not in (1, s) for d, s in zip(padded, space, strict=True)
            ):
                raise fail(self, f"operand {t} does not broadcast into space {list(space)}")
        sym = re.escape(self.sym_name.data)
        if not re.search(rf"\bvoid\s+{sym}\s*\(\s*void\s*\*\*", self.source.data):
            raise fail(self, f"source does not define 'void {self.sym_name.data}(void **args)'")
        verify_body(self, self.body, self.function_type)


@irdl_op_definition
class CLaunchOp(IRDLOperation):
    """Run a `fuel.c_kernel` on the host over its operands, producing its results.

    Destination-passing at run time: the executor gives the kernel planned buffers for the
    results. Operand and result types must equal the kernel's `function_type` when the symbol
    is in the enclosing module (a dangling reference is reported by whoever runs it).

    Example: `%y = fuel.c_launch @fused_0(%x, %b) : (tensor<4x8xf32>, tensor<8xf32>)
    -> tensor<4x8xf32>`
    """

    name = "fuel.c_launch"
    kernel = prop_def(SymbolRefAttr)
    args = var_operand_def(TensorType)
    res = var_result_def(TensorType)
    assembly_format = "$kernel `(` $args `)` attr-dict `:` functional-type($args, $res)"

    def verify_(self) -> None:
        verify_launch(self, CKernelOp)


def _c_tensor(t: Attribute) -> bool:
    if not isinstance(t, TensorType) or any(d < 0 for d in t.get_shape()):
        return False
    try:
        return dtype_name(t) in C_DTYPES
    except ValueError:
        return False


CPU_OPS = (CKernelOp, CLaunchOp)
"""`convert-fuel-to-c`: host fusion groups become generated C kernels and their launches."""
