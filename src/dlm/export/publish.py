"""Publish an export folder all at once, or not at all, and never over a folder
`dlm export` did not write.

Every format is written into a fresh staging folder next to the destination
(`.<name>.staging-XXXX/`, same file system), its files set to mode 0644 and
fsynced, then renamed into place. A failure or Ctrl-C while writing removes the
staging folder and leaves the destination as it was.

Each published folder holds a marker, `.dlm-export` (canonical JSON, no paths or
times, so exports stay byte-identical across runs and folders):

    {"files": ["Modelfile", "adapter.gguf"], "written_by": "dlm export", "marker_version": 1}

A destination that already exists is replaced only when `check_destination` allows it:

- a missing folder, or an empty one: written;
- a folder with the marker whose files are all listed in it: replaced (it is an
  earlier export and holds nothing else);
- any other folder (no marker, or files the marker does not list): refused in one
  line, unless `force`;
- a folder that holds the current working folder or the user's home, or holds or
  lies inside one of the caller's `keep` paths (the document, its store) or dlm's own
  state (`$DLM_HOME`, the base models folder, the section cache: `dlm.paths`), or holds
  a store anywhere (a folder with a `dlm.lock`, a `train.lock`, or a `manifest.json`
  beside an `adapter/` folder): refused even with `force`. `--out .` can therefore
  never remove anything, nor can an export of one document replace another's store.

`--out` may be a symbolic link to a folder: the export is written through it (the
folder it names is checked and replaced, the link stays); a link to nothing is
refused in one line naming the link.

One export per folder at a time: `staged_folder` holds a file lock,
`$DLM_HOME/export-locks/<sha256 of the folder's resolved path>.lock`, from the check
to the rename; a second export into the same folder meanwhile fails at once in one
line instead of both reporting success with only the last one's files left. The lock
files are empty and stay (removing one while another process waits on it would let
two exports hold "the" lock).

Replacing renames the old folder aside (`.<name>.old-XXXX/`), renames the new one
into place, then removes the old one; a crash between those two renames leaves the
old export in that sibling folder, never a half-written one under the destination name.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from dlm.atomic import DEFAULT_FILE_MODE, fsync_dir
from dlm.canonical import canonical_json
from dlm.errors import ExportError, ExportRefused
from dlm.paths import cache_store_dir, dlm_home, models_dir

FILE_MODE = DEFAULT_FILE_MODE
DIR_MODE = 0o755
MARKER = ".dlm-export"
MARKER_VERSION = 1


@dataclass(frozen=True)
class Destination:
    """Where an export goes and what it may replace.

    Attributes:
        folder: the export folder (`--out`).
        force: replace a folder dlm did not write (`--force`); never one in `keep`'s way.
        keep: paths that must survive whatever `force` says (the document, its store):
            `folder` may be neither one of them, nor hold one, nor lie inside one.
    """

    folder: Path
    force: bool = False
    keep: tuple[Path, ...] = ()


def as_destination(out: Path | str | Destination) -> Destination:
    """`out` as a `Destination` (a plain path: no `force`, nothing extra to keep)."""
    return out if isinstance(out, Destination) else Destination(Path(out))


def absolute(path: Path) -> Path:
    """`path` made absolute with `.` and `..` removed (symlinks kept: the name is what is replaced)."""
    return Path(os.path.abspath(path))


def _contains(folder: Path, path: Path) -> bool:
    return path == folder or folder in path.parents


def _both(path: Path) -> set[Path]:
    return {absolute(path), path.resolve()}


def dlm_state() -> tuple[Path, ...]:
    """dlm's own state, which no export may be, hold or lie inside: `$DLM_HOME` (every
    store) and the base models and section cache folders, wherever they were moved."""
    return (dlm_home(), models_dir(), cache_store_dir())


STORE_SIGNS = ("dlm.lock", "train.lock")


def _store_inside(out: Path) -> Path | None:
    """The first file under `out` that shows a document's store there (module docstring)."""
    if not out.is_dir():
        return None
    for root, dirs, files in os.walk(out):
        for name in STORE_SIGNS:
            if name in files:
                return Path(root) / name
        if "manifest.json" in files and "adapter" in dirs:
            return Path(root) / "manifest.json"
    return None


def _in_the_way(out: Path, keep: Iterable[Path]) -> Path | None:
    """A path replacing `out` would destroy: the working folder, home, a kept path
    or a parent of one; or a kept folder `out` lies inside (the store, dlm's state)."""
    outs = _both(out)
    if any(o.parent == o for o in outs):
        return out  # a file-system root holds everything
    keep = (*keep, *dlm_state())
    for raw in (Path.cwd(), Path.home(), *keep):
        for kept in _both(raw):
            if kept.parent != kept and any(_contains(o, kept) for o in outs):  # a root working folder guards nothing
                return kept
    for raw in keep:
        for kept in _both(raw):
            if any(_contains(kept, o) for o in outs):
                return kept
    return None


def marker_files(folder: Path) -> list[str] | None:
    """The files the marker of `folder` lists, or None when it has no readable marker."""
    try:
        data = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) else None
    return [str(f) for f in files] if isinstance(files, list) else None


def _contents(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink()}


