"""`Emitter`, shared by the ONNX and torch.export importers: the importer's values are numpy
constants or traced IR values, and every builder call whose operands are all constants is
folded at import time.

Folding builds the op in a scratch `GraphBuilder` (so shape inference and verification are the
ones the IR would get) and runs fuel's own CPU kernel on the constant arrays: folded values have
exactly the semantics and rounding of the op they replace. A constant reaches the IR only when a
traced op consumes it (or it is a graph output): small ones inline as `fuel.constant`, bigger
ones (and any whose IR text would not read back bit-exactly) as a named `fuel.weight`.

A traced op whose result has no elements is replaced by an empty constant: its value cannot
depend on its inputs, and no kernel has to handle the empty case.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, LocationAttr, UnknownLoc
from xdsl.ir import Operation, SSAValue
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError

from frontends.builder import GraphBuilder
from fuel_dialect.base import KernelOp
from fuel_dialect.dialect import fuel_context
from fuel_dialect.dtypes import (
    DYNAMIC,
    FLOAT_NAMES,
    INT_NAMES,
    dtype_name,
    normalize_axis,
    shape_of,
)
from fuel_dialect.shapes import DimExpr
from runtime.binding_table import BindingTableError
from runtime.compiled import compile_op
from runtime.dtypes import from_numpy, to_numpy
from runtime.kernels import global_bindings

Tensor = np.ndarray | SSAValue
"""An importer value: a constant known at import time, or a value of the IR being built."""

Build = Callable[..., SSAValue]
"""`build(builder, *operand_values) -> result`: one builder call, replayed for folding."""

SMALL_CONSTANT = 16
"""Constants of at most this many elements are inlined as `fuel.constant`; bigger ones become
`fuel.weight`s (safetensors), so the IR text stays readable whatever the model."""


class Unsupported(Exception):
    """Raised inside a node's import; the driver prefixes the node and raises OnnxImportError."""


class NeedsConstant(Unsupported):
    """An input the node needs as a constant is computed at run time; `name` is its tensor."""

    def __init__(self, name: str, message: str):
        super().__init__(message)
        self.name = name


def sanitize(name: str) -> str:
    """An ONNX tensor name as an SSA name hint (`%layers_0_attn_MatMul_output_0`)."""
    h = re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_") or "v"
    return h if re.match(r"[A-Za-z_]", h) else f"v{h}"


def dtype_of(t: Tensor) -> str:
    """The fuel dtype of a constant or traced value."""
    if isinstance(t, SSAValue):
        return dtype_name(t.type)
    if t.dtype == object:  # a shape value holding dim-symbol expressions
        return "i64"
    try:
        return from_numpy(t.dtype)
    except KeyError:
        raise Unsupported(f"unsupported dtype {t.dtype}") from None


def shape_of_t(t: Tensor) -> tuple[int, ...]:
    """The static shape of a constant or traced value (a dynamic dim is negative)."""
    return shape_of(t.type) if isinstance(t, SSAValue) else tuple(t.shape)


def sym_shape_t(em: Emitter, t: Tensor) -> tuple[Any, ...]:
    """The shape of a constant or traced value, each `?` as its dim-symbol expression."""
    return em.b.sym_shape(t) if isinstance(t, SSAValue) else tuple(t.shape)


def static_dims(dims: Sequence[Any]) -> list[int]:
    """Dims as a type's shape: an expression is `?` (DYNAMIC)."""
    return [int(d) if not isinstance(d, DimExpr) else DYNAMIC for d in dims]


def dims_of(arr: np.ndarray) -> list[Any]:
    """A shape value's entries: ints, or `DimExpr`s where they depend on dim symbols."""
    return [v if isinstance(v, DimExpr) else int(v) for v in np.asarray(arr).reshape(-1)]


def is_symbolic(t: Tensor) -> bool:
    """A constant holding dim-symbol expressions (what `Shape` of a `?` dim gives)."""
    return isinstance(t, np.ndarray) and t.dtype == object


