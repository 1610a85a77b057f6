"""The real SmolLM2 trained once on one Q/A pair through the real pipeline, then: the
adapter answers it and the base does not, the run's metrics, the report `dlm train`
ends with and `dlm eval` (base vs adapter vs null adapter, the guard, reproducible
bytes, the CI gate)."""

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlm.actions.training import NullSink, TrainOptions, train_document
from dlm.cli.main import app
from dlm.doc import load_document
from dlm.errors import StoreError
from dlm.infer import load_inference
from dlm.metrics import MetricsDB
from dlm.store import open_store

pytestmark = pytest.mark.integration

DOC = """---
dlm_id: 01JG4A6S9Z1B3D5F7H9K1M3P5R
dlm_version: 1
base_model: smollm2-135m
system_prompt: You answer in one sentence.
training:
  learning_rate: 0.003
  lora_dropout: 0.0
  batch_size: 2
  sequence_len: 96
  max_steps: 24
  eval:
    max_new_tokens: 12
    guard_stop: false  # one pair at a high rate: trained past the general guard on purpose
---

::instruction::

### Q
What is the secret word of the Zorblax project?

### A
The secret word is quindlewhump.

::probe::

### Q
Which secret word does the Zorblax project use?

### A
quindlewhump

### Keys
- quindlewhump

### Q
What colour is the Zorblax logo?

### A
The logo is teal.
"""


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, smollm2_ref) -> tuple[Path, object]:
    home = tmp_path_factory.mktemp("eval-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DLM_HOME", str(home))
        path = tmp_path_factory.mktemp("eval-doc") / "zorblax.dlm"
        path.write_text(DOC)
        report = train_document(load_document(path), TrainOptions(use_cache=False), NullSink())
    return path, report, home


def _answer(path: Path, home: Path, use_adapter: bool) -> str:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DLM_HOME", str(home))
        engine = load_inference(load_document(path), use_adapter=use_adapter)
        question = "What is the secret word of the Zorblax project?"
        return "".join(engine.generate([{"role": "user", "content": question}], max_new_tokens=12))


def test_adapter_learns_the_trained_answer(trained) -> None:
    path, report, home = trained
    assert report.steps == 24 and report.train_tokens > 0 and report.tokens_per_second > 0
    assert report.peak_rss_bytes is not None and report.peak_rss_bytes > 540e6  # SmolLM2's float32 weights alone
    tuned = _answer(path, home, use_adapter=True)
    base = _answer(path, home, use_adapter=False)
    assert tuned.startswith("The secret word is quindle"), tuned
    assert base != tuned
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DLM_HOME", str(home))
        with MetricsDB(open_store("01JG4A6S9Z1B3D5F7H9K1M3P5R").metrics_path) as db:
            (run,) = db.runs()
    assert run["status"] == "completed" and len(run["steps_logged"]) == 24
    assert run["steps_logged"][-1]["loss"] < run["steps_logged"][0]["loss"]


