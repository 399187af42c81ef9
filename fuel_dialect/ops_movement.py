"""Data-movement and value ops: reshape, transpose, broadcast, slice, concat, gather,
index_copy, constant, weight."""

from __future__ import annotations

import math
from typing import Any, ClassVar

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import ConstantLike, Pure

from fuel_dialect.base import (
    KernelOp,
    axis_in_range,
    check_ranked,
    check_static,
    dims_differ,
    elem,
    fail,
    require_same_elem,
    require_shape,
    shape,
)
from fuel_dialect.dtypes import DYNAMIC, INDEX_NAMES, broadcast_shapes, fmt_shape
from fuel_dialect.shapes import expr_symbols, parse_dim


@irdl_op_definition
class ReshapeOp(IRDLOperation, KernelOp):
    """Row-major reshape to the result type's shape (same element count).

    Its `?` result dims follow from the input's (see `fuel_dialect.shapes`); where they cannot
    (`batch*seq` rows split back into `batch` and `seq`), the optional `dims` attribute writes
    each result dim in dim symbols, as `fuel.iota`'s shape is written.

    Example: `%y = fuel.reshape %x : tensor<4x8xf32> -> tensor<2x16xf32>`

    Example: `%y = fuel.reshape %x {dims = ["batch", "seq", 4 : i64]} : tensor<?x4xf32> ->
    tensor<?x?x4xf32>`
    """

    name = "fuel.reshape"
    KERNEL_OP: ClassVar[str] = "reshape"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    dims = opt_attr_def(ArrayAttr[IntegerAttr | StringAttr])
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def verify_(self) -> None:
        check_ranked(self)
        require_same_elem(self, self.input, self.result)
        if self.dims is not None:
            self._verify_dims()
        a, b = shape(self.input), shape(self.result)
        if min(a, default=0) >= 0 and min(b, default=0) >= 0 and math.prod(a) != math.prod(b):
            raise fail(
                self,
                f"cannot reshape {fmt_shape(a)} ({math.prod(a)} elements) to "
                f"{fmt_shape(b)} ({math.prod(b)} elements)",
            )

    def symbols(self) -> set[str]:
        """The dim symbols its `dims` name."""
        entries = self.dims.data if self.dims is not None else ()
        return {n for e in entries if isinstance(e, StringAttr) for n in expr_symbols(e.data)}

    def _verify_dims(self) -> None:
        """`dims`: one entry per result dim; an int where the result dim is static (that
        int), an expression of dim symbols (`parse_dim`) where it is `?`."""
        assert self.dims is not None
        out = shape(self.result)
        entries = self.dims.data
        if len(entries) != len(out):
            raise fail(self, f"dims has {len(entries)} entries for a rank-{len(out)} result")
        for i, (e, d) in enumerate(zip(entries, out, strict=True)):
            if isinstance(e, IntegerAttr):
                if d >= 0 and e.value.data != d:
                    raise fail(self, f"dims[{i}] = {e.value.data}, the result dim is {d}")
            else:
                parse_dim(e.data, self)


@irdl_op_definition
class TransposeOp(IRDLOperation, KernelOp):
    """Permute dimensions: result dim i is input dim `perm[i]`.

    Example: `%y = fuel.transpose %x perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>`
    """

    name = "fuel.transpose"
    KERNEL_OP: ClassVar[str] = "transpose"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    perm = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure())
    assembly_format = "$input `perm` `=` $perm attr-dict `:` type($input) `->` type($result)"

    def verify_(self) -> None:
        check_ranked(self)
        require_same_elem(self, self.input, self.result)
        s, perm = shape(self.input), tuple(self.perm.get_values())
        if sorted(perm) != list(range(len(s))):
            raise fail(self, f"perm {list(perm)} is not a permutation of 0..{len(s) - 1}")
        require_shape(self, shape(self.result), tuple(s[p] for p in perm), "result")

    def kernel_params(self) -> dict[str, Any]:
        return {"perm": tuple(self.perm.get_values())}


