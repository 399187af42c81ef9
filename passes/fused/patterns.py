"""Patterns of the built-in fused ops over primitive fuel IR, and the builders of the fused op.

A pattern looks at one candidate root op and returns a `FusedMatch` (the matched ops, the
values read from outside, the fused op's properties) or None; a builder turns a match into the
ops of the fused arm (the last one computes the root's value). Patterns only read the IR.
Here: softmax, rms_norm, layer_norm, matmul + bias + activation, the SiLU-gated MLP; rope and
attention live in `passes.fused.attention`. Shapes are compared with `passes.fused.symbolic`
(`same_type`, `dims_of`), never by type alone: two `?` dims are one type, not one dim.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
    f64,
    i64,
)
from xdsl.ir import Operation, OpResult, SSAValue

from fuel_dialect.dtypes import FLOAT_NAMES, dtype_name, shape_of
from fuel_dialect.ops_elementwise import (
    AddOp,
    DivOp,
    ErfOp,
    ExpOp,
    GeluOp,
    MulOp,
    PowOp,
    ReluOp,
    RsqrtOp,
    SigmoidOp,
    SiluOp,
    SubOp,
    TanhOp,
)
from fuel_dialect.ops_fused import GatedMlpOp, MatmulBiasActOp
from fuel_dialect.ops_movement import ConstantOp, WeightOp
from fuel_dialect.ops_nn import (
    MatmulOp,
    ReduceMaxOp,
    ReduceMeanOp,
    ReduceOp,
    ReduceSumOp,
    SoftmaxOp,
)
from passes.fused.symbolic import dims_of, same_type


@dataclass(frozen=True)
class FusedMatch:
    """A pattern hit: `ops` compute `root`'s result from `inputs` (values defined outside the
    match); `params` are the fused op's properties read off the match (axis, eps, act, ...)."""

    root: Operation
    ops: tuple[Operation, ...]
    inputs: tuple[SSAValue, ...]
    params: dict[str, Any] = field(default_factory=dict)


Pattern = Callable[[Operation], FusedMatch | None]
Build = Callable[[FusedMatch], Sequence[Operation]]

# -- matching helpers ------------------------------------------------------------------------


def producer(v: SSAValue, cls: type[Operation]) -> Any:
    """The op of class `cls` defining `v`, or None."""
    return v.owner if isinstance(v, OpResult) and isinstance(v.owner, cls) else None


def either(op: Any, test: Callable[[SSAValue, SSAValue], Any]) -> Any:
    """`test(lhs, rhs)` or, if that fails, `test(rhs, lhs)` (commutative binary ops)."""
    if op is None:
        return None
    return test(op.lhs, op.rhs) or test(op.rhs, op.lhs)


def row_reduce(v: SSAValue, cls: type[ReduceOp]) -> Any:
    """A keepdim reduction of class `cls` over exactly one axis defining `v`, or None."""
    op = producer(v, cls)
    return op if op is not None and op.keepdim is not None and len(op.norm_axes()) == 1 else None


def constant_array(v: SSAValue) -> np.ndarray | None:
    """The value of an inline `fuel.constant` as a float64 array of its shape, or None."""
    op = producer(v, ConstantOp)
    if op is None:
        return None
    vals = np.asarray(op.value.get_values(), dtype=np.float64)
    return vals.reshape(shape_of(op.result.type))


_WEIGHTS: ContextVar[Mapping[str, np.ndarray] | None] = ContextVar("fused_weights", default=None)
"""The weight values patterns may read (`known_weights`); None: weights are opaque."""


@contextmanager
def known_weights(weights: Mapping[str, np.ndarray] | None) -> Iterator[None]:
    """Let patterns read these weight values (a `FuelModule.weights`) while the block runs. A
    match that reads one (rope's gathered tables) holds only for these values: the module's
    fused arms are then as bound to its weights as to its IR."""
    token = _WEIGHTS.set(weights)
    try:
        yield
    finally:
        _WEIGHTS.reset(token)


