"""Loading a kernel bundle (`fuel compile`'s output): verify everything, then run it.

A bundle is a directory or a single-file archive (a zip, members stored uncompressed) with
the same members (layout: `lowering/bundle.py`). `load_bundle` refuses, with one readable
`BundleError`, anything it cannot vouch for, in this order:

1. the container: not a bundle, a truncated or corrupt zip, unsafe member names (`../x`,
   absolute paths, backslashes), a compression other than stored or deflated, links or
   special files in a directory; only the member list is read here;
2. the manifest, read first: over `MAX_MANIFEST_BYTES`, not UTF-8 JSON within the depth and
   digit bounds (`load_json`), a different format or format version, a self-checksum that does
   not match its content, a field of the wrong type (`_schema_error`);
3. the files: any file present but undeclared (refused unread: a stray kernel is never
   loaded, a bomb never inflated), any declared file missing, any header size differing from
   the manifest (checked before the member is read, which then stops at that size), any
   sha256 differing;
4. the targets: an unknown target, or no target this machine can run; every target is
   checked. The one run by default is the best runnable: an `sm_XY` target when this machine
   has that GPU, else any GPU target when emulation is asked for (`emulate=True` or
   `FUEL_EMULATE_GPU=1`), else "cpu"; with none of these the load fails early;
5. the kernels, under the trust model of docs/bundles.md (`Trust`): every CPU kernel is
   resolved by id + revision from the binding table and a different revision is refused,
   naming the kernel and both revisions. Generated kernels (`fuel.c_kernel`,
   `fuel.triton_kernel`) must hold the source this fuel generates from their bodies
   (`SourceCheck`, which `lowering.bundle.load_bundle` supplies), and C ones are built here;
   only a bundle whose `manifest.sig` verifies with a key the caller trusts may run the
   libraries it ships (a C kernel's .so, refused if built for another machine architecture;
   its copy of the native library, which must be built from this fuel's source).
   `FUEL_NATIVE=0` refuses both kinds of native code. For a GPU target: every
   `fuel.triton_kernel` of its lowered IR must be a declared generated kernel whose verified
   `.py` file holds exactly the IR's source at the declared revision, and every
   `fuel.library_call` a declared library kernel that this fuel's Triton registry has at the
   declared kernel source and revision;
6. the IR and weights: parsed, verified, every weight present with its declared type, and
   every CPU kernel stamp in the IR declared by the manifest.

`LoadedBundle.executor()` runs the module against a binding table holding only the declared
kernels, so nothing undeclared can be dispatched.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import sys
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from fuel_dialect.attrs import KERNEL_ATTR, KernelRefAttr
from fuel_dialect.ops_triton import LibraryCallOp, TritonKernelOp
from runtime import knobs, native
from runtime.binding_table import KernelBindingTable, digest64
from runtime.compiled import kernel_id, kernel_ops, library_kernel_id
from runtime.contracts.verify import HandKernel
from runtime.devices import DeviceUnavailable, TorchDevice
from runtime.executor import placed_device
from runtime.fsutil import atomic_write_bytes
from runtime.kernels import global_bindings
from runtime.kernels.cpu.contracts import gate_hand_kernels
from runtime.kernels.cpu.native import register_native
from runtime.knobs import EMULATE_ENV
from runtime.loaders.c import c_cache_dir, find_compiler, register_prebuilt
from runtime.module import FuelModule, ModuleError
from runtime.shape_specialize import make_executor
from runtime.signing import PublicKey, SigningError, verify
from runtime.topology import cuda_device_archs
from runtime.weights import WeightsError
from runtime.weights import weights_from_bytes as decode

FORMAT = "fuel.bundle"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
MODULE_FILE = "module.mlir"
WEIGHTS_FILE = "weights.safetensors"
PICKER_FILE = "picker.json"
TARGETS_DIR = "targets"
CHECKSUM_KEY = "manifest_sha256"
SIGNATURE_FILE = "manifest.sig"
"""The Ed25519 signature of manifest.json's bytes (`runtime.signing`); optional, undeclared
(it signs the manifest, so the manifest cannot list it)."""
MAX_SIGNATURE_BYTES = 4096
ARCHIVE_SUFFIXES = (".fuelbundle", ".zip")
_GPU_TARGET = re.compile(r"sm_\d{2,3}a?")


def emulation_requested(emulate: bool | None = None) -> bool:
    """`emulate` when given, else whether `FUEL_EMULATE_GPU=1`."""
    return knobs.emulate_gpu() if emulate is None else emulate


class BundleError(Exception):
    """A bundle that cannot be written or loaded; the message says which file and why."""


SourceCheck = Callable[[Any, str], None]
"""`check(root_op, where)`: every generated kernel (`fuel.c_kernel`, `fuel.triton_kernel`) under
`root_op` holds the source this fuel's code generator writes from its body, else `BundleError`
naming `where`. The runtime has no code generator: `lowering.bundle.load_bundle` passes one."""
Finisher = Callable[[Mapping[str, str], KernelBindingTable], Callable[[Any], Any]]
"""`finisher(options, table)`: the function lowering a shape's specialised clone of a module
with dim symbols (`lowering.cpu.specialize.shape_finisher`, given by the compiler's loader)."""


# -- shared with the writer ------------------------------------------------------------------


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_json(obj: Any) -> bytes:
    """The bytes the manifest checksum covers: sorted keys, no whitespace."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def manifest_checksum(manifest: Mapping[str, Any]) -> str:
    return sha256(canonical_json({k: v for k, v in manifest.items() if k != CHECKSUM_KEY}))


def safe_member(name: str) -> bool:
    """A bundle-relative POSIX path that stays inside the bundle."""
    p = PurePosixPath(name)
    return (
        bool(name)
        and "\\" not in name
        and not p.is_absolute()
        and ".." not in p.parts
        and "." not in p.parts
        and str(p) == name
        and not name.startswith("/")
    )


def target_fingerprint(target: str) -> dict[str, str]:
    """What a target needs from a machine: the CPU's byte order (numpy kernels are portable
    Python), or the exact GPU architecture an AOT binary was built for."""
    if target == "cpu":
        import platform

        return {
            "kind": "cpu",
            "byteorder": sys.byteorder,
            "machine": platform.machine(),
            "numpy": np.__version__,
        }
    if _GPU_TARGET.fullmatch(target):
        return {"kind": "cuda", "arch": target}
    raise BundleError(f"unknown target {target!r} (known: cpu, sm_XY such as sm_90)")


def machine_gpu_targets() -> set[str]:
    """`sm_XY` of every CUDA device this machine has (empty without a driver or torch)."""
    return cuda_device_archs()


def incompatibility(target: str, fingerprint: Mapping[str, Any]) -> str | None:
    """Why this machine cannot run `target`'s code, or None when it can."""
    if target == "cpu":
        order = fingerprint.get("byteorder")
        return None if order == sys.byteorder else f"built for a {order}-endian CPU"
    if _GPU_TARGET.fullmatch(target):
        have = sorted(machine_gpu_targets())
        if target.removesuffix("a") in have:  # sm_90a: sm_90 with its arch-specific features
            return None
        return f"needs a {target} GPU; this machine has {', '.join(have) or 'no CUDA GPU'}"
    raise BundleError(f"bundle target {target!r} is unknown to this fuel (known: cpu, sm_XY)")


