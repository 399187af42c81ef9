"""The Llama-style decoder end to end (TINY config): export both graphs through ONNX and
torch.export, import, run with fuel, compare with PyTorch; greedy tokens; flash decoding.

Tolerances (f32): logits within atol 1e-4, KV caches within atol 1e-5 of eager PyTorch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from examples.llama.export import GRAPHS, IMPORTERS, Example, example_inputs, import_graph
from examples.llama.export import max_errors as graph_errors
from examples.llama.generate import FuelDecoder, generate_torch
from examples.llama.model import TINY, Llama
from fuel_dialect.branch import BranchOp
from fuel_dialect.ops_nn import AttentionOp
from passes.emit_decode_flash import is_flash_source
from passes.optimize import (
    DecodeFlashPathfinder,
    FrontierConvergenceOptimizer,
    OptimizationContext,
    PassRegistry,
    optimize_graph,
)
from runtime.executor import Executor
from runtime.module import FuelModule

LOGITS_ATOL, CACHE_ATOL = 1e-4, 1e-5
PROMPT, STEPS = 6, 6


@pytest.fixture(scope="module")
def llama() -> tuple[Llama, Example]:
    model = Llama(TINY).eval()
    return model, example_inputs(model, PROMPT)


_IMPORTED: dict[str, dict[str, FuelModule]] = {}


def modules(importer: str, llama: tuple[Llama, Example]) -> dict[str, FuelModule]:
    """Both graphs through `importer`, imported once per test session."""
    if importer == "onnx":
        pytest.importorskip("onnxscript", reason="torch's dynamo ONNX exporter needs onnxscript")
    if importer not in _IMPORTED:
        model, ex = llama
        _IMPORTED[importer] = {g: import_graph(model, ex, g, importer) for g in GRAPHS}
    return _IMPORTED[importer]


@pytest.fixture(params=IMPORTERS)
def imported(request: pytest.FixtureRequest, llama: tuple[Llama, Example]) -> dict[str, FuelModule]:
    return modules(request.param, llama)


def fresh(m: FuelModule) -> FuelModule:
    return FuelModule(m.op.clone(), m.weights)


def test_graphs_match_pytorch(
    imported: dict[str, FuelModule], llama: tuple[Llama, Example]
) -> None:
    model, ex = llama
    for graph, module in imported.items():
        errs = graph_errors(module, model, ex, graph)
        assert errs["logits"] <= LOGITS_ATOL, (graph, errs)
        assert all(v <= CACHE_ATOL for k, v in errs.items() if k != "logits"), (graph, errs)


def test_attention_is_one_fuel_op(imported: dict[str, FuelModule]) -> None:
    """Prefill: causal `fuel.attention` per layer; decode: one query with a `kv_len`."""
    for graph, module in imported.items():
        atts = [op for op in module.op.walk() if isinstance(op, AttentionOp)]
        assert len(atts) == TINY.layers, graph
        if graph == "prefill":
            assert all(a.causal is not None and a.kv_len is None for a in atts)
        else:
            assert all(a.kv_len is not None and a.q.type.get_shape()[2] == 1 for a in atts)


def test_greedy_tokens_match_pytorch(
    imported: dict[str, FuelModule], llama: tuple[Llama, Example]
) -> None:
    model, ex = llama
    want = generate_torch(model, ex.tokens, STEPS).tokens
    got = FuelDecoder(imported["prefill"], imported["decode"]).generate(ex.tokens.numpy(), STEPS)
    assert got.tokens == want


@dataclass
class CountingFlash:
    """`fuel-emit-decode-flash` inside fuel-optimize, counting the flash arms it offers."""

    offered: int = 0
    name: str = "emit-decode-flash"

    def propose(self, module: ModuleOp, ctx: OptimizationContext) -> None:
        DecodeFlashPathfinder().propose(module, ctx)
        self.offered = sum(
            1
            for op in module.walk()
            if isinstance(op, BranchOp)
            for arm in op.arms
            for inner in arm.block.ops
            if isinstance(inner, AttentionOp) and is_flash_source(_source(inner))
        )


def _source(op: AttentionOp) -> str:
    stamp = op.attributes.get("fuel.kernel")
    return stamp.kernel_source.data if stamp is not None else ""  # type: ignore[attr-defined]


def test_decode_flash_fires_and_optimized_decoding_matches(
    imported: dict[str, FuelModule], llama: tuple[Llama, Example]
) -> None:
    model, ex = llama
    mods = {g: fresh(m) for g, m in imported.items()}
    flash = {}
    for graph, module in mods.items():
        counter = CountingFlash()
        optimize_graph(
            module.op, registry=PassRegistry([counter], [FrontierConvergenceOptimizer()])
        )
        module.op.verify()
        flash[graph] = counter.offered
    assert flash == {"prefill": 0, "decode": TINY.layers}
    errs = graph_errors(mods["decode"], model, ex, "decode")
    assert errs["logits"] <= LOGITS_ATOL, errs
    got = FuelDecoder(mods["prefill"], mods["decode"]).generate(ex.tokens.numpy(), STEPS)
    assert got.tokens == generate_torch(model, ex.tokens, STEPS).tokens


def test_both_importers_agree(llama: tuple[Llama, Example]) -> None:
    """The same decode step through both importers gives the same logits (to f32 rounding)."""
    _, ex = llama
    outs = [Executor(modules(i, llama)["decode"]).run(ex.feeds("decode")) for i in IMPORTERS]
    np.testing.assert_allclose(outs[0]["logits"], outs[1]["logits"], atol=1e-5, rtol=0)


def test_saved_ir_round_trips(
    imported: dict[str, FuelModule], llama: tuple[Llama, Example], tmp_path: Path
) -> None:
    """The imported decode step saved as IR + safetensors loads and runs to the same logits."""
    _, ex = llama
    path = imported["decode"].save(tmp_path / "decode.mlir")
    again = Executor(FuelModule.load(path)).run(ex.feeds("decode"))
    want = Executor(imported["decode"]).run(ex.feeds("decode"))
    np.testing.assert_array_equal(again["logits"], want["logits"])