def static_if_possible(arr: np.ndarray) -> np.ndarray:
    """An object array of dims as int64 once no expression is left in it."""
    if arr.dtype == object and not any(isinstance(v, DimExpr) for v in arr.reshape(-1)):
        return arr.astype(np.int64)
    return arr


def scalar(value: float | int | bool, dtype: str) -> np.ndarray:
    """A 0-d constant of a fuel dtype."""
    return np.asarray(value).astype(to_numpy(dtype))


class Emitter:
    """Builds the imported function: folds constant computations, materialises constants."""

    def __init__(self, builder: GraphBuilder):
        self.b = builder
        self.loc: LocationAttr = UnknownLoc()
        """The location given to every op built now (the ONNX node being imported)."""
        self.node_name = "constant"
        """The ONNX node being imported: unnamed constants it makes are named after it."""
        self._table = global_bindings()
        self._ctx = fuel_context()
        self._values: dict[int, tuple[np.ndarray, SSAValue]] = {}
        self._names: dict[int, tuple[np.ndarray, str]] = {}

    def name(self, arr: np.ndarray, name: str) -> None:
        """Name a constant after its ONNX tensor (the first name given wins)."""
        if id(arr) not in self._names:
            self._names[id(arr)] = (arr, name)

    # -- building -------------------------------------------------------------------------

    def op(self, method: str, *operands: Tensor, **kw: object) -> Tensor:
        """`GraphBuilder.<method>(*operands, **kw)`, folded when every operand is constant."""
        return self.apply(lambda g, *vs: getattr(g, method)(*vs, **kw), *operands)

    def apply(self, build: Build, *operands: Tensor) -> Tensor:
        """Run `build(builder, *values)` on the IR, or fold it when all operands are constant."""
        if all(isinstance(t, np.ndarray) for t in operands):
            return self._fold(build, [np.asarray(t) for t in operands])
        values = [self.value(t) for t in operands]
        result = build(self.b, *values)
        op = result.owner
        assert isinstance(op, Operation)
        op.location = self.loc
        self._check_kernel(op)
        shape = shape_of(result.type)
        if 0 in shape:
            dims, dtype = self.b.sym_shape(result), dtype_name(result.type)
            self.b.block.erase_op(op)
            if min(shape) < 0:  # empty whatever the `?` dims: a fill a run folds
                return self.at(self.b.iota(dims, dtype, start=0, step=0.0))
            return np.zeros(shape, to_numpy(dtype))
        return result

    def _fold(self, build: Build, arrays: list[np.ndarray]) -> np.ndarray:
        g = GraphBuilder()
        args = [g.input(f"c{i}", a.shape, dtype_of(a)) for i, a in enumerate(arrays)]
        result = build(g, *args)
        op = result.owner
        out = np.zeros(shape_of(result.type), to_numpy(dtype_name(result.type)))
        if out.size == 0:
            return out
        if not isinstance(op, KernelOp):  # a builder call that only made a constant
            return _decode(op.value)  # type: ignore[attr-defined]
        if any(a.dtype == object for a in arrays):
            return _fold_symbolic(op, arrays, out)
        try:
            node = compile_op(op, self._table)
            with np.errstate(all="ignore"):
                node.entry.kernel([np.asarray(a, order="C") for a in arrays], [out], node.params)
        except BindingTableError as e:
            raise Unsupported(f"no fuel kernel to fold '{op.name}': {e}") from None
        except (ValueError, IndexError, TypeError) as e:
            raise Unsupported(f"folding '{op.name}' on constants failed: {e}") from None
        return out

    def _check_kernel(self, op: Operation) -> None:
        if isinstance(op, KernelOp):
            key, dtypes = op.KERNEL_OP, op.kernel_dtypes()
            if not self._table.backend_supports(key, dtypes, "cpu"):
                raise Unsupported(f"fuel has no kernel for '{op.name}' on ({', '.join(dtypes)})")

    # -- constants ------------------------------------------------------------------------

    def value(self, t: Tensor) -> SSAValue:
        """The IR value of `t`, materialising a constant once (constant or weight)."""
        if isinstance(t, SSAValue):
            return t
        hit = self._values.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        dtype = dtype_of(t)
        if is_symbolic(t):
            v = self._symbolic(t)
            self._values[id(t)] = (t, v)
            return v
        v = self._inline(t, dtype) if t.size <= SMALL_CONSTANT else None
        if v is None:
            v = self.b.weight(self._weight_name(t), t.shape, dtype, t)
        assert isinstance(v.owner, Operation)
        v.owner.location = self.loc
        self._values[id(t)] = (t, v)
        return v

    def _symbolic(self, arr: np.ndarray) -> SSAValue:
        """A shape value of dim expressions as IR: one `fuel.iota` fill per element (a run
        folds them), joined by a concat for a vector."""
        if arr.ndim > 1:
            raise Unsupported(f"a {arr.ndim}-d value of dim expressions is not supported")
        if arr.ndim == 0:
            return self.at(self.b.iota((), "i64", start=arr.item(), step=0.0))
        parts = [self.at(self.b.iota((1,), "i64", start=d, step=0.0)) for d in arr.tolist()]
        return self.at(self.b.concat(parts, axis=0)) if len(parts) > 1 else parts[0]

    def at(self, v: SSAValue) -> SSAValue:
        assert isinstance(v.owner, Operation)
        v.owner.location = self.loc
        return v

    def _inline(self, arr: np.ndarray, dtype: str) -> SSAValue | None:
        """A `fuel.constant`, or None when its printed form would not parse back bit-exactly
        (xDSL prints NaN, inf and some f32 values as hex, which its parser reads as integers)."""
        v = self.b.constant(arr, dtype, checked=False)  # checked below, named on failure
        op = v.owner
        assert isinstance(op, Operation)
        try:
            back = Parser(self._ctx, str(op.value)).parse_attribute()  # type: ignore[attr-defined]
            same = isinstance(back, DenseIntOrFPElementsAttr) and (
                _decode(back).tobytes() == arr.astype(to_numpy(dtype)).tobytes()
            )
        except (ParseError, ValueError, OverflowError):
            same = False
        if same:
            return v
        self.b.block.erase_op(op)
        return None

    def _weight_name(self, arr: np.ndarray) -> str:
        named = self._names.get(id(arr))
        base = named[1] if named is not None and named[0] is arr else f"{self.node_name}.constant"
        name, i = base, 0
        while name in self.b.weights:
            i += 1
            name = f"{base}.{i}"
        return name


