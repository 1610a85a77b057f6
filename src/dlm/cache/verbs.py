"""Library verbs behind `dlm cache`: summary, prune, clear, build. Each returns a value.

None of them imports typer or rich; `dlm.cli.cache_cmd` renders the results.
"""

from __future__ import annotations

import math
import re
import shutil
import sqlite3
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlm.cache.evict import compact, maint_lock, prune_older, segment_bytes
from dlm.cache.index import totals
from dlm.cache.schema import (
    INDEX_NAME,
    STATE_NAME,
    CacheIndexCorrupt,
    connect,
    connect_readonly,
    connect_state,
    write_tx,
)
from dlm.errors import CacheError, UsageError
from dlm.rows.types import RowSet
from dlm.tokenize.seam import Progress

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([dhms])\s*$")
_UNIT_S = {"d": 86400, "h": 3600, "m": 60, "s": 1}
MAX_AGE_S = 1000 * 365.25 * 86400
DTYPE_NAMES = {2: "uint16", 4: "uint32"}


def parse_age(text: str) -> float:
    """Seconds in an age like `30d`, `12h`, `45m`, `90s`.

    Raises:
        UsageError: any other shape.
    """
    match = _AGE.match(text)
    if not match:
        raise UsageError(f"--older-than {text!r}: expected a number and a unit, like 30d, 12h, 45m or 90s")
    seconds = float(match.group(1)) * _UNIT_S[match.group(2)]
    if not math.isfinite(seconds) or seconds > MAX_AGE_S:
        raise UsageError(f"--older-than {text!r}: more than 1000 years; give a shorter age, like 365d")
    return seconds


def index_exists(store_dir: Path) -> bool:
    return (store_dir / INDEX_NAME).is_file()


def disk_bytes(store_dir: Path) -> int:
    """Bytes on disk: segment files plus the index and its WAL."""
    index = sum(p.stat().st_size for p in store_dir.glob(f"{INDEX_NAME}*") if p.is_file() and "corrupt" not in p.name)
    return segment_bytes(store_dir) + index


def cache_summary(store_dir: Path, state_dir: Path | None = None, doc_id: str | None = None) -> dict[str, Any] | None:
    """What `dlm cache show` and `dlm show --json` (`training_cache`) report.

    `store_dir` is the store; `state_dir` the document's state folder (default: the
    same folder); with `doc_id`, `entry_count` counts the document's own entries.

    Returns None when there is no cache, else a dict: `path` (the store), `state_path`,
    `entry_count`, `shared_entries` (of those, entries another document also uses),
    `store_entry_count`, `bytes` (store on disk), `entry_bytes` (live stored bytes
    of the store), `token_dtype` (`uint16`, `uint32`, `uint16+uint32` or None),
    `tokenizer_sha256` (of the last run), `last_run_id`, `last_run_hits`,
    `last_run_total`, `last_run_hit_rate` (0..1 or None), and `error` (None, or why
    an index could not be read).
    """
    from dlm.cache.shared import refs_of, unpack_keys

    store_dir = Path(store_dir)
    state_dir = Path(state_dir) if state_dir is not None else store_dir
    if not index_exists(store_dir) or (doc_id is not None and not (state_dir / STATE_NAME).is_file()):
        return None
    out: dict[str, Any] = {
        "path": str(store_dir),
        "state_path": str(state_dir),
        "entry_count": 0,
        "shared_entries": 0,
        "store_entry_count": 0,
        "bytes": 0,
        "entry_bytes": 0,
        "token_dtype": None,
        "tokenizer_sha256": None,
        "last_run_id": None,
        "last_run_hits": None,
        "last_run_total": None,
        "last_run_hit_rate": None,
        "error": None,
    }
    try:
        conn = connect_readonly(store_dir)  # a summary writes nothing: a read-only cache is shown
        try:
            live, count = totals(conn)
            dtypes = [d for (d,) in conn.execute("SELECT DISTINCT dtype FROM entries ORDER BY dtype")]
            mine = conn.execute("SELECT keys FROM doc_refs WHERE doc = ?", (doc_id,)).fetchone()
            mine_count = len(mine[0]) // 16 if mine else 0  # sorted unique 16-byte keys
            others = refs_of(conn, exclude=doc_id) if mine else set()
            shared = len(unpack_keys(mine[0]) & others) if others else 0  # no other document: nothing shared
        finally:
            conn.close()
        state = connect_readonly(state_dir, STATE_NAME)
        try:
            last = state.execute(
                "SELECT r.run_id, r.hits, r.total, t.sha FROM runs r LEFT JOIN tokenizers t"
                " ON t.id = r.tok ORDER BY r.finished_ns DESC LIMIT 1"
            ).fetchone()
        finally:
            state.close()
    except (CacheError, sqlite3.DatabaseError) as exc:
        out["error"] = str(exc)
        out["bytes"] = disk_bytes(store_dir)
        return out
    out.update(
        entry_count=mine_count if doc_id is not None else count,
        shared_entries=shared,
        store_entry_count=count,
        entry_bytes=live,
        bytes=disk_bytes(store_dir),
    )
    out["token_dtype"] = "+".join(DTYPE_NAMES.get(d, f"{d * 8}-bit") for d in dtypes) or None
    if last:
        run_id, hits, total, sha = last
        out.update(last_run_id=run_id, last_run_hits=hits, last_run_total=total, tokenizer_sha256=sha)
        out["last_run_hit_rate"] = hits / total if total else None
    return out


