"""One store shared by documents: references, leases, migration, per-document verbs.

Entries live in one content-addressed store (`<store_dir>`, `dlm.paths.cache_store_dir`),
keyed by row key alone, so two documents over the same tree share every entry.
What belongs to one document stays in its own `<state_dir>/state.sqlite`
(`dlm.cache.schema.connect_state`): stat snapshots and run statistics.

- References: after each run the store records the sorted keys the document's rows
  used (`doc_refs`). Per-document prune and clear remove only entries no other
  document references.
- Leases: a running document holds an exclusive `flock` on
  `<store_dir>/leases/<run_id>-<pid>-<random>.lease` (the file holds its document id) for as long as
  its rows may be read; the lock dies with the process, so a kill -9 never leaves a
  stale lease. Eviction protects the references of every document with a live lease
  and every entry used since the oldest live lease began.
- Migration: a per-document cache from before the shared store (`<state_dir>/index.sqlite`
  with segments beside it) is moved into the store on first open: its segment files
  are hard-linked (copied across file systems) into the store, its entries inserted
  with their new segment ids, its run statistics kept; its stat snapshots are dropped
  (they name old segment ids), so the next run re-reads each file once and encodes none.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import xxhash

from dlm.cache.evict import compact, maint_lock
from dlm.cache.index import ENTRY_COLS, insert_entries, meta_check, totals
from dlm.cache.schema import (
    INDEX_NAME,
    connect,
    connect_state,
    key_blobs,
    key_text,
    read_tx,
    tokenizer_id,
    write_tx,
)
from dlm.cache.segments import segment_path
from dlm.errors import CacheError

LEASE_DIR = "leases"
LEASE_SUFFIX = ".lease"
LEASE_GRACE_S = 60.0


# references ------------------------------------------------------------------------


def pack_keys(keys: Iterable[str]) -> bytes:
    """Sorted unique 16-byte keys (`key_blob`), concatenated.

    Every run stores its keys, so a warm run over 78K files packs 78K keys: the checks
    and the hex decoding run once over all of them, and NumPy sorts and de-duplicates
    (each 16-byte key as two big-endian u64, so the order is the keys' byte order),
    rather than a Python call per key.

    Raises:
        ValueError: a key that is not `xxh3_128:<32 hex>`.
    """
    import numpy as np

    keys = list(keys)
    if not keys:
        return b""
    pairs = np.frombuffer(key_blobs(keys), dtype=">u8").reshape(-1, 2)
    pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
    first = np.ones(len(pairs), dtype=bool)
    first[1:] = (pairs[1:] != pairs[:-1]).any(axis=1)
    return pairs[first].tobytes()


def unpack_keys(blob: bytes) -> set[bytes]:
    return {blob[i : i + 16] for i in range(0, len(blob), 16)}


def save_refs(conn: sqlite3.Connection, doc: str, keys: Iterable[str]) -> None:
    """Record the keys of `doc`'s latest run; call inside a write transaction.

    A warm run's keys are usually those of the run before: the xxh3_128 of the key list
    is kept beside the packed keys, and when it is unchanged the row is left as it is
    (hashing the keys costs a small fraction of packing them).
    `updated_ns` is when the keys last changed.

    Raises:
        ValueError: a key that is not `xxh3_128:<32 hex>` (the row is not written).
    """
    keys = list(keys)
    digest = xxhash.xxh3_128_digest("\n".join(keys).encode("utf-8", "surrogateescape"))
    row = conn.execute("SELECT keys_xxh3 FROM doc_refs WHERE doc = ?", (doc,)).fetchone()
    if row is not None and row[0] == digest:
        return
    conn.execute(
        "INSERT OR REPLACE INTO doc_refs(doc, keys, updated_ns, keys_xxh3) VALUES (?, ?, ?, ?)",
        (doc, pack_keys(keys), time.time_ns(), digest),
    )


def refs_of(conn: sqlite3.Connection, docs: Iterable[str] | None = None, exclude: str | None = None) -> set[bytes]:
    """Union of the references of `docs` (None: every document), less `exclude`'s."""
    out: set[bytes] = set()
    for doc, blob in conn.execute("SELECT doc, keys FROM doc_refs").fetchall():
        if doc != exclude and (docs is None or doc in docs):
            out |= unpack_keys(blob)
    return out


# leases ----------------------------------------------------------------------------


class Lease:
    """A running document's hold on the store (see module docstring)."""

    def __init__(self, store_dir: Path, doc: str, run_id: str) -> None:
        folder = Path(store_dir) / LEASE_DIR
        self.path = folder / f"{run_id}-{os.getpid()}-{secrets.token_hex(4)}{LEASE_SUFFIX}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self.fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.write(self.fd, doc.encode("utf-8", "surrogateescape"))
        except OSError as exc:
            raise CacheError(f"{self.path}: cannot write a lease in the cache store ({exc})") from None
        self.started_s = int(time.time())

    def release(self) -> None:
        if self.fd is not None:
            self.path.unlink(missing_ok=True)
            os.close(self.fd)
            self.fd = None

    def __del__(self) -> None:
        self.release()


@dataclass(frozen=True)
class LiveLeases:
    docs: frozenset[str]
    oldest_start_s: int | None


def live_leases(store_dir: Path) -> LiveLeases:
    """Documents holding a live lease; stale lease files (their process died) are removed."""
    folder = Path(store_dir) / LEASE_DIR
    docs: set[str] = set()
    oldest: int | None = None
    if not folder.is_dir():
        return LiveLeases(frozenset(), None)
    now = time.time()
    for path in folder.glob(f"*{LEASE_SUFFIX}"):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:  # held: a live run
                docs.add(os.read(fd, 1 << 16).decode("utf-8", "surrogateescape"))
                started = int(st.st_mtime)
                oldest = started if oldest is None else min(oldest, started)
                continue
            if now - st.st_mtime > LEASE_GRACE_S:
                path.unlink(missing_ok=True)
        finally:
            os.close(fd)
    return LiveLeases(frozenset(docs), oldest)


def protected_keys(conn: sqlite3.Connection, store_dir: Path, doc: str) -> tuple[set[str], int | None]:
    """(keys referenced by running documents other than `doc`, whose own references
    the calling run is replacing; oldest live lease start in unix s)."""
    leases = live_leases(store_dir)
    others = leases.docs - {doc}
    if not leases.docs:
        return set(), None
    return {key_text(k) for k in refs_of(conn, others)} if others else set(), leases.oldest_start_s


# per-document verbs ----------------------------------------------------------------


@dataclass(frozen=True)
class DocumentClear:
    removed_entries: int
    removed_bytes: int
    shared_kept: int


def clear_document(store_dir: Path, state_dir: Path, doc: str, older_than_cutoff_s: int | None = None) -> DocumentClear:
    """Remove the entries only `doc` references (all of them, or those unused since
    `older_than_cutoff_s`), keep those another document or a running one uses, and
    forget `doc`'s state when clearing everything.

    Raises:
        CacheError: the store or the state cannot be opened or written.
    """
    conn = connect(store_dir)
    try:
        with maint_lock(store_dir):
            leases = live_leases(store_dir)
            mine_blob = conn.execute("SELECT keys FROM doc_refs WHERE doc = ?", (doc,)).fetchone()
            mine = unpack_keys(mine_blob[0]) if mine_blob else set()
            others = refs_of(conn, exclude=doc) | refs_of(conn, leases.docs - {doc})
            victims = sorted(mine - others)
            shared = len(mine) - len(victims)
            removed = freed = 0
            with write_tx(conn):
                for start in range(0, len(victims), 500):
                    chunk = victims[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    where = f"key IN ({marks})"
                    args: list[object] = list(chunk)
                    if older_than_cutoff_s is not None:
                        where += " AND last_access < ?"
                        args.append(older_than_cutoff_s)
                    row = conn.execute(
                        f"SELECT COUNT(*), COALESCE(SUM(nbytes), 0) FROM entries WHERE {where}", args
                    ).fetchone()
                    conn.execute(f"DELETE FROM entries WHERE {where}", args)
                    removed += row[0]
                    freed += row[1]
                if older_than_cutoff_s is None:
                    conn.execute("DELETE FROM doc_refs WHERE doc = ?", (doc,))
            compact(conn, store_dir)
        if older_than_cutoff_s is None and (Path(state_dir) / "state.sqlite").exists():
            state = connect_state(state_dir)
            with write_tx(state):
                for table in ("stat_snapshots", "roots", "runs"):
                    state.execute(f"DELETE FROM {table}")
            state.close()
    except (sqlite3.DatabaseError, OSError) as exc:
        raise CacheError(f"{store_dir}: cannot clear this document's entries ({exc}); make it writable") from None
    finally:
        conn.close()
    return DocumentClear(removed, freed, shared)


# migration -------------------------------------------------------------------------


def migrate_legacy(state_dir: Path, store_dir: Path) -> int:
    """Move a per-document cache in `state_dir` into the store (see module docstring);
    returns the entries moved (0 when there was nothing to migrate)."""
    state_dir, store_dir = Path(state_dir), Path(store_dir)
    legacy_index = state_dir / INDEX_NAME
    if state_dir.resolve() == store_dir.resolve() or not legacy_index.is_file():
        return 0
    with maint_lock(store_dir):
        if not legacy_index.is_file():
            return 0  # another process migrated it while we waited
        old = connect(state_dir)
        store = connect(store_dir)
        try:
            moved = _move_entries(old, store, state_dir, store_dir)
            _move_runs(old, state_dir)
        finally:
            old.close()
            store.close()
        for suffix in ("-wal", "-shm", ""):
            (state_dir / f"{INDEX_NAME}{suffix}").unlink(missing_ok=True)
        shutil.rmtree(state_dir / "segments", ignore_errors=True)
        (state_dir / "maint.lock").unlink(missing_ok=True)
    return moved


def _move_entries(old: sqlite3.Connection, store: sqlite3.Connection, state_dir: Path, store_dir: Path) -> int:
    with read_tx(old):
        segs = old.execute("SELECT id, name FROM segments WHERE live_entries > 0").fetchall()
        shas = dict(old.execute("SELECT id, sha FROM tokenizers"))
        rows = old.execute(f"SELECT key, tok, {ENTRY_COLS} FROM entries").fetchall()
    seg_map: dict[int, int] = {}
    for seg_id, name in segs:
        src, dst = segment_path(state_dir, name), segment_path(store_dir, name)
        if not src.exists():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        if not dst.exists():
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)
        with write_tx(store):  # read back in the transaction: compaction drops segments without entries
            store.execute("INSERT OR IGNORE INTO segments(name, created_ns) VALUES (?, ?)", (name, time.time_ns()))
            seg_map[seg_id] = store.execute("SELECT id FROM segments WHERE name = ?", (name,)).fetchone()[0]
    tok_map = {tid: tokenizer_id(store, sha) for tid, sha in shas.items()}
    keep = [r for r in rows if r[2] in seg_map and r[1] in tok_map]
    if not keep:
        return 0
    import numpy as np

    cols = np.array([r[2:] for r in keep], dtype=np.int64)
    cols[:, 0] = [seg_map[int(s)] for s in cols[:, 0]]
    ok = meta_check(np.array([r[2:] for r in keep], dtype=np.int64)) == cols[:, 7]  # damaged rows stay behind
    cols[:, 7] = meta_check(cols)
    before = totals(store)[1]
    with write_tx(store):
        insert_entries(
            store,
            [
                (key_text(r[0]), tok_map[r[1]], *c)
                for r, c, good in zip(keep, cols.tolist(), ok.tolist(), strict=False)
                if good
            ],
        )
    return totals(store)[1] - before


def _move_runs(old: sqlite3.Connection, state_dir: Path) -> None:
    runs = old.execute(
        "SELECT r.run_id, r.finished_ns, r.total, r.hits, r.misses, r.seconds, t.sha"
        " FROM runs r JOIN tokenizers t ON t.id = r.tok"
    ).fetchall()
    state = connect_state(state_dir)
    try:
        for *run, sha in runs:
            tok = tokenizer_id(state, sha)
            with write_tx(state):
                state.execute("INSERT OR IGNORE INTO runs VALUES (?,?,?,?,?,?,?)", (*run, tok))
    finally:
        state.close()