_SYMBOLIC_CASTS = INT_NAMES
"""A cast of a shape value to an integer dtype keeps its expressions (dims are integers)."""


def _fold_symbolic(op: Operation, arrays: list[np.ndarray], out: np.ndarray) -> np.ndarray:
    """Fold an op over shape values holding dim expressions: fuel's numpy kernel runs on
    object arrays (Python's `+`, `*`, `//`, `==` on `DimExpr`); ints where nothing symbolic
    is left. A float cast or an op numpy cannot run on objects is `Unsupported`."""
    if op.name == "fuel.cast":
        if dtype_name(op.results[0].type) not in _SYMBOLIC_CASTS:
            raise Unsupported("casts a dim expression to a float (not supported yet)")
        return arrays[0].copy()
    sym = np.empty(out.shape, object)
    try:
        node = compile_op(op, global_bindings())
        node.entry.kernel(arrays, [sym], node.params)
    except (BindingTableError, ValueError, TypeError, IndexError) as e:
        raise Unsupported(f"'{op.name}' on dim expressions is not supported ({e})") from None
    done = static_if_possible(sym)
    return done.astype(out.dtype) if done.dtype != object else done


def _decode(attr: DenseIntOrFPElementsAttr) -> np.ndarray:
    """The array a dense attribute holds, in its fuel dtype."""
    t = attr.get_type()
    dtype, shape = dtype_name(t), shape_of(t)
    vals = list(attr.get_values())
    arr = np.asarray(vals, np.float64 if dtype in FLOAT_NAMES else None)
    if arr.size == 1 and math.prod(shape) != 1:
        arr = np.full(shape, arr.reshape(()))
    return arr.astype(to_numpy(dtype)).reshape(shape)


