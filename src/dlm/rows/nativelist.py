"""The whole tree's listings made ahead of the walk, with the system calls in native code.

On a tree in the kernel's caches (any warm run), a walk's time is its `stat` calls: a
Python loop makes them one at a time and holds the GIL between them. The optional
extension `dlm.rows._fastlist` lists and lstat-s whole batches of folders on native
threads with the GIL released (one batch per depth of the tree, breadth first); this
module turns each folder's raw entries into the listing `dlm.rows.listing.list_folder`
makes of it, the same `Item`s in the same order, and hands them to the walk, which
keeps every decision that needs more than one folder (order, links, folders seen
twice). A folder the breadth-first pass did not list (one reached through a symlink)
is listed in line as before.

Used only when the extension is built (it needs a C compiler at install time; without
one the walk lists in Python, same result) and the directive has no `max_files`: a cap
stops the walk at its first file past the cap, and a breadth-first pass would list
folders the walk never reaches. Memory: every listing of the directive is held until
the walk takes it, the same order of size as the walk's result.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from operator import itemgetter
from stat import S_ISDIR, S_ISLNK, S_ISREG
from types import ModuleType

from dlm.rows.listing import DIR, LINK_DIR, LINK_FILE, ROW, SKIP, Item, ListRules, list_folder, new_row
from dlm.rows.types import FileRow

_fastlist: ModuleType | None
try:
    from dlm.rows import _fastlist  # type: ignore[attr-defined,no-redef]  # built from _fastlist.c
except ImportError:  # no compiler when it was installed: the walk lists in Python
    _fastlist = None

DT_DIR, DT_LNK = 4, 10  # readdir's d_type values (dirent.h), read only when an lstat failed
_NAME = itemgetter(0)


def available() -> bool:
    """True when the native extension is built and importable."""
    return _fastlist is not None


def threads() -> int:
    """Native threads per batch: the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def decide(raw: list[tuple] | int, folder: str, rel_prefix: str, rules: ListRules) -> list[Item] | None:
    """The `list_folder` listing of `folder` from its raw native entries (or None when
    it could not be listed: `raw` is an errno).

    Raw entries: `(name, d_type, errno, mode, size, mtime_ns, ctime_ns, ino, dev)` from
    lstat. They arrive sorted by their bytes; they are sorted again here by `str`, as
    `list_folder` sorts, which differs for names the file system encoding cannot
    decode (Timsort takes an already sorted list in one linear pass).
    """
    if isinstance(raw, int):
        return None
    raw.sort(key=_NAME)
    take_file, take_folder = rules.take_file, rules.take_folder
    source_index, max_bytes = rules.source_index, rules.max_bytes
    base = os.path.join(folder, "")
    out: list[Item] = []
    append = out.append
    for name, d_type, err, mode, size, mtime, ctime, ino, dev in raw:
        rel = rel_prefix + name
        path = base + name
        if err:
            _unreadable(append, name, path, rel, d_type, rules)
        elif S_ISREG(mode):
            if take_file(rel):
                if size > max_bytes:
                    append((SKIP, name, path, "too-large"))
                else:
                    append((ROW, name, path, new_row(FileRow, (
                        source_index, path, rel, size, mtime, ctime, ino, max_bytes))))
        elif S_ISDIR(mode):
            if take_folder(rel + "/"):
                append((DIR, name, path, (dev, ino)))
        elif S_ISLNK(mode):
            if os.path.isdir(path):  # follows the link, False when it dangles (as DirEntry.is_dir)
                if take_folder(rel + "/"):
                    append((LINK_DIR, name, path, None))
            elif take_file(rel):
                append((LINK_FILE, name, path, None))
        elif take_file(rel):
            append((SKIP, name, path, "not-a-file"))
    return out


def _unreadable(append: Callable[[Item], None], name: str, path: str, rel: str, d_type: int, rules: ListRules) -> None:
    """An entry whose lstat failed (it vanished or cannot be read), as `list_folder`
    treats it: without a type from readdir it is counted whatever the patterns say;
    with one, only when the patterns take it."""
    if d_type == 0:
        append((SKIP, name, path, "unreadable"))
    elif d_type == DT_DIR:
        if rules.take_folder(rel + "/"):
            append((SKIP, name, path, "unreadable"))
    elif rules.take_file(rel):
        append((SKIP, name, path, "unreadable"))


class NativeLister:
    """Lists a directive's whole tree on the first `get`, breadth first and one native
    batch per depth; the walk then takes each folder's listing with `get`, as from
    `dlm.rows.listing.Prefetcher` (the same interface; `ahead` has nothing to do).

    Folders pruned by `exclude` are never listed. Each `DIR` entry's folder is listed
    once, even one the walk later skips as seen through a link.
    """

    pool = None  # the walk announces folders only to a lister with worker threads

    def __init__(self, rules: ListRules, n_threads: int | None = None) -> None:
        if _fastlist is None:
            raise RuntimeError("dlm.rows._fastlist is not built")
        self.rules = rules
        self.n_threads = n_threads or threads()
        self.listings: dict[str, list[Item] | None] | None = None

    def _list_tree(self, root: str, rel_prefix: str) -> dict[str, list[Item] | None]:
        assert _fastlist is not None
        listings: dict[str, list[Item] | None] = {}
        frontier = [(root, rel_prefix)]
        while frontier:
            raws = _fastlist.list_dirs([folder for folder, _ in frontier], self.n_threads)
            deeper: list[tuple[str, str]] = []
            for (folder, prefix), raw in zip(frontier, raws, strict=True):
                items = listings[folder] = decide(raw, folder, prefix, self.rules)
                if items:
                    deeper.extend((path, prefix + name + "/") for kind, name, path, _ in items if kind == DIR)
            frontier = deeper
        return listings

    def ahead(self, folder: str, rel_prefix: str) -> None:
        pass

    def get(self, folder: str, rel_prefix: str) -> list[Item] | None:
        if self.listings is None:
            self.listings = self._list_tree(folder, rel_prefix)
        if folder in self.listings:
            return self.listings.pop(folder)
        return list_folder(folder, rel_prefix, self.rules)  # reached through a link

    def close(self) -> None:
        self.listings = None
