"""Ctrl-C keeps the last checkpoint; `--resume` continues the run to the adapter an
uninterrupted run gives (the real SmolLM2, a few steps)."""

from pathlib import Path

import pytest

from dlm.actions.training import NullSink, TrainOptions, train_document
from dlm.doc import load_document
from dlm.errors import TrainingError
from dlm.metrics import MetricsDB
from dlm.store import open_store

pytestmark = pytest.mark.integration

DOC = """---
dlm_id: 01JD7Z8K2M4N6P8Q0R2S4T6V8W
base_model: smollm2-135m
training:
  lora_r: 4
  lora_alpha: 8
  lora_dropout: 0.1
  batch_size: 1
  sequence_len: 48
  max_steps: 4
  checkpoint_every: 2
  eval:
    judge: false
    fraction: 0
---

# Ferries

The ferry to Quindle leaves at dawn every Tuesday and carries forty passengers.

# Harbour

The harbour has two piers; the north pier is for fishing boats only.

::instruction::

### Q
Who is the captain?

### A
Marrow.
"""


class InterruptAt(NullSink):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step(self, step, *args) -> None:
        if step >= self.step:
            raise KeyboardInterrupt


def test_interrupted_then_resumed_run_gives_the_uninterrupted_adapter(tmp_path: Path, smollm2_ref, monkeypatch):
    path = tmp_path / "doc.dlm"
    path.write_text(DOC)
    doc = load_document(path)
    whole = train_document(doc, TrainOptions(use_cache=False))
    store = open_store(doc.frontmatter.dlm_id)
    assert store.staging_dirs() == []  # a completed run keeps no checkpoint

    monkeypatch.setenv("DLM_HOME", str(tmp_path / "home2"))
    store = open_store(doc.frontmatter.dlm_id)
    with pytest.raises(KeyboardInterrupt):
        train_document(doc, TrainOptions(use_cache=False), InterruptAt(3))
    with MetricsDB(store.metrics_path) as db:
        (run,) = db.runs()
    assert run["status"] == "interrupted" and run["checkpoint"].endswith("checkpoints/step-000002")
    assert (Path(run["checkpoint"]) / "optimizer.pt").is_file() and store.current_version() is None

    resumed = train_document(doc, TrainOptions(use_cache=False, resume=True))
    assert resumed.run_id == run["run_id"] and resumed.steps == 4
    assert resumed.resumed_from == run["checkpoint"]
    assert resumed.adapter_sha256 == whole.adapter_sha256
    with MetricsDB(store.metrics_path) as db:
        (run,) = db.runs()
    assert run["status"] == "completed" and run["checkpoint"] is None and store.staging_dirs() == []
    assert [s["step"] for s in run["steps_logged"]] == [1, 2, 3, 4]
    assert {k["kind"] for k in run["kind_losses"]} <= {"prose", "instruction", "synth", "replay"} and run["kind_losses"]


def test_resume_is_refused_when_the_document_changed(tmp_path: Path, smollm2_ref):
    path = tmp_path / "doc.dlm"
    path.write_text(DOC)
    with pytest.raises(KeyboardInterrupt):
        train_document(load_document(path), TrainOptions(use_cache=False), InterruptAt(3))
    path.write_text(DOC.replace("forty passengers", "fifty passengers"))
    with pytest.raises(TrainingError, match=r"^cannot resume run \w+: the document and the training rows changed "):
        train_document(load_document(path), TrainOptions(use_cache=False, resume=True))


def test_resume_without_an_interrupted_run_says_so(tmp_path: Path):
    path = tmp_path / "doc.dlm"
    path.write_text(DOC)
    with pytest.raises(TrainingError, match=r"^nothing to resume: no interrupted run with a checkpoint"):
        train_document(load_document(path), TrainOptions(resume=True))
