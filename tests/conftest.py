"""Test-wide setup: Triton kernels run under the interpreter unless a GPU run asks otherwise."""

import os

# Must be set before triton is imported anywhere. A GPU session sets FUEL_GPU=1 to compile
# kernels for real; everywhere else Triton kernels run on torch CPU tensors.
if os.environ.get("FUEL_GPU") != "1":
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
