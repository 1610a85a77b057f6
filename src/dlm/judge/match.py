"""Whether a generated answer is right: the pass rule a person can read.

With keys (`### Keys` under a pair, or the keys `training.synth` derives): the answer
passes when it contains every key. Without keys, the reference answer's salient
strings stand in for them:

- code spans (`` `json/decoder.py` ``), and words that look like code or numbers:
  paths (`a/b.py`), dotted names (`os.path`), snake_case and CamelCase names, numbers;
- when the reference has none of those, its content words (4 letters or more, not
  common English words, not in the question: restating the question is not an answer)
  and the answer must contain at least 60% of them (at least one).

Matching ignores case, surrounding backticks and runs of whitespace, and treats `-` and
`_` alike, so "`Json_Decoder`" matches `json-decoder`; it never rewrites digits or
punctuation inside a key (`3.14` does not match `314`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

CONTENT_SHARE = 0.6
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./:-]*[A-Za-z0-9_]|[A-Za-z0-9]")
_CODEY = re.compile(r".*([/._]|\d|[a-z][A-Z]).*")
_STOP = frozenset(
    """
about above after again also among because been before being below between both could does doing down
during each from further have having here into itself just more most other over same should some such
than that their them then there these they this those through under until very what when where which
while will with would your yours is are was were the and for not but can you
""".split()
)


def normalize(text: str) -> str:
    """Case-folded, whitespace collapsed, `-` as `_`, backticks dropped (module docstring)."""
    return " ".join(text.replace("`", "").replace("-", "_").casefold().split())


def salient_keys(reference: str) -> tuple[str, ...]:
    """The strings a reference answer's correct restatement must contain (module docstring):
    its code spans and code-like words, in order of appearance, without repeats."""
    found = [m.group(1).strip() for m in _CODE_SPAN.finditer(reference)]
    rest = _CODE_SPAN.sub(" ", reference)
    found += [w.rstrip(".:") for w in _WORD.findall(rest) if _CODEY.fullmatch(w.rstrip(".:"))]
    return tuple(dict.fromkeys(k for k in found if k))


def content_words(text: str) -> list[str]:
    """Words of 4+ letters that are not common English words, normalized, in order."""
    words = [normalize(w) for w in re.findall(r"[A-Za-z]{4,}", text)]
    return list(dict.fromkeys(w for w in words if w not in _STOP))


def passes(answer: str, reference: str, keys: Sequence[str] = (), question: str = "") -> bool:
    """True when `answer` is right by the module's rule.

    Args:
        answer: the generated text.
        reference: the document's answer.
        keys: strings that must all appear; empty uses the reference's salient keys,
            then its content words.
        question: the question asked; its words do not count as content words.
    """
    said = normalize(answer)
    wanted = tuple(keys) or salient_keys(reference)
    if wanted:
        return all(normalize(k) in said for k in wanted)
    asked = set(content_words(question))
    words = [w for w in content_words(reference) if w not in asked] or content_words(reference)
    if not words:
        return normalize(reference) in said
    hits = sum(1 for w in words if w in said)
    return hits >= max(1, round(CONTENT_SHARE * len(words)))
