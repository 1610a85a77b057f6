"""What the cache remembers across runs, and what it must not: the trust rules of
docs/cache.md ("What is remembered"), each with the defect that broke it."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from cachehelp import FAKE_SHA, OLD_NS, FakeTokenizer, all_ids, file_rows, settled_clock

from dlm.cache import CachedRowEncoder
from dlm.rows.types import RowSet
from dlm.rows.walk import walk_sources
from dlm.tokenize.plain import PlainRowEncoder


def cached(cache_dir: Path, **kw) -> CachedRowEncoder:
    kw.setdefault("clock", settled_clock)
    return CachedRowEncoder(cache_dir, FakeTokenizer(), FAKE_SHA, max_bytes=1 << 30, run_id="r", **kw)


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
    plain = PlainRowEncoder(FakeTokenizer(), FAKE_SHA).tokenize(rows)
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


def test_a_same_second_rewrite_with_its_mtime_put_back_is_not_trusted(tree: Path, cache_dir: Path):
    """Fake clock: the file is read half a second after its ctime, on a file system
    with 1-second stamps (the rows keep the stat such a file system would show after a
    same-size rewrite whose mtime `touch -r` put back). The mtime is old, the ctime is
    not: the next run must read the file again."""
    rows = RowSet([], file_rows(tree))
    victim = tree / "pkg0" / "mod_0000.py"
    ctime = victim.stat().st_ctime_ns
    cached(cache_dir, clock=lambda: ctime + 500_000_000).tokenize(rows)
    data = bytearray(victim.read_bytes())
    data[0:6] = b"# FILE"
    victim.write_bytes(bytes(data))
    got = cached(cache_dir, clock=lambda: ctime + 900_000_000).tokenize(rows)
    assert all_ids(got) == all_ids(PlainRowEncoder(FakeTokenizer(), FAKE_SHA).tokenize(rows))


@pytest.fixture
def coarse_fs(tmp_path: Path):
    """A loop-mounted ext4 made with 128-byte inodes: whole-second mtime and ctime."""
    if os.geteuid() != 0 or not shutil.which("mkfs.ext4") or not shutil.which("mount"):
        pytest.skip("needs root, mkfs.ext4 and mount to loop-mount an ext4 with 1-second stamps")
    image, mnt = tmp_path / "ext4.img", tmp_path / "mnt"
    with open(image, "wb") as fh:
        fh.truncate(8 << 20)
    mnt.mkdir()
    made = subprocess.run(["mkfs.ext4", "-q", "-F", "-I", "128", str(image)], capture_output=True)
    mounted = (
        made.returncode == 0
        and subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], capture_output=True, timeout=30).returncode
        == 0
    )
    if not mounted:
        pytest.skip("cannot loop-mount an ext4 image here (no loop device or no mount permission)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True, timeout=30)


def test_racy_rewrite_on_a_one_second_file_system(coarse_fs: Path, cache_dir: Path):
    """The real case: write, cache, rewrite the same size and put the mtime back, all
    within one second of an ext4 with 128-byte inodes, so the stat is unchanged."""
    root = coarse_fs / "src"
    root.mkdir()
    victim = root / "a.py"
    d = SimpleNamespace(path=str(root), include=["**/*"], exclude=[], max_bytes_per_file=1 << 20, max_files=None)
    for _ in range(5):  # retried when the steps straddle a second
        while time.time() % 1 > 0.3:
            time.sleep(0.05)
        second = int(time.time())
        victim.write_text("print('old')\n")
        os.utime(victim, ns=(OLD_NS, OLD_NS))
        before = walk_sources([d], coarse_fs).files
        cached(cache_dir, clock=time.time_ns).tokenize(RowSet([], before))
        victim.write_text("print('new')\n")
        os.utime(victim, ns=(OLD_NS, OLD_NS))
        after = walk_sources([d], coarse_fs).files
        if int(time.time()) == second:
            break
    else:
        pytest.skip("could not keep the steps within one second")
    assert [tuple(f) for f in after] == [tuple(f) for f in before]  # the stat cannot tell
    got = cached(cache_dir, clock=time.time_ns).tokenize(RowSet([], after))
    assert all_ids(got) == all_ids(PlainRowEncoder(FakeTokenizer(), FAKE_SHA).tokenize(RowSet([], after)))


def coarse_rows(root: Path) -> list:
    """FileRows as a file system with 1-second stamps shows them (times floored)."""
    return [
        f._replace(mtime_ns=f.mtime_ns // 10**9 * 10**9, ctime_ns=f.ctime_ns // 10**9 * 10**9) for f in file_rows(root)
    ]


@pytest.mark.slow
def test_stale_ids_fuzz_on_one_second_stamps(tmp_path: Path, cache_dir: Path):
    """Random same-size rewrites with the mtime put back, appends and touches, between
    runs at random moments, seen with 1-second stamps: every run gives the ids the
    uncached path gives."""
    import random

    rng = random.Random(7)
    root = tmp_path / "src"
    for i in range(2):
        (root / f"f{i}.py").parent.mkdir(parents=True, exist_ok=True)
        (root / f"f{i}.py").write_text(f"v0 {i}\n")
        os.utime(root / f"f{i}.py", ns=(OLD_NS, OLD_NS))
    for step in range(60):
        victim = root / f"f{rng.randrange(2)}.py"
        op = rng.choice(["rewrite", "rewrite", "rewrite", "append", "touch", "none"])
        if op == "rewrite":
            text = victim.read_text()
            victim.write_text(f"v{step % 10}" + text[2:])
            os.utime(victim, ns=(OLD_NS, OLD_NS))
        elif op == "append":
            victim.write_text(victim.read_text() + "x\n")
        elif op == "touch":
            os.utime(victim, ns=(OLD_NS + step * 10**9, OLD_NS + step * 10**9))
        rows = RowSet([], coarse_rows(root))
        got = cached(cache_dir, clock=time.time_ns).tokenize(rows)
        assert all_ids(got) == all_ids(PlainRowEncoder(FakeTokenizer(), FAKE_SHA).tokenize(rows)), step
        time.sleep(rng.choice([0.0, 0.0, 0.0, 0.3, 1.1, 2.5]))