def known_array(v: SSAValue) -> np.ndarray | None:
    """`constant_array`, or the float64 value of a `fuel.weight` given to `known_weights`."""
    op, weights = producer(v, WeightOp), _WEIGHTS.get()
    if op is None or weights is None or (arr := weights.get(op.sym_name.data)) is None:
        return constant_array(v)
    arr = np.asarray(arr, dtype=np.float64)
    return arr if arr.shape == shape_of(op.result.type) else None


def scalar_constant(v: SSAValue) -> float | None:
    """The value of a one-element float `fuel.constant`, or None."""
    arr = constant_array(v)
    if arr is None or arr.size != 1:
        return None
    return float(str(np.float32(arr.ravel()[0])))  # the shortest decimal of the f32 kernels use


def last_axis(red: ReduceOp) -> bool:
    return red.norm_axes() == (len(shape_of(red.input.type)) - 1,)


def weight_of(w: SSAValue, x: SSAValue) -> bool:
    """`w` is a per-channel vector over `x`'s last dim (what the fused norms take)."""
    s = dims_of(x)
    return bool(s) and dims_of(w) == (s[-1],)


def is_float(v: SSAValue) -> bool:
    return dtype_name(v.type) in FLOAT_NAMES


def linear(v: SSAValue) -> Any:
    """A float `fuel.matmul` of a (..., m, k) input by a (k, n) matrix defining `v`, or None."""
    mm = producer(v, MatmulOp)
    if mm is None or len(shape_of(mm.rhs.type)) != 2 or not is_float(mm.result):
        return None
    return mm if len(shape_of(mm.lhs.type)) >= 2 else None


def silu_of(v: SSAValue) -> tuple[SSAValue, tuple[Operation, ...]] | None:
    """`silu(a)` or `a * sigmoid(a)` defining `v` -> (a, ops), else None."""
    if (s := producer(v, SiluOp)) is not None:
        return s.input, (s,)
    mul = producer(v, MulOp)

    def gated(a: SSAValue, sig_v: SSAValue) -> tuple[SSAValue, tuple[Operation, ...]] | None:
        sig = producer(sig_v, SigmoidOp)
        return (a, (sig, mul)) if sig is not None and sig.input == a else None

    return either(mul, gated)


def scalar_is(v: SSAValue, want: float) -> bool:
    """`v` is a one-element float constant equal to `want` rounded to f32 (how graphs store it)."""
    c = scalar_constant(v)
    return c is not None and np.float32(c) == np.float32(want)


@dataclass
class Product:
    """A value as `coef * factors[0] * factors[1] * ...` (`product_of`); `ops` are the opened
    `fuel.mul`s and divisions by a scalar constant."""

    coef: float = 1.0
    factors: list[SSAValue] = field(default_factory=list)
    ops: list[Operation] = field(default_factory=list)


def product_of(v: SSAValue, limit: int = 4) -> Product:
    """`v` as a product: `v`'s own `fuel.mul` (or `div` by a scalar constant), and the ones
    below it whose value is read once, are opened; scalar constants fold into `coef`. At most
    `limit` factors are kept (a long chain of products stops opening)."""
    prod = Product()

    def visit(u: SSAValue, top: bool) -> None:
        op = u.owner if isinstance(u, OpResult) else None
        if not top and (c := scalar_constant(u)) is not None:
            prod.coef *= c
            return
        opened = (top or u.has_one_use()) and len(prod.factors) < limit
        if opened and isinstance(op, MulOp):
            prod.ops.append(op)
            visit(op.lhs, False)
            visit(op.rhs, False)
            return
        if opened and isinstance(op, DivOp) and (c := scalar_constant(op.rhs)):
            prod.ops.append(op)
            prod.coef /= c
            visit(op.lhs, False)
            return
        prod.factors.append(u)

    visit(v, True)
    return prod


CONSTANT_EPS = {"f16": 2.0**-10, "bf16": 2.0**-7}
"""Relative spacing of constants stored in a narrow type; others are taken as f32 (2^-23)."""


