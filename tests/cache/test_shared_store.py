"""One store shared by documents: sharing, global cap, protection, per-document
clear/prune, and migration of per-document caches from the committed schema versions."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest
import zstandard
from cachehelp import FAKE_SHA, FakeTokenizer, make_tree, row_set, same_rows, settled_clock

from dlm.cache import CachedRowEncoder, check_cache
from dlm.cache.index import lookup_keys, meta_check, totals
from dlm.cache.schema import MIGRATIONS, connect, connect_state, key_blob, write_tx
from dlm.cache.segments import pack_ids, segment_path
from dlm.cache.shared import clear_document, live_leases, migrate_legacy
from dlm.tokenize.plain import PlainRowEncoder


def run(
    state: Path,
    store: Path,
    rows,
    doc: str,
    max_bytes: int = 1 << 30,
    run_id: str = "r",
    siblings: tuple[Path, ...] = (),
):
    tok = CachedRowEncoder(
        state,
        FakeTokenizer(),
        FAKE_SHA,
        max_bytes=max_bytes,
        run_id=run_id,
        store_dir=store,
        doc_id=doc,
        sibling_dirs=siblings,
        clock=settled_clock,
    )
    return tok.tokenize(rows), tok.last_report


def plain(rows):
    return PlainRowEncoder(FakeTokenizer(), FAKE_SHA).tokenize(rows)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "shared"


def test_two_documents_over_one_tree_share_every_entry(tree: Path, store: Path, tmp_path: Path):
    rows = row_set(tree)
    got_a, rep_a = run(tmp_path / "a", store, rows, "A")
    entries = totals(connect(store))[1]
    got_b, rep_b = run(tmp_path / "b", store, rows, "B")
    assert same_rows(got_b, plain(rows))
    assert rep_b.admitted == 0 and got_b.stats.cache_misses == 0
    assert totals(connect(store))[1] == entries
    (tree / "pkg0" / "mod_0000.py").write_text("edited\n")
    _, rep_c = run(tmp_path / "b", store, row_set(tree), "B")
    assert rep_c.admitted == 1
    assert check_cache(store).ok


def test_per_document_clear_keeps_shared_entries(tree: Path, store: Path, tmp_path: Path):
    rows = row_set(tree)
    run(tmp_path / "a", store, rows, "A")
    extra = tmp_path / "extra"
    make_tree(extra, 5, seed=9)
    rows_b = row_set(tree)
    rows_b.file_rows.extend(row_set(extra, texts=0).file_rows)
    run(tmp_path / "b", store, rows_b, "B")
    before = totals(connect(store))[1]
    done = clear_document(store, tmp_path / "b", "B")
    assert done.removed_entries == 5 and totals(connect(store))[1] == before - 5
    again, rep = run(tmp_path / "a", store, rows, "A")
    assert again.stats.cache_misses == 0 and rep.admitted == 0
    assert connect_state(tmp_path / "b").execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
    assert check_cache(store).ok


def test_running_documents_entries_are_protected_from_the_global_cap(store: Path, tmp_path: Path):
    a, b = tmp_path / "ta", tmp_path / "tb"
    make_tree(a, 30, seed=1)
    make_tree(b, 30, seed=2)
    rows_a, rows_b = row_set(a, texts=0), row_set(b, texts=0)
    held, _ = run(tmp_path / "a", store, rows_a, "A", run_id="ra")  # A is still "training"
    db = sqlite3.connect(store / "index.sqlite")
    db.execute("UPDATE entries SET last_access = 1000")
    db.commit()
    size_a = totals(connect(store))[0]
    assert live_leases(store).docs == {"A"}
    _, rep = run(tmp_path / "b", store, rows_b, "B", max_bytes=int(size_a * 1.5), run_id="rb")
    assert rep.evicted_entries == 0 and rep.not_admitted > 0
    assert len(lookup_keys(connect(store), held.keys)) == len(set(held.keys)) == 31
    del held, _  # A (and B) finished: their leases are gone, A's entries fair game
    import gc

    gc.collect()
    assert live_leases(store).docs == set()
    _, rep = run(tmp_path / "b", store, rows_b, "B", max_bytes=int(size_a * 1.5), run_id="rb2")
    assert rep.evicted_entries > 0


def test_dlm_cache_dir_lets_two_homes_share_one_store(tree: Path, tmp_path: Path, monkeypatch):
    from dlm.paths import cache_store_dir

    monkeypatch.setenv("DLM_CACHE_DIR", str(tmp_path / "one-store"))
    for home in ("h1", "h2"):
        monkeypatch.setenv("DLM_HOME", str(tmp_path / home))
        assert cache_store_dir() == tmp_path / "one-store"


# --- migration ---------------------------------------------------------------------


def _legacy_cache(folder: Path, upto: int) -> tuple[str, np.ndarray]:
    """A per-document cache as the committed schema `MIGRATIONS[:upto]` wrote it: one
    real segment file and one entry of known ids."""
    conn = connect(folder, MIGRATIONS[:upto])
    ids = np.arange(2, 50, dtype=np.uint16)
    payload = pack_ids(ids, zstandard.ZstdCompressor(level=3))
    path = segment_path(folder, "legacy-seg")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload)
    from dlm.cache.segments import checksum

    cols = np.array([[1, 0, len(payload), len(ids), 0, 2, checksum(payload), 0, int(time.time())]], dtype=np.int64)
    cols[0, 7] = meta_check(cols)[0]
    key = "xxh3_128:" + "cd" * 16
    stored = key if upto < 6 else key_blob(key)
    with write_tx(conn):
        conn.execute("INSERT INTO tokenizers(sha) VALUES (?)", (FAKE_SHA,))
        conn.execute("INSERT INTO segments(name, created_ns) VALUES ('legacy-seg', 0)")
        conn.execute("INSERT INTO entries VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)", (stored, *cols[0].tolist()))
        if upto >= 3:
            conn.execute("INSERT INTO runs VALUES ('old-run', 1, 10, 9, 1, 0.5, 1)")
    conn.close()
    return key, ids


@pytest.mark.parametrize("upto", range(1, len(MIGRATIONS)))
def test_per_document_cache_migrates_into_the_store(store: Path, tmp_path: Path, upto: int):
    legacy = tmp_path / "doc" / "tokenized-cache"
    key, ids = _legacy_cache(legacy, upto)
    assert migrate_legacy(legacy, store) == 1
    assert not (legacy / "index.sqlite").exists() and not (legacy / "segments").exists()
    conn = connect(store)
    assert key in lookup_keys(conn, [key])
    assert check_cache(store).ok
    from dlm.cache.reader import CachedRows  # noqa: F401  (read back through a real run below)
    from dlm.cache.segments import SegmentReader

    e = lookup_keys(conn, [key])[key]
    reader = SegmentReader(store)
    name = conn.execute("SELECT name FROM segments WHERE id = ?", (e[0],)).fetchone()[0]
    assert reader.open(e[0], name)
    assert reader.read(e[0], e[1], e[2], e[3], e[5], e[6]).tolist() == ids.tolist()
    if upto >= 3:
        runs = connect_state(legacy).execute("SELECT run_id FROM runs").fetchall()
        assert runs == [("old-run",)]
    assert migrate_legacy(legacy, store) == 0


def test_a_real_cache_migrates_on_first_open_and_stays_warm(tree: Path, store: Path, tmp_path: Path):
    legacy = tmp_path / "doc" / "tokenized-cache"
    rows = row_set(tree)
    CachedRowEncoder(legacy, FakeTokenizer(), FAKE_SHA, run_id="old").tokenize(rows)
    (legacy / "state.sqlite").unlink()  # older versions kept no separate state
    for suffix in ("-wal", "-shm"):
        (legacy / f"state.sqlite{suffix}").unlink(missing_ok=True)
    got, rep = run(legacy, store, rows, "DOC")
    assert same_rows(got, plain(rows)) and rep.admitted == 0 and got.stats.cache_misses == 0
    assert not os.path.exists(legacy / "index.sqlite")


def _count_reads(monkeypatch) -> list[str]:
    import dlm.cache.admit as cache_run

    seen: list[str] = []
    real = cache_run.read_file_row

    def counting(row):
        seen.append(row.relpath)
        return real(row)

    monkeypatch.setattr(cache_run, "read_file_row", counting)
    return seen


def test_a_second_document_starts_from_a_siblings_stat_snapshot(tree: Path, store: Path, tmp_path: Path, monkeypatch):
    rows = row_set(tree)
    run(tmp_path / "a", store, rows, "A")
    (tree / "pkg0" / "mod_0000.py").write_text("edited after A's snapshot\n")
    os.utime(tree / "pkg0" / "mod_0000.py", ns=(time.time_ns() - 10**10, time.time_ns() - 10**10))
    reads = _count_reads(monkeypatch)
    rows = row_set(tree)
    got, rep = run(tmp_path / "b", store, rows, "B", siblings=(tmp_path / "a",))
    assert same_rows(got, plain(rows))  # the edited file's new ids, the others' from A's keys
    # read again: the edited file, and the binary file A skipped (skip records are not
    # taken from a sibling: another document's cap may take what A's skipped)
    assert sorted(reads) == ["image.bin", "pkg0/mod_0000.py"] and rep.admitted == 1
    reads.clear()
    got, _ = run(tmp_path / "b", store, rows, "B", siblings=(tmp_path / "a",))
    assert reads == [] and same_rows(got, plain(rows))  # B wrote a snapshot of its own


def test_a_siblings_snapshot_is_not_taken_from_another_store_or_tokenizer(
    tree: Path, store: Path, tmp_path: Path, monkeypatch
):
    rows = row_set(tree)
    run(tmp_path / "a", tmp_path / "other-store", rows, "A")
    reads = _count_reads(monkeypatch)
    got, _ = run(tmp_path / "b", store, rows, "B", siblings=(tmp_path / "a", tmp_path / "missing"))
    assert len(reads) == len(rows.file_rows) and same_rows(got, plain(rows))
