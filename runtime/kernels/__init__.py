"""The kernel libraries the runtime calls: `cpu/` (numpy, native wrappers, torch-BLAS, and
their contracts) and `triton/` (the Triton kernels and their table)."""
