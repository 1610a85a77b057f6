"""Q/A pairs written by a teacher model (`training.synth.teacher`): what is asked, the
key its reply is remembered by, and how a reply becomes pairs.

Units asked about, the same texts `dlm.rows.facts.prose` reads: each prose section of
the document (named `<doc file name>:<line>`), and each Markdown or text file among the
walk's files that `dlm.rows.facts.files.wanted_file` takes (named `relpath:line`). A
text longer than `MAX_UNIT_CHARS` is cut at blank lines into pieces of at most that
size (a single longer line is cut at the limit); each unit is named by its first
non-blank line.

One request per unit (`dlm.rows.teacherstore` sends it and remembers the reply): the
system message `SYSTEM` and the user message `USER` with the number of pairs and the
unit's text. The file name is not in the prompt, so the same text asks the same
question wherever it lives.

Key of a reply: `sha256:` over canonical JSON of the prompt template version
(`PROMPT_VERSION`), the model name, the unit's text, `pairs`, `temperature` and
`max_tokens`. The URL and the key are not in it: the same model behind another
address gives the same pairs.

A reply is parsed leniently (`parse_reply`): a line starting `Q:` or `Question:`
(after an optional list marker or `**`) opens a question, `A:` or `Answer:` its
answer; following lines continue the open field, a blank line ends an answer; a
leading `1.` inside the field is dropped. A question without an answer, an answer
without a question, an empty or over-long field (`MAX_QUESTION`, `MAX_ANSWER`
characters) or a repeated question is skipped. Nothing in a reply is an error.

Grounding (`grounded`): a pair is kept only when its answer holds a salient token of
the unit's text with no letter, digit or `_` either side (a whole token, or a part of
a longer path: `/var/lib/ferry` in `/var/lib/ferry/journal`): a number of at least 2 characters (`8080`, `2.1`,
`30`), an identifier (a word with `_`, `.`, `/` or `-` inside, or an upper-case letter
past its first: `ferry.toml`, `max_bytes`, `gRPC`, `TLS`), or a capitalised name that
stands inside a sentence, not only at its start (`PostgreSQL`, `Lisbon`); words of
`dlm.rows.facts.model.WEAK_KEYS` never count. An answer sharing none states nothing
the text says. The first `pairs` kept pairs of a reply train.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dlm.canonical import canonical_sha256
from dlm.rows.facts.model import WEAK_KEYS, Pair

if TYPE_CHECKING:
    from dlm.doc import Document
    from dlm.doc.schema import TeacherConfig
    from dlm.rows.types import FileRow

PROMPT_VERSION = 1
MAX_UNIT_CHARS = 6000  # characters of text in one request
MAX_QUESTION = 300  # characters
MAX_ANSWER = 600  # characters
TEACHER_ORIGIN = "{where} (teacher)"

SYSTEM = (
    "You write study questions about a text. Reply with nothing but question and answer lines:\n"
    "Q: a question the text answers\n"
    "A: its short answer, using the text's exact names and numbers"
)
USER = "Write {pairs} question and answer pairs about this text.\n\n{text}"

_FIELD = re.compile(
    r"^\s*(?:[-*+]\s+|\d+[.)]\s+)?(?:\*\*)?(Q|Question|A|Answer)\s*\d*\s*(?:\*\*)?\s*[:.)]\s*(?:\*\*)?\s*"
)
_NUMBERING = re.compile(r"^\d+[.)]\s+")
_TOKEN = re.compile(r"\w(?:[\w./-]*\w)?")
_INNER_NAME = re.compile(r"(?<=[\w,;:)] )[A-Z][\w]*")


@dataclass(frozen=True)
class TeacherUnit:
    """One text the teacher is asked about.

    Attributes:
        path: the document's file name or a source file's relpath (POSIX).
        line: 1-based line the text starts on in that file.
        text: the text sent (at most `MAX_UNIT_CHARS` characters).
    """

    path: str
    line: int
    text: str

    @property
    def where(self) -> str:
        """`path:line`, as errors and listings name the unit."""
        return f"{self.path}:{self.line}"


def teacher_units(doc: Document, files: Sequence[FileRow]) -> list[TeacherUnit]:
    """The units of `doc` and its walked `files` (module rules), document first, then
    files in walk order. Unreadable, binary and too-large files give none."""
    from dlm.doc import ProseSection
    from dlm.rows.facts.files import PROSE_KINDS, source_kind, wanted_file
    from dlm.rows.read import display_relpath, read_file_text

    name = doc.path.name if doc.path else "document"
    units: list[TeacherUnit] = []
    for section in doc.sections:
        if isinstance(section, ProseSection):
            units += split_unit(name, section.line, section.text)
    for row in files:
        relpath, _ = display_relpath(row.relpath)
        if source_kind(relpath) not in PROSE_KINDS or not wanted_file(relpath):
            continue
        got = read_file_text(row, row.max_bytes)
        if not isinstance(got, str):  # a str is a skip reason
            units += split_unit(relpath, 1, got.text)
    return units


def split_unit(path: str, first_line: int, text: str) -> list[TeacherUnit]:
    """`text` (starting on `first_line` of `path`) as units of at most `MAX_UNIT_CHARS`
    characters, cut at the last blank line that fits (a longer line: at the limit);
    blank-only text gives none."""
    pieces = [
        (i, line[k : k + MAX_UNIT_CHARS])
        for i, line in enumerate(text.split("\n"))
        for k in range(0, max(len(line), 1), MAX_UNIT_CHARS)
    ]
    units: list[TeacherUnit] = []
    chunk: list[tuple[int, str]] = []  # (line index in text, line) of the open unit
    size = 0
    for i, piece in pieces:
        if chunk and size + len(piece) + 1 > MAX_UNIT_CHARS:
            cut = next((j for j in range(len(chunk) - 1, 0, -1) if not chunk[j][1].strip()), len(chunk))
            units += _unit(path, first_line, chunk[:cut])
            chunk = chunk[cut:]
            size = sum(len(x) + 1 for _, x in chunk)
            if chunk and size + len(piece) + 1 > MAX_UNIT_CHARS:
                units += _unit(path, first_line, chunk)
                chunk, size = [], 0
        chunk.append((i, piece))
        size += len(piece) + 1
    return units + _unit(path, first_line, chunk)


def _unit(path: str, first_line: int, chunk: list[tuple[int, str]]) -> list[TeacherUnit]:
    """The unit of `chunk` without its leading blank lines, named by its first line."""
    lead = next((j for j, (_, x) in enumerate(chunk) if x.strip()), None)
    if lead is None:
        return []
    text = "\n".join(x for _, x in chunk[lead:]).rstrip()
    return [TeacherUnit(path, first_line + chunk[lead][0], text)]


def messages(config: TeacherConfig, unit: TeacherUnit) -> list[dict[str, str]]:
    """The chat messages asking for `config.pairs` pairs about `unit` (OpenAI format)."""
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": USER.format(pairs=config.pairs, text=unit.text)},
    ]


def reply_key(config: TeacherConfig, unit: TeacherUnit) -> str:
    """`sha256:<hex>` naming every input of the reply to `unit` (module docstring)."""
    return canonical_sha256(
        {
            "prompt": PROMPT_VERSION,
            "model": config.model,
            "text": unit.text,
            "pairs": config.pairs,
            "temperature": config.temperature,
            "max_tokens": config.max_tokens,
        }
    )


def parse_reply(reply: str) -> list[Pair]:
    """The Q/A pairs of a teacher's reply, in order (module rules); malformed parts are skipped."""
    pairs: list[Pair] = []
    seen: set[str] = set()
    question: list[str] | None = None
    answer: list[str] | None = None

    def close() -> None:
        if question is not None and answer is not None:
            q, a = _field(question), _field(answer)
            if q and a and len(q) <= MAX_QUESTION and len(a) <= MAX_ANSWER and q.casefold() not in seen:
                seen.add(q.casefold())
                pairs.append(Pair(q, a))

    for line in reply.split("\n"):
        match = _FIELD.match(line)
        if match and match.group(1) in ("Q", "Question"):
            close()
            question, answer = [line[match.end() :]], None
        elif match:
            if question is not None and answer is None:
                answer = [line[match.end() :]]
            else:  # an answer with no open question
                close()
                question, answer = None, None
        elif not line.strip():
            if answer is not None:
                close()
                question, answer = None, None
        elif answer is not None:
            answer.append(line)
        elif question is not None:
            question.append(line)
    close()
    return pairs


