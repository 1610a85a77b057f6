"""One real adapter per test session: the embedded SmolLM2 trained for a few steps
through `dlm train` (the real pipeline, store, manifest and lock), then each test gets
its own copy of that store under its own DLM_HOME."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

DLM_ID = "01JD7Z8K2M4N6P8Q0R2S4T6V8X"
DOC = f"""---
dlm_id: {DLM_ID}
dlm_version: 1
base_model: smollm2-135m
system_prompt: You answer in one sentence.
training:
  learning_rate: 0.003
  lora_r: 8
  lora_alpha: 16
  lora_dropout: 0.0
  batch_size: 1
  sequence_len: 48
  max_steps: 3
  target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj]
  eval:
    judge: false
---

::instruction::

### Q
What is the secret word of the Zorblax project?

### A
The secret word is quindlewhump.
"""


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory, smollm2_ref) -> tuple[Path, Path]:
    """(document path, DLM_HOME holding its store with one trained adapter v0001)."""
    from dlm.actions.training import TrainOptions, train_document
    from dlm.doc import load_document

    root = tmp_path_factory.mktemp("export-trained")
    home, doc_path = root / "home", root / "notes.dlm"
    doc_path.write_text(DOC)
    previous = os.environ.get("DLM_HOME")
    os.environ["DLM_HOME"] = str(home)
    try:
        train_document(load_document(doc_path), TrainOptions(use_cache=False))
    finally:
        if previous is None:
            os.environ.pop("DLM_HOME", None)
        else:
            os.environ["DLM_HOME"] = previous
    return doc_path, home


@pytest.fixture
def doc(trained: tuple[Path, Path], dlm_home: Path, tmp_path: Path) -> Path:
    """A private copy of the trained document and its store (tests may damage them)."""
    doc_path, home = trained
    shutil.copytree(home / "store", dlm_home / "store")
    copy = tmp_path / "doc" / doc_path.name
    copy.parent.mkdir()
    shutil.copyfile(doc_path, copy)
    return copy


@pytest.fixture
def adapter_dir(doc: Path, dlm_home: Path) -> Path:
    """The trained adapter folder (v0001) in this test's store."""
    return dlm_home / "store" / DLM_ID / "adapter" / "versions" / "v0001"
