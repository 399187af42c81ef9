"""The torch.export importer: every mapped aten op against eager PyTorch, and its errors.

Tolerances: f32 results within atol 1e-5 / rtol 1e-5 of torch (exact ops are compared exactly by
the same bound; transcendental and reduction ops differ from torch's by a few ulps); integer and
bool results exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from xdsl.printer import Printer

from frontends.torch_export import TorchImportError, import_exported_program, supported_aten_ops
from runtime.executor import Executor

ATOL = RTOL = 1e-5
SEEN: set[str] = set()
"""aten overloads exported by the cases so far (the coverage test reads it)."""


class Fn(nn.Module):
    def __init__(self, fn: Callable[..., object]):
        super().__init__()
        self.fn = fn

    def forward(self, *xs: torch.Tensor) -> object:
        return self.fn(*xs)


def export(
    fn: Callable[..., object] | nn.Module, *xs: torch.Tensor, **kw: object
) -> torch.export.ExportedProgram:
    mod = fn if isinstance(fn, nn.Module) else Fn(fn)
    return torch.export.export(mod.eval(), xs, strict=False, **kw)  # type: ignore[arg-type]


def check(
    fn: Callable[..., object] | nn.Module,
    *xs: torch.Tensor,
    decompose: bool = False,
    atol: float = ATOL,
) -> None:
    """Import `fn` traced at `xs`, run it with fuel and compare every output with torch."""
    ep = export(fn, *xs)
    if decompose:
        ep = ep.run_decompositions()
    SEEN.update(str(n.target) for n in ep.graph.nodes if n.op == "call_function")
    if any(str(n.target).endswith("_.default") for n in ep.graph.nodes):  # and, functionalized,
        functional = ep.run_decompositions({})  # what the importer imports (index_put_)
        SEEN.update(str(n.target) for n in functional.graph.nodes if n.op == "call_function")
    module = import_exported_program(ep)
    ins = {n: x.numpy() for n, x in zip(Executor(module).input_names, xs, strict=True)}
    got = list(Executor(module).run(ins).values())
    with torch.no_grad():
        want = fn(*xs) if not isinstance(fn, nn.Module) else fn(*xs)
    want = list(want) if isinstance(want, tuple | list) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        w = w.numpy()
        assert g.shape == w.shape and g.dtype == w.dtype, (g.dtype, g.shape, w.dtype, w.shape)
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, atol=atol, rtol=RTOL)
        else:
            np.testing.assert_array_equal(g, w)


G = torch.Generator().manual_seed(0)


def rand(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=G)


X, Y, ROW = rand(3, 4), rand(3, 4), rand(4)
POS = X.abs() + 0.5

UNARY = {
    "neg": torch.neg,
    "rsqrt": lambda x: torch.rsqrt(x.abs() + 0.5),
    "sqrt": lambda x: torch.sqrt(x.abs()),
    "exp": torch.exp,
    "log": lambda x: torch.log(x.abs() + 0.1),
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "erf": torch.erf,
    "cos": torch.cos,
    "sin": torch.sin,
    "abs": torch.abs,
    "reciprocal": lambda x: 1 / POS * x,
    "reciprocal_op": lambda x: torch.reciprocal(x.abs() + 0.5),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name: str) -> None:
    check(UNARY[name], X)


BINARY = {
    "add": torch.add,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=2.0),
    "sub": torch.sub,
    "sub_alpha": lambda a, b: torch.sub(a, b, alpha=0.5),
    "mul": torch.mul,
    "div": torch.div,
    "add_scalar": lambda a, b: a + 1.5,
    "mul_scalar": lambda a, b: a * 3,
    "rsub": lambda a, b: 1.0 - a,
    "pow_scalar": lambda a, b: a.pow(2),
    "pow_tensor": lambda a, b: (a.abs() + 0.5) ** b,
    "pow_scalar_base": lambda a, b: torch.pow(2.0, a),
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "clamp": lambda a, b: a.clamp(-0.5, 0.5),
    "clamp_min": lambda a, b: a.clamp(min=0.1),
    "broadcast_row": lambda a, b: a * ROW + b[0],
    "where": lambda a, b: torch.where(a > b, a, b),
    "where_scalar": lambda a, b: torch.where(a > 0, a, 0.0),
    "masked_fill": lambda a, b: a.masked_fill(b > 0, -1.0),
    "int_plus_float": lambda a, b: (a > 0).long() + 1.5,
    "float_plus_int": lambda a, b: a + torch.arange(4),
    "cast_f16": lambda a, b: (a.half() * 2).float(),
    "cast_i64": lambda a, b: (a * 10).to(torch.int64),
    "cast_f64": lambda a, b: a.double() * b.double(),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name: str) -> None:
    check(BINARY[name], X, Y)


COMPARE = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != 0.5,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= 0.0,
    "ge_scalar": lambda a, b: a >= 0.1,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "not": lambda a, b: ~(a > b),
    "and": lambda a, b: (a > 0) & (b > 0),
    "or": lambda a, b: (a > 0) | (b > 0),
    "logical_ops": lambda a, b: torch.logical_or(torch.logical_not(a > 0), b < 0),
}


@pytest.mark.parametrize("name", sorted(COMPARE))
def test_compare(name: str) -> None:
    check(COMPARE[name], X, torch.where(Y > 0, X, Y))


REDUCE = {
    "mean": lambda x: x.mean(-1, keepdim=True),
    "mean_all": lambda x: x.mean(),
    "sum": lambda x: x.sum(0),
    "sum_all": lambda x: x.sum(),
    "amax": lambda x: x.amax(1),
    "amin": lambda x: x.amin((0, 1), keepdim=True),
    "softmax": lambda x: x.softmax(-1),
    "softmax_dim0": lambda x: F.softmax(x, dim=0),
    "log_softmax": lambda x: x.log_softmax(-1),
}


@pytest.mark.parametrize("name", sorted(REDUCE))
def test_reduce(name: str) -> None:
    check(REDUCE[name], X)


A3, W, B = rand(2, 3, 4), rand(5, 4), rand(5)
LINALG = {
    "linear": lambda x: F.linear(x, W, B),
    "linear_nobias": lambda x: F.linear(x, W),
    "mm": lambda x: x[0] @ W.T,
    "bmm": lambda x: torch.bmm(x, x.transpose(1, 2)),
    "matmul_3d_2d": lambda x: torch.matmul(x, W.T),
    "matmul_vec": lambda x: x @ ROW,
    "vec_matmul": lambda x: ROW @ x[0].T,
    "addmm": lambda x: torch.addmm(B, x[0], W.T),
    "addmm_scaled": lambda x: torch.addmm(B, x[0], W.T, beta=0.5, alpha=2.0),
}


@pytest.mark.parametrize("name", sorted(LINALG))
def test_linalg(name: str) -> None:
    check(LINALG[name], A3)


IDX = torch.tensor([2, 0, 1, 2])
MOVE = {
    "view": lambda x: x.view(6, 4),
    "reshape": lambda x: x.reshape(-1),
    "permute": lambda x: x.permute(2, 0, 1),
    "transpose": lambda x: x.transpose(0, 2),
    "t": lambda x: x[0].t(),
    "expand": lambda x: x[:, :1].expand(2, 3, 4),
    "expand_rank": lambda x: ROW.expand(2, 3, 4) + x,
    "unsqueeze": lambda x: x.unsqueeze(1),
    "squeeze": lambda x: x[:, :1].squeeze(1),
    "squeeze_all": lambda x: x[:1, :1].squeeze(),
    "cat": lambda x: torch.cat([x, x * 2], dim=-1),
    "stack": lambda x: torch.stack([x, -x], dim=1),
    "slice": lambda x: x[:, 1:, ::2],
    "slice_neg": lambda x: x[..., -3:-1],
    "select": lambda x: x[1, :, 2],
    "index_select": lambda x: torch.index_select(x, 1, IDX[:3]),
    "index": lambda x: x[:, IDX[:2]],
    "split": lambda x: torch.split(x, [1, 3], dim=2),
    "chunk": lambda x: x.chunk(2, dim=-1),
    "unbind": lambda x: x.unbind(0),
    "flatten": lambda x: x.flatten(1),
    "repeat": lambda x: x.repeat(1, 2, 1),
    "clone": lambda x: x.transpose(1, 2).contiguous().clone(),
    "repeat_interleave_kv": lambda x: x[:, None].expand(2, 2, 3, 4).reshape(4, 3, 4),
}


@pytest.mark.parametrize("name", sorted(MOVE))
def test_movement(name: str) -> None:
    check(MOVE[name], A3)


ATEN = torch.ops.aten
B1, B2 = X > 0, Y > 0
DIRECT = {
    "_safe_softmax": lambda x, y: ATEN._safe_softmax(x, -1),
    "_to_copy": lambda x, y: ATEN._to_copy(x, dtype=torch.float64),
    "_unsafe_view": lambda x, y: ATEN._unsafe_view(x, [12]),
    "alias": lambda x, y: ATEN.alias(x) + 1,
    "mm": lambda x, y: ATEN.mm(x, y.T),
    "dropout": lambda x, y: ATEN.dropout(x, 0.5, False),
    "all": lambda x, y: (ATEN.all(B1), ATEN.all.dim(B1, 1), ATEN.all.dims(B1, [0, 1], True)),
    "any": lambda x, y: (ATEN.any(B1), ATEN.any.dim(B1, 0), ATEN.any.dims(x, [1])),
    "arange_start": lambda x, y: x * ATEN.arange.start(2, 6),
    "bitwise": lambda x, y: (
        ATEN.bitwise_and(B1, B2),
        ATEN.bitwise_or(B1, B2),
        ATEN.bitwise_not(B1),
    ),
    "clamp_min_max": lambda x, y: ATEN.clamp_max(ATEN.clamp_min(x, -0.3), 0.4),
    "div_scalar": lambda x, y: ATEN.div.Scalar(x, 4.0),
    "sub_scalar": lambda x, y: ATEN.sub.Scalar(x, 1.5),
    "div_mode_none": lambda x, y: ATEN.div.Tensor_mode(x, y, rounding_mode=None),
    "div_scalar_mode_none": lambda x, y: ATEN.div.Scalar_mode(x, 2.0, rounding_mode=None),
    "le_ne_tensor": lambda x, y: (x <= y, x != y),
    "masked_fill_tensor": lambda x, y: ATEN.masked_fill.Tensor(x, B2, torch.tensor(3.0)),
    "rsub_tensor": lambda x, y: ATEN.rsub.Tensor(x, y, alpha=2),
    "rsub_scalar_alpha": lambda x, y: ATEN.rsub.Scalar(x, 1.0, alpha=3),
    "new_consts": lambda x, y: (x.new_zeros((2, 3)), x.new_ones((3,)), x.new_full((2,), 4.0)),
    "split_even": lambda x, y: torch.split(x, 2, dim=1),
    "unflatten": lambda x, y: ATEN.unflatten(x, 1, [2, 2]),
    "squeeze_dims": lambda x, y: ATEN.squeeze.dims(x[None, :, None], [0, 2]),
    "flatten": lambda x, y: ATEN.flatten.using_ints(x[None], 0, 1),
    "where_scalars": lambda x, y: (
        ATEN.where.ScalarSelf(B1, 2.0, y),
        ATEN.where.ScalarOther(B1, x, -1.0),
        ATEN.where.Scalar(B1, 1.0, 0.0),
    ),
    "lift_fresh": lambda x, y: x * torch.tensor([1.0, 2.0, 3.0, 4.0]),
    "matmul_op": lambda x, y: ATEN.matmul(x, y.T),
    "log_softmax_op": lambda x, y: ATEN._log_softmax(x, 0, False),
    "softmax_op": lambda x, y: ATEN._softmax(x, 1, False),
    "native_layer_norm": lambda x, y: ATEN.native_layer_norm(x, [4], None, None, 1e-5)[0],
    "addmm_alpha": lambda x, y: ATEN.addmm(ROW[:3], x, y.T, beta=0, alpha=2),
    "cumsum": lambda x, y: (
        torch.cumsum(x, 1),
        torch.cumsum(B1, 0),
        torch.cumsum(x, -2, dtype=torch.float64),
    ),
    "diff": lambda x, y: (
        torch.diff(x, dim=1),
        torch.diff(x, n=2, dim=0, prepend=y[:1]),
        torch.diff(B1, dim=-1, append=B2[:, :1]),
    ),
}
"""Direct calls of aten overloads the models above do not happen to export."""


@pytest.mark.parametrize("name", sorted(DIRECT))
def test_direct_overload(name: str) -> None:
    check(DIRECT[name], X, Y)


def test_decomposed_block() -> None:
    """A small attention + MLP block through `run_decompositions()` (core ATen: _softmax, bmm,
    mm, addmm, expand, _unsafe_view, native_layer_norm, scalar_tensor, any, ...)."""

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm, self.qkv, self.out = nn.LayerNorm(8), nn.Linear(8, 24), nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k, v = self.qkv(self.norm(x)).view(1, 5, 3, 2, 4).permute(2, 0, 3, 1, 4)
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=MASK)
            o = o.transpose(1, 2).reshape(1, 5, 8)
            return F.log_softmax(self.out(F.gelu(o)), -1)

    check(Block(), rand(1, 5, 8), decompose=True)


def test_embedding() -> None:
    emb = nn.Embedding(10, 4)
    check(emb, torch.tensor([[1, 9, 0], [3, 3, 2]]))


CONST = {
    "arange": lambda x: x + torch.arange(4),
    "arange_step": lambda x: x * torch.arange(1, 9, 2, dtype=torch.float32),
    "full": lambda x: x + torch.full((3, 4), 2.5),
    "ones": lambda x: x + torch.ones(4),
    "zeros": lambda x: torch.cat([x, torch.zeros(3, 1)], 1),
    "zeros_like": lambda x: torch.zeros_like(x) + x,
    "ones_like": lambda x: torch.ones_like(x),
    "full_like": lambda x: torch.full_like(x, 7.0) * x,
    "tril": lambda x: torch.tril(x),
    "triu": lambda x: torch.triu(x, 1),
    "causal_mask": lambda x: x.masked_fill(
        torch.ones(3, 4, dtype=torch.bool).triu(1), float("-inf")
    ).softmax(-1),
}


@pytest.mark.parametrize("name", sorted(CONST))
def test_constants(name: str) -> None:
    check(CONST[name], X)


@pytest.mark.parametrize("decompose", [False, True])
def test_norms(decompose: bool) -> None:
    ln = nn.LayerNorm(4)
    with torch.no_grad():
        ln.weight.copy_(rand(4))
        ln.bias.copy_(rand(4))
    check(ln, A3, decompose=decompose)
    check(lambda x: F.layer_norm(x, (4,)), A3, decompose=decompose)
    check(lambda x: F.rms_norm(x, (4,), ROW, eps=1e-6), A3, decompose=decompose)
    check(lambda x: F.rms_norm(x, (4,)), A3, decompose=decompose)


Q, K, V = rand(1, 4, 5, 8), rand(1, 2, 5, 8), rand(1, 2, 5, 8)
MASK = (torch.rand(5, 5, generator=G) > 0.3) | torch.eye(5, dtype=torch.bool)
SDPA = {
    "plain": lambda q, k, v: F.scaled_dot_product_attention(
        q, k.repeat(1, 2, 1, 1), v.repeat(1, 2, 1, 1)
    ),
    "causal_gqa": lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, is_causal=True, enable_gqa=True
    ),
    "scale": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3, enable_gqa=True),
    "causal_short_q": lambda q, k, v: F.scaled_dot_product_attention(
        q[:, :, :2], k, v, is_causal=True, enable_gqa=True
    ),
    "float_mask": lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=torch.tril(torch.ones(5, 5)) * 0.5, enable_gqa=True
    ),
    "bool_mask": lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=MASK, enable_gqa=True
    ),
}


@pytest.mark.parametrize("decompose", [False, True])
@pytest.mark.parametrize("name", sorted(SDPA))
def test_sdpa(name: str, decompose: bool) -> None:
    check(SDPA[name], Q, K, V, decompose=decompose)


def repeat_kv(x: torch.Tensor, group: int) -> torch.Tensor:
    b, h, s, d = x.shape
    return x[:, :, None].expand(b, h, group, s, d).reshape(b, h * group, s, d)


def test_sdpa_repeat_kv_is_undone() -> None:
    """Llama's repeat_kv before SDPA: fuel.attention reads the 2 kv heads directly."""

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, repeat_kv(k, 2), repeat_kv(v, 2), is_causal=True)

    check(attend, Q, K, V)
    text = str(import_exported_program(export(attend, Q, K, V)))
    assert "fuel.broadcast" not in text
    assert "tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32> -> tensor<1x4x5x8xf32>" in text


