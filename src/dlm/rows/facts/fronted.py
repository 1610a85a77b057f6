"""A statement asked the way a user asks it: the question phrase first, then the
auxiliary, then the subject ("The status page listens on port 9462." -> "On which port
does the status page listen?").

`dlm.rows.facts.asking.asked` otherwise keeps the sentence's own order and puts the
question phrase where the span stood ("The status page listens on which port?", an echo
question). Users ask with the question phrase fronted, and so do the document's own
pairs; a fact trained only as echo questions is answered by rote to the echo and seldom
to the user's question (docs/evaluation.md, "Questions in a user's word order").

The rule is English's wh-movement with subject-auxiliary inversion (Huddleston &
Pullum, "The Cambridge Grammar of the English Language", ch. 10), for the sentences an
offline rule reads safely: the subject (`dlm.rows.facts.prose.sentence_subject`, not
an adverbial such as "There" or a fragment ending in "of") opens the sentence, the word
after it is the verb, and the span lies after the verb, outside any clause:

- the verb `is`/`are`/`was`/`were` or a modal (`can`, `will`, ...) moves before the
  subject itself ("Every result is kept in X." -> "In which file is every result
  kept?"); a verb in `-s` is asked with `does`, a past tense with `did`, another
  present with `do`, each with the verb's base form (an irregular past from a table,
  a regular one by the spelling rules of `-ed`); `has`/`have`/`had` and a verb that
  does not read as one give no question;
- what moves is the span's phrase: the preposition right before the span with it ("at
  `/lf/healthz`" -> "at which path"); a preposition, `the`, and up to three words
  naming what the span is ("to the MQTT topic `brackenhold/gusts`" -> "to which MQTT
  topic", "for the Skerrow Point lifeboat crew" -> "for which lifeboat crew"); `every`
  and a number with its unit ("every 75 seconds") -> "how often"; a bare number before
  a plural ("holds 8192 tiles") -> "how many tiles"; else the question phrase alone,
  when the span is the whole object. A proper name after `the` and other words is
  their phrase's head ("the following URL"), not a name for it, and a span inside the
  noun phrase after `is` ("Ferry is a queue written by the Lighthouse team") gives no
  question;
- the words after the span up to the first clause boundary stay in place (the rest of
  the sentence is the answer's, not the question's);
- a subordinate clause that opens the sentence ("While it runs, Tarnwick writes ...")
  ends the question instead ("To which file does Tarnwick write ... while it runs?");
- "at" before a proper name asks "where" ("built it at Marrowgate Freight": a place
  or a body, which "at what" asks in no English a user writes);
- a span inside a relative clause on the predicate of "is" ("Lanternfish is the relay
  that Teodora Quill built at X") is asked of the clause restated with the subject in
  its gap (`relative_clause`: "Teodora Quill built Lanternfish at X" -> "Where did
  Teodora Quill build Lanternfish?").

A sentence outside these rules gives None, and the echo question stands.
"""

from __future__ import annotations

import re

from dlm.rows.facts.model import Fact
from dlm.rows.facts.prose import PREPOSITIONS as _PREPOSITIONS
from dlm.rows.facts.prose import SUBORDINATORS, VERBS, sentence_subject, third_person

_COPULAS = frozenset("is are was were".split())
_MOVES_ITSELF = frozenset("is are was were can could will would should must may might".split())
_DETERMINERS = frozenset({"the", "a", "an"})
_LEADS = frozenset("the a an each every all some its their our this these that those one".split())
_IRREGULAR_PAST = {
    "began": "begin", "brought": "bring", "built": "build", "chose": "choose", "drew": "draw",
    "fell": "fall", "found": "find", "gave": "give", "got": "get", "grew": "grow", "held": "hold",
    "kept": "keep", "knew": "know", "led": "lead", "left": "leave", "lost": "lose", "made": "make",
    "meant": "mean", "met": "meet", "ran": "run", "sent": "send", "set": "set", "spent": "spend",
    "stood": "stand", "took": "take", "told": "tell", "threw": "throw", "went": "go", "won": "win",
    "wrote": "write",
}  # fmt: skip
_NOUNISH = re.compile(r"[A-Za-z][\w-]*")
# words that end a fragment or open an adverbial, never a subject's last or first word
_FUNCTION_WORDS = frozenset(
    """a an the of in on at to for from with without by about into over under and or but
    when while if so that which who it its their this these those his her our your as
    always also only then than not""".split()
)
_LEADING = frozenset("at in on by with for from as there here please note".split()) | SUBORDINATORS
_CLAUSE_BOUNDARY = re.compile(
    r"[,:;(]|\s(?:so|when|whenever|which|who|that|until|while|because|unless|since|whereas|before|after|if|and|or|but)\s"
)
# "... is the webhook relay that Teodora Quill built ...": a copula, a named head, a relative clause
_RELATIVE = re.compile(
    r" (?:is|are|was|were) (?:the|a|an) (?P<head>(?:[\w-]+ ){1,3}?)(?:that|which|who) (?P<clause>.+)$"
)
# a subordinate clause before the main one, which the question ends with instead
_INTRO = re.compile(r"((?:When|Whenever|While|If|Once|After|Before|Unless|Until) [^,`:;]+), ")


