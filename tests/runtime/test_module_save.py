"""`FuelModule.save` / `load`: an IR + weights pair that cannot tear (issue 17, item 4)."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import numpy as np
import pytest

import runtime.fsutil as fsutil
from frontends.builder import GraphBuilder
from runtime.module import FuelModule, ModuleError


def _mlp(seed: int) -> FuelModule:
    g = GraphBuilder(seed=seed)
    x = g.input("x", (2, 4))
    return g.build(outputs={"y": g.tanh(g.matmul(x, g.weight("w", (4, 3))))})


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_save_records_the_weights_hash_and_loads_back(tmp_path: Path) -> None:
    m = _mlp(0)
    path = m.save(tmp_path / "mlp.mlir")
    text = path.read_text()
    assert 'fuel.weights = "mlp.safetensors"' in text and "fuel.weights_sha256 = " in text
    back = FuelModule.load(path)
    np.testing.assert_array_equal(back.weights["w"], m.weights["w"])
    assert sorted(_files(tmp_path)) == ["mlp.mlir", "mlp.safetensors"]  # no temp files left


def test_crash_between_the_two_writes_is_refused(tmp_path: Path, monkeypatch) -> None:
    """New weights renamed into place, then the process dies before the IR's rename: the old IR
    now names new weights, and the loader refuses the pair, naming both files."""
    path = _mlp(0).save(tmp_path / "mlp.mlir")
    real_replace, calls = os.replace, []

    def die_after_first(src: str, dst: str) -> None:
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt  # stands in for kill -9 after the weights' rename
        real_replace(src, dst)

    monkeypatch.setattr(fsutil.os, "replace", die_after_first)
    with pytest.raises(KeyboardInterrupt):
        _mlp(1).save(path)
    monkeypatch.undo()
    with pytest.raises(ModuleError) as e:
        FuelModule.load(path)
    assert str(e.value).startswith(f"{path}: ") and "mlp.safetensors" in str(e.value)
    assert "interrupted" in str(e.value)


def test_a_folder_as_ir_target_leaves_the_old_pair(tmp_path: Path) -> None:
    _mlp(0).save(tmp_path / "out.mlir")
    (tmp_path / "out.mlir").unlink()
    (tmp_path / "out.mlir").mkdir()
    before = _files(tmp_path)
    with pytest.raises(IsADirectoryError) as e:
        _mlp(1).save(tmp_path / "out.mlir")
    assert e.value.filename == str(tmp_path / "out.mlir")
    assert _files(tmp_path) == before  # weights untouched, no temp file left


def test_a_failed_ir_write_leaves_the_old_pair(tmp_path: Path, monkeypatch) -> None:
    old = _mlp(0)
    path = old.save(tmp_path / "mlp.mlir")
    before = _files(tmp_path)
    real_stage, staged = fsutil._stage, []

    def full_disk_on_ir(target: Path, data: bytes, mode: int | None = None) -> str:
        staged.append(target)
        if target.suffix == ".mlir":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))
        return real_stage(target, data, mode)

    monkeypatch.setattr(fsutil, "_stage", full_disk_on_ir)
    with pytest.raises(OSError, match="No space"):
        _mlp(1).save(path)
    assert [p.suffix for p in staged] == [".safetensors", ".mlir"]  # weights staged first
    assert _files(tmp_path) == before
    np.testing.assert_array_equal(FuelModule.load(path).weights["w"], old.weights["w"])


def test_ir_without_the_hash_still_loads_and_explicit_weights_skip_it(tmp_path: Path) -> None:
    path = _mlp(0).save(tmp_path / "mlp.mlir")
    other = _mlp(1).save(tmp_path / "other.mlir")
    old = tmp_path / "old.mlir"
    old.write_text(re.sub(r', fuel.weights_sha256 = "[0-9a-f]+"', "", path.read_text()))
    assert "sha256" not in old.read_text()
    assert FuelModule.load(old).weights["w"].shape == (4, 3)
    explicit = FuelModule.load(path, weights=str(other.with_suffix(".safetensors")))
    np.testing.assert_array_equal(explicit.weights["w"], FuelModule.load(other).weights["w"])


def test_bad_hash_attribute_and_non_utf8_ir(tmp_path: Path) -> None:
    path = _mlp(0).save(tmp_path / "mlp.mlir")
    path.write_text(re.sub(r'(sha256 = )"[0-9a-f]+"', r"\g<1>3 : i64", path.read_text()))
    with pytest.raises(ModuleError, match="must be a string"):
        FuelModule.load(path)
    path.write_bytes(b"builtin.module {\xff}\n")
    with pytest.raises(ModuleError, match=r"mlp\.mlir: not UTF-8 text \(byte 16"):
        FuelModule.load(path)


def test_save_without_weights_records_no_hash(tmp_path: Path) -> None:
    g = GraphBuilder()
    x = g.input("x", (2,))
    path = g.build(outputs={"y": g.tanh(x)}).save(tmp_path / "t.mlir")
    assert "sha256" not in path.read_text() and sorted(_files(tmp_path)) == ["t.mlir"]
    with pytest.raises(ModuleError, match="named like its weights"):
        _mlp(0).save(tmp_path / "w.safetensors")


def test_a_folder_as_weights_target_leaves_the_old_ir(tmp_path: Path) -> None:
    path = _mlp(0).save(tmp_path / "out.mlir")
    (tmp_path / "out.safetensors").unlink()
    (tmp_path / "out.safetensors").mkdir()
    before = _files(tmp_path)
    with pytest.raises(IsADirectoryError):
        _mlp(1).save(path)
    assert _files(tmp_path) == before
