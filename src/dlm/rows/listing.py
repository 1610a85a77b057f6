"""Folder listings for the source walk, made on worker threads ahead of the walk.

A listing is what the walk asks of one folder: its entries sorted by name, each with
whether it is a symlink, whether it is (or links to) a folder, and the stat the walk
will use (a folder's, for the seen-folder check; a file's, when the include/exclude
patterns take it). `scandir` and `stat` release the GIL, so while the walk decides on
one folder, worker threads list the folders it will enter next. Every decision (order,
skips, limits, symlink checks) stays with the walk on the calling thread, so the
result is the one an in-line listing gives; only the system calls move.

Threads only pay when the system calls wait on the disk. When the folders are in the
kernel's dentry and inode caches (any warm run), a listing is a few microseconds of
Python per entry, the workers contend with the walk for the GIL, and listing in line
is faster (`benchmarks/walk.py`: 0.64 s in line against 0.91 s on 4 threads for the
78,572 files of Linux 6.1 on 2 cores). So the walk lists in line and starts the workers
only once its in-line listings have averaged more than `SLOW_ENTRY_S` per entry over at
least `PROBE_ENTRIES` entries: a cold tree, a network file system.

Memory: listings are made at most `LOOKAHEAD` folders ahead of the walk.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

THREADS = 4
LOOKAHEAD = 256
SLOW_ENTRY_S = 20e-6  # seconds per entry: about 3x a warm in-line listing
PROBE_ENTRIES = 512

Match = Callable[[str], bool]


@dataclass(frozen=True, slots=True)
class Listed:
    """One folder entry. `broken`: `is_symlink`/`is_dir` raised (the walk counts it
    `unreadable`). `stat` is None when not wanted or when it failed (`stat_failed`)."""

    name: str
    path: str
    is_link: bool
    is_dir: bool
    broken: bool
    stat: os.stat_result | None
    stat_failed: bool


def list_folder(folder: str, rel_prefix: str, include: Match, exclude: Match) -> list[Listed] | None:
    """The listing of `folder` (see module docstring), or None when it cannot be listed."""
    try:
        with os.scandir(folder) as it:
            entries = sorted(it, key=_name)
    except OSError:
        return None
    out = []
    for entry in entries:
        rel = rel_prefix + entry.name
        try:
            is_link = entry.is_symlink()
            is_dir = entry.is_dir()  # follows links
        except OSError:
            out.append(Listed(entry.name, entry.path, False, False, True, None, False))
            continue
        if is_link:  # the walk resolves and checks links itself; it stats them later
            wanted = False
        elif is_dir:
            wanted = not exclude(rel + "/")
        else:
            wanted = include(rel) and not exclude(rel)
        st, failed = None, False
        if wanted:
            try:
                st = entry.stat()
            except OSError:
                failed = True
        out.append(Listed(entry.name, entry.path, is_link, is_dir, False, st, failed))
    return out


def _name(entry: os.DirEntry[str]) -> str:
    return entry.name


class Prefetcher:
    """Lists folders for the walk: in line, or on `threads` worker threads (default
    `THREADS`; 0: always in line) once in-line listings prove slow (module docstring),
    in the order they are announced.

    `ahead(folder, rel_prefix)` announces a folder the walk will enter; `get` returns its
    listing (made by a worker, or in line when it was not announced, the workers have not
    started, or the lookahead was full). Call `close` when the walk ends.
    """

    def __init__(self, include: Match, exclude: Match, threads: int | None = None) -> None:
        self.include, self.exclude = include, exclude
        self.threads = THREADS if threads is None else threads
        self.pool: ThreadPoolExecutor | None = None
        self.pending: dict[str, Future[list[Listed] | None]] = {}
        self.in_line_s = 0.0
        self.in_line_entries = 0

    def ahead(self, folder: str, rel_prefix: str) -> None:
        if self.pool is not None and len(self.pending) < LOOKAHEAD and folder not in self.pending:
            self.pending[folder] = self.pool.submit(list_folder, folder, rel_prefix, self.include, self.exclude)

    def get(self, folder: str, rel_prefix: str) -> list[Listed] | None:
        future = self.pending.pop(folder, None)
        if future is not None:
            return future.result()
        start = time.perf_counter()
        listing = list_folder(folder, rel_prefix, self.include, self.exclude)
        if self.pool is None and self.threads:
            self.in_line_s += time.perf_counter() - start
            self.in_line_entries += len(listing) if listing else 0
            if self.in_line_entries >= PROBE_ENTRIES and self.in_line_s > SLOW_ENTRY_S * self.in_line_entries:
                self.pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="dlm-walk")
        return listing

    def close(self) -> None:
        for future in self.pending.values():
            future.cancel()
        self.pending.clear()
        if self.pool is not None:
            self.pool.shutdown(wait=True)
