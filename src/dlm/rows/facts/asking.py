"""A statement as the question its span answers (`asked`): the question phrase of the
span's kind, the sentence fronted where `dlm.rows.facts.fronted` reads it, else echoed
in its own order, without the clause after what it asks.
"""

from __future__ import annotations

import re

from dlm.rows.facts.fronted import counted_words, ends_phrase, fronted, named_words, relative_clause
from dlm.rows.facts.model import Fact
from dlm.rows.facts.prose import CLOCK_TIME, SUBORDINATORS, VERBS, sentence_subject, third_person

# a subject that ends in one of these is a fragment ("A group of", "When the")
FUNCTION_WORDS = frozenset(
    """a an the of in on at to for from with without by about into over under and or but
    when while if so that which who it its their this these those""".split()
)
# a subject that starts with one of these is an adverbial or a bound ("At most 2200", "When the
# retries", "Up to 3217 folios")
LEADING_ADVERBIALS = (
    frozenset("at in on by with for from up above below over under about around nearly almost roughly".split())
    | SUBORDINATORS
)


def asked(fact: Fact, trim: bool = True) -> str:
    """A statement as the question its span answers: the sentence with the span replaced
    by a question phrase of the span's kind, ending in `?` ("The Larder keeps the newest
    240 entries of each feed." -> "The Larder keeps the newest how many entries of each
    feed?"; a name of two or more words that opens the sentence is asked with "who":
    "Who started Tarnwick?"; a span with a possessive with "whose": "folded into whose
    main segment?"; a name after "the" with "which" and the words naming it, a bare
    number before a plural with "how many": `_echo_phrase`). A user asks about a fact in
    the sentence's own words far more often than through a fill-in-the-blank; a question
    that keeps them is the closest an offline rule gets (an echo question, in grammar's
    terms).

    With `trim`, a sentence that has a subject (`Fact.subject` is not the sentence) loses
    the clause that follows the question phrase: from the first `, ` or subordinating
    word (`so`, `when`, `which`, `until`, ...) or `: ` (a list follows) after it,
    outside backticks and brackets
    ("Who started Tarnwick when the old scripts failed?" -> "Who started Tarnwick?").
    A user's question names the subject, the verb and what is asked, rarely the
    circumstances; the answer still states the whole sentence. A fragment without a
    subject ("Every 75 seconds, unless ...") keeps its clause: it is all the context
    the question has.

    With `trim`, a sentence that `dlm.rows.facts.fronted` reads is asked with the
    question phrase first instead, as a user asks ("The status page listens on port
    9462." -> "On which port does the status page listen?"); the echo question stands
    for every other sentence, and for all with `trim` off."""
    span, ask = fact.name, _question_phrase(fact)
    if trim and (front := fronted(fact, ask)) is not None:
        return front
    if trim and (restated := relative_clause(fact)) is not None:
        return asked(restated)
    body = fact.answer.rstrip(" .!")
    at = body.find(span)
    possessive = re.match(r"['\u2019]s\b", body[at + len(span) :]) if at >= 0 else None
    if possessive:  # "folded into Quillmoor's main segment" asks "into whose main segment"
        span, ask = span + possessive.group(), "whose"
    elif at >= 0 and (wider := _echo_phrase(body, at, span, ask)) is not None:
        at, span, ask = wider
    body = body.replace(span, ask, 1)
    if trim and has_subject(fact) and at >= 0:
        trimmed = _without_trailing_clause(body, at + len(ask))
        # a question that is its question phrase alone ("Which path?") asks nothing
        body = trimmed if len(trimmed.split()) - len(ask.split()) >= 2 else body
    question = body + "?"
    return question[:1].upper() + question[1:]  # a span that opened the sentence left a lowercase word


def _question_phrase(fact: Fact) -> str:
    """What asks for a statement's span: "which port", "who" (a full name that opens the
    sentence), "how many seconds" (a number with its unit), "which file" (a path), ..."""
    span = fact.name.strip("`")
    unit = re.fullmatch(r"(?:port\s+)?\.?\d[\d.,]*\s*([A-Za-z%]+)?", span)  # a number, not `.qmvol`
    if span.lower().startswith("port "):
        return "which port"
    if fact.what == "name" and " " in span and fact.answer.startswith(fact.name):
        return "who"  # a full name doing what the sentence says: a person or a body
    if unit and unit.group(1):
        return f"how many {unit.group(1)}"
    if re.fullmatch(CLOCK_TIME, span):
        return "what time"  # "04:30", a clock time
    if fact.what == "path" or (fact.what == "identifier" and _FILE_NAME.search(span)):
        return _path_ask(fact.name)
    return _ASK.get(fact.what, "what")


