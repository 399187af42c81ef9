"""`tools.api.compile`: a model to a callable bundle, as PyTorch users call torch.compile."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from frontends.builder import GraphBuilder  # noqa: E402
from tools.api import compile  # noqa: E402


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up, self.down = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.nn.functional.gelu(self.up(x))
        return self.down(h) * scale, h.sum(-1)


@pytest.fixture(scope="module")
def mlp() -> Mlp:
    torch.manual_seed(0)
    return Mlp().eval()


def test_a_torch_module_runs_as_a_callable_torch_in_torch_out(mlp: Mlp, tmp_path: Path) -> None:
    x, s = torch.randn(3, 8), torch.tensor(2.0)
    run = compile(mlp, (x, s), bundle=tmp_path / "mlp.bundle")
    assert run.input_names == ["x", "scale"] and run.bundle_path.is_dir()
    for inputs in ((x, s), (torch.randn(3, 8), torch.tensor(-1.0))):
        got = run(*inputs)
        with torch.inference_mode():
            want = mlp(*inputs)
        assert isinstance(got, tuple) and all(isinstance(g, torch.Tensor) for g in got)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)
    y, _ = run(scale=s, x=x.numpy())  # by name; one torch input makes the outputs torch
    assert isinstance(y, torch.Tensor)
    y_np, _ = run(x.numpy(), s.numpy())
    assert isinstance(y_np, np.ndarray)


def test_a_fuel_module_and_bad_calls(tmp_path: Path) -> None:
    g = GraphBuilder()
    module = g.build(outputs=[g.exp(g.input("x", (4,)))])
    run = compile(module, bundle=tmp_path / "exp.bundle")
    x = np.linspace(-1, 1, 4, dtype=np.float32)
    np.testing.assert_allclose(run(x), np.exp(x), rtol=1e-6)
    with pytest.raises(TypeError, match="missing input"):
        run()
    with pytest.raises(TypeError, match="takes 1 inputs"):
        run(x, x)


def test_dynamic_names_an_input_forward_has(mlp: Mlp) -> None:
    with pytest.raises(ValueError, match="dynamic names no input of forward"):
        compile(mlp, (torch.randn(3, 8), torch.tensor(1.0)), dynamic={"y": {0: ("b", 1, 8)}})


def test_dynamic_dims_give_one_bundle_for_every_batch(mlp: Mlp, tmp_path: Path) -> None:
    """`dynamic={"x": {0: ("batch", 1, 16)}}`: one bundle, run at two batch sizes (each
    specialised once); a batch outside the range is refused naming the dim."""
    from runtime.compiled import InputError

    s = torch.tensor(2.0)
    run = compile(mlp, (torch.randn(3, 8), s), dynamic={"x": {0: ("batch", 1, 16)}})
    for b in (2, 11):
        x = torch.randn(b, 8)
        got = run(x, s)
        with torch.inference_mode():
            want = mlp(x, s)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(InputError, match=r"dim 'batch' = 17 \(input 'x' dim 0\) is outside"):
        run(torch.randn(17, 8), s)