def check_destination(dest: Destination) -> None:
    """Refuse (one line, nothing touched) unless `dest.folder` may be written (module docstring).

    Raises:
        ExportRefused: the folder holds the working folder, home or a kept path; or it
            exists, is not empty and is not an earlier export (without `force`).
        ExportError: it exists and is not a folder.
    """
    out = absolute(dest.folder)
    if out.is_symlink() and not out.exists():
        raise ExportError(
            f"--out {out}: is a symbolic link to {os.readlink(out)}, which does not exist; "
            f"create that folder, or choose another --out"
        )
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out}: exists and is not a folder; choose another --out or remove it")
    kept = _in_the_way(out, dest.keep)
    if kept is not None:
        where = "is inside" if _contains(kept, out) or _contains(kept, out.resolve()) else "holds"
        raise ExportRefused(
            f"--out {out}: {where} {kept}, which an export must never replace; choose a new folder for the export"
        )
    store = _store_inside(out)
    if store is not None:
        raise ExportRefused(
            f"--out {out}: holds a document's store ({store}), which an export must never replace; "
            f"choose a new folder for the export"
        )
    if not out.is_dir() or not any(out.iterdir()) or dest.force:
        return
    listed = marker_files(out)
    if listed is None:
        raise ExportRefused(
            f"--out {out}: the folder exists and was not written by dlm export (no {MARKER} marker); "
            f"choose another --out, or pass --force to replace it and everything in it"
        )
    extra = sorted(_contents(out) - set(listed) - {MARKER})
    if extra:
        shown = ", ".join(extra[:3]) + (f" and {len(extra) - 3} more" if len(extra) > 3 else "")
        raise ExportRefused(
            f"--out {out}: holds files an earlier export did not write ({shown}); move them "
            f"away, choose another --out, or pass --force to replace them"
        )


DISK_FULL_SIGNS = ("No space left on device", "StorageFull", "Disk quota exceeded")


def disk_full(exc: BaseException) -> bool:
    """True for an error that says the disk is full, whatever type a library wraps it in
    (safetensors raises `SafetensorError: ... StorageFull ...`)."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return any(sign in str(exc) for sign in DISK_FULL_SIGNS)


def os_error_line(exc: OSError, out: Path) -> str:
    """One line for a failed write of the export at `out`: what failed and the way out
    (a full disk says so; the staging folder is never named, it no longer exists: a file
    inside it is named by its path inside the export)."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"{out}: no space left on the device while writing the export; free some space or choose another --out"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{out}: cannot write there ({exc.strerror}); choose another --out"
    name = _shown_name(Path(exc.filename), out) if exc.filename else None
    return f"{out}: writing the export failed: {exc.strerror or exc}" + (f" ({name})" if name else "")


def _shown_name(path: Path, out: Path) -> str | None:
    """`path` as the user knows it: relative to the export when it lies in a staging or
    replaced folder (`.<name>.staging-*`, `.<name>.old-*`; `<name>` is the folder a
    symbolic link `out` names), else its name."""
    for parent in (path, *path.parents):
        if parent.name.startswith(".") and (".staging-" in parent.name or ".old-" in parent.name):
            inside = path.relative_to(parent)
            return inside.as_posix() if inside.parts else None
    return path.name


def export_lock_path(folder: Path) -> Path:
    """The lock file one export into `folder` holds (module docstring)."""
    digest = hashlib.sha256(os.fsencode(folder.resolve())).hexdigest()
    return dlm_home() / "export-locks" / f"{digest}.lock"


@contextmanager
def export_lock(folder: Path) -> Iterator[None]:
    """Hold the lock of exports into `folder` for the block.

    Raises:
        ExportError: another export holds it (one line naming `folder`), or the lock
            file cannot be created.
    """
    path = export_lock_path(folder)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(path), timeout=0)
        lock.acquire()
    except Timeout:
        raise ExportError(
            f"--out {folder}: another dlm export is writing this folder now; wait for it to finish, "
            f"or choose another --out"
        ) from None
    except OSError as exc:
        raise ExportError(
            f"{path}: cannot create the export lock ({exc.strerror or exc}); make DLM_HOME writable"
        ) from exc
    try:
        yield
    finally:
        lock.release()


@contextmanager
def staged_folder(out: Path | str | Destination) -> Iterator[Path]:
    """Yield an empty staging folder; on a clean exit mark it and publish it as the destination.

    Raises:
        ExportRefused, ExportError: the destination may not be written (`check_destination`).
        ExportError: a write failed (disk full, permissions): one line naming the
            destination; nothing is left behind and the destination is unchanged.
    """
    dest = as_destination(out)
    shown = absolute(dest.folder)
    with export_lock(shown):
        check_destination(dest)
        # a symbolic link is written through: the folder it names is replaced, the link stays
        target = shown.resolve() if shown.is_symlink() else shown
        staging: Path | None = None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.staging-"))
            yield staging
            _seal(staging)
            _swap_in(staging, target)
        except OSError as exc:
            raise ExportError(os_error_line(exc, shown)) from exc
        except Exception as exc:
            if disk_full(exc):  # libraries that wrap the OS error in their own type (safetensors)
                raise ExportError(os_error_line(OSError(errno.ENOSPC, "No space left on device"), shown)) from exc
            raise
        finally:
            if staging is not None and staging.exists():
                shutil.rmtree(staging, ignore_errors=True)


def _seal(folder: Path) -> None:
    """The marker, modes 0644/0755 (mkdtemp makes 0700) and durable file contents."""
    files = sorted(_contents(folder))
    marker = {"files": files, "marker_version": MARKER_VERSION, "written_by": "dlm export"}
    (folder / MARKER).write_text(canonical_json(marker), encoding="utf-8")
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
        try:
            os.replace(out, old / out.name)
        except OSError:
            old.rmdir()
            raise
    os.replace(staging, out)
    fsync_dir(out.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