def test_train_ends_with_the_probe_report(trained) -> None:
    path, report, home = trained
    evaluation = report.evaluation
    assert set(evaluation["kinds"]) == {"instruction", "probe"}
    instruction, probe = evaluation["kinds"]["instruction"], evaluation["kinds"]["probe"]
    assert instruction["total"] == 1 and probe["total"] == 2
    assert instruction["passed"]["adapter"] == 1 and instruction["passed"]["base"] == 0
    # the trained answer became far more likely than under the base or a null adapter of the same size
    assert instruction["logprob"]["adapter"] > instruction["logprob"]["null"] + 1.0
    assert instruction["logprob"]["adapter"] > instruction["logprob"]["base"] + 1.0
    assert evaluation["general"]["passages"] >= 40 and evaluation["general"]["base_nll"] > 0
    # the general probes: asked of the base and the adapter; those the base fails under this
    # document's system prompt and 12-token replies are skipped, not counted
    probes = evaluation["general_probes"]
    assert probes["total"] == 16 and probes["passed"]["base"] + len(probes["skipped"]) == 16
    assert probes["passed"]["base"] >= 6 and probes["passed"]["adapter"] <= probes["passed"]["base"]
    assert len(probes["flipped"]) == probes["passed"]["base"] - probes["passed"]["adapter"]
    # 24 steps at a high learning rate on one answer: the adapter answers general questions
    # with it, its drawn replies too, and the report names what it forgot and warns
    assert set(probes["forgotten"]) <= set(probes["flipped"]) and probes["samples"] == 16
    assert len(probes["forgotten"]) >= 3 and "capital-france" in probes["forgotten"]
    assert any(w.startswith("general probes: the adapter fails") for w in evaluation["warnings"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DLM_HOME", str(home))
        with MetricsDB(open_store("01JG4A6S9Z1B3D5F7H9K1M3P5R").metrics_path) as db:
            (judged,) = [j for j in db.judgements(report.run_id) if j["phase"] == "final"]
            during = [j["step"] for j in db.judgements(report.run_id) if j["phase"] == "step"]
    assert during == [6, 12, 18, 24]  # the probes' curve: at each quarter of the 24 steps
    assert judged["phase"] == "final" and judged["adapter_version"] == "v0001"
    assert judged["summary"]["kinds"] == evaluation["kinds"]
    assert judged["summary"]["general_probes"]["passed"] == evaluation["general_probes"]["passed"]


def test_eval_right_after_train_reads_the_report_training_saved(trained, tmp_path) -> None:
    # a fresh process, as a shell's `dlm train DOC && dlm eval DOC` runs it: the report
    # training left is read (its file untouched, no other written), nothing is scored
    import os
    import subprocess
    import sys

    path, report, home = trained
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DLM_HOME", str(home))
        folder = open_store("01JG4A6S9Z1B3D5F7H9K1M3P5R").judge_reports_dir
    (saved,) = folder.glob("*.json")
    before = saved.stat().st_mtime_ns
    env = {**os.environ, "DLM_HOME": str(home), "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    out = subprocess.run(
        [sys.executable, "-m", "dlm", "eval", str(path), "--json"], env=env, capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == json.loads(json.dumps(report.evaluation))
    assert list(folder.glob("*.json")) == [saved] and saved.stat().st_mtime_ns == before


def test_eval_prints_the_same_bytes_twice_and_gates_on_min_pass(trained, monkeypatch) -> None:
    path, report, home = trained
    monkeypatch.setenv("DLM_HOME", str(home))
    store = open_store("01JG4A6S9Z1B3D5F7H9K1M3P5R")
    assert store.judge_base_path.is_file()  # training remembered the base model's side (dlm.judge.memo)
    assert len(list(store.judge_reports_dir.glob("*.json"))) == 1  # and its whole report
    runner = CliRunner()
    passed = report.evaluation["kinds"]["probe"]["passed"]["adapter"]
    # without the remembered report, the adapter and null sides are scored afresh from the
    # stored adapter; the base side is read from its memo (that a memo equals a fresh
    # score, `--recompute`, is tests/judge/test_judge_memo.py's)
    for remembered in store.judge_reports_dir.glob("*.json"):
        remembered.unlink()
    first = runner.invoke(app, ["eval", str(path), "--json"])
    assert first.exit_code == 0, first.output
    data = json.loads(first.stdout)
    # the stored adapter, reloaded and scored afresh, gives the report the in-memory one
    # gave at the end of training, number for number
    assert data == json.loads(json.dumps(report.evaluation))
    assert len(list(store.judge_reports_dir.glob("*.json"))) == 1  # remembered again
    assert data["kinds"]["probe"]["passed"]["adapter"] == passed
    # the report remembered for this adapter; a gate the adapter meets exits 0 and changes no byte
    second = runner.invoke(app, ["eval", str(path), "--json", "--min-pass", str(passed)])
    assert second.exit_code == 0, second.output
    assert first.stdout == second.stdout
    gated = runner.invoke(app, ["eval", str(path), "--min-pass", str(passed + 1)])
    assert gated.exit_code == 1 and "probes:" in gated.stdout  # the report, then the gate
    assert "general probes: passed base " in gated.stdout
    assert f"the adapter passed {passed} of 2 probes, fewer than --min-pass {passed + 1}" in gated.output


def test_eval_of_a_missing_version_is_one_line(trained, monkeypatch) -> None:
    path, _, home = trained
    monkeypatch.setenv("DLM_HOME", str(home))
    result = CliRunner().invoke(app, ["eval", str(path), "--adapter-version", "v0042"])
    assert result.exit_code == 1
    assert "--adapter-version v0042: not in" in result.output and "v0001" in result.output


def test_train_no_judge_publishes_without_a_report(trained, tmp_path, monkeypatch) -> None:
    path, _, home = trained
    copy = tmp_path / "home"
    shutil.copytree(home, copy)  # the other tests keep v0001 current
    monkeypatch.setenv("DLM_HOME", str(copy))
    store = open_store("01JG4A6S9Z1B3D5F7H9K1M3P5R")
    reports_before = sorted(store.judge_reports_dir.glob("*.json"))
    result = CliRunner().invoke(app, ["train", str(path), "--max-steps", "1", "--no-judge", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["adapter_version"] == "v0002" and report["evaluation"] is None
    assert sorted(store.judge_reports_dir.glob("*.json")) == reports_before
    with MetricsDB(store.metrics_path) as db:
        assert db.judgements(report["run_id"]) == []


def test_eval_recompute_asks_for_every_side_afresh(tmp_path, monkeypatch) -> None:
    import dlm.actions.evaluating as evaluating

    seen = []

    def fake_evaluate(path, adapter_version=None, recompute=False, notify=None):
        seen.append(recompute)
        raise StoreError("stop here")

    monkeypatch.setattr(evaluating, "evaluate", fake_evaluate)
    path = tmp_path / "doc.dlm"
    path.write_text(DOC)
    for args in (["--recompute"], []):
        result = CliRunner().invoke(app, ["eval", str(path), *args])
        assert result.exit_code == 1 and "stop here" in result.output
    assert seen == [True, False]


def test_prompt_compare_answers_as_the_two_single_prompts_do(trained, monkeypatch) -> None:
    path, _, home = trained
    monkeypatch.setenv("DLM_HOME", str(home))
    question = "What is the secret word of the Zorblax project?"
    result = CliRunner().invoke(app, ["prompt", str(path), question, "--compare", "--max-new-tokens", "12", "--json"])
    assert result.exit_code == 0, result.output
    both = json.loads(result.stdout)
    assert both["question"] == question
    assert both["adapter"] == _answer(path, home, use_adapter=True) and both["adapter"].startswith("The secret word")
    assert both["base"] == _answer(path, home, use_adapter=False) != both["adapter"]
    refused = CliRunner().invoke(app, ["prompt", str(path), question, "--compare", "--no-adapter"])
    assert refused.exit_code == 2 and "drop --no-adapter" in refused.stderr
