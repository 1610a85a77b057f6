"""Prose recast as Q/A pairs (dlm.rows.recast)."""

from dlm.rows.recast import recast_pairs, sentences, topic_of

PROSE = """# Ferry

Ferry is a small task queue written by the Lighthouse team. Producers put tasks on a
Dock. Ferry reads its settings from `~/.ferryrc` when the file exists! Too short here.

```python
x = 1. Not a sentence to ask about.
```

- A list item with enough words in it.
"""


def test_sentences_leave_out_code_headings_and_short_ones() -> None:
    assert list(sentences(PROSE)) == [
        "Ferry is a small task queue written by the Lighthouse team.",
        "Producers put tasks on a Dock.",
        "Ferry reads its settings from `~/.ferryrc` when the file exists!",
        "A list item with enough words in it.",
    ]


def test_each_sentence_becomes_a_cloze_pair_about_the_topic() -> None:
    pairs = recast_pairs(PROSE, topic_of(PROSE) or "this project")
    assert pairs[0] == (
        "Complete this statement about Ferry: Ferry is a small task ...",
        "Ferry is a small task queue written by the Lighthouse team.",
    )
    assert len(pairs) == 4
    assert recast_pairs(PROSE, "Ferry") == pairs  # a pure function of the text


def test_no_heading_no_topic() -> None:
    assert topic_of("plain text only") is None


def test_sentences_are_not_cut_in_code_spans_after_abbreviations_or_through_tables() -> None:
    prose = """# Ferry

Call `ferry.run(). Then ferry.stop()` to run one task and stop. Some stores, e.g. SQLite and
Redis, keep the queue between runs. The third sentence is here.

| setting | meaning. Of a table |
|---|---|
| `retries` | How many times. A task is retried |
"""
    assert list(sentences(prose)) == [
        "Call `ferry.run(). Then ferry.stop()` to run one task and stop.",
        "Some stores, e.g. SQLite and Redis, keep the queue between runs.",
        "The third sentence is here.",
    ]
