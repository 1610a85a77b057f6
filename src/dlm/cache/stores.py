"""What one tokenize session opens: the store's index, the document's state, the segment
reader and writer, the lease, the remote tier; and the one repair every step may need
(a segment file that vanished).

Stat snapshots name entry locations of one store: a document's state last used with
another store (`DLM_CACHE_DIR` changed) forgets its snapshots when opened here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dlm.cache.remote import RemoteTier
from dlm.cache.schema import connect, connect_state, store_uuid, tokenizer_id, write_tx
from dlm.cache.segments import SegmentReader, SegmentWriter, WriteFn
from dlm.cache.shared import Lease


@dataclass
class Stores:
    """The open handles of a session (module docstring).

    Attributes:
        conn: the store's index. state: the document's state.
        store_id: the store's uuid. tokenizer_id, state_tokenizer_id: the tokenizer's id
            in each database.
        segment_names: segment id -> file name, read when hits are resolved.
        dropped: segments already dropped by `drop_segment` in this session.
    """

    store_dir: Path
    conn: sqlite3.Connection
    state: sqlite3.Connection
    store_id: str
    tokenizer_id: int
    state_tokenizer_id: int
    lease: Lease
    reader: SegmentReader
    writer: SegmentWriter
    remote: RemoteTier | None
    segment_names: dict[int, str] = field(default_factory=dict)
    dropped: set[int] = field(default_factory=set)

    def drop_segment(self, seg: int, warn: Callable[[str], None]) -> None:
        """A segment file that vanished (deleted by hand, lost with a disk): its entries
        and its row go, so this run stores fresh entries and the byte total stays true."""
        if seg in self.dropped:
            return
        self.dropped.add(seg)
        with write_tx(self.conn):
            n = self.conn.execute("DELETE FROM entries WHERE segment = ?", (seg,)).rowcount
            self.conn.execute("DELETE FROM segments WHERE id = ?", (seg,))
        if n:
            warn(f"a cache segment file is missing; its {n} entries were dropped and are re-tokenized")


def open_stores(
    store_dir: Path,
    state_dir: Path,
    doc: str,
    run_id: str,
    tokenizer_sha256: str,
    *,
    max_segment_bytes: int,
    segment_write: WriteFn,
    remote: str | None,
    warn: Callable[[str], None],
) -> Stores:
    """Open everything a session uses (module docstring).

    Raises:
        CacheError: a folder or index cannot be opened; a bad `DLM_CACHE_REMOTE_TIMEOUT`.
        sqlite3.DatabaseError, CacheIndexCorrupt: from the index (the caller quarantines).
    """
    conn = connect(store_dir)
    state = connect_state(state_dir)
    store_id = store_uuid(conn)
    _same_store(state, store_id)
    tok, state_tok = tokenizer_id(conn, tokenizer_sha256), tokenizer_id(state, tokenizer_sha256)
    lease = Lease(store_dir, doc, run_id)
    reader = SegmentReader(store_dir)
    writer = SegmentWriter(store_dir, conn, max_segment_bytes, segment_write)
    return Stores(
        store_dir=store_dir,
        conn=conn,
        state=state,
        store_id=store_id,
        tokenizer_id=tok,
        state_tokenizer_id=state_tok,
        lease=lease,
        reader=reader,
        writer=writer,
        remote=RemoteTier(remote, conn, store_dir, warn, writer) if remote else None,
    )


def _same_store(state: sqlite3.Connection, uuid: str) -> None:
    row = state.execute("SELECT v FROM state_meta WHERE k = 'store'").fetchone()
    if row and row[0] == uuid:
        return
    with write_tx(state):
        if row:
            state.execute("DELETE FROM stat_snapshots")
        state.execute("INSERT OR REPLACE INTO state_meta VALUES ('store', ?)", (uuid,))
