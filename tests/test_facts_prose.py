"""Statements drawn from prose (`dlm.rows.facts.prose`): sentences, pronouns, spans."""

from __future__ import annotations

from dlm.rows.facts.files import parsed_facts
from dlm.rows.facts.model import Fact
from dlm.rows.facts.phrasing import phrase, probe_keys
from dlm.rows.facts.prose import prose_facts, spans

README = """# Ferry

Ferry is a small file-sync daemon. It listens on port 8080 by default.
Start it with `ferry serve --config ferry.yaml`.

```sh
ferry serve
```

- The journal rotates every 30 minutes.
"""


def test_a_readme_paragraph_gives_its_port_and_command():
    assert prose_facts("README.md", README) == [
        Fact("statement", "README.md", 3, "port 8080", "number", "Ferry listens on port 8080 by default.", "ferry"),
        Fact(
            "statement",
            "README.md",
            4,
            "`ferry serve --config ferry.yaml`",
            "command",
            "Start it with `ferry serve --config ferry.yaml`.",
            "start it with `ferry serve --config ferry.yaml`.",
        ),
        Fact(
            "statement",
            "README.md",
            10,
            "30 minutes",
            "number",
            "The journal rotates every 30 minutes.",
            "the journal",
        ),
    ]


def test_a_statement_is_asked_in_its_own_words_about_its_subject_and_as_a_blank():
    fact = prose_facts("README.md", README)[0]
    assert [(p.question, p.answer) for p in phrase(fact)] == [
        ("On which port does Ferry listen by default?", "port 8080. Ferry listens on port 8080 by default."),
        ("What do you know about Ferry?", "Ferry listens on port 8080 by default."),
        ("Fill in the blank (number): Ferry listens on ___ by default.", "port 8080"),
        (
            'According to `README.md`, what completes this: "Ferry listens on ___ by default."?',
            "port 8080. Ferry listens on port 8080 by default.",
        ),
    ]
    assert probe_keys(fact) == ("port 8080",)
    command = prose_facts("README.md", README)[1]
    assert probe_keys(command) == ("ferry serve --config ferry.yaml",)  # the span without its backticks


def test_the_question_phrase_follows_the_spans_kind():
    from dlm.rows.facts.asking import asked
    from dlm.rows.facts.model import Fact
    from dlm.rows.facts.phrasing import topic

    def statement(span: str, what: str, sentence: str, subject: str = "the larder") -> Fact:
        return Fact("statement", "README.md", 1, span, what, sentence, subject)

    larder = "The Larder keeps the newest 240 entries of each feed."
    assert (
        asked(statement("240 entries", "number", larder))
        == "The Larder keeps the newest how many entries of each feed?"
    )
    assert asked(statement("`larder.db`", "path", "It writes `larder.db` daily.")) == "It writes which file daily?"
    assert asked(statement("`tarnwick reap`", "command", "Start with `tarnwick reap`.")) == "Start with which command?"
    assert (
        asked(statement("`tarnwick list`", "command", "`tarnwick list` prints feeds.")) == "Which command prints feeds?"
    )
    # the question phrase first, as a user asks (`dlm.rows.facts.fronted`)
    assert asked(statement("Quill", "name", "Teodora wrote it with Quill.")) == "With what did Teodora write it?"
    assert asked(statement("Ysolde Brannick", "name", "Ysolde Brannick wrote Tarnwick.")) == "Who wrote Tarnwick?"
    # as the sentence writes it, but for the capital the sentence's start gave its determiner
    assert topic(statement("240 entries", "number", larder)) == "the Larder"
    health = "The health check is at `/lf/healthz`."
    assert asked(statement("`/lf/healthz`", "path", health, "the health check")) == "At which path is the health check?"
    assert asked(statement("`/lf/healthz`", "path", health, "the health check"), trim=False) == (
        "The health check is at which path?"
    )
    assert asked(statement("`docs/`", "path", "Notes live in `docs/`.")) == "In which folder do notes live?"
    # no short subject: the sentence's first other code span, else the file
    whole = "start with `tarnwick reap` after `tarnwick list`."
    assert topic(statement("`tarnwick list`", "command", whole.capitalize(), subject=whole)) == "`tarnwick reap`"


