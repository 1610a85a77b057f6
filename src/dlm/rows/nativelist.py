"""The whole tree's listings made ahead of the walk, with the system calls in native code.

On a tree in the kernel's caches (any warm run), a walk's time is its `stat` calls: a
Python loop makes them one at a time and holds the GIL between them. The optional
extension `dlm.rows._fastlist` lists and lstat-s whole batches of folders on native
threads with the GIL released (`NativeLister`: batches of folders in walk order), then
turns each folder into the listing `dlm.rows.listing.list_folder` makes of it: the same
`Item`s in the same order, decided with the walk's own pattern match functions, each run
of consecutive files as one `ROWS` item (the walk extends its result by the run instead
of one Python step per file). Symlinks and entries whose lstat failed are decided in Python
(`odd_entry`). The walk keeps every decision that needs more than one folder (order,
links, folders seen twice); a folder the breadth-first pass did not list (one reached
through a symlink) is listed in line as before.

Used when the extension is built (it needs a C compiler at install time; without one
the walk lists in Python, same result). Memory: the listings made ahead of the walk,
at most a few batches of folders.

It shortens a command over a large tree, warm or cold, more than the Python worker
threads do on a cold one; on a small tree the command is mostly its start and the two
listers are level (docs/benchmarks.md, "Source walk: listing folders").
"""

from __future__ import annotations

import os
from collections.abc import Callable
from operator import itemgetter
from types import ModuleType

from dlm.rows.listing import DIR, LINK_DIR, LINK_FILE, ROW, ROWS, SKIP, Item, ListRules, take_all
from dlm.rows.types import FileRow

_fastlist: ModuleType | None
try:
    from dlm.rows import _fastlist  # built from _fastlist.c (typed by _fastlist.pyi)
except ImportError:  # no compiler when it was installed: the walk lists in Python
    _fastlist = None

# folders per native call, doubling from the first to the largest: a small tree (or a
# walk a cap stops early) lists little ahead of the walk, a large one in few calls
FIRST_BATCH, MAX_BATCH = 32, 1024
DT_DIR = 4  # readdir's d_type of a folder (dirent.h), read only when an lstat failed
# the item kinds the extension builds for regular files, skips and folders
assert (ROW, SKIP, DIR, ROWS) == (0, 1, 2, 5), "dlm.rows._fastlist builds items with these kinds"
_NAME = itemgetter(1)  # an Item's name


def available() -> bool:
    """True when the native extension is built and importable."""
    return _fastlist is not None


MAX_THREADS = 8  # each native call starts its threads anew: the cap bounds that cost on many cores


def threads() -> int:
    """Native threads per batch: the CPUs this process may run on, at most `MAX_THREADS`."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(MAX_THREADS, cpus))


def odd_entry(rules: ListRules) -> Callable[[str, int, int, str, str], Item | None]:
    """What the native listing asks about an entry it does not decide itself: a symlink
    (`errno` 0) or an entry whose lstat failed. Its item as `list_folder` makes it, or
    None when the patterns drop it. Without a type from readdir (`d_type` 0) a failed
    entry is counted whatever the patterns say, as `list_folder` counts an entry whose
    type cannot be read."""
    take_file, take_folder = rules.take_file, rules.take_folder

    def odd(name: str, d_type: int, err: int, base: str, rel_prefix: str) -> Item | None:
        rel, path = rel_prefix + name, base + name
        if not err:  # a symlink: the patterns of what it points to
            if os.path.isdir(path):  # follows the link; False when it dangles, as DirEntry.is_dir
                return (LINK_DIR, name, path, None) if take_folder(rel + "/") else None
            return (LINK_FILE, name, path, None) if take_file(rel) else None
        if d_type == 0 or (take_folder(rel + "/") if d_type == DT_DIR else take_file(rel)):
            return (SKIP, name, path, "unreadable")
        return None

    return odd


class NativeLister:
    """Lists folders for the walk in native batches, ahead of it in walk order; the walk
    takes each folder's listing with `get`, as from `dlm.rows.listing.Prefetcher` (the
    same interface; `ahead` has nothing to do: the lister learns the walk's next folders
    from the listings it makes).

    The lister keeps a stack of the folders the walk has still to enter, the next one on
    top: each listed folder's subfolders are pushed in reverse name order, folders of
    one batch in reverse batch order. A `get` of a folder not yet listed lists it and
    more from the top of the stack in one native call, `FIRST_BATCH` folders in all at
    first, twice as many each call after, at most `MAX_BATCH`. Every folder listed is
    one the walk reaches unless it stops first (`max_files`) or skips it as seen through
    a link, so what is listed beyond the walk's stop is bounded by `MAX_BATCH` folders
    per depth. Folders pruned by `exclude` are never listed.
    """

    pool = None  # the walk announces folders only to a lister with worker threads

    def __init__(self, rules: ListRules, n_threads: int | None = None) -> None:
        if _fastlist is None:
            raise RuntimeError("dlm.rows._fastlist is not built")
        self.rules = rules
        self.n_threads = n_threads or threads()
        self.batch = FIRST_BATCH
        self.odd = odd_entry(rules)
        self.listings: dict[str, list[Item] | None] = {}
        self.listed: set[str] = set()
        self.stack: list[tuple[str, str]] = []

    def ahead(self, folder: str, rel_prefix: str) -> None:
        pass

    def get(self, folder: str, rel_prefix: str) -> list[Item] | None:
        if folder in self.listings:
            return self.listings.pop(folder)
        batch = [(folder, rel_prefix)]
        self.listed.add(folder)
        while self.stack and len(batch) < self.batch:
            path, prefix = self.stack.pop()
            if path not in self.listed:
                self.listed.add(path)
                batch.append((path, prefix))
        self._list(batch)
        self.batch = min(MAX_BATCH, 2 * self.batch)
        return self.listings.pop(folder)

    def _list(self, batch: list[tuple[str, str]]) -> None:
        assert _fastlist is not None
        rules = self.rules
        take_file = None if rules.take_file is take_all else rules.take_file  # None: no call per file
        decided = _fastlist.decide_dirs(
            [folder if folder.endswith("/") else folder + "/" for folder, _ in batch],  # os.path.join(folder, "")
            [prefix for _, prefix in batch],
            self.n_threads,
            take_file,
            rules.take_folder,
            rules.source_index,
            rules.max_bytes,
            FileRow,
            self.odd,
            _NAME,
        )
        for (folder, _), got in zip(reversed(batch), reversed(decided), strict=True):
            if isinstance(got, int):  # the errno of listing it
                self.listings[folder] = None
                continue
            self.listings[folder], subfolders = got
            self.stack.extend(reversed(subfolders))

    def close(self) -> None:
        self.listings.clear()
        self.stack.clear()
