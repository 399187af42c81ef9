"""`DumpDir`: one numbered file per compile stage, as IREE's `--dump-compilation-phases-to`.

    with instrumented(DumpDir("dump/")):
        write_bundle(module, "m.fuelbundle")

writes, in the order the stages finish, `00-load.mlir` (what `fuel compile` read),
`01-fuel-fix-dtypes.mlir` ... `09-picked.mlir` ... (`fuel-optimize`'s stages), `cpu-optimize`,
`cpu-stamp`, `cpu-codegen` (the IR with its generated `fuel.c_kernel`s), `NN-cpu-artifacts/`
(each kernel's text files: generated C, Triton sources, PTX; `artifacts.json` lists every
kernel with its revision and files), `NN-picker-record.json` (the bundle's `picker.json`). A
stage that made nothing showable (a timing-only stage, a list of compiled launches) gets no
file. Every product kind maps to files in `render`; a stage nesting others is dumped after
them (its IR is then its last child's).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from lowering.backend import KernelArtifact
from passes.instrument import Stage, StageObserver


def module_of(product: Any) -> ModuleOp | None:
    """The IR a stage product holds: a `ModuleOp`, or a `FuelModule`'s; else None."""
    op = getattr(product, "op", product)
    return op if isinstance(op, ModuleOp) else None


def _inside(rel: str) -> bool:
    """A relative path that stays inside the dump folder."""
    p = PurePosixPath(rel)
    return bool(rel) and not p.is_absolute() and ".." not in p.parts and "\\" not in rel


def _is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _artifact_files(artifacts: list[KernelArtifact]) -> dict[str, bytes]:
    """Each artifact's text files (sources, PTX) under `/`, and an index of all of them."""
    out: dict[str, bytes] = {}
    index = []
    for a in artifacts:
        binary = []
        for rel, data in sorted(a.files.items()):
            if not (_is_text(data) and _inside(rel)):
                binary.append(rel)  # .so, .cubin: listed, not copied
                continue
            out[f"/{rel}"] = bytes(data)
        entry = {"id": a.kernel_id, "backend": a.backend, "revision": f"{a.revision:016x}"}
        index.append({**entry, "files": sorted(a.files), "binary": binary, "meta": dict(a.meta)})
    out["/artifacts.json"] = (json.dumps(index, indent=1, default=str) + "\n").encode()
    return out


def render(product: Any) -> dict[str, bytes] | None:
    """A stage product as files: {suffix of the numbered name: bytes} (`.mlir` for IR, `.json`
    for a record, `/<path>` for a folder of kernel files); None when there is nothing to show."""
    module = module_of(product)
    if module is not None:
        return {".mlir": (str(module) + "\n").encode()}
    if isinstance(product, Mapping):
        return {".json": (json.dumps(product, indent=1, default=str) + "\n").encode()}
    if (
        isinstance(product, list)
        and product
        and all(isinstance(a, KernelArtifact) for a in product)
    ):
        return _artifact_files(product)
    return None


@dataclass
class DumpDir(StageObserver):
    """Writes each finished stage's product under `root` as `NN-<stage>` (see the module doc)."""

    root: Path
    count: int = 0
    written: list[Path] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self.root.mkdir(parents=True, exist_ok=True)

    def finished(self, stage: Stage) -> None:
        files = render(stage.product)
        if files is None:
            return
        base = f"{self.count:02d}-{re.sub(r'[^A-Za-z0-9_.-]', '_', stage.name)}"
        self.count += 1
        for suffix, data in files.items():
            path = self.root / (base + suffix)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            self.written.append(path)
