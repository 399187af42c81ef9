"""ONNX -> fuel: import an ONNX model (standard opset >= 7, static shapes) into a `FuelModule`.

    from frontends.onnx import import_onnx
    module = import_onnx("model.onnx")                # verified IR + weights
    Executor(module).run({"input_ids": ids})           # outputs keyed by ONNX output names

`load_any(path)` imports a `.onnx` file or loads fuel IR; `supported_op_types()` lists the op
types mapped. Every failure is an `OnnxImportError` with one message naming the node at fault.

The names load lazily: importing `frontends.onnx.errors` does not load the `onnx` package.
"""

from __future__ import annotations

from typing import Any

from frontends.onnx.errors import OnnxImportError

__all__ = ["OnnxImportError", "import_onnx", "load_any", "load_model", "supported_op_types"]


def __getattr__(name: str) -> Any:
    if name == "OnnxImportError":
        return OnnxImportError
    if name in __all__:
        import frontends.onnx.driver as driver  # lazy: loads the onnx package

        return getattr(driver, name)
    raise AttributeError(f"module 'frontends.onnx' has no attribute '{name}'")
