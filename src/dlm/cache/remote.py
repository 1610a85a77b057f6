"""The remote tier: a folder or an fsspec URL that stores share entries through.

Layout under the remote URL (every object immutable, named by the sha256 of its bytes):

    packs/<sha256>.pack    entry payloads back to back, each exactly as stored locally
                           (one zstd frame of little-endian uint16|uint32 ids)
    index/<sha256>.idx     one zstd frame: b"DLMRIDX1", u32 header length, header JSON
                           {"pack": <sha256>, "pack_bytes": B, "tokenizers": [sha...], "n": n},
                           then n-long arrays: key u8[n,16], tokenizer u16 (position in
                           "tokenizers"), offset u64, nbytes u32, ntokens u32, n_prompt u32,
                           dtype u8, checksum i64 (xxh3_64 of the payload, as locally)

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

import hashlib
import json
import math
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import zstandard

from dlm.cache.index import ENTRY_COLS, insert_entries, meta_check
from dlm.cache.schema import key_blob, key_text, tokenizer_id, write_tx
from dlm.cache.segments import SegmentReader, SegmentWriter, unpack_ids
from dlm.errors import CacheError

IDX_MAGIC = b"DLMRIDX1"
PACK_BYTES = 16 << 20
FETCH_BATCH = 8
REMOTE_TIMEOUT_S = 30.0  # default deadline of one remote call; `DLM_CACHE_REMOTE_TIMEOUT` sets another
MAX_REMOTE_TIMEOUT_S = 86400.0
_FIELDS = (("offset", "<u8"), ("nbytes", "<u4"), ("ntokens", "<u4"), ("n_prompt", "<u4"),
           ("dtype", "u1"), ("checksum", "<i8"))
T = TypeVar("T")


class RemoteUnavailable(CacheError):
    """The remote did not answer within the deadline, or failed."""


def resolve_remote(setting: str | None, override: str | None = None, base_dir: Path | None = None) -> str | None:
    """The remote URL of a run: `override` (`--cache-remote`), else `$DLM_CACHE_REMOTE`,
    else `setting` (`training.cache.remote`, a relative folder resolved against
    `base_dir`). An empty string turns the remote off."""
    url = override if override is not None else os.environ.get("DLM_CACHE_REMOTE", setting)
    if not url:
        return None
    if "://" not in url and base_dir is not None and not os.path.isabs(os.path.expanduser(url)):
        return str(base_dir / url)
    return os.path.expanduser(url) if "://" not in url else url


def remote_timeout_s() -> float:
    """The deadline of one remote call in seconds: `$DLM_CACHE_REMOTE_TIMEOUT`, else
    `REMOTE_TIMEOUT_S`. Read when a remote is first used, so a bad value breaks no run
    that has no remote.

    Raises:
        CacheError: the variable is not a number of seconds in (0, 86400].
    """
    raw = os.environ.get("DLM_CACHE_REMOTE_TIMEOUT", "").strip()
    if not raw:
        return REMOTE_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= MAX_REMOTE_TIMEOUT_S):
        raise CacheError(
            f"DLM_CACHE_REMOTE_TIMEOUT={raw!r}: should be a number of seconds above 0 and at most "
            f"{MAX_REMOTE_TIMEOUT_S:g} (default {REMOTE_TIMEOUT_S:g}); fix or unset it"
        )
    return value


def bounded(fn: Callable[[], T], timeout_s: float, what: str) -> T:
    """Run `fn` in a daemon thread and wait at most `timeout_s` seconds.

    Raises:
        RemoteUnavailable: it timed out or raised (the thread is abandoned).
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc

    worker = threading.Thread(target=target, name="dlm-cache-remote", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise RemoteUnavailable(f"{what}: no answer within {timeout_s:g} s")
    if "error" in box:
        exc = box["error"]
        if isinstance(exc, RemoteUnavailable):
            raise exc
        raise RemoteUnavailable(f"{what}: {type(exc).__name__}: {exc}")
    return box["value"]


class RemoteStore:
    """Objects under one remote URL, through fsspec (see module docstring)."""

    def __init__(self, url: str, timeout_s: float | None = None) -> None:
        """Open the file system of `url` under the deadline: many fsspec file systems
        (ftp, hdfs, sftp, github) connect when they are made.

        Raises:
            RemoteUnavailable: the file system cannot be made (refused, silent past
                the deadline, an unknown protocol, a missing driver).
            CacheError: `DLM_CACHE_REMOTE_TIMEOUT` is not a valid number of seconds.
        """
        timeout_s = remote_timeout_s() if timeout_s is None else timeout_s
        self.url, self.timeout_s = url, timeout_s
        options: dict[str, Any] = {}
        if url.startswith(("s3://", "s3a://")):
            options = {"config_kwargs": {"connect_timeout": min(timeout_s, 10), "read_timeout": timeout_s,
                                         "retries": {"max_attempts": 2}}, "skip_instance_cache": True}

        def open_fs() -> tuple[Any, str]:
            import fsspec

            try:
                return fsspec.core.url_to_fs(url, **options)
            except ImportError as exc:
                raise RemoteUnavailable(
                    f"{url}: cannot open this remote ({exc}); for s3:// install dlm[s3]") from None

        self.fs, self.root = bounded(open_fs, timeout_s, f"{url}: opening the remote")
        self.root = self.root.rstrip("/")
        self.local = "file" in (self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,))

    def _path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def list_indexes(self) -> dict[str, int]:
        """Index object name -> size in bytes (-1 when the remote does not say), by name."""
        def run() -> dict[str, int]:
            try:
                found = self.fs.ls(self._path("index"), detail=True)
            except FileNotFoundError:
                return {}
            sizes = {str(info["name"]).rstrip("/").rsplit("/", 1)[-1]: info.get("size") for info in found}
            return {name: int(size) if isinstance(size, int) else -1
                    for name, size in sorted(sizes.items()) if name.endswith(".idx")}

        return bounded(run, self.timeout_s, f"{self.url}: listing index/")

    def fetch(self, names: list[str]) -> dict[str, bytes | None]:
        """name -> bytes (None: missing or unreadable), fetched concurrently where fsspec can."""
        paths = [self._path(n) for n in names]

        def run() -> dict[str, bytes | None]:
            got = self.fs.cat(paths, on_error="return") if paths else {}
            by_base = {str(k).rstrip("/").rsplit("/", 1)[-1]: v for k, v in got.items()}
            return {n: (v if isinstance(v, bytes) else None)
                    for n, v in zip(names, (by_base.get(n.rsplit("/", 1)[-1]) for n in names))}

        return bounded(run, self.timeout_s * max(1, len(names) // FETCH_BATCH), f"{self.url}: fetching")

    def put(self, name: str, data: bytes) -> None:
        """Write one immutable object (skipped when it exists: same name, same bytes)."""
        path = self._path(name)

        def run() -> None:
            if self.fs.exists(path):
                return
            self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            if self.local:  # a reader must never see a half-written file
                tmp = f"{path}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
                self.fs.pipe_file(tmp, data)
                os.replace(tmp, path)
            else:
                self.fs.pipe_file(path, data)

        bounded(run, self.timeout_s + len(data) / (1 << 20), f"{self.url}: writing {name}")


# index objects -------------------------------------------------------------------

@dataclass
class PackIndex:
    pack: str
    pack_bytes: int
    tokenizers: list[str]
    keys: np.ndarray  # u8 [n, 16]
    tok: np.ndarray   # u16 [n]
    cols: dict[str, np.ndarray]


def encode_index(index: PackIndex) -> bytes:
    header = json.dumps({"pack": index.pack, "pack_bytes": index.pack_bytes,
                         "tokenizers": index.tokenizers, "n": int(index.keys.shape[0])}, sort_keys=True).encode()
    parts = [IDX_MAGIC, np.array([len(header)], "<u4").tobytes(), header,
             index.keys.astype("u1").tobytes(), index.tok.astype("<u2").tobytes()]
    parts += [index.cols[name].astype(dt).tobytes() for name, dt in _FIELDS]
    return zstandard.ZstdCompressor(level=3).compress(b"".join(parts))


def decode_index(blob: bytes) -> PackIndex | None:
    """The index in an object's bytes, or None when it is not one (damaged, foreign)."""
    try:
        raw = zstandard.ZstdDecompressor().decompress(blob, max_output_size=1 << 30)
        if raw[:8] != IDX_MAGIC:
            return None
        hlen = int(np.frombuffer(raw, "<u4", 1, 8)[0])
        header = json.loads(raw[12 : 12 + hlen])
        n, off = int(header["n"]), 12 + hlen
        if len(raw) != off + n * (16 + 2 + 8 + 4 + 4 + 4 + 1 + 8):
            return None
        keys = np.frombuffer(raw, "u1", n * 16, off).reshape(n, 16)
        off += n * 16
        tok = np.frombuffer(raw, "<u2", n, off)
        off += n * 2
        cols = {}
        for name, dt in _FIELDS:
            cols[name] = np.frombuffer(raw, dt, n, off).astype(np.int64)
            off += n * np.dtype(dt).itemsize
        if n and int(tok.max()) >= len(header["tokenizers"]):
            return None
        return PackIndex(str(header["pack"]), int(header["pack_bytes"]), list(header["tokenizers"]), keys, tok, cols)
    except (zstandard.ZstdError, ValueError, KeyError, TypeError, json.JSONDecodeError):
        return None


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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

    def __init__(self, url: str, conn: sqlite3.Connection, store_dir: Path, warn: Callable[[str], None],
                 writer: SegmentWriter | None = None, timeout_s: float | None = None) -> None:
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
            self._forget_gone(seen - set(listed))
            rejected = dict(self.conn.execute(
                "SELECT name, size FROM remote_rejected WHERE remote = ?", (self.rid,)).fetchall())
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
        self._reject(bad, set(listed))
        if unread:
            self.warn(f"{self.url}/index/: {unread} index objects could not be read; tried again next run")
        self.synced = True
        return added

    def _reject(self, bad: list[tuple[str, int]], listed: set[str]) -> None:
        """Remember index objects that failed their check (by name and size: one
        rewritten at another size is fetched again) and report them in one line; forget
        those no longer listed."""
        with write_tx(self.conn):
            self.conn.executemany("INSERT OR REPLACE INTO remote_rejected VALUES (?, ?, ?)",
                                  [(self.rid, name, size) for name, size in bad])
            gone = [(self.rid, n) for (n,) in self.conn.execute(
                "SELECT name FROM remote_rejected WHERE remote = ?", (self.rid,)) if n not in listed]
            self.conn.executemany("DELETE FROM remote_rejected WHERE remote = ? AND name = ?", gone)
        if bad:
            more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
            self.warn(f"{self.url}/index/: {len(bad)} damaged or foreign index objects ignored (misses, never "
                      f"wrong ids; not fetched again while unchanged): {bad[0][0]}{more}")

    def _forget_gone(self, gone: set[str]) -> None:
        """Index objects no longer listed (the remote was emptied or recreated): what they
        listed is no longer there, so it is neither pulled nor assumed pushed."""
        if not gone:
            return
        with write_tx(self.conn):
            for name in gone:
                self.conn.execute("DELETE FROM remote_entries WHERE remote = ? AND idx = ?", (self.rid, name))
                self.conn.execute("DELETE FROM remote_seen WHERE remote = ? AND name = ?", (self.rid, name))

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
        cols = [toks[index.tok[order].astype(np.int64)].tolist()] + [index.cols[f][order].tolist() for f, _ in _FIELDS]
        rid = self.rid
        rows = [(rid, keys[16 * i : 16 * i + 16], c[0], name, index.pack, *c[1:])
                for i, c in enumerate(zip(*cols))]
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
                " WHERE r.remote = ? AND r.tok = ? AND e.key IS NULL", (self.rid, tok)).fetchall()
            return sorted(p for (p,) in rows)
        blobs = [key_blob(k) for k in dict.fromkeys(keys)]
        packs: set[str] = set()
        for start in range(0, len(blobs), 500):
            chunk = blobs[start : start + 500]
            marks = ",".join("?" * len(chunk))
            packs.update(p for (p,) in self.conn.execute(
                f"SELECT DISTINCT pack FROM remote_entries WHERE remote = ? AND key IN ({marks})", (self.rid, *chunk)))
        return sorted(packs)

    def _admit_pack(self, pack: str, blob: bytes | None) -> int:
        rows = self.conn.execute(
            "SELECT key, tok, offset, nbytes, ntokens, n_prompt, dtype, checksum FROM remote_entries"
            " WHERE remote = ? AND pack = ? ORDER BY offset", (self.rid, pack)).fetchall()
        if blob is None or sha256_hex(blob) != pack:
            self.pulled.rejected += 1
            self.warn(f"{self.url}/packs/{pack}.pack: missing, truncated or altered (sha256 differs); "
                      "its entries are misses")
            with write_tx(self.conn):  # forget it; its index is read again next time
                idx = {n for (n,) in self.conn.execute(
                    "SELECT DISTINCT idx FROM remote_entries WHERE remote = ? AND pack = ?", (self.rid, pack))}
                self.conn.execute("DELETE FROM remote_entries WHERE remote = ? AND pack = ?", (self.rid, pack))
                self.conn.executemany("DELETE FROM remote_seen WHERE remote = ? AND name = ?",
                                      [(self.rid, n) for n in idx])
            return 0
        self.pulled.objects += 1
        self.pulled.bytes += len(blob)
        present = {k for (k,) in self.conn.execute(
            "SELECT e.key FROM entries e JOIN remote_entries r ON r.key = e.key WHERE r.remote = ? AND r.pack = ?",
            (self.rid, pack))}
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
        cols = np.array([[seg, o, *g[3], 0, now] for g, o in zip(good, offsets)], dtype=np.int64)
        cols[:, 7] = meta_check(cols)
        rows = sorted((key_text(g[0]), g[1], *c) for g, c in zip(good, cols.tolist()))
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
        sql = (f"SELECT e.key, t.sha, {', '.join('e.' + c for c in ENTRY_COLS.split(', ')[:7])} FROM entries e"
               " JOIN tokenizers t ON t.id = e.tok LEFT JOIN remote_entries r ON r.remote = ? AND r.key = e.key"
               " WHERE r.key IS NULL")
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
        cols = {"offset": offsets, "nbytes": np.array([len(b[2]) for b in batch]),
                "ntokens": np.array([b[3] for b in batch]), "n_prompt": np.array([b[4] for b in batch]),
                "dtype": np.array([b[5] for b in batch]), "checksum": np.array([b[6] for b in batch], dtype=np.int64)}
        index = PackIndex(pack, len(data), shas, np.frombuffer(b"".join(b[0] for b in batch), "u1").reshape(-1, 16),
                          np.array([shas.index(b[1]) for b in batch]), cols)
        blob = encode_index(index)
        name = sha256_hex(blob) + ".idx"
        self.remote.put(f"packs/{pack}.pack", data)
        self.remote.put(f"index/{name}", blob)
        self._admit_index(name, blob)
        self.pushed.objects += 2
        self.pushed.bytes += len(data)
        self.pushed.entries += len(batch)
        return len(batch)
