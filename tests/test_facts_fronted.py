"""A statement asked in a user's word order (`dlm.rows.facts.fronted`, through `asked`)."""

from __future__ import annotations

import pytest

from dlm.rows.facts.asking import asked
from dlm.rows.facts.fronted import counted_question, inverted_question
from dlm.rows.facts.prose import prose_facts


def questions(sentence: str) -> dict[str, str]:
    """Each span of `sentence` -> the question `asked` trains for it."""
    return {fact.name: asked(fact) for fact in prose_facts("README.md", sentence)}


@pytest.mark.parametrize(
    ("sentence", "span", "question"),
    [
        # a preposition moves with the question phrase; a verb in -s is asked with "does"
        ("The status page listens on port 9462.", "port 9462", "On which port does the status page listen?"),
        # "is" moves before the subject itself
        (
            "Every result is kept in /var/lib/brindle/tally.db.",
            "/var/lib/brindle/tally.db",
            "In which file is every result kept?",
        ),
        # the words between "the" and the span name what it is
        (
            "Readings are also published to the MQTT topic `brackenhold/gusts` for the dashboard.",
            "`brackenhold/gusts`",
            "To which MQTT topic are readings also published for the dashboard?",
        ),
        # the words after the span name it; an irregular past is asked with "did" and its base form
        (
            "Orla Penhallow wrote Brackenhold for the Skerrow Point lifeboat crew, who wanted gusts.",
            "Skerrow Point",
            "For which lifeboat crew did Orla Penhallow write Brackenhold?",
        ),
        # an object: the question phrase alone; a regular past by the spelling rules of -ed
        ("Ysolde Brannick created Tarnwick when the scripts failed.", "Tarnwick", "What did Ysolde Brannick create?"),
        # a first name ending in -s is a name's, not a plural's: its capital stays
        ("Idris Fenwick wrote Pellworth after a harvest.", "Pellworth", "What did Idris Fenwick write?"),
        # "every" and a number with its unit ask how often
        ("A Deckhand sends a heartbeat every 45 seconds.", "45 seconds", "How often does a Deckhand send a heartbeat?"),
        # a bare number before a plural noun asks how many of it; the clause after is the answer's
        (
            "The in-memory cache holds 8192 tiles unless the config says otherwise.",
            "8192",
            "How many tiles does the in-memory cache hold?",
        ),
        # a clause that opens the sentence ends the question
        (
            "While it runs, Tarnwick writes one line to `~/.cache/reap.log`.",
            "`~/.cache/reap.log`",
            "To which file does Tarnwick write one line while it runs?",
        ),
        # a file name written without a folder is asked as a file
        (
            "The Larder writes to `larder.sqlite3`, a SQLite database.",
            "`larder.sqlite3`",
            "To which file does the Larder write?",
        ),
    ],
)
def test_the_question_phrase_comes_first(sentence: str, span: str, question: str) -> None:
    assert questions(sentence)[span] == question


@pytest.mark.parametrize(
    ("sentence", "span", "echo"),
    [
        # the span inside a relative clause on an object, not on the predicate of "is"
        (
            "Teodora Quill wrote the relay that billing calls at Marrowgate Freight.",
            "Marrowgate Freight",
            "Teodora Quill wrote the relay that billing calls at what?",
        ),
        # a span that is part of a longer word moves nothing
        (
            "The poller waits 30 seconds-ish between rounds.",
            "30 seconds",
            "The poller waits how many seconds-ish between rounds?",
        ),
        # a span inside the predicate noun of "is"
        (
            "Ferry is a task queue written by the Lighthouse team.",
            "Lighthouse",
            "Ferry is a task queue written by which team?",
        ),
        # a verb the rules do not know after a capitalised first word: no subject found
        (
            "Load balancers check health at `/lf/healthz`.",
            "`/lf/healthz`",
            "Load balancers check health at which path?",
        ),
        # "of" belongs to the noun before it, and the span sits inside a noun phrase
        (
            "Tarnwick is the harvester of the Copperleaf newsroom.",
            "Copperleaf",
            "Tarnwick is the harvester of which newsroom?",
        ),
    ],
)
def test_a_sentence_the_rules_do_not_read_keeps_its_echo_question(sentence: str, span: str, echo: str) -> None:
    assert questions(sentence)[span] == echo


