"""`GraphBuilder`: build fuel IR from Python with shape and dtype inference.

    g = GraphBuilder()
    x = g.input("x", (4, 8), "f32")
    y = g.relu(g.matmul(x, g.weight("w", (8, 16))))
    module = g.build(outputs=[y])          # a verified FuelModule with its weights

Each method infers the result type, builds the op, and verifies it at once, so a shape error
points at the builder call that caused it. Weights attach as numpy arrays; a weight given no
value is initialised from the builder's seeded generator (normal, std 1/sqrt(fan_in)).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    UnitAttr,
    f64,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from fuel_dialect import ops_elementwise as ew
from fuel_dialect import ops_movement as mv
from fuel_dialect import ops_nn as nn
from fuel_dialect.attrs import DONATE_ATTR, NAME_ATTR
from fuel_dialect.base import dims_differ
from fuel_dialect.dialect import fuel_context
from fuel_dialect.dims import DIM_NAMES_ATTR, DIMS_ATTR, DimAttr
from fuel_dialect.dtypes import (
    DYNAMIC,
    broadcast_shapes,
    dtype_name,
    element_type,
    shape_of,
    tensor_type,
)
from fuel_dialect.ops_shape import IotaOp
from fuel_dialect.shapes import DimExpr, Shape, ShapeError, infer
from runtime.constants import dense_array
from runtime.dtypes import to_numpy
from runtime.module import FuelModule

Value = SSAValue
Scalar = int | float | bool


class BuilderError(ValueError):
    """A builder call with operands the op does not accept."""


def _ints(xs: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, [int(v) for v in xs])


def _hint(name: str) -> str:
    h = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return h if re.match(r"[A-Za-z_]", h) else f"v{h}"


def _reads_back(attr: DenseIntOrFPElementsAttr, want: np.ndarray) -> bool:
    """Whether `attr` printed and parsed again decodes to exactly `want`'s bytes."""
    from xdsl.parser import Parser
    from xdsl.utils.exceptions import ParseError

    try:
        back = Parser(fuel_context(), str(attr)).parse_attribute()
        return isinstance(back, DenseIntOrFPElementsAttr) and (
            dense_array(back).tobytes() == want.tobytes()
        )
    except (ParseError, ValueError, OverflowError):
        return False


