"""ONNX -> fuel: import an ONNX model (standard opset >= 7, static shapes) into a `FuelModule`.

    from frontends.onnx import import_onnx
    module = import_onnx("model.onnx")                # verified IR + weights
    Executor(module).run({"input_ids": ids})           # outputs keyed by ONNX output names

`load_any(path)` imports a `.onnx` file or loads fuel IR; `supported_op_types()` lists the op
types mapped. Every failure is an `OnnxImportError` with one message naming the node at fault.
"""

from frontends.onnx.driver import import_onnx, load_any, load_model, supported_op_types
from frontends.onnx.errors import OnnxImportError

__all__ = ["OnnxImportError", "import_onnx", "load_any", "load_model", "supported_op_types"]
