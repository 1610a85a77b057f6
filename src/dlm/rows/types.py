"""The row types the tokenize seam takes, and what it encodes per row.

`RowSet` holds a run's rows in training order: in-body `TextRow`s, then unread
`FileRow`s from `training.sources` (read later, so a cache can skip unchanged files).
`RowSpec` is one row ready to encode (`dlm.tokenize.encode` has the token rules).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

RowKind = Literal["prose", "instruction", "source", "synth", "replay"]
# kinds rendered as a conversation whose prompt carries no loss
PAIR_KINDS: tuple[RowKind, ...] = ("instruction", "synth", "replay")


@dataclass(frozen=True)
class TextRow:
    """A row whose text is known: a prose section or one Q/A pair of an instruction section.

    Attributes:
        kind: "prose", "instruction", "synth" (a pair drawn from the document and its
            sources by `training.synth` or its teacher) or "replay" (a general question
            with the base model's own answer, `dlm.rows.replay`); the last two are
            rendered and masked as an instruction pair.
        text: the row text (instruction, replay: the full rendered conversation).
        prompt_text: instruction and replay only: the rendered prompt with the generation prompt.
        origin: where it came from, `path:line` of the section.
    """

    kind: RowKind
    text: str
    origin: str
    prompt_text: str | None = None


class FileRow(NamedTuple):
    """A file taken from a `training.sources` directive, not yet read.

    A NamedTuple rather than a frozen dataclass: it is built once per file on every
    walk, and tuple construction is several times cheaper at 50K+ files.

    The stat fields let a cache decide "unchanged" without reading the file.

    Attributes:
        source_index: index of the directive in `training.sources`.
        path: absolute path of the file, `<root>/<relpath>` (a str: building a
            `pathlib.Path` per file is a measurable share of a 50K-file walk).
        relpath: POSIX path relative to the directive's root (named in the row text).
        size: bytes; mtime_ns, ctime_ns, ino: from `os.stat`.
        max_bytes: the directive's `max_bytes_per_file`, checked again when the file
            is read (it may have grown since the walk); None: no cap.
    """

    source_index: int
    path: str
    relpath: str
    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    max_bytes: int | None = None


@dataclass(frozen=True)
class RowSet:
    """Everything to tokenize for one run, in training order: text rows, then file rows."""

    text_rows: Sequence[TextRow]
    file_rows: Sequence[FileRow]


@dataclass(frozen=True)
class Probe:
    """A question the adapter is scored on and never trained on.

    From a `::probe::` section of the document, or drawn from the sources by
    `training.synth` and held out of training by a hash of the question.

    Attributes:
        question: the user turn, as asked.
        answer: the reference answer (its log-likelihood per token is the continuous score).
        keys: strings a correct greedy answer must contain (empty: the documented
            match rule of `dlm.judge` applies).
        origin: where it came from (`path:line`, or `path:line (synth)`).
    """

    question: str
    answer: str
    keys: tuple[str, ...] = ()
    origin: str = ""


@dataclass(frozen=True)
class RowSpec:
    """What to encode for one row. `prompt_text` is set for instruction rows only."""

    kind: RowKind
    text: str
    prompt_text: str | None = None
