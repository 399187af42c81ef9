"""Every way a bundle can be broken is refused by `load_bundle` with its own message."""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from lowering.bundle import load_bundle, write_bundle
from runtime.binding_table import KernelBindingTable
from runtime.bundle import BundleError
from runtime.kernels import global_bindings
from runtime.module import FuelModule
from tests.runtime.bundle_helpers import MM_SOURCE, resign, use_fake_gpu_backend

"""matmul f32's default sibling: vendor BLAS where torch is installed (kernels/torch_blas.py)."""

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    module = FuelModule.load(ROOT / "examples" / "decoder_block.mlir")
    return write_bundle(module, tmp_path_factory.mktemp("pristine") / "b")


@pytest.fixture
def bundle(pristine: Path, tmp_path: Path) -> Path:
    """A fresh copy of a good bundle directory to break."""
    return Path(shutil.copytree(pristine, tmp_path / "b"))


def _zip(src: Path, dest: Path, extra: dict[str, bytes] | None = None) -> Path:
    with zipfile.ZipFile(dest, "w") as zf:
        for f in sorted(src.rglob("*")):
            if f.is_file():
                zf.writestr(f.relative_to(src).as_posix(), f.read_bytes())
        for name, data in (extra or {}).items():
            zf.writestr(name, data)
    return dest


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def refused(path: Path, match: str) -> None:
    with pytest.raises(BundleError, match=match) as e:
        load_bundle(path)
    assert "\n" not in str(e.value)


def test_the_pristine_bundle_loads(pristine: Path) -> None:
    assert load_bundle(pristine).target == "cpu"


