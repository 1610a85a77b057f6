"""The cache indexes: SQLite databases in WAL mode.

`<store_dir>/index.sqlite`, the shared store's index (`MIGRATIONS`), and
`<state_dir>/state.sqlite`, one document's state (`STATE_MIGRATIONS`: tokenizers,
roots, stat_snapshots, runs and state_meta, as described below). The store keeps
the `roots`, `stat_snapshots` and `runs` tables its older versions had (a store
opened in one folder with its document's state) but no longer writes them.

Schema (applied by named migrations, in order, on every open; the applied names are
recorded in `migrations`, so an old index upgrades in place and a blank one is built):

    migrations(name TEXT PK, applied_ns)
    tokenizers(id INTEGER PK, sha TEXT UNIQUE)            -- tokenizer_sha256 values
    segments(id INTEGER PK AUTOINCREMENT, name UNIQUE,    -- segments/<name>; ids never reused
             live_bytes, live_entries, created_ns)        -- kept by triggers
    entries(key BLOB PK,                                  -- row_key "xxh3_128:<hex>" as 16 bytes
            tok -> tokenizers.id, segment -> segments.id,
            offset, nbytes,                               -- stored (compressed) bytes
            ntokens, n_prompt, dtype,                     -- dtype: 2 = uint16, 4 = uint32
            checksum,                                     -- xxh3_64 of stored bytes, signed
            meta,                                         -- check over the columns above
            last_access)                                  -- unix seconds, relatime-style
    totals(id = 0, bytes, entries)                        -- running sums kept by triggers
    roots(id INTEGER PK, path TEXT UNIQUE)                -- source roots (absolute)
    stat_snapshots(tok, root, written_ns, n, data)        -- PK (tok, root); the stat
                                                          -- index, see dlm.cache.statindex
    runs(run_id TEXT PK, finished_ns, total, hits, misses, seconds, tok)
    doc_refs(doc TEXT PK, keys BLOB, updated_ns,          -- 16-byte keys of each document's
             keys_xxh3)                                   -- latest run, sorted; xxh3_128 of
                                                          -- the run's key list, to skip an
                                                          -- unchanged rewrite
    store_meta(k TEXT PK, v)                              -- 'uuid': the store's identity
    remotes, remote_seen, remote_entries,                 -- the remote tier, dlm.cache.remote
    remote_rejected(remote, name, size)                   -- index objects that failed their
                                                          -- check, not fetched again at that size

Writes run in `BEGIN IMMEDIATE` transactions; `totals` and `segments.live_*` are
updated by triggers in the same transaction as the entry change, so the byte total is
never re-summed and never drifts.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import repeat
from pathlib import Path
from typing import Literal, overload

from dlm.errors import CacheError
from dlm.sqlitedb import apply_migrations, write_tx
from dlm.tokenize.keys import KEY_ALGO

KEY_PREFIX = f"{KEY_ALGO}:"

INDEX_NAME = "index.sqlite"
BUSY_TIMEOUT_MS = 60_000

TRIGGERS = """
        CREATE TRIGGER entries_ins AFTER INSERT ON entries BEGIN
            UPDATE totals SET bytes = bytes + NEW.nbytes, entries = entries + 1;
            UPDATE segments SET live_bytes = live_bytes + NEW.nbytes,
                live_entries = live_entries + 1 WHERE id = NEW.segment;
        END;
        CREATE TRIGGER entries_del AFTER DELETE ON entries BEGIN
            UPDATE totals SET bytes = bytes - OLD.nbytes, entries = entries - 1;
            UPDATE segments SET live_bytes = live_bytes - OLD.nbytes,
                live_entries = live_entries - 1 WHERE id = OLD.segment;
        END;
        CREATE TRIGGER entries_move AFTER UPDATE OF segment, nbytes ON entries BEGIN
            UPDATE totals SET bytes = bytes - OLD.nbytes + NEW.nbytes;
            UPDATE segments SET live_bytes = live_bytes - OLD.nbytes,
                live_entries = live_entries - 1 WHERE id = OLD.segment;
            UPDATE segments SET live_bytes = live_bytes + NEW.nbytes,
                live_entries = live_entries + 1 WHERE id = NEW.segment;
        END;
