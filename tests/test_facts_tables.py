"""Statements of Markdown tables (`dlm.rows.facts.tables`) and how the prose rules ask them."""

from __future__ import annotations

from dlm.rows.facts.language import reads_english
from dlm.rows.facts.markdown import prose_text
from dlm.rows.facts.phrasing import phrase
from dlm.rows.facts.prose import prose_facts
from dlm.rows.facts.tables import cells, row_statements

README = """# thirlby

Emails overdue-book reminders for a library.

| Option | What it does | Default |
|---|---|:---:|
| `--dry-run` | Print the reminders instead of sending them | off |
| `--from <address>` | The sender of every reminder. | `desk@hebblelane.org` |
| `--config <file>` | Settings file | `config/thirlby.json` |
| | no name | `ignored.json` |

It sends 30 emails a minute.
"""


def test_each_value_cell_is_one_statement_with_the_rows_description():
    header = ["Option", "What it does", "Default", "Since"]
    row = ["`--from <address>`", "The sender of every reminder.", "`desk@x.org`", "2.3"]
    assert row_statements(header, row) == [
        "The default of `--from <address>` is `desk@x.org` (the sender of every reminder).",
        "The since of `--from <address>` is 2.3 (the sender of every reminder).",
    ]
    assert row_statements(["Key", "Value"], ["`port`", "8080"]) == ["The value of `port` is 8080."]
    assert row_statements(["Key", "TTL", "maxAge"], ["`a`", "30 s", "-"]) == ["The TTL of `a` is 30 s."]
    # a column headed by a question is neither a value nor a description; a row needs a name
    assert row_statements(["Flag", "When to use", "Default"], ["`-v`", "debugging", "off"]) == [
        "The default of `-v` is off."
    ]
    assert row_statements(["Flag", "Default"], ["", "`x`"]) == []
    long = "Print every reminder to the terminal with its subject, its borrower and each of its books"
    assert row_statements(["Flag", "Description", "Default"], ["`-p`", long, "off"]) == ["The default of `-p` is off."]


def test_cells_split_at_pipes_outside_code_and_escapes():
    assert cells("| `a | b` | c \\| d | e |") == ["`a | b`", "c | d", "e"]
    assert cells("a | b") == ["a", "b"]


def test_a_readme_table_gives_facts_asked_like_sentences():
    facts = prose_facts("README.md", README)
    table = [f for f in facts if f.line in (7, 8, 9, 10)]
    assert {(f.line, f.name) for f in table} == {
        (8, "`--from <address>`"),
        (8, "`desk@hebblelane.org`"),
        (9, "`--config <file>`"),
        (9, "`config/thirlby.json`"),
        (7, "`--dry-run`"),
    }
    value = next(f for f in table if f.name == "`desk@hebblelane.org`")
    pair = phrase(value)[0]
    assert pair.question == "What is the default of `--from <address>`?"
    assert "(the sender of every reminder)" in pair.answer
    # the table ends what "It" can refer to: the sentence after it names nobody
    assert not [f for f in facts if f.line == 12]


def test_a_table_is_not_prose_for_the_language_test():
    assert "default of" not in prose_text(README) and "Settings file" not in prose_text(README)
    german = "Die Anlage misst den Wasserstand in jedem Becken und meldet ihn an die Leitstelle. " * 3
    rows = "".join(f"| `k{i}` | the value of it is this | `v{i}` |\n" for i in range(12))
    assert reads_english(german + "\n\n| Key | Description | Value |\n|---|---|---|\n" + rows) is False
