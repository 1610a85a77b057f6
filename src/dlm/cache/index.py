"""Queries on the cache index (`dlm.cache.schema` has the tables).

An entry's location travels as one int64 row `E`:

    E = (segment, offset, nbytes, ntokens, n_prompt, dtype, checksum, meta, last_access)

`meta` is a check over the first seven columns: sum(col_i * C_i) mod 2**64 with odd
constants C_i, computed vectorized with NumPy. A single flipped bit in any column
changes the sum by 2**k * C_i, never 0 mod 2**64, so a corrupted index row is caught
when it is looked up (before its length is handed out) and treated as a miss.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from functools import cache
from typing import TYPE_CHECKING

from dlm.cache.schema import key_blob, key_text

if TYPE_CHECKING:  # numpy loads on first use: `dlm show` and `dlm cache show` need none of it
    import numpy as np

ENTRY_COLS = "segment, offset, nbytes, ntokens, n_prompt, dtype, checksum, meta, last_access"
SEG, OFF, NBYTES, NTOK, NPROMPT, DTYPE, CKSUM, META, ACCESS = range(9)
_MIX_WORDS = (
    0x9E3779B97F4A7C15,
    0xC2B2AE3D27D4EB4F,
    0x165667B19E3779F9,
    0xD6E8FEB86659FD93,
    0xFF51AFD7ED558CCD,
    0xC4CEB9FE1A85EC53,
    0x94D049BB133111EB,
)
SQL_IN_CHUNK = 500


@cache
def _mix() -> np.ndarray:
    import numpy as np

    return np.array(_MIX_WORDS, dtype=np.uint64)


def meta_check(cols: np.ndarray) -> np.ndarray:
    """`meta` of each row of int64 [n, >=7] (see module docstring); int64 [n].

    The uint64 products wrap mod 2**64 on purpose: that is the checksum's arithmetic.
    """
    import numpy as np

    with np.errstate(over="ignore"):
        mixed = cols[:, :7].astype(np.int64).view(np.uint64) * _mix()
        return mixed.sum(axis=1, dtype=np.uint64).view(np.int64)


def valid_rows(entries: np.ndarray) -> np.ndarray:
    """bool [n]: rows of E whose `meta` matches their columns."""
    import numpy as np

    if entries.shape[0] == 0:
        return np.zeros(0, dtype=bool)
    return meta_check(entries) == entries[:, META]


def as_entries(rows: Sequence[Sequence[int]]) -> np.ndarray:
    """A list of E tuples as int64 [n, 9]."""
    import numpy as np

    if not rows:
        return np.zeros((0, 9), dtype=np.int64)
    return np.array(rows, dtype=np.int64).reshape(len(rows), 9)


def lookup_keys(conn: sqlite3.Connection, keys: Iterable[str]) -> dict[str, tuple[int, ...]]:
    """key -> E for the keys present in the index."""
    keys = list(dict.fromkeys(keys))
    found: dict[str, tuple[int, ...]] = {}
    for start in range(0, len(keys), SQL_IN_CHUNK):
        chunk = [key_blob(k) for k in keys[start : start + SQL_IN_CHUNK]]
        marks = ",".join("?" * len(chunk))
        for row in conn.execute(f"SELECT key, {ENTRY_COLS} FROM entries WHERE key IN ({marks})", chunk):
            found[key_text(row[0])] = row[1:]
    return found


def segment_names(conn: sqlite3.Connection) -> dict[int, str]:
    return dict(conn.execute("SELECT id, name FROM segments"))


def insert_entries(conn: sqlite3.Connection, rows: list[tuple]) -> None:
    """Insert (key, tok, *E) rows; a key already present keeps its first entry."""
    conn.executemany(
        f"INSERT OR IGNORE INTO entries(key, tok, {ENTRY_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        [(key_blob(r[0]), *r[1:]) for r in rows],
    )


def touch(conn: sqlite3.Connection, keys: Sequence[str], now_s: int) -> None:
    conn.executemany("UPDATE entries SET last_access = ? WHERE key = ?", [(now_s, key_blob(k)) for k in keys])


def delete_entry(conn: sqlite3.Connection, key: str, segment: int, offset: int) -> None:
    """Drop one entry, only if it still points where the caller saw it."""
    conn.execute(
        "DELETE FROM entries WHERE key = ? AND segment = ? AND offset = ?",
        (key_blob(key), segment, offset),
    )


def totals(conn: sqlite3.Connection) -> tuple[int, int]:
    """(live stored bytes, entry count), from the running total."""
    row = conn.execute("SELECT bytes, entries FROM totals WHERE id = 0").fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)
