"""Statements of prose: Markdown and text files of the sources, and the document's own
prose sections and answers, split into sentences that each state a fact.

Rules:
- Markdown is read block by block (`dlm.rows.facts.markdown`): a paragraph, a list
  item, a block quote's text, a table's row as statements (`dlm.rows.facts.tables`:
  "The default of `--port` is 8080."); code, headings and front matter are skipped,
  and a heading, code or a table ends what a pronoun can refer to; a list item without
  a full stop is ended with one where it reads as a sentence (one line, a capital, a
  subject found: "Logs are kept for 30 days"), else it states nothing;
- a block splits into sentences at `.`, `!` or `?` followed by a space and a capital,
  a backtick, a quote or a bracket, or the block's end (never after `e.g.`, `i.e.`,
  `etc.`, `vs.`, `cf.`), and a sentence into its clauses at `; ` (each an independent
  clause by the semicolon's rule of punctuation: the first ends in `.`, the next starts
  with a capital); a statement ends in `.` or `!`, has at least 3 words and at most
  `MAX_STATEMENT` characters (questions give none); a sentence that announces a list
  with `:` states what it says before the colon ("Saltmarsh exports metrics under
  `/saltmetrics`:" -> "... under `/saltmetrics`."), and one with no span there gives
  no fact, as any other;
- a statement whose predicates are joined by `and` ("... hands out slots of 30 minutes
  and holds a booking for 45 minutes.") is one statement per predicate, each with the
  words before the first verb (`conjuncts`), where every part holds a span: each
  answer then states one fact, not a neighbour's number beside it;
- a sentence's subject is its words before the first verb (an auxiliary such as
  `is`/`can`/`has`, a verb of making such as `wrote`/`started`/`built`, or a lowercase
  word past the first ending in `s`: "The ferry daemon listens ..."; right after a
  capitalised first word, such a word only where an object follows it, a determiner,
  a capital, a number or a code span: "Saltmarsh exports Prometheus metrics", not
  "Load balancers check health"; never a function word such as `its` or `always`, nor
  a word right after a number: "Every 75 seconds" has no verb, nor a word that closes a
  preposition's phrase: "time on the shared microscopes"), at most 8 words, no
  comma or colon ("In `ring.c`: `push` adds ..." has none), without an adverb right
  before the verb ("The relay always retries ..." -> "The relay"); none found: no
  subject;
- a sentence starting with `It`, `They`, `He`, `She`, or `This` followed by a verb,
  whose subject is that pronoun, takes the previous sentence's subject in its place
  ("It keeps 64 MB of journal." after "The ferry daemon listens ..." -> "The ferry
  daemon keeps 64 MB of journal."), when that sentence had one; otherwise the
  sentence gives no fact (it would state something about nobody knows what);
- a sentence whose subject is a proper name and whose verb's object is `it`, the
  word after the verb ("Ysolde Brannick started it."), names the previous sentence's
  subject there ("Ysolde Brannick started Tarnwick."; an `it` further on may be
  another noun's: "... when a hive looks as if it has swarmed"), which stays what a later pronoun refers to: a person
  who made the thing is said about it, the thing stays the topic;
- salient spans, by priority, never overlapping: an identifier, path or command in
  backticks; a URL; a path (`/var/lib/x`, `./x`, `~/x`, `a/b.txt`, `a/b/c`); a number
  with its unit (`30 seconds`, `64 MB`, `port 8080`, `version 2.1`), a clock time
  (`04:30`), or of 2 or more digits (`30,000` one number); a proper name
  (`PostgreSQL`, `gRPC`, `TLS`, a channel or tag such as `#ops-alerts`, a capitalised
  word inside the sentence, or a run of
  them: `Ysolde Brannick`; at the sentence's start, a run of two or more that is not
  led by a determiner: `Casimir Oduya wrote ...`, not `The Larder keeps ...`; with a
  possessive before another capitalised run, all of it: `St Odrenna's College`); a number
  or a name is a whole word, not the `Node` of `Node.js` or the `2016` of
  `CVE-2016-0702` or the `20` of `C++20` (its question would ask for part of a word). A sentence gives
  one fact per span, the first `MAX_SPANS` by position; a span that is not a strong
  probe key (`dlm.rows.facts.model.strong_key`) gives none;
- a fact's subject (the probe split's unit) is the sentence's subject, casefolded, or
  the sentence itself, so all statements about one subject fall on the same side.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

from dlm.rows.facts.markdown import ListItem, blocks
from dlm.rows.facts.model import Fact, strong_key
from dlm.rows.facts.tables import CellStatement

MAX_STATEMENT = 240  # characters of a statement
MAX_SPANS = 3  # facts per sentence
MAX_SUBJECT_WORDS = 8

_PRONOUNS = frozenset({"It", "This", "They", "He", "She"})
VERBS = frozenset(
    """is are was were has have had can could will would should must may might does do did
    uses use runs run keeps keep lives live stores store listens listen reads read writes write
    takes take gives give makes make needs need started wrote built created made designed founded
    began maintains maintained""".split()
)
# words that open a subordinate clause before the main one ("Although Windows has ...", "When
# the retries ..."): never a proper name's first word, nor a topic's
SUBORDINATORS = frozenset("if when while after before once although though because since unless until whereas".split())
_DETERMINERS = frozenset(
    "The A An This That These Those Each Every Our Its Their My Your All Some No One New Old".split()
) | {word.capitalize() for word in SUBORDINATORS}
_OBJECT_OPENERS = frozenset("the a an each every all its their one two three".split())
# capitalised sentence openers that are no name ("Now supports ...", "Same as ...")
_NOT_SUBJECTS = frozenset("Now Also Then Here There Please Note Same See Only Just Still Thus Hence Instead".split())
# prepositions that open a place, time or means (`dlm.rows.facts.fronted` asks by them);
# not "of": its phrase belongs to the noun before it ("the layout of the library")
PREPOSITIONS = frozenset("at on in to into from for by with under over through via behind inside onto".split())
# prepositions whose noun phrase holds no verb ("the layout of the files", "time on the shared microscopes")
_PHRASE_PREPOSITIONS = PREPOSITIONS | {"of"}
_AUXILIARIES = frozenset("is are was were has have had can could will would should must may might".split())
_NOT_VERBS = ("ss", "us", "is", "ics", "ous")  # "class", "status", "analysis", "physics"
# function words that end in `s` and are never a verb ("listing its name", "always")
_FUNCTION_S = frozenset(
    """its hers ours yours theirs perhaps always sometimes towards afterwards besides whereas
    upwards downwards backwards onwards sideways nowadays indoors outdoors overseas""".split()
)
# adverbs between a subject and its verb ("The relay always retries ...")
_ADVERBS = frozenset("always also often usually never now only still sometimes just already rarely seldom".split())
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_ABBREV = ("e.g", "i.e", "etc", "vs", "cf")
_CLAUSE = re.compile(r";(?=\s)")
_OBJECT_IT = re.compile(r" \S+ (it)\b")  # the first verb's object, right after it
_SENTENCE_END = re.compile(r"[.!?](?=\s+[A-Z`\"'(\[]|\s*$)")
# a URL, its trailing punctuation left to the sentence; a clock time ("04:30", "23:59:59")
URL = r"https?://[^\s<>`\"')]+[^\s<>`\"').,;:!?]"
CLOCK_TIME = r"[0-2]?\d:[0-5]\d(?::[0-5]\d)?"
_SPANS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("code", re.compile(r"`[^`\n]{2,80}`")),
    ("URL", re.compile(URL)),
    ("path", re.compile(r"(?<![\w/.`-])(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]*[\w/]")),
    (
        "number",
        re.compile(
            r"(?<![\w.+])(?<!\w-)(?:(?:[Pp]ort|[Vv]ersion)\s\d(?:[\d.]*\d)?\b|"
            + CLOCK_TIME
            + r"\b|\d[\d,]*(?:\.\d+)?\s?(?:%|(?:ms|s|sec|seconds?|"
            r"min|minutes?|h|hours?|days?|weeks?|months?|years?|[KMGT]i?B|bytes?|bits?|tokens?|steps?|epochs?|"
            r"rows?|files?|lines?|characters?|threads?|cores?|workers?|retries|times|attempts|requests|"
            r"connections|entries|px|[kMG]?Hz|fps)\b)|(?:\d{1,3}(?:,\d{3})+|\d{2,})(?:\.\d+)?(?![\w.]|-\w))"  # not "2016" of "CVE-2016-0702"
        ),
    ),
    (
        "name",
        re.compile(
            r"(?<![\w#])#[A-Za-z][\w-]*[A-Za-z0-9]"
            # a name is a whole word: not the "Node" of "Node.js", the "API" of "Node-API"
            r"|(?<![\w.-])(?:(?:[A-Za-z][a-z0-9]*[A-Z][A-Za-z0-9]*|[A-Z]{2,}[0-9]*)\b"
            # a possessive before a capitalised run is part of the name: `St Odrenna's College`
            r"|(?<=[a-z0-9,;:)] )[A-Z][a-z]+(?: [A-Z][a-z]+)*(?:['\u2019]s(?: [A-Z][a-z]+)+)?"
            r"|^[A-Z][a-z]+(?: [A-Z][a-z]+)+(?:['\u2019]s(?: [A-Z][a-z]+)+)?)(?![\w-]|\.\w)"
        ),
    ),
)


def prose_facts(relpath: str, text: str, first_line: int = 1) -> list[Fact]:
    """The `statement` facts of a prose text in source order (module rules).

    Args:
        relpath: the file's path relative to its sources root, or the document's name.
        text: Markdown or plain text.
        first_line: the line `text` starts on in its file (a document's section).
    """
    facts: list[Fact] = []
    previous: str | None = None
    for line, block in blocks(text, tables=True):
        if block is None:  # a heading, code or a table: what a pronoun refers to ends here
            previous = None
            continue
        if not isinstance(block, str):  # a table's row
            facts += _cell_facts(relpath, first_line - 1 + line, block)
            continue
        if isinstance(block, ListItem):
            block = _ended(block)
        for offset, sentence in _sentences(block):
            subject = sentence_subject(sentence)
            if subject in _PRONOUNS:
                if not previous:
                    continue  # whom the pronoun names is unknown: a statement about nothing
                sentence, subject = previous + sentence[len(subject) :], previous
            elif previous and _proper(subject) and (it := _OBJECT_IT.match(sentence, len(subject or ""))):
                named = (
                    previous[:1].lower() + previous[1:]
                    if previous.split(" ")[0].lower() in _OBJECT_OPENERS
                    else previous
                )
                sentence = sentence[: it.start(1)] + named + sentence[it.end(1) :]
                subject = previous  # the thing stays the topic (module rules)
            previous = subject
            if sentence.endswith(":"):  # it announces a list: what it says so far is stated
                sentence = sentence[:-1].rstrip() + "."
            if not _statement(sentence):
                continue
            at = first_line - 1 + line + block.count("\n", 0, offset)
            unit = (subject or sentence).casefold()
            for part in conjuncts(sentence):
                facts += [Fact("statement", relpath, at, span, what, part, unit) for what, span in spans(part)]
    return facts


def _cell_facts(relpath: str, line: int, cells: list[CellStatement]) -> list[Fact]:
    """The facts of a table row's statements: each value cell's spans, asked by the
    row's name (its subject), never a span the sentence holds before the value (the
    question would replace that one)."""
    return [
        Fact("statement", relpath, line, span, what, cell.sentence, cell.name.casefold())
        for cell in cells
        for what, span in spans(cell.sentence)
        if cell.sentence.find(span) >= cell.at
    ]


def _ended(item: str) -> str:
    """A list item without a full stop, ended with one where it reads as a sentence:
    one line, opening with a capital, a subject found (`sentence_subject`: "Logs are
    kept for 30 days"); a changelog's "[`f6a6638`] - build: ..." or a phrase ("Python
    3.10 or newer") stays as written, and gives nothing."""
    if item.rstrip()[-1:] in (".", "!", "?", ":", ";") or "\n" in item or not item[:1].isupper():
        return item
    return item + "." if sentence_subject(item + ".") is not None else item


def _sentences(block: str) -> Iterator[tuple[int, str]]:
    """(offset in `block`, sentence with whitespace collapsed) of each sentence."""
    start = 0
    for match in _SENTENCE_END.finditer(block):
        if block[start : match.start()].lower().endswith(_ABBREV):
            continue
        yield from _sentence(block, start, match.end())
        start = match.end()
    yield from _sentence(block, start, len(block))


def _sentence(block: str, start: int, end: int) -> Iterator[tuple[int, str]]:
    """The clauses of the sentence `block[start:end]` (module rules), each with its
    offset: every clause but the last ends in `.`, every clause but the first starts
    with a capital."""
    cuts = [start] + [m.end() for m in _CLAUSE.finditer(block, start, end)] + [end]
    for i, (a, b) in enumerate(itertools.pairwise(cuts)):
        raw = block[a:b]
        text = " ".join(raw.split()).removesuffix(";")
        if not text:
            continue
        if i < len(cuts) - 2:
            text += "."
        if i:
            text = text[:1].upper() + text[1:]
        yield a + len(raw) - len(raw.lstrip()), text


def sentence_subject(sentence: str) -> str | None:
    """The words before the sentence's first verb (module rules), or None."""
    words = sentence.split(" ")
    if words[0] in _PRONOUNS - {"This"} or (
        words[0] == "This" and len(words) > 1 and _verb(words[1].strip(",;:"), after_first=True)
    ):
        return words[0]
    verb = _first_verb(words)
    if verb is None:
        return None
    while verb > 1 and words[verb - 1] in _ADVERBS:
        verb -= 1  # "The relay always retries": the adverb goes with the verb
    subject = " ".join(words[:verb])
    if "," in subject or ":" in subject:
        return None  # a clause or a label before the subject: which words are it is unknown
    return subject if subject[:1].isupper() or subject[:1] == "`" else None


def _first_verb(words: list[str]) -> int | None:
    """The index of the sentence's first verb among its first `MAX_SUBJECT_WORDS + 1`
    words; an `-s` word before an auxiliary ("The first scales were set up") or after a
    number ("Every 75 seconds") is a plural noun, not a verb."""
    for i, word in enumerate(words[: MAX_SUBJECT_WORDS + 1]):
        if i and _NUMBER.fullmatch(words[i - 1]) and word not in VERBS:
            continue  # a plural noun counted, not a verb: "Every 75 seconds", "3 files"
        if word not in VERBS and _ends_prepositional_phrase(words, i):
            continue  # "time on the shared microscopes", "The list of feeds polls ..."
        if i and _verb(word, after_first=i > 1 or not words[0][:1].isupper() or _object_follows(words, i)):
            if word in VERBS or i + 1 >= len(words) or words[i + 1] not in _AUXILIARIES:
                return i
    return None


def _ends_prepositional_phrase(words: list[str], i: int) -> bool:
    """Whether `words[i]` closes the noun phrase of a preposition at most three words
    before it, with only lowercase words that read as no verb between ("on the shared
    microscopes", "of feeds"): a noun inside the phrase, not the sentence's verb."""
    for j in range(i - 1, max(i - 4, -1), -1):
        word = words[j]
        if word in _PHRASE_PREPOSITIONS:
            return True
        if not (word.isalpha() and word.islower()) or word in VERBS or third_person(word):
            return False
    return False


def conjuncts(sentence: str) -> list[str]:
    """A statement whose predicates are joined by `and` as one statement per predicate,
    each with the words before the first verb ("The Ledger hands out slots of 30
    minutes and holds a booking for 45 minutes." -> "The Ledger hands out slots of 30
    minutes.", "The Ledger holds a booking for 45 minutes."); else `[sentence]`.

    A predicate starts at `and` followed by a verb's `-s` form or a verb of `VERBS` and
    then what opens its object (a determiner, a capitalised word, a number or a code
    span: "and gives each feed ...", not "copies files and directories to ..."). The
    sentence is split only where every part holds a salient span: two facts stated in
    one answer are learnt bound to each other (a neighbour's number answers the other's
    question), and each part alone is still a sentence about the same subject.
    """
    words = sentence.split(" ")
    verb = _first_verb(words)
    if verb is None:
        return [sentence]
    cuts = [
        i
        for i in range(verb + 1, len(words) - 2)
        if words[i] == "and" and _verb(words[i + 1], after_first=True) and _opens_object(words[i + 2])
    ]
    if not cuts:
        return [sentence]
    head = words[:verb]
    starts, ends = [verb, *(cut + 1 for cut in cuts)], [*cuts, len(words)]  # each predicate without its `and`
    parts = [" ".join(head + words[a:b]) for a, b in zip(starts, ends, strict=True)]
    parts = [part.rstrip(",") + "." for part in parts[:-1]] + parts[-1:]  # the last keeps the sentence's end
    return parts if all(spans(part) for part in parts) else [sentence]


def _opens_object(word: str) -> bool:
    """Whether `word` opens a verb's object: a determiner, a capital, a number or a code span."""
    return word.lower() in _OBJECT_OPENERS or word[:1].isupper() or word[:1].isdigit() or word[:1] == "`"


def _object_follows(words: list[str], i: int) -> bool:
    """Whether the word after `words[i]` opens a noun phrase that is the object of a verb
    there: a determiner, a capitalised word, a number or a code span ("Saltmarsh exports
    Prometheus metrics", "Tarnwick polls every feed"), not a word that may be a plural
    subject's verb ("Load balancers check health")."""
    first, following = words[0], words[i + 1] if i + 1 < len(words) else ""
    if i != 1 or first in _DETERMINERS | _PRONOUNS | _NOT_SUBJECTS or first.endswith("ly"):
        return False  # "The parameters `env` ...", "Synchronously copies `src` ...": no name opens it
    return _opens_object(following)


def _proper(subject: str | None) -> bool:
    """Whether a subject is a proper name: every word capitalised, the first no
    determiner or pronoun."""
    words = (subject or "").split(" ")
    return (
        bool(subject)
        and words[0] not in _DETERMINERS | _PRONOUNS
        and all(w[:1].isupper() and w[1:].islower() for w in words)
    )


def _verb(word: str, *, after_first: bool) -> bool:
    return word in VERBS or (after_first and third_person(word))


def third_person(word: str) -> bool:
    """Whether a lowercase word reads as a verb's `-s` form ("listens"), not a noun in
    `-ss`, `-us`, `-is`, `-ics` or `-ous` ("class", "status", "analysis", "physics") or
    an abbreviation ("vs"), nor a function word ("its", "always")."""
    return (
        len(word) > 2
        and word.isalpha()
        and word.islower()
        and word.endswith("s")
        and not word.endswith(_NOT_VERBS)
        and word not in _FUNCTION_S
    )


def _statement(sentence: str) -> bool:
    return sentence[-1] in ".!" and len(sentence.split()) >= 3 and len(sentence) <= MAX_STATEMENT


def spans(sentence: str) -> list[tuple[str, str]]:
    """(kind, span) of the salient spans of `sentence` (module rules), by position:
    kind is "identifier", "path", "command", "URL", "number" or "name"."""
    taken: list[tuple[int, int, str, str]] = []
    for kind, pattern in _SPANS:
        for match in pattern.finditer(sentence):
            a, b = match.span()
            if any(a < y and x < b for x, y, _, _ in taken):
                continue
            span = match.group()
            key = span.strip("`")
            if kind == "path" and not _path_like(key):
                continue
            if kind == "name" and a == 0 and (" " not in span or span.split(" ")[0] in _DETERMINERS):
                continue  # a sentence's first word is capitalised whatever it is
            if strong_key(key):
                taken.append((a, b, _code_kind(key) if kind == "code" else kind, span))
    return [(kind, span) for _, _, kind, span in sorted(taken)[:MAX_SPANS]]


def _path_like(path: str) -> bool:
    """Whether a slashed word is a path, not `and/or` or `TCP/IP`."""
    return path.startswith(("/", "./", "../", "~/")) or path.count("/") >= 2 or bool(re.search(r"\.\w{1,5}$", path))


def _code_kind(code: str) -> str:
    if re.fullmatch(URL, code):
        return "URL"
    if "/" in code and " " not in code:
        return "path"
    if " " in code and re.match(r"[a-z][\w.-]*\s", code) and "(" not in code:
        return "command"
    return "identifier"