# -- shared by the importers -------------------------------------------------------------------


def reshape_to(em: Emitter, x: Tensor, shape: Sequence[Any]) -> Tensor:
    """`x` reshaped, or `x` itself when the shape does not change (dims may be dim-symbol
    expressions: the result has `?` there, and its shape rule must give the same ones)."""
    want = tuple(d if isinstance(d, DimExpr) else int(d) for d in shape)
    if any(isinstance(d, int) and d < 0 for d in want):
        # `?` read off a static shape (Unsqueeze, Squeeze): the input's `?` dims, in order
        dyn = iter([d for d in sym_shape_t(em, x) if isinstance(d, DimExpr)])
        want = tuple(next(dyn, d) if isinstance(d, int) and d < 0 else d for d in want)
    if want == sym_shape_t(em, x):
        return x
    written = [d for d in want if isinstance(d, DimExpr)]
    if len(written) > 1 and written != [d for d in sym_shape_t(em, x) if isinstance(d, DimExpr)]:
        # the input's `?` dims do not give the result's in order (`batch*seq` rows back into
        # `batch` and `seq`): the result dims written out (the op's `dims`)
        return em.op("reshape", x, shape=static_dims(want), dims=want)
    out = em.op("reshape", x, shape=static_dims(want))
    if isinstance(out, SSAValue) and sym_shape_t(em, out) != want:
        got = [str(d) for d in sym_shape_t(em, out)]
        raise Unsupported(
            f"reshape to {[str(d) for d in want]}: fuel's shape rule gives {got} (several "
            "dynamic dims it cannot tell apart)"
        )
    return out


def expand_to(em: Emitter, x: Tensor, out: Sequence[Any]) -> Tensor:
    """`x` broadcast to `out`, a shape it broadcasts to (dims may be dim-symbol expressions)."""
    s, out = sym_shape_t(em, x), tuple(out)
    if out == s:
        return x
    off = len(out) - len(s)
    if any(isinstance(d, DimExpr) and (i < off or s[i - off] == 1) for i, d in enumerate(out)):
        # a `?` dim the input does not carry: broadcast against a fill of the full shape
        true = em.at(em.b.iota(out, "i1", start=1, step=0.0))
        return em.op("where", true, x, x)
    return em.op("broadcast", x, shape=static_dims(out))


def positions(em: Emitter, x: Tensor, axis: int, start: Any, length: Any) -> Tensor:
    """`x[start : start + length]` along `axis`, where `start` or `length` is an expression
    of dim symbols (`pos[:, :seq]`): a gather of the positions a `fuel.iota` counts (a run
    folds them once the symbols bind). The span must lie inside the dim when they do."""
    idx = em.at(em.b.iota([length], "i64", start=start, step=1.0))
    return em.op("gather", x, idx, axis=axis)


def wrap_index(em: Emitter, idx: Tensor, dim: Any) -> Tensor:
    """Index tensor `idx` into a dim of size `dim` (an int or a dim expression), negative
    counting from the end, as i64."""
    if dtype_of(idx) != "i64":
        idx = em.op("cast", idx, dtype="i64")
    neg = em.apply(lambda g, a, b: g.compare("lt", a, b), idx, scalar(0, "i64"))
    return em.op("where", neg, em.op("add", idx, _dim_value(dim)), idx)


def gather_block(em: Emitter, data: Tensor, start: int, indices: list[Tensor]) -> Tensor:
    """`data[..., i_0, ..., i_k-1, ...]`: k index tensors (broadcast together) on the k dims from
    `start` on, numpy's advanced indexing of consecutive dims. The k dims are merged into one and
    gathered at the linear index of each tuple (constant indices fold at import)."""
    s = sym_shape_t(em, data)
    k = len(indices)
    linear: Tensor = scalar(0, "i64")
    for j, idx in enumerate(indices):
        stride = _dim_value(math.prod(s[start + j + 1 : start + k]))
        term = em.op("mul", wrap_index(em, idx, s[start + j]), stride)
        linear = em.op("add", linear, term)
    merged = (*s[:start], math.prod(s[start : start + k]), *s[start + k :])
    return em.op("gather", reshape_to(em, data, merged), linear, axis=start)


