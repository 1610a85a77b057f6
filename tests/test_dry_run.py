"""`dlm train --dry-run`: the recipe's steps with its reason, tokens and a measured ETA,
and nothing written to the store."""

import json
from pathlib import Path

from typer.testing import CliRunner

from dlm.actions.training.dryrun import MEASURED_STEPS
from dlm.cli.main import app
from dlm.store import open_store

DOC = """---
dlm_id: 01JD7Z8K2M4N6P8Q0R2S4T6V8W
base_model: smollm2-135m
training:
  batch_size: 1
  sequence_len: 48
  eval:
    judge: false
    fraction: 0
---

# Ferries

The ferry to Quindle leaves at dawn every Tuesday and carries forty passengers.

::instruction::

### Q
Who is the captain?

### A
Marrow.
"""


def test_dry_run_prints_the_plan_with_a_measured_eta_and_writes_nothing(tmp_path: Path, smollm2_ref):
    path = tmp_path / "doc.dlm"
    path.write_text(DOC)
    result = CliRunner().invoke(app, ["train", str(path), "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["steps_reason"].startswith("recipe: ") and f"{plan['steps']} steps" in plan["steps_reason"]
    assert plan["measured"] and plan["measured_steps"] == MEASURED_STEPS and plan["eta_seconds"] > 0
    # the ETA scales the measured steps' time by the run's work, not by its tokens alone
    assert plan["tokens_per_second"] > 0 and plan["seconds_per_step"] > 0
    assert plan["planned_tokens"] > 0 and plan["examples"] > 0
    drawn = plan["drawn"]  # the one pair, repeated; the prose section; general questions replayed
    assert drawn["instruction"] > drawn["prose"] >= 1 and drawn["replay"] > 0
    assert sum(drawn.values()) == plan["steps"]  # batch_size 1: one example per step
    assert plan["replay_share"] == 0.25 and plan["replay_loss"] == "kl" and plan["replay_weight"] == 1.0
    text = CliRunner().invoke(app, ["train", str(path), "--dry-run"])
    assert text.exit_code == 0, text.output
    assert "drawn: " in text.output and "replay: 25% of the examples drawn" in text.output
    assert not open_store("01JD7Z8K2M4N6P8Q0R2S4T6V8W").root.exists()


def test_a_kl_replay_run_says_so_and_its_measured_steps_run(tmp_path: Path, smollm2_ref):
    # the option reaches the plan line; the measured steps train with it
    path = tmp_path / "doc.dlm"
    path.write_text(DOC.replace("  batch_size: 1\n", "  batch_size: 1\n  replay_loss: kl\n"))  # the default, said
    result = CliRunner().invoke(app, ["train", str(path), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "general questions the base model answered, trained on the KL to its next-token" in result.output


def test_fixed_steps_say_the_recipe_is_off_and_how_the_examples_train(tmp_path: Path, smollm2_ref):
    # --max-steps keeps the document's own layout (packed blocks, each pair once): a step
    # of a small document is then a whole block, which the reason must say
    path = tmp_path / "doc.dlm"
    path.write_text(DOC)
    result = CliRunner().invoke(app, ["train", str(path), "--dry-run", "--json", "--max-steps", "3"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["steps"] == 3
    assert (
        plan["steps_reason"]
        == "--max-steps, not the recipe: packed blocks of up to sequence_len tokens, each example once"
    )
    windows = DOC.replace("  batch_size: 1\n", "  batch_size: 1\n  packing: false\n  instruction_share: 0.5\n")
    path.write_text(windows)
    result = CliRunner().invoke(app, ["train", str(path), "--dry-run", "--json", "--max-steps", "3"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["steps_reason"] == (
        "--max-steps, not the recipe: one sequence per example, a micro-batch in one row, "
        "instruction pairs 50% of what is drawn"
    )


def test_the_probe_report_is_estimated_when_the_run_ends_with_one(tmp_path: Path, smollm2_ref):
    # measured on the run's model: a few answers and a scored passage timed, then added up
    path = tmp_path / "doc.dlm"
    path.write_text(DOC.replace("    judge: false\n", ""))
    result = CliRunner().invoke(app, ["train", str(path), "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["report_seconds"] > 0 and plan["flip_seconds"] > 0
    text = CliRunner().invoke(app, ["train", str(path), "--dry-run"]).output
    assert "then the probe report: about 0:0" in text and "more for each general probe the adapter gets wrong" in text
    assert "in all about" in text
    path.write_text(DOC)
    plan = json.loads(CliRunner().invoke(app, ["train", str(path), "--dry-run", "--json"]).stdout)
    assert plan["report_seconds"] is None and plan["flip_seconds"] is None


def test_the_json_plan_carries_the_warnings_a_quiet_sink_shows_no_one(tmp_path: Path, smollm2_ref):
    path = tmp_path / "doc.dlm"
    path.write_text(DOC + "\n::probe::\n\n### Q\nWho is the captain?\n\n### A\nMarrow.\n")
    result = CliRunner().invoke(app, ["train", str(path), "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    warnings = json.loads(result.stdout)["warnings"]
    assert len(warnings) == 1 and "this probe asks the instruction pair's question" in warnings[0]