def test_a_pronoun_takes_the_previous_sentences_subject():
    text = (
        "The sync engine uses SQLite for its index. It stores the index in `state.db`.\n\n"
        "They retry 5 times.\n\nThis keeps 64 MB of journal under `/var/lib/ferry`.\n"
    )
    got = [(f.name, f.answer, f.subject) for f in prose_facts("docs/engine.md", text)]
    assert got == [
        ("SQLite", "The sync engine uses SQLite for its index.", "the sync engine"),
        ("`state.db`", "The sync engine stores the index in `state.db`.", "the sync engine"),
        # "They": the previous sentence's subject, carried on: the engine
        ("5 times", "The sync engine retry 5 times.", "the sync engine"),
        ("64 MB", "The sync engine keeps 64 MB of journal under `/var/lib/ferry`.", "the sync engine"),
        ("`/var/lib/ferry`", "The sync engine keeps 64 MB of journal under `/var/lib/ferry`.", "the sync engine"),
    ]


def test_a_pronoun_with_no_subject_before_it_gives_nothing():
    text = "# Setup\n\nIt listens on port 8080.\n\nRun `make` first. It takes 10 minutes.\n"
    assert prose_facts("SETUP.md", text) == [
        Fact("statement", "SETUP.md", 5, "`make`", "identifier", "Run `make` first.", "run `make` first.")
    ]


def test_salient_spans_by_kind():
    assert spans("Logs go to /var/log/ferry.log and https://ferry.dev/docs, see docs/setup.md.") == [
        ("path", "/var/log/ferry.log"),
        ("URL", "https://ferry.dev/docs"),
        ("path", "docs/setup.md"),
    ]
    assert spans("Peers talk over gRPC and TLS with `dial_peer` for and/or 64 KiB.") == [
        ("name", "gRPC"),
        ("name", "TLS"),
        ("identifier", "`dial_peer`"),
    ]
    assert spans("It is a tool for the team.") == []  # no span: no fact
    # a name or a number is a whole word, never the part of a longer one
    assert spans("It runs on Node.js through Node-API, after CVE-2016-0702, in LFM2.5 with SHA384.") == [
        ("name", "SHA384")
    ]
    assert spans("The library is plain C++20 with no dependencies.") == []


def test_a_code_span_that_only_starts_with_a_dot_is_no_count():
    (fact,) = prose_facts("design.md", "Volume files end in `.qmvol` on every disk.\n")
    assert phrase(fact)[0].question == "Volume files end in what on every disk?"


def test_questions_code_and_tables_give_no_statement():
    text = "Does it listen on port 8080?\n\n| key | port 9090 |\n\n    port 7070 in code.\n"
    assert prose_facts("NOTES.md", text) == []


def test_the_first_line_shifts_a_document_sections_lines():
    facts = prose_facts("ferry.dlm", "Intro.\n\nFerry listens on port 8080.\n", first_line=12)
    assert [f.line for f in facts] == [14]


def test_text_files_are_read_and_licences_are_not():
    assert parsed_facts("docs/notes.txt", "Ferry keeps 64 MB of journal.\n")[0].name == "64 MB"  # type: ignore[index]
    assert parsed_facts("LICENSE.txt", "Ferry keeps 64 MB of journal.\n") == []
    assert parsed_facts("requirements.txt", "numpy>=1.26\n") == []


def test_a_clause_after_a_semicolon_is_its_own_statement_and_names_what_it_refers_to():
    text = (
        "Tarnwick is the feed harvester of the Copperleaf newsroom; Ysolde Brannick started it\n"
        "when the old cron scripts kept missing court listings. It polls every 900 seconds.\n"
    )
    got = [(f.name, f.answer, f.subject) for f in prose_facts("notes.md", text)]
    started = "Ysolde Brannick started Tarnwick when the old cron scripts kept missing court listings."
    assert got == [
        ("Copperleaf", "Tarnwick is the feed harvester of the Copperleaf newsroom.", "tarnwick"),
        ("Ysolde Brannick", started, "tarnwick"),  # a whole name, `it` written out
        ("Tarnwick", started, "tarnwick"),
        # the thing stays what a later pronoun refers to, not the person
        ("900 seconds", "Tarnwick polls every 900 seconds.", "tarnwick"),
    ]
    who = next(f for f in prose_facts("notes.md", text) if f.name == "Ysolde Brannick")
    assert phrase(who, 1)[0].question == "Who started Tarnwick?"  # the trailing clause is not asked
    assert prose_facts("notes.md", text)[1].line == 1  # the clause's own line


