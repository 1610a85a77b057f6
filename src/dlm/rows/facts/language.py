"""Whether a prose text is English, the language the statement rules read.

The prose rules (`dlm.rows.facts.prose`) are English rules: a capitalised word inside a
sentence is a name, the words before the first verb are its subject, and a question is
the sentence with an English question phrase in its span's place. On German, where
every noun is capitalised, they ask about every noun in a half-English sentence ("Die
erste what lief auf einem ausgedienten Kassenrechner?"): rows of neither language, which
cost steps and teach the adapter to mix the two. So a text that does not read as
English gives no statements (`dlm.rows.facts.files.parsed_facts`,
`dlm.rows.build.document_facts`); its pairs, config values and constants are drawn as
before, since their questions are keyed by names, not by the prose's grammar.

The test is the share of a text's words that are English function words
(`ENGLISH_WORDS`: articles, auxiliaries, pronouns, prepositions and conjunctions no other
common Latin-script language writes the same way). English prose has about one such
word in four or five, German, French or Spanish prose almost none; `ENGLISH_SHARE`
lies between. Fewer than `MIN_WORDS` words (a pair's short answer) cannot tell. Only
the prose counts: code blocks, tables and code spans are left out first
(`dlm.rows.facts.markdown.prose_text`), so a README of mostly code is judged by its
sentences; `reads_english` does that itself.
"""

from __future__ import annotations

import re

ENGLISH_WORDS = frozenset(
    """the of and to is are that with for it this which from by be has have not or its
    their were been an""".split()
)
ENGLISH_SHARE = 0.08
MIN_WORDS = 20
_WORD = re.compile(r"[^\W\d_]+")  # letters of any script: `Größe` is one word


def reads_english(text: str) -> bool | None:
    """Whether `text` (prose, Markdown) reads as English by the module's test, judged on
    its prose alone (`dlm.rows.facts.markdown.prose_text`); None when that has fewer than
    `MIN_WORDS` words."""
    from dlm.rows.facts.markdown import prose_text

    words = _WORD.findall(prose_text(text))
    if len(words) < MIN_WORDS:
        return None
    return sum(w.lower() in ENGLISH_WORDS for w in words) / len(words) >= ENGLISH_SHARE


# beside `ENGLISH_WORDS`, words a short English gloss of a value has and other languages lack
_GLOSS_WORDS = ENGLISH_WORDS | frozenset("a how what when many much each every can at on".split())


def phrase_english(phrase: str) -> bool:
    """Whether a short phrase (a doc comment's gloss of a value, a few words) may be
    English: it has a word of `ENGLISH_WORDS` or of the words glosses use most, or
    fewer than five words to tell by."""
    words = [w.lower() for w in _WORD.findall(phrase)]
    return len(words) < 5 or any(w in _GLOSS_WORDS for w in words)
