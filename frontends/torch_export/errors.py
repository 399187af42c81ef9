"""The one error type of the torch.export importer."""

from __future__ import annotations

from runtime.module import ModuleError


class TorchImportError(ModuleError):
    """An `ExportedProgram` fuel cannot import: unsupported aten ops (all of them, counted), a
    symbolic (dynamic) dimension, an unsupported argument or dtype, or a mutated buffer. The
    message names the FX node (and its source line) at fault. A `ModuleError`, so every CLI
    that loads modules reports it as one line and exit code 1."""

    internal: bool = False
    """True when a handler raised something other than a deliberate refusal (an importer bug,
    or a result whose shape or dtype differs from what torch recorded)."""
