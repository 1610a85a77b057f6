"""What the cache remembers across runs, and what it must not: the trust rules of
docs/cache.md ("What is remembered"), each with the defect that broke it."""

from __future__ import annotations

from pathlib import Path

from cachehelp import FAKE_SHA, FakeTokenizer, all_ids, file_rows

from dlm.cache import CachedRowTokenizer
from dlm.rows.types import RowSet
from dlm.tokenize.plain import PlainRowTokenizer


def cached(cache_dir: Path, **kw) -> CachedRowTokenizer:
    return CachedRowTokenizer(cache_dir, FakeTokenizer(), FAKE_SHA, max_bytes=1 << 30, run_id="r", **kw)


def test_a_failed_read_is_retried_next_run(tree: Path, cache_dir: Path):
    """A read that fails once (here: the path is briefly a folder, so open() raises an
    OSError as EIO or ESTALE would) skips the file in that run only; the next run with
    the same stat reads it again, as `--no-cache` would."""
    rows = RowSet([], file_rows(tree))
    victim = tree / "pkg0" / "mod_0000.py"
    aside = tree / "aside"
    victim.rename(aside)
    victim.mkdir()
    first = cached(cache_dir).tokenize(rows)
    assert first.files_skipped.get("unreadable") == 1
    victim.rmdir()
    aside.rename(victim)
    again = cached(cache_dir).tokenize(rows)
    plain = PlainRowTokenizer(FakeTokenizer(), FAKE_SHA).tokenize(rows)
    assert again.files_skipped.get("unreadable") is None
    assert again.keys == plain.keys and all_ids(again) == all_ids(plain)


def test_a_binary_file_is_remembered(tree: Path, cache_dir: Path):
    """A content-derived skip is trusted while the stat is unchanged: the binary file
    is not read again (its bytes changed here behind an unchanged stat, which only
    `trust_stat: false` sees)."""
    rows = RowSet([], file_rows(tree))
    assert cached(cache_dir).tokenize(rows).files_skipped == {"binary": 1}
    blob = tree / "image.bin"
    blob.write_bytes(b"x" * blob.stat().st_size)
    assert cached(cache_dir).tokenize(rows).files_skipped == {"binary": 1}
