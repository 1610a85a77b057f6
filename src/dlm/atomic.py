"""The one way `dlm` writes a file that must survive a crash.

`atomic_writer` (streamed) and `atomic_write_bytes` (one buffer) write to a unique temporary name in the destination folder,
flushes and fsyncs it, renames it over the destination (atomic on POSIX and on
Windows for same-volume paths), then fsyncs the folder so the rename itself is
durable. A reader sees the old file or the new one, never a partial write. A failure
(disk full, Ctrl-C) removes the temporary file and leaves the destination untouched.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from dlm.canonical import canonical_json

DEFAULT_FILE_MODE = 0o644


def fsync_dir(path: Path) -> None:
    """fsync a directory so renames inside it are durable (no-op where unsupported)."""
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


@contextmanager
def atomic_writer(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Stream a file that appears at `path` whole or not at all.

    Yields a binary file open on a temporary name in the destination folder; on a clean
    exit it is flushed, fsynced, given the mode of the file it replaces (0644 for a new
    one: readable by others, as any data file the user writes), renamed over `path`,
    and the folder fsynced. On any exception (disk full, Ctrl-C) the temporary file is
    removed and `path` is untouched.

    Raises:
        OSError: the folder is not writable or the disk is full; `path` is unchanged.
    """
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(dest.stat().st_mode)
    except FileNotFoundError:
        mode = DEFAULT_FILE_MODE
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(dest.parent)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace `path` with `data` atomically (see `atomic_writer`).

    Raises:
        OSError: the folder is not writable or the disk is full; `path` is unchanged.
    """
    with atomic_writer(path) as fh:
        fh.write(data)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Replace `path` with UTF-8 `text` atomically (see `atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write `obj` as canonical JSON (see `canonical_json`) atomically."""
    atomic_write_text(path, canonical_json(obj))