def close_to(value: float, want: float, like: SSAValue) -> bool:
    """`value` is `want` up to the rounding of the few constants (of `like`'s element type) it
    was multiplied from: within 4 units of that type's relative spacing."""
    eps = CONSTANT_EPS.get(dtype_name(like.type), 2.0**-23)
    return math.isclose(value, want, rel_tol=4 * eps)


def power_of(factors: Sequence[SSAValue], y: SSAValue) -> tuple[int, tuple[Operation, ...]]:
    """The power of `y` that `factors` multiply to (each `y`, or a `pow(y, k)` read once with k
    a small integer) and the pow ops; (0, ()) when some factor is something else."""
    k, ops = 0, []
    for f in factors:
        p = producer(f, PowOp)
        e = scalar_constant(p.rhs) if p is not None and f.has_one_use() else None
        if f == y:
            k += 1
        elif p is not None and p.lhs == y and e is not None and e in (2.0, 3.0):
            k += int(e)
            ops.append(p)
        else:
            return 0, ()
    return k, tuple(ops)


def _read_once(v: SSAValue, cls: type[Operation]) -> Any:
    """The op of class `cls` defining `v` when `v` has exactly one reader, else None."""
    op = producer(v, cls)
    return op if op is not None and v.has_one_use() else None


def _erf_argument(v: SSAValue, y: SSAValue) -> tuple[Operation, ...] | None:
    """`y / sqrt(2)` or `y * sqrt(1/2)`, read once -> its ops."""
    p = product_of(v) if isinstance(v, OpResult) and v.has_one_use() else Product()
    ok = p.ops and p.factors == [y] and close_to(p.coef, math.sqrt(0.5), y)
    return tuple(p.ops) if ok else None


GELU_TANH_K0, GELU_TANH_K1 = math.sqrt(2.0 / math.pi), 0.044715
"""gelu_tanh(y) = 0.5 y (1 + tanh(K0 (y + K1 y^3)))."""


def _tanh_argument(v: SSAValue, y: SSAValue) -> tuple[Operation, ...] | None:
    """`K0 * (y + K1 y^3)` or `K0 * y * (1 + K1 y^2)`, each product in any order and
    association, y^3 also as `pow(y, 3)`, read once -> its ops."""
    p = product_of(v) if isinstance(v, OpResult) and v.has_one_use() else Product()
    if not p.ops or not close_to(p.coef, GELU_TANH_K0, y):
        return None
    rest = [f for f in p.factors if f != y]
    k = len(p.factors) - len(rest)  # the factored form `y * (1 + K1 y^2)` has one bare y
    if len(rest) != 1 or k > 1 or (add := _read_once(rest[0], AddOp)) is None:
        return None
    for lone, t in ((add.lhs, add.rhs), (add.rhs, add.lhs)):
        if not (lone == y if k == 0 else scalar_is(lone, 1.0)):
            continue
        q = product_of(t) if t.has_one_use() else Product()
        power, pows = power_of(q.factors, y)
        if q.ops and close_to(q.coef, GELU_TANH_K1, y) and power == 3 - k:
            return (*pows, *q.ops, add, *p.ops)
    return None


def _gelu_gate(v: SSAValue, y: SSAValue) -> tuple[str, tuple[Operation, ...]] | None:
    """`1 + erf(y / sqrt 2)` -> ("none", ops); `1 + tanh(K0 (y + K1 y^3))` -> ("tanh", ops)."""
    if (add := _read_once(v, AddOp)) is None:
        return None
    for t_v, one in ((add.lhs, add.rhs), (add.rhs, add.lhs)):
        if not scalar_is(one, 1.0):
            continue
        if (erf := _read_once(t_v, ErfOp)) is not None:
            found = _erf_argument(erf.input, y)
            return ("none", (*found, erf, add)) if found is not None else None
        if (tanh := _read_once(t_v, TanhOp)) is not None:
            found = _tanh_argument(tanh.input, y)
            return ("tanh", (*found, tanh, add)) if found is not None else None
    return None


