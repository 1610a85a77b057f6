"""`dlm metrics` shows the train loss per row kind and an interrupted run's checkpoint;
`--plot` draws the per-kind curves."""

from pathlib import Path

from typer.testing import CliRunner

from dlm.cli.main import app
from dlm.metrics import MetricsDB, RunRecord
from dlm.store import open_store

DLM_ID = "01JD7Z8K2M4N6P8Q0R2S4T6V8W"


def test_metrics_shows_kind_losses_and_the_checkpoint(tmp_path: Path):
    doc = tmp_path / "doc.dlm"
    doc.write_text(f"---\ndlm_id: {DLM_ID}\n---\n\n# Notes\n\nSome prose.\n")
    store = open_store(DLM_ID)
    with MetricsDB(store.metrics_path) as db:
        db.start_run("R1", base_model="smollm2-135m", max_steps=4, rows=2, files_taken=0, files_skipped={})
        for step in (1, 2):
            db.log_step("R1", step, loss=2.0, learning_rate=1e-3, tokens_seen=10 * step, seconds=step)
            db.log_kind_losses("R1", step, {"prose": (2.5, 40), "instruction": (0.5 / step, 8)})
        db.finish_run("R1", RunRecord("interrupted", 2, None, None, None))
        db.set_checkpoint("R1", "/s/adapter/.staging-R1/checkpoints/step-000002")
    result = CliRunner().invoke(app, ["metrics", str(doc)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "instruction 0.25  prose 2.50" in result.stdout  # the last step's window
    assert "run R1 interrupted: checkpoint /s/adapter/.staging-R1/checkpoints/step-000002" in result.stdout
    png = tmp_path / "loss.png"
    plotted = CliRunner().invoke(app, ["metrics", str(doc), "--plot", str(png)])
    assert plotted.exit_code == 0, plotted.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_metrics_piped_keeps_every_column_of_a_row_on_one_line(tmp_path: Path, monkeypatch):
    # output that is not a terminal (a pipe, a file, CliRunner) and no COLUMNS: no 80-column cut
    monkeypatch.delenv("COLUMNS", raising=False)
    doc = tmp_path / "doc.dlm"
    doc.write_text(f"---\ndlm_id: {DLM_ID}\n---\n\n# Notes\n\nSome prose.\n")
    with MetricsDB(open_store(DLM_ID).metrics_path) as db:
        db.start_run(
            "R1-a-long-run-id", base_model="smollm2-135m", max_steps=4, rows=2, files_taken=0, files_skipped={}
        )
        db.log_step("R1-a-long-run-id", 1, loss=2.0, learning_rate=1e-3, tokens_seen=10, seconds=1)
        db.log_kind_losses("R1-a-long-run-id", 1, {"prose": (2.5, 40), "instruction": (0.5, 8)})
        db.finish_run("R1-a-long-run-id", RunRecord("completed", 1, 2.0, 12.5, "v0001"))
    result = CliRunner().invoke(app, ["metrics", str(doc)])
    assert result.exit_code == 0, result.output
    (row,) = [line for line in result.stdout.splitlines() if "R1-a-long-run-id" in line]
    assert "completed" in row and "instruction 0.50  prose 2.50" in row and "v0001" in row
    assert "…" not in result.stdout
