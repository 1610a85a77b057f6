"""Bounded disk: LRU eviction, run protection, over-cap admission stop, compaction, orphans."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from cachehelp import FAKE_SHA, FakeTokenizer, make_tree, row_set, same_rows

from dlm.cache import CachedRowEncoder, check_cache, clear_cache, prune_cache
from dlm.cache.evict import segment_bytes
from dlm.cache.segments import segment_dir
from dlm.cache.verbs import disk_bytes
from dlm.rows.types import RowSet
from dlm.tokenize.plain import PlainRowEncoder


def run(cache_dir: Path, rows: RowSet, max_bytes: int, name: str = "r"):
    tok = CachedRowEncoder(
        cache_dir, FakeTokenizer(), FAKE_SHA, max_bytes=max_bytes, run_id=name, batch_rows=8, max_segment_bytes=4096
    )
    return tok.tokenize(rows), tok.last_report


def stored(cache_dir: Path) -> int:
    return sqlite3.connect(cache_dir / "index.sqlite").execute("SELECT bytes FROM totals").fetchone()[0]


def keys_in(cache_dir: Path) -> set[str]:
    db = sqlite3.connect(cache_dir / "index.sqlite")
    return {"xxh3_128:" + k.hex() for (k,) in db.execute("SELECT key FROM entries")}


def test_lru_evicts_oldest_and_protects_the_run(tmp_path: Path, cache_dir: Path):
    a, b = tmp_path / "a", tmp_path / "b"
    make_tree(a, 30, seed=1)
    make_tree(b, 30, seed=2)
    rows_a, rows_b = row_set(a, texts=0), row_set(b, texts=0)
    got_a, _ = run(cache_dir, rows_a, 1 << 30, "a")
    size_a = stored(cache_dir)
    db = sqlite3.connect(cache_dir / "index.sqlite")
    db.execute("UPDATE entries SET last_access = 1000")  # a's entries are old
    db.commit()
    cap = int(size_a * 1.5)
    got_b, report = run(cache_dir, rows_b, cap, "b")
    assert same_rows(got_b, PlainRowEncoder(FakeTokenizer(), FAKE_SHA).tokenize(rows_b))
    assert report.evicted_entries > 0 and not report.warnings
    assert set(got_b.keys) <= keys_in(cache_dir), "the current run's entries must survive"
    assert stored(cache_dir) <= cap
    assert not set(got_a.keys) <= keys_in(cache_dir)
    assert check_cache(cache_dir).ok
    assert segment_bytes(cache_dir) <= 2 * cap, "compaction returns evicted bytes to the disk"


def test_run_bigger_than_cap_stops_admitting_and_says_so(tree: Path, cache_dir: Path):
    rows = row_set(tree)
    got, report = run(cache_dir, rows, 3000)
    assert report.not_admitted > 0 and any("max_bytes" in w for w in report.warnings)
    assert stored(cache_dir) <= 3000
    assert same_rows(got, PlainRowEncoder(FakeTokenizer(), FAKE_SHA).tokenize(rows))
    assert check_cache(cache_dir).ok


def test_prune_older_than_and_orphans(tree: Path, cache_dir: Path):
    rows = row_set(tree)
    run(cache_dir, rows, 1 << 30)
    db = sqlite3.connect(cache_dir / "index.sqlite")
    old = [k for (k,) in db.execute("SELECT key FROM entries LIMIT 10")]
    db.executemany("UPDATE entries SET last_access = 1000 WHERE key = ?", [(k,) for k in old])
    db.commit()
    orphan = segment_dir(cache_dir) / "dead-1-00.seg"
    orphan.write_bytes(b"x" * 5000)
    tmp = cache_dir / ".export.tmp"
    tmp.write_bytes(b"y")
    for p in (orphan, tmp):
        os.utime(p, (time.time() - 3600, time.time() - 3600))
    before = disk_bytes(cache_dir)
    result = prune_cache(cache_dir, older_than_s=30 * 86400)
    assert result.removed_entries == 10 and result.orphans_removed >= 2
    assert not orphan.exists() and not tmp.exists()
    assert set(old).isdisjoint(keys_in(cache_dir))
    assert disk_bytes(cache_dir) < before
    assert check_cache(cache_dir).ok
    warm, _ = run(cache_dir, rows, 1 << 30)
    assert warm.stats.cache_misses == 10


def test_clear_empties_and_reset_of_corrupt_index(tree: Path, cache_dir: Path):
    rows = row_set(tree)
    run(cache_dir, rows, 1 << 30)
    result = clear_cache(cache_dir)
    assert result.removed_entries == len(rows.text_rows) + len(rows.file_rows) - 1
    assert not list(segment_dir(cache_dir).iterdir())
    (cache_dir / "index.sqlite").write_bytes(b"not a database" * 100)
    assert clear_cache(cache_dir).reset_corrupt_index and not cache_dir.exists()
