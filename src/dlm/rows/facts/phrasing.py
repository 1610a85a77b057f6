"""Each fact kind's phrasings, and what a correct answer to a fact's probe must hold.

Every kind has `MAX_PHRASINGS` (question, answer) templates over the fact's fields
(`name`, `what`, `path`, `answer`) and, for a statement, `cloze` (the sentence with its
span replaced by `___`). The first template is the probe's question; statements and
settings mix questions with requests for the statement itself, so the adapter meets
the fact both asked and stated.

A constant's value and a config key's setting are also asked in words, since a user
asks "how long is a tile cached?", not for `TILE_TTL_SECS`: `described` is the
question its gloss asks (the doc comment or config comment right above it, `dlm.rows.synth.synthesize`
joins them), else the question its name's words ask ("What is the status port?" for
`status.status_port`; "What are the floor dryers?" for a list under a plural name);
`glossed` adds the gloss to the stated form.
"""

from __future__ import annotations

import ast
import re

from dlm.rows.facts.asking import FUNCTION_WORDS, LEADING_ADVERBIALS, asked, has_subject
from dlm.rows.facts.fronted import counted_question, inverted_question
from dlm.rows.facts.language import phrase_english
from dlm.rows.facts.model import Fact, FactKind, Pair, strong_key
from dlm.rows.facts.prose import third_person

PHRASINGS: dict[FactKind, tuple[tuple[str, str], ...]] = {
    "where": (
        ("Where is `{name}` defined?", "In `{path}`."),
        ("Which file defines the {what} `{name}`?", "`{path}`."),
        ("In which source file is `{name}` implemented?", "`{name}` is defined in `{path}`."),
        ("Where can I find the {what} `{name}`?", "In `{path}`."),
    ),
    "purpose": (
        ("What does `{name}` in `{path}` do?", "{answer}"),
        ("Describe the {what} `{name}` from `{path}` in one sentence.", "{answer}"),
        ("What is `{name}` (defined in `{path}`) for?", "{answer}"),
        ("In `{path}`, what is the {what} `{name}`?", "{answer}"),
    ),
    "signature": (
        ("What is the signature of `{name}` in `{path}`?", "`{answer}`"),
        ("What arguments does the {what} `{name}` in `{path}` take?", "`{answer}`"),
        ("How do you call `{name}` from `{path}`?", "`{answer}`"),
        ("Show the parameters of `{name}` (in `{path}`).", "`{answer}`"),
    ),
    "value": (
        ("What is the value of `{name}` in `{path}`?", "`{answer}`."),
        ("{described}", "`{answer}` (`{name}` in `{path}`)."),
        ("What do you know about `{name}`?", "`{name}` in `{path}` is `{answer}`{glossed}."),
        ("In `{path}`, what is `{name}` set to?", "`{name} = {answer}`."),
    ),
    "statement": (
        ("{ask}", "{name}. {answer}"),
        ("What do you know about {topic}?", "{answer}"),
        ("Fill in the blank ({what}): {cloze}", "{name}"),
        ('According to `{path}`, what completes this: "{cloze}"?', "{name}. {answer}"),
    ),
    "setting": (
        ("What is `{name}` set to in `{path}`?", "`{answer}`."),
        ("{described}", "`{answer}` (`{name}` in `{path}`)."),
        ("What do you know about `{name}`?", "`{path}` sets `{name}` to `{answer}`{glossed}."),
        ("In `{path}`, which value does the key `{name}` have?", "`{name}` is `{answer}`."),
    ),
}
MAX_PHRASINGS = min(len(p) for p in PHRASINGS.values())

_NAME_FIRST = (".go",)  # `name type` parameters


def cloze(fact: Fact) -> str:
    """A statement's sentence with its span replaced by `___` (other kinds: the answer)."""
    return fact.answer.replace(fact.name, "___", 1)


