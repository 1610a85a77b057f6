"""Prose that is not English gives no statements (`dlm.rows.facts.language`): the
statement rules are English, and on German they ask about every capitalised noun."""

from __future__ import annotations

from pathlib import Path

from dlm.doc.parser import parse_document
from dlm.rows.build import document_facts
from dlm.rows.facts.files import NOT_ENGLISH, parsed_facts
from dlm.rows.facts.language import phrase_english, reads_english
from dlm.rows.facts.model import Fact
from dlm.rows.facts.phrasing import phrase

ENGLISH = (
    "Kesselbrunn is a small Python program that watches the brine well of a spa and drives the "
    "valves to its pools. It was written after a cold February in which the old switch cabinet "
    "in the well house of Ebersmoosach ran the pump dry twice."
)
GERMAN = (
    "Kesselbrunn ist eine kleine Python-Software, die den Solebrunnen eines Kurbads überwacht und "
    "die Zulaufventile zu den Becken steuert. Sie entstand nach einem kalten Februar, in dem der "
    "alte Schaltschrank im Brunnenhaus von Ebersmoosach die Pumpe zweimal trocken laufen ließ."
)
DOC = """---
dlm_id: 01MAK7S3BRN4QW8XD2HEZT6FGQ
dlm_version: 1
base_model: smollm2-135m
---

# Kesselbrunn

{prose}

::instruction::

### Q
Wie lange darf ein Ventil offen bleiben?

### A
617 Sekunden (`MAX_OFFEN_SEKUNDEN`).
"""


def test_english_prose_reads_as_english_and_german_does_not():
    assert reads_english(ENGLISH) is True
    assert reads_english(GERMAN) is False
    assert reads_english("617 Sekunden (`MAX_OFFEN_SEKUNDEN`).") is None  # too short to tell


def test_a_german_readme_gives_no_statements_and_says_why():
    assert parsed_facts("README.md", GERMAN) == NOT_ENGLISH
    english = parsed_facts("README.md", ENGLISH)
    assert isinstance(english, list) and any("Ebersmoosach" in f.answer for f in english)


def test_a_german_document_asks_nothing_of_its_prose_and_notes_it():
    notes: list[str] = []
    doc = parse_document(DOC.format(prose=GERMAN), Path("kesselbrunn.dlm"))
    assert document_facts(doc, notes) == []
    assert len(notes) == 1 and notes[0].startswith("kesselbrunn.dlm: its prose is not English")
    english = parse_document(DOC.format(prose=ENGLISH), Path("kesselbrunn.dlm"))
    quiet: list[str] = []
    assert document_facts(english, quiet) and quiet == []


def test_a_gloss_that_is_not_english_is_asked_in_its_own_words():
    assert not phrase_english("Wie lange ein Ventil höchstens offen bleiben darf, in Sekunden")
    assert phrase_english("The heaviest weight a scale reports")
    assert phrase_english("Deepest zoom level served")  # four words: too few to tell
    value = Fact("value", "kesselbrunn/ventil.py", 12, "MAX_OFFEN_SEKUNDEN", "constant", "617", "max_offen_sekunden")
    asked = phrase(value, 2, "Wie lange ein Ventil höchstens offen bleiben darf, in Sekunden.")[1]
    assert asked.question == "Wie lange ein Ventil höchstens offen bleiben darf, in Sekunden?"
    stated = phrase(value, 3, "Rohwert des Sensors bei leerem Schacht.")[2]
    assert stated.answer.endswith("is `617`: Rohwert des Sensors bei leerem Schacht.")  # the noun keeps its capital


def test_a_readme_of_mostly_code_is_judged_by_its_sentences():
    code = "\n".join(f"    retry_delay_{i} = compute_backoff(base_ms, attempt_{i}, jitter_ms)" for i in range(40))
    readme = f"# Relay\n\n{ENGLISH}\n\n```python\n{code}\n```\n\n| key | value |\n|---|---|\n| `retry_ms` | 1500 |\n"
    facts = parsed_facts("README.md", readme)
    assert isinstance(facts, list) and facts  # its sentences are English, whatever the code around them


def test_show_and_synth_say_a_german_documents_prose_asks_nothing(tmp_path: Path):
    from typer.testing import CliRunner

    from dlm.cli.main import app

    path = tmp_path / "kesselbrunn.dlm"
    path.write_text(DOC.format(prose=GERMAN))
    for command in ("show", "synth"):
        result = CliRunner().invoke(app, [command, str(path)])
        assert result.exit_code == 0, result.output
        assert "kesselbrunn.dlm: its prose is not English" in " ".join(result.stderr.split()), command
    path.write_text(DOC.format(prose=ENGLISH))
    result = CliRunner().invoke(app, ["synth", str(path)])
    assert result.exit_code == 0 and "not English" not in result.stderr
