"""Folder listings for the source walk, made in line or on worker threads ahead of it.

A listing is what the walk needs of one folder, decided as far as one folder allows:
its entries in sorted name order, the excluded ones already dropped (the include and
exclude patterns are matched once per entry, here), and each kept entry as an `Item`:

    (ROW,      name, path, FileRow)        a regular file within the size cap
    (SKIP,     name, path, reason)         `unreadable`, `not-a-file` or `too-large`
    (DIR,      name, path, (dev, ino))     a folder (not a link), stat-ed for the seen check
    (LINK_DIR | LINK_FILE, name, path, None)  a symlink; the walk resolves and checks it
    (ROWS,     None, None, [FileRow, ...]) consecutive ROWs as one item (from the
                                           native lister, `dlm.rows.nativelist`)

Plain tuples, not objects: a warm walk of a large tree is a few microseconds of Python
per entry, and building one object per entry was a measurable share of it. What needs
the whole walk (the order across folders, `max_files`, symlink targets, folders seen
through links) stays with the walk on the calling thread, so a listing made by a worker
gives the result an in-line one gives.

Threads only pay when the system calls wait on the disk. When the folders are in the
kernel's dentry and inode caches (any warm run), the workers contend with the walk for
the GIL and listing in line is faster. So the walk lists in line
and starts the workers only once its in-line listings, over at least `PROBE_ENTRIES`
entries, took more than `WAIT_RATIO` times the CPU time they used: the calls waited (a
cold tree, a network file system). Wall time against the thread's own CPU time rather
than a fixed time per entry, because a warm entry costs 2 to 3 times more on one machine
than on another, and a fixed bound would start the workers on a slow machine's warm tree.
Memory: listings are made at most `LOOKAHEAD` folders ahead of the walk.

The workers run only where the native lister (`dlm.rows.nativelist`) is not built. On a
cold tree they shorten a command that walks it; on a warm tree they cost a little, since
a busy machine's wall time can pass `WAIT_RATIO` times the CPU time without any disk
wait (docs/benchmarks.md, "Source walk: listing folders").
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from operator import attrgetter
from stat import S_ISREG
from typing import Any

from dlm.rows.types import FileRow

THREADS = 4
LOOKAHEAD = 256
WAIT_RATIO = 3.0  # a busy second core can make wall time up to 2x CPU time without any waiting
PROBE_ENTRIES = 512

ROW, SKIP, DIR, LINK_DIR, LINK_FILE, ROWS = range(6)

Match = Callable[[str], object]  # truthy: take it
Item = tuple[int, str, str, Any]
_NAME = attrgetter("name")
# builds a FileRow without the NamedTuple's Python-level __new__ (same tuple, one frame less)
new_row = tuple.__new__


def take_all(rel: str) -> bool:
    """The file test when every file is taken (`dlm.rows.nativelist` skips the call)."""
    return True


@dataclass(frozen=True)
class ListRules:
    """What a listing decides with.

    Attributes:
        take_file: truthy when a file's POSIX path relative to the root is included and
            not excluded.
        take_folder: truthy when a folder's relative path plus `/` is not excluded.
        source_index, max_bytes: copied into each `FileRow`; files over `max_bytes`
            (stat size, bytes) are skipped as `too-large`.
    """

    take_file: Match
    take_folder: Match
    source_index: int
    max_bytes: int


def file_item(rules: ListRules, name: str, path: str, rel: str, st: os.stat_result) -> Item:
    """A `ROW` for a regular file within the cap, else a `SKIP` with its reason."""
    if not S_ISREG(st.st_mode):
        return SKIP, name, path, "not-a-file"
    if st.st_size > rules.max_bytes:
        return SKIP, name, path, "too-large"
    return (
        ROW,
        name,
        path,
        new_row(
            FileRow,
            (rules.source_index, path, rel, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, rules.max_bytes),
        ),
    )


def list_folder(folder: str, rel_prefix: str, rules: ListRules) -> list[Item] | None:
    """The listing of `folder` (module docstring), or None when it cannot be listed.

    `rel_prefix`: the folder's path relative to the root, with a trailing `/` (`""` at
    the root). An entry whose type or stat cannot be read is a `SKIP` `unreadable`; one
    whose type cannot be read is counted whatever the patterns say. A symlink is
    matched as what its target is (a folder, else a file: a target that cannot be
    stat-ed, dangling, looping or forbidden, is matched as a file) and left to the walk,
    which resolves it: an excluded link is never followed, counted or refused.
    """
    try:
        with os.scandir(folder) as it:
            entries = sorted(it, key=_NAME)
    except OSError:
        return None
    take_file, take_folder = rules.take_file, rules.take_folder
    out: list[Item] = []
    append = out.append
    for entry in entries:
        name = entry.name
        rel = rel_prefix + name
        try:
            is_link = entry.is_symlink()
            # a link's target: os.path.isdir is False when it cannot be stat-ed (ELOOP,
            # EACCES), as the native lister decides (`dlm.rows.nativelist.odd_entry`)
            is_dir = os.path.isdir(entry.path) if is_link else entry.is_dir()
        except OSError:
            append((SKIP, name, entry.path, "unreadable"))
            continue
        # the patterns first: an excluded link is never followed, so never refused by --strict
        if is_dir:
            if not take_folder(rel + "/"):
                continue
            if is_link:
                append((LINK_DIR, name, entry.path, None))
                continue
            try:
                st = entry.stat()
                append((DIR, name, entry.path, (st.st_dev, st.st_ino)))
            except OSError:
                append((SKIP, name, entry.path, "unreadable"))
            continue
        if not take_file(rel):
            continue
        if is_link:
            append((LINK_FILE, name, entry.path, None))
            continue
        try:
            st = entry.stat()
        except OSError:
            append((SKIP, name, entry.path, "unreadable"))
            continue
        append(file_item(rules, name, entry.path, rel, st))
    return out


class Prefetcher:
    """Lists folders for the walk: in line, or on `threads` worker threads (default
    `THREADS`; 0: always in line) once in-line listings prove slow (module docstring),
    in the order they are announced.

    `ahead(folder, rel_prefix)` announces a folder the walk will enter; `get` returns its
    listing (made by a worker, or in line when it was not announced, the workers have not
    started, or the lookahead was full). Call `close` when the walk ends.
    """

    def __init__(self, rules: ListRules, threads: int | None = None) -> None:
        self.rules = rules
        self.threads = THREADS if threads is None else threads
        self.pool: ThreadPoolExecutor | None = None
        self.pending: dict[str, Future[list[Item] | None]] = {}
        self.in_line_wall_s = 0.0
        self.in_line_cpu_s = 0.0
        self.in_line_entries = 0

    def ahead(self, folder: str, rel_prefix: str) -> None:
        if self.pool is not None and len(self.pending) < LOOKAHEAD and folder not in self.pending:
            self.pending[folder] = self.pool.submit(list_folder, folder, rel_prefix, self.rules)

    def get(self, folder: str, rel_prefix: str) -> list[Item] | None:
        future = self.pending.pop(folder, None)
        if future is not None:
            return future.result()
        if self.pool is not None or not self.threads:
            return list_folder(folder, rel_prefix, self.rules)
        wall, cpu = time.perf_counter(), time.thread_time()
        listing = list_folder(folder, rel_prefix, self.rules)
        self.in_line_wall_s += time.perf_counter() - wall
        self.in_line_cpu_s += time.thread_time() - cpu
        self.in_line_entries += len(listing) if listing else 0
        if self.in_line_entries >= PROBE_ENTRIES and self.in_line_wall_s > WAIT_RATIO * self.in_line_cpu_s:
            self.pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="dlm-walk")
        return listing

    def close(self) -> None:
        for future in self.pending.values():
            future.cancel()
        self.pending.clear()
        if self.pool is not None:
            self.pool.shutdown(wait=True)
