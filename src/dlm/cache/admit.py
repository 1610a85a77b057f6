"""Phase 2 of a tokenize session: pending slots, streamed.

Untrusted files are read and hashed (`dlm.rows.read`); keys still missing locally are
pulled through the remote tier when one is set, else encoded in batches
(`batch_rows` rows or `batch_bytes` of text) on a worker thread one batch ahead,
compressed, appended to this run's segment (fdatasync'ed) and then committed to the
index. Before a batch would pass `max_bytes`, LRU eviction runs with this run's keys
protected; when this run alone exceeds the cap, admission stops and the rest of the
run is kept in memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np
import zstandard

from dlm.cache.evict import EVICT_TO_FRACTION, compact, evict_lru, maint_lock
from dlm.cache.index import (
    ACCESS,
    META,
    SEG,
    as_entries,
    insert_entries,
    lookup_keys,
    meta_check,
    segment_names,
    totals,
    valid_rows,
)
from dlm.cache.reader import IN_MEMORY
from dlm.cache.report import CacheRunReport
from dlm.cache.resolve import TOUCH_GRANULARITY_S
from dlm.cache.schema import write_tx
from dlm.cache.segments import ZSTD_LEVEL, checksum
from dlm.cache.shared import protected_keys
from dlm.cache.slots import SlotTable, distinct
from dlm.cache.stores import Stores
from dlm.rows.read import read_file_row, text_row_spec
from dlm.rows.types import RowSet, RowSpec
from dlm.tokenize.batch import AheadPipeline, PackedRows, pack_rows
from dlm.tokenize.encode import EncodedRow, SpecEncoder
from dlm.tokenize.plain import spec_key
from dlm.tokenize.seam import Progress

Packed = tuple[list[str], list[EncodedRow], PackedRows]  # keys, their rows, their stored form
Entry = tuple[int, ...]  # an entry E (`dlm.cache.index`)


@dataclass(frozen=True)
class AdmitLimits:
    """Batching and the byte cap of the admit step (`dlm.cache.session.CacheOptions`)."""

    batch_rows: int
    batch_bytes: int
    max_bytes: int


@dataclass
class Admit:
    """The admit step (module docstring). After `run`, `entry_by_key` holds the entry
    of every key resolved in phase 2, `in_memory` the ids of keys not admitted, and
    `encoded_keys` the keys this session encoded (what a push sends).

    Attributes:
        clock: wall-clock ns stamping each file read (`SessionConfig.clock`).
        stale_keys: shared with the resolve step; keys to touch at the end.
        store_dir, doc: the store and this document's name in it (eviction protects
            the keys of running documents).
    """

    rows: RowSet
    table: SlotTable
    stores: Stores
    tokenizer_sha256: str
    encoder: SpecEncoder
    limits: AdmitLimits
    report: CacheRunReport
    progress: Progress
    clock: Callable[[], int]
    store_dir: Path
    doc: str
    now_s: int
    stale_keys: list[str]
    entry_by_key: dict[str, Entry] = field(default_factory=dict)
    in_memory: dict[str, np.ndarray] = field(default_factory=dict)
    encoded_keys: set[str] = field(default_factory=set)
    admitting: bool = True

    def run(self, pending: list[int]) -> None:
        """Read, look up, pull and encode every pending slot."""
        self.compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
        self.pipe: AheadPipeline[dict[str, RowSpec], Packed] = AheadPipeline(self._encode_batch)
        try:
            self._stream(pending)
        finally:
            self.pipe.close()

    def _stream(self, pending: list[int]) -> None:
        chunk: list[tuple[int, RowSpec]] = []
        size = skipped = 0
        n_text = self.table.n_text
        for slot in pending:
            spec = text_row_spec(self.rows.text_rows[slot]) if slot < n_text else self._read_file(slot)
            if spec is None:
                skipped += 1
                continue
            chunk.append((slot, spec))
            size += len(spec.text)
            if len(chunk) >= self.limits.batch_rows or size >= self.limits.batch_bytes:
                self._flush(chunk, skipped)
                chunk, size, skipped = [], 0, 0
        if chunk or skipped:
            self._flush(chunk, skipped)
        for done in self.pipe.drain():
            self._write(done)

    def _read_file(self, slot: int) -> RowSpec | None:
        table = self.table
        fr = self.rows.file_rows[slot - table.n_text]
        table.read_at_ns[slot] = self.clock()
        table.keys[slot] = None
        got = read_file_row(fr)
        if isinstance(got, str):
            table.skip_reason[slot] = got
            return None
        table.keys[slot] = spec_key(self.tokenizer_sha256, got.spec)
        if got.lossy:
            table.lossy.add(slot)
        return got.spec

    def _known(self, key: str) -> bool:
        return key in self.entry_by_key or key in self.encoded_keys

    def _flush(self, chunk: list[tuple[int, RowSpec]], skipped: int) -> None:
        keys = cast("list[str]", [self.table.keys[slot] for slot, _ in chunk])  # keyed when read
        unknown = [k for k in dict.fromkeys(keys) if not self._known(k)]
        if unknown:
            conn, remote = self.stores.conn, self.stores.remote
            found = lookup_keys(conn, unknown)
            if remote is not None and len(found) < len(unknown):
                missing = [k for k in unknown if k not in found]
                if remote.pull(missing):  # pull-through: the packs holding them
                    found.update(lookup_keys(conn, missing))
            self._take_found(found)
        specs: dict[str, RowSpec] = {}
        for (_, spec), key in zip(chunk, keys, strict=False):
            if not self._known(key):
                specs.setdefault(key, spec)
        self.encoded_keys.update(specs)  # in flight: a later duplicate waits for this entry
        for (slot, _), key in zip(chunk, keys, strict=False):
            self.table.is_hit[slot] = key not in self.encoded_keys
        for done in self.pipe.submit(specs) if specs else []:
            self._write(done)
        self.progress.advance(len(chunk) + skipped)

    def _take_found(self, found: dict[str, tuple]) -> None:
        keys = list(found)
        entries = as_entries([found[k] for k in keys])
        ok = valid_rows(entries)
        names = segment_names(self.stores.conn)
        for seg in distinct(entries[ok, SEG]):
            if seg not in names or not self.stores.reader.open(seg, names[seg]):
                ok &= entries[:, SEG] != seg
                self.stores.drop_segment(seg, self.report.warn)
        for key, e, good in zip(keys, entries.tolist(), ok.tolist(), strict=False):
            if good:
                self.entry_by_key[key] = tuple(e)
                if e[ACCESS] < self.now_s - TOUCH_GRANULARITY_S:
                    self.stale_keys.append(key)

    def _encode_batch(self, specs: dict[str, RowSpec]) -> Packed:
        """Worker thread: encode and pack one batch (touches no shared state but `compressor`)."""
        keys = list(specs)
        encoded = self.encoder.encode([specs[k] for k in keys])
        return keys, encoded, pack_rows([e.ids for e in encoded], self.compressor.compress, checksum)

    def _write(self, done: Packed) -> None:
        """Admit one packed batch: segment append (fdatasync'ed), then its index rows."""
        keys, encoded, packed = done
        payloads = packed.payloads
        if self.admitting and not self._make_room(sum(map(len, payloads)), keys):
            self.admitting = False
            self.report.warn(
                f"this run needs more than training.cache.max_bytes ({self.limits.max_bytes} bytes); "
                "stopped admitting new cache entries (raise max_bytes to cache the whole run)"
            )
        if not self.admitting:
            for key, e in zip(keys, encoded, strict=False):
                self.in_memory[key] = e.ids
                self.entry_by_key[key] = (IN_MEMORY, 0, 0, e.ids.shape[0], e.n_prompt, e.ids.dtype.itemsize, 0, 0, 0)
            self.report.not_admitted += len(keys)
            return
        writer = self.stores.writer
        seg, offsets = writer.append(payloads)
        assert writer.current is not None
        self.stores.reader.open(seg, writer.current.name)
        cols = np.array(
            [
                (seg, off, len(p), e.ids.shape[0], e.n_prompt, e.ids.dtype.itemsize, ck, 0, self.now_s)
                for off, p, e, ck in zip(offsets, payloads, encoded, packed.checksums, strict=False)
            ],
            dtype=np.int64,
        ).reshape(len(keys), 9)
        cols[:, META] = meta_check(cols)
        rows = []
        for key, entry in zip(keys, cols.tolist(), strict=False):
            self.entry_by_key[key] = tuple(entry)
            rows.append((key, self.stores.tokenizer_id, *entry))
        with write_tx(self.stores.conn):
            insert_entries(self.stores.conn, rows)
        self.report.admitted += len(rows)

    def _make_room(self, incoming: int, keys: list[str]) -> bool:
        cap, conn = self.limits.max_bytes, self.stores.conn
        if totals(conn)[0] + incoming <= cap:
            return True
        protected = {k for k in self.table.keys if k} | set(keys)
        with maint_lock(self.store_dir):
            running, since = protected_keys(conn, self.store_dir, self.doc)
            result = evict_lru(conn, max(0, int(cap * EVICT_TO_FRACTION) - incoming), protected | running, since)
            compact(conn, self.store_dir)
        self.report.evicted_entries += result.evicted_entries
        self.report.evicted_bytes += result.evicted_bytes
        return result.bytes_after + incoming <= cap


def fill(table: SlotTable, entry_by_key: dict[str, Entry]) -> None:
    """Entries of the slots resolved in phase 2 (duplicates of one key included)."""
    for s in np.flatnonzero(table.entries[:, SEG] == -1).tolist():
        if s not in table.skip_reason:
            table.entries[s] = entry_by_key[cast(str, table.keys[s])]  # kept slots are keyed
