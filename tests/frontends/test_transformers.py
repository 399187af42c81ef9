"""Models fuel did not write: `transformers` architectures from tiny configs (random weights,
no download), imported as their users export them, run by fuel, compared with PyTorch.

torch.export of `model(input_ids, attention_mask)` exactly as exported (no manual
decomposition) with a dynamic sequence length, and the legacy ONNX exporter (static, and with
`dynamic_axes`): one import and compile per model runs two lengths, each against PyTorch. The
outputs must also change with the input (a graph that folded to a constant would pass a single
comparison).
"""

from __future__ import annotations

import io
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")
onnx = pytest.importorskip("onnx")

from frontends.onnx import import_onnx  # noqa: E402
from frontends.torch_export import import_exported_program  # noqa: E402
from passes.canonicalize import canonicalize  # noqa: E402
from passes.fuse_patterns import find_matches  # noqa: E402
from passes.fused.registry import default_fused_registry  # noqa: E402
from runtime.executor import Executor  # noqa: E402

VOCAB, TOKENS = 512, 12
SMALL = {"vocab_size": VOCAB}
LAYERS = 1
"""One block (two for T5, whose later blocks reuse the first one's position bias): the tests
check how each architecture's graph imports and runs, and more blocks repeat the same ops."""


def _llama_like(cls: Callable[..., Any], config: Callable[..., Any], **kw: Any) -> Any:
    return cls(
        config(
            num_hidden_layers=LAYERS,
            hidden_size=64,
            intermediate_size=176,
            num_attention_heads=4,
            max_position_embeddings=64,
            **SMALL,
            **kw,
        )
    )


MODELS: dict[str, tuple[Callable[[], Any], bool]] = {
    "gpt2": (
        lambda: tf.GPT2LMHeadModel(
            tf.GPT2Config(n_layer=LAYERS, n_embd=64, n_head=4, n_positions=64, **SMALL)
        ),
        True,
    ),
    "llama": (
        lambda: _llama_like(tf.LlamaForCausalLM, tf.LlamaConfig, num_key_value_heads=4),
        True,
    ),
    "mistral": (
        lambda: _llama_like(
            tf.MistralForCausalLM, tf.MistralConfig, num_key_value_heads=2, sliding_window=None
        ),
        True,
    ),
    "gemma": (  # the scaled embedding's `type_as`, GELU-tanh gated MLP, (1 + w) RMSNorm
        lambda: _llama_like(
            tf.GemmaForCausalLM, tf.GemmaConfig, num_key_value_heads=2, head_dim=16
        ),
        True,
    ),
    "qwen2": (  # biased q, k, v projections, grouped-query attention
        lambda: _llama_like(tf.Qwen2ForCausalLM, tf.Qwen2Config, num_key_value_heads=2),
        True,
    ),
    "phi3": (  # one fused qkv projection and one fused gate-up projection, sliced
        lambda: _llama_like(
            tf.Phi3ForCausalLM, tf.Phi3Config, num_key_value_heads=4, pad_token_id=0
        ),
        True,
    ),
    "gpt-neox": (  # rope on a quarter of each head, attention and MLP in parallel
        lambda: _llama_like(tf.GPTNeoXForCausalLM, tf.GPTNeoXConfig, rotary_pct=0.25),
        True,
    ),
    "bert": (
        lambda: tf.BertModel(
            tf.BertConfig(
                num_hidden_layers=LAYERS,
                hidden_size=64,
                intermediate_size=128,
                num_attention_heads=4,
                **SMALL,
            ),
            add_pooling_layer=False,
        ),
        False,
    ),
    "t5-encoder": (
        lambda: tf.T5EncoderModel(
            tf.T5Config(d_model=64, d_ff=176, d_kv=16, num_layers=2, num_heads=4, **SMALL)
        ),
        False,
    ),
}
"""name -> (a fresh model, whether it is a causal LM: logits out, else the last hidden state)."""


class Prefill(torch.nn.Module):
    def __init__(self, model: Any, causal: bool) -> None:
        super().__init__()
        self.m, self.causal = model, causal

    def forward(self, ids: Any, mask: Any) -> Any:
        if self.causal:
            return self.m(input_ids=ids, attention_mask=mask, use_cache=False).logits
        return self.m(input_ids=ids, attention_mask=mask).last_hidden_state


