"""Crash, concurrency, corruption and disk-full behaviour of the cache.

How each was shown able to fail (by hand, then reverted):
- kill -9: committing index rows before the segment bytes are written (deferring
  `SegmentWriter.append`'s write until after the commit in `_Run._flush`) makes
  `check_cache` report unreadable entries at the first self-kill point.
- corruption: making `segments.unpack_ids` skip the checksum returns wrong ids
  for a bit flip and `same_rows` fails; dropping the `meta` check makes the
  flipped-length test hand out a wrong length.
- two processes: not opening segments before compaction may unlink them shows up
  as mismatches (the reader then fails over to re-encoding, so `mismatches` stays 0
  only when healing works).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import zstandard
from cachehelp import FAKE_SHA, FakeTokenizer, make_tree, row_set, same_rows

from dlm.cache import CachedRowEncoder, check_cache, prune_cache
from dlm.cache.segments import segment_dir
from dlm.errors import CacheError
from dlm.tokenize.plain import PlainRowEncoder

WORKER = Path(__file__).with_name("worker.py")
REPO = Path(__file__).resolve().parents[2]


def worker(*args: object, **kw) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=f"{WORKER.parent}:{REPO / 'src'}")
    return subprocess.Popen(
        [sys.executable, str(WORKER), *map(str, args)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def plain(rows):
    return PlainRowEncoder(FakeTokenizer(), FAKE_SHA).tokenize(rows)


def cached(cache_dir: Path, run: str = "r", max_bytes: int = 1 << 30) -> CachedRowEncoder:
    return CachedRowEncoder(cache_dir, FakeTokenizer(), FAKE_SHA, max_bytes=max_bytes, run_id=run)


def kill_at_random_points(cache_dir: Path, tree: Path, points: int, seed: int) -> None:
    """Half the points: SIGKILL from outside, after a random number of batches or a
    random delay. The other half: the writer SIGKILLs itself inside a random segment
    write, after a random prefix of its bytes (the exact spot a wrong write order
    would expose)."""
    rng = random.Random(seed)
    rows = row_set(tree)
    for point in range(points):
        if point % 2:
            proc = worker("write", cache_dir, tree, rng.randint(1, 12), rng.randint(0, 10**6))
        else:
            proc = worker("write", cache_dir, tree)
            assert proc.stdout.readline(), proc.stderr.read()  # writing has begun
            if rng.random() < 0.5:
                for _ in range(rng.randint(0, 30)):  # after a random number of batches
                    proc.stdout.readline()
            else:
                time.sleep(rng.uniform(0.0, 0.3))  # at a random moment
            proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=120) == -signal.SIGKILL, proc.stderr.read()
        health = check_cache(cache_dir)
        assert health.ok, f"kill point {point}: {health}"
        got = cached(cache_dir, f"heal{point}").tokenize(rows)
        assert same_rows(got, plain(rows)), f"kill point {point}: wrong ids after a crash"
    prune_cache(cache_dir, older_than_s=10**9)
    assert check_cache(cache_dir).ok


def test_kill_9_during_writes_never_exposes_partial_entries(tree: Path, cache_dir: Path):
    kill_at_random_points(cache_dir, tree, points=8, seed=7)


@pytest.mark.slow
def test_kill_9_at_50_points(tree: Path, cache_dir: Path):
    kill_at_random_points(cache_dir, tree, points=50, seed=11)


def test_two_processes_under_eviction(tmp_path: Path, cache_dir: Path):
    a, b = tmp_path / "a", tmp_path / "b"
    make_tree(a, 40, seed=3)
    make_tree(b, 40, seed=4)
    cached(cache_dir).tokenize(row_set(a))  # warm part of the cache first
    cap = 9000  # far below one run's size: constant eviction, admission stops
    procs = [worker("race", cache_dir, root, 6, cap) for root in (a, b, a)]
    outs = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, outs, strict=False):
        assert proc.returncode == 0, err
        result = json.loads(out.strip().splitlines()[-1])
        assert result["runs"] == 6 and result["mismatches"] == 0 and result["corrupt"] == 0
    assert check_cache(cache_dir).ok


def flip_bit(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x10
    path.write_bytes(bytes(data))


def test_bit_flip_and_truncation_in_segments_are_misses(tree: Path, cache_dir: Path):
    rows = row_set(tree)
    want = plain(rows)
    cached(cache_dir).tokenize(rows)
    segs = sorted(segment_dir(cache_dir).iterdir())
    flip_bit(segs[0], segs[0].stat().st_size // 2)
    with open(segs[-1], "r+b") as fh:
        fh.truncate(segs[-1].stat().st_size - 7)
    tok = cached(cache_dir, "after")
    got = tok.tokenize(rows)
    assert same_rows(got, want)
    assert tok.last_report.corrupt == 2 and len(tok.last_report.warnings) == 2
    assert got.stats.cache_misses == 2 and got.stats.cache_hits == len(want) - 2
    healed = cached(cache_dir, "healed").tokenize(rows)
    assert same_rows(healed, want) and healed.stats.cache_misses == 2
    third = cached(cache_dir, "third").tokenize(rows)
    assert third.stats.cache_misses == 0


def test_flipped_index_row_is_caught_before_its_length_is_used(tree: Path, cache_dir: Path):
    rows = row_set(tree)
    first = cached(cache_dir).tokenize(rows)
    db = sqlite3.connect(cache_dir / "index.sqlite")
    # flip bit 2 of a text row's token count (SQLite has no XOR operator)
    db.execute(
        "UPDATE entries SET ntokens = (ntokens | 4) - (ntokens & 4) WHERE key = ?",
        (bytes.fromhex(first.keys[0].split(":")[1]),),
    )
    db.commit()
    tok = cached(cache_dir, "after")
    got = tok.tokenize(rows)
    assert same_rows(got, plain(rows)) and tok.last_report.corrupt == 1


def test_damaged_stat_snapshot_is_ignored(tree: Path, cache_dir: Path):
    """A bit flipped in a stat snapshot (here inside its entry locations) fails the
    snapshot checksum: its files are re-read and found by key, nothing re-encoded."""
    rows = row_set(tree)
    cached(cache_dir).tokenize(rows)
    db = sqlite3.connect(cache_dir / "state.sqlite")
    raw = bytearray(
        zstandard.ZstdDecompressor().decompress(db.execute("SELECT data FROM stat_snapshots").fetchone()[0])
    )
    raw[24 + 41 * 8 * 5 + 8] ^= 0x01
    db.execute("UPDATE stat_snapshots SET data = ?", (zstandard.ZstdCompressor().compress(bytes(raw)),))
    db.commit()
    tok = cached(cache_dir, "after")
    got = tok.tokenize(rows)
    assert same_rows(got, plain(rows)) and got.stats.cache_misses == 0
    assert any("stat index" in w for w in tok.last_report.warnings)
    again = cached(cache_dir, "again")
    again.tokenize(rows)
    assert not again.last_report.warnings, "the snapshot was rewritten"


def test_damaged_index_file_is_rebuilt(tree: Path, cache_dir: Path):
    rows = row_set(tree)
    cached(cache_dir).tokenize(rows)
    index = cache_dir / "index.sqlite"
    sqlite3.connect(index).execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(index.read_bytes())
    data[:100] = os.urandom(100)  # header gone
    index.write_bytes(bytes(data))
    tok = cached(cache_dir, "after")
    got = tok.tokenize(rows)
    assert same_rows(got, plain(rows))
    assert any("corrupt" in w for w in tok.last_report.warnings)
    assert check_cache(cache_dir).ok


@pytest.mark.parametrize("limit", [6_000, 150_000])
def test_file_size_limit_is_a_cache_error_and_leaves_the_cache_consistent(tree: Path, cache_dir: Path, limit: int):
    """RLIMIT_FSIZE in a subprocess: writes past `limit` bytes fail with EFBIG, wherever
    they land first (index, WAL or segment)."""
    cached(cache_dir).tokenize(row_set(tree, texts=1))
    make_tree(tree / "more", 60, seed=9, size=3000)  # misses to write
    rows = row_set(tree)
    proc = worker("fsize", cache_dir, tree, limit)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, (out, err)
    assert out.startswith("CacheError:") and "training.cache.enabled" in out
    assert check_cache(cache_dir).ok
    got = cached(cache_dir, "after").tokenize(rows)
    assert same_rows(got, plain(rows))


def test_disk_full_in_a_segment_write(tree: Path, cache_dir: Path):
    """The write seam fails with ENOSPC after some bytes, mid-batch."""
    import errno

    budget = {"left": 3000}

    def full_disk(fd: int, data: memoryview) -> int:
        if budget["left"] <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        n = os.write(fd, data[: budget["left"]])
        budget["left"] -= n
        return n

    rows = row_set(tree)
    tok = CachedRowEncoder(
        cache_dir, FakeTokenizer(), FAKE_SHA, max_bytes=1 << 30, run_id="full", batch_rows=4, segment_write=full_disk
    )
    with pytest.raises(CacheError, match="disk full"):
        tok.tokenize(rows)
    assert check_cache(cache_dir).ok
    got = cached(cache_dir, "after").tokenize(rows)
    assert same_rows(got, plain(rows)) and got.stats.cache_hits > 0