def live_mask_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos: torch.Tensor
) -> torch.Tensor:
    live = (torch.arange(k.shape[2]) <= pos).view(1, 1, 1, -1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=live, enable_gqa=True)


@pytest.mark.parametrize("pos", [0, 2, 4])
def test_sdpa_live_mask_becomes_kv_len(pos: int) -> None:
    """A live-length mask is `fuel.attention ... kv_len(pos + 1)`, and the comparison is gone."""
    args = (Q[:, :, :1], K, V, torch.tensor([2]))
    module = import_exported_program(export(live_mask_attention, *args))
    text = str(module)
    assert "kv_len" in text and "fuel.le" not in text and "fuel.where" not in text
    got = Executor(module).run([a.numpy() for a in args[:3]] + [np.array([pos])])
    want = live_mask_attention(*args[:3], torch.tensor([pos]))
    np.testing.assert_allclose(next(iter(got.values())), want.numpy(), atol=ATOL, rtol=RTOL)


class WithState(nn.Module):
    """A parameter, a buffer, and a lifted tensor constant."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.register_buffer("shift", torch.arange(3.0))
        self.const = torch.tensor([0.5, -1.0, 2.0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * self.const + self.shift


def test_parameters_buffers_and_constants_become_weights() -> None:
    m = WithState()
    check(m, A3)
    module = import_exported_program(export(m, A3))
    assert {"lin.weight.T", "lin.bias"} <= set(module.weights)
    np.testing.assert_array_equal(module.weights["lin.bias"], m.lin.bias.detach().numpy())


def test_io_names_and_locations() -> None:
    module = import_exported_program(
        export(lambda a, b: (a + b, a * b), X, Y), input_names=["p", "q"], output_names=["s", "m"]
    )
    ex = Executor(module)
    assert ex.input_names == ["p", "q"] and ex.output_names == ["s", "m"]
    out = StringIO()
    Printer(stream=out, print_debuginfo=True).print_op(module.op)
    assert 'loc("add"(' in out.getvalue() and "test_torch_export.py" in out.getvalue()


def test_unsupported_ops_are_listed_with_counts() -> None:
    ep = export(lambda x: torch.cumprod(x, 0) + torch.cumprod(x, 1) + torch.flip(x, [0]), X)
    with pytest.raises(TorchImportError) as e:
        import_exported_program(ep)
    msg = str(e.value)
    assert "2 ops fuel does not support" in msg
    assert "aten.cumprod.default (2 nodes)" in msg and "aten.flip.default (1 node)" in msg


class Double(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def test_a_ranged_dim_stays_a_dim_symbol() -> None:
    """`Dim("batch", min=2, max=64)`: one module runs every batch in the range; an unbounded
    Dim is refused, naming the input and dim."""
    from runtime.shape_specialize import make_executor

    mlp = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2)).eval()
    batch = torch.export.Dim("batch", min=2, max=64)
    module = import_exported_program(export(mlp, rand(4, 3), dynamic_shapes=({0: batch},)))
    assert "fuel.dims = {batch = #fuel.dim<2, 64>}" in module.text()  # the Dim's name
    ex = make_executor(module)
    for b in (2, 9):
        x = rand(b, 3)
        got = next(iter(ex.run({ex.input_names[0]: x.numpy()}).values()))
        np.testing.assert_allclose(got, mlp(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    unbounded = export(Double(), rand(4, 3), dynamic_shapes={"x": {0: torch.export.Dim("n")}})
    with pytest.raises(TorchImportError, match="input 'x' has symbolic dimension 0 .* finite"):
        import_exported_program(unbounded)


class ShapeArithmetic(nn.Module):
    """Sizes computed from a dynamic dim, as transformers builds masks and positions."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("pos", torch.arange(64.0).reshape(1, 64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]  # sym_size
        y = x.view(n * 2, 3)  # operator.mul
        p = self.pos[:, : n + 1]  # operator.add; a slice to an end over the symbol
        causal = torch.arange(n)[:, None] <= torch.arange(n)[None, :]  # arange(n)
        fill = torch.ones(n, 1) + torch.full((n, n), 0.5)  # fills over the symbol
        a, b = x.split([2, 4], dim=1)  # a split of a static dim keeps the ? one
        first = x[:1]  # a constant slice of the ? dim: torch records 1
        runs = torch.cumsum(x, 0) / n  # along the ? dim; a size in float arithmetic
        mixed = (causal.float() * fill).sum() + p.sum() + a.sum() * b.sum() + first.sum()
        return y.reshape(n, 6).expand(2, n, 6) + mixed + runs


