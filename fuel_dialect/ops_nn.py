"""Compute-heavy fuel ops: matmul, reductions, softmax, norms, rope, attention."""

from __future__ import annotations

from typing import Any, ClassVar

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

from fuel_dialect.base import (
    _CONSTS,
    KernelOp,
    axis_in_range,
    check_ranked,
    dims_differ,
    elem,
    fail,
    require_float,
    require_not_bool,
    require_same_elem,
    require_shape,
    shape,
)
from fuel_dialect.dtypes import broadcast_shapes, fmt_shape


@irdl_op_definition
class MatmulOp(IRDLOperation, KernelOp):
    """Batched matrix product over the last two dims; leading batch dims broadcast.

    `(..., m, k) x (..., k, n) -> (..., m, n)`, both operands of rank >= 2.

    Example: `%y = fuel.matmul %x, %w : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>`
    """

    name = "fuel.matmul"
    KERNEL_OP: ClassVar[str] = "matmul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def verify_(self) -> None:
        check_ranked(self)
        require_same_elem(self, self.lhs, self.rhs, self.result)
        require_not_bool(self, self.lhs)
        a, b = shape(self.lhs), shape(self.rhs)
        if len(a) < 2 or len(b) < 2:
            raise fail(self, f"operands must have rank >= 2, got {fmt_shape(a)} and {fmt_shape(b)}")
        if dims_differ(a[-1], b[-2]):
            raise fail(
                self,
                f"contraction dims differ: lhs {fmt_shape(a)} has k={a[-1]}, "
                f"rhs {fmt_shape(b)} has k={b[-2]}",
            )
        batch = broadcast_shapes(a[:-2], b[:-2])
        if batch is None:
            raise fail(
                self, f"batch dims do not broadcast: {fmt_shape(a[:-2])} vs {fmt_shape(b[:-2])}"
            )
        require_shape(self, shape(self.result), (*batch, a[-2], b[-1]), "result")


class ReduceOp(IRDLOperation, KernelOp):
    """Base of reductions over `axes` (negative counts from the end), optionally `keepdim`."""

    input = operand_def(TensorType)
    result = result_def(TensorType)
    axes = prop_def(DenseArrayBase.constr(i64))
    keepdim = opt_prop_def(UnitAttr)
    traits = traits_def(Pure())
    assembly_format = (
        "$input `axes` `=` $axes (`keepdim` $keepdim^)? attr-dict `:` type($input) `->` "
        "type($result)"
    )
    FLOAT_ONLY: ClassVar[bool] = False

    def norm_axes(self) -> tuple[int, ...]:
        rank = len(shape(self.input))
        return tuple(sorted(axis_in_range(self, a, rank) for a in self.axes.get_values()))

    def verify_(self) -> None:
        check_ranked(self)
        require_same_elem(self, self.input, self.result)
        (require_float if self.FLOAT_ONLY else require_not_bool)(self, self.input)
        axes = self.norm_axes()
        if len(set(axes)) != len(axes):
            raise fail(self, f"axes {list(self.axes.get_values())} repeat a dimension")
        s = shape(self.input)
        keep = self.keepdim is not None
        want = tuple(1 if i in axes else d for i, d in enumerate(s) if keep or i not in axes)
        require_shape(self, shape(self.result), want, "result")

    def kernel_params(self) -> dict[str, Any]:
        return {"axes": self.norm_axes(), "keepdim": self.keepdim is not None}


def _reduce(op_name: str, summary: str, float_only: bool = False) -> type[ReduceOp]:
    short = op_name.removeprefix("fuel.")
    doc = (
        f"{summary}\n\nExample: `%s = {op_name} %x axes = [1] keepdim : tensor<4x8xf32> -> "
        "tensor<4x1xf32>`"
    )
    name = "".join(p.title() for p in short.split("_")) + "Op"
    cls = type(
        name,
        (ReduceOp,),
        {
            "name": op_name,
            "KERNEL_OP": short,
            "FLOAT_ONLY": float_only,
            "__doc__": doc,
            "__module__": __name__,  # else `abc`: type() is called from ABCMeta
            "__annotations__": _CONSTS,
        },
    )
    return irdl_op_definition(cls)


ReduceSumOp = _reduce("fuel.reduce_sum", "Sum over axes.")
ReduceMeanOp = _reduce("fuel.reduce_mean", "Arithmetic mean over axes.", float_only=True)
ReduceMaxOp = _reduce("fuel.reduce_max", "Maximum over axes (NaN propagates).")
ReduceMinOp = _reduce("fuel.reduce_min", "Minimum over axes (NaN propagates).")
REDUCE_OPS = (ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp)


