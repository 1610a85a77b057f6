"""Prose recast as Q/A pairs, so a fact written only in prose can be asked.

A small model trained on a prose paragraph learns to continue the paragraph, not to
answer a question about it in chat form (`examples/ferry.dlm`: 0 of the 4 facts that sit
only in prose or code, in eight configurations of `benchmarks/recipe_sweep.py`). With
`training.recast`, each sentence of a prose section therefore also becomes one
instruction pair:

    Q: Complete this statement about <topic>: <first half of the sentence> ...
    A: <the whole sentence>

`<topic>` is the section's heading (its first `# ` line, without the `#`), else the
document's first heading, else "this project". The first half is the first
`max(2, n // 2)` words. Sentences are split at `. `, `! ` and `? ` outside code spans;
fenced code blocks, headings, list markers and sentences of fewer than 4 words are left
out. Deterministic: the pairs are a pure function of the prose text.

Off by default: on `examples/ferry.dlm` it taught 0 of the 4 prose/code facts on the
2-core CPU and 1 of 4 on a GPU, and cost paraphrases (CPU 4/8 against 6/8 without, GPU
2/8 against 5/8), since its sentences are instruction examples the recipe repeats too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

MIN_WORDS = 4
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(])")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


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
        if fenced or line.startswith("#"):
            continue
        lines.append(re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", line))
    for paragraph in re.split(r"\n\s*\n", "\n".join(lines)):
        for sentence in _SPLIT.split(" ".join(paragraph.split())):
            if len(sentence.split()) >= MIN_WORDS:
                yield sentence


def recast_pairs(text: str, topic: str) -> list[tuple[str, str]]:
    """(question, answer) per sentence of one prose section (module docstring)."""
    pairs = []
    for sentence in sentences(text):
        words = sentence.split()
        head = " ".join(words[: max(2, len(words) // 2)])
        pairs.append((f"Complete this statement about {topic}: {head} ...", sentence))
    return pairs