def _case(name: str) -> tuple[Any, tuple[Any, Any], tuple[Any, Any]]:
    torch.manual_seed(0)
    build, causal = MODELS[name]
    gen = torch.Generator().manual_seed(1)
    mask = torch.ones(1, TOKENS, dtype=torch.int64)
    a, b = (torch.randint(0, VOCAB, (1, TOKENS), generator=gen) for _ in range(2))
    return Prefill(build().eval(), causal).eval(), (a, mask), (b, mask)


def _check(module: Any, model: Any, args: tuple[Any, Any], alt: tuple[Any, Any]) -> None:
    ex = Executor(module)
    names = ex.input_names
    got = next(iter(ex.run({n: t.numpy() for n, t in zip(names, args, strict=True)}).values()))
    with torch.inference_mode():
        want = model(*args).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)
    other = next(iter(ex.run({n: t.numpy() for n, t in zip(names, alt, strict=True)}).values()))
    assert not np.array_equal(got, other), "the output does not depend on the input"


SEQ = (1, 64)
"""The range of the dynamic sequence length (`seq`) in the dynamic-shape tests."""


def _runs_every_length(plan: Any, model: Any) -> Any:
    """One compiled bundle of `plan` (dim symbol `seq`), run at two prompt lengths, each
    lowered for its shape as `fuel run` does (fusions, generated C): each matches PyTorch
    (1e-4 relative), the output changes with the input, both shapes are
    cached, and a length outside the range is refused naming the dim. Returns the compiled
    (symbolic) module."""
    from lowering.bundle import compile_module
    from lowering.cpu.specialize import shape_finisher
    from runtime.compiled import InputError
    from runtime.shape_specialize import make_executor

    compiled, _ = compile_module(plan)
    ex = make_executor(compiled, finish=shape_finisher())  # lowered per shape as `fuel run`
    gen = torch.Generator().manual_seed(2)
    outs = []
    for n in (TOKENS, 5, 5):
        ids = torch.randint(0, VOCAB, (1, n), generator=gen)
        mask = torch.ones(1, n, dtype=torch.int64)
        feed = dict(zip(ex.input_names, (ids.numpy(), mask.numpy()), strict=True))
        got = next(iter(ex.run(feed).values()))
        with torch.inference_mode():
            want = model(ids, mask).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)
        outs.append(got)
    assert not np.array_equal(outs[1], outs[2]), "the output does not depend on the input"
    assert [env for env, _ in ex.specializations] == [(("seq", TOKENS),), (("seq", 5),)]
    bad = {ex.input_names[0]: np.zeros((1, 65), np.int64), ex.input_names[1]: np.ones((1, 65))}
    with pytest.raises(InputError, match=r"dim 'seq' = 65 \(input '\w+' dim 1\) is outside"):
        ex.run(bad)
    return compiled


@pytest.mark.parametrize(
    "name", ["bert", "gemma", "gpt-neox", "gpt2", "llama", "phi3", "qwen2", "t5-encoder"]
)
def test_torch_export_as_exported(name: str) -> None:
    """`torch.export.export(model, (ids, mask), dynamic_shapes=...)` with `Dim("seq")`, as a
    user writes it (no decomposition): one import runs every length, the dim named `seq`."""
    model, args, _ = _case(name)
    seq = torch.export.Dim("seq", min=SEQ[0], max=SEQ[1])
    ep = torch.export.export(model, args, dynamic_shapes=({1: seq}, {1: seq}), strict=False)
    module = import_exported_program(ep)
    assert f"fuel.dims = {{seq = #fuel.dim<{SEQ[0]}, {SEQ[1]}>}}" in module.text()
    compiled = _runs_every_length(module, model)
    if name == "llama":  # rope fused on the symbolic module (q and k per layer)
        assert compiled.text().count("fuel.rope ") == 2 * LAYERS