def test_a_name_at_the_start_is_a_span_only_as_a_run_without_a_determiner():
    assert spans("Casimir Oduya wrote the first version.") == [("name", "Casimir Oduya")]
    assert spans("The Larder keeps 240 entries.") == [("number", "240 entries")]
    assert spans("The team reads them in the #brindle-howl channel, not issue #12.") == [("name", "#brindle-howl")]
    assert spans("Feeds are parsed by Teodora Quill at Marrowgate Freight.") == [
        ("name", "Teodora Quill"),
        ("name", "Marrowgate Freight"),
    ]


def test_a_line_opening_with_a_tag_is_text_not_a_heading():
    text = "The on-call team reads them in the\n#brindle-howl channel.\n\n#Not a heading either\n\n# Heading\n"
    assert [f.name for f in prose_facts("README.md", text)] == ["#brindle-howl"]


def test_a_question_drops_the_clause_after_what_it_asks_but_a_fragment_keeps_it():
    from dlm.rows.facts.asking import asked
    from dlm.rows.facts.model import Fact

    def statement(span: str, what: str, sentence: str, subject: str) -> Fact:
        return Fact("statement", "README.md", 1, span, what, sentence, subject)

    built = "Teodora Quill wrote the relay that billing calls at Marrowgate so billing stops calling us."
    assert asked(statement("Marrowgate", "name", built, "teodora quill")) == (
        "Teodora Quill wrote the relay that billing calls at what?"
    )
    # what comes before the question phrase stays, and so does everything without a cut
    health = "Load balancers check `/healthz`, which answers 200 while the relay is up."
    assert asked(statement("200", "number", health, "load balancers")) == (
        "Load balancers check `/healthz`, which answers what number?"
    )
    listed = "Saltmarsh exports Prometheus metrics under `/m`: hits, misses and spills."
    assert asked(statement("Prometheus", "name", listed, "saltmarsh")) == "Saltmarsh exports what metrics under `/m`?"
    # a boundary inside backticks or brackets is not one
    quoted = "The harvester calls Quill with `reap, then list` (each round, when due) daily."
    assert asked(statement("Quill", "name", quoted, "the harvester")) == (
        "What does the harvester call with `reap, then list`?"
    )
    assert asked(statement("Quill", "name", quoted, "the harvester"), trim=False) == (
        "The harvester calls what with `reap, then list` (each round, when due) daily?"
    )
    fragment = "Every 75 seconds, unless the paddock sets its own interval."
    assert asked(statement("75 seconds", "number", fragment, fragment.casefold())) == (
        "Every how many seconds, unless the paddock sets its own interval?"
    )
    assert asked(statement("Marrowgate", "name", built, "teodora quill"), trim=False).endswith("stops calling us?")


def test_a_statement_about_nothing_nameable_is_asked_to_be_completed_instead():
    from dlm.rows.facts.phrasing import phrase, topic

    facts = prose_facts("README.md", "At most 2200 milliseconds pass.\n")
    assert [topic(f) for f in facts] == [None]  # an adverbial
    second = phrase(facts[0], 2)[1]
    assert second.question == 'According to `README.md`, what completes this: "At most ___ milliseconds pass."?'
    assert "What do you know about" not in " ".join(p.question for f in facts for p in phrase(f, 4))
    assert [len(phrase(f, 4)) for f in facts] == [3]  # no question about an empty topic


def test_a_sentence_announcing_a_list_states_what_comes_before_its_colon():
    text = "Saltmarsh exports Prometheus metrics under `/saltmetrics`:\n\n- `tile_hits`\n\nThe steps are:\n\n- build\n"
    assert [(f.name, f.answer) for f in prose_facts("docs/operations.md", text)] == [
        ("Prometheus", "Saltmarsh exports Prometheus metrics under `/saltmetrics`."),
        ("`/saltmetrics`", "Saltmarsh exports Prometheus metrics under `/saltmetrics`."),
    ]  # "The steps are:" has no span: no fact