@pytest.mark.parametrize(
    ("sentence", "span", "question"),
    [
        # the gap is the clause's object: its subject opens it, the sentence's subject fills the gap
        (
            "Lanternfish is the webhook relay that Teodora Quill built at Marrowgate Freight so billing stops.",
            "Marrowgate Freight",
            "Where did Teodora Quill build Lanternfish?",
        ),
        (
            "Lanternfish is the webhook relay that Teodora Quill built at Marrowgate Freight so billing stops.",
            "Teodora Quill",
            "Who built Lanternfish at Marrowgate Freight?",
        ),
        # the gap is the clause's subject: a verb opens it
        (
            "Saltmarsh is the tile cache that serves the tiles under `/tiles` for every client.",
            "`/tiles`",
            "Under which path does Saltmarsh serve the tiles for every client?",
        ),
    ],
)
def test_a_span_in_a_relative_clause_is_asked_of_the_clause_restated(sentence: str, span: str, question: str) -> None:
    assert questions(sentence)[span] == question


def test_a_name_then_a_verb_the_lists_lack_is_a_subject_where_an_object_follows() -> None:
    assert (
        questions("Saltmarsh exports Prometheus metrics under `/saltmetrics`.")["`/saltmetrics`"]
        == "Under which path does Saltmarsh export Prometheus metrics?"
    )
    assert (
        questions("Tarnwick polls every feed at `/feeds`.")["`/feeds`"]
        == "At which path does Tarnwick poll every feed?"
    )
    # no name opens it: an adverb, a determiner
    assert questions("Synchronously copies `src` to `dest`.")["`dest`"] == "Synchronously copies `src` to what?"
    assert questions("The parameters `env` and `exports` are given.")["`exports`"] == (
        "The parameters `env` and what are given?"
    )


def test_the_subject_as_asked_keeps_a_proper_name_and_lowers_a_common_one() -> None:
    assert questions("Feeds are parsed by `read_entries`.")["`read_entries`"] == "By what are feeds parsed?"
    assert (
        questions("Ferry reads its settings from `~/.ferryrc`.")["`~/.ferryrc`"]
        == "From which path does Ferry read its settings?"
    )
    assert questions("Node.js reads its settings from `~/.noderc`.")["`~/.noderc`"] == (
        "From which path does Node.js read its settings?"
    )


@pytest.mark.parametrize(
    ("gloss", "question"),
    [
        (
            "where evicted tiles are written so a restart is warm",
            "where are evicted tiles written so a restart is warm",
        ),
        ("How long a request to the upstream may take", "How long may a request to the upstream take"),
        # the subject starts at the last article no preposition precedes
        ("How many bytes of a body a check reads", "How many bytes of a body does a check read"),
        ("How many times a second the anemometer is read", "How many times a second is the anemometer read"),
        # a plural before the subject is not its verb; the verb is looked for in the first clause only
        (
            "How many readings the ring holds before the oldest is overwritten",
            "How many readings does the ring hold before the oldest is overwritten",
        ),
        # nothing the rule reads: unchanged
        ("How many readings sent in one batch", "How many readings sent in one batch"),
    ],
)
def test_a_gloss_that_asks_is_asked_as_a_direct_question(gloss: str, question: str) -> None:
    assert inverted_question(gloss) == question


def test_a_gloss_that_counts_asks_how_many_first() -> None:
    assert counted_question("Deliveries are retried this many times before X") == (
        "How many times are deliveries retried before X"
    )
    assert counted_question("Wait this many seconds") is None  # no subject: the caller keeps "Wait how many seconds"
