"""Held-out loss through the real pipeline: the embedded SmolLM2, a few steps."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from judgedoc import write_judged
from typer.testing import CliRunner

from dlm.actions.training import TrainOptions, train_document
from dlm.cli.main import app
from dlm.doc import load_document
from dlm.metrics import MetricsDB
from dlm.store import open_store
from dlm.train.precision import resolve_precision

pytestmark = pytest.mark.integration
runner = CliRunner()


def test_held_out_rows_are_scored_before_during_and_after(tmp_path: Path, smollm2_ref):
    doc = load_document(write_judged(tmp_path))
    report = train_document(doc, TrainOptions(use_cache=False))
    held = report.heldout
    assert held is not None and held["rows"] == 8
    assert held["kinds"].keys() <= {"prose", "instruction"}
    before, after = held["before"], held["after"]
    assert before["step"] == 0 and after["step"] == report.steps == 4
    assert [s["step"] for s in held["steps"]] == [2]
    assert after["loss"] < before["loss"]  # lr 2e-3 on near-identical sentences
    assert before["perplexity"] == pytest.approx(2.718281828 ** before["loss"])
    assert 0 < report.real_token_fraction <= 1
    assert report.precision == resolve_precision("auto")  # the dtype the steps ran in (precision: auto)
    # counted from the micro-batches the steps trained, not from what a data loader read ahead
    assert 0 < report.loss_tokens <= report.train_tokens
    # the step-2 measurement ran inside the training loop: its time is not the steps' rate
    assert 0 < report.step_seconds < report.train_seconds
    assert report.tokens_per_second == pytest.approx(report.train_tokens / report.step_seconds, rel=1e-3)
    assert dataclasses.asdict(report)["heldout"]["after"]["loss"] == after["loss"]  # what --json prints
    with MetricsDB(open_store(doc.frontmatter.dlm_id).metrics_path) as db:
        (run,) = db.runs()
    assert [(e["phase"], e["step"]) for e in run["evals"]] == [("before", 0), ("step", 2), ("after", 4)]
    assert run["heldout_rows"] >= 8 and run["rows"] == 24 + 22
    assert report.examples == run["rows"] - run["heldout_rows"]  # one window per short row, none held out
    assert run["real_token_fraction"] == report.real_token_fraction


def test_train_cli_prints_the_held_out_line_and_plots_it(tmp_path: Path, smollm2_ref):
    path = write_judged(tmp_path, every_steps=None, max_steps=2)
    result = runner.invoke(app, ["train", str(path)])
    assert result.exit_code == 0, result.output
    assert "held-out loss " in result.output and "(perplexity " in result.output
    assert "8 rows" in result.output and "real tokens:" in result.output
    assert re.search(r"peak memory: \d+\.\d\d GB resident", result.output)
    assert "step 1/2" in result.output and "ETA" in result.output  # plain lines: not a terminal
    plot = tmp_path / "loss.png"
    result = runner.invoke(app, ["metrics", str(path), "--plot", str(plot)])
    assert result.exit_code == 0, result.output
    assert plot.read_bytes()[:4] == b"\x89PNG"
    (run,) = json.loads(runner.invoke(app, ["metrics", str(path), "--json"]).output)["runs"]
    result = runner.invoke(app, ["metrics", str(path), "--json", "--run", run["run_id"]])
    assert json.loads(result.output)["runs"] == [run]
    assert [e["phase"] for e in run["evals"]] == ["before", "after"]
    result = runner.invoke(app, ["metrics", str(path), "--run", "nope"])
    assert result.exit_code == 2 and "no run 'nope'" in result.output


def test_the_base_models_score_is_remembered_for_the_next_run(tmp_path: Path, smollm2_ref):
    doc = load_document(write_judged(tmp_path, every_steps=None, max_steps=1))
    first = train_document(doc, TrainOptions(use_cache=False))
    memo = open_store(doc.frontmatter.dlm_id).heldout_base_path
    stored = json.loads(memo.read_text())
    before = {k: v for k, v in first.heldout["before"].items() if k != "step"}
    assert stored["result"] == before
    stored["result"]["loss"] = 123.0  # planted: only a run that reads the memo reports it
    memo.write_text(json.dumps(stored))
    second = train_document(doc, TrainOptions(use_cache=False))
    assert second.heldout["before"]["loss"] == 123.0
    assert second.heldout["after"] == first.heldout["after"]  # the trained model is still scored
    assert second.adapter_sha256 == first.adapter_sha256
    path = write_judged(tmp_path, every_steps=None, max_steps=1)
    path.write_text(path.read_text().replace("max_rows: 8", "max_rows: 6"))
    third = train_document(load_document(path), TrainOptions(use_cache=False))  # fewer scored rows: anew
    assert third.heldout["before"]["loss"] != 123.0
    assert json.loads(memo.read_text())["result"]["loss"] == third.heldout["before"]["loss"]