def _dim_value(d: Any) -> np.ndarray:
    """A dim as a 0-d i64 value: a constant, or over dim symbols an object array (a
    `fuel.iota` fill once traced ops read it)."""
    return np.array(d, object) if isinstance(d, DimExpr) else scalar(d, "i64")


def elements_gather(em: Emitter, data: Tensor, axis: int, indices: Tensor) -> Tensor:
    """out[i..] = data[i.. with the `axis` coordinate replaced by indices[i..]] (ONNX
    GatherElements, torch.gather): a gather of the flattened data at linear indices, whose other
    coordinates are constants (they fold at import; independent of the `axis` coordinate, so
    the indices may have a `?` dim there)."""
    s, shape = shape_of_t(data), shape_of_t(indices)
    norm = normalize_axis(int(axis), len(s))
    if norm is None:
        raise Unsupported(f"axis {axis} is out of range for rank {len(s)}")
    dyn = [k for k, i in enumerate(shape) if i < 0]
    if len(shape) != len(s) or any(i > d for i, d in zip(shape, s, strict=True)):
        raise Unsupported(f"indices of shape {list(shape)} do not fit data {list(s)}")
    if min(s, default=0) < 0 or dyn not in ([], [norm]):
        raise Unsupported(f"a gather of {list(s)} at indices {list(shape)} over dim symbols")
    strides = [math.prod(s[d + 1 :]) for d in range(len(s))]
    grid = np.indices([1 if k == norm else i for k, i in enumerate(shape)], dtype=np.int64)
    base = sum(
        (grid[d] * strides[d] for d in range(len(s)) if d != norm),
        np.zeros(grid.shape[1:], np.int64),
    )
    idx = wrap_index(em, indices, s[norm])
    linear = em.op("add", em.op("mul", idx, scalar(strides[norm], "i64")), base)
    flat = data if len(s) == 1 else em.op("reshape", data, shape=(math.prod(s),))
    return em.op("gather", flat, linear, axis=0)


def cumulative_sum(em: Emitter, x: Tensor, axis: int, exclusive: bool, reverse: bool) -> Tensor:
    """Running sums of `x` along `axis` (ONNX CumSum, `torch.cumsum`): a matmul with a 0/1
    triangular matrix along `axis` (moved last), exact for integers, and for floats a sum of
    the same terms (products with 1 are exact) in BLAS order. Folds when `x` is constant."""
    s, sym = shape_of_t(x), sym_shape_t(em, x)
    tri: Tensor
    if s[axis] >= 0:
        i = np.arange(s[axis])
        before = i[:, None] > i[None, :] if reverse else i[:, None] < i[None, :]
        tri = (before | ((i[:, None] == i[None, :]) & (not exclusive))).astype(
            to_numpy(dtype_of(x))
        )
    else:  # a `?` axis: the triangle from two `fuel.iota` counts (folded when a run binds)
        n = sym[axis]
        rows = em.at(em.b.iota([n, 1], "i64", axis=0))
        cols = em.at(em.b.iota([1, n], "i64", axis=1))
        kind = ("gt" if exclusive else "ge") if reverse else ("lt" if exclusive else "le")
        keep = em.apply(lambda g, a, b: g.compare(kind, a, b), rows, cols)
        tri = em.op("cast", keep, dtype=dtype_of(x))
    perm = [d for d in range(len(s)) if d != axis] + [axis]
    xt = x if perm == list(range(len(s))) else em.op("transpose", x, perm=perm)
    flat = reshape_to(em, xt, (1, sym[axis])) if len(s) == 1 else xt
    y = em.op("matmul", flat, tri)
    y = reshape_to(em, y, sym) if len(s) == 1 else y
    return (
        y if perm == list(range(len(s))) else em.op("transpose", y, perm=np.argsort(perm).tolist())
    )
