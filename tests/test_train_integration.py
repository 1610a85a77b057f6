"""The real SmolLM2 trained for a few steps through the real pipeline: Ctrl-C and a
concurrent run leave the store as it was. That an adapter learns its answer is checked
on the one trained in `tests/judge/test_eval_cli.py`."""

from pathlib import Path

import pytest

from dlm.actions.training import NullSink, TrainOptions, train_document
from dlm.doc import load_document
from dlm.errors import StoreError
from dlm.lock import adapter_sha256
from dlm.metrics import MetricsDB
from dlm.store import open_store

pytestmark = pytest.mark.integration

DOC = """---
dlm_id: 01JD7Z8K2M4N6P8Q0R2S4T6V8W
dlm_version: 1
base_model: smollm2-135m
system_prompt: You answer in one sentence.
training:
  learning_rate: 0.003
  lora_r: 8
  lora_alpha: 16
  lora_dropout: 0.0
  batch_size: 1
  sequence_len: 64
  max_steps: 30
  eval:
    judge: false  # the probe report that ends a run has its own tests (tests/judge/test_eval_cli.py)
---

::instruction::

### Q
What is the secret word of the Zorblax project?

### A
The secret word is quindlewhump.
"""


@pytest.fixture
def doc_path(tmp_path: Path, smollm2_ref) -> Path:
    path = tmp_path / "secret.dlm"
    path.write_text(DOC)
    return path


class InterruptAt(NullSink):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step(self, step, *args) -> None:
        if step >= self.step:
            raise KeyboardInterrupt


def test_ctrl_c_mid_training_keeps_previous_adapter(doc_path: Path):
    doc = load_document(doc_path)
    first = train_document(doc, TrainOptions(max_steps=2, use_cache=False))
    store = open_store(doc.frontmatter.dlm_id)
    with pytest.raises(KeyboardInterrupt):
        train_document(doc, TrainOptions(max_steps=5, use_cache=False), InterruptAt(2))
    assert store.current_version() == first.adapter_version == "v0001"
    assert adapter_sha256(store.current_adapter_dir()) == first.adapter_sha256
    assert store.versions() == ["v0001"]
    assert not list(store.adapter_root.glob(".staging-*"))
    with MetricsDB(store.metrics_path) as db:
        assert [r["status"] for r in db.runs()] == ["completed", "interrupted"]


def test_concurrent_train_fails_clearly_and_changes_nothing(doc_path: Path):
    doc = load_document(doc_path)
    store = open_store(doc.frontmatter.dlm_id)
    with store.train_lock():
        with pytest.raises(StoreError, match="another `dlm train` is running"):
            train_document(doc, TrainOptions(max_steps=1, use_cache=False))
    assert store.versions() == []


def test_the_report_keeps_every_warning_the_run_gave(tmp_path: Path, smollm2_ref) -> None:
    # a probe that repeats a trained pair is warned about while rows are built; a quiet
    # sink (`--json`) shows it to no one, so the report must carry it
    path = tmp_path / "warned.dlm"
    path.write_text(
        DOC + "\n::probe::\n\n### Q\nWhat is the secret word of the Zorblax project?\n\n### A\nquindlewhump\n"
    )
    report = train_document(load_document(path), TrainOptions(max_steps=1, use_cache=False))
    repeated = [w for w in report.warnings if "this probe asks the instruction pair's question" in w]
    assert len(repeated) == 1 and repeated[0].startswith(f"{path}:")
