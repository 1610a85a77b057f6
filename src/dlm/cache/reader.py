"""`read(i)` of a cached run: pread + verify + decompress, healing a bad entry.

A bad entry (checksum, frame or length mismatch; a vanished segment) is a miss: a
warning, the row is re-encoded from its source and kept in memory, the index row is
dropped and the root's stat snapshot forgotten, so the next run re-reads the file and
stores a fresh entry. A file whose text no longer matches its key (edited during the
run) raises `CacheError` rather than return ids of another text.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dlm.cache.index import SEG, delete_entry
from dlm.cache.schema import connect, connect_state, write_tx
from dlm.cache.segments import SegmentReader
from dlm.errors import CacheError
from dlm.rows.read import read_file_row, text_row_spec
from dlm.rows.types import RowSet, RowSpec
from dlm.tokenize.plain import spec_key
from dlm.tokenize.seam import TokenizeStats

IN_MEMORY = -2


@dataclass
class RowSource:
    """What re-encoding row i needs: the run's rows and how slots map to them."""

    rows: RowSet
    n_text: int
    slots: list[int]
    root_of_slot: np.ndarray  # stat-snapshot root id of each slot (-1 for text rows)
    tok: int


class CachedRows:
    """The `read` callable of a cached `TokenizedRows`.

    Args:
        state_dir: the document's state folder (its stat snapshot of a damaged row's
            root is forgotten).
        store_dir: the shared store (its index is reopened to drop a damaged entry).
        reader: open segment files.
        entries: int64 [n_rows, 9], each row's entry E (`SEG == IN_MEMORY`: in `in_memory`).
        keys: row keys; in_memory: key -> ids of rows not stored in the cache.
        source: how to re-read a row whose entry is damaged.
        encode: `RowSpec` -> 1-D uint16|uint32 ids, the seam's rules.
        tokenizer_sha256: the tokenizer fingerprint (to check a re-read file's key).
        stats: the session's stats (a healed entry turns a hit into a miss).
        warn: called once per damaged entry met.
        keepalive: the session's index connection, kept open as long as the rows.
    """

    def __init__(
        self,
        *,
        state_dir: Path,
        store_dir: Path,
        reader: SegmentReader,
        entries: np.ndarray,
        keys: list[str],
        in_memory: dict[str, np.ndarray],
        source: RowSource,
        encode: Callable[[Any], np.ndarray],
        tokenizer_sha256: str,
        stats: TokenizeStats,
        warn: Callable[[str], None],
        keepalive: Any = None,
    ) -> None:
        # The run's index connection lives as long as its rows: closing the last
        # connection checkpoints the WAL, work the caller need not wait for.
        self.keepalive = keepalive
        self.reader, self.entries, self.keys = reader, entries, keys
        self.store_dir, self.state_dir = store_dir, state_dir
        self.in_memory = in_memory
        self.source, self.encode, self.tokenizer_sha256 = source, encode, tokenizer_sha256
        self.stats, self.warn = stats, warn
        self.healed = 0

    def __call__(self, i: int) -> np.ndarray:
        seg, off, nb, nt, _np, dt, ck = (int(v) for v in self.entries[i, :7])
        if seg == IN_MEMORY:
            return self.in_memory[self.keys[i]]
        ids = self.reader.read(seg, off, nb, nt, dt, ck)
        return ids if ids is not None else self._heal(i, seg, off)

    def _heal(self, i: int, seg: int, off: int) -> np.ndarray:
        key, slot, src = self.keys[i], self.source.slots[i], self.source
        self.healed += 1
        self.warn(f"cache entry {key} failed its checksum; re-tokenized (counted as a miss)")
        self.stats.cache_hits -= 1
        self.stats.cache_misses += 1
        self._forget(key, seg, off, int(src.root_of_slot[slot]))
        spec: RowSpec | None
        if slot < src.n_text:
            spec = text_row_spec(src.rows.text_rows[slot])
        else:
            fr = src.rows.file_rows[slot - src.n_text]
            got = read_file_row(fr)
            spec = None if isinstance(got, str) else got.spec
            if spec is None or spec_key(self.tokenizer_sha256, spec) != key:
                raise CacheError(f"{fr.path}: changed during the run and its cache entry is damaged; run again")
        ids = self.encode(spec)
        self.in_memory[key] = ids
        self.entries[i, SEG] = IN_MEMORY
        return ids

    def _forget(self, key: str, seg: int, off: int, root: int) -> None:
        try:
            conn = connect(self.store_dir)
            with write_tx(conn):
                delete_entry(conn, key, seg, off)
            conn.close()
            if root >= 0:
                state = connect_state(self.state_dir)
                with write_tx(state):
                    state.execute("DELETE FROM stat_snapshots WHERE tok = ? AND root = ?", (self.source.tok, root))
                state.close()
        except (sqlite3.DatabaseError, CacheError, OSError):
            pass  # the next run finds the same damage and heals it then