@dataclass(frozen=True)
class PruneResult:
    """Outcome of `prune_cache`. Bytes: stored entry bytes / segment file bytes."""

    older_than_s: float
    removed_entries: int
    removed_bytes: int
    entry_bytes_after: int
    segments_rewritten: int
    segments_removed: int
    bytes_reclaimed: int
    orphans_removed: int


def prune_cache(store_dir: Path, older_than_s: float, now_s: float | None = None) -> PruneResult:
    """Delete entries unused for `older_than_s` seconds, compact, reclaim orphans.

    Raises:
        CacheError: the index cannot be opened.
    """
    now_s = time.time() if now_s is None else now_s
    conn = connect(Path(store_dir))
    try:
        with maint_lock(Path(store_dir)):
            pruned = prune_older(conn, int(max(now_s - older_than_s, -(2.0**62))))
            packed = compact(conn, Path(store_dir), min_live_fraction=0.999)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return PruneResult(
            older_than_s,
            pruned.evicted_entries,
            pruned.evicted_bytes,
            pruned.bytes_after,
            packed.segments_rewritten,
            packed.segments_removed,
            packed.bytes_reclaimed,
            packed.orphans_removed,
        )
    finally:
        conn.close()


@dataclass(frozen=True)
class ClearResult:
    """Outcome of `clear_cache`: what was there before."""

    path: str
    existed: bool
    removed_entries: int
    removed_bytes: int
    reset_corrupt_index: bool = False


def clear_cache(store_dir: Path) -> ClearResult:
    """Empty the cache. A readable index is emptied in place (safe beside a running
    reader: its open segments stay readable); an unreadable one is removed with its
    folder."""
    store_dir = Path(store_dir)
    if not store_dir.exists():
        return ClearResult(str(store_dir), False, 0, 0)
    before = disk_bytes(store_dir)
    try:
        conn = connect(store_dir)
    except CacheIndexCorrupt:
        shutil.rmtree(store_dir, ignore_errors=True)
        if store_dir.exists():
            raise CacheError(
                f"{store_dir}: the cache index is unreadable and the folder cannot be removed; "
                "remove it by hand or make it writable"
            ) from None
        return ClearResult(str(store_dir), True, 0, before, reset_corrupt_index=True)
    try:
        with maint_lock(store_dir):
            _, count = totals(conn)
            with write_tx(conn):
                for table in ("entries", "stat_snapshots", "runs", "doc_refs"):
                    conn.execute(f"DELETE FROM {table}")
            if (store_dir / STATE_NAME).is_file():
                state = connect_state(store_dir)
                with write_tx(state):
                    for table in ("stat_snapshots", "roots", "runs"):
                        state.execute(f"DELETE FROM {table}")
                state.close()
            compact(conn, store_dir, min_live_fraction=1.0)
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except (sqlite3.DatabaseError, OSError) as exc:
        raise CacheError(
            f"{store_dir}: cannot clear the cache ({exc}); nothing was removed; make the folder writable"
        ) from None
    finally:
        conn.close()
    return ClearResult(str(store_dir), True, count, before - disk_bytes(store_dir))


