"""The cache returns what the uncached path returns; the stat index avoids reads."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
from cachehelp import FAKE_SHA, OLD_NS, FakeTokenizer, file_rows, row_set, same_rows, settled_clock

from dlm.cache import CachedRowEncoder, cache_summary, check_cache
from dlm.rows.types import RowSet
from dlm.tokenize.plain import PlainRowEncoder


def cached(cache_dir: Path, run: str = "r", sha: str = FAKE_SHA, **kw) -> CachedRowEncoder:
    kw.setdefault("max_bytes", 1 << 30)
    kw.setdefault("clock", settled_clock)
    return CachedRowEncoder(cache_dir, FakeTokenizer(), sha, run_id=run, **kw)


def test_cold_then_warm_equal_plain(tree: Path, cache_dir: Path):
    rows = row_set(tree)
    want = PlainRowEncoder(FakeTokenizer(), FAKE_SHA).tokenize(rows)
    cold = cached(cache_dir, "cold", batch_rows=7).tokenize(rows)
    assert same_rows(cold, want)
    assert (cold.stats.cache_hits, cold.stats.cache_misses) == (0, len(want))
    warm = cached(cache_dir, "warm").tokenize(rows)
    assert same_rows(warm, want)
    assert (warm.stats.cache_hits, warm.stats.cache_misses) == (len(want), 0)
    assert warm.files_skipped == want.files_skipped == {"binary": 1}
    assert warm.kinds == want.kinds and warm.files_taken == want.files_taken
    assert check_cache(cache_dir).ok
    summary = cache_summary(cache_dir)
    assert summary["entry_count"] == len(want) and summary["token_dtype"] == "uint16"
    assert summary["last_run_id"] == "warm" and summary["last_run_hit_rate"] == 1.0


def test_warm_run_reads_no_unchanged_file(tree: Path, cache_dir: Path):
    """Files are deleted after the cold run; the walk's stat (unchanged) is all the warm
    run has. It must serve every row, and the binary skip, from the index alone."""
    rows = row_set(tree)
    want = cached(cache_dir).tokenize(rows)
    for fr in rows.file_rows:
        os.unlink(fr.path)
    warm = cached(cache_dir).tokenize(rows)
    assert same_rows(warm, want) and warm.stats.cache_misses == 0
    assert warm.files_skipped == {"binary": 1}


def test_racy_file_is_reread_next_run(tree: Path, cache_dir: Path):
    """A file modified within the timestamp granularity of its recording is not trusted
    on stat alone: the next run reads it again (here it is gone, so it shows up as
    unreadable). Without the guard, it would be served from the stat index."""
    fresh = tree / "fresh.py"
    fresh.write_text("just written\n")
    rows = row_set(tree)
    cached(cache_dir, clock=time.time_ns).tokenize(rows)
    fresh.unlink()
    second = cached(cache_dir).tokenize(rows)
    assert second.files_skipped == {"binary": 1, "unreadable": 1}


def test_edit_touch_and_tokenizer_change(tree: Path, cache_dir: Path):
    rows = row_set(tree)
    cached(cache_dir).tokenize(rows)
    edited = Path(rows.file_rows[3].path)
    edited.write_text(edited.read_text() + "# edited\n")
    touched = rows.file_rows[5].path
    os.utime(touched, ns=(OLD_NS + 10**9, OLD_NS + 10**9))  # new stat, same text
    rows2 = RowSet(rows.text_rows, file_rows(tree))
    got = cached(cache_dir).tokenize(rows2)
    assert got.stats.cache_misses == 1
    assert same_rows(got, PlainRowEncoder(FakeTokenizer(), FAKE_SHA).tokenize(rows2))
    other = cached(cache_dir, sha="sha256:" + "0" * 64).tokenize(rows2)
    assert other.stats.cache_hits == 0, "another tokenizer must never see these entries"
    assert set(other.keys).isdisjoint(got.keys)


def test_duplicate_rows_share_one_entry(tmp_path: Path, cache_dir: Path):
    root = tmp_path / "dups"
    for name in ("a", "b"):
        (root / name).mkdir(parents=True)
        (root / name / "same.txt").write_text("identical\n")
        os.utime(root / name / "same.txt", ns=(OLD_NS, OLD_NS))
    rows = RowSet([], file_rows(root))
    first = cached(cache_dir).tokenize(rows)
    assert first.keys[0] != first.keys[1]  # the relpath is part of the row text
    again = RowSet([*rows.text_rows], [*rows.file_rows, *rows.file_rows])
    got = cached(cache_dir).tokenize(again)
    assert len(got) == 4 and got.stats.cache_hits == 4


def test_wide_vocab_stores_uint32(tree: Path, cache_dir: Path):
    rows = row_set(tree)
    tok = FakeTokenizer(vocab=70_000)
    cold = CachedRowEncoder(cache_dir, tok, FAKE_SHA, max_bytes=1 << 30, run_id="w").tokenize(rows)
    warm = CachedRowEncoder(cache_dir, tok, FAKE_SHA, max_bytes=1 << 30, run_id="w2").tokenize(rows)
    assert warm.read(0).dtype == np.uint32 and same_rows(warm, cold)
    assert cache_summary(cache_dir)["token_dtype"] == "uint32"


def test_text_rows_are_cached_too(tree: Path, cache_dir: Path):
    rows = row_set(tree)
    cached(cache_dir).tokenize(rows)
    only_text = RowSet(rows.text_rows, [])
    got = cached(cache_dir).tokenize(only_text)
    assert got.stats.cache_hits == len(rows.text_rows)
    assert int(got.n_prompt[-1]) == len(b"<q>hi</q><a>")


def test_last_access_is_touched_coarsely(tree: Path, cache_dir: Path):
    import sqlite3

    rows = row_set(tree)
    cached(cache_dir).tokenize(rows)
    db = sqlite3.connect(cache_dir / "index.sqlite")
    db.execute("UPDATE entries SET last_access = 0")
    db.commit()
    cached(cache_dir).tokenize(rows)
    untouched = db.execute("SELECT COUNT(*) FROM entries WHERE last_access = 0").fetchone()[0]
    assert untouched == 40, "file rows served by a fresh stat snapshot are not touched within the hour"
    state = sqlite3.connect(cache_dir / "state.sqlite")
    state.execute("UPDATE stat_snapshots SET written_ns = 0")  # the stat snapshot is hours old
    state.commit()
    cached(cache_dir).tokenize(rows)
    oldest = db.execute("SELECT MIN(last_access) FROM entries").fetchone()[0]
    assert oldest > time.time() - 60
