"""SQLite plumbing shared by every database `dlm` keeps (the metrics database and the
section cache's index): explicit write transactions and named migrations applied on open.

Migrations: a database records the names of the migrations it has run in a table of
its own (`name TEXT PRIMARY KEY`, then when it ran). A schema change is one new named
step appended to the owner's list; existing steps never change, so any older database
upgrades by running the ones it lacks, and a blank one is built by running them all.
A step is an SQL script (split into statements, trigger bodies kept whole) or a
function of the connection.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

Migration = tuple[str, "str | Callable[[sqlite3.Connection], None]"]


@contextmanager
def write_tx(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """`BEGIN IMMEDIATE` ... `COMMIT` (rolled back on any exception).

    IMMEDIATE takes the write lock up front, so two writers never both read and then
    fail to upgrade; the connection's busy timeout decides how long one waits.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def apply_migrations(conn: sqlite3.Connection, migrations: Sequence[Migration], *, table: str) -> list[str]:
    """Apply, in order, every migration whose name `table` does not record yet.

    Each runs in its own write transaction with its record, so a crash leaves the
    database at the previous step. A migration another process applied while this
    one waited for the lock is skipped.

    Args:
        conn: an open connection with no transaction in progress.
        migrations: (name, SQL script or function) in order.
        table: where the names are recorded (created when missing).

    Returns:
        The names applied by this call.

    Raises:
        sqlite3.DatabaseError: a step failed (its transaction is rolled back).
    """
    conn.execute(f"CREATE TABLE IF NOT EXISTS {table}(name TEXT PRIMARY KEY, applied)")
    done = {r[0] for r in conn.execute(f"SELECT name FROM {table}")}
    applied = []
    for name, step in migrations:
        if name in done:
            continue
        with write_tx(conn):
            if conn.execute(f"SELECT 1 FROM {table} WHERE name = ?", (name,)).fetchone():
                continue
            if callable(step):
                step(conn)
            else:
                for stmt in split_sql(step):
                    conn.execute(stmt)
            conn.execute(f"INSERT INTO {table} VALUES (?, ?)", (name, time.time_ns()))
        applied.append(name)
    return applied


def split_sql(script: str) -> list[str]:
    """Split a migration script into statements (trigger bodies kept whole)."""
    out, buf = [], ""
    for line in script.strip().splitlines():
        buf += line + "\n"
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out
