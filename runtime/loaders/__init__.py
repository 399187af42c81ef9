"""Loaders of generated code: `c` (C source -> shared library -> Kernel) and `triton`
(Triton source -> jit function -> Kernel)."""