def topic(fact: Fact) -> str | None:
    """What a statement is about, as the sentence writes it (its subject, `Fact.subject`
    casefolded), with an opening determiner in lowercase ("the Larder"); without a short
    subject that reads as a noun phrase (not ending in a function word, not opening
    with a preposition or subordinator), the first code span
    of the sentence that is neither the asked span nor a path; else None (a question
    about the file the sentence sits in asks about nothing a user would name). A time
    before the subject is no part of it ("Each morning Wrenfield writes ..." ->
    "Wrenfield"); a sentence that does not read as English (`phrase_english`) has no
    topic: its subject was found by English rules."""
    if not phrase_english(fact.answer):  # "Jeder Pegelalarm und ...": no English subject to find
        return None
    at = fact.answer.casefold().find(fact.subject)
    subject = fact.answer[at : at + len(fact.subject)] if at >= 0 else ""
    words = subject.split()
    if len(words) > 2 and words[0].lower() in ("each", "every") and words[1].islower() and words[2][:1].isupper():
        words = words[2:]  # a time before the subject: "Each morning Wrenfield writes ..."
        subject = " ".join(words)
    if (
        words
        and len(subject) <= 60
        and has_subject(fact)
        and ":" not in subject
        and words[-1].lower() not in FUNCTION_WORDS
        and words[0].lower() not in LEADING_ADVERBIALS
    ):
        # a determiner capitalised only because it opened the sentence ("The Larder")
        return subject[:1].lower() + subject[1:] if words[0].lower() in _LEADS else subject
    other = [c for c in re.findall(r"`[^`]+`", fact.answer) if c != fact.name and "/" not in c]
    return other[0] if other else None


def phrase(fact: Fact, count: int = MAX_PHRASINGS, gloss: str | None = None, trim: bool = True) -> list[Pair]:
    """The first `count` phrasings of `fact` (the first one is the probe's question);
    `gloss`: what a value or setting means, one sentence (module docstring); `trim`: a
    statement's question without its trailing clause (`asked`). A statement without a
    `topic` is asked to be completed in its second phrasing instead of asked about, and
    has one phrasing fewer (`MAX_PHRASINGS - 1`)."""
    fields = {"name": fact.name, "what": fact.what, "path": fact.path, "answer": fact.answer, "cloze": cloze(fact)}
    templates = PHRASINGS[fact.kind]
    if fact.kind == "statement":
        about = topic(fact)
        fields.update(ask=asked(fact, trim), topic=about or "")
        if about is None:  # nothing to ask about by name: the sentence to complete instead
            templates = (templates[0], templates[3], templates[2])
    elif fact.kind in ("value", "setting"):
        meaning = _meaning(fact.name, gloss) if gloss else None
        words = name_words(fact.name)
        several = ", " in fact.answer and third_person(words.rsplit(" ", 1)[-1])  # `dryers: [D1, D2]`
        named = f"What {'are' if several else 'is'} the {words}?"
        glossed = f", the {words}"
        if meaning:  # an English gloss goes on lowercased; one in German keeps its nouns' capitals
            glossed = f": {meaning[:1].lower()}{meaning[1:]}" if phrase_english(meaning) else f": {meaning}"
        fields.update(
            described=_described(meaning, _NUMBER.fullmatch(fact.answer.strip("`")) is not None) or named
            if meaning
            else named,
            glossed=glossed,
        )
    return [Pair(q.format(**fields), a.format(**fields)) for q, a in templates[:count]]


_WH = ("how", "what", "where", "which", "when", "who", "why", "whether")


def name_words(name: str) -> str:
    """A code or config name as the words it is made of, lowercase, a word repeated
    next to itself once: `status.status_port` -> "status port", `BodyReadLimit` ->
    "body read limit", `servers[1].host` -> "servers 1 host" (the index parts two
    items' keys, which would otherwise ask the same question for two answers)."""
    spaced = re.sub(r"\[(\d+)\]|[\"'`]", r" \1 ", name)
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", spaced)
    words = [w.lower() for w in re.split(r"[\s._\-/:]+", spaced) if w]
    return " ".join(w for i, w in enumerate(words) if not i or w != words[i - 1])


def _meaning(name: str, gloss: str) -> str:
    """A gloss without the name it opens with (Go's and Java's doc comment convention,
    "BodyReadLimit is how many bytes ..." -> "how many bytes ..."), what follows a
    semicolon (an aside: "...; this is the unit's symbol") or its last `.`."""
    short = re.split(r"\.|::", name)[-1]
    text = re.sub(rf"^`?{re.escape(short)}`?\s+(?:is|are|sets|gives|holds)\s+", "", gloss.strip())
    return text.split("; ", 1)[0].rstrip(" .")


# a gloss that is a clause ("Weights are stored as decagrams") asks nothing as "What is
# the ...?": its subject, then a form of "be" within its first words
_CLAUSE = re.compile(r"^(?:\S+ ){1,3}(?:is|are|was|were)\b")
# "at least this large" asks "at least how large", as "this many" asks "how many"
_THIS_DEGREE = re.compile(r"\b[Tt]his (large|long|much|often|far|big|small|old|wide|high|heavy|deep)\b")