def test_torch_export_with_dynamic_batch_and_seq() -> None:
    """GPT-2 with `Dim("batch")` and `Dim("seq")`: its attention splits `batch*seq` rows back
    into batch and seq, which the input's one `?` cannot tell apart, so those reshapes write
    their dims in the symbols (`dims` on `fuel.reshape`); one bundle runs two (batch, seq)
    shapes against PyTorch, each output depending on its input. A dynamic seq alone writes
    none."""
    from lowering.bundle import compile_module
    from lowering.cpu.specialize import shape_finisher
    from runtime.shape_specialize import make_executor

    model, (a, mask), _ = _case("gpt2")
    batch, seq = torch.export.Dim("batch", min=1, max=4), torch.export.Dim("seq", min=1, max=64)
    args = (a.repeat(2, 1), mask.repeat(2, 1))
    ep = torch.export.export(
        model, args, dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}), strict=False
    )
    module = import_exported_program(ep)
    assert '{dims = ["batch", "seq",' in module.text()
    compiled, _ = compile_module(module)
    ex = make_executor(compiled, finish=shape_finisher())
    gen = torch.Generator().manual_seed(3)
    for b, n in ((2, TOKENS), (3, 5)):
        ids = torch.randint(0, VOCAB, (b, n), generator=gen)
        ones = torch.ones(b, n, dtype=torch.int64)
        feed = dict(zip(ex.input_names, (ids.numpy(), ones.numpy()), strict=True))
        got = next(iter(ex.run(feed).values()))
        with torch.inference_mode():
            want = model(ids, ones).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)
        assert not np.array_equal(got[0], got[1]), "the output does not depend on the input"
    model, args, _ = _case("gpt2")
    one = torch.export.Dim("seq", min=1, max=64)
    ep = torch.export.export(model, args, dynamic_shapes=({1: one}, {1: one}), strict=False)
    assert "{dims = " not in import_exported_program(ep).text()