def fronted(fact: Fact, ask: str) -> str | None:
    """`fact`'s sentence as a question with `ask` (its question phrase: "which port",
    "how many seconds", "what") fronted (module rules), or None where the rules do not
    read the sentence."""
    sentence, intro = fact.answer.rstrip(" .!"), ""
    opening = _INTRO.match(sentence)
    if opening and fact.name not in opening.group(1):  # "While it runs, Tarnwick writes ..."
        intro, sentence = opening.group(1), sentence[opening.end() :]
    subject = _opening_subject(sentence, fact.name)
    if subject is None:
        return None
    rest = sentence[len(subject) :].split(" ")[1:]
    if len(rest) < 2 or rest[0].lower() in _FUNCTION_WORDS or rest[1] in VERBS:
        return None  # a verb right after the verb: the subject was cut short ("The design | notes live")
    verb, predicate = rest[0], " ".join(rest[1:])
    at = predicate.find(fact.name)
    if at < 0:
        return None
    before, after = predicate[:at].rstrip(), predicate[at + len(fact.name) :]
    if after[:1] not in ("", " ", ",", ";", ":", ")"):
        return None  # the span is part of a longer word ("CVE" of "CVE-2016-0702")
    if _clause_cut(before) != before:
        return None  # the span sits in a later clause: which words are its question's is unclear
    moved = _moved_phrase(before.split(" ") if before else [], after, ask, fact.name, fact.what == "name")
    inverted = _inverted(verb, _lowered(subject))
    if moved is None or inverted is None:
        return None
    phrase, kept, tail = moved
    if verb.lower() in _COPULAS and kept.split(" ")[0].lower() in _DETERMINERS:
        return None  # "Ferry is a small task queue written by ...": the span's phrase is inside the predicate noun's
    tail = _clause_cut(tail)
    intro = intro[:1].lower() + intro[1:]
    question = " ".join(w for w in (phrase, inverted, kept, tail, intro) if w)
    return f"{question[:1].upper()}{question[1:]}?"


def _opening_subject(sentence: str, span: str) -> str | None:
    """The subject that opens `sentence` (`dlm.rows.facts.prose.sentence_subject`), or
    None: none found, `span` inside it, or an adverbial or a fragment in its place."""
    subject = sentence_subject(sentence[:1].upper() + sentence[1:])
    if subject is None or span in subject:
        return None
    words = subject.split(" ")
    if words[0].lower() in _LEADING or words[-1].lower() in _FUNCTION_WORDS:
        return None  # an adverbial or a fragment, not a subject
    return subject


def relative_clause(fact: Fact) -> Fact | None:
    """`fact` restated as the relative clause that holds its span, with the sentence's
    subject in the clause's gap, or None: "Lanternfish is the webhook relay that Teodora
    Quill built at Marrowgate Freight." -> "Teodora Quill built Lanternfish at Marrowgate
    Freight." (the gap is the object: a subject opens the clause); "Saltmarsh is the
    cache that serves tiles under `/t`." -> "Saltmarsh serves tiles under `/t`." (the gap
    is the subject: a verb opens the clause). The copula's predicate must be `the`/`a`/
    `an`, one to three naming words and `that`/`which`/`who`; the clause's own subject
    is found by the rules of `dlm.rows.facts.prose`. The restatement is asked by the
    same rules as any statement (`fronted`, else its echo question), its answer stays
    the sentence the document wrote."""
    sentence = fact.answer.rstrip(" .!")
    subject = _opening_subject(sentence, fact.name)
    if subject is None:
        return None
    match = _RELATIVE.match(sentence, len(subject))
    if match is None or fact.name not in match.group("clause") or not named_words(match.group("head").split()):
        return None
    clause = match.group("clause")
    first = clause.split(" ", 1)[0]
    if first in VERBS or third_person(first) or first in _IRREGULAR_PAST or first.endswith("ed"):
        restated = f"{subject} {clause}"  # the gap is the clause's subject
    else:
        inner = sentence_subject(clause[:1].upper() + clause[1:])
        if inner is None or fact.name in inner and inner != fact.name:
            return None
        rest = clause[len(inner) :].split(" ")[1:]
        if not rest or rest[0].lower() in _FUNCTION_WORDS:
            return None
        restated = " ".join([clause[: len(inner)], rest[0], _lowered(subject), *rest[1:]])
    restated = restated[:1].upper() + restated[1:] + "."
    return fact._replace(answer=restated)


