"""A tokenize session: one `CachedRowTokenizer.tokenize` call over one row set (see
`dlm.cache.tokenizer` for its two phases), and the values it is built from.

A session receives frozen values (`SessionConfig`: cache folder, tokenizer fingerprint,
run id, options, encoder, segment write) and returns `TokenizedRows`; it never refers
back to the tokenizer that made it.

Slots: text rows first, then file rows, in input order. Per slot the session keeps its
key, its entry E (`entries`, int64 [n_slots, 9]; see `dlm.cache.index`), whether it was
a hit, and for file rows the skip reason, lossy flag and the moment it was read.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import compress
from operator import itemgetter
from pathlib import Path
from typing import cast

import numpy as np
import zstandard

from dlm.cache import statindex
from dlm.cache.evict import EVICT_TO_FRACTION, compact, evict_lru, maint_lock
from dlm.cache.index import (
    ACCESS,
    META,
    NPROMPT,
    NTOK,
    SEG,
    as_entries,
    insert_entries,
    lookup_keys,
    meta_check,
    segment_names,
    totals,
    touch,
    valid_rows,
)
from dlm.cache.reader import IN_MEMORY, CachedRows, RowSource
from dlm.cache.remote import RemoteCounts, RemoteTier
from dlm.cache.schema import (
    STATE_NAME,
    connect,
    connect_state,
    read_tx,
    root_id,
    root_value,
    store_uuid,
    tokenizer_id,
    write_tx,
)
from dlm.cache.shared import Lease, protected_keys, save_refs
from dlm.cache.segments import (
    MAX_SEGMENT_BYTES,
    ZSTD_LEVEL,
    SegmentReader,
    SegmentWriter,
    WriteFn,
    checksum,
)
from dlm.defaults import DEFAULT_CACHE_MAX_BYTES
from dlm.rows.read import read_file_row, text_row_spec
from dlm.rows.types import RowSet, RowSpec
from dlm.tokenize.batch import AheadPipeline, PackedRows, pack_rows
from dlm.tokenize.encode import BATCH_ROWS, EncodedRow, RowEncoder
from dlm.tokenize.plain import spec_key
from dlm.tokenize.seam import Progress, TokenizedRows, TokenizeStats

log = logging.getLogger("dlm.cache")

DEFAULT_MAX_BYTES = DEFAULT_CACHE_MAX_BYTES
BATCH_BYTES = 4 << 20
RACY_NS = 2_000_000_000
Packed = tuple[list[str], list[EncodedRow], PackedRows]  # keys, their rows, their stored form
_SOURCE_INDEX = itemgetter(0)  # FileRow.source_index, without the field descriptor


def _distinct(values: np.ndarray) -> list[int]:
    """Sorted distinct ints of a 1-D int array. Not `np.unique`: its first call imports
    `numpy.ma`, a measurable share of a warm run, for arrays this code keeps small."""
    return sorted(set(values.tolist()))
TOUCH_GRANULARITY_S = 3600


@dataclass
class CacheRunReport:
    """What the cache did in one `tokenize` call (rows, entries, stored bytes)."""

    run_id: str
    hits: int = 0
    misses: int = 0
    admitted: int = 0
    not_admitted: int = 0
    corrupt: int = 0
    evicted_entries: int = 0
    evicted_bytes: int = 0
    warnings: list[str] = field(default_factory=list)
    remote: tuple[RemoteCounts, RemoteCounts] | None = None  # (pulled, pushed) when a remote is set

    def warn(self, message: str) -> None:
        """A problem the run went on past: kept in `warnings`, which the caller renders
        once the call returns (not logged too: a CLI would print it twice)."""
        self.warnings.append(message)

    def bad_entry(self, message: str) -> None:
        """A damaged entry met while reading (counted in `corrupt`). Reads are lazy and
        may come after the caller rendered `warnings` (a training run reads as it
        trains), so this one is also logged to `dlm.cache`."""
        self.corrupt += 1
        self.warnings.append(message)
        log.warning(message)


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
        cache_dir: `<store>/tokenized-cache/`.
        tokenizer_sha: the tokenizer's `tokenizer_sha256` (part of every key).
        run_id: names the session in the index's `runs` table.
        options: sizes and caps.
        encoder: encodes `RowSpec` batches by the seam's token rules.
        segment_write: the raw write of segment bytes (`os.write`; a seam for fault tests).
        store_dir: the shared store (entries, segments); `cache_dir` holds the
            document's state (stat snapshots, runs). None: `cache_dir` holds both.
        doc_id: names the document in the store's references (None: `cache_dir`).
        remote: URL of the remote tier (`dlm.cache.remote`), or None.
        sibling_dirs: other documents' state folders (`cache_dir`s) on the same store,
            whose stat snapshots may start a root this document has none of.
        clock: wall-clock time in ns (`time.time_ns`), the moment a file is recorded as
            read, against which the racy-timestamp rule (`dlm.cache.statindex`) compares
            the file's mtime and ctime.
    """

    cache_dir: Path
    tokenizer_sha: str
    run_id: str
    options: CacheOptions
    encoder: RowEncoder
    segment_write: WriteFn = os.write
    store_dir: Path | None = None
    doc_id: str | None = None
    remote: str | None = None
    sibling_dirs: tuple[Path, ...] = ()
    clock: Callable[[], int] = time.time_ns

    @property
    def store(self) -> Path:
        return self.store_dir if self.store_dir is not None else self.cache_dir

    @property
    def doc(self) -> str:
        return self.doc_id or str(self.cache_dir)


