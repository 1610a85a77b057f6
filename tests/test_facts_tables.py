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


def said(header: list[str], row: list[str]) -> list[str]:
    return [cell.sentence for cell in row_statements(header, row)]


def test_each_value_cell_is_one_statement_with_the_rows_description():
    header = ["Option", "What it does", "Default", "Since"]
    row = ["`--from <address>`", "The sender of every reminder.", "`desk@x.org`", "2.3"]
    assert said(header, row) == [
        "The default of `--from <address>` is `desk@x.org` (the sender of every reminder).",
        "The since of `--from <address>` is 2.3 (the sender of every reminder).",
    ]
    cell = row_statements(header, row)[0]
    assert (cell.value, cell.name) == ("`desk@x.org`", "`--from <address>`")
    assert said(["Key", "Value"], ["`port`", "8080"]) == ["The value of `port` is 8080."]
    assert said(["Key", "TTL", "maxAge"], ["`a`", "30 s", "-"]) == ["The TTL of `a` is 30 s."]
    assert said(["Encoding", "Aliases", "Status"], ["`gbk`", "`cp936`", "stable"]) == [
        "The aliases of `gbk` are `cp936`.",
        "The status of `gbk` is stable.",
    ]
    # a column headed by a question, a function word, a comma or a long phrase is neither
    # a value nor a description; a row needs a name
    header = ["Flag", "When to use", "For", "Final, or retry", "Number of the first try", "Default"]
    assert said(header, ["`-v`", "debugging", "a", "b", "c", "off"]) == ["The default of `-v` is off."]
    assert said(["Flag", "Default"], ["", "`x`"]) == []
    long = "Print every reminder to the terminal with its subject, its borrower and each of its books"
    assert said(["Flag", "Description", "Default"], ["`-p`", long, "off"]) == ["The default of `-p` is off."]


def test_reference_links_and_footnotes_keep_their_text_outside_code():
    text = "| Area | Champion |\n|---|---|\n| Primordials | [Benjamin Gruenbaum][bg] |\n"
    text += "\nThe index uses `a[i][j]` as written[^1], see [the guide][].\n"
    facts = prose_facts("strategic.md", text)
    assert [(f.name, f.answer) for f in facts if f.line == 3] == [
        ("Benjamin Gruenbaum", "The champion of Primordials is Benjamin Gruenbaum.")
    ]
    assert [f.answer for f in facts if f.line == 5] == ["The index uses `a[i][j]` as written, see the guide."]


def test_cells_split_at_pipes_outside_code_and_escapes():
    assert cells("| `a | b` | c \\| d | e |") == ["`a | b`", "c | d", "e"]
    assert cells("a | b") == ["a", "b"]


def test_a_readme_table_gives_facts_asked_like_sentences():
    facts = prose_facts("README.md", README)
    table = [f for f in facts if f.line in (7, 8, 9, 10)]
    # the values are asked, by the row's name: not the name by its value
    assert {(f.line, f.name, f.subject) for f in table} == {
        (8, "`desk@hebblelane.org`", "`--from <address>`"),
        (9, "`config/thirlby.json`", "`--config <file>`"),
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


def test_a_span_the_name_holds_too_is_not_asked_in_the_value():
    """The question replaces the span where the sentence first has it: a value span that
    the row's name holds as well would be asked in the name, so it gives nothing."""
    text = "| Area | Tool |\n|---|---|\n| `Debug` panel | `Debug` protocol |\n| Profiling | `perf` |\n"
    assert [(f.line, f.name) for f in prose_facts("tiers.md", text)] == [(4, "`perf`")]
