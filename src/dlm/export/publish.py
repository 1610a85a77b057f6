"""Publish an export folder all at once, or not at all.

Every format is written into a fresh staging folder next to the destination
(`.<name>.staging-XXXX/`, same file system), its files set to mode 0644 and
fsynced, then renamed into place. A failure or Ctrl-C while writing removes the
staging folder and leaves the destination as it was. When the destination already
exists it is first renamed aside (`.<name>.old-XXXX/`) and removed after the new
folder is in place; a crash between those two renames leaves the old export in
that sibling folder, never a half-written one under the destination name.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dlm.atomic import DEFAULT_FILE_MODE, fsync_dir
from dlm.errors import ExportError

FILE_MODE = DEFAULT_FILE_MODE
DIR_MODE = 0o755


@contextmanager
def staged_folder(out: Path) -> Iterator[Path]:
    """Yield an empty staging folder; on a clean exit publish it as `out`.

    Raises:
        ExportError: `out` exists and is not a folder.
        OSError: the parent folder is not writable (nothing is left behind).
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out}: exists and is not a folder; choose another --out or remove it")
    parent = out.parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=parent, prefix=f".{out.name}.staging-"))
    try:
        yield staging
        _seal(staging)
        _swap_in(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _seal(folder: Path) -> None:
    """Modes 0644/0755 (mkdtemp makes 0700) and durable file contents."""
    for path in sorted(folder.rglob("*")):
        if path.is_dir():
            path.chmod(DIR_MODE)
        elif path.is_file():
            path.chmod(FILE_MODE)
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
    folder.chmod(DIR_MODE)


def _swap_in(staging: Path, out: Path) -> None:
    old: Path | None = None
    if out.exists():
        old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-"))
        os.replace(out, old / out.name)
    os.replace(staging, out)
    fsync_dir(out.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
