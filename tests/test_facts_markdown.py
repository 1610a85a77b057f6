"""Markdown read block by block (`dlm.rows.facts.markdown`): list items as sentences, code
spans kept as written."""

from __future__ import annotations

from dlm.rows.facts.asking import asked
from dlm.rows.facts.markdown import clean
from dlm.rows.facts.prose import prose_facts

LIST = """Options and files:

- Logs are kept for 30 days
- `--port`: the port to listen on (default 8080)
- `--dry-run`: print the reminders instead of sending them
- `lib/swarm.mjs`: `detectSwarm` and the alert text

Logs are rotated every 12 hours
"""


def answers(text: str) -> dict[int, set[str]]:
    found: dict[int, set[str]] = {}
    for fact in prose_facts("README.md", text):
        found.setdefault(fact.line, set()).add(fact.answer)
    return found


def test_a_list_item_without_a_full_stop_is_a_sentence():
    facts = [f for f in prose_facts("README.md", LIST) if f.line == 3]
    assert [(f.name, f.answer) for f in facts] == [("30 days", "Logs are kept for 30 days.")]
    assert asked(facts[0]) == "For how many days are logs kept?"


def test_a_code_span_defined_by_a_noun_phrase_is_said_to_be_it():
    got = answers(LIST)
    assert got[4] == {"`--port` is the port to listen on (default 8080)."}
    assert got[6] == {"`lib/swarm.mjs` holds `detectSwarm` and the alert text."}
    port = next(f for f in prose_facts("README.md", LIST) if f.name == "`--port`")
    assert asked(port) == "What is the port to listen on (default 8080)?"


def test_a_definition_by_a_verb_and_a_paragraph_without_a_full_stop_state_nothing():
    got = answers(LIST)
    assert 5 not in got  # "print the ...": no sentence to end
    assert 8 not in got  # a paragraph, not a list item: it ends as written


def test_only_a_list_item_that_reads_as_a_sentence_is_ended():
    """A changelog's entries and phrases have no subject to state anything about; a
    definition by anything but a determiner or a code span is not rewritten."""
    text = "- [`f6a6638`] - build: test on CI #29474\n- Python 3.10 or newer\n"
    text += "- `CERT_HAS_EXPIRED`: Certificate has expired\n- `[in] env`: The environment of the call\n"
    got = answers(text)
    assert set(got) == {4}
    assert got[4] == {"`[in] env` is the environment of the call."}


def test_a_code_span_keeps_its_bytes_where_emphasis_and_links_go():
    """`__` and `*` inside a code span are its text, not emphasis (CommonMark): a dunder
    file or a glob is stated as written, while the emphasis and links around it go."""
    text = "The **registry** lives in `plugins/__init__.py` and scans [`**/*.py`](docs/globs.md) files.\n"
    assert answers(text)[1] == {"The registry lives in `plugins/__init__.py`.", "The registry scans `**/*.py` files."}
    assert clean("_`--seed`_ sets the seed[^1] of `a_b*c`.") == "`--seed` sets the seed of `a_b*c`."
