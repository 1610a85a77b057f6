"""A tokenize session: one `CachedRowEncoder.tokenize` call over one row set (see
`dlm.cache.encoder` for its two phases), and the values it is built from.

A session receives frozen values (`SessionConfig`: cache folder, tokenizer fingerprint,
run id, options, encoder, segment write, clock) and returns `TokenizedRows`; it never
refers back to the tokenizer that made it. `TokenizeSession` is a short facade over
its steps, each a module with its own state:

    dlm.cache.stores    what the session opens (indexes, segments, lease, remote)
    dlm.cache.slots     the slot table (per-slot keys, entries, hits, skips) and roots
    dlm.cache.resolve   phase 1: hits from keys and stat snapshots, no file read
    dlm.cache.admit     phase 2: pending slots read, looked up, pulled, encoded, admitted
    dlm.cache.assemble  the end: the run recorded, `TokenizedRows` assembled
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dlm.cache.admit import Admit, AdmitLimits, fill
from dlm.cache.assemble import assemble, record
from dlm.cache.report import CacheRunReport
from dlm.cache.resolve import RACY_NS, TOUCH_GRANULARITY_S, Resolve
from dlm.cache.schema import STATE_NAME
from dlm.cache.segments import MAX_SEGMENT_BYTES, WriteFn
from dlm.cache.slots import SlotTable, group_roots
from dlm.cache.stores import open_stores
from dlm.defaults import DEFAULT_CACHE_MAX_BYTES
from dlm.rows.types import RowSet
from dlm.tokenize.encode import BATCH_ROWS, SpecEncoder
from dlm.tokenize.seam import Progress, TokenizedRows

__all__ = [
    "BATCH_BYTES",
    "DEFAULT_MAX_BYTES",
    "RACY_NS",
    "TOUCH_GRANULARITY_S",
    "CacheOptions",
    "CacheRunReport",
    "SessionConfig",
    "TokenizeSession",
]

DEFAULT_MAX_BYTES = DEFAULT_CACHE_MAX_BYTES
BATCH_BYTES = 4 << 20


@dataclass(frozen=True)
class CacheOptions:
    """Tuning of a cached run. Sizes in bytes.

    Attributes:
        max_bytes: cap on stored entry bytes (`training.cache.max_bytes`, default 10 GiB).
        batch_rows, batch_bytes: a miss batch ends at this many rows or text bytes.
        max_segment_bytes: segment files roll over past this size.
        trust_stat: False reads and hashes every file even when its stat is unchanged
            (stat cannot see a write through a shared `mmap` that keeps size and times).
    """

    max_bytes: int = DEFAULT_MAX_BYTES
    batch_rows: int = BATCH_ROWS
    batch_bytes: int = BATCH_BYTES
    max_segment_bytes: int = MAX_SEGMENT_BYTES
    trust_stat: bool = True


@dataclass(frozen=True)
class SessionConfig:
    """Everything a tokenize session needs besides its rows, fixed for its lifetime.

    Attributes:
        state_dir: `<store>/tokenized-cache/`.
        tokenizer_sha256: the tokenizer's fingerprint (`dlm.tokenize.fingerprint`) (part of every key).
        run_id: names the session in the index's `runs` table.
        options: sizes and caps.
        encoder: encodes `RowSpec` batches by the seam's token rules.
        segment_write: the raw write of segment bytes (`os.write`; a seam for fault tests).
        store_dir: the shared store (entries, segments); `state_dir` holds the
            document's state (stat snapshots, runs). None: `state_dir` holds both.
        doc_id: names the document in the store's references (None: `state_dir`).
        remote: URL of the remote tier (`dlm.cache.remote`), or None.
        sibling_dirs: other documents' state folders (`state_dir`s) on the same store,
            whose stat snapshots may start a root this document has none of.
        clock: wall-clock time in ns (`time.time_ns`), the moment a file is recorded as
            read, against which the racy-timestamp rule (`dlm.cache.statindex`) compares
            the file's mtime and ctime.
    """

    state_dir: Path
    tokenizer_sha256: str
    run_id: str
    options: CacheOptions
    encoder: SpecEncoder
    segment_write: WriteFn = os.write
    store_dir: Path | None = None
    doc_id: str | None = None
    remote: str | None = None
    sibling_dirs: tuple[Path, ...] = ()
    clock: Callable[[], int] = time.time_ns

    @property
    def store(self) -> Path:
        return self.store_dir if self.store_dir is not None else self.state_dir

    @property
    def doc(self) -> str:
        return self.doc_id or str(self.state_dir)


class TokenizeSession:
    """One pass of the cache over one `RowSet`: resolve hits, admit misses, assemble.

    Opens the stores on construction; `execute()` runs the session once and closes the
    segment writer.

    Raises:
        sqlite3.DatabaseError, CacheIndexCorrupt: from the index (the caller quarantines).
        CacheError: a folder cannot be written; a bad `DLM_CACHE_REMOTE_TIMEOUT`.
    """

    def __init__(self, config: SessionConfig, rows: RowSet, progress: Progress, report: CacheRunReport) -> None:
        self.config, self.rows, self.progress, self.report = config, rows, progress, report
        self.table = SlotTable.empty(len(rows.text_rows), len(rows.file_rows))
        opts = config.options
        self.stores = open_stores(
            config.store,
            config.state_dir,
            config.doc,
            config.run_id,
            config.tokenizer_sha256,
            max_segment_bytes=opts.max_segment_bytes,
            segment_write=config.segment_write,
            remote=config.remote,
            warn=report.warn,
        )

    def execute(self) -> TokenizedRows:
        """Run the session; returns the rows' `TokenizedRows` (lazy reads)."""
        config, stores, table = self.config, self.stores, self.table
        started = time.perf_counter()
        now_s = int(time.time())
        self.progress.start("tokenizing", len(table))
        roots = group_roots(self.rows, table.n_text, stores.state)
        resolve = Resolve(
            self.rows,
            table,
            roots,
            stores,
            config.tokenizer_sha256,
            config.options.trust_stat,
            [d / STATE_NAME for d in config.sibling_dirs],
            self.report,
            self.progress,
            now_s,
        )
        admit = Admit(
            self.rows,
            table,
            stores,
            config.tokenizer_sha256,
            config.encoder,
            self.limits(),
            self.report,
            self.progress,
            config.clock,
            config.store,
            config.doc,
            now_s,
            resolve.stale_keys,
        )
        try:
            admit.run(resolve.run())
            fill(table, admit.entry_by_key)
            record(
                stores,
                table,
                roots,
                config.doc,
                config.run_id,
                resolve.stale_keys,
                now_s,
                time.perf_counter() - started,
            )
            if stores.remote is not None:
                stores.remote.push(admit.encoded_keys)
                self.report.remote = (stores.remote.pulled, stores.remote.pushed)
        finally:
            stores.writer.close()
        return assemble(
            self.rows,
            table,
            stores,
            self.report,
            in_memory=admit.in_memory,
            encode=lambda spec: config.encoder.encode([spec])[0].ids,
            state_dir=config.state_dir,
            tokenizer_sha256=config.tokenizer_sha256,
            seconds=time.perf_counter() - started,
        )

    def limits(self) -> AdmitLimits:
        opts = self.config.options
        return AdmitLimits(opts.batch_rows, opts.batch_bytes, opts.max_bytes)
