"""Echo questions (`dlm.rows.facts.asking.asked`) for sentences the fronting rules do
not read: the question phrase takes in the words around the span that belong to it."""

from __future__ import annotations

from dlm.rows.facts.asking import asked
from dlm.rows.facts.phrasing import topic
from dlm.rows.facts.prose import prose_facts, spans


def questions(text: str) -> dict[str, str]:
    """{span: its echo question} over the statements of one Markdown paragraph."""
    return {fact.name: asked(fact) for fact in prose_facts("README.md", text + "\n")}


def test_a_name_after_the_is_asked_with_which_and_the_words_naming_it():
    assert questions("Corrieford keeps an eye on the river gauges of the Lenn valley.")["Lenn"] == (
        "Corrieford keeps an eye on the river gauges of which valley?"
    )
    assert questions("The `Gauge` type is defined in `ingest/gauge.go`.")["`Gauge`"] == (
        "Which type is defined in `ingest/gauge.go`?"
    )
    assert questions("The `stage_readings` table, written by `Store.Save`.")["`stage_readings`"] == (
        "Which table, written by `Store.Save`?"
    )
    assert questions("Set `level` in the `log` table of `q.toml` to see each fold.")["`log`"] == (
        "Set `level` in which table of `q.toml` to see each fold?"
    )


def test_a_span_that_is_a_clauses_subject_keeps_its_echo_question():
    # the words after the span are a verb or an adverb: "which" would not ask for it
    assert questions("Writes go through the `TTY` currently attached.")["`TTY`"] == (
        "Writes go through the what currently attached?"
    )
    assert questions("If `input` is absolute, the `base` is ignored.")["`base`"] == (
        "If `input` is absolute, the what is ignored?"
    )
    # no noun after the span: nothing to ask "which" of
    assert questions("Failed events end up in the `Morgue`.")["`Morgue`"] == "Failed events end up in the what?"


def test_a_bare_number_before_a_plural_is_counted():
    assert (
        questions("Above 3180 millimetres (`FloodStageMM`).")["3180"] == "Above how many millimetres (`FloodStageMM`)?"
    )
    assert questions("A Dock holds at most 64 tasks by default.")["64"] == (
        "A Dock holds at most how many tasks by default?"
    )
    assert questions("After every 40 added folios (`FOLD_EVERY`).")["40"] == (
        "After every how many added folios (`FOLD_EVERY`)?"
    )
    # a name's version, a preposition or a `-ss`/`-us` word after the number: no count
    assert questions("Ferry 15 comes with a new scheduler.")["15"] == "Ferry what number comes with a new scheduler?"
    assert (
        questions("Node.js 15 comes with a new scheduler.")["15"] == "Node.js what number comes with a new scheduler?"
    )
    assert questions("Read issue 1234 for details.")["1234"] == "Read issue what number for details?"
    # "status" and "address" end in `s` but are no plurals; the fronted question counts the same way
    assert questions("The relay maps 12 status codes.")["12"] == "How many status codes does the relay map?"
    assert questions("The relay sends 12 address lists.")["12"] == "How many address lists does the relay send?"
    assert questions("The relay maps 12 status.")["12"] == "The relay maps what number status?"


def test_a_number_with_thousands_separators_is_one_span():
    assert spans("In the example, 30,000 deflate instances are created.") == [("number", "30,000")]
    assert spans("The relay keeps 4096 rows, or 1,2,3 pages.") == [("number", "4096 rows")]  # no list of digits
    fact = prose_facts("README.md", "In the example, 30,000 deflate instances are created.\n")[0]
    assert asked(fact) == "In the example, how many deflate instances are created?"


def test_a_subordinator_opens_no_topic():
    # "Although Windows" is neither a proper name nor what the sentence is about
    facts = prose_facts("README.md", "Although Windows has no `fork`, the relay runs there with `spawn`.\n")
    assert facts and all(topic(f) != "Although Windows" for f in facts)


def test_a_word_in_s_that_opens_an_object_is_the_verb_not_what_the_name_modifies():
    sentence = "Ostwick prints the timetables that the Fennick Valley Bus Cooperative pins to its stops."
    assert questions(sentence)["Fennick Valley Bus Cooperative"].endswith("that the what pins to its stops?")
    assert questions("Failures show in the Windows tests, the problems with CI aside.")["Windows"] == (
        "Failures show in which tests, the problems with CI aside?"
    )


def test_restructuredtext_literals_clock_times_and_urls_in_code_spans():
    rst = "Ostwick\n=======\n\nInstall it with ``pip install -e .`` in a fresh environment.\n\n.. note::\n"
    (install,) = prose_facts("README.rst", rst)
    assert (install.name, asked(install)) == (
        "`pip install -e .`",
        "Install it with which command in a fresh environment?",
    )
    (start,) = prose_facts("README.md", "A service day starts at 04:30.\n")
    assert (start.name, asked(start)) == ("04:30", "At what time does a service day start?")
    (link,) = prose_facts("README.md", "Each timetable links to `https://buses.example.org/live` for riders.\n")
    assert (link.what, asked(link)) == ("URL", "To which URL does each timetable link for riders?")
