"""`tools.api.compile`: a PyTorch model, an ONNX file or fuel IR to a callable, in one call.

    from tools.api import compile
    run = compile(model, (ids,), dynamic={"ids": {1: ("seq", 1, 256)}})
    logits = run(ids)                      # torch in, torch out (numpy in, numpy out)
    logits = run(other_ids_of_another_length)

A `torch.nn.Module` is exported with `torch.export` (its `dynamic` dims as `torch.export.Dim`s
with those ranges), imported, optimized and compiled into a kernel bundle, which is loaded and
run by fuel's executor: the same path as `fuel compile` + `fuel run`. The bundle is kept at
`.bundle_path` (a temporary folder unless `bundle=` names one), so `fuel run` and `fuel explain`
can read it too.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lowering.bundle import load_bundle, write_bundle
from runtime.dtypes import numpy_to_tensor, tensor_to_numpy
from runtime.module import FuelModule

DimSpec = tuple[str, int, int]
"""(symbol name, smallest size, largest size) of one dynamic dim."""


class CompiledModel:
    """A loaded bundle called like the model it came from: positional inputs in the model's
    order (or by name), outputs in its order (one output: the value alone)."""

    def __init__(self, bundle_path: Path) -> None:
        self.bundle_path = bundle_path
        self._bundle = load_bundle(bundle_path)
        self._executor = self._bundle.executor()
        self.input_names: list[str] = list(self._executor.input_names)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) > len(self.input_names):
            raise TypeError(f"takes {len(self.input_names)} inputs, got {len(args)}")
        feeds = dict(zip(self.input_names, args, strict=False)) | kwargs
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise TypeError(f"missing input(s): {', '.join(missing)}")
        torch_in = any(_is_torch(v) for v in feeds.values())
        outs = list(self._executor.run({k: _to_numpy(v) for k, v in feeds.items()}).values())
        if torch_in:
            outs = [numpy_to_tensor(o) for o in outs]
        return outs[0] if len(outs) == 1 else tuple(outs)


def compile(  # noqa: A001 (the name PyTorch users know: torch.compile)
    model: Any,
    example_inputs: Sequence[Any] = (),
    *,
    dynamic: Mapping[str, Mapping[int, DimSpec]] | None = None,
    options: Mapping[str, str] | None = None,
    bundle: str | os.PathLike[str] | None = None,
) -> CompiledModel:
    """Compile `model` (a `torch.nn.Module`, an `.onnx` or `.mlir` path, or a `FuelModule`)
    for this machine's CPU and load it. `example_inputs`: a torch model's inputs (their shapes
    are the static ones). `dynamic`: per input name (forward()'s parameter names), the dims
    that vary, `{dim: (symbol, lo, hi)}`; dims sharing a symbol are equal. `options`: the CPU
    backend's options (as `fuel compile --option`)."""
    module = _import(model, example_inputs, dynamic or {})
    dest = Path(bundle) if bundle is not None else Path(tempfile.mkdtemp(prefix="fuel-")) / "model"
    path = write_bundle(module, dest, options={"cpu": dict(options or {})})
    return CompiledModel(path)


def _import(model: Any, example_inputs: Sequence[Any], dynamic: Mapping[str, Any]) -> FuelModule:
    if isinstance(model, FuelModule):
        return model
    if isinstance(model, str | os.PathLike):
        from frontends.onnx import load_any  # lazy: it loads the onnx package

        return load_any(Path(model))
    return _import_torch(model, tuple(example_inputs), dynamic)


def _import_torch(model: Any, args: tuple[Any, ...], dynamic: Mapping[str, Any]) -> FuelModule:
    import inspect

    import torch  # lazy: torch is an optional dependency

    from frontends.torch_export import import_exported_program

    names = [p for p in inspect.signature(model.forward).parameters][: len(args)]
    unknown = sorted(set(dynamic) - set(names))
    if unknown:
        raise ValueError(f"dynamic names no input of forward(): {', '.join(unknown)}")
    dims: dict[str, Any] = {}
    shapes = None
    if dynamic:
        shapes = {}
        for name in names:
            spec = dynamic.get(name)
            if spec is None:
                shapes[name] = None
                continue
            shapes[name] = {}
            for d, (sym, lo, hi) in spec.items():
                if sym not in dims:
                    dims[sym] = torch.export.Dim(sym, min=lo, max=hi)
                shapes[name][d] = dims[sym]
    ep = torch.export.export(model, args, dynamic_shapes=shapes, strict=False)
    syms = {n: {d: s for d, (s, _, _) in spec.items()} for n, spec in dynamic.items()}
    return import_exported_program(ep, input_names=names, dim_names=syms)


def _is_torch(v: Any) -> bool:
    return type(v).__module__.startswith("torch")


def _to_numpy(v: Any) -> np.ndarray:
    return tensor_to_numpy(v) if _is_torch(v) else np.asarray(v)
