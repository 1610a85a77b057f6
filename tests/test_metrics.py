import sqlite3
from pathlib import Path

from dlm.metrics import MetricsDB, RunRecord, TokenizationRecord
from dlm.metrics.migrations import MIGRATIONS, m001_runs_and_steps, migrate


def test_blank_database_gets_every_migration(tmp_path: Path):
    db = sqlite3.connect(tmp_path / "m.sqlite")
    assert migrate(db) == [name for name, _ in MIGRATIONS]
    assert migrate(db) == []


def test_old_database_upgrades_and_keeps_rows(tmp_path: Path):
    path = tmp_path / "m.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    m001_runs_and_steps(db)
    db.execute("INSERT INTO _migrations VALUES ('m001_runs_and_steps', 'then')")
    db.execute("INSERT INTO runs (run_id, started_at, status, base_model) VALUES ('old', 't', 'completed', 'b')")
    db.commit()
    db.close()
    with MetricsDB(path) as metrics:
        runs = metrics.runs()
    assert runs[0]["run_id"] == "old" and runs[0]["tokenization"] is None


def test_run_round_trip(tmp_path: Path):
    with MetricsDB(tmp_path / "m.sqlite") as metrics:
        metrics.start_run("r1", base_model="smollm2-135m", max_steps=2, rows=3, files_taken=1,
                          files_skipped={"binary": 1})
        metrics.log_tokenization("r1", TokenizationRecord(3, 1, 2, 0.5, 1024))
        metrics.log_step("r1", 1, loss=2.0, learning_rate=1e-4, tokens_seen=10, seconds=0.1)
        metrics.log_step("r1", 2, loss=1.5, learning_rate=5e-5, tokens_seen=20, seconds=0.2)
        metrics.finish_run("r1", RunRecord("completed", 2, 1.75, 100.0, "v0001", 20))
        (run,) = metrics.runs()
    assert [s["loss"] for s in run["steps_logged"]] == [2.0, 1.5]
    assert run["tokenization"] == {"total_sections": 3, "cache_hits": 1, "cache_misses": 2,
                                   "total_tokenize_seconds": 0.5, "cache_bytes_after": 1024}
    assert run["files_skipped"] == {"binary": 1} and run["status"] == "completed"
