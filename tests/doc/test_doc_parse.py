"""Parsing valid `.dlm` text: frontmatter values, sections, fences, files and hashes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlm.doc import (
    CacheConfig,
    Document,
    InstructionSection,
    ProseSection,
    QAPair,
    SourceDirective,
    TrainingConfig,
    document_sha256,
    load_document,
    parse_document,
)
from dlm.doc.schema import CANONICAL_ULID
from dlm.errors import DocError

ID = "01JD3Q4Z8X9K2M5N7P0R6S8T1V"


def doc(body: str = "", frontmatter: str = "") -> Document:
    return parse_document(f"---\ndlm_id: {ID}\n{frontmatter}---\n{body}")


def test_minimal_document_takes_every_default() -> None:
    d = doc()
    fm = d.frontmatter
    assert fm.dlm_id == ID and fm.dlm_version == 1 and fm.base_model == "smollm2-135m"
    assert fm.system_prompt is None
    assert fm.training == TrainingConfig()
    assert fm.training.target_modules == ["gate_proj", "up_proj", "down_proj"]
    assert (fm.training.lora_r, fm.training.lora_alpha) == (16, 32)
    assert fm.training.learning_rate == 3e-3 and fm.training.budget is None and not fm.training.recast
    assert fm.training.cache == CacheConfig(enabled=True, max_bytes=10 * 2**30, prune_older_than_days=90)
    assert fm.serve.tokenizer_cache.l1_max_memory == 50 * 2**20
    assert d.sections == ()


def test_nested_values_are_read() -> None:
    d = doc(
        frontmatter=(
            "base_model: ./models/tiny\n"
            "system_prompt: You answer briefly.\n"
            "training:\n"
            "  lora_r: 16\n"
            "  learning_rate: 2e-4\n"  # a string to YAML 1.1; read as the float it looks like
            "  num_epochs: 3\n"
            "  sources:\n"
            "    - path: src\n"
            "      exclude: ['**/.git/**']\n"
            "      max_files: 10\n"
            "serve:\n"
            "  tokenizer_cache: {enable_l0: true, l1_min_prompt_chars: 0}\n"
        )
    )
    fm = d.frontmatter
    assert fm.base_model == "./models/tiny" and fm.system_prompt == "You answer briefly."
    assert fm.training.lora_r == 16 and fm.training.learning_rate == 2e-4
    assert fm.training.num_epochs == 3.0 and fm.training.effective_epochs == 3.0
    assert fm.training.sources == [SourceDirective(path="src", exclude=["**/.git/**"], max_files=10)]
    assert fm.training.sources[0].include == ["**/*"]
    assert fm.serve.tokenizer_cache.enable_l0 and fm.serve.tokenizer_cache.l1_min_prompt_chars == 0


def test_effective_epochs_defaults_to_one() -> None:
    assert TrainingConfig().effective_epochs == 1.0
    assert TrainingConfig(max_steps=50).effective_epochs == 1.0


def test_lowercase_ulid_is_kept_canonical() -> None:
    d = parse_document(f"---\ndlm_id: {ID.lower()}\n---\n")
    assert d.frontmatter.dlm_id == ID


def test_prose_splits_at_top_level_headings_only() -> None:
    d = doc("\n\nintro line\n\n# One\ntext one\n## Sub\nmore\n\n# Two\n\ntext two\n\n")
    assert d.sections == (
        ProseSection("intro line"),
        ProseSection("# One\ntext one\n## Sub\nmore"),
        ProseSection("# Two\n\ntext two"),
    )
    assert [s.line for s in d.sections] == [6, 8, 13]


def test_blank_sections_are_dropped_and_prose_keeps_inner_whitespace() -> None:
    d = doc("   \n# A\n    indented code\n  \n::prose::\n \n\t\n::prose::\nlast  ")
    assert d.sections == (ProseSection("# A\n    indented code"), ProseSection("last  "))


def test_instruction_section_pairs_and_lines() -> None:
    body = (
        "# Intro\nSome prose.\n\n"
        "::instruction::\n"
        "### Q\n  What is dlm?  \n\n"
        "### A\nA trainer.\n\nIt reads documents.\n\n"
        "### Q\nWhy?\n### A\nBecause.\n"
        "::prose::\n"
        "Back to prose.\n"
    )
    d = doc(body)
    assert d.sections == (
        ProseSection("# Intro\nSome prose."),
        InstructionSection(
            (
                QAPair("What is dlm?", "A trainer.\n\nIt reads documents."),
                QAPair("Why?", "Because."),
            )
        ),
        ProseSection("Back to prose."),
    )
    instr = d.sections[1]
    assert isinstance(instr, InstructionSection)
    assert instr.line == 7 and [p.line for p in instr.pairs] == [8, 16]
    assert d.origin(instr.pairs[1]) == "<string>:16"


def test_each_instruction_directive_starts_a_new_section() -> None:
    d = doc("::instruction::\n### Q\na\n### A\nb\n::instruction::\n### Q\nc\n### A\nd\n")
    assert d.sections == (
        InstructionSection((QAPair("a", "b"),)),
        InstructionSection((QAPair("c", "d"),)),
    )


def test_headings_other_than_q_and_a_are_answer_text() -> None:
    d = doc("::instruction::\n### Q\nq\n### A\n# Title\n### Details\nx\n")
    assert d.sections == (InstructionSection((QAPair("q", "# Title\n### Details\nx"),)),)


def test_fenced_markup_is_text_in_prose() -> None:
    body = "# Code\n```python\n# a comment, not a heading\n::instruction::\n### Q\n```\nafter\n"
    d = doc(body)
    assert d.sections == (ProseSection(body.rstrip("\n")),)


def test_fenced_markup_is_text_in_answers() -> None:
    answer = "Like this:\n~~~~\n### Q\n::prose::\n~~~\nstill code\n~~~~"
    d = doc(f"::instruction::\n### Q\nshow me\n### A\n{answer}\n### Q\nnext\n### A\nok\n")
    assert d.sections == (InstructionSection((QAPair("show me", answer), QAPair("next", "ok"))),)


def test_fence_rules_follow_commonmark() -> None:
    # A closing fence needs the same character and at least the opening length;
    # an info string with a backtick does not open a backtick fence; 4 spaces is not a fence.
    d = doc("````\n```\n# inside\n````\n# Out\n``` a`b\n# Split\n    ```\n# Again\n")
    assert [s.text.split("\n")[0] for s in d.sections] == ["````", "# Out", "# Split", "# Again"]


def test_crlf_and_bom_are_accepted_and_kept_in_source_text() -> None:
    text = f"\ufeff---\r\ndlm_id: {ID}\r\n---\r\n# A\r\ntext\r\n"
    d = parse_document(text)
    assert d.sections == (ProseSection("# A\ntext"),)
    assert d.sections[0].line == 4
    assert d.source_text == text


def test_sha256_is_of_the_exact_file_bytes(tmp_path: Path) -> None:
    raw = f"---\r\ndlm_id: {ID}\r\n---\r\nhello\r\n".encode()
    path = tmp_path / "notes.dlm"
    path.write_bytes(raw)
    d = load_document(path)
    expected = "sha256:" + hashlib.sha256(raw).hexdigest()
    assert d.dlm_sha256 == expected == document_sha256(raw) == document_sha256(raw.decode())
    assert d.path == path and d.origin(d.sections[0]) == f"{path}:4"
    assert document_sha256(raw + b"\n") != expected


def test_sha256_of_in_memory_document_is_refused() -> None:
    with pytest.raises(ValueError, match="no source text"):
        _ = Document(doc().frontmatter, ()).dlm_sha256


def test_load_missing_file_says_how_to_create_it(tmp_path: Path) -> None:
    path = tmp_path / "nope.dlm"
    with pytest.raises(DocError) as info:
        load_document(path)
    assert str(info.value) == f"{path}: no such file; create one with `dlm init {path}`"


def test_load_non_utf8_file_names_the_position(tmp_path: Path) -> None:
    path = tmp_path / "latin1.dlm"
    path.write_bytes(f"---\ndlm_id: {ID}\n---\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(DocError) as info:
        load_document(path)
    assert str(info.value) == f"{path}:4:4: not UTF-8 (byte 0xe9); save the file as UTF-8"


def test_load_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DocError, match="is a folder"):
        load_document(tmp_path)


def test_errors_name_the_file_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.dlm"
    path.write_text("no frontmatter\n", encoding="utf-8")
    with pytest.raises(DocError) as info:
        load_document(path)
    assert str(info.value).startswith(f"{path}:1:1: a .dlm file must start with a '---' line")


@given(st.integers(min_value=0, max_value=2**128 - 1))
def test_a_canonical_ulid_is_taken_as_the_ulid_library_reads_it(value: int) -> None:
    """A canonical dlm_id skips the library (its import costs every command ~30 ms);
    what it keeps must be what `ULID.from_str` gives back."""
    from ulid import ULID

    text = str(ULID.from_int(value))
    assert CANONICAL_ULID.fullmatch(text)
    assert parse_document(f'---\ndlm_id: "{text}"\n---\n').frontmatter.dlm_id == str(ULID.from_str(text)) == text


# --- probe sections: scored, never trained ---

PROBES = """---
dlm_id: 01JD7Z8K2M4N6P8Q0R2S4T6V8W
base_model: smollm2-135m
---
::instruction::
### Q
Where is the registry?
### A
In `registry.py`.
### Keys
- registry.py