# -- the container ---------------------------------------------------------------------------


def is_archive_path(path: Path) -> bool:
    return path.suffix.lower() in ARCHIVE_SUFFIXES


def is_bundle(path: str | os.PathLike[str]) -> bool:
    """A directory, a `.fuelbundle`/`.zip` path, or any zip file: `fuel run` treats it as a
    bundle (and refuses it with one message if it is not a good one)."""
    p = Path(path)
    if p.is_dir():
        return True
    if is_archive_path(p):
        return True
    if not p.is_file():  # a FIFO would block the open below; a device is never a bundle
        return False
    try:
        with p.open("rb") as f:
            return f.read(4) == b"PK\x03\x04"
    except OSError:
        return False


class _Container:
    """The members of a bundle (directory or archive) by bundle-relative path, with the size
    each one's header states; `read` returns one member, never more than that size."""

    sizes: dict[str, int]

    def read(self, name: str) -> bytes:
        raise NotImplementedError


class _DirContainer(_Container):
    def __init__(self, root: Path) -> None:
        self.root, self.sizes = root, {}
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            for name in [*dirnames, *filenames]:
                full = Path(dirpath, name)
                st = full.lstat()
                rel = full.relative_to(root).as_posix()
                if stat.S_ISLNK(st.st_mode) or not (
                    stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)
                ):
                    raise BundleError(f"bundle {root}: '{rel}' is a link or special file")
                if stat.S_ISREG(st.st_mode):
                    self.sizes[rel] = st.st_size

    def read(self, name: str) -> bytes:
        with (self.root / name).open("rb") as f:
            data = _read_at_most(f, self.sizes[name])
        if len(data) != self.sizes[name]:
            raise BundleError(f"bundle {self.root}: '{name}' changed while it was read")
        return data


class _ZipContainer(_Container):
    def __init__(self, path: Path, zf: zipfile.ZipFile) -> None:
        self.path, self.zf, self.sizes = path, zf, {}
        self.infos: dict[str, zipfile.ZipInfo] = {}
        for info in zf.infolist():
            name = info.filename
            if not safe_member(name.rstrip("/")):
                raise BundleError(f"bundle archive {path}: unsafe member name {name!r}")
            if name in self.infos:
                raise BundleError(f"bundle archive {path}: member {name!r} appears twice")
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise BundleError(
                    f"bundle archive {path}: member {name!r} uses compression "
                    f"method {info.compress_type} (fuel reads stored or "
                    "deflated members)"
                )
            self.infos[name] = info
            if not info.is_dir():
                self.sizes[name] = info.file_size

    def read(self, name: str) -> bytes:
        # in chunks: ZipFile.read inflates a whole member at once, however big it turns out
        with self.zf.open(self.infos[name]) as f:
            return _read_at_most(f, self.sizes[name])


_CHUNK = 1 << 20


def _read_at_most(f: Any, size: int) -> bytes:
    """Up to `size` bytes of `f`, read (and inflated) a chunk at a time."""
    parts, left = [], size
    while left > 0:
        part = f.read(min(left, _CHUNK))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


@contextmanager
def _open_container(path: Path) -> Iterator[_Container]:
    """The bundle at `path`, its member list read (nothing inflated yet); every failure to
    read it, while open, is one `BundleError`."""
    try:
        if path.is_dir():
            if not (path / MANIFEST).is_file():
                raise BundleError(f"{path} is not a fuel bundle: it has no {MANIFEST}")
            yield _DirContainer(path)
            return
        if not path.exists():
            raise BundleError(f"no such bundle: {path}")
        with zipfile.ZipFile(path) as zf:
            yield _ZipContainer(path, zf)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as e:
        raise BundleError(f"bundle archive {path} is corrupt or truncated: {e}") from None
    except (ValueError, NotImplementedError) as e:  # bad headers, unsupported compression
        raise BundleError(f"bundle archive {path} is corrupt: {e}") from None
    except OSError as e:
        raise BundleError(f"cannot read bundle {path}: {e.strerror or e}") from None


