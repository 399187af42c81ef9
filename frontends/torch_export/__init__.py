"""torch.export -> fuel: import an `ExportedProgram` (static shapes) into a `FuelModule`.

    ep = torch.export.export(model, (x,))
    module = import_exported_program(ep)          # verified IR + weights
    Executor(module).run({"x": x.numpy()})         # inputs keyed by forward()'s argument names

`supported_aten_ops()` lists the aten overloads mapped. Every failure is a `TorchImportError`
with one message: all unsupported ops with counts, or the node (and source line) at fault.
"""

from frontends.torch_export.errors import TorchImportError
from frontends.torch_export.importer import import_exported_program, supported_aten_ops

__all__ = ["TorchImportError", "import_exported_program", "supported_aten_ops"]
