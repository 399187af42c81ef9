"""The Triton backend: `backend` (its stages), `convert_fuel_to_triton` (the conversion
pass), `codegen` (generated kernels for fusion groups) and `aot` (PTX/cubin ahead of time).
The kernels it calls live in `runtime.kernels.triton`."""

import runtime.kernels.triton  # noqa: F401 (decides TRITON_INTERPRET before triton loads)
