"""Segment files: where cached ids live on disk.

    <store_dir>/segments/<name>.seg     name = <time_ns hex>-<pid>-<random hex>

A segment is a plain concatenation of entries. Each entry is one zstd frame (level 3,
content size in the frame header) of the row's ids as little-endian uint16 or uint32;
`attention_mask` is never stored. The segment has no header of its own: the index
(`schema.entries`) holds every entry's segment, offset, stored length, token count,
dtype and xxh3_64 checksum of the stored bytes. Bytes no index row points at are dead
(an evicted entry, or the tail a killed run wrote before committing) and compaction
reclaims them.

Contract:
- a segment is written by exactly one `SegmentWriter`, which holds an exclusive
  `flock` on it while open; once closed it is immutable. Nothing is ever rewritten in
  place: compaction copies live entries into a new segment and unlinks the old one, so
  a reader holding an open descriptor keeps reading valid bytes;
- a writer writes a batch, `fdatasync`s it, and only then commits the index rows, so
  the index never points at bytes that were not written;
- every read checks the checksum and the decompressed length; a mismatch is reported
  as `None` (a miss), never as wrong ids.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import sqlite3
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import xxhash
import zstandard

from dlm.cache.schema import write_tx
from dlm.errors import CacheError

if TYPE_CHECKING:  # numpy loads on first use: `dlm show` and `dlm cache show` need none of it
    import numpy as np

SEGMENT_DIR = "segments"
SEGMENT_SUFFIX = ".seg"
MAX_SEGMENT_BYTES = 64 << 20
ZSTD_LEVEL = 3
_DTYPE_NAMES = {2: "<u2", 4: "<u4"}  # the `dtype` column: bytes per id -> stored dtype


@cache
def stored_dtype(code: int) -> np.dtype | None:
    """The stored (little-endian) dtype of ids with `dtype` column `code`, or None."""
    import numpy as np

    name = _DTYPE_NAMES.get(code)
    return None if name is None else np.dtype(name)


def checksum(data: bytes) -> int:
    """xxh3_64 of `data` as a signed 64-bit int (SQLite's INTEGER range)."""
    value = xxhash.xxh3_64_intdigest(data)
    return value - (1 << 64) if value >= (1 << 63) else value


def pack_ids(ids: np.ndarray, compressor: zstandard.ZstdCompressor) -> bytes:
    """Stored bytes of a row: one zstd frame of the little-endian ids."""
    return compressor.compress(ids.astype(ids.dtype.newbyteorder("<"), copy=False).tobytes())


def unpack_ids(
    data: bytes, ntokens: int, dtype_code: int, expected: int, dctx: zstandard.ZstdDecompressor
) -> np.ndarray | None:
    """Ids of a stored entry, or None when checksum, frame or length disagree."""
    if len(data) == 0 and ntokens:
        return None
    if checksum(data) != expected:
        return None
    dtype = stored_dtype(dtype_code)
    if dtype is None:
        return None
    try:
        raw = dctx.decompress(data, max_output_size=ntokens * dtype.itemsize)
    except zstandard.ZstdError:
        return None
    if len(raw) != ntokens * dtype.itemsize:
        return None
    import numpy as np

    return np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="), copy=False)


def segment_dir(store_dir: Path) -> Path:
    return store_dir / SEGMENT_DIR


def segment_path(store_dir: Path, name: str) -> Path:
    return segment_dir(store_dir) / f"{name}{SEGMENT_SUFFIX}"


def is_locked(path: Path) -> bool:
    """True when a live writer holds `path` (its exclusive flock is taken)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops the probe lock
    return False


def disk_full_error(path: Path, exc: OSError) -> CacheError:
    """The CacheError for a failed segment write, naming the way out."""
    what = "disk full" if exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT) else str(exc)
    return CacheError(
        f"{path}: cannot write the tokenized-section cache ({what}); free space, lower "
        "training.cache.max_bytes, or set training.cache.enabled: false"
    )


@dataclass
class OpenSegment:
    id: int
    name: str
    path: Path
    fd: int
    size: int


class WriteFn(Protocol):
    """`os.write`'s shape: write some of `data` to `fd`, return the count, or raise OSError."""

    def __call__(self, fd: int, data: memoryview, /) -> int: ...


class SegmentWriter:
    """Appends batches of entries to segments this writer owns.

    Args:
        store_dir: the cache folder.
        conn: the index connection (segments are registered there on creation).
        max_segment_bytes: a new segment is started once the current one passes this.
        write: the raw write (`os.write`); a seam for simulating a full disk.
    """

    def __init__(
        self,
        store_dir: Path,
        conn: sqlite3.Connection,
        max_segment_bytes: int = MAX_SEGMENT_BYTES,
        write: WriteFn = os.write,
    ) -> None:
        self.store_dir = store_dir
        self.conn = conn
        self.max_segment_bytes = max_segment_bytes
        self.write = write
        self.current: OpenSegment | None = None

    def append(self, payloads: list[bytes]) -> tuple[int, list[int]]:
        """Write `payloads` back to back, durably; returns (segment id, offset of each).

        Raises:
            CacheError: the write failed (disk full, quota, I/O error); the bytes that
                did land are dead and the index is untouched.
        """
        seg = self._segment()
        blob = b"".join(payloads)
        try:
            view = memoryview(blob)
            while view:
                view = view[self.write(seg.fd, view) :]
            os.fdatasync(seg.fd)
        except OSError as exc:
            self.close()
            raise disk_full_error(seg.path, exc) from None
        offsets, pos = [], seg.size
        for p in payloads:
            offsets.append(pos)
            pos += len(p)
        seg.size = pos
        return seg.id, offsets

    def _segment(self) -> OpenSegment:
        if self.current is not None and self.current.size < self.max_segment_bytes:
            return self.current
        self.close()
        name = f"{time.time_ns():x}-{os.getpid()}-{secrets.token_hex(4)}"
        path = segment_path(self.store_dir, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        except OSError as exc:
            raise disk_full_error(path, exc) from None
        fcntl.flock(fd, fcntl.LOCK_EX)
        with write_tx(self.conn):
            cur = self.conn.execute("INSERT INTO segments(name, created_ns) VALUES (?, ?)", (name, time.time_ns()))
        self.current = OpenSegment(int(cur.lastrowid or 0), name, path, fd, 0)
        return self.current

    def close(self) -> None:
        """Release the current segment (it becomes immutable)."""
        if self.current is not None:
            os.close(self.current.fd)
            self.current = None


class SegmentReader:
    """Reads entries by (segment, offset, length), keeping descriptors open.

    A descriptor opened once stays valid after compaction unlinks the file, so every
    row resolved while the index said "here" stays readable for the reader's lifetime.
    """

    def __init__(self, store_dir: Path) -> None:
        self.store_dir = store_dir
        self.fds: dict[int, int] = {}
        self.dctx = zstandard.ZstdDecompressor()

    def open(self, seg_id: int, name: str) -> bool:
        """Open a segment once; False when it is gone (compacted or cleared meanwhile)."""
        if seg_id in self.fds:
            return True
        try:
            self.fds[seg_id] = os.open(segment_path(self.store_dir, name), os.O_RDONLY)
        except FileNotFoundError:
            return False
        return True

    def read(self, seg_id: int, offset: int, nbytes: int, ntokens: int, dtype: int, expected: int) -> np.ndarray | None:
        """Ids of one entry (1-D uint16|uint32 [ntokens]) or None if it cannot be trusted."""
        fd = self.fds.get(seg_id)
        if fd is None:
            return None
        try:
            data = os.pread(fd, nbytes, offset)
        except OSError:
            return None
        if len(data) != nbytes:
            return None
        return unpack_ids(data, ntokens, dtype, expected, self.dctx)

    def close(self) -> None:
        for fd in self.fds.values():
            try:
                os.close(fd)
            except OSError:
                continue  # already closed: nothing left to release
        self.fds.clear()

    def __del__(self) -> None:
        self.close()
