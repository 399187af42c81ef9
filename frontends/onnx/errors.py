"""The one error type of the ONNX importer."""

from __future__ import annotations

from runtime.module import ModuleError


class OnnxImportError(ModuleError):
    """An ONNX model fuel cannot import: unsupported ops (all of them, counted), an unsupported
    attribute or dtype, a dynamic shape, or an unreadable file. The message names the node
    (its name and op_type) or the graph input at fault. A `ModuleError`, so every CLI that
    loads modules reports it as one line and exit code 1."""

    constant_input: str | None = None
    """The graph input whose value the import needs as a constant (a Reshape's shape, a
    Slice's starts, ...), when that is why it failed: pass it in `import_onnx(constants=...)`."""

    internal: bool = False
    """True when a handler raised something other than a deliberate refusal (a malformed node
    the checks did not anticipate, or an importer bug); the conformance suite counts these as
    failures, not as unsupported."""
