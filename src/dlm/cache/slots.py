"""The slot table of one tokenize session, and the source roots its file slots belong to.

Slots: text rows first, then file rows, in input order (`SlotTable`). Per slot the
session keeps its key, its entry E (int64 [9], see `dlm.cache.index`; SEG -1 until
resolved), whether it was a hit, the moment its file was read, its root, and for file
rows the skip reason and lossy flag. Every row of one `training.sources` directive
shares one root (the seam's `FileRow` contract); `RootState` holds what the session
knows of a root: its slots, their files and stats, its stat snapshot and where each
file sits in it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter

import numpy as np

from dlm.cache import statindex
from dlm.cache.schema import root_id
from dlm.rows.types import FileRow, RowSet

_SOURCE_INDEX = itemgetter(0)  # FileRow.source_index, without the field descriptor


def distinct(values: np.ndarray) -> list[int]:
    """Sorted distinct ints of a 1-D int array. Not `np.unique`: its first call imports
    `numpy.ma`, a measurable share of a warm run, for arrays this code keeps small."""
    return sorted(set(values.tolist()))


@dataclass
class SlotTable:
    """Per-slot state of one session (module docstring), `n` slots.

    Attributes:
        n_text: slots `[0, n_text)` are text rows, the rest file rows.
        keys: row key per slot (None: not known yet, or a skipped file).
        entries: int64 [n, 9], the entry E of each slot (SEG -1: not resolved yet).
        is_hit: bool [n], found in the store rather than encoded by this session.
        read_at_ns: int64 [n], when a file slot was read (or its snapshot's record).
        root: int64 [n], the root id of a file slot (-1: a text slot).
        skip_reason: slot -> why the file gives no row (`binary`, `unreadable`, ...).
        lossy: file slots whose text had undecodable bytes.
    """

    n_text: int
    keys: list[str | None]
    entries: np.ndarray
    is_hit: np.ndarray
    read_at_ns: np.ndarray
    root: np.ndarray
    skip_reason: dict[int, str] = field(default_factory=dict)
    lossy: set[int] = field(default_factory=set)

    @classmethod
    def empty(cls, n_text: int, n_files: int) -> SlotTable:
        n = n_text + n_files
        return cls(
            n_text,
            [None] * n,
            np.full((n, 9), -1, dtype=np.int64),
            np.zeros(n, dtype=bool),
            np.zeros(n, dtype=np.int64),
            np.full(n, -1, dtype=np.int64),
        )

    def __len__(self) -> int:
        return len(self.keys)

    def roots_of(self, slots: np.ndarray) -> list[int]:
        """Distinct root ids of `slots` (text slots have none)."""
        return [r for r in distinct(self.root[slots]) if r >= 0]


@dataclass
class RootState:
    """One source root of the session.

    Attributes:
        rid: its id in the document's state (`roots`). path: its folder.
        slots: int64 [k], the slots of its files in walk order.
        files: their `FileRow`s. stats: int64 [k, 4] (`statindex.file_stats`).
        snapshot: its stat snapshot, if any. pos: int64 [k], each file's row in it (-1: absent).
        dirty: the snapshot is rewritten at the end of the session.
    """

    rid: int
    path: str
    slots: np.ndarray
    files: Sequence[FileRow] = ()
    stats: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), dtype=np.int64))
    snapshot: statindex.Snapshot | None = None
    pos: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    dirty: bool = False


def group_roots(rows: RowSet, n_text: int, state: sqlite3.Connection) -> dict[int, RootState]:
    """The roots of `rows`' file rows, by root id (ids made in `state` as needed)."""
    files = rows.file_rows
    directive = np.fromiter(map(_SOURCE_INDEX, files), dtype=np.int64, count=len(files))
    roots: dict[int, RootState] = {}
    for d in distinct(directive):
        at = np.flatnonzero(directive == d)
        first = files[int(at[0])]
        path = str(first.path)
        folder = path[: len(path) - len(first.relpath) - 1]
        rid = root_id(state, folder)
        if rid in roots:  # two directives over one folder: one root
            roots[rid].slots = np.concatenate((roots[rid].slots, at + n_text))
        else:
            roots[rid] = RootState(rid, folder, at + n_text)
    return roots


def files_of(rows: RowSet, n_text: int, slots: np.ndarray) -> Sequence[FileRow]:
    """The `FileRow`s of file `slots` (a slice when they are contiguous, as a walk emits them)."""
    lo, hi = int(slots[0]) - n_text, int(slots[-1]) - n_text + 1
    if hi - lo == len(slots):
        return rows.file_rows[lo:hi]
    return [rows.file_rows[s - n_text] for s in slots.tolist()]