def test_a_place_or_a_clause_before_the_verb_is_no_subject_and_no_question_is_its_phrase_alone():
    from dlm.rows.facts.asking import asked

    facts = prose_facts("notes.dlm", "In `ring.c`: `bh_ring_push` adds a reading.\n")
    assert {f.subject for f in facts} == {"in `ring.c`: `bh_ring_push` adds a reading."}  # no subject: the sentence
    assert [asked(f) for f in facts] == [
        "In which file: `bh_ring_push` adds a reading?",
        "In `ring.c`: what adds a reading?",
    ]  # not "In what?": nothing is cut from a sentence without a subject
    device = prose_facts("notes.dlm", "`/dev/ttyAMA0` names the device, unless `bh.ini` names another.\n")
    assert device[0].subject == "`/dev/ttyama0`"  # casefolded
    # the clause after the question phrase would leave "Which path?": it stays
    assert asked(device[0]) == "Which path names the device?"
    alone = Fact(
        "statement",
        "n.dlm",
        1,
        "`/dev/ttyAMA0`",
        "path",
        device[0].answer.replace(" names the device", ""),
        "`/dev/ttyAMA0`",
    )
    assert asked(alone) == "Which path, unless `bh.ini` names another?"


def test_predicates_joined_by_and_are_stated_one_each_with_the_subject():
    text = (
        "The `SlotLedger` class hands out slots of 30 minutes and holds an unconfirmed booking\n"
        "for 45 minutes. A `Harvester`, defined in `harvest.py`, walks the feeds every 900 seconds\n"
        "and gives each feed 14 seconds to answer.\n"
    )
    got = [(f.name, f.answer, f.subject) for f in prose_facts("notes.md", text)]
    slots = "The `SlotLedger` class hands out slots of 30 minutes."
    hold = "The `SlotLedger` class holds an unconfirmed booking for 45 minutes."
    walks = "A `Harvester`, defined in `harvest.py`, walks the feeds every 900 seconds."
    gives = "A `Harvester`, defined in `harvest.py`, gives each feed 14 seconds to answer."
    whole = "A `Harvester`, defined in `harvest.py`, walks the feeds every 900 seconds and gives each feed 14 seconds to answer."
    assert got == [
        ("`SlotLedger`", slots, "the `slotledger` class"),
        ("30 minutes", slots, "the `slotledger` class"),
        ("`SlotLedger`", hold, "the `slotledger` class"),
        ("45 minutes", hold, "the `slotledger` class"),
        # no subject before the verb (a clause between commas): both halves keep the sentence as their unit
        ("`Harvester`", walks, whole.casefold()),
        ("`harvest.py`", walks, whole.casefold()),
        ("900 seconds", walks, whole.casefold()),
        ("`Harvester`", gives, whole.casefold()),
        ("`harvest.py`", gives, whole.casefold()),
        ("14 seconds", gives, whole.casefold()),
    ]
    # each number is asked in a statement that holds no other
    assert [p.answer for p in phrase(got_fact(text, "45 minutes"), 1)] == [f"45 minutes. {hold}"]


def test_the_last_predicate_keeps_the_sentences_end():
    said = "Tarnwick polls every 900 seconds and keeps the newest 240 entries!"
    assert [f.answer for f in prose_facts("notes.md", said)][-1] == "Tarnwick keeps the newest 240 entries!"


def test_and_before_a_noun_or_a_part_without_a_span_does_not_split():
    for sentence in (
        "Tarnwick copies files and directories to `/var/backup`.",  # "directories": no object follows
        "Tarnwick reads RSS 2.0 and Atom.",
        "The Larder keeps the newest 240 entries and drops the rest after every write.",  # no span after `and`
    ):
        assert {f.answer for f in prose_facts("notes.md", sentence)} == {sentence}


def got_fact(text: str, name: str) -> Fact:
    return next(f for f in prose_facts("notes.md", text) if f.name == name)


def test_a_possessive_joins_a_name_to_a_capitalised_run_and_is_asked_whose_before_a_noun():
    text = (
        "Wendeline Ashcombe wrote Quillmoor for the muniment room of St Odrenna's College.\n\n"
        "The pending segment is folded into Quillmoor\u2019s main segment every night.\n"
    )
    assert spans("It was written for the muniment room of St Odrenna's College.") == [("name", "St Odrenna's College")]
    asked = {f.name: phrase(f)[0].question for f in prose_facts("x.md", text)}
    assert asked["St Odrenna's College"] == "Wendeline Ashcombe wrote Quillmoor for the muniment room of what?"
    assert asked["Quillmoor"] == "The pending segment is folded into whose main segment every night?"
    assert all("what's" not in q and "what\u2019s" not in q for q in asked.values())


def test_a_trailing_relative_clause_goes_with_its_preposition():
    text = "Wrenfield began after a wet June in which three swarms left unnoticed.\n"
    asked = [phrase(f)[0].question for f in prose_facts("x.md", text)]
    assert "Wrenfield began after a wet what?" in asked
    assert not any(q.endswith(" in?") for q in asked)


