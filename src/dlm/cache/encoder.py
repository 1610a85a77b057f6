"""`CachedRowEncoder`: the tokenize seam backed by the tokenized-section cache.

One tokenize session (`dlm.cache.session`), in two phases:

1. Resolve without reading. Text rows get their `row_key` from their text and their
   entries by key from the index. File rows are matched, vectorized, against the stat
   snapshot of their (tokenizer, source root) (`dlm.cache.statindex`): a file whose
   (size, mtime_ns, ctime_ns, ino) are unchanged, and whose mtime and ctime are both
   older than the moment it was read minus `RACY_NS` (git's racy-timestamp guard,
   on both stamps: `cp -p` or `touch -r` restore an mtime, never a ctime), is not opened:
   the snapshot gives its key, skip reason, lossy flag and entry location. Entries'
   `meta` checks are verified vectorized and their segments opened.
2. Misses, streamed. Untrusted files are read and hashed (xxh3 row keys); keys still
   missing from the index are encoded in batches (`batch_rows` rows or `batch_bytes`
   of text) with the backend's parallel batch encode, compressed, appended to this
   run's segment, fdatasync'ed, then committed to the index. Changed roots get a new
   stat snapshot at the end, in the transaction that records the run.

Reads are lazy (`dlm.cache.reader`): `read(i)` preads the entry, checks its checksum,
decompresses. A bad entry (bit flip, truncation) is a miss: a warning, the row is
re-encoded from its source, the entry dropped; never wrong ids, never a crash.

Bounds: before admitting a batch past `max_bytes`, LRU eviction runs (this run's keys
protected); if this run alone exceeds the cap, admission stops, the rest of the run is
kept in memory and `last_report.warnings` says so.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from dlm.cache.schema import INDEX_NAME, STATE_NAME, CacheIndexCorrupt, connect_state, is_corruption
from dlm.cache.segments import MAX_SEGMENT_BYTES, WriteFn, segment_dir
from dlm.cache.session import (
    BATCH_BYTES,
    BATCH_ROWS,
    DEFAULT_MAX_BYTES,
    RACY_NS,
    CacheOptions,
    CacheRunReport,
    SessionConfig,
    TokenizeSession,
)
from dlm.cache.shared import migrate_legacy
from dlm.errors import CacheError
from dlm.rows.types import RowSet
from dlm.tokenize.encode import SpecEncoder
from dlm.tokenize.seam import NullProgress, Progress, TokenizedRows

__all__ = ["DEFAULT_MAX_BYTES", "RACY_NS", "CacheRunReport", "CachedRowEncoder", "quarantine_index"]


class CachedRowEncoder:
    """`RowEncoder` over the tokenized-section cache (see module docstring).

    Args:
        state_dir: the document's state folder, `<store>/tokenized-cache/` (stat
            snapshots, run statistics), created on first use.
        store_dir: the shared section store (`dlm.paths.cache_store_dir()`); None:
            `state_dir` itself (one folder holding both). A per-document cache left in
            `state_dir` by an older dlm is moved into the store on first use.
        doc_id: names the document in the store's references (default: `state_dir`).
        remote: URL of the remote tier (`dlm.cache.remote`): misses are pulled from it,
            new entries pushed to it at the end of the run; None: local only.
        tokenizer: a Hugging Face fast tokenizer.
        tokenizer_sha256: the tokenizer's fingerprint (`dlm.tokenize.fingerprint`) (part of every key).
        max_bytes: cap on stored entry bytes (default 10 GiB).
        run_id: names this run in `runs` (last-run hit rate).
        batch_rows, batch_bytes: a miss batch ends at this many rows or text bytes.
        max_segment_bytes: segment files roll over past this size.
        segment_write: the raw write of segment bytes (`os.write`; a seam for tests).
        trust_stat: False reads and hashes every file even when its stat is unchanged
            (stat cannot see a write through a shared `mmap` that keeps size and times).
        sibling_dirs: other documents' state folders on the same store: when this
            document has no stat snapshot of a root yet, the newest of theirs starts it
            (`dlm.cache.statindex.sibling_snapshot`), so a second document over a tree
            reads no file that is unchanged since the first read it.
        clock: wall-clock ns (`time.time_ns`) that stamps each read for the
            racy-timestamp rule; a seam for tests.

    Attributes:
        last_report: `CacheRunReport` of the latest `tokenize` call.
    """

    def __init__(
        self,
        state_dir: Path,
        tokenizer: Any,
        tokenizer_sha256: str,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        run_id: str,
        batch_rows: int = BATCH_ROWS,
        batch_bytes: int = BATCH_BYTES,
        max_segment_bytes: int = MAX_SEGMENT_BYTES,
        segment_write: WriteFn = os.write,
        trust_stat: bool = True,
        store_dir: Path | None = None,
        doc_id: str | None = None,
        remote: str | None = None,
        sibling_dirs: Sequence[Path] = (),
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.store_dir = Path(store_dir) if store_dir is not None else self.state_dir
        self.config = SessionConfig(
            state_dir=self.state_dir,
            tokenizer_sha256=tokenizer_sha256,
            run_id=run_id,
            options=CacheOptions(max_bytes, batch_rows, batch_bytes, max_segment_bytes, trust_stat),
            encoder=SpecEncoder(tokenizer),
            segment_write=segment_write,
            store_dir=self.store_dir,
            doc_id=doc_id or str(self.state_dir),
            remote=remote,
            sibling_dirs=tuple(Path(d) for d in sibling_dirs),
            clock=clock,
        )
        self.last_report: CacheRunReport | None = None

    def tokenize(self, rows: RowSet, progress: Progress | None = None) -> TokenizedRows:
        """Ids of every usable row, from the cache where possible.

        Returns:
            `TokenizedRows`; `read(i)` gives 1-D uint16|uint32 [lengths[i]], identical
            to `PlainRowEncoder`'s. `stats` counts hits and misses per row.

        Raises:
            CacheError: the cache folder cannot be written (disk full, permissions).
        """
        try:
            migrate_legacy(self.state_dir, self.store_dir)
            return self._with_warnings(self._run(rows, progress))
        except (sqlite3.DatabaseError, CacheIndexCorrupt) as exc:
            if not isinstance(exc, CacheIndexCorrupt) and not is_corruption(exc):
                raise CacheError(
                    f"{self.store_dir / INDEX_NAME}: cache index write failed ({exc}); free disk "
                    "space and retry, or set training.cache.enabled: false"
                ) from None
        where = self._quarantine_corrupt()
        result = self._run(rows, progress)
        assert self.last_report is not None
        self.last_report.warn(f"{where}: index was corrupt; moved aside and rebuilt")
        return self._with_warnings(result)

    def _with_warnings(self, result: TokenizedRows) -> TokenizedRows:
        """The run's cache warnings travel on the rows (the caller shows them)."""
        assert self.last_report is not None
        return replace(result, warnings=tuple(self.last_report.warnings))

    def _quarantine_corrupt(self) -> Path:
        """Move aside whichever index is damaged: the document's state, else the store."""
        try:
            connect_state(self.state_dir).close()
        except CacheIndexCorrupt:
            quarantine_index(self.state_dir, STATE_NAME, drop_segments=False)
            return self.state_dir / STATE_NAME
        quarantine_index(self.store_dir)
        return self.store_dir / INDEX_NAME

    def _run(self, rows: RowSet, progress: Progress | None) -> TokenizedRows:
        self.last_report = CacheRunReport(self.config.run_id)
        return TokenizeSession(self.config, rows, progress or NullProgress(), self.last_report).execute()


def quarantine_index(folder: Path, name: str = INDEX_NAME, drop_segments: bool = True) -> None:
    """Move a corrupt index aside and drop the segments it described."""
    stamp = time.time_ns()
    for suffix in ("", "-wal", "-shm"):
        path = folder / f"{name}{suffix}"
        if path.exists():
            path.rename(folder / f"{name}{suffix}.corrupt-{stamp}")
    folder = segment_dir(folder)
    if drop_segments and folder.is_dir():
        for seg in folder.iterdir():
            seg.unlink(missing_ok=True)
