"""A checksummed but malformed manifest (or picker record) is one `BundleError` naming the
bundle: wrong types where the loader expects objects, lists or sizes; JSON nested 100 000 deep;
a 100 000-digit number; a picker record that is not JSON."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lowering.bundle import load_bundle
from runtime.bundle import MANIFEST, BundleError
from tests.runtime.bundle_helpers import resign


@pytest.fixture
def bundle(bundle_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(bundle_dir, tmp_path / "b"))


def refused(path: Path, match: str) -> None:
    with pytest.raises(BundleError, match=match) as e:
        load_bundle(path)
    assert str(e.value).startswith(f"{path}: ") and "\n" not in str(e.value)


def _kernels(m: dict[str, Any]) -> list[Any]:
    return m["targets"]["cpu"]["kernels"]


EDITS: dict[str, tuple[Callable[[dict[str, Any]], object], str]] = {
    "meta-a-string": (lambda m: _kernels(m)[0].update(meta="c"), "'kernels' must list objects"),
    "kernel-a-number": (lambda m: _kernels(m).append(7), "'kernels' must list objects"),
    "kernels-a-dict": (lambda m: m["targets"]["cpu"].update(kernels={}), "'kernels' must"),
    "kernel-files-not-hashes": (
        lambda m: _kernels(m)[0].update(files={"a": 1}),
        "'kernels' must list objects",
    ),
    "target-a-list": (lambda m: m["targets"].update(cpu=[]), "target 'cpu' must be an object"),
    "fingerprint-a-string": (
        lambda m: m["targets"]["cpu"].update(fingerprint="x"),
        "target 'cpu' must be an object with an object 'fingerprint'",
    ),
    "weights-a-number": (lambda m: m.update(weights=3), "'weights' must be a file name"),
    "size-a-string": (
        lambda m: m["files"]["picker.json"].update(size="12"),
        r"files\['picker.json'\] needs an integer 'size'",
    ),
    "size-a-bool": (
        lambda m: m["files"]["picker.json"].update(size=True),
        r"files\['picker.json'\] needs an integer 'size'",
    ),
    "file-entry-a-list": (lambda m: m["files"].update({"picker.json": []}), "needs an integer"),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_malformed_manifest_fields(bundle: Path, case: str) -> None:
    edit, match = EDITS[case]
    _resign_raw(bundle, edit)
    refused(bundle, f"malformed {MANIFEST}: .*{match}")


def _resign_raw(bundle: Path, edit: Callable[[dict[str, Any]], object]) -> None:
    """Edit the manifest and fix only its checksum (the edited file entry stays as edited)."""
    from runtime.bundle import CHECKSUM_KEY, manifest_checksum

    m = json.loads((bundle / MANIFEST).read_text())
    edit(m)
    m[CHECKSUM_KEY] = manifest_checksum(m)
    (bundle / MANIFEST).write_text(json.dumps(m))


def test_deep_json_and_huge_numbers_are_refused(bundle: Path) -> None:
    text = (bundle / MANIFEST).read_text()
    deep = "[" * 100_000 + "]" * 100_000
    (bundle / MANIFEST).write_text(text.replace("{", '{"deep": ' + deep + ",", 1))
    refused(bundle, r"manifest.json is not valid JSON \(nested deeper than 32\)")
    (bundle / MANIFEST).write_text(text.replace("{", '{"n": ' + "1" * 100_000 + ",", 1))
    refused(bundle, r"manifest.json is not valid JSON \(an integer of 100000 digits")
    (bundle / MANIFEST).write_text(text.replace("{", '{"s": "' + "[{" * 100 + '",', 1))
    refused(bundle, "manifest.json is corrupt")  # brackets inside strings are not nesting
    (bundle / MANIFEST).write_text('{"s": "' + '\\"' * 2_000_000)  # 4 MB, never closed
    start = time.perf_counter()
    refused(bundle, "manifest.json is not valid JSON \\(Unterminated string")
    assert time.perf_counter() - start < 1.0


def test_a_picker_record_that_is_not_json(bundle: Path) -> None:
    (bundle / "picker.json").write_bytes(b"\xff\xfe{")
    resign(bundle)
    refused(bundle, "picker.json is not valid JSON")
    (bundle / "picker.json").write_text("[" * 5000 + "]" * 5000)
    resign(bundle)
    refused(bundle, r"picker.json is not valid JSON \(nested deeper")


def _paths(o: object, pre: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Every key path of a JSON value (the first two items of each list)."""
    out = [pre] if pre else []
    if isinstance(o, dict):
        for k, v in o.items():
            out += _paths(v, (*pre, k))
    elif isinstance(o, list):
        for i, v in enumerate(o[:2]):
            out += _paths(v, (*pre, i))
    return out


def test_every_manifest_field_of_the_wrong_type(bundle: Path) -> None:
    """Each field of a good manifest replaced by null and an object, re-checksummed:
    the load (and the executor) either succeeds or raises BundleError, nothing else."""
    from runtime.bundle import CHECKSUM_KEY, manifest_checksum

    good = json.loads((bundle / MANIFEST).read_text())
    escaped = []
    for path in _paths(good):
        if path[0] == CHECKSUM_KEY:
            continue
        for value in (None, {}):
            m = json.loads(json.dumps(good))
            parent = m
            for k in path[:-1]:
                parent = parent[k]
            parent[path[-1]] = value
            m[CHECKSUM_KEY] = manifest_checksum(m)
            (bundle / MANIFEST).write_text(json.dumps(m))
            try:
                load_bundle(bundle).executor()
            except BundleError:
                pass
            except Exception as e:  # noqa: BLE001 - what this test looks for
                escaped.append((path, value, f"{type(e).__name__}: {e}"))
    assert not escaped, escaped[:5]
