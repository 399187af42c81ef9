"""fuel's Triton kernel families, one module each (see `lowering.triton.registry`).

Every module exposes its `@triton.jit` function(s) and a kernel class implementing
`lowering.triton.spec.TritonKernel`: a destination-passing fuel Kernel on torch tensors whose
`launches(shapes, dtypes, params)` describes each launch as a `TritonKernelSpec` for AOT.
"""
