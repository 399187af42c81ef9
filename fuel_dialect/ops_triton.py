"""Lowered-level fuel ops: Triton kernels, their launches, and binding-table library calls.

`convert-fuel-to-triton` rewrites an entry function into these, so the lowered plan is still
a graph in the IR ("the plan IS the graph"): every generated kernel is a module-level
`fuel.triton_kernel` symbol holding its Triton source text; the function body launches it with
`fuel.triton_launch` and runs every other kernel op as a `fuel.library_call` that names its
binding-table key `(op, dtypes, backend)`, resolved when the module runs or is compiled:

    fuel.triton_kernel @fused_0 space = [4, 8] block = 1024
        : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> source = "import triton ..."
    func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>) -> ... {
      %0 = fuel.library_call "matmul" [f32, f32, f32] on "cuda" (%x, %w)
          : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
      %1 = fuel.triton_launch @fused_0(%0, %b)
          : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
      ...
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    FunctionType,
    IntegerAttr,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    TensorType,
    f64,
    i64,
)
from xdsl.ir import Attribute
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    opt_prop_def,
    opt_region_def,
    prop_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import SymbolOpInterface

from fuel_dialect.base import check_static, fail, verify_launch
from fuel_dialect.dtypes import dtype_name, shape_of
from fuel_dialect.kernel_body import verify_body

MAX_BLOCK = 1 << 16
"""Largest BLOCK a generated elementwise kernel may use (Triton's tl.arange limit is 2**17)."""
_IDENT_RE = re.compile(r"[a-z_][a-z0-9_]*")


@irdl_op_definition
class TritonKernelOp(IRDLOperation):
    """A generated Triton kernel: a module-level symbol holding its source text.

    The kernel is one `@triton.jit` function named like the symbol, taking one pointer per
    input then per output (in `function_type` order), the element count `N` and the `BLOCK`
    constexpr. It runs over the row-major iteration `space` in `cdiv(prod(space), block)`
    programs; inputs and outputs broadcast into `space` (numpy rules).

    Example: `fuel.triton_kernel @fused_0 space = [4, 8] block = 1024 : (tensor<4x8xf32>,
    tensor<8xf32>) -> tensor<4x8xf32> source = "def fused_0(in0, in1, out0, N, BLOCK): ..."`
    """

    name = "fuel.triton_kernel"
    sym_name = prop_def(SymbolNameConstraint())
    space = prop_def(DenseArrayBase.constr(i64))
    block = prop_def(IntegerAttr[I64])
    function_type = prop_def(FunctionType)
    source = prop_def(StringAttr)
    body = opt_region_def()
    traits = traits_def(SymbolOpInterface())
    assembly_format = (
        "$sym_name `space` `=` $space `block` `=` $block attr-dict `:` $function_type "
        "`source` `=` $source ($body^)?"
    )

    @property
    def numel(self) -> int:
        return math.prod(self.space.get_values())

    @property
    def grid(self) -> int:
        """Programs per launch: cdiv(prod(space), block), at least 1."""
        return max(1, -(-self.numel // self.block.value.data))

    def verify_(self) -> None:
        block = self.block.value.data
        if block < 1 or block > MAX_BLOCK or block & (block - 1):
            raise fail(self, f"block must be a power of two in 1..{MAX_BLOCK}, got {block}")
        space = tuple(self.space.get_values())
        if any(d < 0 for d in space):
            raise fail(self, f"space dims must be >= 0, got {list(space)}")
        types = (*self.function_type.inputs.data, *self.function_type.outputs.data)
        if not self.function_type.outputs.data:
            raise fail(self, "needs at least one result")
        for t in types:
            if not _static_fuel_tensor(t):
                raise fail(self, f"signature types must be static fuel tensors, got {t}")
            padded = (1,) * (len(space) - len(shape_of(t))) + shape_of(t)
            if len(padded) > len(space) or any(
                d not in (1, s) for d, s in zip(padded, space, strict=True)
            ):
                raise fail(self, f"operand {t} does not broadcast into space {list(space)}")
        if not re.search(rf"\bdef {re.escape(self.sym_name.data)}\(", self.source.data):
            raise fail(self, f"source does not define the kernel 'def {self.sym_name.data}('")
        verify_body(self, self.body, self.function_type)


@irdl_op_definition
class TritonLaunchOp(IRDLOperation):
    """Launch a `fuel.triton_kernel` on its operands, producing its results.

    Destination-passing at run time: the launcher allocates the results and the kernel writes
    them. Operand and result types must equal the kernel's `function_type` when the symbol is
    in the enclosing module (a dangling reference is reported by whoever runs or compiles it).

    Example: `%y = fuel.triton_launch @fused_0(%x, %b) : (tensor<4x8xf32>, tensor<8xf32>)
    -> tensor<4x8xf32>`
    """

    name = "fuel.triton_launch"
    kernel = prop_def(SymbolRefAttr)
    args = var_operand_def(TensorType)
    res = var_result_def(TensorType)
    assembly_format = "$kernel `(` $args `)` attr-dict `:` functional-type($args, $res)"

    def verify_(self) -> None:
        verify_launch(self, TritonKernelOp)


@irdl_op_definition
class LibraryCallOp(IRDLOperation):
    """Run the binding-table kernel at key `(callee, dtypes, backend)` (a hand-written library
    kernel, not a generated one), with the op's extras in `params` (axes, eps, causal, ...).

    `dtypes` lists the key's dtypes, inputs then outputs (variadic ops key as the original op
    did). The kernel is looked up when the module runs or is compiled, never here.

    Example: `%y = fuel.library_call "matmul" [f32, f32, f32] on "cuda" (%x, %w) :
    (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>`
    """

    name = "fuel.library_call"
    callee = prop_def(StringAttr)
    dtypes = prop_def(ArrayAttr)
    backend = prop_def(StringAttr)
    params = opt_prop_def(DictionaryAttr)
    args = var_operand_def(TensorType)
    res = var_result_def(TensorType)
    assembly_format = (
        "$callee $dtypes `on` $backend `(` $args `)` (`params` $params^)? attr-dict `:` "
        "functional-type($args, $res)"
    )

    def key(self) -> tuple[str, tuple[str, ...], str]:
        """The binding-table key this call resolves."""
        return (self.callee.data, tuple(dtype_name(t) for t in self.dtypes), self.backend.data)

    def kernel_params(self) -> dict[str, Any]:
        return decode_params(self.params)

    def verify_(self) -> None:
        check_static(self)
        for name, what in ((self.callee.data, "callee"), (self.backend.data, "backend")):
            if not _IDENT_RE.fullmatch(name):
                raise fail(self, f"{what} '{name}' is not a lower-case identifier")
        try:
            for t in self.dtypes:
                dtype_name(t)
        except ValueError as e:
            raise fail(self, f"key dtypes: {e}") from None
        if not self.res:
            raise fail(self, "needs at least one result")


def _static_fuel_tensor(t: Attribute) -> bool:
    if not isinstance(t, TensorType) or any(d < 0 for d in t.get_shape()):
        return False
    try:
        dtype_name(t)
    except ValueError:
        return False
    return True


# -- op params <-> attributes ----------------------------------------------------------------


def encode_params(params: Mapping[str, Any]) -> DictionaryAttr:
    """A kernel-params dict (bools, ints, floats, strings, int tuples) as a dictionary attr."""
    out: dict[str, Attribute] = {}
    for key, v in params.items():
        if isinstance(v, bool):
            out[key] = BoolAttr.from_bool(v)
        elif isinstance(v, int):
            out[key] = IntegerAttr(v, i64)
        elif isinstance(v, float):
            out[key] = FloatAttr(v, f64)
        elif isinstance(v, str):
            out[key] = StringAttr(v)
        elif isinstance(v, tuple) and all(isinstance(x, int) for x in v):
            out[key] = DenseArrayBase.from_list(i64, v)
        else:
            raise TypeError(f"kernel param '{key}' = {v!r} has no attribute encoding")
    return DictionaryAttr(out)


def decode_params(attr: DictionaryAttr | None) -> dict[str, Any]:
    """The inverse of `encode_params` (i1 integers decode to bools)."""
    out: dict[str, Any] = {}
    for key, v in ({} if attr is None else attr.data).items():
        if isinstance(v, IntegerAttr):
            width = getattr(v.type, "width", None)
            out[key] = bool(v.value.data) if width is not None and width.data == 1 else v.value.data
        elif isinstance(v, FloatAttr):
            out[key] = float(v.value.data)
        elif isinstance(v, StringAttr):
            out[key] = v.data
        elif isinstance(v, DenseArrayBase):
            out[key] = tuple(int(x) for x in v.get_values())
    return out


TRITON_OPS = (TritonKernelOp, TritonLaunchOp, LibraryCallOp)
