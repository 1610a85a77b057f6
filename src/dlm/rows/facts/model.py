"""What a fact is, what one phrasing of it is, and which probe keys are strong.

A fact is one thing a source states, small enough for one short answer. Its kind
says where it comes from and how it is asked (`dlm.rows.facts.phrasing`):

    where      a public definition in code -> its file
    purpose    a public definition with a doc comment -> the comment's first sentence
    signature  a public function or method -> what a call takes
    value      a constant bound to a short literal -> the literal
    statement  a prose sentence with a salient span (a number with its unit, an
               identifier in backticks, a path, a command, a proper name) -> the
               sentence, its subject written out in full
    setting    a key of a config file -> its value
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal, NamedTuple

FactKind = Literal["where", "purpose", "signature", "value", "statement", "setting"]
FACT_KINDS: tuple[FactKind, ...] = ("where", "purpose", "signature", "value", "statement", "setting")

# words a reply holds whatever it says: a probe key among them tells no answer apart
WEAK_KEYS = frozenset(
    """a an and are as at be but by can do for from has have he her his i if in is it its me my no
    not of on off one or our she so the their them they this to true false none null up us was we
    were what when who will with yes you all any""".split()
)


class Fact(NamedTuple):
    """One thing a source states. A NamedTuple: the facts memo rebuilds tens of
    thousands per run, and tuple construction is several times cheaper.

    Attributes:
        kind: see module docstring.
        path: the file's path relative to its sources root (POSIX), or the document's
            file name for a fact drawn from the document itself.
        line: 1-based line of the definition, key or sentence.
        name: what is asked about: `JSONDecoder`, `JSONDecoder.decode`, `HTTP_PORT`,
            a config key's dotted path (`server.port`), a statement's salient span as
            it stands in the sentence (`` `dlm serve` ``, `port 8080`).
        what: "class", "function", "method", "constant", "type", ... (code); the
            format (config: "YAML", "TOML", "JSON", "INI"); the span's kind
            (statement: "number", "identifier", "path", "command", "URL", "name").
        answer: the fact's value: a path (where), a sentence (purpose, statement), a
            call signature (signature), a literal (value, setting).
        subject: what the fact is about, the probe split's unit: a top-level name
            (code), a key's parent path (config), a sentence's subject (statement).
    """

    kind: FactKind
    path: str
    line: int
    name: str
    what: str
    answer: str
    subject: str


@dataclass(frozen=True)
class Pair:
    """One phrasing of a fact as a question and a short answer."""

    question: str
    answer: str


def strong_key(key: str) -> bool:
    """Whether a wrong reply is unlikely to hold `key` by chance: at least 2 characters
    and not a common English word (`WEAK_KEYS`)."""
    key = key.strip()
    return len(key) >= 2 and key.casefold() not in WEAK_KEYS


def unit_hash(*parts: str) -> float:
    """A number in [0, 1) from sha256 of the NUL-joined UTF-8 parts (stable across
    processes and machines, unlike `hash()`)."""
    blob = "\0".join(parts).encode("utf-8", "surrogateescape")
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") / 2**64
