"""S6: a small archive cannot make `load_bundle` inflate more than its manifest declares. The
manifest is read first (size-bounded), an undeclared member is refused unread, and a declared
member is read only when its header size is the declared one, a chunk at a time."""

from __future__ import annotations

import bz2
import time
import tracemalloc
from pathlib import Path

import pytest

from lowering.bundle import load_bundle
from runtime.bundle import BundleError
from tests.badinput.badinput_zip import (
    BZIP2,
    DEFLATED,
    GIB,
    Member,
    gib_of_zeros_deflated,
    stored,
    write_zip,
)

Files = dict[str, bytes]


@pytest.fixture
def good_files(bundle_files: Files) -> Files:
    return bundle_files


def refused_cheaply(path: Path, match: str) -> None:
    """`load_bundle` refuses `path` in well under a second, allocating < 32 MiB."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(BundleError, match=match) as e:
            load_bundle(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - start < 2.0 and peak < 32 << 20, peak
    assert str(e.value).startswith(str(path)) or f" {path}" in str(e.value)


def test_the_hand_built_archive_loads(good_files: dict[str, bytes], tmp_path: Path) -> None:
    assert load_bundle(write_zip(tmp_path / "ok.fuelbundle", stored(good_files))).target == "cpu"


def test_an_undeclared_bomb_is_never_inflated(good_files: Files, tmp_path: Path) -> None:
    bomb = Member("targets/cpu/zeros.bin", gib_of_zeros_deflated(), DEFLATED, GIB, 0)
    a = write_zip(tmp_path / "a.fuelbundle", [*stored(good_files), bomb])
    assert a.stat().st_size < 2 << 20
    refused_cheaply(a, r"'targets/cpu/zeros.bin' is not declared in the manifest")


def test_a_declared_member_of_another_size_is_never_inflated(
    good_files: Files, tmp_path: Path
) -> None:
    members = [m for m in stored(good_files) if m.name != "picker.json"]
    bomb = Member("picker.json", gib_of_zeros_deflated(), DEFLATED, GIB, 0)
    a = write_zip(tmp_path / "a.fuelbundle", [*members, bomb])
    refused_cheaply(a, rf"'picker.json' is {GIB} bytes, the manifest says \d+ \(truncated")


def test_a_header_that_understates_a_bomb_stops_at_the_declared_size(
    good_files: dict[str, bytes], tmp_path: Path
) -> None:
    """Headers say the declared size, the data inflates to 1 GiB: reading stops there."""
    members = [m for m in stored(good_files) if m.name != "picker.json"]
    size = len(good_files["picker.json"])
    bomb = Member("picker.json", gib_of_zeros_deflated(), DEFLATED, size, 0x1234)
    a = write_zip(tmp_path / "a.fuelbundle", [*members, bomb])
    refused_cheaply(a, "is corrupt or truncated: Bad CRC-32 for file 'picker.json'")


def test_a_huge_manifest_is_refused_before_it_is_read(good_files: Files, tmp_path: Path) -> None:
    members = [m for m in stored(good_files) if m.name != "manifest.json"]
    bomb = Member("manifest.json", gib_of_zeros_deflated(), DEFLATED, GIB, 0)
    refused_cheaply(
        write_zip(tmp_path / "a.fuelbundle", [*members, bomb]),
        "manifest.json is 1073741824 bytes, more than a manifest may be",
    )


def test_compression_without_a_bounded_inflater_is_refused(
    good_files: Files, tmp_path: Path
) -> None:
    """bzip2 inflates a whole read at once (no output bound in zipfile): refused unread."""
    members = [m for m in stored(good_files) if m.name != "picker.json"]
    data = good_files["picker.json"]
    packed = Member("picker.json", bz2.compress(data), BZIP2, len(data))
    refused_cheaply(
        write_zip(tmp_path / "a.fuelbundle", [*members, packed]),
        r"member 'picker.json' uses compression method 12",
    )
