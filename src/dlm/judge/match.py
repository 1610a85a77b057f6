"""Whether a generated answer is right: the pass rule a person can read.

With keys (`### Keys` under a pair, or the keys `training.synth` derives): the answer
passes when it contains every key. Without keys, the reference answer's salient
strings stand in for them:

- code spans (`` `json/decoder.py` ``), and words that look like code or numbers:
  paths (`a/b.py`), dotted names (`os.path`), snake_case and CamelCase names, numbers,
  names whose hyphen comes before a capital or a digit (`X-Request-Id`, `SHA-256`; not
  `well-known`);
- when the reference has none of those, its content words (4 letters or more, not
  common English words, not in the question: restating the question is not an answer)
  and the answer must contain at least 60% of them (at least one); a content word also
  matches with a plural `s` or `es`, and inside a hyphenated or snake_case word
  (`lanternfish` in `x-lanternfish-sig`).

"Contains" means on token boundaries, never a bare substring:

- a key matches only where the text around it does not continue it: `no` is not found
  in `know`, `registry.py` not in `registry.pyc`, `2:30` not in `12:30`;
- a key that is a number (`7`, `-3`, `0.5`, `1,000`) matches a number of the answer
  with the same value: `7` matches `7.0`, not `17`, `7.5`, `2.7` or `7:30`; `80` does not
  match `8080`;
- a match inside a negated sentence does not count (`not`, `no`, `never`, `none`,
  `nothing`, `neither`, `nor`, `cannot` or a word ending in `n't` in the same sentence:
  "It is not in registry.py" does not pass `registry.py`; a leading "No," answering a
  yes/no question is not a negation), unless the reference answer or a key is itself
  negated;
- an answer made of the question's words and all of them (the question repeated,
  reworded at most by common words) passes nothing.

Matching ignores case, surrounding backticks and runs of whitespace, and treats `-` and
`_` alike, so "`Json_Decoder`" matches `json-decoder`; it reads text in Unicode's
compatibility form (NFKC, Unicode Standard Annex #15), so a subscript, superscript or
full-width character matches its plain one ("H₂O" matches `H2O`, "１００" matches `100`);
it never rewrites digits or punctuation inside a key (`3.14` does not match `314`).

`RULE_VERSION` names this rule; `dlm.judge.report` re-judges a remembered report's
replies by the current rule, never reusing a stored verdict.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation

# 1: bare substrings; 2: token and number boundaries, negation, repeated questions;
# 3: a number after a host's colon (`localhost:8093`, `0.0.0.0:8093`) counts, a time's minutes still do not;
# 4: a name whose hyphen comes before a capital or a digit is a key;
# 5: a line break ends the sentence a word key's negation is read in, as it did for numbers;
# 6: text is read in NFKC, so subscripts, superscripts and full-width forms match plain ones
RULE_VERSION = 6
CONTENT_SHARE = 0.6
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./:-]*[A-Za-z0-9_]|[A-Za-z0-9]")
_CODEY = re.compile(r".*([/._]|\d|[a-z][A-Z]|-[A-Z]).*")
# a number not glued to a word or to another number's digits (`1.2.3`, `12:30`, `v2`)
_NUMBER = re.compile(r"(?<![\w.,])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w]|[.,:]\d)")
# what ends right before a number that follows a colon: a time's hours (`12:30`) make the
# number part of the time; a host (`localhost:8093`) or an IPv4 address (`0.0.0.0:8093`) do not
_BEFORE_COLON = re.compile(r"(\d+(?:\.\d+)*):$")
_SENTENCE_END = re.compile(r"[.!?;](?:\s|$)|\n")
_NEGATION = re.compile(r"\b(?:not|no|never|none|nothing|neither|nor|cannot|\w+n['\u2019]t)\b")
_INTERJECTION = re.compile(r"^\s*(?:no|yes)\s*[,!:]")
_TOKEN = re.compile(r"\w+")
_STOP = frozenset(
    """
about above after again also among because been before being below between both could does doing down
during each from further have having here into itself just more most other over same should some such
than that their them then there these they this those through under until very what when where which
while will with would your yours is are was were the and for not but can you
a an of in on at to by it its be do as or if so yes
""".split()
)


def normalize(text: str) -> str:
    """NFKC, case-folded, whitespace collapsed, `-` as `_`, backticks dropped (module docstring)."""
    return " ".join(unicodedata.normalize("NFKC", text).replace("`", "").replace("-", "_").casefold().split())


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


def number_value(text: str) -> Decimal | None:
    """The value of `text` when it is one number by the module's rule (`1,000` is 1000), else None."""
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        return None
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None


