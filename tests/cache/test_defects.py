"""Defects found by an adversarial review of the cache, each with the test that
failed before its fix (checked by reverting the fix, then restoring it)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest
from cachehelp import FAKE_SHA, FakeTokenizer, all_ids, file_rows, make_tree, row_set, same_rows, settled_clock

from dlm.cache import CachedRowEncoder, check_cache, clear_cache, export_cache, parse_age, prune_cache
from dlm.cache.schema import INDEX_NAME, connect_state
from dlm.cache.segments import segment_dir
from dlm.errors import CacheError, SourceError, UsageError
from dlm.rows.types import FileRow, RowSet
from dlm.rows.walk import walk_sources
from dlm.tokenize.plain import PlainRowEncoder


def cached(cache_dir: Path, **kw) -> CachedRowEncoder:
    kw.setdefault("clock", settled_clock)
    return CachedRowEncoder(cache_dir, FakeTokenizer(), FAKE_SHA, max_bytes=1 << 30, run_id="r", **kw)


def plain(rows):
    return PlainRowEncoder(FakeTokenizer(), FAKE_SHA).tokenize(rows)


def directive(path, include=("**/*",), exclude=(), max_bytes=1_000_000):
    return SimpleNamespace(
        path=str(path), include=list(include), exclude=list(exclude), max_bytes_per_file=max_bytes, max_files=None
    )


def walked_rows(root: Path, **kw) -> RowSet:
    return RowSet([], walk_sources([directive(root, **kw)], root.parent).files)


# --- wrong ids ---------------------------------------------------------------------


def test_split_special_tokens_changes_the_fingerprint(smollm2_ref, smollm2_tokenizer):
    """`split_special_tokens: true` (tokenizer_config.json, or the same keyword at load)
    changes ids through backend state that `to_str()` does not serialize."""
    from transformers import AutoTokenizer

    from dlm.tokenize.fingerprint import tokenizer_sha256

    split = AutoTokenizer.from_pretrained(smollm2_ref.path, split_special_tokens=True)
    text = "a<|im_end|>b"
    assert smollm2_tokenizer.backend_tokenizer.encode(text).ids != split.backend_tokenizer.encode(text).ids
    assert smollm2_tokenizer.backend_tokenizer.to_str() == split.backend_tokenizer.to_str()
    assert tokenizer_sha256(smollm2_tokenizer) != tokenizer_sha256(split)


def test_tokenizers_version_is_in_the_fingerprint(smollm2_tokenizer, monkeypatch: pytest.MonkeyPatch):
    from dlm.tokenize import fingerprint

    before = fingerprint.tokenizer_sha256(smollm2_tokenizer)
    monkeypatch.setattr(fingerprint, "_tokenizers_version", lambda: "0.0.1")
    assert fingerprint.tokenizer_sha256(smollm2_tokenizer) != before


def test_trust_stat_false_sees_an_edit_that_keeps_the_stat(tree: Path, cache_dir: Path):
    """A write through a shared mmap can keep size, times and inode: stat-based
    detection trusts the old entry (the documented limit); `trust_stat=False` does not."""
    old_rows = file_rows(tree)
    cached(cache_dir).tokenize(RowSet([], old_rows))
    victim = tree / "pkg0" / "mod_0000.py"
    data = bytearray(victim.read_bytes())
    data[0:6] = b"# FILE"  # same size
    victim.write_bytes(bytes(data))
    same_stat = RowSet([], old_rows)  # the stat the walk would see if nothing moved
    fresh = plain(RowSet([], file_rows(tree)))
    trusting = cached(cache_dir).tokenize(same_stat)
    assert all_ids(trusting) != all_ids(fresh)
    rehashed = cached(cache_dir, trust_stat=False).tokenize(same_stat)
    assert all_ids(rehashed) == all_ids(fresh)


# --- crashes that were "unexpected errors" -----------------------------------------


def test_mtime_before_1970(tree: Path, cache_dir: Path):
    for p in list(tree.rglob("*.py"))[:3]:
        os.utime(p, ns=(-86_400 * 10**9 * 400, -86_400 * 10**9 * 400))
    rows = walked_rows(tree)
    assert same_rows(cached(cache_dir).tokenize(rows), plain(rows))
    warm = cached(cache_dir).tokenize(walked_rows(tree))
    assert warm.stats.cache_misses == 0


def test_root_path_not_utf8(tmp_path: Path, cache_dir: Path):
    root = Path(os.fsdecode(os.fsencode(str(tmp_path)) + b"/r\xff\xfe"))
    make_tree(root, 5)
    rows = walked_rows(root)
    assert same_rows(cached(cache_dir).tokenize(rows), plain(rows))
    assert cached(cache_dir).tokenize(walked_rows(root)).stats.cache_misses == 0


def test_file_name_not_utf8(tmp_path: Path, cache_dir: Path):
    root = tmp_path / "src"
    root.mkdir()
    (root / os.fsdecode(b"caf\xe9.py")).write_text("x = 1\n")
    rows = walked_rows(root)
    want = plain(rows)
    assert want.lossy_files == 1 and "caf\ufffd.py" in bytes(int(x) - 2 for x in want.read(0)[1:]).decode("utf-8")
    got = cached(cache_dir).tokenize(rows)
    assert same_rows(got, want) and got.lossy_files == 1


def test_deep_tree_walks_without_recursion_error(tmp_path: Path):
    root = tmp_path / "deep"
    folder = root
    for _ in range(600):
        folder = folder / "d"
    folder.mkdir(parents=True)
    (folder / "leaf.py").write_text("x\n")
    files = walk_sources([directive(root)], tmp_path).files
    assert [f.relpath for f in files] == ["d/" * 600 + "leaf.py"]


@pytest.mark.parametrize("pattern", ["[z-a]", "!", "\\"])
@pytest.mark.parametrize("field", ["include", "exclude"])
def test_invalid_pattern_names_the_directive(tree: Path, pattern: str, field: str):
    kw = {field: ["*.py", pattern]}
    with pytest.raises(SourceError, match=rf"training.sources\[0\].{field}\[1\]: pattern .* is not a valid"):
        walk_sources([directive(tree, **kw)], tree.parent)


def test_cache_folder_that_cannot_be_created(tree: Path, tmp_path: Path):
    home = tmp_path / "home"
    home.write_text("a file where DLM_HOME's folder should be")
    with pytest.raises(CacheError, match="cannot create the cache folder"):
        cached(home / "store" / "tokenized-cache").tokenize(row_set(tree))


def test_huge_older_than(tree: Path, cache_dir: Path):
    with pytest.raises(UsageError, match="more than 1000 years"):
        parse_age("99999999999999999999d")
    cached(cache_dir).tokenize(row_set(tree))
    assert prune_cache(cache_dir, 1e300).removed_entries == 0


def test_export_to_an_unwritable_place_and_export_mode(tree: Path, cache_dir: Path, tmp_path: Path):
    cached(cache_dir).tokenize(row_set(tree))
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    with pytest.raises(CacheError, match="cannot write the export"):
        export_cache(cache_dir, blocker / "sub" / "cache.tar")
    old = os.umask(0o022)
    try:
        done = export_cache(cache_dir, tmp_path / "cache.tar")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(done.path).st_mode) == 0o644


# --- disk that grew without bound ---------------------------------------------------


def test_segment_deleted_by_hand_is_healed(tree: Path, cache_dir: Path):
    rows = row_set(tree)
    cached(cache_dir).tokenize(rows)
    for seg in segment_dir(cache_dir).iterdir():
        seg.unlink()
    again = cached(cache_dir)
    assert same_rows(again.tokenize(rows), plain(rows))
    assert any("segment file is missing" in w for w in again.last_report.warnings)
    third = cached(cache_dir).tokenize(rows)
    assert third.stats.cache_misses == 0
    assert check_cache(cache_dir).ok


def test_stat_snapshots_of_old_roots_are_pruned(tree: Path, cache_dir: Path, tmp_path: Path):
    for i in range(3):  # a CI job checking out into a new folder each run
        checkout = tmp_path / f"checkout-{i}"
        shutil.copytree(tree, checkout)
        cached(cache_dir).tokenize(walked_rows(checkout))
    conn = connect_state(cache_dir)
    assert conn.execute("SELECT COUNT(*) FROM stat_snapshots").fetchone()[0] == 1
    assert conn.execute("SELECT COUNT(*) FROM roots").fetchone()[0] == 1


# --- wrong refusals and messages ----------------------------------------------------


def test_strict_ignores_an_excluded_symlink(tmp_path: Path):
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("a\n")
    (tmp_path / "x").mkdir()
    (root / "node_modules").symlink_to("../x")
    result = walk_sources([directive(root, exclude=["**/node_modules/**"])], tmp_path, strict=True)
    assert [f.relpath for f in result.files] == ["src/a.py"] and not result.skipped


def test_clear_keeps_a_cache_it_cannot_open(tree: Path, cache_dir: Path):
    """Not corrupt, just not openable (a read-only home): nothing is removed or claimed."""
    cached(cache_dir).tokenize(row_set(tree))
    conn = sqlite3.connect(cache_dir / INDEX_NAME)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    (cache_dir / f"{INDEX_NAME}-wal").unlink(missing_ok=True)
    (cache_dir / f"{INDEX_NAME}-wal").mkdir()  # sqlite cannot open its WAL
    with pytest.raises(CacheError):
        clear_cache(cache_dir)
    assert (cache_dir / INDEX_NAME).is_file() and any(segment_dir(cache_dir).iterdir())


def test_max_bytes_per_file_is_checked_when_read(tree: Path, cache_dir: Path):
    small = tree / "pkg1" / "mod_0001.py"
    walked = walk_sources([directive(tree, max_bytes=2000)], tree.parent).files
    small.write_text("y" * 5000)  # grew after the walk
    assert any(f.relpath == "pkg1/mod_0001.py" for f in walked)
    rows = RowSet([], [FileRow(*f[:7], f.max_bytes) for f in walked])
    assert plain(rows).files_skipped["too-large"] == 1
    assert cached(cache_dir).tokenize(rows).files_skipped["too-large"] == 1


def test_cache_build_reports_walk_skips(tmp_path: Path, smollm2_ref):
    from typer.testing import CliRunner

    from dlm.cli.cache_cmd import cache_app

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text("a = 1\n")
    (src / "big.py").write_text("b" * 5000)
    doc = tmp_path / "doc.dlm"
    doc.write_text(
        "---\ndlm_id: 01JDCACHE00000000000000001\nbase_model: smollm2-135m\ntraining:\n"
        f"  sources:\n    - path: {src}\n      max_bytes_per_file: 1000\n---\n\nProse.\n"
    )
    got = CliRunner().invoke(cache_app, ["build", str(doc)])
    assert got.exit_code == 0, got.output
    assert "1 too-large" in got.stdout


def test_train_lock_in_a_home_that_cannot_be_written(tmp_path: Path):
    from dlm.errors import StoreError
    from dlm.store.store import Store

    blocker = tmp_path / "home"
    blocker.write_text("a file where the store folder should be")
    with pytest.raises(StoreError, match="cannot write the document's store"):
        with Store("01JD", blocker / "store" / "01JD").train_lock():
            pass


class _PrunedAtCommit:
    """A connection to a document's state after each of whose commits another process
    prunes the roots no stat snapshot names (`keep_only` in its own write transaction),
    as a second `dlm train` of the same document does when its run ends."""

    def __init__(self, conn: sqlite3.Connection, other: sqlite3.Connection) -> None:
        self.conn, self.other = conn, other

    def execute(self, sql: str, *args):
        out = self.conn.execute(sql, *args)
        if sql == "COMMIT":
            from dlm.cache.schema import tokenizer_id
            from dlm.cache.statindex import keep_only
            from dlm.sqlitedb import write_tx

            tok = tokenizer_id(self.other, FAKE_SHA)
            with write_tx(self.other):
                keep_only(self.other, tok, [])
        return out


def test_a_new_root_is_read_back_before_another_process_can_prune_it(tmp_path: Path):
    # two processes on one document's state: one inserts a root, the other prunes roots
    # without a snapshot in between; the id was read after the insert's commit and was gone
    from dlm.cache.schema import root_id

    conn, other = connect_state(tmp_path), connect_state(tmp_path)
    rid = root_id(_PrunedAtCommit(conn, other), "/src/a")  # type: ignore[arg-type]
    assert isinstance(rid, int)  # was: TypeError, the row read back gone
