"""The Llama-style decoder end to end (TINY config): export both graphs through ONNX and
torch.export, import, run with fuel, compare with PyTorch; greedy tokens; flash decoding; the
torch.export prefill at several prompt lengths (one module, dim `seq`); the decode step's KV
cache write done in place (one row per layer, into the caller's arrays).

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
from examples.llama.model import TINY, Llama, new_cache
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
from runtime.shape_specialize import make_executor

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


def test_one_prefill_module_serves_every_prompt_length(llama: tuple[Llama, Example]) -> None:
    """torch.export's prefill keeps the prompt length a dim symbol: lengths 3 and 11 run from
    the same module (logits and written caches against PyTorch), and generation from an
    11-token prompt gives PyTorch's tokens."""
    import torch

    model, _ = llama
    prefill = modules("torch", llama)["prefill"]
    assert "seq = #fuel.dim<1, 32>" in prefill.text()
    ex = make_executor(prefill)
    for n in (3, 11):
        tokens = torch.randint(0, TINY.vocab, (1, n), generator=torch.Generator().manual_seed(n))
        kc, vc = new_cache(TINY)
        with torch.no_grad():
            want = model.prefill(tokens, torch.arange(n), kc, vc).numpy()
        feeds = {"tokens": tokens.numpy(), "positions": np.arange(n, dtype=np.int64)}
        caches = {c: np.zeros(kc.shape, np.float32) for c in ("k_cache", "v_cache")}
        got = ex.run({**feeds, **caches})
        np.testing.assert_allclose(got["logits"], want, atol=LOGITS_ATOL, rtol=0)
        np.testing.assert_allclose(caches["k_cache"], kc.numpy(), atol=CACHE_ATOL, rtol=0)
        np.testing.assert_allclose(caches["v_cache"], vc.numpy(), atol=CACHE_ATOL, rtol=0)
    dec = FuelDecoder(ex, Executor(modules("torch", llama)["decode"]))
    assert dec.generate(tokens.numpy(), STEPS).tokens == generate_torch(model, tokens, STEPS).tokens


def test_decode_step_writes_one_row_per_layer_in_place(llama: tuple[Llama, Example]) -> None:
    """The torch.export decode step updates the caller's caches: one `fuel.index_copy` per layer
    and cache runs in place, no planned buffer holds a cache, the returned caches are the
    arrays passed in, and only slot `pos` changed."""
    _, ex = llama
    dec = Executor(modules("torch", llama)["decode"])
    assert dec.in_place == ["fuel.index_copy"] * (2 * TINY.layers)
    feeds = ex.feeds("decode")
    before = feeds["k_cache"].copy()
    assert dec.memory.planned_bytes < before.nbytes
    out = dec.run(feeds)
    assert out["k_cache"] is feeds["k_cache"] and out["v_cache"] is feeds["v_cache"]
    pos = int(feeds["pos"][0])
    changed = np.nonzero((out["k_cache"] != before).any(axis=(0, 1, 2, 4)))[0]
    assert changed.tolist() == [pos]
