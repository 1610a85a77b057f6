"""Named migrations for `metrics.sqlite`, applied in order on open by the shared
runner (`dlm.sqlitedb.apply_migrations`).

Table `_migrations(name TEXT PRIMARY KEY, applied_at)` records what ran. A new schema
change is one new function appended to `MIGRATIONS`; existing ones never change.
"""

from __future__ import annotations

import sqlite3

from dlm.sqlitedb import Migration, apply_migrations


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


def m005_judgements(db: sqlite3.Connection) -> None:
    """Evaluations of an adapter (`dlm.judge`): `phase` `final` (the whole report, from
    `dlm train` or `dlm eval`) or `step` (the probes' mean log-probability during
    training); `summary` is canonical JSON. `run_id` is the training run, NULL for a
    `dlm eval` of an adapter whose run is not recorded here."""
    db.execute(
        """CREATE TABLE judgements (
            id INTEGER PRIMARY KEY,
            run_id TEXT,
            adapter_version TEXT,
            phase TEXT NOT NULL,
            step INTEGER,
            created_at TEXT NOT NULL,
            summary TEXT NOT NULL
        )"""
    )
    db.execute("CREATE INDEX judgements_run ON judgements(run_id, step)")


def m006_run_checkpoint(db: sqlite3.Connection) -> None:
    """The folder of a run's latest complete checkpoint (`dlm.train.checkpoint`) while
    the run can be resumed; NULL once it completes or when none was written."""
    db.execute("ALTER TABLE runs ADD COLUMN checkpoint TEXT")


def m007_kind_losses(db: sqlite3.Connection) -> None:
    """Train loss per row kind (`prose`, `instruction`, `source`) over each logging
    window ending at `step`: mean cross-entropy in nats over the window's `tokens` loss
    tokens of that kind (summed per step by `dlm.train.loop`)."""
    db.execute(
        """CREATE TABLE kind_losses (
            run_id TEXT NOT NULL REFERENCES runs(run_id),
            step INTEGER NOT NULL,
            kind TEXT NOT NULL,
            loss REAL NOT NULL,
            tokens INTEGER NOT NULL,
            PRIMARY KEY (run_id, step, kind)
        )"""
    )


MIGRATIONS: list[Migration] = [
    (step.__name__, step)
    for step in (
        m001_runs_and_steps,
        m002_tokenization,
        m003_run_corpus,
        m004_heldout_loss,
        m005_judgements,
        m006_run_checkpoint,
        m007_kind_losses,
    )
]


def migrate(db: sqlite3.Connection) -> list[str]:
    """Apply every migration `db` lacks, each in its own transaction. Returns their names."""
    return apply_migrations(db, MIGRATIONS, table="_migrations")