class GraphBuilder:
    """Appends fuel ops to one function; `build` returns the finished module."""

    def __init__(self, name: str = "main", seed: int = 0):
        self.name = name
        self.block = Block()
        self.inputs: list[tuple[str, Value]] = []
        self.weights: dict[str, np.ndarray] = {}
        self._weight_values: dict[str, Value] = {}
        self.rng = np.random.default_rng(seed)
        self.dims: dict[str, tuple[int, int]] = {}
        """Dim symbols declared with `dim`: name -> inclusive range."""
        self._dim_names: dict[str, tuple[str, ...]] = {}
        self._donated: set[str] = set()
        self._sym: dict[SSAValue, Shape] = {}
        """Each value's shape over the dim symbols (kept once a dim is declared)."""

    # -- plumbing --------------------------------------------------------------------------

    def _add(self, op: Operation) -> Value:
        self.block.add_op(op)
        try:
            op.verify()
            if self.dims:
                self._track(op)
        except DiagnosticException as e:
            op.detach()
            raise BuilderError(str(e)) from None
        except ShapeError as e:
            op.detach()
            raise BuilderError(f"'{op.name}': {e}") from None
        return op.results[0]

    def _track(self, op: Operation) -> None:
        """Record the op's result shapes over the dim symbols (its shape rule)."""
        env = {n: DimExpr.sym(n) for n in self.dims}
        outs = infer(op, [self.sym_shape(v) for v in op.operands], env)
        for r, s in zip(op.results, outs, strict=True):
            declared = shape_of(r.type)
            self._sym[r] = tuple(a if a >= 0 else b for a, b in zip(declared, s, strict=True))

    def _make(
        self,
        cls: type[Operation],
        operands: Sequence[Value],
        shape: Sequence[int],
        dtype: str,
        **props: Attribute,
    ) -> Value:
        op = cls.create(
            operands=list(operands),
            result_types=[tensor_type(shape, dtype)],
            properties=dict(props),
        )
        return self._add(op)

    def _value(self, x: Value | Scalar, like: Value) -> Value:
        """Python scalars become 0-d constants of `like`'s dtype."""
        return x if isinstance(x, SSAValue) else self.constant(x, dtype_name(like.type))

    # -- graph inputs, weights, constants --------------------------------------------------

    def dim(self, name: str, lo: int, hi: int) -> str:
        """Declare a dim symbol in `[lo, hi]` (`fuel.dims`); pass its name as an input dim."""
        if not 1 <= lo <= hi:
            raise BuilderError(f"dim '{name}': range [{lo}, {hi}] needs 1 <= lo <= hi")
        self.dims[name] = (lo, hi)
        for a in self.block.args:  # inputs declared before: their `?` dims are not this one
            self._sym.setdefault(a, tuple(shape_of(a.type)))
        return name

    def sym_shape(self, v: Value) -> Shape:
        """`v`'s shape with each `?` dim as an expression of the dim symbols (`DimExpr`)."""
        return self._sym.get(v) or tuple(shape_of(v.type))

    def iota(
        self,
        shape: Sequence[int | DimExpr],
        dtype: str,
        start: float | int | DimExpr = 0,
        step: float = 1.0,
        axis: int = 0,
    ) -> Value:
        """`start + step * i` along `axis` of a tensor of `shape` (dims: ints or expressions
        of dim symbols; `step = 0`: a fill): folded to a constant when a run binds them."""
        dims = [d if isinstance(d, int) else StringAttr(str(d)) for d in shape]
        static = [d if isinstance(d, int) else DYNAMIC for d in shape]
        props = {
            "shape": ArrayAttr([IntegerAttr(d, i64) if isinstance(d, int) else d for d in dims]),
            "start": StringAttr(str(start)),
            "step": FloatAttr(float(step), f64),
            "axis": IntegerAttr(axis, i64),
        }
        op = IotaOp.create(properties=props, result_types=[tensor_type(static, dtype)])
        return self._add(op)

    def input(
        self, name: str, shape: Sequence[int | str], dtype: str = "f32", *, donate: bool = False
    ) -> Value:
        """A graph input; a dim given as a name is that (declared) dim symbol, `?` in its type.
        `donate`: the run may update its buffer in place (`fuel.donate`: a KV cache)."""
        if donate:
            self._donated.add(name)
        for d in shape:
            if isinstance(d, str) and d not in self.dims:
                raise BuilderError(f"input '{name}': dim '{d}' is not declared (GraphBuilder.dim)")
        syms = tuple(d for d in shape if isinstance(d, str))
        if syms:
            self._dim_names[name] = syms
        static = [DYNAMIC if isinstance(d, str) else d for d in shape]
        arg = self.block.insert_arg(tensor_type(static, dtype), len(self.block.args))
        if self.dims:
            self._sym[arg] = tuple(DimExpr.sym(d) if isinstance(d, str) else d for d in shape)
        arg.name_hint = _hint(name)
        self.inputs.append((name, arg))
        return arg

    def weight(
        self, name: str, shape: Sequence[int], dtype: str = "f32", value: np.ndarray | None = None
    ) -> Value:
        """A named parameter; reusing a name returns the same value."""
        if name in self._weight_values:
            return self._weight_values[name]
        shape = tuple(shape)
        if value is None:
            fan_in = shape[0] if len(shape) > 1 else max(1, shape[-1] if shape else 1)
            value = self.rng.standard_normal(shape) / math.sqrt(fan_in)
        arr = np.asarray(value).astype(to_numpy(dtype), order="C")  # ascontiguousarray: 0-d -> 1-d
        if arr.shape != shape:
            raise BuilderError(f"weight '{name}': value shape {arr.shape} != declared {shape}")
        self.weights[name] = arr
        v = self._add(mv.WeightOp(name, tensor_type(shape, dtype)))
        v.name_hint = _hint(name)
        self._weight_values[name] = v
        return v

    def constant(
        self,
        value: Scalar | Sequence[object] | np.ndarray,
        dtype: str = "f32",
        *,
        checked: bool = True,
    ) -> Value:
        """An inline `fuel.constant`; a value whose IR text would not read back bit-exactly
        (xDSL spells NaN, inf and some floats in hex) becomes a weight `constant.<n>`.
        `checked=False` always inlines (for callers that check and name weights themselves)."""
        arr = np.asarray(value, dtype=to_numpy(dtype) if dtype != "bf16" else np.float32)
        t = tensor_type(arr.shape, dtype)
        data = arr.astype(bool if dtype == "i1" else arr.dtype).ravel().tolist()
        attr = DenseIntOrFPElementsAttr.from_list(t, data)
        if checked and not _reads_back(attr, arr.astype(to_numpy(dtype))):
            name = f"constant.{sum(n.startswith('constant.') for n in self.weights)}"
            return self.weight(name, arr.shape, dtype, value=arr)
        return self._add(mv.ConstantOp(attr))

    # -- elementwise -----------------------------------------------------------------------

    def _unary(self, cls: type[Operation], x: Value, **props: Attribute) -> Value:
        return self._make(cls, [x], shape_of(x.type), dtype_name(x.type), **props)

    def neg(self, x: Value) -> Value:
        return self._unary(ew.NegOp, x)  # noqa: E704

    def abs(self, x: Value) -> Value:
        return self._unary(ew.AbsOp, x)  # noqa: E704

    def relu(self, x: Value) -> Value:
        return self._unary(ew.ReluOp, x)  # noqa: E704

    def exp(self, x: Value) -> Value:
        return self._unary(ew.ExpOp, x)  # noqa: E704

    def log(self, x: Value) -> Value:
        return self._unary(ew.LogOp, x)  # noqa: E704

    def sqrt(self, x: Value) -> Value:
        return self._unary(ew.SqrtOp, x)  # noqa: E704

    def rsqrt(self, x: Value) -> Value:
        return self._unary(ew.RsqrtOp, x)  # noqa: E704

    def recip(self, x: Value) -> Value:
        return self._unary(ew.RecipOp, x)  # noqa: E704

    def tanh(self, x: Value) -> Value:
        return self._unary(ew.TanhOp, x)  # noqa: E704

    def sigmoid(self, x: Value) -> Value:
        return self._unary(ew.SigmoidOp, x)  # noqa: E704

    def silu(self, x: Value) -> Value:
        return self._unary(ew.SiluOp, x)  # noqa: E704

    def sin(self, x: Value) -> Value:
        return self._unary(ew.SinOp, x)  # noqa: E704

    def cos(self, x: Value) -> Value:
        return self._unary(ew.CosOp, x)  # noqa: E704

    def erf(self, x: Value) -> Value:
        return self._unary(ew.ErfOp, x)  # noqa: E704

    def gelu(self, x: Value, approximate: str = "none") -> Value:
        if approximate not in ("none", "tanh"):
            raise BuilderError(f"gelu approximate must be 'none' or 'tanh', got '{approximate}'")
        props = {"tanh": UnitAttr()} if approximate == "tanh" else {}
        return self._unary(ew.GeluOp, x, **props)

    def _binary(
        self,
        cls: type[Operation],
        a: Value | Scalar,
        b: Value | Scalar,
        out_dtype: str | None = None,
    ) -> Value:
        if not isinstance(a, SSAValue):
            if not isinstance(b, SSAValue):
                raise BuilderError("at least one operand must be a graph value")
            a = self._value(a, b)
        b = self._value(b, a)
        shape = broadcast_shapes(shape_of(a.type), shape_of(b.type))
        if shape is None:
            raise BuilderError(f"'{cls.name}' operands do not broadcast: {a.type} vs {b.type}")
        return self._make(cls, [a, b], shape, out_dtype or dtype_name(a.type))

    def add(self, a: Value | Scalar, b: Value | Scalar) -> Value:
        return self._binary(ew.AddOp, a, b)  # noqa: E501, E704

    def sub(self, a: Value | Scalar, b: Value | Scalar) -> Value:
        return self._binary(ew.SubOp, a, b)  # noqa: E501, E704

    def mul(self, a: Value | Scalar, b: Value | Scalar) -> Value:
        return self._binary(ew.MulOp, a, b)  # noqa: E501, E704

    def div(self, a: Value | Scalar, b: Value | Scalar) -> Value:
        return self._binary(ew.DivOp, a, b)  # noqa: E501, E704

    def pow(self, a: Value | Scalar, b: Value | Scalar) -> Value:
        return self._binary(ew.PowOp, a, b)  # noqa: E501, E704

    def max(self, a: Value | Scalar, b: Value | Scalar) -> Value:
        return self._binary(ew.MaxOp, a, b)  # noqa: E501, E704

    def min(self, a: Value | Scalar, b: Value | Scalar) -> Value:
        return self._binary(ew.MinOp, a, b)  # noqa: E501, E704

    def compare(self, kind: str, a: Value | Scalar, b: Value | Scalar) -> Value:
        """`kind` in eq, ne, lt, le, gt, ge; the result is i1."""
        ops = {
            "eq": ew.EqOp,
            "ne": ew.NeOp,
            "lt": ew.LtOp,
            "le": ew.LeOp,
            "gt": ew.GtOp,
            "ge": ew.GeOp,
        }
        if kind not in ops:
            raise BuilderError(f"unknown comparison '{kind}' (expected one of {', '.join(ops)})")
        return self._binary(ops[kind], a, b, out_dtype="i1")

    def where(self, cond: Value, a: Value | Scalar, b: Value | Scalar) -> Value:
        if not isinstance(a, SSAValue):
            if not isinstance(b, SSAValue):
                raise BuilderError("where needs at least one graph value among a and b")
            a = self._value(a, b)
        b = self._value(b, a)
        shape = broadcast_shapes(shape_of(cond.type), shape_of(a.type), shape_of(b.type))
        if shape is None:
            raise BuilderError(f"where operands do not broadcast: {cond.type}, {a.type}, {b.type}")
        return self._make(ew.WhereOp, [cond, a, b], shape, dtype_name(a.type))

    def cast(self, x: Value, dtype: str) -> Value:
        element_type(dtype)
        return self._make(ew.CastOp, [x], shape_of(x.type), dtype)

    # -- linear algebra, reductions, nn ----------------------------------------------------

    def matmul(self, a: Value, b: Value) -> Value:
        sa, sb = shape_of(a.type), shape_of(b.type)
        if len(sa) < 2 or len(sb) < 2 or dims_differ(sa[-1], sb[-2]):
            raise BuilderError(f"matmul shapes do not contract: {a.type} x {b.type}")
        batch = broadcast_shapes(sa[:-2], sb[:-2])
        if batch is None:
            raise BuilderError(f"matmul batch dims do not broadcast: {a.type} x {b.type}")
        return self._make(nn.MatmulOp, [a, b], (*batch, sa[-2], sb[-1]), dtype_name(a.type))

    def _reduce(
        self, cls: type[Operation], x: Value, axes: int | Sequence[int] | None, keepdim: bool
    ) -> Value:
        s = shape_of(x.type)
        axes = range(len(s)) if axes is None else [axes] if isinstance(axes, int) else axes
        norm = {a % len(s) if -len(s) <= a < len(s) else a for a in axes}
        if any(not 0 <= a < len(s) for a in norm):
            raise BuilderError(f"reduction axes {list(axes)} out of range for {x.type}")
        shape = [1 if i in norm else d for i, d in enumerate(s) if keepdim or i not in norm]
        props: dict[str, Attribute] = {"axes": _ints(list(axes))}
        if keepdim:
            props["keepdim"] = UnitAttr()
        return self._make(cls, [x], shape, dtype_name(x.type), **props)

    def reduce_sum(
        self, x: Value, axes: int | Sequence[int] | None = None, keepdim: bool = False
    ) -> Value:  # noqa: E501
        return self._reduce(nn.ReduceSumOp, x, axes, keepdim)

    def reduce_mean(
        self, x: Value, axes: int | Sequence[int] | None = None, keepdim: bool = False
    ) -> Value:  # noqa: E501
        return self._reduce(nn.ReduceMeanOp, x, axes, keepdim)

    def reduce_max(
        self, x: Value, axes: int | Sequence[int] | None = None, keepdim: bool = False
    ) -> Value:  # noqa: E501
        return self._reduce(nn.ReduceMaxOp, x, axes, keepdim)

    def reduce_min(
        self, x: Value, axes: int | Sequence[int] | None = None, keepdim: bool = False
    ) -> Value:  # noqa: E501
        return self._reduce(nn.ReduceMinOp, x, axes, keepdim)

    def softmax(self, x: Value, axis: int = -1) -> Value:
        return self._unary(nn.SoftmaxOp, x, axis=IntegerAttr(axis, i64))

    def rms_norm(self, x: Value, weight: Value, eps: float = 1e-6) -> Value:
        return self._make(
            nn.RmsNormOp, [x, weight], shape_of(x.type), dtype_name(x.type), eps=FloatAttr(eps, f64)
        )

    def layer_norm(self, x: Value, weight: Value, bias: Value, eps: float = 1e-5) -> Value:
        return self._make(
            nn.LayerNormOp,
            [x, weight, bias],
            shape_of(x.type),
            dtype_name(x.type),
            eps=FloatAttr(eps, f64),
        )

    def rope(self, x: Value, cos: Value, sin: Value, interleaved: bool = False) -> Value:
        props = {"interleaved": UnitAttr()} if interleaved else {}
        return self._make(nn.RopeOp, [x, cos, sin], shape_of(x.type), dtype_name(x.type), **props)

    def attention(
        self,
        q: Value,
        k: Value,
        v: Value,
        *,
        causal: bool = False,
        scale: float | None = None,
        kv_len: Value | None = None,
    ) -> Value:
        """SDPA; `scale` defaults to 1/sqrt(head_dim)."""
        sq, sv = shape_of(q.type), shape_of(v.type)
        if len(sq) != 4 or len(sv) != 4:
            raise BuilderError(f"attention needs rank-4 q, k, v; got {q.type} and {v.type}")
        scale = 1.0 / math.sqrt(sq[3]) if scale is None else scale
        props: dict[str, Attribute] = {"scale": FloatAttr(scale, f64)}
        if causal:
            props["causal"] = UnitAttr()
        operands = [q, k, v] + ([kv_len] if kv_len is not None else [])
        props["operandSegmentSizes"] = DenseArrayBase.from_list(
            IntegerAttr(0, 32).type, [1, 1, 1, 1 if kv_len is not None else 0, 0]
        )
        return self._make(nn.AttentionOp, operands, (*sq[:3], sv[3]), dtype_name(q.type), **props)

    # -- movement --------------------------------------------------------------------------

    def reshape(
        self, x: Value, shape: Sequence[int], dims: Sequence[int | DimExpr] | None = None
    ) -> Value:
        """Reshape; one dim may be -1 (inferred). `dims`: each result dim as an int or an
        expression of the dim symbols, for `?` dims the input's cannot determine (the op's
        `dims` attribute)."""
        if dims is not None:
            written = [d if isinstance(d, int) else StringAttr(str(d)) for d in dims]
            static = [d if isinstance(d, int) else DYNAMIC for d in dims]
            op = mv.ReshapeOp.create(
                operands=[x],
                result_types=[tensor_type(static, dtype_name(x.type))],
                attributes={
                    "dims": ArrayAttr(
                        [IntegerAttr(d, i64) if isinstance(d, int) else d for d in written]
                    )
                },
            )
            return self._add(op)
        s, shape = shape_of(x.type), list(shape)
        if shape.count(-1) > 1:
            raise BuilderError(f"reshape to {shape}: at most one dim may be -1")
        if -1 in shape and min(s, default=0) < 0:  # a `?` dim in: the inferred one is `?`
            shape[shape.index(-1)] = DYNAMIC
        elif -1 in shape:
            known = math.prod(d for d in shape if d != -1)
            if known == 0 or math.prod(s) % known:
                raise BuilderError(f"cannot reshape {x.type} to {shape}")
            shape[shape.index(-1)] = math.prod(s) // known
        return self._make(mv.ReshapeOp, [x], shape, dtype_name(x.type))

    def transpose(self, x: Value, perm: Sequence[int]) -> Value:
        s = shape_of(x.type)
        if sorted(perm) != list(range(len(s))):
            raise BuilderError(f"transpose perm {list(perm)} is not a permutation for {x.type}")
        return self._make(
            mv.TransposeOp, [x], [s[p] for p in perm], dtype_name(x.type), perm=_ints(perm)
        )

    def broadcast(self, x: Value, shape: Sequence[int]) -> Value:
        """numpy `broadcast_to`: input dims (aligned right) are 1 or equal to `shape`'s."""
        s, shape = shape_of(x.type), tuple(shape)
        out = broadcast_shapes(s, shape)
        if len(s) > len(shape) or out is None or any(map(dims_differ, out, shape)):
            raise BuilderError(f"cannot broadcast {x.type} to shape {list(shape)}")
        return self._make(mv.BroadcastOp, [x], shape, dtype_name(x.type))

    def slice(
        self,
        x: Value,
        starts: Sequence[int],
        limits: Sequence[int],
        steps: Sequence[int] | None = None,
    ) -> Value:
        s = shape_of(x.type)
        steps = [1] * len(s) if steps is None else list(steps)
        if not len(starts) == len(limits) == len(steps) == len(s) or min(steps, default=1) < 1:
            raise BuilderError(f"slice needs one start/limit/step (>= 1) per dim of {x.type}")
        shape = [  # a slice of a `?` dim is `?`: its length is known when the dim binds
            len(range(*slice(a, b, c).indices(d))) if d >= 0 else DYNAMIC
            for a, b, c, d in zip(starts, limits, steps, s, strict=True)
        ]
        return self._make(
            mv.SliceOp,
            [x],
            shape,
            dtype_name(x.type),
            starts=_ints(starts),
            limits=_ints(limits),
            steps=_ints(steps),
        )

    def concat(self, xs: Sequence[Value], axis: int = 0) -> Value:
        if not xs:
            raise BuilderError("concat needs at least one input")
        s0 = list(shape_of(xs[0].type))
        ax = axis % len(s0) if -len(s0) <= axis < len(s0) else None
        if ax is None:
            raise BuilderError(f"concat axis {axis} out of range for {xs[0].type}")
        cat = [shape_of(x.type)[ax] if len(shape_of(x.type)) > ax else 0 for x in xs]
        s0[ax] = sum(cat) if min(cat) >= 0 else DYNAMIC
        return self._make(
            mv.ConcatOp, list(xs), s0, dtype_name(xs[0].type), axis=IntegerAttr(axis, i64)
        )

    def gather(self, data: Value, indices: Value, axis: int = 0) -> Value:
        s, si = shape_of(data.type), shape_of(indices.type)
        if not -len(s) <= axis < len(s):
            raise BuilderError(f"gather axis {axis} out of range for {data.type}")
        ax = axis % len(s)
        return self._make(
            mv.GatherOp,
            [data, indices],
            (*s[:ax], *si, *s[ax + 1 :]),
            dtype_name(data.type),
            axis=IntegerAttr(axis, i64),
        )

    def index_copy(
        self,
        dest: Value,
        source: Value,
        index: Value,
        axis: int,
        offsets: Sequence[int] | None = None,
    ) -> Value:
        """`dest` with `source`'s rows along `axis` written at `index` (`fuel.index_copy`)."""
        s = shape_of(dest.type)
        if not -len(s) <= axis < len(s):
            raise BuilderError(f"index_copy axis {axis} out of range for {dest.type}")
        return self._make(
            mv.IndexCopyOp,
            [dest, source, index],
            s,
            dtype_name(dest.type),
            axis=IntegerAttr(axis % len(s), i64),
            offsets=_ints(offsets if offsets is not None else [0] * len(s)),
        )

    # -- finishing -------------------------------------------------------------------------

    def _arg_attrs(self, name: str) -> DictionaryAttr:
        attrs: dict[str, Attribute] = {NAME_ATTR: StringAttr(name)}
        if name in self._donated:
            attrs[DONATE_ATTR] = UnitAttr()
        if name in self._dim_names:
            attrs[DIM_NAMES_ATTR] = ArrayAttr([StringAttr(d) for d in self._dim_names[name]])
        return DictionaryAttr(attrs)

    def build(self, outputs: Sequence[Value] | Mapping[str, Value]) -> FuelModule:
        """Close the function with `func.return` and return the verified module + weights."""
        if isinstance(outputs, Mapping):
            names, values = list(outputs.keys()), list(outputs.values())
        else:
            values = list(outputs)
            names = [f"out{i}" if len(values) > 1 else "out" for i in range(len(values))]
        self.block.add_op(func.ReturnOp(*values))
        arg_types = [a.type for a in self.block.args]
        fn = func.FuncOp(self.name, (arg_types, [v.type for v in values]), Region(self.block))
        fn.arg_attrs = ArrayAttr([self._arg_attrs(n) for n, _ in self.inputs])
        if self.dims:
            fn.attributes[DIMS_ATTR] = DictionaryAttr(
                {k: DimAttr(v) for k, v in sorted(self.dims.items())}
            )
        fn.res_attrs = ArrayAttr([DictionaryAttr({NAME_ATTR: StringAttr(n)}) for n in names])
        module = ModuleOp([fn])
        try:
            module.verify()
        except DiagnosticException as e:
            raise BuilderError(str(e)) from None
        return FuelModule(module, dict(self.weights))