def gelu_of(v: SSAValue) -> tuple[SSAValue, str, tuple[Operation, ...]] | None:
    """GELU written out, defining `v` -> (y, approximate: "none" | "tanh", ops), else None:
    `0.5 * y * (1 + erf(y / sqrt 2))` or `0.5 * y * (1 + tanh(sqrt(2/pi) (y + 0.044715 y^3)))`,
    its products in any order and association, the halving also as a division by 2. ONNX has
    no Gelu op before opset 20: exporters write these (torch.onnx legacy: `y * (1 + erf(y /
    sqrt 2)) * 0.5`; GPT-2's `NewGELU`: `0.5 y (1 + tanh(K0 (y + K1 pow(y, 3))))`). Interior
    values must be read only inside the match; `v`'s type must be y's."""
    p = product_of(v, limit=2)
    if len(p.factors) != 2 or not close_to(p.coef, 0.5, v) or not p.ops:
        return None
    for y, gate in (p.factors, p.factors[::-1]):
        found = _gelu_gate(gate, y) if same_type(v, y) else None
        if found is not None:
            return y, found[0], (*found[1], *p.ops)
    return None


# -- softmax and the norms -------------------------------------------------------------------


def match_softmax(root: Operation) -> FusedMatch | None:
    """div(e, reduce_sum(e)) with e = exp(sub(x, reduce_max(x))), all over one keepdim axis."""
    if not isinstance(root, DivOp) or (s := row_reduce(root.rhs, ReduceSumOp)) is None:
        return None
    e = producer(root.lhs, ExpOp)
    if e is None or s.input != root.lhs or (d := producer(e.input, SubOp)) is None:
        return None
    m = row_reduce(d.rhs, ReduceMaxOp)
    if m is None or m.input != d.lhs or m.norm_axes() != s.norm_axes():
        return None
    if not same_type(root.result, d.lhs):
        return None
    return FusedMatch(root, (m, d, e, s, root), (d.lhs,), {"axis": m.norm_axes()[0]})


def _square(v: SSAValue) -> tuple[Operation, SSAValue] | None:
    """`x * x` or `pow(x, 2)` (torch.export's `x.pow(2)`) defining `v` -> (op, x)."""
    if (sq := producer(v, MulOp)) is not None and sq.lhs == sq.rhs:
        return sq, sq.lhs
    if (p := producer(v, PowOp)) is not None and scalar_constant(p.rhs) == 2.0:
        return p, p.lhs
    return None


def _rms_scale(v: SSAValue) -> tuple[Any, ...] | None:
    """rsqrt(mean(x*x, -1, keepdim) + eps) -> (ops, x, eps); x*x may be pow(x, 2)."""
    r = producer(v, RsqrtOp)
    a = producer(r.input, AddOp) if r is not None else None

    def split(mean_v: SSAValue, eps_v: SSAValue) -> tuple[Any, ...] | None:
        mean, eps = row_reduce(mean_v, ReduceMeanOp), scalar_constant(eps_v)
        found = _square(mean.input) if mean is not None else None
        if found is None or not last_axis(mean) or eps is None or eps <= 0:
            return None
        sq, x = found
        return (sq, mean, a, r), x, eps

    return either(a, split)


def _normalized(v: SSAValue) -> tuple[str, SSAValue, float, tuple[Operation, ...]] | None:
    """`c * rsqrt(mean(c*c, -1) + eps)` (either order) defining `v` -> ("layer_norm", x, eps,
    ops) when c = x - mean(x, -1), else ("rms_norm", c, eps, ops)."""
    n = producer(v, MulOp)

    def inner(c: SSAValue, scale_v: SSAValue) -> tuple[str, SSAValue, float, Any] | None:
        found = _rms_scale(scale_v)
        if found is None or found[1] != c:
            return None
        sub = producer(c, SubOp)
        mu = row_reduce(sub.rhs, ReduceMeanOp) if sub is not None else None
        if mu is not None and mu.input == sub.lhs and last_axis(mu):
            return "layer_norm", sub.lhs, found[2], (mu, sub, *found[0], n)
        return "rms_norm", c, found[2], (*found[0], n)

    return either(n, inner)