def _field(lines: list[str]) -> str:
    text = " ".join(" ".join(lines).split()).strip("* ")
    return _NUMBERING.sub("", text)


def salient_tokens(text: str) -> frozenset[str]:
    """The tokens of `text` an answer must share one of to be grounded (module rules)."""
    tokens = set()
    for token in _TOKEN.findall(text):
        if token.casefold() in WEAK_KEYS:
            continue
        if any(c.isdigit() for c in token) and len(token) >= 2 and not token.isalpha():
            tokens.add(token)
        elif any(c in "_./-" for c in token) or any(c.isupper() for c in token[1:]):
            tokens.add(token)
    tokens.update(n for n in _INNER_NAME.findall(text) if len(n) >= 2 and n.casefold() not in WEAK_KEYS)
    return frozenset(tokens)


def grounded(answer: str, salient: frozenset[str]) -> bool:
    """Whether `answer` holds one of `salient` (`salient_tokens` of the unit) with no
    letter, digit or `_` either side: a whole token, or a part of a longer path or
    name (`/var/lib/ferry` in `/var/lib/ferry/journal`), never a part of a word."""
    return any(re.search(rf"(?<!\w){re.escape(token)}(?!\w)", answer) for token in salient if token in answer)


def kept_pairs(unit: TeacherUnit, reply: str, pairs: int) -> list[Pair]:
    """The first `pairs` grounded pairs of `reply` to `unit` (module rules)."""
    salient = salient_tokens(unit.text)
    return [p for p in parse_reply(reply) if grounded(p.answer, salient)][:pairs]