def negated(text: str) -> bool:
    """True when `text` holds a negation word (module docstring); a leading "No," or
    "Yes," answers a yes/no question and negates nothing after it."""
    return _NEGATION.search(_INTERJECTION.sub("", text.casefold())) is not None


def _sentence_at(text: str, position: int) -> str:
    """The sentence of `text` around `position` (cut at `.`, `!`, `?` or `;` before a space, or a newline)."""
    start = 0
    for end in _SENTENCE_END.finditer(text):
        if end.start() >= position:
            return text[start : end.start()]
        start = end.end()
    return text[start:]


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _text_hits(said: str, key: str) -> list[int]:
    """Where normalized `key` starts in normalized `said` on token boundaries: a key
    whose edge is a word character must not be continued by one."""
    hits, start = [], said.find(key)
    while start >= 0:
        end = start + len(key)
        before_ok = not _is_word_char(key[0]) or start == 0 or not _is_word_char(said[start - 1])
        after_ok = not _is_word_char(key[-1]) or end == len(said) or not _is_word_char(said[end])
        if before_ok and after_ok:
            hits.append(start)
        start = said.find(key, start + 1)
    return hits


def key_found(answer: str, key: str, *, negation_allowed: bool = False) -> bool:
    """True when `key` occurs in `answer` by the module's rule (boundaries, numbers by
    value, not in a negated sentence unless `negation_allowed`)."""
    value = number_value(key.strip().strip("`").rstrip("."))
    if value is not None:
        folded = unicodedata.normalize("NFKC", answer).casefold()
        spans = [(m.start(), m.group()) for m in _NUMBER.finditer(folded) if not _in_time(folded, m.start())]
        found = [(folded, s) for s, text in spans if number_value(text) == value]
    else:
        wanted = normalize(key)
        if not wanted:
            return True
        # each line normalized on its own: normalizing the whole answer would join a code
        # block's line to the next paragraph's sentence, and that sentence's negation
        lines = [normalize(line) for line in answer.splitlines()]
        found = [(line, s) for line in lines for s in _text_hits(line, wanted)]
        if not found:  # a key written across a line break
            text = normalize(answer)
            found = [(text, s) for s in _text_hits(text, wanted)]
    return any(negation_allowed or not negated(_sentence_at(text, s)) for text, s in found)


def _in_time(text: str, start: int) -> bool:
    """Whether the number at `start` follows a colon that a number (not an IPv4 address)
    precedes: `12:30`'s `30`, never `localhost:8093`'s or `0.0.0.0:8093`'s `8093`."""
    before = _BEFORE_COLON.search(text[:start])
    return before is not None and before.group(1).count(".") != 3


def repeats_question(answer: str, question: str) -> bool:
    """True when `answer` is made of the question's uncommon words, all of them (module docstring)."""
    if not question.strip():
        return False

    def words(text: str) -> set[str]:
        return {w for w in _TOKEN.findall(normalize(text)) if w not in _STOP}

    asked = words(question)
    return bool(asked) and words(answer) == asked


def _word_found(said_tokens: set[str], word: str) -> bool:
    return word in said_tokens or f"{word}s" in said_tokens or f"{word}es" in said_tokens


def passes(answer: str, reference: str, keys: Sequence[str] = (), question: str = "") -> bool:
    """True when `answer` is right by the module's rule.

    Args:
        answer: the generated text.
        reference: the document's answer.
        keys: strings that must all appear; empty uses the reference's salient keys,
            then its content words.
        question: the question asked; an answer that only repeats it fails, and its words
            do not count as content words.
    """
    if repeats_question(answer, question):
        return False
    wanted = tuple(k for k in keys if normalize(k)) or salient_keys(reference)
    allowed = negated(reference) or any(negated(k) for k in wanted)
    if wanted:
        return all(key_found(answer, k, negation_allowed=allowed) for k in wanted)
    asked = set(content_words(question))
    words = [w for w in content_words(reference) if w not in asked] or content_words(reference)
    if not words:
        return key_found(answer, reference, negation_allowed=allowed)
    kept = answer if allowed else " ".join(s for s in _SENTENCE_END.split(answer) if not negated(s))
    said_tokens = {part for token in _TOKEN.findall(normalize(kept)) for part in (token, *token.split("_"))}
    hits = sum(1 for w in words if _word_found(said_tokens, w))
    return hits >= max(1, round(CONTENT_SHARE * len(words)))
