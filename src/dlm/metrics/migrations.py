"""Named migrations for `metrics.sqlite`, applied in order on open.

Table `_migrations(name TEXT PRIMARY KEY, applied_at TEXT)` records what ran. A new
schema change is one new function appended to `MIGRATIONS`; existing ones never
change, so any older database upgrades by running the ones it lacks.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime, timezone


def m001_runs_and_steps(db: sqlite3.Connection) -> None:
    db.execute(
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            status TEXT NOT NULL,
            base_model TEXT NOT NULL,
            max_steps INTEGER,
            steps INTEGER,
            train_loss REAL,
            tokens_per_second REAL,
            adapter_version TEXT
        )"""
    )
    db.execute(
        """CREATE TABLE steps (
            run_id TEXT NOT NULL REFERENCES runs(run_id),
            step INTEGER NOT NULL,
            loss REAL,
            learning_rate REAL,
            tokens_seen INTEGER,
            seconds REAL,
            PRIMARY KEY (run_id, step)
        )"""
    )


def m002_tokenization(db: sqlite3.Connection) -> None:
    db.execute(
        """CREATE TABLE tokenization (
            run_id TEXT PRIMARY KEY REFERENCES runs(run_id),
            total_sections INTEGER NOT NULL,
            cache_hits INTEGER NOT NULL,
            cache_misses INTEGER NOT NULL,
            total_tokenize_seconds REAL NOT NULL,
            cache_bytes_after INTEGER
        )"""
    )


def m003_run_corpus(db: sqlite3.Connection) -> None:
    db.execute("ALTER TABLE runs ADD COLUMN rows INTEGER")
    db.execute("ALTER TABLE runs ADD COLUMN files_taken INTEGER")
    db.execute("ALTER TABLE runs ADD COLUMN files_skipped TEXT")
    db.execute("ALTER TABLE runs ADD COLUMN train_tokens INTEGER")


def m004_heldout_loss(db: sqlite3.Connection) -> None:
    """Held-out loss per measurement (`phase` before | step | after) and, per run, the
    held-out row count and the real-token fraction (loss tokens / tokens processed)."""
    db.execute(
        """CREATE TABLE evals (
            run_id TEXT NOT NULL REFERENCES runs(run_id),
            phase TEXT NOT NULL,
            step INTEGER NOT NULL,
            loss REAL NOT NULL,
            perplexity REAL NOT NULL,
            rows INTEGER NOT NULL,
            tokens INTEGER NOT NULL,
            loss_tokens INTEGER NOT NULL,
            instruction_loss REAL,
            PRIMARY KEY (run_id, phase, step)
        )"""
    )
    db.execute("ALTER TABLE runs ADD COLUMN heldout_rows INTEGER")
    db.execute("ALTER TABLE runs ADD COLUMN real_token_fraction REAL")


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    m001_runs_and_steps,
    m002_tokenization,
    m003_run_corpus,
    m004_heldout_loss,
]


def migrate(db: sqlite3.Connection) -> list[str]:
    """Apply every migration `db` lacks, each in its own transaction. Returns their names."""
    db.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    done = {row[0] for row in db.execute("SELECT name FROM _migrations")}
    applied = []
    for migration in MIGRATIONS:
        if migration.__name__ in done:
            continue
        with db:
            migration(db)
            db.execute(
                "INSERT INTO _migrations VALUES (?, ?)",
                (migration.__name__, datetime.now(timezone.utc).isoformat()),
            )
        applied.append(migration.__name__)
    return applied