def _norm_match(
    kind: str, root: Operation, v: SSAValue, affine: tuple[SSAValue, ...], ops: tuple = ()
) -> FusedMatch | None:
    """The `kind` norm of `v` (`_normalized`) times weight / plus bias `affine` (per-channel
    vectors over x; fewer than the op takes: `build_norm` fills ones / zeros), root `root`."""
    found = _normalized(v)
    if found is None or found[0] != kind or not same_type(root.results[0], found[1]):
        return None
    _, x, eps, norm_ops = found
    if not all(weight_of(a, x) for a in affine):
        return None
    return FusedMatch(root, (*norm_ops, *ops, root), (x, *affine), {"eps": eps})


def _weightless_norm(kind: str, root: MulOp) -> FusedMatch | None:
    """`root` as a whole `kind` norm with neither weight nor bias (the arm fills ones/zeros)."""
    found = _normalized(root.result)
    if found is None or found[0] != kind or not same_type(root.result, found[1]):
        return None
    return FusedMatch(root, found[3], (found[1],), {"eps": found[2]})


def match_rms_norm(root: Operation) -> FusedMatch | None:
    """mul(mul(x, rsqrt(reduce_mean(x*x, -1, keepdim) + eps)), w), any operand orders; or
    without the weight (root: the inner mul; weight ones)."""
    if not isinstance(root, MulOp):
        return None
    found = either(root, lambda n, w: _norm_match("rms_norm", root, n, (w,)))
    if found is not None:
        return found
    return _weightless_norm("rms_norm", root)


def match_layer_norm(root: Operation) -> FusedMatch | None:
    """add(mul(mul(c, rsqrt(mean(c*c) + eps)), w), b) with c = x - mean(x), over the last dim;
    also without the bias (root: the weight's mul) or without both (root: the norm's mul)."""
    if isinstance(root, AddOp):

        def outer(scaled: SSAValue, b: SSAValue) -> FusedMatch | None:
            mw = producer(scaled, MulOp)
            return either(mw, lambda n, w: _norm_match("layer_norm", root, n, (w, b), (mw,)))

        return either(root, outer)
    if not isinstance(root, MulOp):
        return None
    found = either(root, lambda n, w: _norm_match("layer_norm", root, n, (w,)))
    if found is not None:
        return found
    return _weightless_norm("layer_norm", root)


# -- linear layers ---------------------------------------------------------------------------


def _activation(root: Operation) -> tuple[str, SSAValue, tuple[Operation, ...]] | None:
    """The activation `root` applies -> (act name, its input, its ops); a bare add is `none`."""
    if isinstance(root, ReluOp):
        return "relu", root.input, (root,)
    if isinstance(root, GeluOp):
        return ("gelu_tanh" if root.tanh is not None else "gelu"), root.input, (root,)
    if isinstance(root, AddOp):
        return "none", root.result, ()
    if not root.results:
        return None
    if (gelu := gelu_of(root.results[0])) is not None:
        return ("gelu_tanh" if gelu[1] == "tanh" else "gelu"), gelu[0], gelu[2]
    found = silu_of(root.results[0])
    return ("silu", found[0], found[1]) if found is not None else None


