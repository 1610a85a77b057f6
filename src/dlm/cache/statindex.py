"""The stat index: which files of a source root are unchanged, without reading them.

One snapshot per (tokenizer, source root), a row of `stat_snapshots` in the index:
the files of the root's latest run, each with the stat it had when it was read and
what reading it gave. Stored as one binary blob so a warm run loads and compares
tens of thousands of files with NumPy instead of one SQL row and tuple per file.

Blob layout (little-endian, stored as one zstd frame, level 3), version 1:

    b"DLMSTAT1"  u64 n  u64 relpath_bytes
    i64 size[n]  i64 mtime_ns[n]  i64 ctime_ns[n]  u64 ino[n]  i64 recorded_ns[n]
    i64 entry[n, 9]        -- the row's entry E (see dlm.cache.index), where it was read
    u8  digest[n, 16]      -- xxh3_128 of the row key ("xxh3_128:" + hex)
    u8  flags[n]           -- bit 0 lossy, bit 1 skipped, bit 2 has entry
    u8  reason[n]          -- skip reason code (REASONS; only content-derived ones are stored)
    relpaths: UTF-8 (surrogateescape), NUL-separated
    u64 xxh3_64 of everything above

A file is trusted when its (size, mtime_ns, ctime_ns, ino) equal the snapshot's and
both its mtime and its ctime are older than `recorded_ns - racy_ns` (git's
racy-timestamp rule: on a file system with coarse stamps, 1 s on ext4 with 128-byte
inodes, ext3, HFS+, many NFS/SMB exports, an edit in the same tick as the recording
keeps the stat unchanged; the ctime is checked too because `cp -p`, `touch -r`,
`tar x` and `rsync -t` put back an old mtime, never an old ctime). A snapshot
that fails its checksum or has another version is ignored: every file is re-read and
re-hashed (entries are still found by key), and a fresh snapshot is written.

A document with no snapshot of a root yet may start from another document's
(`sibling_snapshot`): the newest snapshot of the same root path, for the same
tokenizer, in a state that names the same store. A source row's key depends only on
the tokenizer, the relative path and the content, so the same trust rule gives the
same keys. Skip records are dropped from it (a file skipped as too large under one
document's cap may be taken under another's): those files are read again.

The recorded entry location stays valid while its segment file exists: segments are
immutable and never reused, and each read checks the entry's checksum. A warm run
that serves a root from its snapshot does not touch the index; once the snapshot is
older than the touch granularity (an hour), the run refreshes `last_access` of the
root's entries and rewrites the snapshot, so LRU order stays right to the hour.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from operator import itemgetter
from pathlib import Path

import numpy as np
import xxhash
import zstandard

from dlm.cache.schema import KEY_PREFIX, key_blobs
from dlm.rows.types import FileRow

MAGIC = b"DLMSTAT1"
ZSTD_LEVEL = 3
REASONS = ("", "binary", "unreadable", "too-large")
# skips decided by a file's content, remembered while its stat is unchanged; a read that
# failed (`unreadable`: EIO, ESTALE, EMFILE, ENOMEM, an expired ticket) says nothing of
# the content and is retried next run
REMEMBERED = frozenset({"binary", "too-large"})
REMEMBERED_CODES = np.isin(np.arange(256), [REASONS.index(r) for r in REMEMBERED])  # by u8 code
LOSSY, SKIPPED, HAS_ENTRY = 1, 2, 4


@dataclass
class Snapshot:
    """A decoded snapshot: `n` files, arrays as in the module docstring."""

    relpaths: list[str]
    size: np.ndarray
    mtime: np.ndarray
    ctime: np.ndarray
    ino: np.ndarray
    recorded: np.ndarray
    entry: np.ndarray
    digest: np.ndarray
    flags: np.ndarray
    reason: np.ndarray
    written_ns: int = 0

    def keys(self, rows: np.ndarray) -> list[str]:
        """Row keys of the snapshot rows `rows`."""
        hexes = self.digest[rows].tobytes().hex()
        return [KEY_PREFIX + hexes[i : i + 32] for i in range(0, len(hexes), 32)]


# FileRow fields by position (size, mtime_ns, ctime_ns, ino; relpath): no field descriptor per call
_STAT = itemgetter(3, 4, 5, 6)
_RELPATH = itemgetter(2)


def file_stats(files: Sequence[FileRow]) -> np.ndarray:
    """int64 [n, 4]: size, mtime_ns, ctime_ns, ino of each FileRow (ino as two's complement).

    Times before 1970 are negative; an inode past 2**63 wraps to a negative int64.
    """
    if not files:
        return np.zeros((0, 4), dtype=np.int64)
    try:
        flat = np.fromiter(chain.from_iterable(map(_STAT, files)), dtype=np.uint64, count=4 * len(files))
        return flat.view(np.int64).reshape(len(files), 4)
    except OverflowError:  # a negative time: the signed path, field by field
        out = np.empty((len(files), 4), dtype=np.int64)
        for i, f in enumerate(files):
            out[i, :3] = (f.size, f.mtime_ns, f.ctime_ns)
            out[i, 3] = f.ino - (1 << 64) if f.ino >= (1 << 63) else f.ino
        return out


def trusted(
    snap: Snapshot | None, files: Sequence[FileRow], stats: np.ndarray, racy_ns: int
) -> tuple[np.ndarray, np.ndarray]:
    """(pos, ok): each file's row in the snapshot (-1: absent) and whether it is trusted
    (module docstring: an unchanged stat, and max(mtime, ctime) < recorded - `racy_ns`)."""
    if snap is None or not files:
        return np.full(len(files), -1, dtype=np.int64), np.zeros(len(files), dtype=bool)
    relpaths = list(map(_RELPATH, files))
    if relpaths == snap.relpaths:  # the same files in the same order: any warm run of an unchanged tree
        pos = np.arange(len(files), dtype=np.int64)
    else:
        where = dict(zip(snap.relpaths, range(len(snap.relpaths)), strict=True))
        pos = np.fromiter(map(where.get, relpaths, repeat(-1)), dtype=np.int64, count=len(files))
    p = np.maximum(pos, 0)
    ok = (
        (pos >= 0)
        & (snap.size[p] == stats[:, 0])
        & (snap.mtime[p] == stats[:, 1])
        & (snap.ctime[p] == stats[:, 2])
        & (snap.ino[p].view(np.int64) == stats[:, 3])
        & (np.maximum(stats[:, 1], stats[:, 2]) < snap.recorded[p] - racy_ns)
    )
    return pos, ok


def encode(snap: Snapshot) -> bytes:
    n = len(snap.relpaths)
    names = "\0".join(snap.relpaths).encode("utf-8", "surrogateescape")
    parts = [
        MAGIC,
        np.array([n, len(names)], dtype="<u8").tobytes(),
        snap.size.astype("<i8").tobytes(),
        snap.mtime.astype("<i8").tobytes(),
        snap.ctime.astype("<i8").tobytes(),
        snap.ino.astype("<u8").tobytes(),
        snap.recorded.astype("<i8").tobytes(),
        snap.entry.astype("<i8").tobytes(),
        snap.digest.astype(np.uint8).tobytes(),
        snap.flags.astype(np.uint8).tobytes(),
        snap.reason.astype(np.uint8).tobytes(),
        names,
    ]
    body = b"".join(parts)
    raw = body + np.array([xxhash.xxh3_64_intdigest(body)], dtype="<u8").tobytes()
    return zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(raw)


def decode(stored: bytes) -> Snapshot | None:
    """The snapshot in a stored blob, or None when it is damaged or of another version."""
    try:
        blob = zstandard.ZstdDecompressor().decompress(stored)
    except zstandard.ZstdError:
        return None
    if len(blob) < 32 or blob[:8] != MAGIC:
        return None
    body, tail = memoryview(blob)[:-8], blob[-8:]  # views: the body is megabytes
    if int(np.frombuffer(tail, dtype="<u8")[0]) != xxhash.xxh3_64_intdigest(body):
        return None
    n, name_len = (int(v) for v in np.frombuffer(body, dtype="<u8", count=2, offset=8))
    if len(body) != 24 + n * (8 * 5 + 8 * 9 + 16 + 2) + name_len:
        return None
    off = 24

    def take(dtype: str, count: int) -> np.ndarray:
        nonlocal off
        arr = np.frombuffer(body, dtype=dtype, count=count, offset=off)
        off += arr.nbytes
        return arr

    size, mtime, ctime = take("<i8", n), take("<i8", n), take("<i8", n)
    ino, recorded = take("<u8", n), take("<i8", n)
    entry = take("<i8", n * 9).reshape(n, 9)
    digest = take("u1", n * 16).reshape(n, 16)
    flags, reason = take("u1", n), take("u1", n)
    names = str(body[off : off + name_len], "utf-8", "surrogateescape")
    relpaths = names.split("\0") if n else []
    return Snapshot(relpaths, size, mtime, ctime, ino, recorded, entry, digest, flags, reason)


def load(conn: sqlite3.Connection, tok: int, root: int) -> tuple[Snapshot | None, bool]:
    """(snapshot or None, whether a stored snapshot was damaged and ignored)."""
    row = conn.execute("SELECT data, written_ns FROM stat_snapshots WHERE tok = ? AND root = ?", (tok, root)).fetchone()
    if row is None:
        return None, False
    snap = decode(row[0])
    if snap is not None:
        snap.written_ns = int(row[1])
    return snap, snap is None


def sibling_snapshot(states: Sequence[Path], store: str, tokenizer_sha256: str, root: str | bytes) -> Snapshot | None:
    """The newest snapshot of `root` for `tokenizer_sha256` among other documents' state
    databases (`state.sqlite` paths) that were last used with the store `store` (its
    uuid), opened read-only; skip records cleared (module docstring). None when no
    readable one exists: a state that cannot be read, or a damaged snapshot, is passed over.
    """
    best: tuple[bytes, int] | None = None
    for path in states:
        if not path.is_file():
            continue
        try:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=1.0)
            try:
                same = conn.execute("SELECT v FROM state_meta WHERE k = 'store'").fetchone()
                row = (
                    None
                    if not same or same[0] != store
                    else conn.execute(
                        "SELECT s.data, s.written_ns FROM stat_snapshots s JOIN tokenizers t ON t.id = s.tok"
                        " JOIN roots r ON r.id = s.root WHERE t.sha = ? AND r.path = ?",
                        (tokenizer_sha256, root),
                    ).fetchone()
                )
            finally:
                conn.close()
        except sqlite3.Error:
            continue
        if row is not None and (best is None or int(row[1]) > best[1]):
            best = (row[0], int(row[1]))
    if best is None:
        return None
    snap = decode(best[0])
    if snap is None:
        return None
    snap.written_ns = best[1]
    snap.flags = np.where((snap.flags & SKIPPED) > 0, 0, snap.flags).astype(snap.flags.dtype)
    return snap


def save(conn: sqlite3.Connection, tok: int, root: int, snap: Snapshot, written_ns: int) -> None:
    """Replace the snapshot of (tok, root); call inside a write transaction."""
    conn.execute(
        "INSERT OR REPLACE INTO stat_snapshots(tok, root, written_ns, n, data) VALUES (?,?,?,?,?)",
        (tok, root, written_ns, len(snap.relpaths), encode(snap)),
    )


_NO_KEY = KEY_PREFIX + "0" * 32


def digests(keys: Sequence[str | None]) -> np.ndarray:
    """uint8 [len(keys), 16]: the 16 bytes of each `xxh3_128:<32 hex>` key (zeros for
    None), decoded together (`dlm.cache.schema.key_blobs`).

    Raises:
        ValueError: a key that is not `xxh3_128:` and 32 hex digits.
    """
    raw = key_blobs([k if k else _NO_KEY for k in keys])
    return np.frombuffer(raw, dtype=np.uint8).reshape(len(keys), 16)


def reason_code(reason: str | None) -> int:
    """Code of a skip reason that is remembered (`REMEMBERED`); 0 for any other (such a
    file is re-read next run)."""
    return REASONS.index(reason) if reason in REMEMBERED else 0


def keep_only(conn: sqlite3.Connection, tok: int, roots: Sequence[int]) -> None:
    """Drop every snapshot but those of (`tok`, `roots`), and roots no snapshot names:
    a document keeps the stat of its latest run only, so a job that checks out into a
    new folder each time, or a tokenizer change, does not grow the index. Call inside
    a write transaction."""
    marks = ",".join("?" * len(roots))
    conn.execute(f"DELETE FROM stat_snapshots WHERE tok != ? OR root NOT IN ({marks})", (tok, *roots))
    conn.execute("DELETE FROM roots WHERE id NOT IN (SELECT root FROM stat_snapshots)")
