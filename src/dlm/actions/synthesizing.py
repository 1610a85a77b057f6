"""`dlm synth`: the Q/A pairs a document's `training.synth` draws (offline) and its
teacher wrote (`training.synth.teacher`), per source unit, for review; with
`fetch`, the teacher is first asked for what it has not answered yet.

The view holds no rendering; `--json` prints it as it is (its fields are the JSON
contract).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from dlm.actions.common import DocPath, doc_dir
from dlm.doc import load_document
from dlm.rows.build import document_facts, drawn_synth
from dlm.rows.teacher import TeacherUnit
from dlm.rows.teacherstore import document_units, fill_teacher_cache, teacher_entries
from dlm.rows.walk import walk_sources


@dataclass(frozen=True)
class QA:
    """One pair as it trains (or, for a probe, as it is scored)."""

    question: str
    answer: str


@dataclass(frozen=True)
class TeacherUnitView:
    """One unit asked of the teacher: `where` (`file:line`), `status` (`cached`: its
    reply is remembered; `missing`: not asked yet), the kept `pairs`, and `dropped`
    pairs of its reply (ungrounded or past `pairs`)."""

    where: str
    status: Literal["cached", "missing"]
    pairs: list[QA]
    dropped: int


@dataclass(frozen=True)
class TeacherView:
    """The teacher's side: its `url` and `model`, `asked` requests this call sent
    (`fetch`), and each unit."""

    url: str
    model: str
    asked: int
    units: list[TeacherUnitView]


@dataclass(frozen=True)
class SynthUnitView:
    """The offline pairs drawn from one place (`file:line`): training pairs and probes."""

    where: str
    pairs: list[QA] = field(default_factory=list)
    probes: list[QA] = field(default_factory=list)


@dataclass(frozen=True)
class SynthListing:
    """What `dlm synth` shows: `synth` (empty when `training.synth` draws nothing) and
    `teacher` (None without `training.synth.teacher`), and the walk's notes."""

    document: str
    synth: list[SynthUnitView]
    teacher: TeacherView | None
    notes: list[str]


def synth_listing(
    path: DocPath, *, fetch: bool = False, on_ask: Callable[[TeacherUnit], None] | None = None
) -> SynthListing:
    """The pairs of the document at `path` per unit; with `fetch`, ask the teacher for
    every unit it has not answered first (`dlm.rows.teacherstore.fill_teacher_cache`,
    `on_ask` called before each request). Without `fetch` no request is made.

    Raises:
        DocError: the document cannot be parsed. SourceError: a source directive cannot
            be walked. TeacherError: with `fetch`, the teacher cannot be asked.
    """
    doc = load_document(Path(path))
    fm = doc.frontmatter
    walk = walk_sources(fm.training.sources, doc_dir(doc) or Path.cwd(), doc_name=str(doc.path))
    drawn = drawn_synth(fm.training.synth, walk.files, document_facts(doc, walk.notes))
    synth: dict[str, SynthUnitView] = {}
    if drawn is not None:
        for fact, qa in drawn.train:
            where = f"{fact.path}:{fact.line}"
            synth.setdefault(where, SynthUnitView(where)).pairs.append(QA(qa.question, qa.answer))
        for fact, qa, _ in drawn.probes:
            where = f"{fact.path}:{fact.line}"
            synth.setdefault(where, SynthUnitView(where)).probes.append(QA(qa.question, qa.answer))
    teacher = None
    config = fm.training.synth.teacher
    if config is not None:
        asked = fill_teacher_cache(doc, walk.files, on_ask=on_ask).asked if fetch else 0
        units = [
            TeacherUnitView(
                e.unit.where,
                "missing" if e.reply is None else "cached",
                [QA(p.question, p.answer) for p in e.pairs],
                e.dropped,
            )
            for e in teacher_entries(config, document_units(doc, walk.files))
        ]
        teacher = TeacherView(config.url, config.model, asked, units)
    notes = [*walk.notes, *(drawn.notes if drawn is not None else ())]
    return SynthListing(str(doc.path), list(synth.values()), teacher, notes)
