"""docs/format.md agrees with the code: its example parses as it says, its tables name
every key with the schema's defaults."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from dlm.doc import (
    CacheConfig,
    EvalConfig,
    Frontmatter,
    InstructionSection,
    ProseSection,
    SourceDirective,
    TokenizerCacheSettings,
    TrainingConfig,
    parse_document,
)
from dlm.doc.schema import SynthConfig

FORMAT_MD = Path(__file__).resolve().parents[2] / "docs" / "format.md"


def _reference() -> str:
    return FORMAT_MD.read_text(encoding="utf-8")


def test_example_document_parses_into_the_sections_it_describes() -> None:
    example = re.search(r"````markdown\n(.*?\n)````\n", _reference(), re.S)
    assert example is not None
    doc = parse_document(example.group(1))
    kinds = [type(s).__name__ for s in doc.sections]
    assert kinds == ["ProseSection", "ProseSection", "ProseSection", "InstructionSection"]
    storage = doc.sections[1]
    assert isinstance(storage, ProseSection) and "# compaction threshold" in storage.text
    instruction = doc.sections[3]
    assert isinstance(instruction, InstructionSection) and len(instruction.pairs) == 2
    assert doc.frontmatter.training.learning_rate == 2e-4
    assert doc.frontmatter.training.sources[0].include == ["**/*.py", "**/*.md"]


@pytest.mark.parametrize(
    ("heading", "model"),
    [
        ("### Top level", Frontmatter),
        ("### `training`", TrainingConfig),
        ("### `training.sources[]`", SourceDirective),
        ("### `training.cache`", CacheConfig),
        ("### `training.eval`", EvalConfig),
        ("### `training.synth`", SynthConfig),
        ("### `serve.tokenizer_cache`", TokenizerCacheSettings),
    ],
)
def test_each_table_lists_exactly_the_schema_keys(heading: str, model: type[BaseModel]) -> None:
    text = _reference().split(heading + "\n", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \|[^|]*\|([^|]*)\|", text, re.M)
    assert [key for key, _ in rows] == list(model.model_fields)
    for key, default_cell in rows:
        written = re.match(r"\s*`([^`]*)`", default_cell)
        if written is None:  # "—" (required) or "see below" (a nested block)
            continue
        value = yaml.safe_load(written.group(1))
        if isinstance(value, str) and re.fullmatch(r"[\d.e+-]+", value):
            value = float(value)
        assert value == model.model_fields[key].get_default(call_default_factory=True), key
