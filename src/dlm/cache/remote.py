"""The remote tier: a folder or an fsspec URL that stores share entries through.

The objects (packs and index objects) and the store that reaches them are in
`dlm.cache.remotestore`, whose names this module re-exports.

A push writes its packs, then their index objects (a reader never finds an index
whose pack is missing; a push killed in between leaves an unreferenced pack, never a
broken one). Nothing is overwritten in place and names are content hashes, so any
number of machines may push at once. Every object is verified on read (its sha256
against its name, then each entry's checksum and length when admitted locally):
a truncated, foreign, bit-flipped or overwritten object is a miss and a warning,
never wrong ids. Only entries travel; stat snapshots name one machine's paths.

Local bookkeeping lives in the store's index (`remotes`, `remote_seen`: index objects
already read, `remote_entries`: what each remote holds, `remote_rejected`: index objects
that failed their check, with their size: not fetched again while the remote lists them
at that size, and reported in one line when first met). Every remote call runs under
a deadline (`REMOTE_TIMEOUT_S`); a remote that does not answer, or fails, gives one
warning and the run goes on with the local store alone.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zstandard

from dlm.cache.index import ENTRY_COLS, insert_entries, meta_check
from dlm.cache.remotestore import (
    FETCH_BATCH,
    INDEX_FIELDS,
    PACK_BYTES,
    REMOTE_TIMEOUT_S,
    PackIndex,
    RemoteStore,
    RemoteUnavailable,
    bounded,
    decode_index,
    encode_index,
    remote_timeout_s,
    resolve_remote,
    sha256_hex,
)
from dlm.cache.schema import key_blob, key_text, tokenizer_id, write_tx
from dlm.cache.segments import SegmentReader, SegmentWriter, unpack_ids

__all__ = [
    "FETCH_BATCH",
    "PACK_BYTES",
    "REMOTE_TIMEOUT_S",
    "PackIndex",
    "RemoteCounts",
    "RemoteStore",
    "RemoteTier",
    "RemoteUnavailable",
    "bounded",
    "decode_index",
    "encode_index",
    "remote_timeout_s",
    "resolve_remote",
    "sha256_hex",
]


def forget_indexes(conn: sqlite3.Connection, rid: int, gone: set[str]) -> None:
    """Index objects no longer listed (the remote was emptied or recreated): what they
    listed is no longer there, so it is neither pulled nor assumed pushed."""
    if not gone:
        return
    with write_tx(conn):
        for name in gone:
            conn.execute("DELETE FROM remote_entries WHERE remote = ? AND idx = ?", (rid, name))
            conn.execute("DELETE FROM remote_seen WHERE remote = ? AND name = ?", (rid, name))


def remember_rejected(conn: sqlite3.Connection, rid: int, bad: list[tuple[str, int]], listed: set[str]) -> None:
    """Remember index objects that failed their check, by (name, size in bytes): one
    rewritten at another size is fetched again. Forget those no longer listed."""
    with write_tx(conn):
        conn.executemany(
            "INSERT OR REPLACE INTO remote_rejected VALUES (?, ?, ?)", [(rid, name, size) for name, size in bad]
        )
        gone = [
            (rid, n)
            for (n,) in conn.execute("SELECT name FROM remote_rejected WHERE remote = ?", (rid,))
            if n not in listed
        ]
        conn.executemany("DELETE FROM remote_rejected WHERE remote = ? AND name = ?", gone)


@dataclass
class RemoteCounts:
    """What one sync, pull or push moved. Bytes are stored (compressed) bytes."""

    entries: int = 0
    bytes: int = 0
    objects: int = 0
    rejected: int = 0
    seconds: float = 0.0


# the tier: local bookkeeping + pull + push ---------------------------------------


class RemoteTier:
    """Pull-through and push of one store against one remote.

    Args:
        url: the remote (see `resolve_remote`).
        conn: the store's index connection. store_dir: the store folder.
        warn: called with one line per problem (a bad object, an unreachable remote).
        writer: the segment writer pulled entries are appended with (default: a new one).
    """

    def __init__(
        self,
        url: str,
        conn: sqlite3.Connection,
        store_dir: Path,
        warn: Callable[[str], None],
        writer: SegmentWriter | None = None,
        timeout_s: float | None = None,
    ) -> None:
        self.url, self.conn, self.store_dir, self.warn = url, conn, Path(store_dir), warn
        self.writer = writer
        self.alive = True
        self.failure: str | None = None  # why the remote is down, once it is
        self.pulled, self.pushed = RemoteCounts(), RemoteCounts()
        try:
            self.remote: RemoteStore | None = RemoteStore(url, timeout_s)
        except RemoteUnavailable as exc:
            self._down(exc)
            self.remote = None
        with write_tx(conn):
            conn.execute("INSERT OR IGNORE INTO remotes(url) VALUES (?)", (url,))
            self.rid = conn.execute("SELECT id FROM remotes WHERE url = ?", (url,)).fetchone()[0]
        self.synced = False

    def _down(self, exc: Exception) -> None:
        if self.alive:
            self.failure = str(exc)
            self.warn(f"cache remote unavailable, continuing with the local store only ({exc})")
        self.alive = False

    def sync(self) -> int:
        """Read index objects not seen yet; returns how many were added."""
        if not self.alive or self.remote is None:
            return 0
        try:
            listed = self.remote.list_indexes()
            seen = {n for (n,) in self.conn.execute("SELECT name FROM remote_seen WHERE remote = ?", (self.rid,))}
            forget_indexes(self.conn, self.rid, seen - set(listed))
            rejected = dict(
                self.conn.execute("SELECT name, size FROM remote_rejected WHERE remote = ?", (self.rid,)).fetchall()
            )
            new = [n for n, size in listed.items() if n not in seen and rejected.get(n) != size]
            added, unread, bad = 0, 0, []
            for start in range(0, len(new), FETCH_BATCH * 8):
                chunk = new[start : start + FETCH_BATCH * 8]
                for name, blob in self.remote.fetch([f"index/{n}" for n in chunk]).items():
                    got = self._admit_index(name.rsplit("/", 1)[-1], blob)
                    added += got > 0
                    if got < 0 and blob is None:
                        unread += 1
                    elif got < 0 and blob is not None:
                        bad.append((name.rsplit("/", 1)[-1], len(blob)))
        except RemoteUnavailable as exc:
            self._down(exc)
            return 0
        remember_rejected(self.conn, self.rid, bad, set(listed))
        if bad:
            more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
            self.warn(
                f"{self.url}/index/: {len(bad)} damaged or foreign index objects ignored (misses, never "
                f"wrong ids; not fetched again while unchanged): {bad[0][0]}{more}"
            )
        if unread:
            self.warn(f"{self.url}/index/: {unread} index objects could not be read; tried again next run")
        self.synced = True
        return added

    def _admit_index(self, name: str, blob: bytes | None) -> int:
        """1: admitted; -1: missing, unreadable, damaged or foreign (counted in
        `pulled.rejected`; the caller reports it)."""
        index = decode_index(blob) if blob is not None and sha256_hex(blob) == name.removesuffix(".idx") else None
        if index is None:
            self.pulled.rejected += 1
            return -1
        toks = np.array([tokenizer_id(self.conn, sha) for sha in index.tokenizers], dtype=np.int64)
        order = np.lexsort(index.keys.T[::-1])  # key order: B-tree inserts stay sequential
        keys = index.keys[order].tobytes()
        cols = [toks[index.tok[order].astype(np.int64)].tolist()] + [
            index.cols[f][order].tolist() for f, _ in INDEX_FIELDS
        ]
        rid = self.rid
        rows = [
            (rid, keys[16 * i : 16 * i + 16], c[0], name, index.pack, *c[1:])
            for i, c in enumerate(zip(*cols, strict=False))
        ]
        with write_tx(self.conn):
            self.conn.executemany("INSERT OR IGNORE INTO remote_entries VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
            self.conn.execute("INSERT OR IGNORE INTO remote_seen VALUES (?, ?)", (self.rid, name))
        return 1

    # pull ------------------------------------------------------------------------
    def pull(self, keys: Iterable[str] | None = None, tokenizer: str | None = None) -> int:
        """Fetch the packs holding `keys` (or every entry of `tokenizer`) that the local
        store lacks, and admit every verified entry of those packs; returns entries admitted.

        Raises:
            CacheError: the local disk is full (nothing half-written is ever indexed).
        """
        if not self.alive:
            return 0
        if not self.synced:
            self.sync()
        packs = self._packs_for(keys, tokenizer)
        admitted = 0
        started = time.perf_counter()
        for start in range(0, len(packs), FETCH_BATCH):
            if not self.alive or self.remote is None:
                break
            chunk = packs[start : start + FETCH_BATCH]
            try:
                blobs = self.remote.fetch([f"packs/{p}.pack" for p in chunk])
            except RemoteUnavailable as exc:
                self._down(exc)
                break
            for path, blob in blobs.items():
                admitted += self._admit_pack(path.rsplit("/", 1)[-1].removesuffix(".pack"), blob)
        self.pulled.seconds += time.perf_counter() - started
        return admitted

    def _packs_for(self, keys: Iterable[str] | None, tokenizer: str | None) -> list[str]:
        if keys is None:
            tok = tokenizer_id(self.conn, tokenizer or "", create=False)
            rows = self.conn.execute(
                "SELECT DISTINCT r.pack FROM remote_entries r LEFT JOIN entries e ON e.key = r.key"
                " WHERE r.remote = ? AND r.tok = ? AND e.key IS NULL",
                (self.rid, tok),
            ).fetchall()
            return sorted(p for (p,) in rows)
        blobs = [key_blob(k) for k in dict.fromkeys(keys)]
        packs: set[str] = set()
        for start in range(0, len(blobs), 500):
            chunk = blobs[start : start + 500]
            marks = ",".join("?" * len(chunk))
            packs.update(
                p
                for (p,) in self.conn.execute(
                    f"SELECT DISTINCT pack FROM remote_entries WHERE remote = ? AND key IN ({marks})",
                    (self.rid, *chunk),
                )
            )
        return sorted(packs)

    def _admit_pack(self, pack: str, blob: bytes | None) -> int:
        rows = self.conn.execute(
            "SELECT key, tok, offset, nbytes, ntokens, n_prompt, dtype, checksum FROM remote_entries"
            " WHERE remote = ? AND pack = ? ORDER BY offset",
            (self.rid, pack),
        ).fetchall()
        if blob is None or sha256_hex(blob) != pack:
            self.pulled.rejected += 1
            self.warn(
                f"{self.url}/packs/{pack}.pack: missing, truncated or altered (sha256 differs); its entries are misses"
            )
            with write_tx(self.conn):  # forget it; its index is read again next time
                idx = {
                    n
                    for (n,) in self.conn.execute(
                        "SELECT DISTINCT idx FROM remote_entries WHERE remote = ? AND pack = ?", (self.rid, pack)
                    )
                }
                self.conn.execute("DELETE FROM remote_entries WHERE remote = ? AND pack = ?", (self.rid, pack))
                self.conn.executemany(
                    "DELETE FROM remote_seen WHERE remote = ? AND name = ?", [(self.rid, n) for n in idx]
                )
            return 0
        self.pulled.objects += 1
        self.pulled.bytes += len(blob)
        present = {
            k
            for (k,) in self.conn.execute(
                "SELECT e.key FROM entries e JOIN remote_entries r ON r.key = e.key WHERE r.remote = ? AND r.pack = ?",
                (self.rid, pack),
            )
        }
        dctx = zstandard.ZstdDecompressor()
        good, bad = [], 0
        for key, tok, off, nb, nt, npr, dt, ck in rows:
            if key in present:
                continue
            payload = blob[off : off + nb]
            if len(payload) != nb or unpack_ids(payload, nt, dt, ck, dctx) is None:
                bad += 1
                continue
            good.append((key, tok, payload, (nb, nt, npr, dt, ck)))
            present.add(key)
        if bad:
            self.warn(f"{self.url}/packs/{pack}.pack: {bad} entries failed their checksum; skipped")
        if not good:
            return 0
        writer = self.writer or SegmentWriter(self.store_dir, self.conn)
        try:
            seg, offsets = writer.append([g[2] for g in good])
        finally:
            if self.writer is None:
                writer.close()
        now = int(time.time())
        cols = np.array([[seg, o, *g[3], 0, now] for g, o in zip(good, offsets, strict=False)], dtype=np.int64)
        cols[:, 7] = meta_check(cols)
        rows = sorted((key_text(g[0]), g[1], *c) for g, c in zip(good, cols.tolist(), strict=False))
        with write_tx(self.conn):
            insert_entries(self.conn, rows)
        self.pulled.entries += len(good)
        return len(good)

    # push ------------------------------------------------------------------------
    def push(self, keys: Iterable[str] | None = None) -> int:
        """Send local entries (of `keys`, or all) the remote lacks; returns entries sent."""
        if not self.alive or self.remote is None:
            return 0
        if not self.synced:
            self.sync()
            if not self.alive:
                return 0
        started = time.perf_counter()
        rows = self._unpushed(keys)
        reader = SegmentReader(self.store_dir)
        names = dict(self.conn.execute("SELECT id, name FROM segments"))
        batch: list[tuple] = []
        size = sent = 0
        try:
            for row in rows:
                key, sha, seg, off, nb, nt, npr, dt, ck = row
                if not reader.open(seg, names.get(seg, "")) or reader.read(seg, off, nb, nt, dt, ck) is None:
                    continue
                batch.append((key, sha, os.pread(reader.fds[seg], nb, off), nt, npr, dt, ck))
                size += nb
                if size >= PACK_BYTES:
                    sent += self._push_pack(batch)
                    batch, size = [], 0
            if batch:
                sent += self._push_pack(batch)
        except RemoteUnavailable as exc:
            self._down(exc)
        finally:
            reader.close()
        self.pushed.seconds += time.perf_counter() - started
        return sent

    def _unpushed(self, keys: Iterable[str] | None) -> list[tuple]:
        sql = (
            f"SELECT e.key, t.sha, {', '.join('e.' + c for c in ENTRY_COLS.split(', ')[:7])} FROM entries e"
            " JOIN tokenizers t ON t.id = e.tok LEFT JOIN remote_entries r ON r.remote = ? AND r.key = e.key"
            " WHERE r.key IS NULL"
        )
        if keys is None:
            return self.conn.execute(sql + " ORDER BY e.segment, e.offset", (self.rid,)).fetchall()
        wanted = {key_blob(k) for k in keys}
        return [r for r in self.conn.execute(sql + " ORDER BY e.segment, e.offset", (self.rid,)) if r[0] in wanted]

    def _push_pack(self, batch: list[tuple]) -> int:
        assert self.remote is not None
        data = b"".join(b[2] for b in batch)
        pack = sha256_hex(data)
        shas = sorted({b[1] for b in batch})
        offsets = np.cumsum([0] + [len(b[2]) for b in batch[:-1]])
        cols = {
            "offset": offsets,
            "nbytes": np.array([len(b[2]) for b in batch]),
            "ntokens": np.array([b[3] for b in batch]),
            "n_prompt": np.array([b[4] for b in batch]),
            "dtype": np.array([b[5] for b in batch]),
            "checksum": np.array([b[6] for b in batch], dtype=np.int64),
        }
        index = PackIndex(
            pack,
            len(data),
            shas,
            np.frombuffer(b"".join(b[0] for b in batch), "u1").reshape(-1, 16),
            np.array([shas.index(b[1]) for b in batch]),
            cols,
        )
        blob = encode_index(index)
        name = sha256_hex(blob) + ".idx"
        self.remote.put(f"packs/{pack}.pack", data)
        self.remote.put(f"index/{name}", blob)
        self._admit_index(name, blob)
        self.pushed.objects += 2
        self.pushed.bytes += len(data)
        self.pushed.entries += len(batch)
        return len(batch)
