"""Test-wide setup: Triton kernels run under the interpreter unless a GPU run asks otherwise."""

import os
from typing import Any

import pytest

# Must be set before triton is imported anywhere. A GPU session sets FUEL_GPU=1 to compile
# kernels for real; everywhere else Triton kernels run on torch CPU tensors.
if os.environ.get("FUEL_GPU") != "1":
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")


@pytest.fixture(autouse=True)
def _lazy_backends_are_per_test():
    """Backends loaded on first need (`runtime.kernels.ensure_backend_kernels`, e.g. the
    cuda backend's Triton kernels when a test plans for a GPU topology) are unloaded after the
    test, so what the process-wide table holds never depends on test order."""
    import runtime.kernels as bt

    state = bt._STATE
    table, loaded, unavailable = bt.global_bindings(), set(state.loaded), dict(state.unavailable)
    yield
    if bt._STATE is state and (state.loaded != loaded or state.unavailable != unavailable):
        with state.writer:
            state.table = table
            state.generation += 1  # readers caching on the generation see a new table
        state.loaded, state.unavailable = loaded, unavailable


@pytest.fixture(scope="session")
def signing_key() -> tuple[Any, list[Any]]:
    """(private key, [its public key]): an Ed25519 key pair for signed-bundle tests."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    from runtime.signing import generate_key

    pem, _ = generate_key()
    private = load_pem_private_key(pem, None)
    return private, [private.public_key()]
