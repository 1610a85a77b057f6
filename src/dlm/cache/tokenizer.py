"""`CachedRowTokenizer`: the tokenize seam backed by the tokenized-section cache.

One run, in two phases:

1. Resolve without reading. Text rows get their `row_key` from their text. A file row
   whose (size, mtime_ns, ctime_ns, ino) equal the stat index row of its
   (tokenizer, source root, relpath) is trusted without opening it: the stat row gives
   its key (or its skip reason, or lossy flag). Racy-timestamp guard (as git's index):
   a stat row is trusted only if the file's mtime is older than the moment it was
   recorded minus `RACY_NS`, so an edit within the timestamp granularity of the
   recording is caught next run by re-reading. Entries of the resolved keys come from
   one join; their `meta` checks are verified vectorized and their segments opened.
2. Misses, streamed. Untrusted files are read and hashed (xxh3 row keys); keys still
   missing are encoded in batches (`batch_rows` rows or `batch_bytes` of text) with the
   backend's parallel batch encode, compressed, appended to this run's segment,
   fdatasync'ed, and committed to the index with their stat rows in one transaction.

Reads are lazy: `read(i)` preads the entry, checks its checksum, decompresses. A bad
entry (bit flip, truncation) is a miss: a warning, the row is re-encoded from its
source, the entry dropped; never wrong ids, never a crash.

Bounds: before admitting a batch past `max_bytes`, LRU eviction runs (this run's keys
protected); if this run alone exceeds the cap, admission stops, the rest of the run is
kept in memory and `last_report.warnings` says so.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import zstandard

from dlm.cache.evict import EVICT_TO_FRACTION, compact, evict_lru, maint_lock
from dlm.cache.index import (
    ACCESS, META, NPROMPT, NTOK, SEG,
    as_entries, delete_entry, insert_entries, lookup_keys, meta_check, segment_names,
    stat_table, totals, touch, upsert_stats, valid_rows,
)
from dlm.cache.schema import (
    INDEX_NAME, CacheIndexCorrupt, connect, is_corruption, read_tx, root_id, tokenizer_id, write_tx,
)
from dlm.cache.segments import (
    MAX_SEGMENT_BYTES, ZSTD_LEVEL, SegmentReader, SegmentWriter, WriteFn, checksum, pack_ids,
    segment_dir,
)
from dlm.errors import CacheError
from dlm.tokenize.encode import RowEncoder, RowSpec
from dlm.tokenize.plain import read_file_row, spec_key, text_row_spec
from dlm.tokenize.seam import NullProgress, Progress, RowSet, TokenizedRows, TokenizeStats

log = logging.getLogger("dlm.cache")

DEFAULT_MAX_BYTES = 10 << 30
RACY_NS = 2_000_000_000
TOUCH_GRANULARITY_S = 3600
BATCH_ROWS = 1000
BATCH_BYTES = 4 << 20
IN_MEMORY = -2


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

    def warn(self, message: str) -> None:
        self.warnings.append(message)
        log.warning(message)


@dataclass(frozen=True)
class CacheOptions:
    """Tuning of a cached run. Sizes in bytes."""

    max_bytes: int = DEFAULT_MAX_BYTES
    batch_rows: int = BATCH_ROWS
    batch_bytes: int = BATCH_BYTES
    max_segment_bytes: int = MAX_SEGMENT_BYTES


class CachedRowTokenizer:
    """`RowTokenizer` over the tokenized-section cache (see module docstring).

    Args:
        cache_dir: `<store>/tokenized-cache/`, created on first use.
        tokenizer: a Hugging Face fast tokenizer.
        tokenizer_sha: its `tokenizer_sha256` (part of every key).
        max_bytes: cap on stored entry bytes (default 10 GiB).
        run_id: names this run in `runs` (last-run hit rate).
        batch_rows, batch_bytes: a miss batch ends at this many rows or text bytes.
        max_segment_bytes: segment files roll over past this size.
        segment_write: the raw write of segment bytes (`os.write`; a seam for tests).

    Attributes:
        last_report: `CacheRunReport` of the latest `tokenize` call.
    """

    def __init__(
        self,
        cache_dir: Path,
        tokenizer: Any,
        tokenizer_sha: str,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        run_id: str,
        batch_rows: int = BATCH_ROWS,
        batch_bytes: int = BATCH_BYTES,
        max_segment_bytes: int = MAX_SEGMENT_BYTES,
        segment_write: WriteFn = os.write,
    ) -> None:
        self.cache_dir = Path(cache_dir)
        self.segment_write = segment_write
        self.encoder = RowEncoder(tokenizer)
        self.tokenizer_sha = tokenizer_sha
        self.run_id = run_id
        self.options = CacheOptions(max_bytes, batch_rows, batch_bytes, max_segment_bytes)
        self.last_report: CacheRunReport | None = None

    def tokenize(self, rows: RowSet, progress: Progress | None = None) -> TokenizedRows:
        """Ids of every usable row, from the cache where possible.

        Returns:
            `TokenizedRows`; `read(i)` gives 1-D uint16|uint32 [lengths[i]], identical
            to `PlainRowTokenizer`'s. `stats` counts hits and misses per row.

        Raises:
            CacheError: the cache folder cannot be written (disk full, permissions).
        """
        try:
            return _Run(self, rows, progress or NullProgress()).execute()
        except (sqlite3.DatabaseError, CacheIndexCorrupt) as exc:
            if not isinstance(exc, CacheIndexCorrupt) and not is_corruption(exc):
                raise CacheError(
                    f"{self.cache_dir / INDEX_NAME}: cache index write failed ({exc}); free disk "
                    "space and retry, or set training.cache.enabled: false"
                ) from None
        quarantine_index(self.cache_dir)
        result = _Run(self, rows, progress or NullProgress()).execute()
        assert self.last_report is not None
        self.last_report.warn(
            f"{self.cache_dir / INDEX_NAME}: index was corrupt; moved aside and rebuilt"
        )
        return result


def quarantine_index(cache_dir: Path) -> None:
    """Move a corrupt index aside and drop the segments it described."""
    stamp = time.time_ns()
    for suffix in ("", "-wal", "-shm"):
        path = cache_dir / f"{INDEX_NAME}{suffix}"
        if path.exists():
            path.rename(cache_dir / f"{INDEX_NAME}{suffix}.corrupt-{stamp}")
    folder = segment_dir(cache_dir)
    if folder.is_dir():
        for seg in folder.iterdir():
            seg.unlink(missing_ok=True)


class _Run:
    """State of one `tokenize` call. Slots: text rows, then file rows, in order."""

    def __init__(self, owner: CachedRowTokenizer, rows: RowSet, progress: Progress) -> None:
        self.o, self.rows, self.progress = owner, rows, progress
        self.n_text = len(rows.text_rows)
        n = self.n_text + len(rows.file_rows)
        self.keys: list[str | None] = [None] * n
        self.skip: dict[int, str] = {}
        self.lossy: set[int] = set()
        self.loc = np.full((n, 9), -1, dtype=np.int64)
        self.hit = np.zeros(n, dtype=bool)
        self.where: dict[str, tuple[int, ...]] = {}  # key -> E resolved this run
        self.mem: dict[str, np.ndarray] = {}
        self.encoded: set[str] = set()
        self.stale: list[str] = []
        self.report = CacheRunReport(owner.run_id)
        self.admitting = True
        self.cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
        self.now_s = int(time.time())

    def execute(self) -> TokenizedRows:
        started = time.perf_counter()
        o = self.o
        self.conn = connect(o.cache_dir)
        self.tok = tokenizer_id(self.conn, o.tokenizer_sha)
        self.reader = SegmentReader(o.cache_dir)
        self.writer = SegmentWriter(o.cache_dir, self.conn, o.options.max_segment_bytes, o.segment_write)
        self.progress.start("tokenizing", len(self.loc))
        try:
            pending = self._resolve()
            self._stream(pending)
            self._finish()
        finally:
            self.writer.close()
        result = self._assemble(time.perf_counter() - started)
        self.conn.close()
        o.last_report = self.report
        return result

    # phase 1 -------------------------------------------------------------
    def _resolve(self) -> list[int]:
        rows = self.rows
        for i, row in enumerate(rows.text_rows):
            self.keys[i] = spec_key(self.o.tokenizer_sha, text_row_spec(row))
        groups: dict[str, list[int]] = {}
        for j, fr in enumerate(rows.file_rows):
            p = str(fr.path)
            groups.setdefault(p[: len(p) - len(fr.relpath) - 1], []).append(self.n_text + j)
        self.root_ids = {root: root_id(self.conn, root) for root in groups}
        pending: list[int] = []
        hit_slots: list[int] = []
        hit_rows: list[tuple] = []
        with read_tx(self.conn):
            self.seg_names = segment_names(self.conn)
            found = lookup_keys(self.conn, [k for k in self.keys[: self.n_text] if k])
            for i in range(self.n_text):
                e = found.get(self.keys[i])  # type: ignore[arg-type]
                (hit_slots.append(i), hit_rows.append(e)) if e else pending.append(i)
            for root, slots in groups.items():
                table = stat_table(self.conn, self.tok, self.root_ids[root])
                self._resolve_files(table, slots, pending, hit_slots, hit_rows)
        self._accept_hits(hit_slots, as_entries(hit_rows), pending)
        return sorted(pending)

    def _resolve_files(self, table, slots, pending, hit_slots, hit_rows) -> None:
        files, n_text = self.rows.file_rows, self.n_text
        for slot in slots:
            fr = files[slot - n_text]
            rec = table.get(fr.relpath)
            if (
                rec is None or rec[0] != fr.size or rec[1] != fr.mtime_ns
                or rec[2] != fr.ctime_ns or rec[3] != fr.ino or fr.mtime_ns >= rec[4] - RACY_NS
            ):
                pending.append(slot)
            elif rec[6] is not None:
                self.skip[slot] = rec[6]
            elif rec[8] is None:
                pending.append(slot)  # known key, entry evicted: the text is needed
            else:
                self.keys[slot] = rec[5]
                if rec[7]:
                    self.lossy.add(slot)
                hit_slots.append(slot)
                hit_rows.append(rec[8:])

    def _accept_hits(self, slots: list[int], entries: np.ndarray, pending: list[int]) -> None:
        """Take verified entries whose segment opens; the rest go to `pending`."""
        ok = valid_rows(entries)
        if not ok.all():
            self.report.corrupt += int((~ok).sum())
            self.report.warn(f"{int((~ok).sum())} cache index rows failed their check; re-tokenizing")
        for seg in np.unique(entries[ok, SEG]).tolist():
            name = self.seg_names.get(seg)
            if name is None or not self.reader.open(seg, name):
                ok &= entries[:, SEG] != seg
        idx = np.array(slots, dtype=np.int64)
        self.loc[idx[ok]] = entries[ok]
        self.hit[idx[ok]] = True
        for slot in idx[~ok].tolist():
            if slot >= self.n_text:
                self.keys[slot] = None
            pending.append(slot)
        stale = entries[:, ACCESS] < self.now_s - TOUCH_GRANULARITY_S
        for slot in idx[ok & stale].tolist():
            self.stale.append(self.keys[slot])  # type: ignore[arg-type]
        self.progress.advance(int(ok.sum()))

    # phase 2 -------------------------------------------------------------
    def _stream(self, pending: list[int]) -> None:
        chunk: list[tuple[int, RowSpec]] = []
        stats: list[tuple] = []
        size = 0
        skipped = 0
        for slot in pending:
            if slot < self.n_text:
                spec = text_row_spec(self.rows.text_rows[slot])
            else:
                spec = self._read_file(slot, stats)
                if spec is None:
                    skipped += 1
                    continue
            chunk.append((slot, spec))
            size += len(spec.text)
            if len(chunk) >= self.o.options.batch_rows or size >= self.o.options.batch_bytes:
                self._flush(chunk, stats, skipped)
                chunk, stats, size, skipped = [], [], 0, 0
        if chunk or stats or skipped:
            self._flush(chunk, stats, skipped)

    def _read_file(self, slot: int, stats: list[tuple]) -> RowSpec | None:
        fr = self.rows.file_rows[slot - self.n_text]
        p = str(fr.path)
        rid = self.root_ids[p[: len(p) - len(fr.relpath) - 1]]
        recorded = time.time_ns()
        got = read_file_row(fr)
        head = (self.tok, rid, fr.relpath, fr.size, fr.mtime_ns, fr.ctime_ns, fr.ino, recorded)
        if isinstance(got, str):
            self.skip[slot] = got
            stats.append((*head, None, got, 0))
            return None
        key = spec_key(self.o.tokenizer_sha, got.spec)
        self.keys[slot] = key
        if got.lossy:
            self.lossy.add(slot)
        stats.append((*head, key, None, int(got.lossy)))
        return got.spec

    def _flush(self, chunk: list[tuple[int, RowSpec]], stats: list[tuple], skipped: int) -> None:
        keys = [self.keys[slot] for slot, _ in chunk]
        unknown = [k for k in dict.fromkeys(keys) if k not in self.where]
        if unknown:
            self._take_found(lookup_keys(self.conn, unknown))
        specs: dict[str, RowSpec] = {}
        for (slot, spec), key in zip(chunk, keys):
            if key not in self.where:
                specs.setdefault(key, spec)  # type: ignore[arg-type]
        rows = self._encode_and_write(specs) if specs else []
        for (slot, _), key in zip(chunk, keys):
            self.hit[slot] = key not in self.encoded
        with write_tx(self.conn):
            insert_entries(self.conn, rows)
            upsert_stats(self.conn, stats)
        self.progress.advance(len(chunk) + skipped)

    def _take_found(self, found: dict[str, tuple]) -> None:
        keys = list(found)
        entries = as_entries([found[k] for k in keys])
        ok = valid_rows(entries)
        for seg in np.unique(entries[ok, SEG]).tolist():
            name = segment_names(self.conn).get(seg) if seg not in self.seg_names else self.seg_names[seg]
            if name is None or not self.reader.open(seg, name):
                ok &= entries[:, SEG] != seg
        for key, e, good in zip(keys, entries.tolist(), ok.tolist()):
            if good:
                self.where[key] = tuple(e)
                if e[ACCESS] < self.now_s - TOUCH_GRANULARITY_S:
                    self.stale.append(key)

    def _encode_and_write(self, specs: dict[str, RowSpec]) -> list[tuple]:
        keys = list(specs)
        encoded = self.o.encoder.encode([specs[k] for k in keys])
        self.encoded.update(keys)
        payloads = [pack_ids(e.ids, self.cctx) for e in encoded]
        if self.admitting and not self._make_room(sum(map(len, payloads)), keys):
            self.admitting = False
            self.report.warn(
                f"this run needs more than training.cache.max_bytes ({self.o.options.max_bytes} bytes); "
                "stopped admitting new cache entries (raise max_bytes to cache the whole run)"
            )
        if not self.admitting:
            for key, e in zip(keys, encoded):
                self.mem[key] = e.ids
                self.where[key] = (IN_MEMORY, 0, 0, e.ids.shape[0], e.n_prompt, e.ids.dtype.itemsize, 0, 0, 0)
            self.report.not_admitted += len(keys)
            return []
        seg, offsets = self.writer.append(payloads)
        assert self.writer.current is not None
        self.seg_names[seg] = self.writer.current.name
        self.reader.open(seg, self.writer.current.name)
        cols = np.array(
            [
                (seg, off, len(p), e.ids.shape[0], e.n_prompt, e.ids.dtype.itemsize,
                 checksum(p), 0, self.now_s)
                for off, p, e in zip(offsets, payloads, encoded)
            ],
            dtype=np.int64,
        )
        cols[:, META] = meta_check(cols)
        rows = []
        for key, e in zip(keys, cols.tolist()):
            self.where[key] = tuple(e)
            rows.append((key, self.tok, *e))
        self.report.admitted += len(rows)
        return rows

    def _make_room(self, incoming: int, keys: list[str]) -> bool:
        cap = self.o.options.max_bytes
        if totals(self.conn)[0] + incoming <= cap:
            return True
        protected = {k for k in self.keys if k} | set(keys)
        with maint_lock(self.o.cache_dir):
            result = evict_lru(self.conn, max(0, int(cap * EVICT_TO_FRACTION) - incoming), protected)
            compact(self.conn, self.o.cache_dir)
        self.report.evicted_entries += result.evicted_entries
        self.report.evicted_bytes += result.evicted_bytes
        return result.bytes_after + incoming <= cap

    # end -------------------------------------------------------------------
    def _finish(self) -> None:
        if self.stale:
            with write_tx(self.conn):
                touch(self.conn, self.stale, self.now_s)

    def _assemble(self, seconds: float) -> TokenizedRows:
        kept = [s for s in range(len(self.keys)) if s not in self.skip]
        for s in kept:
            if self.loc[s, SEG] == -1:
                self.loc[s] = self.where[self.keys[s]]  # type: ignore[index]
        loc = self.loc[kept]
        hits = int(self.hit[kept].sum())
        self.report.hits, self.report.misses = hits, len(kept) - hits
        keys = [self.keys[s] for s in kept]
        n = len(kept)
        with write_tx(self.conn):
            self.conn.execute(
                "INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?)",
                (self.o.run_id, time.time_ns(), n, hits, n - hits, seconds, self.tok),
            )
        kinds = [r.kind for r in self.rows.text_rows] + ["source"] * (n - self.n_text)
        stats = TokenizeStats(n, hits, n - hits, seconds, totals(self.conn)[0])
        rows = TokenizedRows(
            lengths=loc[:, NTOK].copy(),
            n_prompt=loc[:, NPROMPT].astype(np.int32),
            keys=keys,  # type: ignore[arg-type]
            read=_Reader(self, loc, keys, kept, stats),
            kinds=kinds,  # type: ignore[arg-type]
            files_taken=n - self.n_text,
            files_skipped=Counter(self.skip.values()),
            lossy_files=len(self.lossy),
            stats=stats,
        )
        return rows


class _Reader:
    """`read(i)` of a cached run: pread + verify + decompress; heals a bad entry."""

    def __init__(self, run: _Run, loc: np.ndarray, keys: list, slots: list[int], stats: TokenizeStats):
        self.reader, self.mem, self.report = run.reader, run.mem, run.report
        self.loc, self.keys, self.slots, self.stats = loc, keys, slots, stats
        self.rows, self.n_text, self.owner = run.rows, run.n_text, run.o

    def __call__(self, i: int) -> np.ndarray:
        seg, off, nb, nt, _np, dt, ck = (int(v) for v in self.loc[i, :7])
        if seg == IN_MEMORY:
            return self.mem[self.keys[i]]
        ids = self.reader.read(seg, off, nb, nt, dt, ck)
        return ids if ids is not None else self._heal(i, seg, off)

    def _heal(self, i: int, seg: int, off: int) -> np.ndarray:
        key, slot = self.keys[i], self.slots[i]
        self.report.corrupt += 1
        self.report.warn(f"cache entry {key} failed its checksum; re-tokenized (counted as a miss)")
        self.stats.cache_hits -= 1
        self.stats.cache_misses += 1
        try:
            conn = connect(self.owner.cache_dir)
            with write_tx(conn):
                delete_entry(conn, key, seg, off)
            conn.close()
        except (sqlite3.DatabaseError, CacheError, OSError):
            pass
        if slot < self.n_text:
            spec = text_row_spec(self.rows.text_rows[slot])
        else:
            fr = self.rows.file_rows[slot - self.n_text]
            got = read_file_row(fr)
            spec = None if isinstance(got, str) else got.spec
            if spec is None or spec_key(self.owner.tokenizer_sha, spec) != key:
                raise CacheError(
                    f"{fr.path}: changed during the run and its cache entry is damaged; run again"
                )
        ids = self.owner.encoder.encode([spec])[0].ids
        self.mem[key] = ids
        self.loc[i, SEG] = IN_MEMORY
        return ids

