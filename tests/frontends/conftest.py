"""Fixtures of the importer tests (the models themselves are in onnx_models.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import onnx
import pytest


@pytest.fixture
def save_model(tmp_path: Path) -> Callable[..., str]:
    """Write a model into the test's tmp dir; returns its path."""

    def save(model: onnx.ModelProto, name: str = "model.onnx") -> str:
        path = tmp_path / name
        onnx.save(model, str(path))
        return str(path)

    return save