@irdl_op_definition
class SoftmaxOp(IRDLOperation, KernelOp):
    """Numerically stable softmax along `axis`.

    Example: `%y = fuel.softmax %x axis = -1 : tensor<4x8xf32> -> tensor<4x8xf32>`
    """

    name = "fuel.softmax"
    KERNEL_OP: ClassVar[str] = "softmax"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    assembly_format = "$input `axis` `=` $axis attr-dict `:` type($input) `->` type($result)"

    def verify_(self) -> None:
        check_ranked(self)
        require_float(self, self.input)
        require_same_elem(self, self.input, self.result)
        require_shape(self, shape(self.result), shape(self.input), "result")
        axis_in_range(self, self.axis.value.data, len(shape(self.input)))

    def kernel_params(self) -> dict[str, Any]:
        return {"axis": axis_in_range(self, self.axis.value.data, len(shape(self.input)))}


class NormOp(IRDLOperation, KernelOp):
    """Base of last-dim normalisations with a float `eps`."""

    eps = prop_def(FloatAttr[Float64Type])
    traits = traits_def(Pure())

    def _verify_norm(self, x: Any, params: tuple[Any, ...], result: Any) -> None:
        check_ranked(self)
        require_float(self, x)
        require_same_elem(self, x, *params, result)
        s = shape(x)
        if not s:
            raise fail(self, "input must have rank >= 1")
        for p in params:
            require_shape(self, shape(p), (s[-1],), "scale/bias")
        require_shape(self, shape(result), s, "result")
        if not self.eps.value.data > 0:
            raise fail(self, f"eps must be positive, got {self.eps.value.data}")

    def kernel_params(self) -> dict[str, Any]:
        return {"eps": float(self.eps.value.data)}


@irdl_op_definition
class RmsNormOp(NormOp):
    """RMS normalisation over the last dim: `x / sqrt(mean(x**2) + eps) * weight`.

    Example: `%y = fuel.rms_norm %x, %w eps = 1.0e-06 : tensor<2x8xf32>, tensor<8xf32>
    -> tensor<2x8xf32>`
    """

    name = "fuel.rms_norm"
    KERNEL_OP: ClassVar[str] = "rms_norm"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    result = result_def(TensorType)
    assembly_format = (
        "$input `,` $weight `eps` `=` $eps attr-dict `:` type($input) `,` type($weight) `->` "
        "type($result)"
    )

    def verify_(self) -> None:
        self._verify_norm(self.input, (self.weight,), self.result)


@irdl_op_definition
class LayerNormOp(NormOp):
    """Layer normalisation over the last dim (biased variance), then `* weight + bias`.

    Example: `%y = fuel.layer_norm %x, %w, %b eps = 1.0e-05 : tensor<2x8xf32>, tensor<8xf32>,
    tensor<8xf32> -> tensor<2x8xf32>`
    """

    name = "fuel.layer_norm"
    KERNEL_OP: ClassVar[str] = "layer_norm"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = operand_def(TensorType)
    result = result_def(TensorType)
    assembly_format = (
        "$input `,` $weight `,` $bias `eps` `=` $eps attr-dict `:` type($input) `,` "
        "type($weight) `,` type($bias) `->` type($result)"
    )

    def verify_(self) -> None:
        self._verify_norm(self.input, (self.weight, self.bias), self.result)


