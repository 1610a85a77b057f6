"""The index is built by named migrations; totals are kept by triggers, never re-summed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dlm.cache.index import lookup_keys, totals
from dlm.cache.schema import MIGRATIONS, connect, write_tx

KEY = "xxh3_128:" + "ab" * 16


def names(conn: sqlite3.Connection) -> list[str]:
    return [n for (n,) in conn.execute("SELECT name FROM migrations ORDER BY name")]


def test_blank_index_gets_every_migration(cache_dir: Path):
    conn = connect(cache_dir)
    assert names(conn) == [n for n, _ in MIGRATIONS]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert totals(conn) == (0, 0)


def test_old_index_upgrades_in_place_and_keeps_data(cache_dir: Path):
    old = connect(cache_dir, MIGRATIONS[:1])
    assert names(old) == [MIGRATIONS[0][0]]
    with write_tx(old):
        old.execute("INSERT INTO segments(name, created_ns) VALUES ('s', 0)")
        old.execute("INSERT INTO entries VALUES (?, 1, 1, 0, 10, 5, 0, 2, 0, 0, 0)", (KEY,))
    old.close()
    conn = connect(cache_dir)
    assert names(conn) == [n for n, _ in MIGRATIONS]
    assert totals(conn) == (10, 1)
    assert conn.execute("SELECT key FROM entries").fetchone()[0] == bytes.fromhex("ab" * 16)
    assert KEY in lookup_keys(conn, [KEY])
    assert conn.execute("SELECT COUNT(*) FROM stat_snapshots").fetchone()[0] == 0
    with write_tx(conn):  # the triggers still keep segment live bytes after the rebuild
        conn.execute("INSERT INTO entries VALUES ('k2', 1, 1, 10, 5, 5, 0, 2, 0, 0, 0)")
    assert conn.execute("SELECT live_bytes FROM segments WHERE name = 's'").fetchone()[0] == 15


def test_segment_ids_are_never_reused(cache_dir: Path):
    conn = connect(cache_dir)
    with write_tx(conn):
        conn.execute("INSERT INTO segments(name, created_ns) VALUES ('a', 0), ('b', 0)")
        conn.execute("DELETE FROM segments WHERE name = 'b'")
        conn.execute("INSERT INTO segments(name, created_ns) VALUES ('c', 0)")
    assert conn.execute("SELECT id FROM segments WHERE name = 'c'").fetchone()[0] == 3


def test_triggers_keep_totals_and_segment_live_bytes(cache_dir: Path):
    conn = connect(cache_dir)
    with write_tx(conn):
        conn.execute("INSERT INTO segments(name, created_ns) VALUES ('a', 0), ('b', 0)")
        conn.executemany(
            "INSERT INTO entries VALUES (?, 1, ?, 0, ?, 5, 0, 2, 0, 0, 0)",
            [("k1", 1, 100), ("k2", 1, 50), ("k3", 2, 7)],
        )
    assert totals(conn) == (157, 3)
    with write_tx(conn):
        conn.execute("UPDATE entries SET segment = 2, nbytes = 60 WHERE key = 'k2'")
        conn.execute("DELETE FROM entries WHERE key = 'k1'")
    assert totals(conn) == (67, 2)
    live = dict(conn.execute("SELECT name, live_bytes FROM segments"))
    assert live == {"a": 0, "b": 67}


def test_concurrent_openers_apply_migrations_once(cache_dir: Path):
    first, second = connect(cache_dir), connect(cache_dir)
    assert names(first) == names(second) == [n for n, _ in MIGRATIONS]