def test_a_plural_noun_before_an_auxiliary_is_part_of_the_subject():
    facts = prose_facts("x.md", "The first scales were set up at the apiary in Quenby Bottom.\n")
    assert {f.subject for f in facts} == {"the first scales"}
    assert phrase(facts[0])[1].question == "What do you know about the first scales?"


def test_it_names_the_previous_subject_only_as_the_verbs_object():
    text = (
        "Each hive stands on a scale.\n"
        "Wrenfield texts the keeper at Quenby Bottom when a hive looks as if it has swarmed.\n\n"
        "The relay daemon forwards events.\nYsolde Brannick wrote it in 2019.\n"
    )
    answers = {f.answer for f in prose_facts("x.md", text)}
    assert "Ysolde Brannick wrote the relay daemon in 2019." in answers  # lowercase mid-sentence
    assert any("looks as if it has swarmed" in a for a in answers)  # another noun's `it` is kept
    assert not any("Each hive has swarmed" in a for a in answers)


def test_a_possessive_or_an_adverb_ending_in_s_is_no_verb():
    from dlm.rows.facts.prose import sentence_subject

    # "its" read as a verb made "Add a gauge by listing" a subject to ask about
    imperative = prose_facts("README.md", "Add a gauge by listing its name and address under `gauges` in the file.\n")
    assert {f.subject for f in imperative} == {imperative[0].answer.casefold()}  # no subject: the sentence
    assert "What do you know about" not in " ".join(p.question for f in imperative for p in phrase(f, 4))
    checked = "A paddock without its own interval is checked every 75 seconds."
    assert sentence_subject(checked) == "A paddock without its own interval"
    assert sentence_subject("The relay always retries a failed call.") == "The relay"  # not "The relay always"
    assert sentence_subject("The relay forwards events.") == "The relay"  # "forwards" is a verb


def test_a_plural_noun_after_a_number_is_no_verb():
    from dlm.rows.facts.phrasing import topic
    from dlm.rows.facts.prose import sentence_subject

    assert sentence_subject("Every 75 seconds (`PollIntervalSeconds`).") is None  # not "Every 75"
    assert sentence_subject("The daemon keeps 64 files open.") == "The daemon"
    assert sentence_subject("Up to 3217 folios (`SLOTS`) are kept in memory.") == "Up to 3217 folios (`SLOTS`)"
    # a bound is no topic: a question about the sentence asks about its other code span
    bound = prose_facts("design.md", "Up to 3217 folios (`SLOTS`) are kept in memory.\n")
    assert [(f.name, topic(f)) for f in bound] == [("3217", "`SLOTS`"), ("`SLOTS`", None)]


def test_a_plural_noun_inside_a_prepositional_phrase_is_no_verb():
    from dlm.rows.facts.phrasing import topic
    from dlm.rows.facts.prose import sentence_subject

    # "microscopes" read as a verb made "Fernhollow books time on the shared" a topic
    booked = "Fernhollow books time on the shared microscopes of the Aldmoor imaging lab."
    assert sentence_subject(booked) is None
    assert [topic(f) for f in prose_facts("README.md", booked + "\n")] == [None]
    assert sentence_subject("The list of feeds polls every hour.") == "The list of feeds"
    grouped = prose_facts("README.md", "A group of targets forms a Paddock.\n")
    assert [topic(f) for f in grouped] == ["a group of targets"]  # not "A group of", a fragment
    assert sentence_subject("The relay forwards events to the consumers.") == "The relay"


def test_a_time_before_the_subject_is_no_part_of_the_topic():
    from dlm.rows.facts.phrasing import topic

    facts = prose_facts("wrenfield.md", "Each morning Wrenfield writes a digest to `digest.txt`.\n")
    assert [f.name for f in facts] == ["Wrenfield", "`digest.txt`"]
    assert [topic(f) for f in facts] == ["Wrenfield", "Wrenfield"]  # not "each morning Wrenfield"
    assert phrase(facts[1], 2)[1].question == "What do you know about Wrenfield?"


def test_a_sentence_in_another_language_is_asked_to_be_completed_not_about_its_subject():
    from dlm.rows.facts.phrasing import topic

    german = prose_facts("README.md", "Jeder Pegelalarm und jedes geschlossene Ventil landet im Ordner `alarme/`.\n")
    assert german and [topic(f) for f in german] == [None] * len(german)
    assert "What do you know about" not in " ".join(p.question for f in german for p in phrase(f, 4))