@irdl_op_definition
class RopeOp(IRDLOperation, KernelOp):
    """Rotary position embedding of `x (..., S, D)` by tables `cos, sin (S, D/2)`.

    Half-split pairs (`x[i]`, `x[i + D/2]`) by default (GPT-NeoX / HF Llama); adjacent pairs
    (`x[2i]`, `x[2i+1]`) with `interleaved` (GPT-J / Meta Llama).

    Example: `%y = fuel.rope %x, %cos, %sin : tensor<1x4x6x8xf32>, tensor<6x4xf32>,
    tensor<6x4xf32> -> tensor<1x4x6x8xf32>`
    """

    name = "fuel.rope"
    KERNEL_OP: ClassVar[str] = "rope"
    input = operand_def(TensorType)
    cos = operand_def(TensorType)
    sin = operand_def(TensorType)
    result = result_def(TensorType)
    interleaved = opt_prop_def(UnitAttr)
    traits = traits_def(Pure())
    assembly_format = (
        "$input `,` $cos `,` $sin (`interleaved` $interleaved^)? attr-dict `:` type($input) `,` "
        "type($cos) `,` type($sin) `->` type($result)"
    )

    def verify_(self) -> None:
        check_ranked(self)
        require_float(self, self.input)
        require_same_elem(self, self.input, self.cos, self.sin, self.result)
        s = shape(self.input)
        if len(s) < 2 or (s[-1] >= 0 and s[-1] % 2):
            raise fail(self, f"input must be (..., S, D) with D even, got {fmt_shape(s)}")
        require_shape(self, shape(self.cos), (s[-2], s[-1] // 2), "cos")
        require_shape(self, shape(self.sin), (s[-2], s[-1] // 2), "sin")
        require_shape(self, shape(self.result), s, "result")

    def kernel_params(self) -> dict[str, Any]:
        return {"interleaved": self.interleaved is not None}


@irdl_op_definition
class AttentionOp(IRDLOperation, KernelOp):
    """Scaled dot-product attention with grouped-query heads.

    `q (B, Hq, Sq, D)`, `k (B, Hkv, Sk, D)`, `v (B, Hkv, Sk, Dv)` -> `(B, Hq, Sq, Dv)`, with
    `Hq % Hkv == 0` (query head h reads kv head `h // (Hq / Hkv)`). An optional `kv_len`
    (a 0-d i64 tensor) limits attention to the first `kv_len` keys (a KV cache's live length).
    `causal` lets query i see key j iff `j <= i + kv_len - Sq` (bottom-right aligned). An
    optional additive `mask` (q's element type, rank 1-4, broadcastable to `(B, Hq, Sq, Sk)`; not
    with `kv_len`) is added to the scaled scores before the softmax: the logits are
    `scale * q . k + mask`, rounded in the element type as the unfused graph rounds them.
    A row whose logits are all -inf (or whose keys are all masked) is zero: what softmax
    followed by the NaN guard `where(isnan(p), 0, p)` gives (softmax alone gives NaN there).

    Example: `%o = fuel.attention %q, %k, %v kv_len(%n : tensor<i64>) causal scale = 0.125
    : tensor<1x8x1x64xf32>, tensor<1x2x128x64xf32>, tensor<1x2x128x64xf32> -> tensor<1x8x1x64xf32>`

    Example: `%o = fuel.attention %q, %k, %v mask(%m : tensor<1x1x16x16xf32>) scale = 0.125
    : tensor<1x8x16x64xf32>, tensor<1x8x16x64xf32>, tensor<1x8x16x64xf32> -> tensor<1x8x16x64xf32>`
    """

    name = "fuel.attention"
    KERNEL_OP: ClassVar[str] = "attention"
    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    kv_len = opt_operand_def(TensorType)
    mask = opt_operand_def(TensorType)
    result = result_def(TensorType)
    causal = opt_prop_def(UnitAttr)
    scale = prop_def(FloatAttr[Float64Type])
    traits = traits_def(Pure())
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    assembly_format = (
        "$q `,` $k `,` $v (`kv_len` `(` $kv_len^ `:` type($kv_len) `)`)? "
        "(`mask` `(` $mask^ `:` type($mask) `)`)? (`causal` $causal^)? "
        "`scale` `=` $scale attr-dict `:` type($q) `,` type($k) `,` type($v) `->` type($result)"
    )

    def verify_(self) -> None:
        check_ranked(self)
        require_float(self, self.q)
        require_same_elem(self, self.q, self.k, self.v, self.result)
        q, k, v = shape(self.q), shape(self.k), shape(self.v)
        if not (len(q) == len(k) == len(v) == 4):
            raise fail(self, "q, k and v must have rank 4 (batch, heads, seq, head_dim)")
        if any(map(dims_differ, k[:3], v[:3])) or dims_differ(q[0], k[0]):
            raise fail(
                self,
                f"k {fmt_shape(k)} and v {fmt_shape(v)} must share batch, heads "
                f"and seq, and batch must match q {fmt_shape(q)}",
            )
        if dims_differ(q[3], k[3]):
            raise fail(self, f"q head_dim {q[3]} differs from k head_dim {k[3]}")
        if k[1] == 0 or (min(q[1], k[1]) > 0 and q[1] % k[1]):
            raise fail(self, f"query heads ({q[1]}) must be a multiple of kv heads ({k[1]})")
        require_shape(self, shape(self.result), (q[0], q[1], q[2], v[3]), "result")
        if self.kv_len is not None and (shape(self.kv_len) != () or elem(self.kv_len) != "i64"):
            raise fail(self, f"kv_len must be tensor<i64>, got {self.kv_len.type}")
        if self.mask is not None:
            self._verify_mask(q, k)

    def _verify_mask(self, q: tuple[int, ...], k: tuple[int, ...]) -> None:
        assert self.mask is not None
        if self.kv_len is not None:
            raise fail(self, "mask and kv_len are exclusive")
        require_same_elem(self, self.q, self.mask)
        full, m = (q[0], q[1], q[2], k[2]), shape(self.mask)
        b = broadcast_shapes(m, full)  # a dynamic dim may be anything: only known mismatches
        if not 1 <= len(m) <= 4 or b is None or any(map(dims_differ, b, full)):
            raise fail(self, f"mask {fmt_shape(m)} does not broadcast to {fmt_shape(full)}")

    def kernel_params(self) -> dict[str, Any]:
        return {"causal": self.causal is not None, "scale": float(self.scale.value.data)}
