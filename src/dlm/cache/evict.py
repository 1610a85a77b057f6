"""Keeping the cache bounded: LRU eviction, age pruning, compaction, orphan reclaim.

- Eviction: when live bytes pass `max_bytes`, entries are deleted oldest
  `last_access` first until live bytes are at most 90% of the cap. Keys of the
  current run are protected; when they alone exceed the cap the result says so
  (`over_cap`) and the caller stops admitting new entries.
- Pruning: entries not used for `older_than_s` seconds are deleted.
- Compaction: a closed segment (no writer holds its flock) whose live bytes fell to
  `min_live_fraction` of its size or less is rewritten: live entries are verified,
  copied into a new segment, the index is repointed in one transaction, then the old
  file is unlinked (open readers keep their descriptor). Corrupt entries are dropped.
- Orphans: segment files with no index row and no writer (a run killed before it
  registered them), index rows for segment files that vanished,
  and stale `*.tmp` files are reclaimed.

Maintenance runs under `<store_dir>/maint.lock` (a `filelock`), so two processes never
compact the same segment; readers and writers do not take it.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from dlm.cache.index import ENTRY_COLS, meta_check, totals
from dlm.cache.schema import key_text, write_tx
from dlm.cache.segments import (
    SEGMENT_SUFFIX,
    SegmentReader,
    SegmentWriter,
    is_locked,
    segment_dir,
    segment_path,
)

EVICT_TO_FRACTION = 0.9
COMPACT_LIVE_FRACTION = 0.5
ORPHAN_GRACE_S = 60.0
EVICT_SCAN = 5000
MAINT_LOCK = "maint.lock"


@dataclass(frozen=True)
class EvictionResult:
    """What eviction did. Bytes are stored (compressed) bytes.

    `over_cap`: protected entries alone exceed the target; nothing more could go.
    """

    evicted_entries: int
    evicted_bytes: int
    bytes_after: int
    over_cap: bool


@dataclass(frozen=True)
class CompactionResult:
    """Segments rewritten or removed, and bytes of segment files freed."""

    segments_rewritten: int
    segments_removed: int
    bytes_reclaimed: int
    corrupt_dropped: int
    orphans_removed: int


def maint_lock(store_dir: Path) -> FileLock:
    store_dir.mkdir(parents=True, exist_ok=True)
    return FileLock(str(store_dir / MAINT_LOCK))


def evict_lru(
    conn: sqlite3.Connection, target_bytes: int, protected: Collection[str], protect_since_s: int | None = None
) -> EvictionResult:
    """Delete least recently used, unprotected entries until live bytes <= target.
    Entries used at or after `protect_since_s` (a running document's start) stay too."""
    since = (1 << 62) if protect_since_s is None else protect_since_s
    evicted = evicted_bytes = 0
    over_cap = False
    while True:
        live, _ = totals(conn)
        if live <= target_bytes:
            break
        need = live - target_bytes
        victims, freed = [], 0
        oldest = conn.execute(
            "SELECT key, nbytes FROM entries WHERE last_access < ? ORDER BY last_access, key LIMIT ?",
            (since, EVICT_SCAN + len(protected)),
        ).fetchall()  # fully read: an open cursor would pin a stale snapshot
        for key, nbytes in oldest:
            if key_text(key) in protected:
                continue
            victims.append((key,))
            freed += nbytes
            if freed >= need or len(victims) >= EVICT_SCAN:
                break
        if not victims:
            over_cap = True
            break
        with write_tx(conn):
            conn.executemany("DELETE FROM entries WHERE key = ?", victims)
        evicted += len(victims)
        evicted_bytes += freed
    return EvictionResult(evicted, evicted_bytes, totals(conn)[0], over_cap)


def prune_older(conn: sqlite3.Connection, cutoff_s: int, protected: Collection[str] = ()) -> EvictionResult:
    """Delete entries whose `last_access` is before `cutoff_s` (unix seconds)."""
    rows = conn.execute("SELECT key, nbytes FROM entries WHERE last_access < ?", (cutoff_s,)).fetchall()
    rows = [(k, n) for k, n in rows if key_text(k) not in protected]
    with write_tx(conn):
        conn.executemany("DELETE FROM entries WHERE key = ?", [(k,) for k, _ in rows])
    freed = sum(n for _, n in rows)
    return EvictionResult(len(rows), freed, totals(conn)[0], False)


def compact(
    conn: sqlite3.Connection, store_dir: Path, min_live_fraction: float = COMPACT_LIVE_FRACTION
) -> CompactionResult:
    """Rewrite sparse closed segments and reclaim orphans (see module docstring)."""
    rewritten = removed = reclaimed = corrupt = 0
    orphans = reclaim_orphans(conn, store_dir)
    segs = conn.execute("SELECT id, name, live_bytes FROM segments ORDER BY id").fetchall()
    writer = SegmentWriter(store_dir, conn)
    try:
        for seg_id, name, live in segs:
            path = segment_path(store_dir, name)
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            if (writer.current and writer.current.id == seg_id) or is_locked(path):
                continue
            if live > 0 and live > size * min_live_fraction:
                continue
            if live > 0:
                corrupt += _move_live(conn, store_dir, writer, seg_id, name)
                rewritten += 1
            else:
                removed += 1
            with write_tx(conn):
                conn.execute("DELETE FROM entries WHERE segment = ?", (seg_id,))
                conn.execute("DELETE FROM segments WHERE id = ?", (seg_id,))
            path.unlink(missing_ok=True)
            reclaimed += size
    finally:
        writer.close()
    return CompactionResult(rewritten, removed, reclaimed, corrupt, orphans)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _move_live(conn: sqlite3.Connection, store_dir: Path, writer: SegmentWriter, seg_id: int, name: str) -> int:
    """Copy the verified live entries of one segment into `writer`; returns corrupt count."""
    rows = conn.execute(f"SELECT key, {ENTRY_COLS} FROM entries WHERE segment = ?", (seg_id,)).fetchall()
    reader = SegmentReader(store_dir)
    good, bad = [], 0
    if reader.open(seg_id, name):
        for key, seg, off, nb, nt, npr, dt, ck, _meta, _acc in rows:
            data = os.pread(reader.fds[seg_id], nb, off)
            if reader.read(seg, off, nb, nt, dt, ck) is None:
                bad += 1
                continue
            good.append((key, off, data, (nb, nt, npr, dt, ck)))
    reader.close()
    if not good:
        return bad
    new_id, offsets = writer.append([g[2] for g in good])
    import numpy as np

    cols = np.array([[new_id, o, *g[3]] for g, o in zip(good, offsets, strict=False)], dtype=np.int64)
    metas = meta_check(cols).tolist()
    with write_tx(conn):
        conn.executemany(
            "UPDATE entries SET segment = ?, offset = ?, meta = ? WHERE key = ? AND segment = ? AND offset = ?",
            [(new_id, o, m, g[0], seg_id, g[1]) for g, o, m in zip(good, offsets, metas, strict=False)],
        )
    return bad


def reclaim_orphans(conn: sqlite3.Connection, store_dir: Path, grace_s: float = ORPHAN_GRACE_S) -> int:
    """Remove unregistered unlocked segment files, stale temp files, rows of vanished segments."""
    removed = 0
    known = dict(conn.execute("SELECT name, id FROM segments"))
    now = time.time()
    folder = segment_dir(store_dir)
    if folder.is_dir():
        for path in folder.iterdir():
            name = path.name.removesuffix(SEGMENT_SUFFIX)
            if name in known or now - _mtime(path) < grace_s or is_locked(path):
                continue
            path.unlink(missing_ok=True)
            removed += 1
        gone = [sid for name, sid in known.items() if not segment_path(store_dir, name).exists()]
        if gone:
            with write_tx(conn):
                for sid in gone:
                    conn.execute("DELETE FROM entries WHERE segment = ?", (sid,))
                    conn.execute("DELETE FROM segments WHERE id = ?", (sid,))
            removed += len(gone)
    for tmp in store_dir.glob("*.tmp"):
        if now - _mtime(tmp) >= grace_s:
            tmp.unlink(missing_ok=True)
            removed += 1
    return removed


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def segment_bytes(store_dir: Path) -> int:
    """Bytes of all segment files (live and dead)."""
    folder = segment_dir(store_dir)
    return sum(_size(p) for p in folder.glob(f"*{SEGMENT_SUFFIX}")) if folder.is_dir() else 0
