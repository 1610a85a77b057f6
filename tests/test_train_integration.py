"""The real SmolLM2 trained for a few steps through the real pipeline."""

from pathlib import Path

import pytest

from dlm.actions.training import NullSink, TrainOptions, train_document
from dlm.doc import load_document
from dlm.errors import StoreError
from dlm.infer import load_inference
from dlm.lock import adapter_sha256
from dlm.metrics import MetricsDB
from dlm.store import open_store

pytestmark = pytest.mark.integration

QUESTION = "What is the secret word of the Zorblax project?"
ANSWER = "The secret word is quindlewhump."
DOC = f"""---
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
{QUESTION}

### A
{ANSWER}
"""


@pytest.fixture
def doc_path(tmp_path: Path, smollm2_ref) -> Path:
    path = tmp_path / "secret.dlm"
    path.write_text(DOC)
    return path


def answer(doc, use_adapter: bool) -> str:
    engine = load_inference(doc, use_adapter=use_adapter)
    return "".join(engine.generate([{"role": "user", "content": QUESTION}], max_new_tokens=12))


def test_adapter_learns_the_trained_answer(doc_path: Path):
    doc = load_document(doc_path)
    report = train_document(doc, TrainOptions(use_cache=False))
    assert report.steps == 30 and report.train_tokens > 0 and report.tokens_per_second > 0
    tuned = answer(doc, use_adapter=True)
    base = answer(doc, use_adapter=False)
    assert tuned.startswith("The secret word is quindle"), tuned
    assert base != tuned
    with MetricsDB(open_store(doc.frontmatter.dlm_id).metrics_path) as db:
        (run,) = db.runs()
    assert run["status"] == "completed" and len(run["steps_logged"]) == 30
    assert run["steps_logged"][-1]["loss"] < run["steps_logged"][0]["loss"]


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