def match_matmul_bias_act(root: Operation) -> FusedMatch | None:
    """act(add(matmul(x, w), b)) with w a (k, n) matrix, b an (n) vector, and act one of relu,
    gelu (either form, also as its primitives, `gelu_of`), silu (also as
    y * sigmoid(y)) or none (the add is the root); also act(matmul(x, w)) without a bias
    (act not none; the arm adds zeros: exporters drop an all-zero bias)."""
    found = _activation(root)
    if found is None or not same_type(root.results[0], found[1]):
        return None
    act, y, act_ops = found
    add = producer(y, AddOp)
    if add is None and act != "none" and (mm := linear(y)) is not None:
        return FusedMatch(root, (mm, *act_ops), (mm.lhs, mm.rhs), {"act": act})

    def split(mm_v: SSAValue, b: SSAValue) -> FusedMatch | None:
        mm = linear(mm_v)
        if mm is None or not same_type(add.result, mm.result) or not weight_of(b, mm.result):
            return None
        ops = (mm, add, *act_ops)
        return FusedMatch(root, ops, (mm.lhs, mm.rhs, b), {"act": act})

    return either(add, split)


def match_gated_mlp(root: Operation) -> FusedMatch | None:
    """matmul(silu(matmul(x, wg)) * matmul(x, wu), wd), silu also as g * sigmoid(g)."""
    down = linear(root.results[0]) if isinstance(root, MatmulOp) else None
    mul = producer(down.lhs, MulOp) if down is not None else None

    def split(h_v: SSAValue, u_v: SSAValue) -> FusedMatch | None:
        found, up = silu_of(h_v), linear(u_v)
        gate = linear(found[0]) if found is not None else None
        if gate is None or up is None or gate.lhs != up.lhs or not same_type(gate.rhs, up.rhs):
            return None
        ops = (gate, *found[1], up, mul, root)  # type: ignore[index]
        return FusedMatch(root, ops, (gate.lhs, gate.rhs, up.rhs, down.rhs))

    return either(mul, split)


# -- builders --------------------------------------------------------------------------------


def make(cls: type[Operation], m: FusedMatch, **props: Any) -> Operation:
    """The fused op `cls` over the match's inputs, typed like the root's result."""
    return cls.create(
        operands=list(m.inputs), result_types=[m.root.results[0].type], properties=props
    )


def build_softmax(m: FusedMatch) -> Sequence[Operation]:
    return [make(SoftmaxOp, m, axis=IntegerAttr(m.params["axis"], i64))]


def _filled(like: SSAValue, value: float) -> ConstantOp:
    """A constant vector of `value` over `like`'s last dim, in its element type."""
    d = shape_of(like.type)[-1]
    t = TensorType(like.type.element_type, [d])  # pyright: ignore[reportAttributeAccessIssue]
    return ConstantOp(DenseIntOrFPElementsAttr.from_list(t, [value] * d))


def build_norm(cls: type[Operation]) -> Build:
    """The builder of `fuel.rms_norm` / `fuel.layer_norm` (`cls`) with the matched eps; a
    weight or bias the match lacks is a constant of ones / zeros (exact: x * 1 + 0 = x)."""
    takes = {"fuel.rms_norm": 2, "fuel.layer_norm": 3}[cls.name]

    def build(m: FusedMatch) -> Sequence[Operation]:
        fills = [_filled(m.inputs[0], v) for v in (1.0, 0.0)[len(m.inputs) - 1 : takes - 1]]
        inputs = (*m.inputs, *(c.result for c in fills))
        op = cls.create(
            operands=list(inputs),
            result_types=[m.root.results[0].type],
            properties={"eps": FloatAttr(m.params["eps"], f64)},
        )
        return [*fills, op]

    return build


def build_matmul_bias_act(m: FusedMatch) -> Sequence[Operation]:
    """The fused op; a bias the match lacks is a constant of zeros (exact: y + 0 = y)."""
    fills = [] if len(m.inputs) == 3 else [_filled(m.root.results[0], 0.0)]
    op = MatmulBiasActOp.create(
        operands=[*m.inputs, *(c.result for c in fills)],
        result_types=[m.root.results[0].type],
        properties={"act": StringAttr(m.params["act"])},
    )
    return [*fills, op]


def build_gated_mlp(m: FusedMatch) -> Sequence[Operation]:
    return [make(GatedMlpOp, m)]