class TokenizeSession:
    """One pass of the cache over one `RowSet`: resolve hits, encode misses, assemble.

    Opens the index and the segment files on construction; `execute()` runs the
    session once and closes the segment writer.

    Raises:
        sqlite3.DatabaseError, CacheIndexCorrupt: from the index (the caller quarantines).
    """

    def __init__(self, config: SessionConfig, rows: RowSet, progress: Progress, report: CacheRunReport) -> None:
        self.config, self.rows, self.progress, self.report = config, rows, progress, report
        self.n_text = len(rows.text_rows)
        n = self.n_text + len(rows.file_rows)
        self.keys: list[str | None] = [None] * n
        self.skip_reason: dict[int, str] = {}
        self.lossy_slots: set[int] = set()
        self.entries = np.full((n, 9), -1, dtype=np.int64)
        self.is_hit = np.zeros(n, dtype=bool)
        self.read_at_ns = np.zeros(n, dtype=np.int64)
        self.root_of_slot = np.full(n, -1, dtype=np.int64)
        self.entry_by_key: dict[str, tuple[int, ...]] = {}  # key -> E resolved in this session
        self.in_memory: dict[str, np.ndarray] = {}
        self.encoded_keys: set[str] = set()
        self.stale_keys: list[str] = []
        self.admitting = True
        self.compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
        self.now_s = int(time.time())
        self.slots_by_root: dict[int, np.ndarray] = {}
        self.root_ids: dict[str, int] = {}
        self.root_state: dict[int, tuple] = {}  # root id -> (files, stats, snapshot, positions)
        self.dirty_roots: set[int] = set()
        self.segment_names: dict[int, str] = {}
        self.dropped_segments: set[int] = set()
        self.conn = connect(config.store)
        self.state = connect_state(config.cache_dir)
        self.store_id = store_uuid(self.conn)
        self._same_store()
        self.tokenizer_id = tokenizer_id(self.conn, config.tokenizer_sha)
        self.state_tokenizer_id = tokenizer_id(self.state, config.tokenizer_sha)
        self.lease = Lease(config.store, config.doc, config.run_id)
        self.reader = SegmentReader(config.store)
        self.writer = SegmentWriter(config.store, self.conn, config.options.max_segment_bytes,
                                    config.segment_write)
        self.remote = (RemoteTier(config.remote, self.conn, config.store, report.warn, self.writer)
                       if config.remote else None)

    def execute(self) -> TokenizedRows:
        """Run the session; returns the rows' `TokenizedRows` (lazy reads)."""
        started = time.perf_counter()
        self.progress.start("tokenizing", len(self.entries))
        # misses are encoded and packed on a worker thread one batch ahead of the reads
        self.pipe: AheadPipeline[dict[str, RowSpec], Packed] = AheadPipeline(self._encode_batch)
        try:
            pending = self._resolve()
            self._stream(pending)
            self._fill()
            self._finish(time.perf_counter() - started)
            if self.remote is not None:
                self.remote.push(self.encoded_keys)
                self.report.remote = (self.remote.pulled, self.remote.pushed)
        finally:
            self.pipe.close()
            self.writer.close()
        return self._assemble(time.perf_counter() - started)

    def _same_store(self) -> None:
        """Stat snapshots name entry locations of one store: forget them when the
        document's state was last used with another store (DLM_CACHE_DIR changed)."""
        uuid = self.store_id
        row = self.state.execute("SELECT v FROM state_meta WHERE k = 'store'").fetchone()
        if row and row[0] == uuid:
            return
        with write_tx(self.state):
            if row:
                self.state.execute("DELETE FROM stat_snapshots")
            self.state.execute("INSERT OR REPLACE INTO state_meta VALUES ('store', ?)", (uuid,))

    # phase 1: resolve without reading -------------------------------------
    def _resolve(self) -> list[int]:
        for i, row in enumerate(self.rows.text_rows):
            self.keys[i] = spec_key(self.config.tokenizer_sha, text_row_spec(row))
        # every row of one directive shares its root (the seam's FileRow contract)
        files = self.rows.file_rows
        directive = np.fromiter(map(_SOURCE_INDEX, files), dtype=np.int64, count=len(files))
        for d in _distinct(directive):
            at = np.flatnonzero(directive == d)
            first = files[int(at[0])]
            p = str(first.path)
            root = p[: len(p) - len(first.relpath) - 1]
            rid = self.root_ids.setdefault(root, root_id(self.state, root))
            self.slots_by_root[rid] = np.concatenate((self.slots_by_root.get(rid, np.zeros(0, np.int64)), at + self.n_text))
        pending: list[int] = []
        hit_slots: list[np.ndarray] = []
        hit_rows: list[np.ndarray] = []
        with read_tx(self.conn):
            self.segment_names = segment_names(self.conn)
            found = lookup_keys(self.conn, [k for k in self.keys[: self.n_text] if k])
            text_hits = [i for i in range(self.n_text) if self.keys[i] in found]
            pending += [i for i in range(self.n_text) if self.keys[i] not in found]
            hit_slots.append(np.array(text_hits, dtype=np.int64))
            hit_rows.append(as_entries([found[self.keys[i]] for i in text_hits]))  # type: ignore[index]  # text slots are keyed above
            for rid, slots in self.slots_by_root.items():
                snap, damaged = statindex.load(self.state, self.state_tokenizer_id, rid)
                if damaged:
                    self.report.warn(f"stat index of {self._root_path(rid)} was damaged; re-reading its files")
                elif snap is None and self.config.sibling_dirs and self.config.options.trust_stat:
                    snap = statindex.sibling_snapshot(
                        [d / STATE_NAME for d in self.config.sibling_dirs], self.store_id,
                        self.config.tokenizer_sha, root_value(self._root_path(rid)))
                    if snap is not None:
                        self.dirty_roots.add(rid)  # this document writes a snapshot of its own
                self._resolve_root(rid, slots, snap, pending, hit_slots, hit_rows)
        self._accept_hits(np.concatenate(hit_slots), np.concatenate(hit_rows), pending)
        return sorted(pending)

    def _root_path(self, rid: int) -> str:
        return next(path for path, r in self.root_ids.items() if r == rid)

    def _resolve_root(
        self, rid: int, slots: np.ndarray, snap: statindex.Snapshot | None, pending: list[int],
        hit_slots: list[np.ndarray], hit_rows: list[np.ndarray],
    ) -> None:
        lo, hi = int(slots[0]) - self.n_text, int(slots[-1]) - self.n_text + 1
        if hi - lo == len(slots):  # contiguous, as a walk emits them
            files = self.rows.file_rows[lo:hi]
        else:
            files = [self.rows.file_rows[s - self.n_text] for s in slots.tolist()]
        stats = statindex.file_stats(files)
        pos, ok = statindex.trusted(snap, files, stats, RACY_NS)
        if not self.config.options.trust_stat:
            ok[:] = False  # every file read and hashed; entries still found by key
        self.root_of_slot[slots] = rid
        self.root_state[rid] = (files, stats, snap, pos)
        if snap is None or len(snap.relpaths) != len(files) or not ok.all():
            self.dirty_roots.add(rid)
        if snap is None:
            pending.extend(slots.tolist())
            return
        p = np.maximum(pos, 0)
        flags, reason = snap.flags[p], snap.reason[p]
        skipped = ok & ((flags & statindex.SKIPPED) > 0) & statindex.REMEMBERED_CODES[reason]
        hit = ok & ((flags & (statindex.SKIPPED | statindex.HAS_ENTRY)) == statindex.HAS_ENTRY)
        for slot, code in zip(slots[skipped].tolist(), reason[skipped].tolist()):
            self.skip_reason[slot] = statindex.REASONS[code]
        for slot, key in zip(slots[hit].tolist(), snap.keys(pos[hit])):
            self.keys[slot] = key
        self.lossy_slots.update(slots[hit & ((flags & statindex.LOSSY) > 0)].tolist())
        self.read_at_ns[slots[ok]] = snap.recorded[p[ok]]
        entries = snap.entry[pos[hit]]
        if time.time_ns() - snap.written_ns > TOUCH_GRANULARITY_S * 10**9:
            entries = entries.copy()
            entries[:, ACCESS] = 0  # stale: touched in the index, snapshot rewritten
            self.dirty_roots.add(rid)
        hit_slots.append(slots[hit])
        hit_rows.append(entries)
        rest = slots[~(hit | skipped)]
        if rest.size:
            self.dirty_roots.add(rid)
            pending.extend(rest.tolist())

    def _accept_hits(self, slots: np.ndarray, entries: np.ndarray, pending: list[int]) -> None:
        """Take verified entries whose segment opens; the rest go to `pending`."""
        ok = valid_rows(entries)
        if not ok.all():
            self.report.corrupt += int((~ok).sum())
            self.report.warn(f"{int((~ok).sum())} cache index rows failed their check; re-tokenizing")
        for seg in _distinct(entries[ok, SEG]):
            name = self.segment_names.get(seg)
            if name is None or not self.reader.open(seg, name):
                ok &= entries[:, SEG] != seg
                self._drop_segment(seg)
        self.entries[slots[ok]] = entries[ok]
        self.is_hit[slots[ok]] = True
        stale = ok & (entries[:, ACCESS] < self.now_s - TOUCH_GRANULARITY_S)
        self.stale_keys += [self.keys[s] for s in slots[stale].tolist()]
        self.entries[slots[stale], ACCESS] = self.now_s
        self.dirty_roots.update(r for r in _distinct(self.root_of_slot[slots[stale]]) if r >= 0)
        bad = slots[~ok]
        self.dirty_roots.update(r for r in _distinct(self.root_of_slot[bad]) if r >= 0)
        pending += bad.tolist()
        self.progress.advance(int(ok.sum()))

    # phase 2: misses, streamed ----------------------------------------------
    def _stream(self, pending: list[int]) -> None:
        chunk: list[tuple[int, RowSpec]] = []
        size = skipped = 0
        for slot in pending:
            spec = text_row_spec(self.rows.text_rows[slot]) if slot < self.n_text else self._read_file(slot)
            if spec is None:
                skipped += 1
                continue
            chunk.append((slot, spec))
            size += len(spec.text)
            if len(chunk) >= self.config.options.batch_rows or size >= self.config.options.batch_bytes:
                self._flush(chunk, skipped)
                chunk, size, skipped = [], 0, 0
        if chunk or skipped:
            self._flush(chunk, skipped)
        for done in self.pipe.drain():
            self._write(done)

    def _read_file(self, slot: int) -> RowSpec | None:
        fr = self.rows.file_rows[slot - self.n_text]
        self.read_at_ns[slot] = self.config.clock()
        self.keys[slot] = None
        got = read_file_row(fr)
        if isinstance(got, str):
            self.skip_reason[slot] = got
            return None
        self.keys[slot] = spec_key(self.config.tokenizer_sha, got.spec)
        if got.lossy:
            self.lossy_slots.add(slot)
        return got.spec

    def _flush(self, chunk: list[tuple[int, RowSpec]], skipped: int) -> None:
        # every slot of a chunk was keyed when its spec was made
        keys = cast("list[str]", [self.keys[slot] for slot, _ in chunk])
        unknown = [k for k in dict.fromkeys(keys) if k not in self.entry_by_key and k not in self.encoded_keys]
        if unknown:
            found = lookup_keys(self.conn, unknown)
            if self.remote is not None and len(found) < len(unknown):
                missing = [k for k in unknown if k not in found]
                if self.remote.pull(missing):  # pull-through: the packs holding them
                    found.update(lookup_keys(self.conn, missing))
            self._take_found(found)
        specs: dict[str, RowSpec] = {}
        for (_, spec), key in zip(chunk, keys):
            if key not in self.entry_by_key and key not in self.encoded_keys:
                specs.setdefault(key, spec)
        self.encoded_keys.update(specs)  # in flight: a later duplicate waits for this entry
        for (slot, _), key in zip(chunk, keys):
            self.is_hit[slot] = key not in self.encoded_keys
        for done in self.pipe.submit(specs) if specs else []:
            self._write(done)
        self.progress.advance(len(chunk) + skipped)

    def _take_found(self, found: dict[str, tuple]) -> None:
        keys = list(found)
        entries = as_entries([found[k] for k in keys])
        ok = valid_rows(entries)
        names = segment_names(self.conn)
        for seg in _distinct(entries[ok, SEG]):
            if seg not in names or not self.reader.open(seg, names[seg]):
                ok &= entries[:, SEG] != seg
                self._drop_segment(seg)
        for key, e, good in zip(keys, entries.tolist(), ok.tolist()):
            if good:
                self.entry_by_key[key] = tuple(e)
                if e[ACCESS] < self.now_s - TOUCH_GRANULARITY_S:
                    self.stale_keys.append(key)

    def _drop_segment(self, seg: int) -> None:
        """A segment file that vanished (deleted by hand, lost with a disk): its entries
        and its row go, so this run stores fresh entries and the byte total stays true."""
        if seg in self.dropped_segments:
            return
        self.dropped_segments.add(seg)
        with write_tx(self.conn):
            n = self.conn.execute("DELETE FROM entries WHERE segment = ?", (seg,)).rowcount
            self.conn.execute("DELETE FROM segments WHERE id = ?", (seg,))
        if n:
            self.report.warn(f"a cache segment file is missing; its {n} entries were dropped and are re-tokenized")

    def _encode_batch(self, specs: dict[str, RowSpec]) -> Packed:
        """Worker thread: encode and pack one batch (touches no shared state but `compressor`)."""
        keys = list(specs)
        encoded = self.config.encoder.encode([specs[k] for k in keys])
        return keys, encoded, pack_rows([e.ids for e in encoded], self.compressor.compress, checksum)

    def _write(self, done: Packed) -> None:
        """Admit one packed batch: segment append (fdatasync'ed), then its index rows."""
        keys, encoded, packed = done
        payloads = packed.payloads
        if self.admitting and not self._make_room(sum(map(len, payloads)), keys):
            self.admitting = False
            self.report.warn(
                f"this run needs more than training.cache.max_bytes ({self.config.options.max_bytes} bytes); "
                "stopped admitting new cache entries (raise max_bytes to cache the whole run)"
            )
        if not self.admitting:
            for key, e in zip(keys, encoded):
                self.in_memory[key] = e.ids
                self.entry_by_key[key] = (IN_MEMORY, 0, 0, e.ids.shape[0], e.n_prompt, e.ids.dtype.itemsize, 0, 0, 0)
            self.report.not_admitted += len(keys)
            return
        seg, offsets = self.writer.append(payloads)
        assert self.writer.current is not None
        self.reader.open(seg, self.writer.current.name)
        cols = np.array(
            [(seg, off, len(p), e.ids.shape[0], e.n_prompt, e.ids.dtype.itemsize, ck, 0, self.now_s)
             for off, p, e, ck in zip(offsets, payloads, encoded, packed.checksums)],
            dtype=np.int64,
        ).reshape(len(keys), 9)
        cols[:, META] = meta_check(cols)
        rows = []
        for key, entry in zip(keys, cols.tolist()):
            self.entry_by_key[key] = tuple(entry)
            rows.append((key, self.tokenizer_id, *entry))
        with write_tx(self.conn):
            insert_entries(self.conn, rows)
        self.report.admitted += len(rows)

    def _make_room(self, incoming: int, keys: list[str]) -> bool:
        cap = self.config.options.max_bytes
        if totals(self.conn)[0] + incoming <= cap:
            return True
        protected = {k for k in self.keys if k} | set(keys)
        with maint_lock(self.config.store):
            running, since = protected_keys(self.conn, self.config.store, self.config.doc)
            result = evict_lru(
                self.conn, max(0, int(cap * EVICT_TO_FRACTION) - incoming), protected | running, since
            )
            compact(self.conn, self.config.store)
        self.report.evicted_entries += result.evicted_entries
        self.report.evicted_bytes += result.evicted_bytes
        return result.bytes_after + incoming <= cap

    # end --------------------------------------------------------------------
    def _fill(self) -> None:
        """Entries of rows resolved in phase 2 (including duplicates of one key)."""
        for s in np.flatnonzero(self.entries[:, SEG] == -1).tolist():
            if s not in self.skip_reason:
                self.entries[s] = self.entry_by_key[self.keys[s]]

    def _finish(self, seconds: float) -> None:
        kept = len(self.entries) - len(self.skip_reason)
        hits = int(self.is_hit.sum())
        with write_tx(self.conn):
            if self.stale_keys:
                touch(self.conn, self.stale_keys, self.now_s)
            save_refs(self.conn, self.config.doc, (k for k in self.keys if k))
        with write_tx(self.state):
            for rid in self.dirty_roots:
                statindex.save(self.state, self.state_tokenizer_id, rid, self._snapshot(rid), time.time_ns())
            statindex.keep_only(self.state, self.state_tokenizer_id, list(self.slots_by_root))
            self.state.execute(
                "INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?)",
                (self.config.run_id, time.time_ns(), kept, hits, kept - hits, seconds, self.state_tokenizer_id),
            )

    def _snapshot(self, rid: int) -> statindex.Snapshot:
        files, stats, _, _ = self.root_state[rid]
        slots = self.slots_by_root[rid]
        slot_list = slots.tolist()
        n = len(files)
        # arrays for the common case (an entry or none), a loop only over the few
        # skipped and lossy slots: a warm edit rewrites the snapshot of every file
        flags = np.where(self.entries[slots, SEG] >= 0, statindex.HAS_ENTRY, 0).astype(np.uint8)
        reason = np.zeros(n, dtype=np.uint8)
        if self.skip_reason or self.lossy_slots:
            at = dict(zip(slot_list, range(n)))
            for s, why in self.skip_reason.items():
                if (j := at.get(s)) is not None and (code := statindex.reason_code(why)):
                    flags[j] = statindex.SKIPPED
                    reason[j] = code
            for s in self.lossy_slots:
                if (j := at.get(s)) is not None:
                    flags[j] |= statindex.LOSSY
        digest = statindex.digests([self.keys[s] for s in slot_list])
        entry = self.entries[slots].copy()
        entry[(flags & statindex.HAS_ENTRY) == 0] = 0
        return statindex.Snapshot(
            [f.relpath for f in files], stats[:, 0], stats[:, 1], stats[:, 2], stats[:, 3].view(np.uint64),
            self.read_at_ns[slots], entry, digest, flags, reason,
        )

    def _assemble(self, seconds: float) -> TokenizedRows:
        keep = np.ones(len(self.keys), dtype=bool)
        keep[list(self.skip_reason)] = False
        kept = np.flatnonzero(keep).tolist()
        loc = self.entries[keep]
        hits = int(self.is_hit[keep].sum())
        self.report.hits, self.report.misses = hits, len(kept) - hits
        keys = list(compress(self.keys, keep.tolist())) if self.skip_reason else list(self.keys)
        n = len(kept)
        stats = TokenizeStats(n, hits, n - hits, seconds, totals(self.conn)[0])
        source = RowSource(self.rows, self.n_text, kept, self.root_of_slot, self.state_tokenizer_id)
        read = CachedRows(
            cache_dir=self.config.cache_dir, store_dir=self.config.store, reader=self.reader, entries=loc,
            keys=keys, in_memory=self.in_memory, source=source,  # type: ignore[arg-type]  # kept slots are all keyed
            encode=lambda spec: self.config.encoder.encode([spec])[0].ids,
            tokenizer_sha=self.config.tokenizer_sha, stats=stats, warn=self.report.bad_entry,
            keepalive=(self.conn, self.state, self.lease),
        )
        return TokenizedRows(
            lengths=loc[:, NTOK].copy(),
            n_prompt=loc[:, NPROMPT].astype(np.int32),
            keys=keys,  # type: ignore[arg-type]  # kept slots are all keyed
            read=read,
            kinds=[r.kind for r in self.rows.text_rows] + ["source"] * (n - self.n_text),
            files_taken=n - self.n_text,
            files_skipped=Counter(self.skip_reason.values()),
            lossy_files=len(self.lossy_slots),
            stats=stats,
        )