def test_shape_arithmetic_on_a_dynamic_dim() -> None:
    """`sym_size` and Python arithmetic on it are expressions of the dim symbols: one import
    runs at two sizes, each matching torch, the symbol named after the user's Dim."""
    from runtime.shape_specialize import make_executor

    model = ShapeArithmetic().eval()
    rows = torch.export.Dim("rows", min=2, max=63)
    ep = export(model, rand(8, 6), dynamic_shapes=({0: rows},))
    SEEN.update(str(n.target) for n in ep.graph.nodes if n.op == "call_function")
    module = import_exported_program(ep)
    assert "fuel.dims = {rows = #fuel.dim<2, 63>}" in module.text()
    ex = make_executor(module)
    for n in (3, 10):
        x = rand(n, 6)
        got = next(iter(ex.run({"x": x.numpy()}).values()))
        np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-5, atol=1e-4)
    named = import_exported_program(ep, dim_names={"x": {0: "n"}})
    assert "fuel.dims = {n = #fuel.dim<2, 63>}" in named.text()  # given names win


class IndexBoth(nn.Module):
    """transformers' padding mask: `mask[batch_idx, kv_idx]` over two dynamic dims."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, s = x.shape
        rows = torch.arange(b)[:, None]
        cols = ((s - 1) - torch.arange(s))[None, :].expand(b, s)  # reversed
        return x * mask[rows, cols].float()


def test_index_over_two_dynamic_dims() -> None:
    from runtime.shape_specialize import make_executor

    b, s = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("seq", min=1, max=32)
    x, mask = rand(2, 5), torch.rand(2, 5, generator=G) > 0.5
    ep = export(IndexBoth(), x, mask, dynamic_shapes=({0: b, 1: s}, {0: b, 1: s}))
    ex = make_executor(import_exported_program(ep))
    for shape in ((2, 5), (3, 9)):
        x, mask = rand(*shape), torch.rand(*shape, generator=G) > 0.5
        got = next(iter(ex.run({"x": x.numpy(), "mask": mask.numpy()}).values()))
        np.testing.assert_array_equal(got, IndexBoth()(x, mask).numpy())


class StaticCache(nn.Module):
    """HF's static cache in miniature: per-layer cache buffers, `index_copy_` at the positions."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("keys_0", torch.zeros(1, 2, 8, 4))
        self.register_buffer("keys_1", torch.zeros(1, 2, 8, 4))

    def forward(self, k: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        self.keys_0.index_copy_(2, positions, k)
        self.keys_1.index_copy_(2, positions, k * 2)
        return self.keys_0.sum(2) + self.keys_1.sum(2)


def test_a_mutated_buffer_is_donated_state() -> None:
    """A buffer the program updates is a donated input named by its state-dict key (the caller
    holds its value), and its new value an output of that name: a static cache's row writes
    run in the caller's arrays. (decompose=True imports the same.)"""
    k, positions = rand(1, 2, 3, 4), torch.tensor([5, 1, 6])
    for decompose in (False, True):
        module = import_exported_program(export(StaticCache(), k, positions), decompose=decompose)
        ex = Executor(module)
        assert ex.input_names == ["keys_0", "keys_1", "k", "positions"]
        assert ex.output_names[1:] == ["keys_0", "keys_1"] and len(ex.in_place) == 2
        mine = {n: rand(1, 2, 8, 4).numpy() for n in ("keys_0", "keys_1")}
        eager = StaticCache()
        for n, a in mine.items():
            getattr(eager, n).copy_(torch.from_numpy(a))
        got = ex.run({**mine, "k": k.numpy(), "positions": positions.numpy()})
        with torch.no_grad():
            want = eager(k, positions)
        np.testing.assert_allclose(got[ex.output_names[0]], want.numpy(), atol=ATOL, rtol=RTOL)
        for n, a in mine.items():
            assert got[n] is a
            np.testing.assert_array_equal(a, getattr(eager, n).numpy())


class Counter(nn.Module):
    """HF's static cache's `cumulative_length`: set by `copy_`, then advanced in place through
    a `.to()` that converts nothing (an alias), read before and after."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("length", torch.zeros((), dtype=torch.int64))

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        self.length.copy_(pos[0])
        t = self.length.to(torch.int64)
        before = x + t
        t.add_(1)
        return before * self.length


def test_in_place_updates_import_without_a_retrace(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-place ops torch.export kept (non-functional IR) import as their pure forms, each
    rebinding its target and the aliases of it, so later readers see the update, and the
    buffer is donated state whose new value is an output: torch's re-trace is not needed."""
    x, pos = rand(3), torch.tensor([4, 5])
    ep = export(Counter(), x, pos)
    SEEN.update(str(n.target) for n in ep.graph.nodes if n.op == "call_function")
    assert {"aten.copy_.default", "aten.add_.Tensor"} <= {str(n.target) for n in ep.graph.nodes}

    def refused(*a: object, **kw: object) -> None:
        raise AssertionError("re-traced")

    monkeypatch.setattr(torch.export.ExportedProgram, "run_decompositions", refused)
    SEEN.add("aten.copy.default")  # the pure form it imports as
    ex = Executor(import_exported_program(ep))
    assert ex.input_names == ["length", "x", "pos"] and ex.output_names[1:] == ["length"]
    got = ex.run({"length": np.zeros((), np.int64), "x": x.numpy(), "pos": pos.numpy()})
    eager = Counter()
    with torch.no_grad():
        want = eager(x, pos)
    np.testing.assert_allclose(got[ex.output_names[0]], want.numpy(), atol=ATOL, rtol=RTOL)
    assert int(got["length"]) == int(eager.length) == 5


def test_a_failing_torch_retrace_is_an_import_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """An in-place write through a view needs torch's functionalization; when torch's
    run_decompositions fails (it asserts on some programs it exported), the import error
    says so with the cause, not a traceback."""
    ep = export(StackedCache(), rand(1, 2, 1, 4), torch.tensor([3]), rand(2, 1, 2, 8, 4))

    def fails(*a: object, **kw: object) -> None:
        raise AssertionError("expected compiled_fn to be GraphModule, got <class 'function'>")

    monkeypatch.setattr(torch.export.ExportedProgram, "run_decompositions", fails)
    with pytest.raises(
        TorchImportError,
        match=r"torch's run_decompositions \(functionalization of its in-place ops\) failed "
        r"on this program: AssertionError: expected compiled_fn",
    ):
        import_exported_program(ep)


def test_unsupported_argument_names_the_node() -> None:
    ep = export(lambda x: torch.div(x, Y, rounding_mode="floor"), X)
    with pytest.raises(
        TorchImportError,
        match=r"node 'div' \(aten.div.Tensor_mode\) at .*"
        "test_torch_export.py:[0-9]+: .*rounding_mode",
    ):
        import_exported_program(ep)


ROWS, COLS = torch.tensor([[0], [-1]]), torch.tensor([1, 2, -4])
GATHER_IDX = torch.tensor([[[0, 3, 1, 2, 0]] * 2] * 3)


def _in_place_on_a_temporary(x: torch.Tensor) -> torch.Tensor:
    """An in-place op on a value the graph made (T5's `position_bias.add_`): functionalized."""
    t = x * 2
    t.add_(1.0)
    return t - x


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x[ROWS, COLS],
        lambda x: x[:, ROWS, COLS],
        lambda x: x[ROWS, COLS, 1:3],
        lambda x: x.to("cpu") * x.to(torch.float64).to(torch.float32),
        lambda x: x.to(dtype=torch.float64, device="cpu") + x.to(torch.ones(1, dtype=torch.int64)),
        lambda x: torch.gather(x, 1, GATHER_IDX),
        lambda x: torch.gather(x, -1, GATHER_IDX[..., :2]),
        lambda x: (torch.min(x, 0.5 - x), torch.max(x, -x)),
        _in_place_on_a_temporary,
        lambda x: x.to(torch.float64).type_as(x) * x.type_as(ROWS),
    ],
    ids=[
        "two-leading",
        "two-inner",
        "with-trailing-slice",
        "to-device-and-dtype",
        "to-dtype-layout-and-other",
        "gather",
        "gather-last",
        "min-max-other",
        "in-place",
        "type-as",
    ],
)
def test_indexing_gather_to_and_in_place(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Index tensors on consecutive dims broadcast together (transformers' mask building);
    `.to(device)` moves nothing, `.to(dtype)` casts."""
    check(fn, rand(3, 4, 5))


IDX2 = torch.tensor([3, 0])


def _index_put(x: torch.Tensor) -> torch.Tensor:
    """`y[:, idx] = v` on a copy: index_put with a None index (functionalized)."""
    y = x * 1
    y[:, IDX2] = x[:, 1:3] - 1
    return y


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.index_copy(x, 1, IDX2, x[:, :2] * 2),
        _index_put,
        lambda x: torch.select_scatter(x, x[:, 0] + 1, 1, -1),
        lambda x: torch.slice_scatter(x, x[..., :2] * 3, 2, 1, 5, 2),
        lambda x: torch.slice_scatter(x, x * 3, 0),
    ],
    ids=["index-copy", "index-put", "select-scatter", "slice-scatter", "slice-scatter-all"],
)
def test_writes_at_positions(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Functional writes of rows: each one `fuel.index_copy` (a constant index where torch's is
    static)."""
    check(fn, rand(3, 4, 5))


class StackedCache(nn.Module):
    """A two-layer stacked KV cache updated in place at `pos`, each layer then read."""

    def forward(self, k: torch.Tensor, pos: torch.Tensor, cache: torch.Tensor) -> torch.Tensor:
        out = []
        for i in range(cache.shape[0]):
            cache[i].index_copy_(2, pos, k * (i + 1))
            out.append(cache[i].sum(2))
        return torch.stack(out)


def test_an_in_place_cache_write_is_a_donated_row_update() -> None:
    """`cache[i].index_copy_(2, pos, k)` functionalizes to select_scatter(index_copy(select));
    it imports as one `fuel.index_copy` per layer on the whole cache (layer i an offset), the
    cache a donated input returned under its own name, and the executor writes the rows into
    the caller's array."""
    k, pos, cache = rand(1, 2, 1, 4), torch.tensor([3]), rand(2, 1, 2, 8, 4)
    module = import_exported_program(export(StackedCache(), k, pos, cache.clone()))
    text = module.text()
    assert text.count("fuel.index_copy") == 2 and "offsets = [1, 0, 0, 0, 0]" in text
    assert 'fuel.name = "cache", fuel.donate' in text
    ex = Executor(module)
    assert ex.output_names == ["stack", "cache"] and len(ex.in_place) == 2
    mine = cache.numpy().copy()
    got = ex.run({"k": k.numpy(), "pos": pos.numpy(), "cache": mine})
    want_cache = cache.clone()
    with torch.no_grad():
        want = StackedCache()(k, pos, want_cache)
    assert got["cache"] is mine
    np.testing.assert_array_equal(mine, want_cache.numpy())
    np.testing.assert_allclose(got["stack"], want.numpy(), atol=ATOL, rtol=RTOL)


def test_every_mapped_op_is_exercised() -> None:
    """Runs last (file order): the cases above exported every overload the table maps."""
    missing = sorted(set(supported_aten_ops()) - SEEN)
    assert missing == []