def read_container(path: Path) -> dict[str, bytes]:
    """Every file of a bundle directory or archive, by bundle-relative path (for a bundle this
    fuel just wrote; `load_bundle` reads only what the manifest declares)."""
    with _open_container(path) as c:
        return {name: c.read(name) for name in c.sizes}


def read_declared(path: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(manifest, files): the manifest is read first (size-bounded, checked); then a member it
    does not declare is refused unread, and each declared member is read only after its header
    size matches the declared size, so no member is inflated beyond what the manifest says."""
    with _open_container(path) as c:
        if MANIFEST not in c.sizes:
            raise BundleError(f"{path} is not a fuel bundle: it has no {MANIFEST}")
        if c.sizes[MANIFEST] > MAX_MANIFEST_BYTES:
            raise BundleError(
                f"{path}: {MANIFEST} is {c.sizes[MANIFEST]} bytes, more than a "
                f"manifest may be ({MAX_MANIFEST_BYTES})"
            )
        data = c.read(MANIFEST)
        manifest = _manifest(path, data)
        declared: Mapping[str, Any] = manifest["files"]
        for name in sorted(c.sizes):
            if name not in (MANIFEST, SIGNATURE_FILE) and name not in declared:
                raise BundleError(f"{path}: '{name}' is not declared in the manifest (refused)")
        files = {MANIFEST: data}
        if SIGNATURE_FILE in c.sizes:
            if c.sizes[SIGNATURE_FILE] > MAX_SIGNATURE_BYTES:
                raise BundleError(f"{path}: {SIGNATURE_FILE} is too large to be a signature")
            files[SIGNATURE_FILE] = c.read(SIGNATURE_FILE)
        for name, want in sorted(declared.items()):
            if not safe_member(name):
                raise BundleError(f"{path}: the manifest declares an unsafe path {name!r}")
            if name not in c.sizes:
                raise BundleError(f"{path}: '{name}' is missing")
            if c.sizes[name] != want["size"]:
                raise BundleError(
                    f"{path}: '{name}' is {c.sizes[name]} bytes, the manifest "
                    f"says {want['size']} (truncated or replaced)"
                )
            files[name] = c.read(name)
    return manifest, files


# -- the manifest and the files ---------------------------------------------------------------

MAX_MANIFEST_BYTES = 16 << 20
"""A manifest (or picker record) larger than this is refused before it is read."""
MAX_JSON_DEPTH = 32
"""Deepest nesting of arrays and objects in a bundle's JSON (a manifest needs 5)."""
MAX_JSON_DIGITS = 40
"""Longest integer literal in a bundle's JSON (sizes and counts need 20)."""


def _big_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_JSON_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits (at most {MAX_JSON_DIGITS})")
    return int(text)


def _depth(obj: Any) -> int:
    """How deeply arrays and objects nest in a parsed JSON value (`[]` is 1), iteratively."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        o, d = stack.pop()
        items = o.values() if isinstance(o, dict) else o if isinstance(o, list) else None
        if items is not None:
            deepest = max(deepest, d)
            stack.extend((v, d + 1) for v in items)
    return deepest


def load_json(data: bytes, where: str) -> Any:
    """Parse bundle JSON with bounds: UTF-8, nesting at most `MAX_JSON_DEPTH`, integers at
    most `MAX_JSON_DIGITS` digits; anything else is a `BundleError` naming `where`. (json's C
    scanner raises RecursionError past Python's recursion limit, before using the stack up.)"""
    deep = f"{where} is not valid JSON (nested deeper than {MAX_JSON_DEPTH})"
    try:
        obj = json.loads(data.decode("utf-8"), parse_int=_big_int)
    except RecursionError:
        raise BundleError(deep) from None
    except (UnicodeDecodeError, ValueError) as e:
        raise BundleError(f"{where} is not valid JSON ({e})") from None
    if _depth(obj) > MAX_JSON_DEPTH:
        raise BundleError(deep)
    return obj


def _manifest(path: Path, data: bytes) -> dict[str, Any]:
    m = load_json(data, f"{path}: {MANIFEST}")
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise BundleError(f"{path}: {MANIFEST} is not a fuel bundle manifest")
    version = m.get("format_version")
    if version != FORMAT_VERSION:
        raise BundleError(
            f"{path}: bundle format version {version!r} is not supported "
            f"(this fuel reads version {FORMAT_VERSION}); recompile it"
        )
    if m.get(CHECKSUM_KEY) != manifest_checksum(m):
        raise BundleError(f"{path}: {MANIFEST} is corrupt (its checksum does not match)")
    for key, kind in (("files", dict), ("targets", dict), ("signature", dict)):
        if not isinstance(m.get(key), kind):
            raise BundleError(f"{path}: {MANIFEST} lacks '{key}'")
    bad = _schema_error(m)
    if bad:
        raise BundleError(f"{path}: malformed {MANIFEST}: {bad}")
    return m


def _schema_error(m: Mapping[str, Any]) -> str | None:
    """What in a (checksummed) manifest has the wrong type for the loader, or None."""
    for name, f in m["files"].items():
        if not (
            isinstance(f, dict) and _is_size(f.get("size")) and isinstance(f.get("sha256"), str)
        ):
            return f"files['{name}'] needs an integer 'size' and a string 'sha256'"
    for key in ("module", "weights", "picker"):
        if not isinstance(m.get(key), str | None):
            return f"'{key}' must be a file name"
    for target, t in m["targets"].items():
        if not isinstance(t, dict) or not isinstance(t.get("fingerprint", {}), dict):
            return f"target {target!r} must be an object with an object 'fingerprint'"
        if not isinstance(t.get("module"), str | None):
            return f"target {target!r}: 'module' must be a file name"
        kernels = t.get("kernels", [])
        if not isinstance(kernels, list) or not all(map(_is_kernel, kernels)):
            return (
                f"target {target!r}: 'kernels' must list objects, each with a string "
                "'id', an object 'meta' and 'files' mapping names to sha256"
            )
    return None


def _is_size(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _is_kernel(k: object) -> bool:
    if not isinstance(k, dict) or not isinstance(k.get("id"), str):
        return False
    files = k.get("files", {})
    return (
        isinstance(k.get("meta", {}), dict)
        and isinstance(files, dict)
        and all(isinstance(v, str) for v in files.values())
    )


def _check_files(path: Path, manifest: Mapping[str, Any], files: Mapping[str, bytes]) -> None:
    declared: Mapping[str, Any] = manifest["files"]
    for name in sorted(files):
        if name not in (MANIFEST, SIGNATURE_FILE) and name not in declared:
            raise BundleError(f"{path}: '{name}' is not declared in the manifest (refused)")
    for name, want in sorted(declared.items()):
        if not safe_member(name):
            raise BundleError(f"{path}: the manifest declares an unsafe path {name!r}")
        if name not in files:
            raise BundleError(f"{path}: '{name}' is missing")
        data = files[name]
        if len(data) != want.get("size"):
            raise BundleError(
                f"{path}: '{name}' is {len(data)} bytes, the manifest says "
                f"{want.get('size')} (truncated or replaced)"
            )
        if sha256(data) != want.get("sha256"):
            raise BundleError(f"{path}: '{name}' is corrupt (sha256 differs from the manifest)")
    for target, t in manifest["targets"].items():
        if t.get("module") is not None and t["module"] not in declared:
            raise BundleError(
                f"{path}: target {target} names '{t['module']}', which the "
                "manifest does not declare"
            )
        for k in t.get("kernels", ()):
            for name, digest in k.get("files", {}).items():
                if name not in declared:
                    raise BundleError(
                        f"{path}: kernel {k.get('id')} ({target}) names "
                        f"'{name}', which the manifest does not declare"
                    )
                if declared[name].get("sha256") != digest:
                    raise BundleError(
                        f"{path}: kernel {k.get('id')} ({target}) expects "
                        f"another '{name}' (sha256 differs)"
                    )


def read_verified(path: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(manifest, files) of the bundle at `path`, read as `read_declared` reads them, every
    file's size and sha256 checked against the manifest (steps 1-3 of the module doc);
    nothing is loaded or compiled."""
    manifest, files = read_declared(path)
    try:
        _check_files(path, manifest, files)
    except (AttributeError, KeyError, TypeError) as e:  # a well-signed but malformed manifest
        raise BundleError(f"{path}: malformed {MANIFEST} ({type(e).__name__}: {e})") from None
    return manifest, files


def _pick_target(path: Path, manifest: Mapping[str, Any], emulate: bool) -> str:
    """The best target this machine runs: a GPU target whose GPU is here, else (`emulate`) the
    first GPU target, else "cpu"; every target is checked, so an unknown one is refused."""
    targets: Mapping[str, Any] = manifest["targets"]
    if not targets:
        raise BundleError(f"{path}: the bundle has no targets")
    reasons = {t: incompatibility(t, v.get("fingerprint", {})) for t, v in targets.items()}
    gpus = [t for t in targets if t != "cpu"]
    for t in gpus:
        if reasons[t] is None:
            return t
    if emulate and gpus:
        return gpus[0]
    if "cpu" in targets and reasons["cpu"] is None:
        return "cpu"
    why = "; ".join(f"{t} {r}" for t, r in reasons.items())
    raise BundleError(
        f"{path}: no target in this bundle runs on this machine ({why}); "
        "recompile with --target cpu, or emulate the GPU target (fuel run "
        f"--emulate, {EMULATE_ENV}=1)"
    )


# -- trust --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trust:
    """What loading a bundle may run beyond its data (see docs/bundles.md).

    By default nothing: a generated kernel's source must be what this fuel generates from the
    kernel's ops (`check_sources`), and it is built here; fuel's native library is this fuel's
    own build. A bundle signed by a key the user trusts (`signed_by`: the key id) may also run
    the binaries it ships (its C kernels' libraries, its copy of the native library), e.g. on
    a machine without a C compiler. `FUEL_NATIVE=0` allows no native code at all."""

    signed_by: str | None = None
    check_sources: SourceCheck | None = None

    def check_generated(self, path: Path, module: Any, where: str) -> None:
        """Refuse generated kernels whose source this fuel would not write (unless signed)."""
        generated = ("fuel.c_kernel", "fuel.triton_kernel")
        if self.signed_by is not None or not any(o.name in generated for o in module.op.walk()):
            return
        if self.check_sources is None:
            raise BundleError(
                f"{path}: the bundle has generated kernels and this loader cannot regenerate "
                "them to check their source (load it with lowering.bundle.load_bundle, as "
                "`fuel run` does), and it is not signed by a key you trust"
            )
        self.check_sources(module.op, where)


def bundle_trust(
    path: Path,
    files: Mapping[str, bytes],
    trusted: Sequence[PublicKey],
    check_sources: SourceCheck | None,
) -> Trust:
    """The trust a load grants: `signed_by` when `trusted` keys are given and the bundle's
    signature verifies with one of them; a signature that does not verify (tampered, or by a
    key not trusted) is refused. Without trusted keys a signature is not even read."""
    sig = files.get(SIGNATURE_FILE)
    if not trusted or sig is None:
        return Trust(None, check_sources)
    record = load_json(sig, f"{path}: {SIGNATURE_FILE}")
    try:
        who = verify(files[MANIFEST], record, trusted)
    except SigningError as e:
        raise BundleError(f"{path}: {SIGNATURE_FILE}: {e}; refused") from None
    return Trust(who, check_sources)


def _no_native_code(path: Path, what: str) -> BundleError:
    return BundleError(
        f"{path}: the bundle runs {what}, native code, which FUEL_NATIVE=0 forbids; "
        "recompile it with FUEL_NATIVE=0 (it then uses fuel's numpy kernels)"
    )


# -- kernels, module, weights -----------------------------------------------------------------


def _resolve_kernels(path: Path, kernels: list[dict[str, Any]]) -> KernelBindingTable:
    """A table of exactly the declared CPU kernels, each at its declared revision."""
    table = KernelBindingTable()
    _add_cpu_kernels(path, kernels, table)
    table.finalize()
    return table.freeze()


def _add_cpu_kernels(path: Path, kernels: list[dict[str, Any]], table: KernelBindingTable) -> None:
    """Register the declared CPU kernels into `table`, each at its declared revision."""
    full = global_bindings()
    for k in kernels:
        meta, kid = k.get("meta", {}), k.get("id")
        if meta.get("kind") in ("c", "native"):
            continue  # a generated C kernel or the native library: see _install_c_kernels
        try:
            op, dtypes, source = meta["op"], tuple(meta["dtypes"]), meta["source"]
            want = int(k["revision"], 16)
            if not all(isinstance(v, str) for v in (op, source, *dtypes)):
                raise TypeError
        except (KeyError, TypeError, ValueError):
            raise BundleError(f"{path}: kernel {kid!r} has a malformed manifest entry") from None
        entry = next(
            (e for e in full.lookup_alternatives(op, dtypes, "cpu") if e.kernel_source == source),
            None,
        )
        if entry is None and source.startswith("native"):  # no compiler here: the bundle's copy
            entry = next(
                (
                    e
                    for e in _native_table().lookup_alternatives(op, dtypes, "cpu")
                    if e.kernel_source == source
                ),
                None,
            )
        if entry is None:
            raise BundleError(f"{path}: kernel {kid} is not in this fuel's binding table")
        if entry.revision_hash != want:
            raise BundleError(
                f"{path}: kernel {kid} revision mismatch: the bundle was built with revision "
                f"{want:016x}, this fuel has {entry.revision_hash:016x}; recompile the bundle"
            )
        table.register_entry(op, dtypes, "cpu", entry)


_NATIVE_TABLE: list[KernelBindingTable] = []


def _native_table() -> KernelBindingTable:
    """The global table plus fuel's native kernels, registered although no C compiler is here
    (a signed bundle ships the library: `_install_native`), their claims gated by the
    hand-registered ledger as where they are registered normally."""
    if not _NATIVE_TABLE:
        base, full = global_bindings(), global_bindings().copy()
        register_native(full, force=True)  # its costs read the base kernels'
        have = {(key, e.kernel_source) for key, e in base.iter_entries()}
        kernels = [
            HandKernel(*key, e)
            for key, e in full.iter_entries()
            if (key, e.kernel_source) not in have
        ]
        table = base.copy()
        for k, entry in zip(kernels, gate_hand_kernels(kernels), strict=True):  # ledger-gated
            table.register_entry(k.op, k.dtypes, k.backend, entry)
        _NATIVE_TABLE.append(table)
    return _NATIVE_TABLE[0]


# -- a GPU target: its lowered IR, generated and library kernels --------------------------------

_TRITON_TABLE: list[KernelBindingTable] = []


def _triton_table() -> KernelBindingTable:
    """This fuel's Triton registry (`runtime.kernels.triton.registry`), built once."""
    if not _TRITON_TABLE:
        # lazy: imports torch and triton
        from runtime.kernels.triton.registry import triton_kernel_table

        _TRITON_TABLE.append(triton_kernel_table())
    return _TRITON_TABLE[0]


def _gpu_target(
    path: Path, manifest: Mapping[str, Any], files: Mapping[str, bytes], target: str, trust: Trust
) -> tuple[Any, KernelBindingTable]:
    """(lowered module with the bundle's weights, table of exactly its declared kernels); its
    generated kernels' sources checked (`Trust.check_generated`)."""
    t = manifest["targets"][target]
    if not t.get("module"):
        raise BundleError(f"{path}: target {target} has no lowered IR to run")
    module = _module(path, manifest, files, t["module"])
    trust.check_generated(path, module, f"{path}/{t['module']}")
    kernels = t.get("kernels", [])
    table = KernelBindingTable()
    host = [k for k in kernels if k.get("backend") == "cpu"]
    _add_cpu_kernels(path, host, table)
    _check_stamps(path, module, {k["id"] for k in host})
    declared = {k.get("id"): k for k in kernels if k.get("backend") != "cpu"}
    _check_generated(path, target, module, declared, files)
    _add_library_kernels(path, target, module, declared, table)
    table.finalize()
    return module, table.freeze()


def _declared(
    path: Path, target: str, kid: str, declared: Mapping[str, Any], kind: str, what: str
) -> dict[str, Any]:
    k = declared.get(kid)
    if k is None or k.get("meta", {}).get("kind") != kind:
        raise BundleError(
            f"{path}: the {target} IR {what} {kid}, which the manifest does not "
            f"declare as a {kind} kernel"
        )
    return k


def _revision(path: Path, kid: str, k: Mapping[str, Any]) -> int:
    try:
        return int(k["revision"], 16)
    except (KeyError, TypeError, ValueError):
        raise BundleError(f"{path}: kernel {kid!r} has a malformed manifest entry") from None


def _check_generated(
    path: Path, target: str, module: Any, declared: Mapping[str, Any], files: Mapping[str, bytes]
) -> None:
    """Every launched generated kernel is declared, and its verified `.py` file is exactly the
    source the IR holds (which the executor runs), at the declared revision."""
    for op in module.op.ops:
        if not isinstance(op, TritonKernelOp):
            continue
        kid, source = op.sym_name.data, op.source.data.encode()
        k = _declared(path, target, kid, declared, "generated", "launches")
        name = next((n for n in k.get("files", {}) if n.endswith(f"/{kid}.py")), None)
        if name is None or name not in files:
            raise BundleError(f"{path}: generated kernel {kid} ({target}) lacks its Triton source")
        if files[name] != source:
            raise BundleError(
                f"{path}: generated kernel {kid}: '{name}' differs from the source "
                f"in the {target} IR (tampered?); refused"
            )
        want, have = _revision(path, kid, k), digest64(source)
        if want != have:
            raise BundleError(
                f"{path}: generated kernel {kid} revision mismatch: declared "
                f"{want:016x}, its source is {have:016x}"
            )


def _add_library_kernels(
    path: Path, target: str, module: Any, declared: Mapping[str, Any], table: KernelBindingTable
) -> None:
    """Register, at the declared kernel source and revision, the Triton registry's kernel of
    every library call (in the registry's sibling order, so an unstamped call gets the
    first); a key or revision this fuel lacks is refused."""
    full = _triton_table()
    chosen: dict[tuple[str, tuple[str, ...], str], set[int]] = {}
    for op in module.op.walk():
        if not isinstance(op, LibraryCallOp):
            continue
        kid, key = library_kernel_id(op), op.key()
        k = _declared(path, target, kid, declared, "library", "calls")
        meta, want = k["meta"], _revision(path, kid, k)
        if meta.get("key") != [key[0], list(key[1]), key[2]]:
            raise BundleError(
                f"{path}: library kernel {kid}: the manifest declares key "
                f"{meta.get('key')}, the IR calls {list(key)}"
            )
        source = meta.get("source")
        alts = full.lookup_alternatives(*key)
        entry = next((e for e in alts if source in (None, e.kernel_source)), None)
        if entry is None:
            raise BundleError(
                f"{path}: library kernel {kid} ({key[0]} [{', '.join(key[1])}] on {key[2]}"
                f"{', source ' + source if source else ''}) is not in this fuel's Triton "
                "registry; recompile the bundle with this fuel"
            )
        if entry.revision_hash != want:
            raise BundleError(
                f"{path}: library kernel {kid} revision mismatch: the bundle was built with "
                f"revision {want:016x}, this fuel has {entry.revision_hash:016x}; recompile"
            )
        chosen.setdefault(key, set()).add(id(entry))
    for key, ids in chosen.items():
        for e in full.lookup_alternatives(*key):
            if id(e) in ids:
                table.register_entry(key[0], key[1], key[2], e)


def _bundle_weights(data: bytes, where: str) -> dict[str, np.ndarray]:
    """Tensors of a safetensors blob; a corrupt blob is a BundleError."""
    try:
        return decode(data, where)
    except WeightsError as e:
        raise BundleError(str(e)) from None


def _module(
    path: Path,
    manifest: Mapping[str, Any],
    files: Mapping[str, bytes],  # noqa: ANN202
    name: str = MODULE_FILE,
):
    where = f"{path}/{name}"
    try:
        module = FuelModule.parse(files[name].decode("utf-8"), where)
        wname = manifest.get("weights")
        if wname:
            module.weights = _bundle_weights(files[wname], f"{path}/{wname}")
        module.check_weights()
    except (ModuleError, WeightsError, UnicodeDecodeError, KeyError) as e:
        raise BundleError(f"{path}: bad module: {e}") from None
    return module


def _check_stamps(path: Path, module: Any, declared: set[str]) -> None:
    for op in kernel_ops(module):
        stamp = op.attributes.get(KERNEL_ATTR)
        if not isinstance(stamp, KernelRefAttr):
            raise BundleError(f"{path}: '{op.name}' has no kernel stamp (not a compiled module)")
        if stamp.backend.data == "cpu" and kernel_id(stamp) not in declared:
            raise BundleError(
                f"{path}: '{op.name}' uses kernel {kernel_id(stamp)}, which the "
                "manifest does not declare"
            )


def _shipped_library(
    path: Path, what: str, k: Mapping[str, Any], files: Mapping[str, bytes]
) -> tuple[str, Path]:
    """(C source, cached library file) of a compiled library the bundle ships for kernel
    entry `k` (a generated C kernel, or fuel's native library): built for this machine, both
    files present (their hashes are verified with the rest); the .so is copied, content-
    addressed, into the C kernel cache."""
    import platform

    built, here = k["meta"].get("machine"), platform.machine()
    if built != here:
        raise BundleError(
            f"{path}: {what} was built for {built}; this machine is {here}: "
            "recompile the bundle here"
        )
    names = sorted(k.get("files", {}))
    src = next((files[n] for n in names if n.endswith(".c")), None)
    lib = next((files[n] for n in names if n.endswith(".so")), None)
    if src is None or lib is None:
        raise BundleError(f"{path}: {what} lacks its .c source or .so library")
    so = c_cache_dir() / f"bundle_{sha256(lib)[:24]}.so"
    if not so.is_file() or sha256(so.read_bytes()) != sha256(lib):
        atomic_write_bytes(so, lib)
    return src.decode(), so


def _install_c_kernels(
    path: Path, kernels: list[dict[str, Any]], files: Mapping[str, bytes], module: Any, trust: Trust
) -> None:
    """Generated C kernels: their sources checked (`Trust.check_generated`) and built here by
    the executor, or, for a signed bundle, each (hash-verified) shipped library registered for
    its source so the executor loads it instead of compiling (refused if built for another
    machine)."""
    c_kernels = [k for k in kernels if k.get("meta", {}).get("kind") == "c"]
    sources = {op.source.data for op in module.op.walk() if op.name == "fuel.c_kernel"}
    if not c_kernels and not sources:
        return
    if not knobs.native_enabled():
        raise _no_native_code(path, "generated C kernels")
    trust.check_generated(path, module, f"{path}/{MODULE_FILE}")
    if trust.signed_by is None:
        if find_compiler() is None:
            raise BundleError(
                f"{path}: no C compiler here to build the bundle's generated C kernels; the "
                "libraries it ships are loaded only from a bundle signed by a key you trust "
                "(fuel run --trust KEYFILE), or recompile it here with codegen=none"
            )
        return  # the executor compiles each checked source into fuel's cache
    have = set()
    for k in c_kernels:
        src, so = _shipped_library(path, f"C kernel {k.get('id')}", k, files)
        register_prebuilt(src, so)
        have.add(src)
    if sources - have:
        raise BundleError(
            f"{path}: the module has a fuel.c_kernel without a library in the "
            "bundle (not a compiled module)"
        )


def _install_native(
    path: Path, kernels: list[dict[str, Any]], files: Mapping[str, bytes], trust: Trust
) -> None:
    """fuel's native library: this fuel's own build where a C compiler is; else, for a bundle
    signed by a key the user trusts, its (hash-verified) shipped copy, which must be built
    from exactly this fuel's source, for this machine; else refused."""
    k = next((k for k in kernels if k.get("meta", {}).get("kind") == "native"), None)
    if k is None:
        return
    if not knobs.native_enabled():
        raise _no_native_code(path, "fuel's native kernels")
    if native.enabled():
        return  # compiled (and cached) here from the same source
    if trust.signed_by is None:
        raise BundleError(
            f"{path}: the bundle uses fuel's native kernels and no C compiler is here to build "
            "them; the copy it ships is loaded only from a bundle signed by a key you trust "
            "(fuel run --trust KEYFILE)"
        )
    src, so = _shipped_library(path, "the native library", k, files)
    if src != native.source():
        raise BundleError(
            f"{path}: the bundle's native library was built from another fuel's "
            "source; recompile the bundle with this fuel"
        )
    native.install_prebuilt(so)


@dataclass
class LoadedBundle:
    """A verified bundle: its module (IR + weights), manifest, picker record and the table of
    the kernels it declares for the target it runs by default (`target`)."""

    path: Path
    manifest: dict[str, Any]
    module: Any  # FuelModule
    target: str
    table: KernelBindingTable
    picker: dict[str, Any] = field(default_factory=dict)
    files: Mapping[str, bytes] = field(default_factory=dict, repr=False)
    """Every verified file, by bundle path (other targets are resolved from these bytes)."""
    emulate: bool = False
    """Run GPU targets emulated where this machine lacks their GPU (`load_bundle`'s)."""
    trust: Trust = field(default_factory=Trust)
    """What this load lets the bundle run (`Trust`): the signer, the source check."""
    _gpu: dict[str, tuple[Any, KernelBindingTable]] = field(default_factory=dict, repr=False)
    finisher: Finisher | None = None
    """Lowers a specialised clone of a module with dim symbols for its shape on the cpu target
    (`runtime.shape_specialize`), made from the target's options and declared kernels."""

    @property
    def kernel_ids(self) -> list[str]:
        return [k["id"] for k in self.manifest["targets"][self.target].get("kernels", ())]

    def lowered(self, target: str) -> tuple[Any, KernelBindingTable]:
        """A GPU target's verified lowered module and the table of its declared kernels."""
        if target not in self._gpu:
            self._gpu[target] = _gpu_target(
                self.path, self.manifest, self.files, target, self.trust
            )
        return self._gpu[target]

    def executor(  # noqa: ANN201
        self, target: str | None = None, emulate: bool | None = None, function: str | None = None
    ):
        """An `Executor` for `target` (default: `self.target`, or the first GPU target when
        `emulate`) running `function` (default: the entry), dispatching only the declared
        kernels.

        A GPU target runs its lowered IR (`runtime.lowered.place_lowered`: launches on
        `cuda:0`, copies in and out). On a machine with that GPU its generated kernels are
        JIT-compiled by Triton from the bundle's verified sources (the stored cubins are not
        loaded: Triton 3.9 has no public launcher for a foreign cubin) and library calls run
        the registry kernels at their declared revisions. Without that GPU it runs only when
        emulation is asked for (`emulate=True`, `FUEL_EMULATE_GPU=1`): CPU tensors and the
        Triton interpreter, which needs `TRITON_INTERPRET=1` before triton is imported.
        """
        emulate = self.emulate or emulation_requested(emulate)
        gpus = [t for t in self.manifest["targets"] if t != "cpu"]
        target = target or (gpus[0] if emulate and gpus and self.target == "cpu" else self.target)
        if target not in self.manifest["targets"]:
            raise BundleError(
                f"{self.path}: no target {target!r} in this bundle (it has: "
                f"{', '.join(self.manifest['targets'])})"
            )
        if target == "cpu":
            return self._cpu_executor(function)
        return self._gpu_executor(target, emulate, function)

    def _gpu_executor(self, target: str, emulate: bool, function: str | None):  # noqa: ANN202
        reason = incompatibility(target, self.manifest["targets"][target].get("fingerprint", {}))
        if reason is not None and not emulate:
            raise BundleError(
                f"{self.path}: target {target} {reason}; emulate it (fuel run "
                f"--emulate, emulate=True or {EMULATE_ENV}=1)"
            )
        module, table = self.lowered(target)
        devices = {}
        if emulate:
            names = {"cuda:0"} | {
                d for op in module.op.walk() if (d := _placement(op)) and d.startswith("cuda:")
            }
            try:
                devices = {d: TorchDevice(d, emulate=True) for d in sorted(names)}
            except DeviceUnavailable as e:
                raise BundleError(f"{self.path}: cannot emulate {target}: {e}") from None
        return make_executor(module, function, table=table, devices=devices)

    def _cpu_executor(self, function: str | None):  # noqa: ANN202
        """The CPU `Executor` over the module, dispatching only the declared kernels."""
        if self.target != "cpu" and "cpu" not in self._gpu:  # resolved on first use
            self._gpu["cpu"] = (
                self.module,
                _cpu_target(self.path, self.manifest, self.files, self.module, self.trust),
            )
        table = self.table if self.target == "cpu" else self._gpu["cpu"][1]
        for op in kernel_ops(self.module):
            stamp = op.attributes[KERNEL_ATTR]
            assert isinstance(stamp, KernelRefAttr)
            if stamp.backend.data != "cpu":
                raise BundleError(
                    f"{self.path}: '{op.name}' runs on backend "
                    f"'{stamp.backend.data}', which the CPU executor cannot "
                    "drive; compile for this machine's topology"
                )
        finish = None
        if self.finisher is not None:
            finish = self.finisher(self.manifest["targets"]["cpu"].get("options", {}), table)
        return make_executor(self.module, function, finish=finish, table=table)


def _cpu_target(
    path: Path, manifest: Mapping[str, Any], files: Mapping[str, bytes], module: Any, trust: Trust
) -> KernelBindingTable:
    """The table of the cpu target's declared kernels, its C kernels installed, its stamps
    checked against `module` (module.mlir)."""
    kernels = manifest["targets"]["cpu"].get("kernels", [])
    _install_native(path, kernels, files, trust)
    table = _resolve_kernels(path, kernels)
    _install_c_kernels(path, kernels, files, module, trust)
    _check_stamps(path, module, {k["id"] for k in kernels})
    return table


def _placement(op: Any) -> str | None:
    return placed_device(op)


def load_bundle(
    path: str | os.PathLike[str],
    emulate: bool | None = None,
    *,
    trusted: Sequence[PublicKey] = (),
    check_sources: SourceCheck | None = None,
    finisher: Finisher | None = None,
) -> LoadedBundle:
    """Read and verify a bundle directory or archive (see the module doc); `BundleError`.
    `emulate` (default: `FUEL_EMULATE_GPU=1`) lets a GPU target this machine lacks be chosen
    and run emulated. `trusted`: public keys whose signature lets the bundle run the binaries
    it ships; `check_sources`: regenerates and compares generated kernels' sources (without
    it, a bundle with generated kernels loads only when signed by a trusted key); see
    `Trust`. `finisher(options, table)`: lowers each shape's specialised clone of a module
    with dim symbols under the cpu target's `options`, picking among the `table` it declares
    (`LoadedBundle.finisher`; without it a shape runs its clone as specialised)."""
    p = Path(path)
    emulate = emulation_requested(emulate)
    manifest, files = read_verified(p)
    try:
        chosen = _pick_target(p, manifest, emulate)
    except (AttributeError, KeyError, TypeError) as e:  # a well-signed but malformed manifest
        raise BundleError(f"{p}: malformed {MANIFEST} ({type(e).__name__}: {e})") from None
    trust = bundle_trust(p, files, trusted, check_sources)
    for name in (MODULE_FILE, PICKER_FILE):
        if name not in manifest["files"]:
            raise BundleError(f"{p}: the manifest does not declare '{name}'")
    module = _module(p, manifest, files)
    gpu: dict[str, tuple[Any, KernelBindingTable]] = {}
    if chosen == "cpu":
        table = _cpu_target(p, manifest, files, module, trust)
    else:
        gpu[chosen] = _gpu_target(p, manifest, files, chosen, trust)
        table = gpu[chosen][1]
    picker = load_json(files[PICKER_FILE], f"{p}: {PICKER_FILE}")
    return LoadedBundle(
        p, manifest, module, chosen, table, picker, files, emulate, trust, gpu, finisher
    )
