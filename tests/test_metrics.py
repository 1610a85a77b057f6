import sqlite3
from pathlib import Path

from dlm.metrics import EvalRecord, MetricsDB, RunRecord, TokenizationRecord
from dlm.metrics.migrations import (
    MIGRATIONS,
    m001_runs_and_steps,
    m002_tokenization,
    m003_run_corpus,
    migrate,
)


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
        metrics.start_run(
            "r1", base_model="smollm2-135m", max_steps=2, rows=3, files_taken=1, files_skipped={"binary": 1}
        )
        metrics.log_tokenization("r1", TokenizationRecord(3, 1, 2, 0.5, 1024))
        metrics.log_step("r1", 1, loss=2.0, learning_rate=1e-4, tokens_seen=10, seconds=0.1)
        metrics.log_step("r1", 2, loss=1.5, learning_rate=5e-5, tokens_seen=20, seconds=0.2)
        metrics.finish_run("r1", RunRecord("completed", 2, 1.75, 100.0, "v0001", 20))
        (run,) = metrics.runs()
    assert [s["loss"] for s in run["steps_logged"]] == [2.0, 1.5]
    assert run["tokenization"] == {
        "total_sections": 3,
        "cache_hits": 1,
        "cache_misses": 2,
        "total_tokenize_seconds": 0.5,
        "cache_bytes_after": 1024,
    }
    assert run["files_skipped"] == {"binary": 1} and run["status"] == "completed"


def test_database_before_heldout_upgrades_and_records_evals(tmp_path: Path):
    path = tmp_path / "m.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    for m in (m001_runs_and_steps, m002_tokenization, m003_run_corpus):
        m(db)
        db.execute("INSERT INTO _migrations VALUES (?, 'then')", (m.__name__,))
    db.execute("INSERT INTO runs (run_id, started_at, status, base_model) VALUES ('old', 't', 'completed', 'b')")
    db.commit()
    db.close()
    with MetricsDB(path) as metrics:
        metrics.start_run("new", base_model="b", max_steps=2, rows=30, files_taken=0, files_skipped={}, heldout_rows=3)
        metrics.log_eval("new", EvalRecord("after", 2, 2.4, 11.0, 3, 96, 90, None))
        metrics.log_eval("new", EvalRecord("before", 0, 2.7, 14.9, 3, 96, 90, 1.5))
        metrics.log_eval("new", EvalRecord("step", 1, 2.5, 12.2, 3, 96, 90, None))
        metrics.finish_run("new", RunRecord("completed", 2, 2.5, 10.0, "v0001", 200, 0.75))
        by_id = {r["run_id"]: r for r in metrics.runs()}
    old, new = by_id["old"], by_id["new"]
    assert old["evals"] == [] and old["heldout_rows"] is None
    assert [(e["phase"], e["step"]) for e in new["evals"]] == [("before", 0), ("step", 1), ("after", 2)]
    assert new["evals"][0]["instruction_loss"] == 1.5 and new["heldout_rows"] == 3
    assert new["real_token_fraction"] == 0.75


def test_database_before_kind_losses_upgrades_and_records_them_and_the_checkpoint(tmp_path: Path):
    from dlm.metrics.migrations import m004_heldout_loss, m005_judgements

    path = tmp_path / "m.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    for step in (m001_runs_and_steps, m002_tokenization, m003_run_corpus, m004_heldout_loss, m005_judgements):
        step(db)
        db.execute("INSERT INTO _migrations VALUES (?, 'then')", (step.__name__,))
    db.execute(
        "INSERT INTO runs (run_id, started_at, status, base_model) VALUES ('old', '2000-01-01', 'completed', 'b')"
    )
    db.commit()
    db.close()
    with MetricsDB(path) as metrics:
        metrics.start_run("r1", base_model="b", max_steps=2, rows=3, files_taken=0, files_skipped={})
        metrics.log_kind_losses("r1", 1, {"prose": (2.5, 40), "instruction": (0.5, 8)})
        metrics.finish_run("r1", RunRecord("interrupted", 1, None, None, None))
        metrics.set_checkpoint("r1", "/store/adapter/.staging-r1/checkpoints/step-000001")
        old, new = metrics.runs()
    assert old["kind_losses"] == [] and old["checkpoint"] is None
    assert new["kind_losses"] == [
        {"step": 1, "kind": "instruction", "loss": 0.5, "tokens": 8},
        {"step": 1, "kind": "prose", "loss": 2.5, "tokens": 40},
    ]
    assert new["checkpoint"].endswith("step-000001") and new["status"] == "interrupted"