def _described(meaning: str, number: bool = False) -> str | None:
    """The question a gloss asks: a gloss that opens with a question word is one
    already, asked directly (`dlm.rows.facts.fronted.inverted_question`: "How long a
    tile is served" -> "How long is a tile served?"), one that opens with a plural noun
    and glosses a `number` asks how many ("Readings the ring holds" -> "How many
    readings does the ring hold?"), one that counts with "this many" asks how many
    first (`counted_question`), any other is what something is ("Largest event body"
    -> "What is the largest event body?"); one that measures with "this large" asks
    "how large" in its own words; a gloss that is not English is asked in its own words
    (`dlm.rows.facts.language.phrase_english`); None for a gloss that is a clause
    ("Weights are stored as decagrams": the caller asks by the name's words)."""
    if not phrase_english(meaning):  # "Wie lange ein Ventil offen bleiben darf": asked in its own words
        return f"{meaning[:1].upper()}{meaning[1:]}?"
    lead = meaning.split(" ", 1)[0].lower()
    counted = re.sub(r"\b[Tt]his many\b", "how many", meaning, count=1)
    if counted != meaning:  # "Deliveries are retried this many times" asks how many
        direct = counted_question(meaning) or counted
        return f"{direct[:1].upper()}{direct[1:]}?"
    if lead in _WH:
        direct = inverted_question(meaning)
        return f"{direct[:1].upper()}{direct[1:]}?"
    if _CLAUSE.match(meaning):
        return None
    if number and lead.isalpha() and lead.endswith("s") and not lead.endswith(("ss", "us", "is")):
        return f"{inverted_question(f'How many {meaning[:1].lower()}{meaning[1:]}')}?"
    measured = _THIS_DEGREE.sub(r"how \1", meaning, count=1)
    if measured != meaning:
        return f"{measured[:1].upper()}{measured[1:]}?"
    article = "" if lead in _LEADS else "the "
    return f"What is {article}{meaning[:1].lower()}{meaning[1:]}?"


_NUMBER = re.compile(r"-?\d[\d_,.]*[uUlLfF]*")  # a literal that counts something
_LEADS = frozenset({"the", "a", "an", "its", "their", "this", "that", "one", "each", "every", "whether"})


def probe_keys(fact: Fact) -> tuple[str, ...]:
    """What a correct answer to a probe must contain: the path (where); the literal,
    a string without its quotes (value, setting); the span without its backticks
    (statement); the parameter names, up to four (signature); nothing for a sentence
    (purpose: the answer's likelihood scores it). Only strong keys (`strong_key`): a
    fact whose key is not one gives () and no probe."""
    if fact.kind == "where":
        keys: tuple[str, ...] = (fact.path,)
    elif fact.kind in ("value", "setting"):
        keys = (_unquoted(fact.answer),)
    elif fact.kind == "statement":
        keys = (fact.name.strip("`"),)
    elif fact.kind == "signature":
        keys = _parameter_names(fact)
    else:
        return ()
    return tuple(k for k in keys if strong_key(k))[:4]


def _unquoted(literal: str) -> str:
    """A string literal's text (Python, Go, Rust, JavaScript quoting), else `literal`."""
    try:
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        if len(literal) >= 2 and literal[0] == literal[-1] and literal[0] in "`'\"":
            return literal[1:-1]
        return literal
    return value if isinstance(value, str) and value.strip() else literal


def _parameter_names(fact: Fact) -> tuple[str, ...]:
    """Parameter names of a rendered signature: `name: type` (Python, Rust, TypeScript),
    `name type` (Go), `type name` (Java, C); `self` and defaults left out."""
    params = fact.answer[fact.answer.index("(") + 1 :].split(")")[0]
    names: list[str] = []
    for param in params.split(","):
        param = param.split("=")[0]
        param = re.split(r"(?<!:):(?!:)", param)[0]  # `name: type`, not C++'s `std::string`
        words = [w for w in re.split(r"[\s*&?]+|\.\.\.", param) if w and w != "mut"]
        if not words:
            continue
        word = words[0] if fact.path.endswith(_NAME_FIRST) else words[-1]
        if word != "self":
            names.append(word)
    return tuple(names)