@pytest.mark.parametrize("name", ["weights.safetensors", "module.mlir", "picker.json"])
def test_flipped_byte_in_a_file(bundle: Path, name: str) -> None:
    _flip(bundle / name, len((bundle / name).read_bytes()) // 2)
    refused(bundle, rf"'{name}' is corrupt \(sha256 differs")


def test_flipped_byte_in_the_manifest(bundle: Path) -> None:
    text = (bundle / "manifest.json").read_text()
    (bundle / "manifest.json").write_text(text.replace('"entry": "main"', '"entry": "maio"'))
    refused(bundle, "manifest.json is corrupt \\(its checksum")


def test_manifest_not_json(bundle: Path) -> None:
    (bundle / "manifest.json").write_text('{"format": "fuel.bundle",')
    refused(bundle, "manifest.json is not valid JSON")
    (bundle / "manifest.json").write_bytes(b"\xff\xfe")
    refused(bundle, "manifest.json is not valid JSON")
    (bundle / "manifest.json").write_text("[1, 2]")
    refused(bundle, "not a fuel bundle manifest")


def test_wrong_format_version(bundle: Path) -> None:
    resign(bundle, lambda m: m.update(format_version=2))
    refused(bundle, "format version 2 is not supported")


def test_truncated_file(bundle: Path) -> None:
    w = bundle / "weights.safetensors"
    w.write_bytes(w.read_bytes()[:-100])
    refused(bundle, "'weights.safetensors' is .* bytes, the manifest says .* \\(truncated")


def test_missing_file(bundle: Path) -> None:
    (bundle / "picker.json").unlink()
    refused(bundle, "'picker.json' is missing")
    (bundle / "manifest.json").unlink()
    refused(bundle, "not a fuel bundle: it has no manifest.json")


def test_undeclared_files_are_refused(bundle: Path) -> None:
    (bundle / "targets" / "cpu").mkdir(parents=True, exist_ok=True)
    (bundle / "targets" / "cpu" / "extra.so").write_bytes(b"\x7fELF")
    refused(bundle, "'targets/cpu/extra.so' is not declared in the manifest")


def test_links_in_a_directory_are_refused(bundle: Path) -> None:
    (bundle / "link").symlink_to("/etc/passwd")
    refused(bundle, "'link' is a link or special file")


def test_unknown_target(bundle: Path) -> None:
    def add(m: dict) -> None:
        m["targets"]["tpu_v5"] = {"backend": "tpu", "fingerprint": {}, "kernels": []}

    resign(bundle, add)
    refused(bundle, "target 'tpu_v5' is unknown to this fuel")


def test_revision_mismatch(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This fuel's matmul changed since the bundle was built (its revision hash moved)."""
    patched = KernelBindingTable()
    for (op, dtypes, be), e in global_bindings().iter_entries():
        moved = op == "matmul" and e.kernel_source == MM_SOURCE and dtypes[0] == "f32"
        patched.register(
            op,
            dtypes,
            be,
            e.kernel,
            caps=e.caps,
            precision=e.precision,
            kernel_source=e.kernel_source,
            direct=e.direct,
            revision=e.revision_hash ^ 1 if moved else e.revision_hash,
        )
    monkeypatch.setattr("runtime.bundle.global_bindings", lambda: patched)  # the loader's own name
    kernels = json.loads((bundle / "manifest.json").read_text())["targets"]["cpu"]["kernels"]
    rev = next(k["revision"] for k in kernels if k["id"] == f"matmul[f32,f32,f32]@cpu/{MM_SOURCE}")
    now = f"{int(rev, 16) ^ 1:016x}"
    refused(
        bundle,
        rf"kernel matmul\[f32,f32,f32\]@cpu/{MM_SOURCE} revision mismatch: the bundle "
        rf"was built with revision {rev}, this fuel has {now}",
    )


def test_ir_using_an_undeclared_kernel(bundle: Path) -> None:
    """A consistently re-signed bundle whose IR names a kernel the manifest leaves out."""

    m = json.loads((bundle / "manifest.json").read_text())
    gone = next(
        k["id"]
        for k in reversed(m["targets"]["cpu"]["kernels"])
        if k.get("meta", {}).get("kind") != "native"
    )  # a stamped kernel

    def drop(m: dict) -> None:
        ks = m["targets"]["cpu"]["kernels"]
        m["targets"]["cpu"]["kernels"] = [k for k in ks if k["id"] != gone]

    resign(bundle, drop)
    refused(bundle, rf"'fuel\.\w+' uses kernel {re.escape(gone)}, which the manifest")


def test_truncated_archive(bundle: Path, tmp_path: Path) -> None:
    a = _zip(bundle, tmp_path / "a.fuelbundle")
    load_bundle(a)
    data = a.read_bytes()
    for cut in (len(data) - 10, len(data) // 2, 3):
        a.write_bytes(data[:cut])
        refused(a, "is corrupt or truncated")


def test_flipped_byte_inside_an_archive_member(bundle: Path, tmp_path: Path) -> None:
    a = _zip(bundle, tmp_path / "a.fuelbundle")
    data = a.read_bytes()
    at = data.index(b"builtin.module")  # inside module.mlir's stored bytes
    a.write_bytes(data[:at] + b"c" + data[at + 1 :])
    refused(a, "corrupt")


@pytest.mark.parametrize("name", ["../evil.py", "/etc/evil", "targets/../../evil", "a\\b"])
def test_path_traversal_in_an_archive(bundle: Path, tmp_path: Path, name: str) -> None:
    a = _zip(bundle, tmp_path / "a.fuelbundle", {name: b"print('pwned')"})
    refused(a, "unsafe member name")


def test_sm90_only_bundle_on_a_machine_without_that_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_fake_gpu_backend(monkeypatch)
    monkeypatch.setattr("runtime.bundle.machine_gpu_targets", lambda: set())
    module = FuelModule.load(ROOT / "examples" / "decoder_block.mlir")
    p = write_bundle(module, tmp_path / "gpu", ["sm_90"])
    refused(
        p,
        "no target in this bundle runs on this machine \\(sm_90 needs a sm_90 GPU; "
        "this machine has no CUDA GPU\\); recompile with --target cpu",
    )
    monkeypatch.setattr("runtime.bundle.machine_gpu_targets", lambda: {"sm_80"})
    refused(p, "sm_90 needs a sm_90 GPU; this machine has sm_80")


def test_flipped_byte_in_a_kernel_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_fake_gpu_backend(monkeypatch)
    monkeypatch.setattr("runtime.bundle.machine_gpu_targets", lambda: set())
    module = FuelModule.load(ROOT / "examples" / "decoder_block.mlir")
    p = write_bundle(module, tmp_path / "two", ["cpu", "sm_90"], {"cpu": {"optimize": "0"}})
    load_bundle(p)
    _flip(p / "targets" / "sm_90" / "matmul.cubin", 7)
    refused(p, "'targets/sm_90/matmul.cubin' is corrupt")
