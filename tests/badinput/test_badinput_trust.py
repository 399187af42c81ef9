"""Crafted bundles and IR files that try to make fuel run their code (issue 17, S1-S3, S5).

Each attack rewrites a good bundle the way its author could: new kernel text or binaries, every
size, sha256, revision and the manifest checksum recomputed, so the integrity checks pass. The
trust model (docs/bundles.md) must hold anyway: an unsigned bundle is data (its binaries are
never loaded, its kernel sources must be what this fuel generates from their ops), a signed
one runs its binaries only for a user who trusts the signing key, and `FUEL_NATIVE=0` runs no
native code. The attack payload writes a marker file; it must never appear.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.bundle import CHECKSUM_KEY, MANIFEST, SIGNATURE_FILE, manifest_checksum
from runtime.loaders.c import find_compiler

pytestmark = pytest.mark.skipif(find_compiler() is None, reason="needs a C compiler")

ROOT = Path(__file__).resolve().parents[2]
N = 9  # ops in the chain: enough for convert-fuel-to-c's cost model to generate one C kernel


def chain_ir(n: int = N) -> str:
    lines = ["func.func @main(%x: tensor<4x64xf32>, %b: tensor<64xf32>) -> tensor<4x64xf32> {"]
    lines.append("  %v0 = fuel.add %x, %b : tensor<4x64xf32>, tensor<64xf32> -> tensor<4x64xf32>")
    for i in range(1, n):
        op = ("mul", "add", "sub")[i % 3]
        lines.append(
            f"  %v{i} = fuel.{op} %v{i - 1}, %x : tensor<4x64xf32>, tensor<4x64xf32> "
            "-> tensor<4x64xf32>"
        )
    lines += [f"  func.return %v{n - 1} : tensor<4x64xf32>", "}"]
    return "\n".join(lines) + "\n"


def evil_c(symbol: str, marker: Path) -> str:
    return (
        "#include <stdio.h>\n"
        "__attribute__((constructor)) static void fuel_evil(void) {\n"
        f'  FILE *f = fopen("{marker}", "w"); if (f) fclose(f);\n'
        "}\n"
        f"void {symbol}(void **args) {{ (void)args; }}\n"
    )


def evil_triton(symbol: str, marker: Path) -> str:
    return (
        f"open({str(marker)!r}, 'w').close()\n\ndef {symbol}(in0, in1, out0, N, BLOCK):\n    pass\n"
    )


def evil_so(tmp: Path, marker: Path, symbol: str) -> bytes:
    """A shared library whose constructor writes `marker` (what a crafted bundle ships)."""
    src, so = tmp / "evil.c", tmp / "evil.so"
    src.write_text(evil_c(symbol, marker))
    cc = find_compiler()
    assert cc is not None
    subprocess.run([*cc, "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    return so.read_bytes()


def rehash(bundle: Path) -> None:
    """Recompute what the bundle's author controls: every file's size and sha256 (also in each
    kernel's file list), generated kernels' revisions, the manifest checksum."""
    m = json.loads((bundle / MANIFEST).read_text())
    digest = {}
    for name in m["files"]:
        data = (bundle / name).read_bytes()
        digest[name] = hashlib.sha256(data).hexdigest()
        m["files"][name] = {"size": len(data), "sha256": digest[name]}
    for t in m["targets"].values():
        for k in t.get("kernels", []):
            k["files"] = {n: digest[n] for n in k.get("files", {})}
            if k.get("meta", {}).get("kind") == "generated":
                py = next(n for n in k["files"] if n.endswith(".py"))
                k["revision"] = digest[py][:16]
    m[CHECKSUM_KEY] = manifest_checksum(m)
    (bundle / MANIFEST).write_text(json.dumps(m, indent=1, sort_keys=True))
    (bundle / SIGNATURE_FILE).unlink(missing_ok=True)


def rezip(bundle: Path, dest: Path) -> Path:
    """The bundle directory as a single-file archive (members stored, manifest first)."""
    names = sorted(p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file())
    with zipfile.ZipFile(dest, "w") as zf:
        for name in sorted(names, key=lambda n: (n != MANIFEST, n)):
            zf.write(bundle / name, name)
    return dest


def set_kernel_source(ir_file: Path, kernel: str, source: str) -> None:
    """Replace the `source` of kernel symbol `kernel` in the IR file (its body stays)."""
    from xdsl.dialects.builtin import StringAttr

    from runtime.module import FuelModule

    module = FuelModule.parse(ir_file.read_text(), str(ir_file))
    op = next(o for o in module.op.ops if getattr(o, "sym_name", None) == StringAttr(kernel))
    op.source = StringAttr(source)
    ir_file.write_text(str(module.op) + "\n")


def fuel(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from tools.fuel import main

    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two key pairs written like `fuel keygen` does: the user's and the attacker's."""
    from tools.fuel import main

    d = tmp_path_factory.mktemp("keys")
    for who in ("user", "attacker"):
        assert main(["keygen", str(d / who)]) == 0
    return {
        "user.key": d / "user.key",
        "user.pub": d / "user.pub",
        "attacker.key": d / "attacker.key",
        "attacker.pub": d / "attacker.pub",
    }


@pytest.fixture(scope="module")
def cpu_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A good cpu bundle with one generated C kernel (c_fused_0) and its shipped library."""
    from tools.fuel import main

    d = tmp_path_factory.mktemp("cpu")
    (d / "chain.mlir").write_text(chain_ir())
    assert main(["compile", str(d / "chain.mlir"), "-o", str(d / "b")]) == 0
    assert (d / "b/targets/cpu/c/c_fused_0.so").is_file()
    return d / "b"


@pytest.fixture(scope="module")
def gpu_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A good sm_90 bundle with one generated Triton kernel (fused_0)."""
    from tools.fuel import main

    d = tmp_path_factory.mktemp("gpu")
    (d / "chain.mlir").write_text(chain_ir())
    assert main(["compile", str(d / "chain.mlir"), "-o", str(d / "g"), "--target", "sm_90"]) == 0
    return d / "g"


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "PWNED"


def _copy(src: Path, tmp: Path) -> Path:
    dst = tmp / "crafted"
    shutil.copytree(src, dst)
    return dst


def _swap_library(b: Path, tmp: Path, marker: Path) -> None:
    (b / "targets/cpu/c/c_fused_0.so").write_bytes(evil_so(tmp, marker, "c_fused_0"))


def _swapped_library(src: Path, tmp: Path, marker: Path) -> Path:
    """A copy of bundle `src` whose C kernel library writes `marker` when loaded, rehashed."""
    b = _copy(src, tmp)
    _swap_library(b, tmp, marker)
    rehash(b)
    return b


def _swap_source(b: Path, tmp: Path, marker: Path) -> None:
    source = evil_c("c_fused_0", marker)
    set_kernel_source(b / "module.mlir", "c_fused_0", source)
    (b / "targets/cpu/c/c_fused_0.c").write_text(source)
    _swap_library(b, tmp, marker)


def _strip_body(b: Path, tmp: Path, marker: Path) -> None:
    """The hostile source and a kernel without a body: nothing to regenerate it from."""
    text = (b / "module.mlir").read_text()
    start = text.index("fuel.c_kernel")
    brace = text.index("{\n", start)
    end = text.index("\n  }\n", brace) + len("\n  }\n")
    (b / "module.mlir").write_text(text[:brace].rstrip() + "\n" + text[end:])
    _swap_source(b, tmp, marker)


# -- unsigned bundles are data ------------------------------------------------------------------


def test_a_swapped_library_is_never_loaded(
    cpu_bundle: Path, tmp_path: Path, marker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """S1: the shipped .so replaced (hashes recomputed): fuel builds the kernel from its checked
    source instead, so the run succeeds with the pristine bundle's result and no payload."""
    rc, want, _ = fuel("run", str(cpu_bundle), "--random-inputs", capsys=capsys)
    assert rc == 0
    b = _swapped_library(cpu_bundle, tmp_path, marker)
    rc, got, err = fuel("run", str(b), "--random-inputs", capsys=capsys)
    assert rc == 0, err
    assert got.splitlines()[0] == want.splitlines()[0]  # same output checksum
    assert not marker.exists()


@pytest.mark.parametrize("attack", [_swap_source, _strip_body], ids=["source", "no-body"])
@pytest.mark.parametrize("form", ["dir", "archive"])
def test_a_crafted_kernel_source_is_refused(
    attack: Callable[[Path, Path, Path], None],
    form: str,
    cpu_bundle: Path,
    tmp_path: Path,
    marker: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """S1: the IR's kernel source, its .c and .so replaced: the source is not what fuel
    generates from the kernel's ops (or there are no ops to generate it from): refused."""
    b = _copy(cpu_bundle, tmp_path)
    attack(b, tmp_path, marker)
    rehash(b)
    target = b if form == "dir" else rezip(b, tmp_path / "crafted.fuelbundle")
    rc, _, err = fuel("run", str(target), "--random-inputs", capsys=capsys)
    assert rc == 1 and "Traceback" not in err
    assert f"fuel: error: {target}" in err and "c_fused_0" in err
    assert not marker.exists()


def test_a_crafted_triton_source_is_refused(
    gpu_bundle: Path, tmp_path: Path, marker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """S3: the GPU target's Triton source replaced in its IR and its .py, the revision made
    to match: not what fuel generates from the kernel's ops, so never executed."""
    b = _copy(gpu_bundle, tmp_path)
    source = evil_triton("fused_0", marker)
    set_kernel_source(b / "targets/sm_90/module.mlir", "fused_0", source)
    (b / "targets/sm_90/fused_0/fused_0.py").write_text(source)
    rehash(b)
    rc, _, err = fuel("run", str(b), "--random-inputs", "--emulate", capsys=capsys)
    assert rc == 1 and "Traceback" not in err
    assert "fused_0" in err and "not what this fuel generates" in err
    assert not marker.exists()


def test_an_emulated_gpu_bundle_still_runs(
    gpu_bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = fuel("run", str(gpu_bundle), "--random-inputs", "--emulate", capsys=capsys)
    assert rc == 0, err
    assert out.startswith("out0: [4, 64] f32")


# -- signatures -----------------------------------------------------------------------------------


def _sign(b: Path, key: Path) -> None:
    from runtime.signing import load_private_key, sign

    record = sign((b / MANIFEST).read_bytes(), load_private_key(key))
    (b / SIGNATURE_FILE).write_text(json.dumps(record))


def test_a_signed_bundle_runs_its_library_for_whoever_trusts_the_key(
    cpu_bundle: Path,
    keys: dict[str, Path],
    tmp_path: Path,
    marker: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The trust is the user's to give: a bundle signed by a trusted key loads the library it
    ships (here one whose constructor writes the marker, as any shipped code could)."""
    b = _swapped_library(cpu_bundle, tmp_path, marker)
    _sign(b, keys["user.key"])
    # a fresh process: this one may have built the same kernel source already
    argv = ["run", str(b), "--random-inputs", "--trust", str(keys["user.pub"])]
    res = subprocess.run(
        [sys.executable, "-m", "tools.fuel", *argv], capture_output=True, text=True, cwd=ROOT
    )
    assert res.returncode == 0, res.stderr
    assert marker.exists()


@pytest.mark.parametrize("signer", ["attacker", "tampered"])
def test_a_signature_that_does_not_verify_is_refused(
    signer: str,
    cpu_bundle: Path,
    keys: dict[str, Path],
    tmp_path: Path,
    marker: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Signed by a key the user does not trust, or changed after signing: refused when the
    user asked for signatures (--trust), before anything is loaded."""
    b = _copy(cpu_bundle, tmp_path)
    if signer == "attacker":
        _swap_library(b, tmp_path, marker)
        rehash(b)
        _sign(b, keys["attacker.key"])
    else:
        _sign(b, keys["user.key"])
        _swap_library(b, tmp_path, marker)
        sig = (b / SIGNATURE_FILE).read_bytes()
        rehash(b)
        (b / SIGNATURE_FILE).write_bytes(sig)
    rc, _, err = fuel(
        "run", str(b), "--random-inputs", "--trust", str(keys["user.pub"]), capsys=capsys
    )
    assert rc == 1 and "Traceback" not in err
    assert SIGNATURE_FILE in err and str(b) in err
    assert not marker.exists()


def test_an_attackers_signature_grants_nothing_without_trust(
    cpu_bundle: Path,
    keys: dict[str, Path],
    tmp_path: Path,
    marker: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without --trust a signature is not even read: the bundle is data."""
    b = _swapped_library(cpu_bundle, tmp_path, marker)
    _sign(b, keys["attacker.key"])
    rc, _, err = fuel("run", str(b), "--random-inputs", capsys=capsys)
    assert rc == 0, err
    assert not marker.exists()


def test_fuel_compile_signs(
    keys: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "chain.mlir").write_text(chain_ir())
    out = tmp_path / "s.fuelbundle"
    rc, text, err = fuel(
        "compile",
        str(tmp_path / "chain.mlir"),
        "-o",
        str(out),
        "--sign",
        str(keys["user.key"]),
        capsys=capsys,
    )
    assert rc == 0, err
    assert "(signed)" in text
    rc, _, err = fuel(
        "run", str(out), "--random-inputs", "--trust", str(keys["user.pub"]), capsys=capsys
    )
    assert rc == 0, err
    rc, _, err = fuel(
        "run", str(out), "--random-inputs", "--trust", str(keys["attacker.pub"]), capsys=capsys
    )
    assert rc == 1 and "not among the 1 trusted" in err


# -- no compiler, FUEL_NATIVE=0 -------------------------------------------------------------------


def test_no_compiler_and_no_trust_is_refused(
    cpu_bundle: Path,
    tmp_path: Path,
    marker: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """S1/S2: where no compiler is, the shipped library would be the only way to run the
    kernel: refused unless signed by a trusted key, with the reason."""
    b = _swapped_library(cpu_bundle, tmp_path, marker)
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    rc, _, err = fuel("run", str(b), "--random-inputs", capsys=capsys)
    assert rc == 1 and "Traceback" not in err
    assert "no C compiler" in err and "--trust" in err
    assert not marker.exists()


def test_fuel_native_0_runs_no_native_code(
    cpu_bundle: Path,
    keys: dict[str, Path],
    tmp_path: Path,
    marker: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """S2: FUEL_NATIVE=0 means no native code at all, a signed, trusted bundle included."""
    b = _swapped_library(cpu_bundle, tmp_path, marker)
    _sign(b, keys["user.key"])
    monkeypatch.setenv("FUEL_NATIVE", "0")
    rc, _, err = fuel(
        "run", str(b), "--random-inputs", "--trust", str(keys["user.pub"]), capsys=capsys
    )
    assert rc == 1 and "Traceback" not in err
    assert "FUEL_NATIVE=0" in err
    assert not marker.exists()


# -- IR files (S5) ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lowered_ir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The chain converted to a C kernel (`fuel-opt -p convert-fuel-to-c`), as a file."""
    from tools.fuel_opt import main

    d = tmp_path_factory.mktemp("ir")
    (d / "chain.mlir").write_text(chain_ir())
    assert main([str(d / "chain.mlir"), "-p", "convert-fuel-to-c", "-o", str(d / "c.mlir")]) == 0
    return d / "c.mlir"


def test_generated_ir_runs(lowered_ir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = fuel("run", str(lowered_ir), "--random-inputs", capsys=capsys)
    assert rc == 0, err


@pytest.mark.parametrize("command", ["run", "compile"])
def test_ir_with_a_crafted_kernel_source_is_refused(
    command: str,
    lowered_ir: Path,
    tmp_path: Path,
    marker: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """S5: an `.mlir` is data too: a kernel source fuel would not generate from its ops is
    refused by `fuel run` and `fuel compile`, unless --allow-kernel-source."""
    ir = tmp_path / "x.mlir"
    shutil.copy(lowered_ir, ir)
    set_kernel_source(ir, "c_fused_0", evil_c("c_fused_0", marker))
    extra = ["--random-inputs"] if command == "run" else ["-o", str(tmp_path / "b")]
    rc, _, err = fuel(command, str(ir), *extra, capsys=capsys)
    assert rc == 1 and "Traceback" not in err
    assert f"fuel: error: {ir}" in err and "--allow-kernel-source" in err
    assert not marker.exists()
    rc, _, err = fuel(command, str(ir), *extra, "--allow-kernel-source", capsys=capsys)
    assert rc == 0, err
    if command == "run":
        assert marker.exists()  # the user said the file is trusted like a program
    else:  # compiled (not loaded): the bundle carries the source, which its loaders refuse
        assert not marker.exists()
        rc, _, err = fuel("run", str(tmp_path / "b"), "--random-inputs", capsys=capsys)
        assert rc == 1 and "not what this fuel generates" in err
        assert not marker.exists()


def test_fuel_opt_bundle_target_refuses_a_crafted_kernel_source(
    lowered_ir: Path, tmp_path: Path, marker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fuel-opt -t fuel-bundle` compiles what `fuel compile` compiles: the same IR is refused
    (fuel-opt has no --allow-kernel-source)."""
    from tools.fuel_opt import main

    ir = tmp_path / "x.mlir"
    shutil.copy(lowered_ir, ir)
    set_kernel_source(ir, "c_fused_0", evil_c("c_fused_0", marker))
    assert main([str(ir), "-t", "fuel-bundle", "-o", str(tmp_path / "b")]) == 1
    err = capsys.readouterr().err
    assert "-t fuel-bundle: fuel.c_kernel @c_fused_0: its source is not what" in err
    assert "refused" in err and "Traceback" not in err
    assert not marker.exists() and not (tmp_path / "b").exists()
    assert main([str(lowered_ir), "-t", "fuel-bundle", "-o", str(tmp_path / "ok")]) == 0


def test_every_test_docs_bundles_cites_exists() -> None:
    """docs/bundles.md backs each sentence with a test name: each one must exist."""
    import re

    doc = (ROOT / "docs" / "bundles.md").read_text()
    cited = set(re.findall(r"`(test_\w+)`", doc))
    assert len(cited) >= 10
    sources = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    missing = sorted(n for n in cited if f"def {n}(" not in sources)
    assert not missing, missing
