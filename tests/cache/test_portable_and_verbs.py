"""Export/import integrity and the small verbs (age parsing, summaries)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from cachehelp import FAKE_SHA, FakeTokenizer, row_set

from dlm.cache import (
    CachedRowEncoder,
    build_cache,
    cache_summary,
    export_cache,
    import_cache,
    parse_age,
)
from dlm.errors import CacheError, UsageError


def fill(cache_dir: Path, rows) -> None:
    CachedRowEncoder(cache_dir, FakeTokenizer(), FAKE_SHA, max_bytes=1 << 30, run_id="r").tokenize(rows)


def test_import_skips_damaged_entries(tree: Path, cache_dir: Path, tmp_path: Path):
    rows = row_set(tree)
    fill(cache_dir, rows)
    export_cache(cache_dir, tmp_path / "x.tar")
    with tarfile.open(tmp_path / "x.tar") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    data = bytearray(members["data.bin"])
    data[len(data) // 2] ^= 0xFF
    damaged = tmp_path / "damaged.tar"
    with tarfile.open(damaged, "w") as tar:
        for name, blob in members.items():
            blob = bytes(data) if name == "data.bin" else blob
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    result = import_cache(tmp_path / "fresh", damaged, FAKE_SHA, max_bytes=1 << 30)
    assert result.corrupt_skipped == 1 and result.entries_imported == len(rows.text_rows) + len(rows.file_rows) - 2


def test_import_rejects_non_exports(tmp_path: Path):
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"nope")
    with pytest.raises(CacheError):
        import_cache(tmp_path / "c", junk, FAKE_SHA, max_bytes=1 << 30)


def test_parse_age():
    assert parse_age("30d") == 30 * 86400 and parse_age("12h") == 43200 and parse_age("1.5m") == 90
    with pytest.raises(UsageError):
        parse_age("30 days")


def test_summary_and_build(tree: Path, cache_dir: Path):
    assert cache_summary(cache_dir) is None
    rows = row_set(tree)
    first = build_cache(cache_dir, FakeTokenizer(), FAKE_SHA, rows, max_bytes=1 << 30, run_id="b1")
    second = build_cache(cache_dir, FakeTokenizer(), FAKE_SHA, rows, max_bytes=1 << 30, run_id="b2")
    assert first.misses == first.rows and second.hits == second.rows and second.bytes > 0
    summary = cache_summary(cache_dir)
    assert summary["tokenizer_sha256"] == FAKE_SHA and summary["bytes"] > summary["entry_bytes"] > 0
    from dlm.cli.common import hit_rate_text

    assert hit_rate_text(summary) == f"100.0% ({second.rows}/{second.rows})"
    import sqlite3

    sqlite3.connect(cache_dir / "index.sqlite").execute("PRAGMA wal_checkpoint(TRUNCATE)")
    (cache_dir / "index.sqlite").write_bytes(b"garbage" * 1000)
    assert cache_summary(cache_dir)["error"]