"""

MIGRATIONS: list[tuple[str, str]] = [
    (
        "001-entries-segments-totals",
        """
        CREATE TABLE tokenizers(id INTEGER PRIMARY KEY, sha TEXT NOT NULL UNIQUE);
        CREATE TABLE segments(
            id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
            live_bytes INTEGER NOT NULL DEFAULT 0, live_entries INTEGER NOT NULL DEFAULT 0,
            created_ns INTEGER NOT NULL);
        CREATE TABLE entries(
            key TEXT PRIMARY KEY, tok INTEGER NOT NULL, segment INTEGER NOT NULL,
            offset INTEGER NOT NULL, nbytes INTEGER NOT NULL, ntokens INTEGER NOT NULL,
            n_prompt INTEGER NOT NULL, dtype INTEGER NOT NULL, checksum INTEGER NOT NULL,
            meta INTEGER NOT NULL, last_access INTEGER NOT NULL) WITHOUT ROWID;
        CREATE INDEX entries_by_access ON entries(last_access);
        CREATE INDEX entries_by_segment ON entries(segment);
        CREATE TABLE totals(id INTEGER PRIMARY KEY CHECK (id = 0),
            bytes INTEGER NOT NULL, entries INTEGER NOT NULL);
        INSERT INTO totals VALUES (0, 0, 0);
        """
        + TRIGGERS,
    ),
    (
        "002-stat-index",
        """
        CREATE TABLE roots(id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE);
        CREATE TABLE stat(
            tok INTEGER NOT NULL, root INTEGER NOT NULL, relpath TEXT NOT NULL,
            size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL,
            ino INTEGER NOT NULL, recorded_ns INTEGER NOT NULL,
            key TEXT, reason TEXT, lossy INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (tok, root, relpath)) WITHOUT ROWID;
        """,
    ),
    (
        "003-runs",
        """
        CREATE TABLE runs(
            run_id TEXT PRIMARY KEY, finished_ns INTEGER NOT NULL, total INTEGER NOT NULL,
            hits INTEGER NOT NULL, misses INTEGER NOT NULL, seconds REAL NOT NULL,
            tok INTEGER NOT NULL);
        """,
    ),
    (
        # one row per file was too slow to load for large trees: one NumPy blob per root
        "004-stat-snapshots",
        """
        DROP TABLE stat;
        CREATE TABLE stat_snapshots(
            tok INTEGER NOT NULL, root INTEGER NOT NULL, written_ns INTEGER NOT NULL,
            n INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (tok, root));
        """,
    ),
    (
        # stat snapshots remember segment ids: an id must never name another file later
        "005-segment-ids-never-reused",
        """
        DROP TRIGGER entries_ins;
        DROP TRIGGER entries_del;
        DROP TRIGGER entries_move;
        CREATE TABLE segments_v2(
            id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE,
            live_bytes INTEGER NOT NULL DEFAULT 0, live_entries INTEGER NOT NULL DEFAULT 0,
            created_ns INTEGER NOT NULL);
        INSERT INTO segments_v2 SELECT id, name, live_bytes, live_entries, created_ns FROM segments;
        DROP TABLE segments;
        ALTER TABLE segments_v2 RENAME TO segments;
        """
        + TRIGGERS,
    ),
    (
        # keys as their 16 digest bytes: the key column and both indexes shrink by half
        "006-binary-keys",
        """
        DROP TRIGGER entries_ins;
        DROP TRIGGER entries_del;
        DROP TRIGGER entries_move;
        DROP INDEX entries_by_access;
        DROP INDEX entries_by_segment;
        CREATE TABLE entries_v2(
            key BLOB PRIMARY KEY, tok INTEGER NOT NULL, segment INTEGER NOT NULL,
            offset INTEGER NOT NULL, nbytes INTEGER NOT NULL, ntokens INTEGER NOT NULL,
            n_prompt INTEGER NOT NULL, dtype INTEGER NOT NULL, checksum INTEGER NOT NULL,
            meta INTEGER NOT NULL, last_access INTEGER NOT NULL) WITHOUT ROWID;
        INSERT INTO entries_v2 SELECT dlm_key_blob(key), tok, segment, offset, nbytes, ntokens,
            n_prompt, dtype, checksum, meta, last_access FROM entries;
        DROP TABLE entries;
        ALTER TABLE entries_v2 RENAME TO entries;
        CREATE INDEX entries_by_access ON entries(last_access);
        CREATE INDEX entries_by_segment ON entries(segment);
        """
        + TRIGGERS,
    ),
]


MIGRATIONS.append(
    (
        # one store shared by documents: which keys each document's latest run used
        # (per-document prune/clear, protection of running documents) and the store's
        # identity (a document's stat snapshots name locations in one store only)
        "007-shared-store",
        """
    CREATE TABLE doc_refs(doc TEXT PRIMARY KEY, keys BLOB NOT NULL, updated_ns INTEGER NOT NULL);
    CREATE TABLE store_meta(k TEXT PRIMARY KEY, v TEXT NOT NULL);
    INSERT INTO store_meta VALUES ('uuid', lower(hex(randomblob(16))));
    """,
    )
)

MIGRATIONS.append(
    (
        # what each remote tier holds (dlm.cache.remote): index objects read, their entries
        "008-remote-tier",
        """
    CREATE TABLE remotes(id INTEGER PRIMARY KEY, url TEXT NOT NULL UNIQUE);
    CREATE TABLE remote_seen(remote INTEGER NOT NULL, name TEXT NOT NULL, PRIMARY KEY (remote, name));
    CREATE TABLE remote_entries(
        remote INTEGER NOT NULL, key BLOB NOT NULL, tok INTEGER NOT NULL, idx TEXT NOT NULL,
        pack TEXT NOT NULL, offset INTEGER NOT NULL, nbytes INTEGER NOT NULL, ntokens INTEGER NOT NULL,
        n_prompt INTEGER NOT NULL, dtype INTEGER NOT NULL, checksum INTEGER NOT NULL,
        PRIMARY KEY (remote, key)) WITHOUT ROWID;
    CREATE INDEX remote_entries_by_pack ON remote_entries(remote, pack);
    """,
    )
)

MIGRATIONS.append(
    (
        # a warm run's keys are usually the run before's: their digest skips the rewrite
        "009-doc-refs-digest",
        "ALTER TABLE doc_refs ADD COLUMN keys_xxh3 BLOB;",
    )
)

MIGRATIONS.append(
    (
        # a damaged or foreign index object is fetched and reported once, not on every run
        "010-remote-rejected",
        "CREATE TABLE remote_rejected(remote INTEGER NOT NULL, name TEXT NOT NULL, size INTEGER NOT NULL,"
        " PRIMARY KEY (remote, name));",
    )
)

STATE_NAME = "state.sqlite"
STATE_MIGRATIONS: list[tuple[str, str]] = [
    (
        "001-document-state",
        """
        CREATE TABLE tokenizers(id INTEGER PRIMARY KEY, sha TEXT NOT NULL UNIQUE);
        CREATE TABLE roots(id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE);
        CREATE TABLE stat_snapshots(
            tok INTEGER NOT NULL, root INTEGER NOT NULL, written_ns INTEGER NOT NULL,
            n INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (tok, root));
        CREATE TABLE runs(
            run_id TEXT PRIMARY KEY, finished_ns INTEGER NOT NULL, total INTEGER NOT NULL,
            hits INTEGER NOT NULL, misses INTEGER NOT NULL, seconds REAL NOT NULL,
            tok INTEGER NOT NULL);
        CREATE TABLE state_meta(k TEXT PRIMARY KEY, v TEXT NOT NULL);
        """,
    ),
]


def connect_state(state_dir: Path) -> sqlite3.Connection:
    """Open (creating if needed) a document's cache state, `<state_dir>/state.sqlite`:
    its tokenizers, roots, stat snapshots and runs (never shared, never sent anywhere).

    Raises:
        CacheError: as `connect`.
    """
    return connect(state_dir, STATE_MIGRATIONS, STATE_NAME)


def store_uuid(conn: sqlite3.Connection) -> str:
    """The identity of a store (random, set when its index is created)."""
    return str(conn.execute("SELECT v FROM store_meta WHERE k = 'uuid'").fetchone()[0])


def key_blob(key: str) -> bytes:
    """The stored form of a row key: the 16 bytes of `xxh3_128:<32 hex>`."""
    if not key.startswith(KEY_PREFIX) or len(key) != len(KEY_PREFIX) + 32:
        raise ValueError(f"not a {KEY_ALGO} row key: {key!r}")
    return bytes.fromhex(key[len(KEY_PREFIX) :])


def key_blobs(keys: Sequence[str]) -> bytes:
    """`key_blob` of every key, concatenated in order, with one check and one hex decode
    for all of them (a warm run handles tens of thousands of keys at once).

    Raises:
        ValueError: a key that is not `xxh3_128:<32 hex>` (the first such key named).
    """
    shaped = set(map(len, keys)) <= {len(KEY_PREFIX) + 32} and all(map(str.startswith, keys, repeat(KEY_PREFIX)))
    try:
        raw = bytes.fromhex("".join(keys).replace(KEY_PREFIX, "")) if shaped else b""
    except ValueError:
        raw = b""
    if len(raw) != 16 * len(keys):  # a bad length or prefix, not hex, or a prefix inside a key
        for k in keys:
            key_blob(k)  # raises, naming the first bad key
    return raw


def key_text(blob: bytes) -> str:
    """The row key of a stored key."""
    return KEY_PREFIX + blob.hex()


def connect(
    store_dir: Path, migrations: list[tuple[str, str]] = MIGRATIONS, name: str = INDEX_NAME
) -> sqlite3.Connection:
    """Open (creating if needed) the index of `store_dir` and apply pending migrations.

    The connection is in autocommit mode; use `write_tx` / `read_tx` for transactions.

    Raises:
        CacheError: the file is not a SQLite database or cannot be opened.
    """
    path = store_dir / name
    try:
        store_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CacheError(
            f"{store_dir}: cannot create the cache folder ({exc.strerror or exc}); make DLM_HOME "
            "writable, point DLM_HOME or DLM_CACHE_DIR elsewhere, or set training.cache.enabled: false"
        ) from None
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.create_function("dlm_key_blob", 1, key_blob, deterministic=True)
        apply_migrations(conn, migrations, table="migrations")
    except sqlite3.DatabaseError as exc:
        if is_corruption(exc):
            raise CacheIndexCorrupt(
                f"{path}: cache index is unreadable ({exc}); run `dlm cache clear --force` to reset it"
            ) from None
        raise CacheError(
            f"{path}: cannot open the cache index ({exc}); free disk space, check permissions, "
            "or set training.cache.enabled: false"
        ) from None
    return conn


def connect_readonly(store_dir: Path, name: str = INDEX_NAME) -> sqlite3.Connection:
    """Open an existing index (or a document's state, `name=STATE_NAME`) to read only:
    nothing made, migrated or written, so a cache on a read-only mount is still read.
    A WAL database opens `mode=ro` only where its `-shm` file can be shared; where it
    cannot (read-only folder, no writer) it opens `immutable=1`: nobody is writing it.

    Raises CacheError: the file is missing, not a SQLite database, or cannot be read.
    """
    path = Path(store_dir) / name
    uri = path.absolute().as_uri()
    last: sqlite3.Error | None = None
    for mode in ("mode=ro", "immutable=1"):
        conn = None
        try:
            conn = sqlite3.connect(f"{uri}?{mode}", uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.Error as exc:
            last = exc
            if conn is not None:
                conn.close()
    raise CacheError(f"{path}: cannot read the cache index ({last}); check that it exists and is readable")


class CacheIndexCorrupt(CacheError):
    """The index file is not a readable SQLite database (damaged or overwritten)."""


def is_corruption(exc: BaseException) -> bool:
    """True for a damaged database, False for disk full, busy, I/O and other conditions."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    name = getattr(exc, "sqlite_errorname", None)
    if name is not None:
        return name in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or name.startswith("SQLITE_CORRUPT")
    return not isinstance(exc, sqlite3.OperationalError)


@contextmanager
def read_tx(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A read transaction: every query inside sees one snapshot of the index."""
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")


@overload
def tokenizer_id(conn: sqlite3.Connection, sha: str, *, create: Literal[True] = True) -> int: ...
@overload
def tokenizer_id(conn: sqlite3.Connection, sha: str, *, create: bool) -> int | None: ...
def tokenizer_id(conn: sqlite3.Connection, sha: str, *, create: bool = True) -> int | None:
    """Row id of a tokenizer fingerprint, inserting it when `create` (and reading it
    back in the same write transaction, as `root_id` does)."""
    row = conn.execute("SELECT id FROM tokenizers WHERE sha = ?", (sha,)).fetchone()
    if row or not create:
        return row[0] if row else None
    with write_tx(conn):
        conn.execute("INSERT OR IGNORE INTO tokenizers(sha) VALUES (?)", (sha,))
        row = conn.execute("SELECT id FROM tokenizers WHERE sha = ?", (sha,)).fetchone()
    return int(row[0])


def root_value(path: str) -> str | bytes:
    """How a root path is stored: the text when it is valid UTF-8, else its raw
    file-system bytes (a path the OS gave with surrogate escapes cannot be stored as text)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(path)
    return path


def root_id(conn: sqlite3.Connection, path: str) -> int:
    """Row id of a source root, inserting it on first use.

    The id is read back inside the transaction that inserts it: another process on the
    same document state prunes the roots no stat snapshot names yet
    (`dlm.cache.statindex.keep_only`), and between a committed insert and a later read
    it could remove this one."""
    value = root_value(path)
    row = conn.execute("SELECT id FROM roots WHERE path = ?", (value,)).fetchone()
    if row:
        return row[0]
    with write_tx(conn):
        conn.execute("INSERT OR IGNORE INTO roots(path) VALUES (?)", (value,))
        row = conn.execute("SELECT id FROM roots WHERE path = ?", (value,)).fetchone()
    return int(row[0])