def inverted_question(text: str) -> str:
    """An embedded question as a direct one: "how many readings the ring buffer holds"
    -> "how many readings does the ring buffer hold", "where evicted tiles are written"
    -> "where are evicted tiles written" (a doc comment's gloss, `dlm.rows.facts.phrasing`).

    The clause's verb is the first of `VERBS`, a modal or a word in `-s` after the
    question phrase; its subject starts at the last `the`/`a`/`an` before the verb that
    no preposition precedes ("how many bytes of a body a check reads": "a check"), or,
    with none, right after a one- or two-word question phrase ("where", "how long").
    The verb is looked for in the first clause only (up to a comma, a bracket or a
    subordinator such as "before"). Text the rule does not read comes back unchanged."""
    words = text.split(" ")
    clause = len(_clause_cut(text).split(" "))  # the verb is the first clause's
    starts = [
        i
        for i in range(1, len(words))
        if words[i].lower() in _DETERMINERS and words[i - 1].lower() not in _PREPOSITIONS
    ]
    bare = [w.strip(",;:()") for w in words]
    # a verb of the lists first ("where evicted tiles are written": not "tiles"), else a word in -s
    verbs = [j for j in range(2, clause) if bare[j] in VERBS or bare[j] in _MOVES_ITSELF]
    verbs += [j for j in range(2, clause) if third_person(bare[j])]
    for j in verbs:
        start = max((i for i in starts if i < j), default=None)
        if start is None and words[1].lower() in ("long", "often", "far", "much"):
            start = 2
        elif start is None and words[0].lower() in ("where", "when", "why"):
            start = 1
        if start is None or start >= j:
            continue  # a plural before the subject ("how many readings the ring holds")
        inverted = _inverted(bare[j], " ".join(words[start:j]))
        if inverted is None:
            return text
        return " ".join([*words[:start], inverted, *words[j + 1 :]])
    return text


def counted_question(text: str) -> str | None:
    """A gloss that counts with "this many" as the question it asks, the question
    phrase first: "Deliveries are retried this many times before X" -> "How many times
    are deliveries retried before X"; None where the rules of `fronted` do not read it."""
    match = re.search(r"\b[Tt]his many (\S+)", text)
    subject = sentence_subject(text[:1].upper() + text[1:])
    if match is None or subject is None or match.start() <= len(subject):
        return None
    verb, _, between = text[len(subject) : match.start()].strip().partition(" ")
    inverted = _inverted(verb, _lowered(subject))
    if inverted is None or _clause_cut(between) != between:
        return None
    rest = text[match.end() :].strip()
    return " ".join(w for w in (f"How many {match.group(1)}", inverted, between, rest) if w)


def _clause_cut(text: str) -> str:
    """`text` up to its first clause boundary outside backticks, stripped."""
    padded = f" {text} "
    for match in _CLAUSE_BOUNDARY.finditer(padded):
        if padded[: match.start()].count("`") % 2 == 0:
            return padded[: match.start()].strip()
    return text.strip()


def _moved_phrase(words: list[str], after: str, ask: str, span: str, name: bool) -> tuple[str, str, str] | None:
    """(the phrase that moves, the predicate's words before it that stay, the words
    after the span), or None. `words`: the predicate's words before the span; `name`:
    the span is a proper name, which after "the" and other words is their noun phrase's
    head ("the following URL"), not a name for it."""
    following = after.split(" ")[1:] if after.startswith(" ") else []
    if words and words[-1] == "every" and span[:1].isdigit():
        return "how often", " ".join(words[:-1]), after
    if len(words) >= 2 and words[-1].lower() in _DETERMINERS and words[-2].lower() in _PREPOSITIONS:
        named = named_words(following)  # "for the [Skerrow Point] lifeboat crew"
        if not named:
            return None
        rest = following[len(named) :]
        if following[len(named) - 1] != named[-1]:  # the last named word carried the comma
            rest = [following[len(named) - 1][len(named[-1]) :], *rest]
        if not ends_phrase(rest):
            return None
        return f"{words[-2]} which {' '.join(named)}", " ".join(words[:-2]), " ".join(rest)
    for size in (1, 2, 3):  # "to the MQTT topic [`brackenhold/gusts`]"
        named = words[-size:]
        if (
            not name
            and len(words) >= size + 2
            and words[-size - 1].lower() in _DETERMINERS
            and words[-size - 2].lower() in _PREPOSITIONS
            and named_words(named) == named
            and ends_phrase(following)
        ):
            return f"{words[-size - 2]} which {' '.join(named)}", " ".join(words[: -size - 2]), after
    if words and words[-1].lower() in _PREPOSITIONS and ends_phrase(following):
        if name and words[-1].lower() == "at":
            return "where", " ".join(words[:-1]), after  # "built it at Marrowgate Freight": a place or a body
        return f"{words[-1]} {ask}", " ".join(words[:-1]), after
    if not words and span.isdigit() and (counted := counted_words(following)):
        return f"how many {' '.join(counted)}", "", " ".join(following[len(counted) :])  # "holds 8192 tiles"
    if not words and ends_phrase(following):
        return ask, "", after  # the span is the whole object
    return None


