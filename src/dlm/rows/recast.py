"""Prose recast as Q/A pairs, so a fact written only in prose can be asked.

A small model trained on a prose paragraph learns to continue the paragraph, not to
answer a question about it in chat form (docs/benchmarks.md, "Recipe sweep"). With
`training.recast`, each sentence of a prose section therefore also becomes one
instruction pair:

    Q: Complete this statement about <topic>: <first half of the sentence> ...
    A: <the whole sentence>

`<topic>` is the section's heading (its first `# ` line, without the `#`), else the
document's first heading, else "this project". The first half is the first
`max(2, n // 2)` words. Sentences are split at `. `, `! ` and `? ` before a capital, a
digit, a quote, a backtick or a parenthesis, never inside a code span (an odd number of
backticks before the cut) nor after an abbreviation (`e.g.`, `i.e.`, `etc.`, `vs.`,
`cf.`, `Mr.`, `Dr.`, `Fig.`, `No.`); fenced code blocks, table rows (lines starting with
`|`), headings, list markers and sentences of fewer than 4 words are left out.
Deterministic: the pairs are a pure function of the prose text.

Off by default: on `examples/ferry.dlm` it taught next to none of the facts that sit
only in prose and cost paraphrases of the document's own pairs (docs/benchmarks.md,
"Recipe sweep"), since its sentences are instruction examples the recipe repeats too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

MIN_WORDS = 4
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(])")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ABBREV = re.compile(r"(?:^|[\s(])(?:e\.g|i\.e|etc|vs|cf|mr|mrs|dr|fig|no|approx)\.$", re.IGNORECASE)


def topic_of(text: str) -> str | None:
    """The section's heading text, or None."""
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip() or None
    return None


def sentences(text: str) -> Iterator[str]:
    """The prose sentences of `text` (module docstring), stripped, in order."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced or line.startswith("#") or line.lstrip().startswith("|"):
            continue
        lines.append(re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", line))
    for paragraph in re.split(r"\n\s*\n", "\n".join(lines)):
        for sentence in _split(" ".join(paragraph.split())):
            if len(sentence.split()) >= MIN_WORDS:
                yield sentence


def _split(paragraph: str) -> list[str]:
    """`paragraph` cut at sentence ends (module docstring), outside code spans and not
    after an abbreviation."""
    parts, start = [], 0
    for cut in _SPLIT.finditer(paragraph):
        before = paragraph[: cut.start()]
        if before.count("`") % 2 or _ABBREV.search(before):
            continue
        parts.append(paragraph[start : cut.start()])
        start = cut.end()
    parts.append(paragraph[start:])
    return parts


def recast_pairs(text: str, topic: str) -> list[tuple[str, str]]:
    """(question, answer) per sentence of one prose section (module docstring)."""
    pairs = []
    for sentence in sentences(text):
        words = sentence.split()
        head = " ".join(words[: max(2, len(words) // 2)])
        pairs.append((f"Complete this statement about {topic}: {head} ...", sentence))
    return pairs
