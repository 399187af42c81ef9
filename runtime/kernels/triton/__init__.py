"""fuel's Triton kernels for the `cuda` backend (kernel_source `"triton"`).

One module per kernel family (see `runtime.kernels.triton.registry`). Every module
exposes its `@triton.jit` function(s) and a kernel class implementing
`runtime.kernels.triton.spec.TritonKernel`: a destination-passing fuel Kernel on torch
tensors whose `launches(shapes, dtypes, params)` describes each launch as a
`TritonKernelSpec` for AOT.

Importing this package decides how Triton kernels run in this process. Triton reads
`TRITON_INTERPRET` once, when `triton` is first imported, and `@triton.jit` then builds either a
compiled kernel (needs a CUDA GPU) or an interpreted one that runs the same kernel body with
numpy on torch CPU tensors. So on a machine where torch sees no CUDA GPU, and unless the caller
forces real compilation with `FUEL_GPU=1`, we default `TRITON_INTERPRET=1` here
(`runtime.knobs.configure_triton`), BEFORE anything imports triton: the kernels stay runnable
(slowly) and testable everywhere. An explicit `TRITON_INTERPRET` in the environment always wins.
AOT compilation (`lowering.triton.aot`) does not need a GPU in either mode.
"""

from __future__ import annotations

from runtime import knobs
from runtime.topology import cuda_device_archs, gpu_driver_present


def _gpu_present() -> bool:
    # Without a GPU driver there is no GPU, and `import torch` (~1.5 s) is not paid: passes
    # that only generate Triton source (convert-fuel-to-triton) stay fast to start.
    return gpu_driver_present() and bool(cuda_device_archs())


knobs.configure_triton(_gpu_present)