def counted_words(following: list[str]) -> list[str]:
    """The plural (with one describing word before it) that a bare number counts, from
    the words after it ("tasks by default" -> ["tasks"], "added folios" -> ["added",
    "folios"]), or []: a word in `-s` that reads as no verb's and no `-ss`/`-us` noun
    (`third_person`: "status", "address" are no plurals)."""
    bare = [word.rstrip(",;:)") for word in following[:2]]
    if bare and third_person(bare[0]) and bare[0] not in VERBS:
        return bare[:1]
    if (
        len(bare) == 2
        and following[0] == bare[0]  # no comma between them
        and re.fullmatch(r"[a-z][a-z-]+", bare[0])
        and bare[0] not in _FUNCTION_WORDS | VERBS
        and third_person(bare[1])
    ):
        return bare
    return []


def named_words(words: list[str]) -> list[str]:
    """The leading words of `words` that can name a thing (not a function word, no punctuation)."""
    named: list[str] = []
    for word in words[:3]:
        bare = word.rstrip(",;:")
        lower = bare.lower()
        if (
            not _NOUNISH.fullmatch(bare)
            or lower in _FUNCTION_WORDS | _PREPOSITIONS
            or _CLAUSE_BOUNDARY.fullmatch(f" {lower} ")
        ):
            break
        named.append(bare)
        if bare != word:  # a comma ends the phrase
            break
    return named


def ends_phrase(following: list[str]) -> bool:
    """Whether a noun phrase ends before `following`: nothing, a preposition, a clause
    or punctuation follows (a coordinator or another word continues it)."""
    if not following:
        return True
    word = following[0].lower()
    if word in ("and", "or", "but") or word.startswith(("'s", "\u2019s")):
        return False  # a coordinated or possessive phrase goes on
    punctuation = not word[:1].isalnum() and not word.startswith(("`", '"', "'", "#", "/", "~", "["))
    return word in _PREPOSITIONS or _CLAUSE_BOUNDARY.fullmatch(f" {word} ") is not None or punctuation


def _inverted(verb: str, subject: str) -> str | None:
    """The auxiliary, the subject and the verb's remaining form, in question order."""
    word = verb.lower()
    if word in _MOVES_ITSELF:
        return f"{word} {subject}"
    if not word.isalpha() or word in ("has", "have", "had"):
        return None
    if word in _IRREGULAR_PAST:
        return f"did {subject} {_IRREGULAR_PAST[word]}"
    if word.endswith("ed"):
        return f"did {subject} {_past_base(word)}"
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return f"does {subject} {_present_base(word)}"
    return f"do {subject} {word}"


def _present_base(word: str) -> str:
    """A verb's base form from its `-s` form: "carries" -> "carry", "pushes" -> "push"."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zzes", "oes")):
        return word[:-2]
    return word[:-1]


def _past_base(word: str) -> str:
    """A regular verb's base form from its `-ed` form: "carried" -> "carry", "mapped"
    -> "map", "stored" -> "store", "created" -> "create", "started" -> "start"."""
    stem = word[:-2]
    if stem.endswith("i"):
        return stem[:-1] + "y"
    if re.search(r"[^aeiou][aeiou]([^aeiouwxylsz])\1$", stem):  # a doubled final consonant
        return stem[:-1]
    if re.search(r"(?:^[aeiou][^aeiouwxy]|[^aeiou][aeiou][rvcsgzmk]|at|iz|ys|ur|[rnp]s|[^aeioul]l|dg|ng|uc)$", stem):
        return stem + "e"
    return stem


def _lowered(subject: str) -> str:
    """The subject as it reads after the auxiliary: a capital that only the sentence
    start gave it goes, on a determiner or a common noun's plural or participle ("The
    status page" -> "the status page", "Readings" -> "readings"); a capital word before
    another is a name's ("Idris Fenwick", "Charles Darwin") and stays."""
    first, *rest = subject.split(" ")
    named = bool(rest) and rest[0][:1].isupper()
    common = first.isalpha() and first[1:].islower() and first.endswith(("s", "ed", "ing")) and not named
    if first.lower() in _LEADS or first in ("You", "We", "They", "It") or common:
        return subject[:1].lower() + subject[1:]
    return subject
