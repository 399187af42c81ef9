"""Atomic file writes: readers see the old file or the new one, never a half-written one;
and `read_regular_file`, which reads only a regular file (never a device or a pipe).

`atomic_write_files` extends this to a set of files written together (an IR file and its
weights): every file is staged and synced first, so a failure to write any of them (a full
disk, a read-only folder, a folder where a file should go) leaves every old file in place; only
then are they renamed over their targets, in the order given.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: renames are not serialized between writers
    fcntl = None  # type: ignore[assignment]


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to a temp file beside `path`, fsync it, then rename it over `path`."""
    atomic_write_files([(path, data)])


def atomic_write_files(
    files: Sequence[tuple[str | os.PathLike[str], bytes]],
    modes: Sequence[int | None] = (),
) -> None:
    """Stage every `(path, data)` in a synced temp file beside its path, check that no target
    is a folder, then rename each over its target in order. `modes[i]`, where given and not
    None, is the permission bits of `files[i]` (0o600 for a secret: set before a byte is
    written); otherwise a file gets 0o666 less the umask. A failure before the renames leaves
    every target untouched; the renames themselves are each atomic, so a crash between two of
    them leaves some targets new and the rest old (a reader that must see a consistent set
    checks a hash the last file records, as `FuelModule.load` does). Writers of several files
    into one folder take turns for their renames (an exclusive `flock` on the folder), so two
    concurrent saves of a pair end with one writer's pair, not a mix."""
    staged: list[tuple[str, Path]] = []
    try:
        for i, (path, data) in enumerate(files):
            target = Path(path)
            if target.is_dir():
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(target))
            mode = modes[i] if i < len(modes) else None
            staged.append((_stage(target, data, mode), target))
        with _renaming(staged[-1][1].parent if len(staged) > 1 else None):
            for tmp, target in staged:
                os.replace(tmp, target)
        for parent in {t.parent for _, t in staged}:
            _fsync_dir(parent)
    except BaseException:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def _renaming(folder: Path | None) -> Iterator[None]:
    """Hold an exclusive lock on `folder` (where flock exists and the folder opens)."""
    fd = None
    if folder is not None and fcntl is not None:
        try:
            fd = os.open(folder, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            if fd is not None:
                os.close(fd)
            fd = None
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock


def _stage(target: Path, data: bytes, mode: int | None = None) -> str:
    """A temp file beside `target` holding `data`, synced to disk; its path. `mode`: its
    permission bits (None: 0o666 less the umask)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        # mkstemp creates 0600; give the file the mode asked for, else normal modes
        os.chmod(tmp, 0o666 & ~_umask() if mode is None else mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def _fsync_dir(path: Path) -> None:
    """Make the renames in `path` durable; a filesystem that cannot sync a folder is fine."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode())


def read_regular_file(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the regular file at `path`; an `OSError` (strerror "not a regular file")
    for a device, a pipe or a folder, without reading it (/dev/zero never ends, and a FIFO is
    opened without waiting for a writer)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        return f.read()