@dataclass(frozen=True)
class BuildResult:
    """Outcome of `build_cache`: rows tokenized into the cache without training."""

    rows: int
    hits: int
    misses: int
    seconds: float
    bytes: int
    files_taken: int
    files_skipped: dict[str, int]
    warnings: list[str] = field(default_factory=list)


def build_cache(
    state_dir: Path,
    tokenizer: Any,
    tokenizer_sha256: str,
    rows: RowSet,
    *,
    max_bytes: int,
    run_id: str,
    progress: Progress | None = None,
    trust_stat: bool = True,
    store_dir: Path | None = None,
    doc_id: str | None = None,
    remote: str | None = None,
) -> BuildResult:
    """Tokenize every row of `rows` into the cache (see `CachedRowEncoder`).
    `trust_stat=False` re-reads and re-hashes every file (`dlm cache build --rehash`)."""
    from dlm.cache.encoder import CachedRowEncoder  # the session: only this verb tokenizes

    cached = CachedRowEncoder(
        state_dir,
        tokenizer,
        tokenizer_sha256,
        max_bytes=max_bytes,
        run_id=run_id,
        trust_stat=trust_stat,
        store_dir=store_dir,
        doc_id=doc_id,
        remote=remote,
    )
    got = cached.tokenize(rows, progress)
    report = cached.last_report
    return BuildResult(
        rows=len(got),
        hits=got.stats.cache_hits,
        misses=got.stats.cache_misses,
        seconds=got.stats.seconds,
        bytes=disk_bytes(Path(store_dir or state_dir)),
        files_taken=got.files_taken,
        files_skipped=dict(Counter(got.files_skipped)),
        warnings=list(report.warnings) if report else [],
    )


@dataclass(frozen=True)
class HealthReport:
    """Consistency of a cache: the running totals against a full re-sum, and every
    entry read back and verified. `ok` when nothing is off."""

    entries: int
    unreadable: int
    totals_match: int
    segment_totals_match: bool

    @property
    def ok(self) -> bool:
        return self.unreadable == 0 and bool(self.totals_match) and self.segment_totals_match


def check_cache(store_dir: Path) -> HealthReport:
    """Full scan (for `dlm doctor` and tests; never on a training path)."""
    from dlm.cache.index import ENTRY_COLS
    from dlm.cache.segments import SegmentReader

    conn = connect(Path(store_dir))
    try:
        live, count = totals(conn)
        summed = conn.execute("SELECT COALESCE(SUM(nbytes), 0), COUNT(*) FROM entries").fetchone()
        seg_ok = not conn.execute(
            "SELECT 1 FROM segments s WHERE s.live_bytes != (SELECT COALESCE(SUM(nbytes), 0)"
            " FROM entries e WHERE e.segment = s.id) LIMIT 1"
        ).fetchone()
        names = dict(conn.execute("SELECT id, name FROM segments"))
        rows = conn.execute(f"SELECT {ENTRY_COLS} FROM entries").fetchall()
    finally:
        conn.close()
    reader = SegmentReader(Path(store_dir))
    bad = 0
    for seg, off, nb, nt, _np, dt, ck, _m, _a in rows:
        if not reader.open(seg, names.get(seg, "")) or reader.read(seg, off, nb, nt, dt, ck) is None:
            bad += 1
    reader.close()
    return HealthReport(count, bad, int((live, count) == tuple(summed)), seg_ok)
