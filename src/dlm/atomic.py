"""The one way `dlm` writes a file that must survive a crash.

`atomic_write_bytes` writes to a unique temporary name in the destination folder,
flushes and fsyncs it, renames it over the destination (atomic on POSIX and on
Windows for same-volume paths), then fsyncs the folder so the rename itself is
durable. A reader sees the old file or the new one, never a partial write. A failure
(disk full, Ctrl-C) removes the temporary file and leaves the destination untouched.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


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


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace `path` with `data` atomically.

    Raises:
        OSError: the folder is not writable or the disk is full; `path` is unchanged.
    """
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(dest.parent)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Replace `path` with UTF-8 `text` atomically (see `atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def canonical_json(obj: Any) -> str:
    """Canonical JSON text: sorted keys, two-space indent, UTF-8, trailing newline.

    The same value always gives the same bytes, so files written with it hash stably.
    """
    return json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write `obj` as canonical JSON (see `canonical_json`) atomically."""
    atomic_write_text(path, canonical_json(obj))
