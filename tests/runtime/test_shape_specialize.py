"""Dim symbols end to end: one compiled module runs every shape in its ranges, each shape
specialised once and cached; a shape outside a range is refused naming the dim."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from frontends.builder import GraphBuilder
from fuel_dialect.shapes import cost_shapes, symbol_hints, symbolic_shapes
from lowering.bundle import compile_module
from runtime.compiled import InputError
from runtime.module import FuelModule
from runtime.shape_specialize import SymbolicExecutor, make_executor
from tools.fuel import main as fuel_main

SHARED_SEQ = """
func.func @main(%x: tensor<?x?x4xf32> {fuel.dim_names = ["batch", "seq"]},
                %b: tensor<?x4xf32> {fuel.dim_names = ["seq"]}) -> tensor<?x3x2xf32>
    attributes {fuel.dims = {batch = #fuel.dim<1, 8>, seq = #fuel.dim<1, 2048>}} {
  %0 = fuel.add %x, %b : tensor<?x?x4xf32>, tensor<?x4xf32> -> tensor<?x?x4xf32>
  %1 = fuel.slice %0 starts = [0, 1, 0] limits = [1, 9223372036854775807, 4]
      steps = [1, 1, 1] : tensor<?x?x4xf32> -> tensor<1x?x4xf32>
  %2 = fuel.concat %1, %1 axis = 1 : tensor<1x?x4xf32>, tensor<1x?x4xf32> -> tensor<1x?x4xf32>
  %3 = fuel.reshape %2 : tensor<1x?x4xf32> -> tensor<?x3x2xf32>
  func.return %3 : tensor<?x3x2xf32>
}
"""


def _mlp(batch: tuple[int, int] = (1, 64)) -> FuelModule:
    g = GraphBuilder(seed=0)
    x = g.input("x", (g.dim("batch", *batch), 16))
    h = g.relu(g.add(g.matmul(x, g.weight("w1", (16, 32))), g.weight("b1", (32,))))
    return g.build(outputs={"y": g.matmul(h, g.weight("w2", (32, 8)))})


def _mlp_ref(m: FuelModule, x: np.ndarray) -> np.ndarray:
    w = {k: v.astype(np.float64) for k, v in m.weights.items()}
    return np.maximum(x @ w["w1"] + w["b1"], 0) @ w["w2"]


def test_shape_rules_give_each_dim_as_an_expression() -> None:
    f = FuelModule.parse(SHARED_SEQ).entry
    shapes = symbolic_shapes(f)
    ret = f.body.block.last_op
    assert ret is not None
    add, sl, cat, out = (shapes[op.results[0]] for op in list(f.body.block.ops)[:4])
    assert [str(d) for d in add] == ["batch", "seq", "4"]
    assert str(sl[1]) == "slice(seq, 1, 9223372036854775807, 1)"  # known when seq binds
    assert str(cat[1]) == "2*slice(seq, 1, 9223372036854775807, 1)"
    assert str(out[0]) == "div(8*slice(seq, 1, 9223372036854775807, 1), 6)"  # checked at run


def test_cost_shapes_price_each_symbol_at_its_clamped_hint() -> None:
    """The picker's shapes: each symbol at its hint (default 64) clamped to its range, and
    every derived dim evaluated there (a slice, a concat, a division)."""
    f = FuelModule.parse(SHARED_SEQ).entry
    assert symbol_hints(f) == {"batch": 8, "seq": 64}  # batch's 64 clamped to [1, 8]
    assert symbol_hints(f, {"seq": 4096, "batch": 2}) == {"batch": 2, "seq": 2048}
    add, sl, cat, out = (op.results[0] for op in list(f.body.block.ops)[:4])
    shapes = cost_shapes(f, {"seq": 4})
    assert [shapes[v] for v in (add, sl, cat, out)] == [(8, 4, 4), (1, 3, 4), (1, 6, 4), (4, 3, 2)]
    assert out not in cost_shapes(f, {"seq": 5})  # 8 * 4 * 2 rows do not split in 6: unpriced


def test_mlp_compiled_once_runs_two_batches() -> None:
    m = _mlp()
    plan, _ = compile_module(m)
    ex = make_executor(plan)
    assert isinstance(ex, SymbolicExecutor)
    rng = np.random.default_rng(0)
    for b in (3, 17, 3):
        x = rng.standard_normal((b, 16)).astype(np.float32)
        y = ex.run({"x": x})["y"]
        np.testing.assert_allclose(y, _mlp_ref(m, x), rtol=1e-4, atol=1e-5)
    assert [env for env, _ in ex.specializations] == [(("batch", 3),), (("batch", 17),)]
    with pytest.raises(InputError, match=r"dim 'batch' = 65 \(input 'x' dim 0\) is outside"):
        ex.run({"x": np.zeros((65, 16), np.float32)})
    with pytest.raises(InputError, match=r"input .x. dim 1 must be 16, got 15"):
        ex.run({"x": np.zeros((4, 15), np.float32)})


def test_two_inputs_bind_one_symbol_and_the_cache_is_bounded(monkeypatch) -> None:
    monkeypatch.setenv("FUEL_SHAPE_CACHE", "2")
    m = FuelModule.parse(SHARED_SEQ)
    ex = make_executor(m)
    for seq in (4, 7, 10):
        x = np.ones((1, seq, 4), np.float32)
        b = np.arange(seq * 4, dtype=np.float32).reshape(seq, 4)
        got = ex.run({"x": x, "b": b})["out0"]
        want = np.concatenate([(x + b)[:1, 1:]] * 2, axis=1).reshape(-1, 3, 2)
        np.testing.assert_array_equal(got, want)
    assert ex.cached_signatures == [(("batch", 1), ("seq", 7)), (("batch", 1), ("seq", 10))]
    with pytest.raises(InputError, match=r"dim 'seq' is 3 in input 'x' dim 1 but 4 in input 'b'"):
        ex.run({"x": np.ones((1, 3, 4), np.float32), "b": np.ones((4, 4), np.float32)})
    with pytest.raises(InputError, match=r"at batch=1, seq=3: 'fuel.reshape': 16 elements do"):
        ex.run({"x": np.ones((1, 3, 4), np.float32), "b": np.ones((3, 4), np.float32)})


def test_cli_bundle_runs_two_shapes_and_refuses_a_third(tmp_path: Path, capsys) -> None:
    ir = _mlp((1, 8)).save(tmp_path / "mlp.mlir")
    bundle = tmp_path / "m.fuelbundle"
    assert fuel_main(["compile", str(ir), "-o", str(bundle)]) == 0
    for b in (2, 5):
        np.save(tmp_path / f"x{b}.npy", np.ones((b, 16), np.float32))
        rc = fuel_main(["run", str(bundle), "--input", f"x={tmp_path / f'x{b}.npy'}", "--profile"])
        text = capsys.readouterr().out
        assert rc == 0 and f"y: [{b}, 8] f32" in text
        assert f"specialized for batch={b}: " in text and "lower " in text
    np.save(tmp_path / "x9.npy", np.ones((9, 16), np.float32))
    assert fuel_main(["run", str(bundle), "--input", f"x={tmp_path / 'x9.npy'}"]) == 1
    assert (
        "dim 'batch' = 9 (input 'x' dim 0) is outside its range [1, 8]" in capsys.readouterr().err
    )
