"""Each fact kind's phrasings, and what a correct answer to a fact's probe must hold.

Every kind has `MAX_PHRASINGS` (question, answer) templates over the fact's fields
(`name`, `what`, `path`, `answer`) and, for a statement, `cloze` (the sentence with its
span replaced by `___`). The first template is the probe's question; statements and
settings mix questions with requests for the statement itself, so the adapter meets
the fact both asked and stated.
"""

from __future__ import annotations

import ast
import re

from dlm.rows.facts.model import Fact, FactKind, Pair, strong_key

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
        ("In `{path}`, what is `{name}` set to?", "`{name} = {answer}`."),
        ("Which value does `{path}` give the constant `{name}`?", "`{answer}`."),
        ("What does `{path}` assign to `{name}`?", "`{name} = {answer}`."),
    ),
    "statement": (
        ("{ask}", "{name}. {answer}"),
        ("What do you know about {topic}?", "{answer}"),
        ("Fill in the blank ({what}): {cloze}", "{name}"),
        ('According to `{path}`, what completes this: "{cloze}"?', "{name}. {answer}"),
    ),
    "setting": (
        ("What is `{name}` set to in `{path}`?", "`{answer}`."),
        ("In `{path}`, which value does the key `{name}` have?", "`{name}` is `{answer}`."),
        ("What does the {what} file `{path}` configure for `{name}`?", "`{name}`: `{answer}`."),
        ("State the setting `{name}` from `{path}`.", "`{path}` sets `{name}` to `{answer}`."),
    ),
}
MAX_PHRASINGS = min(len(p) for p in PHRASINGS.values())

_NAME_FIRST = (".go",)  # `name type` parameters
_NAME_LAST = (".java", ".c", ".h", ".cc", ".cpp", ".hpp", ".cxx")  # `type name` parameters


def cloze(fact: Fact) -> str:
    """A statement's sentence with its span replaced by `___` (other kinds: the answer)."""
    return fact.answer.replace(fact.name, "___", 1)


def asked(fact: Fact) -> str:
    """A statement as the question its span answers: the sentence with the span replaced
    by a question phrase of the span's kind, ending in `?` ("The Larder keeps the newest
    240 entries of each feed." -> "The Larder keeps the newest how many entries of each
    feed?"). A user asks about a fact in the sentence's own words far more often than
    through a fill-in-the-blank; a question that keeps them is the closest an offline
    rule gets (an echo question, in grammar's terms)."""
    span = fact.name
    unit = re.fullmatch(r"(?:port\s+)?[\d.,]+\s*([A-Za-z%]+)?", span.strip("`"))
    if span.strip("`").lower().startswith("port "):
        ask = "which port"
    elif unit and unit.group(1):
        ask = f"how many {unit.group(1)}"
    else:
        ask = _ASK.get(fact.what, "what")
    question = fact.answer.rstrip(" .!").replace(span, ask, 1) + "?"
    return question[:1].upper() + question[1:]  # a span that opened the sentence left a lowercase word


# a name's kind is not known (a person, a product, a format), so "what" asks for any of them
_ASK = {"number": "what number", "path": "which file", "command": "which command", "URL": "which URL"}


def topic(fact: Fact) -> str:
    """What a statement is about, as the sentence writes it (its subject, `Fact.subject`
    casefolded); without a short subject, the first code span of the sentence that is
    not the asked span, else its path."""
    at = fact.answer.casefold().find(fact.subject)
    if at >= 0 and fact.subject and len(fact.subject) <= 60 and fact.subject != fact.answer.casefold():
        return fact.answer[at : at + len(fact.subject)]
    other = [c for c in re.findall(r"`[^`]+`", fact.answer) if c != fact.name]
    return other[0] if other else f"`{fact.path}`"


def phrase(fact: Fact, count: int = MAX_PHRASINGS) -> list[Pair]:
    """The first `count` phrasings of `fact` (the first one is the probe's question)."""
    fields = {"name": fact.name, "what": fact.what, "path": fact.path, "answer": fact.answer, "cloze": cloze(fact)}
    if fact.kind == "statement":
        fields.update(ask=asked(fact), topic=topic(fact))
    return [Pair(q.format(**fields), a.format(**fields)) for q, a in PHRASINGS[fact.kind][:count]]


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
        if ":" in param:
            param = param.split(":")[0]
        words = [w for w in re.split(r"[\s*&?]+|\.\.\.", param) if w and w != "mut"]
        if not words:
            continue
        word = words[0] if fact.path.endswith(_NAME_FIRST) else words[-1]
        if word != "self":
            names.append(word)
    return tuple(names)