def _echo_phrase(body: str, at: int, span: str, ask: str) -> tuple[int, str, str] | None:
    """(where it starts, the stretch of `body` an echo question's phrase replaces, that
    phrase) where the span's neighbours belong in it, else None (the span alone is
    replaced). A bare number before a plural is counted ("holds at most 64 tasks" -> "at
    most how many tasks", "40 added folios" -> "how many added folios"); a name or
    identifier after "the" is the modifier of the words naming what it is, which "which"
    asks for ("of the Lenn valley" -> "of which valley", "The `Gauge` type is defined in
    ..." -> "Which type is defined in ...?"): "the what valley" is no question a user writes."""
    tail = body[at + len(span) :]
    following = tail.split(" ")[1:] if tail.startswith(" ") else []
    if ask == "what number":
        before = body[:at].split()[-1:]
        if before and (
            "." in before[0].strip(".")
            or (before[0][:1].isupper() and before[0].lower() not in LEADING_ADVERBIALS | FUNCTION_WORDS)
        ):
            return None  # a name's version, not a count ("Node.js 15 comes with ...", "Ferry 2 ...")
        counted = counted_words(following)
        return (at, f"{span} {' '.join(counted)}", f"how many {' '.join(counted)}") if counted else None
    if ask != "what" or not re.search(r"(?:^|\s)[Tt]he $", body[:at]):
        return None
    subject = sentence_subject(body)
    if subject is not None and at < len(subject) and body.startswith(subject):
        rest = subject[at + len(span) :].split()  # "The `Gauge` type" of "The `Gauge` type is ..."
        named = rest if rest and _naming(rest) == rest else []
    else:
        named = _naming(following)
        verb = named and following[0] == named[0] and third_person(named[0])  # no comma after it
        if verb and following[1:2] and following[1].lower() in _OBJECT_OPENERS:
            return None  # "the Fennick Valley Bus Cooperative pins timetables to ...": a verb in `-s`, not a noun
        after = following[len(named) :]
        if following[len(named) - 1 : len(named)] != named[-1:]:
            after = [",", *after]  # the last named word carried the comma
        if not (ends_phrase(after) or after[0].lower() == "of"):
            return None
    if not named:
        return None
    return at - 4, f"{body[at - 4 : at]}{span} {' '.join(named)}", f"which {' '.join(named)}"


def _naming(words: list[str]) -> list[str]:
    """`named_words` up to the first that reads as a verb or an adverb ("the `TTY`
    currently has", "the License is distributed"): those make the span the subject of
    a clause, which "which" would not ask for."""
    named: list[str] = []
    for word in named_words(words):
        lower = word.lower()
        if lower in VERBS or lower.endswith(("ly", "ed")):
            break
        named.append(word)
    return named


# words that open a verb's object or complement ("pins the timetables", "points to"), after which
# a word in `-s` reads as the verb
_OBJECT_OPENERS = frozenset("the a an its their this that these those it them to into onto".split())


def has_subject(fact: Fact) -> bool:
    """Whether the prose rules found the sentence's subject (without one, `Fact.subject`
    is the sentence itself, `dlm.rows.facts.prose`)."""
    return fact.subject != fact.answer.casefold()


_TRAILING_CLAUSE = re.compile(
    # a relative pronoun takes its preposition along: "after a wet June in which ..."
    r"[,:]\s|\s(?:(?:in|on|at|of|for|from|by|with|to|under|through) (?=which|whom))?"
    r"(?:so|when|whenever|which|whom|until|while|because|unless|since|whereas|before|after|if)\s"
)


def _without_trailing_clause(text: str, start: int) -> str:
    """`text` up to the first clause boundary at or after `start` that is outside
    backticks and brackets (`asked`), else `text`."""
    for match in _TRAILING_CLAUSE.finditer(text, start):
        head = text[: match.start()]
        if head.count("`") % 2 == 0 and head.count("(") == head.count(")"):
            return head
    return text


# a name's kind is not known (a person, a product, a format), so "what" asks for any of them
_ASK = {"number": "what number", "command": "which command", "URL": "which URL"}


# a file name written without a folder (`brackenhold.ini`): asked as a file, not as a "what"
_FILE_NAME = re.compile(
    r"^[\w.-]+\.(?:json|ya?ml|toml|ini|cfg|conf|txt|md|rst|py|go|rs|ts|js|c|h|cc|cpp|hpp|java|db|sqlite3?|log|csv|lock|sh)$"
)


def _path_ask(span: str) -> str:
    """The question phrase of a path: "which folder" for one ending in `/`, "which file"
    for one whose last part has an extension (`tally.db`), "which path" for the rest
    (`/lf/healthz`, a URL path or a folder written without its slash)."""
    path = span.strip("`")
    if path.endswith("/"):
        return "which folder"
    return "which file" if "." in path.rsplit("/", 1)[-1].strip(".") else "which path"