::probe::
### Q
Which file holds the registry?
### A
`registry.py` holds it.
### Keys
- registry.py
* WidgetRegistry

### Q
What does it map?
### A
Names to widget classes.
"""


def test_probe_sections_hold_pairs_with_keys() -> None:
    from dlm.doc import InstructionSection, ProbeSection

    doc = parse_document(PROBES)
    instruction, probe = doc.sections
    assert isinstance(instruction, InstructionSection) and isinstance(probe, ProbeSection)
    assert instruction.pairs[0].keys == ("registry.py",)
    assert [p.keys for p in probe.pairs] == [("registry.py", "WidgetRegistry"), ()]
    assert probe.pairs[1].answer == "Names to widget classes."
    assert probe.line == 13


@pytest.mark.parametrize(
    "body, message",
    [
        ("::probe::\n### Q\nq?\n### Keys\n- k\n", "'### Keys' must follow an answer"),
        ("::probe::\n### Q\nq?\n### A\na\n### Keys\n\n", "'### Keys' lists no key"),
        ("::probe::\n", "probe section has no '### Q' / '### A' pairs"),
        ("::probe::\ntext\n### Q\nq\n### A\na\n", "text before the first '### Q' of a"),
    ],
)
def test_probe_section_problems_name_their_line(body: str, message: str) -> None:
    from dlm.doc import DocParseError

    head = PROBES.split("::instruction::")[0]
    with pytest.raises(DocParseError, match=message):
        parse_document(head + body)
