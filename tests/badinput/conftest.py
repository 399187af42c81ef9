"""Shared by the bad-input tests: one small compiled bundle (a 2x4 @ 4x3 matmul + tanh with
its weight), written once per session, that each test copies or repacks before breaking it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.badinput.badinput_modules import small_module


@pytest.fixture(scope="session")
def bundle_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A good bundle directory; copy it before changing anything in it."""
    from lowering.bundle import write_bundle

    return write_bundle(small_module(), tmp_path_factory.mktemp("pristine") / "b")


@pytest.fixture(scope="session")
def bundle_files(bundle_dir: Path) -> dict[str, bytes]:
    """The good bundle's files by bundle path."""
    from runtime.bundle import read_container

    return read_container(bundle_dir)