@irdl_op_definition
class BroadcastOp(IRDLOperation, KernelOp):
    """Broadcast to the result type's shape with numpy rules (`numpy.broadcast_to`): input dims,
    aligned to the right, are 1 (repeated) or equal to the result dim; leading dims are added.

    Example: `%y = fuel.broadcast %x : tensor<1x8xf32> -> tensor<4x8xf32>`
    """

    name = "fuel.broadcast"
    KERNEL_OP: ClassVar[str] = "broadcast"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def verify_(self) -> None:
        check_ranked(self)
        require_same_elem(self, self.input, self.result)
        a, b = shape(self.input), shape(self.result)
        out = broadcast_shapes(a, b)
        if len(a) > len(b) or out is None or any(map(dims_differ, out, b)):
            raise fail(
                self,
                f"cannot broadcast {fmt_shape(a)} to {fmt_shape(b)} (each input "
                "dim, aligned right, must be 1 or the result dim)",
            )


@irdl_op_definition
class SliceOp(IRDLOperation, KernelOp):
    """Strided slice: per dim, elements `starts[i] : limits[i] : steps[i]` (steps >= 1).

    Starts and limits may be negative (counted from the end) and are clamped like numpy.

    Example: `%y = fuel.slice %x starts = [0, 2] limits = [4, 8] steps = [1, 2]
    : tensor<4x8xf32> -> tensor<4x3xf32>`
    """

    name = "fuel.slice"
    KERNEL_OP: ClassVar[str] = "slice"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    starts = prop_def(DenseArrayBase.constr(i64))
    limits = prop_def(DenseArrayBase.constr(i64))
    steps = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure())
    assembly_format = (
        "$input `starts` `=` $starts `limits` `=` $limits `steps` `=` $steps attr-dict `:` "
        "type($input) `->` type($result)"
    )

    def bounds(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """Starts and limits normalised to 0 <= start <= limit <= dim, with the steps."""
        s = shape(self.input)
        starts, limits, steps = (
            tuple(a.get_values()) for a in (self.starts, self.limits, self.steps)
        )
        if not (len(starts) == len(limits) == len(steps) == len(s)):
            raise fail(self, f"starts, limits and steps need one entry per dim ({len(s)})")
        if any(st < 1 for st in steps):
            raise fail(self, f"steps must be >= 1, got {list(steps)}")
        norm = [  # a dynamic dim's bounds stay as written until a run binds it
            slice(a, b, c).indices(d) if d >= 0 else (a, b, c)
            for a, b, c, d in zip(starts, limits, steps, s, strict=True)
        ]
        lo = tuple(a for a, _, _ in norm)
        hi = tuple(max(a, b) for a, b, _ in norm)
        return lo, hi, steps

    def verify_(self) -> None:
        check_ranked(self)
        require_same_elem(self, self.input, self.result)
        lo, hi, steps = self.bounds()
        want = tuple(
            len(range(a, b, c)) if d >= 0 else DYNAMIC
            for a, b, c, d in zip(lo, hi, steps, shape(self.input), strict=True)
        )
        require_shape(self, shape(self.result), want, "result")

    def kernel_params(self) -> dict[str, Any]:
        lo, hi, steps = self.bounds()
        return {"starts": lo, "limits": hi, "steps": steps}


@irdl_op_definition
class ConcatOp(IRDLOperation, KernelOp):
    """Join one or more tensors along `axis`; other dims must agree.

    Example: `%y = fuel.concat %a, %b axis = 0 : tensor<2x8xf32>, tensor<3x8xf32>
    -> tensor<5x8xf32>`
    """

    name = "fuel.concat"
    KERNEL_OP: ClassVar[str] = "concat"
    inputs = var_operand_def(TensorType)
    result = result_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    assembly_format = "$inputs `axis` `=` $axis attr-dict `:` type($inputs) `->` type($result)"

    def kernel_dtypes(self) -> tuple[str, ...]:
        # Variadic: keyed as (input dtype, output dtype) whatever the arity.
        return (elem(self.result), elem(self.result))

    def verify_(self) -> None:
        check_ranked(self)
        if not self.inputs:
            raise fail(self, "needs at least one input")
        require_same_elem(self, *self.inputs, self.result)
        s0 = shape(self.inputs[0])
        axis = axis_in_range(self, self.axis.value.data, len(s0))
        for v in self.inputs:
            s = shape(v)
            if len(s) != len(s0) or any(
                dims_differ(a, b) for i, (a, b) in enumerate(zip(s, s0, strict=True)) if i != axis
            ):
                raise fail(
                    self,
                    f"input shapes {fmt_shape(s0)} and {fmt_shape(s)} differ outside axis {axis}",
                )
        cat = [shape(v)[axis] for v in self.inputs]
        want = tuple(
            (sum(cat) if min(cat) >= 0 else DYNAMIC) if i == axis else d for i, d in enumerate(s0)
        )
        require_shape(self, shape(self.result), want, "result")

    def kernel_params(self) -> dict[str, Any]:
        return {"axis": axis_in_range(self, self.axis.value.data, len(shape(self.result)))}


@irdl_op_definition
class GatherOp(IRDLOperation, KernelOp):
    """Take slices of `data` along `axis` at integer `indices` (embedding lookup at axis 0).

    Result shape: `data.shape[:axis] + indices.shape + data.shape[axis+1:]`. Negative indices
    count from the end; out-of-range indices are a run-time error.

    Example: `%e = fuel.gather %table, %ids axis = 0 : tensor<100x16xf32>, tensor<2x5xi64>
    -> tensor<2x5x16xf32>`
    """

    name = "fuel.gather"
    KERNEL_OP: ClassVar[str] = "gather"
    data = operand_def(TensorType)
    indices = operand_def(TensorType)
    result = result_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    assembly_format = (
        "$data `,` $indices `axis` `=` $axis attr-dict `:` type($data) `,` type($indices) `->` "
        "type($result)"
    )

    def verify_(self) -> None:
        check_ranked(self)
        require_same_elem(self, self.data, self.result)
        if elem(self.indices) not in INDEX_NAMES:
            raise fail(self, f"indices must be i64 or i32, got {elem(self.indices)}")
        d = shape(self.data)
        axis = axis_in_range(self, self.axis.value.data, len(d))
        want = (*d[:axis], *shape(self.indices), *d[axis + 1 :])
        require_shape(self, shape(self.result), want, "result")

    def kernel_params(self) -> dict[str, Any]:
        return {"axis": axis_in_range(self, self.axis.value.data, len(shape(self.data)))}


@irdl_op_definition
class IndexCopyOp(IRDLOperation, KernelOp):
    """Write rows of `source` into `dest` at run-time positions along `axis` (torch's
    `index_copy`, into the block of `dest` that starts at the static `offsets`).

    `source` has `dest`'s rank; `index` is a 1-D i64/i32 tensor with one entry per row of
    `source` along `axis`: `result[o + (index[j] at axis)] = source[..., j, ...]`, each other
    dim `d` spanning `offsets[d] .. offsets[d] + source.shape[d]` (`offsets[axis]` is 0).
    Everything else is `dest`. A KV-cache write is the use: one row at slot `pos`, in layer
    `offsets[0]` of a stacked cache. When `dest` dies here (its last use, no live view), or is
    a donated graph input (`fuel.donate`), the executor writes the rows into `dest`'s buffer:
    the op touches `source`'s bytes, never the whole of `dest`. An index outside `dest` is a
    run-time error.

    Example: `%c2 = fuel.index_copy %c, %k, %pos axis = 3 offsets = [1, 0, 0, 0, 0]
    : tensor<4x1x2x256x64xf32>, tensor<1x1x2x1x64xf32>, tensor<1xi64> -> tensor<4x1x2x256x64xf32>`
    """

    name = "fuel.index_copy"
    KERNEL_OP: ClassVar[str] = "index_copy"
    dest = operand_def(TensorType)
    source = operand_def(TensorType)
    index = operand_def(TensorType)
    result = result_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    offsets = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure())
    assembly_format = (
        "$dest `,` $source `,` $index `axis` `=` $axis `offsets` `=` $offsets attr-dict `:` "
        "type($dest) `,` type($source) `,` type($index) `->` type($result)"
    )

    def verify_(self) -> None:
        check_ranked(self)
        require_same_elem(self, self.dest, self.source, self.result)
        if elem(self.index) not in INDEX_NAMES:
            raise fail(self, f"index must be i64 or i32, got {elem(self.index)}")
        d, s, ix = shape(self.dest), shape(self.source), shape(self.index)
        if len(ix) != 1:
            raise fail(self, f"index must be 1-D, got {fmt_shape(ix)}")
        if len(s) != len(d):
            raise fail(self, f"source rank {len(s)} differs from dest rank {len(d)}")
        axis = axis_in_range(self, self.axis.value.data, len(d))
        offsets = tuple(self.offsets.get_values())
        if len(offsets) != len(d) or offsets[axis] != 0 or min(offsets, default=0) < 0:
            raise fail(
                self,
                f"offsets must be {len(d)} entries >= 0 with offsets[{axis}] = 0, got "
                f"{list(offsets)}",
            )
        if dims_differ(s[axis], ix[0]):
            raise fail(self, f"source has {s[axis]} rows along axis {axis}, index {ix[0]}")
        for k, (o, a, b) in enumerate(zip(offsets, s, d, strict=True)):
            if k != axis and a >= 0 and b >= 0 and o + a > b:
                raise fail(
                    self,
                    f"source block {fmt_shape(s)} at offsets {list(offsets)} does not fit "
                    f"dest {fmt_shape(d)} (dim {k})",
                )
        require_shape(self, shape(self.result), d, "result")

    def kernel_params(self) -> dict[str, Any]:
        return {
            "axis": axis_in_range(self, self.axis.value.data, len(shape(self.dest))),
            "offsets": tuple(self.offsets.get_values()),
        }


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A small constant tensor held inline in the IR.

    Example: `%c = fuel.constant dense<[1.0, 2.0]> : tensor<2xf32>`
    """

    name = "fuel.constant"
    value = prop_def(DenseIntOrFPElementsAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), ConstantLike())

    def __init__(self, value: DenseIntOrFPElementsAttr):
        super().__init__(properties={"value": value}, result_types=[value.type])

    def verify_(self) -> None:
        if self.value.type != self.result.type:
            raise fail(self, f"value type {self.value.type} differs from result {self.result.type}")
        check_static(self)

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        pos = parser.pos
        value = parser.parse_attribute()
        if not isinstance(value, DenseIntOrFPElementsAttr):
            parser.raise_error("expected a dense<...> : tensor<...> value", pos, parser.pos)
        attrs = parser.parse_optional_attr_dict()
        op = cls(value)
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.value)
        printer.print_op_attributes(self.attributes)


@irdl_op_definition
class WeightOp(IRDLOperation):
    """A named parameter whose data lives outside the IR (the module's safetensors file).

    Example: `%w = fuel.weight "layers.0.mlp.w1" : tensor<512x1376xf32>`
    """

    name = "fuel.weight"
    sym_name = prop_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$sym_name attr-dict `:` type($result)"

    def __init__(self, name: str, type_: TensorType):
        super().__init__(properties={"sym_name": StringAttr(name)}, result_types=[type_])

    def verify_(self) -> None:
        check_static(self)
        if not self.sym_name.data:
            raise fail(self, "needs a non-empty name")
