"""Shared by the command-line bad-input tests: a scratch folder that writes the files a case
needs, and the one assertion every refused command makes."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.badinput.badinput_modules import small_module
from tests.badinput.badinput_zip import stored, write_zip

GOOD_IR = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = fuel.exp %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
"""


@dataclass
class Scratch:
    """A case's folder: each method writes one kind of file there and returns its path."""

    root: Path
    bundle_dir: Path
    bundle_files: dict[str, bytes]

    def write(self, name: str, data: bytes | str) -> str:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return str(path)

    def folder(self, name: str) -> str:
        (self.root / name).mkdir(parents=True, exist_ok=True)
        return str(self.root / name)

    def module(self, name: str = "m.mlir") -> str:
        """The small matmul + tanh module saved with its weights."""
        return str(small_module().save(self.root / name))

    def bundle(self, name: str = "b") -> str:
        """A copy of the session's good bundle directory."""
        return str(shutil.copytree(self.bundle_dir, self.root / name))

    def archive(self, name: str = "a.fuelbundle", drop: str = "") -> str:
        """The good bundle as an archive, without the member `drop`."""
        files = {k: v for k, v in self.bundle_files.items() if k != drop}
        return str(write_zip(self.root / name, stored(files)))


def assert_refused(rc: int, err: str, names: list[str], prog: str = "fuel") -> None:
    """Exit 1, one `PROG: error:` message first on stderr, no traceback, every name in it."""
    assert rc == 1, (rc, err)
    assert err.startswith(f"{prog}: error: "), err
    assert "Traceback" not in err, err
    for name in names:
        assert name in err, (name, err)