class IdsOnly(torch.nn.Module):
    """`model(input_ids)` as most users export a decoder: transformers builds the positions and
    mask itself (its packed-sequence check runs `diff` and `cumsum` on the positions)."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.m = model

    def forward(self, ids: Any) -> Any:
        return self.m(input_ids=ids, use_cache=False).logits


@pytest.mark.parametrize("name", ["gpt2", "llama", "mistral"])
def test_torch_export_of_a_decoder_given_only_ids(name: str) -> None:
    model, (a, _), (b, _) = _case(name)
    ids_only = IdsOnly(model.m).eval()
    ep = torch.export.export(ids_only, (a,), strict=False)
    _check(import_exported_program(ep), ids_only, (a,), (b,))


CANONICAL: dict[str, tuple[dict[str, int], dict[str, int]]] = {
    # op counts after fuel-canonicalize, fused matches then found (one block)
    "gpt2": ({"fuel.pow": 0, "fuel.tanh": 0, "fuel.gelu": 1}, {"matmul_bias_act": 4}),
    "llama": ({"fuel.pow": 0, "fuel.sigmoid": 0, "fuel.silu": 1}, {"rms_norm": 3, "gated_mlp": 1}),
    "qwen2": (
        {"fuel.pow": 0, "fuel.sigmoid": 0, "fuel.silu": 1},
        {"rms_norm": 3, "gated_mlp": 1, "attention": 1, "matmul_bias_act": 3},
    ),
    "phi3": (
        {"fuel.pow": 0, "fuel.sigmoid": 0, "fuel.silu": 1},
        {"rms_norm": 3, "gated_mlp": 1, "attention": 1},
    ),
    "gpt-neox": ({"fuel.erf": 0, "fuel.gelu": 1}, {"matmul_bias_act": 4, "attention": 1}),
}
"""GPT-2's tanh GELU (with its pow(x, 3)) becomes fuel.gelu and each c_fc one matmul + bias +
gelu_tanh; Llama's RMSNorm (pow, Sqrt, Div) and SiLU (x * Sigmoid) match whole; Qwen2's biased
q, k, v projections are matmul + bias; GPT-NeoX's erf GELU is fuel.gelu. Phi-3's MLP is one
product to [gate | up] then two slices: one product per slice (`passes.canonical.products`),
then gated_mlp."""


@pytest.mark.parametrize("name", ["gpt2", "llama", "qwen2", "phi3", "gpt-neox"])
def test_onnx_legacy_export(name: str) -> None:
    """As imported, then after `fuel-canonicalize` (the same numbers, the canonical forms)."""
    model, args, alt = _case(name)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, args, buf, input_names=["ids", "mask"], dynamo=False, opset_version=18
        )
    module = import_onnx(onnx.load_model_from_string(buf.getvalue()))
    _check(module, model, args, alt)
    canonicalize(module.op)
    ops = Counter(op.name for op in module.entry.body.walk())
    fused = Counter(e.name for e, _, _ in find_matches(module.op, default_fused_registry()))
    want_ops, want_fused = CANONICAL[name]
    assert {k: ops[k] for k in want_ops} == want_ops
    assert {k: fused[k] for k in want_fused} == want_fused
    _check(module, model, args, alt)


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama", "t5-encoder"])
def test_onnx_legacy_export_with_dynamic_seq_runs_every_length(name: str) -> None:
    """One import (`dynamic_axes` seq, ranged by `dims=`, as `--dim seq=1:64`), one compile,
    two prompt lengths: each matches PyTorch; a length outside the range is refused naming
    the dim."""
    model, args, _ = _case(name)
    buf = io.BytesIO()
    axes = {"ids": {1: "seq"}, "mask": {1: "seq"}, "out": {1: "seq"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            args,
            buf,
            input_names=["ids", "mask"],
            output_names=["out"],
            dynamic_axes=axes,
            dynamo=False,
            opset_version=18,
        )
    proto = onnx.load_model_from_string(buf.getvalue())
    compiled = _runs_every_length(import_onnx(proto, dims={"seq": SEQ}), model)
    if name == "llama":  # fused on the symbolic module too (cos * attention_scaling, unsqueeze)
        assert compiled.text().count("fuel.rope ") == 2 * LAYERS, "q and k rope per layer"


def test_a_decode_step_with_hfs_static_cache() -> None:
    """HF's own recipe for an exported decoder with a KV cache
    (`TorchExportableModuleWithStaticCache`, exported as HF's `export()` does: strict): the
    cache buffers and `cumulative_length` counters are donated state, updated in place by the
    graph's `index_copy_` / `copy_` / `add_` (no torch re-trace), the mask built from
    `cache_position`. Five decode steps from an empty cache match eager PyTorch (which runs the
    same wrapper, so the same cache), logits and caches; the cache rows are written into the
    caller's arrays and the logits depend on the tokens."""
    from transformers.integrations.executorch import TorchExportableModuleWithStaticCache

    torch.manual_seed(0)
    model = _llama_like(tf.LlamaForCausalLM, tf.LlamaConfig, num_key_value_heads=2).eval()
    model.generation_config.cache_implementation = "static"
    model.generation_config.use_cache = True
    wrapper = TorchExportableModuleWithStaticCache(model, batch_size=1, max_cache_len=8)
    step = {"input_ids": torch.tensor([[3]]), "cache_position": torch.tensor([0])}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(wrapper, (), step, strict=True)
    ex = Executor(import_exported_program(ep))
    state = {
        n: np.zeros_like(getattr(wrapper, n).numpy())
        for n in ex.input_names
        if n not in ("input_ids", "cache_position")
    }
    assert sorted(state) == ["cumulative_length_0", "key_cache_0", "value_cache_0"]
    assert len(ex.in_place) == 2  # the two caches' row writes
    eager = TorchExportableModuleWithStaticCache(model, batch_size=1, max_cache_len=8)
    logits = []
    for pos, token in enumerate([3, 17, 5, 42, 9]):
        ins = {"input_ids": np.array([[token]]), "cache_position": np.array([pos])}
        got = ex.run({**state, **ins})
        with torch.no_grad():
            want = eager(**{k: torch.from_numpy(v) for k, v in ins.items()}).numpy()
        np.testing.assert_allclose(got[ex.output_names[0]], want, rtol=1e-4, atol=1e-5)
        logits.append(got[ex.output_names[0]])
        for n in state:
            np.testing.assert_allclose(got[n], getattr(eager, n).numpy(), rtol=1e-5, atol=1e-6)
            assert n.startswith("cumulative") or got[n] is state[n]
    assert np.abs(logits[1] - logits[0]).max() > 1e-3
    assert (
        np.abs(state["key_cache_0"][:, :, :5]).min() > 0
        and not state["key_cache_0"][:, :, 5:].any()
    )
