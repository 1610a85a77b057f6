"""`dlm show DOC --tokens`: one row's ids, pieces, loss mask and cuts, with the real tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from judgedoc import write_judged
from typer.testing import CliRunner

from dlm.actions.row_tokens import row_tokens
from dlm.cli.main import app
from dlm.doc import load_document

runner = CliRunner()
DOC = """---
dlm_id: 01JD7Z8K2M4N6P8Q0R2S4T6V8Y
dlm_version: 1
base_model: smollm2-135m
training:
  sequence_len: 16
  sources:
    - path: src
      include: ["**/*.py"]
---

# Notes

The registry maps names to widgets.

::instruction::

### Q
Where is the widget registry?

### A
In registry.py, next to the widget base class.
"""


@pytest.fixture
def doc_path(tmp_path: Path, smollm2_ref) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "registry.py").write_text(
        "class WidgetRegistry:\n    def __init__(self):\n        self.by_name = {}\n\n"
        "    def add(self, name, widget):\n        self.by_name[name] = widget\n"
    )
    path = tmp_path / "widgets.dlm"
    path.write_text(DOC)
    return path


def show(path: Path, *args: str) -> dict:
    result = runner.invoke(app, ["show", str(path), "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_source_file_tokens_with_window_cuts(doc_path: Path, smollm2_tokenizer):
    view = show(doc_path, "--tokens", "registry.py", "--limit", "40")
    assert view["source"].endswith("src/registry.py") and view["kind"] == "source"
    assert view["layout"] == "windows" and view["cuts"][:3] == [0, 15, 30]
    tokens = view["tokens"]
    assert len(tokens) == 40 < view["n_tokens"]
    assert [t["position"] for t in tokens if t["cut"]] == [0, 15, 30]
    assert not tokens[0]["loss"] and all(t["loss"] for t in tokens[1:])  # windows overlap by one
    ids = [t["id"] for t in tokens]
    assert smollm2_tokenizer.convert_ids_to_tokens(ids) == [t["piece"] for t in tokens]
    assert "".join(t["text"] for t in tokens).startswith(smollm2_tokenizer.decode(ids[:5]))


def test_instruction_row_masks_the_question(doc_path: Path):
    text = doc_path.read_text().splitlines()
    line = text.index("### Q") + 1
    view = show(doc_path, "--tokens", str(line), "--limit", "500")
    n_prompt = view["n_prompt"]
    assert view["kind"] == "instruction" and 0 < n_prompt < view["n_tokens"]
    assert [t["loss"] for t in view["tokens"]] == [False] * n_prompt + [True] * (view["n_tokens"] - n_prompt)
    assert "widget base class" in "".join(t["text"] for t in view["tokens"] if t["loss"])


def test_unknown_selector_is_a_usage_error(doc_path: Path):
    result = runner.invoke(app, ["show", str(doc_path), "--tokens", "nowhere.py"])
    assert result.exit_code == 2 and "not a source file" in result.output


def test_held_out_row_carries_loss_only_in_its_scored_window(tmp_path: Path, smollm2_tokenizer):
    from dlm.rows.build import build_rows
    from dlm.tokenize.fingerprint import tokenizer_sha256
    from dlm.tokenize.plain import PlainRowEncoder
    from dlm.train.heldout import split_rows

    path = write_judged(tmp_path)
    doc = load_document(path)
    built = build_rows(doc, smollm2_tokenizer)
    rows = PlainRowEncoder(smollm2_tokenizer, tokenizer_sha256(smollm2_tokenizer)).tokenize(built.rows)
    split = split_rows(rows, 0.3, 8)
    scored, trains = int(split.scored[0]), int(split.train[0])
    line = {i: built.rows.text_rows[i].origin.rsplit(":", 1)[1] for i in (scored, trains)}
    held = row_tokens(path, line[scored])
    assert held.heldout and held.cuts == []
    assert sum(t["loss"] for t in held.tokens) == min(held.n_tokens, 64) - max(held.n_prompt, 1)
    kept = row_tokens(path, line[trains])
    assert not kept.heldout and kept.cuts == [0]
