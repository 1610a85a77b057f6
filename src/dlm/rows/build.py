"""Build the rows of one run from a document: the input of the tokenize seam.

- each prose section -> one `TextRow(kind="prose")` (continued pretraining);
- each `::probe::` pair -> one `Probe`, scored after training and never a row;
- each `### Q` / `### A` pair of an instruction section -> one `TextRow(kind="instruction")`, rendered with the
  base model's chat template: `[system?, user: question, assistant: answer]`, where
  system is the document's `system_prompt` when set (otherwise the template's own
  default applies). `prompt_text` is the same conversation without the answer, with
  the generation prompt, so the prompt can be masked from the loss;
- each file taken from `training.sources` -> one `FileRow` (read later, by the
  tokenizer, so a cache can skip unchanged files);
- with `training.synth.enabled`, each phrasing of each fact drawn from the sources
  (code, prose, config: `dlm.rows.facts`) and from the document's own prose sections
  and answers (`document_facts`) -> one `TextRow(kind="instruction")` rendered as a
  Q/A pair, origin `relpath:line (synth)` (a document fact: `<doc name>:line
  (synth)`), after the document's own rows (kind `synth`; a phrasing two facts share,
  such as a sentence's subject asked about, once); the facts held out by `probe_share` ->
  `BuiltRows.probes`, never rows;
- with `training.synth.teacher`, each kept pair of each remembered teacher reply
  (`dlm.rows.teacher`, `dlm.rows.teacherstore`) -> one `TextRow(kind="synth")`,
  origin `path:line (teacher)`, after the synth rows. Only remembered replies are read
  (no request is made here); a unit not asked yet gives no rows and one note;
- each replay pair (a general question and the base model's own answer,
  `dlm.rows.replay`) -> one `TextRow(kind="replay")` rendered as a Q/A pair, last.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm.chat import with_system_prompt
from dlm.doc.checks import pair_notes
from dlm.errors import BaseModelError, TrainingError
from dlm.rows.facts.files import by_source
from dlm.rows.recast import recast_pairs, topic_of
from dlm.rows.types import FileRow, Probe, RowKind, RowSet, TextRow
from dlm.rows.walk import WalkResult, directive_root, walk_sources

if TYPE_CHECKING:
    from dlm.doc import Document
    from dlm.doc.schema import SynthConfig
    from dlm.rows.facts.model import Fact
    from dlm.rows.synth import SynthSet

SYNTH_ORIGIN = "{path}:{line} (synth)"


@dataclass(frozen=True)
class BuiltRows:
    """Rows of a run and the source walk that produced its file rows."""

    rows: RowSet
    walk: WalkResult
    probes: tuple[Probe, ...] = ()  # never trained on: scored by `dlm eval`
    synth_pairs: int = 0  # the `training.synth` training pairs among `rows`' text rows
    # `dlm.rows.facts.files.by_source` of the synth pairs and probes: {"python": {"pairs", "probes"}, ...}
    synth_by_source: dict[str, dict[str, int]] = field(default_factory=dict)
    teacher_pairs: int = 0  # the teacher's pairs among `rows`' text rows


def instruction_messages(system_prompt: str | None, question: str, answer: str | None) -> list[dict]:
    """OpenAI-style messages for one pair; `answer=None` leaves the assistant turn out."""
    messages = [{"role": "user", "content": question}]
    if answer is not None:
        messages.append({"role": "assistant", "content": answer})
    return with_system_prompt(messages, system_prompt)


def render_instruction(tokenizer: Any, system_prompt: str | None, question: str, answer: str) -> tuple[str, str]:
    """(full conversation text, prompt text with generation prompt), both via the chat template.

    Raises:
        TrainingError: the tokenizer has no chat template.
    """
    if not getattr(tokenizer, "chat_template", None):
        raise TrainingError(
            "the base model's tokenizer has no chat template, so ::instruction:: sections cannot "
            "be rendered; use a chat/instruct base model or turn the pairs into prose"
        )
    full = tokenizer.apply_chat_template(instruction_messages(system_prompt, question, answer), tokenize=False)
    prompt = tokenizer.apply_chat_template(
        instruction_messages(system_prompt, question, None), tokenize=False, add_generation_prompt=True
    )
    return full, prompt


def pair_row(
    tokenizer: Any, system_prompt: str | None, kind: RowKind, question: str, answer: str, origin: str
) -> TextRow:
    """One Q/A pair as a row of `kind` (`instruction`, `synth` or `replay`), rendered by
    `render_instruction`, its prompt kept so the loss can skip it.

    Raises:
        TrainingError: the tokenizer has no chat template.
    """
    full, prompt = render_instruction(tokenizer, system_prompt, question, answer)
    return TextRow(kind=kind, text=full, prompt_text=prompt, origin=origin)


def check_inputs(doc: Document) -> None:
    """Check every document-level input a run needs, before any model work (seconds to
    minutes on a fresh home: an alias is converted on first use): each
    `training.sources` root exists and is a folder and its patterns are valid; the
    `base_model` names an alias, a local folder with `config.json` or a hub id (offline:
    one in the local cache). Loads, converts, downloads and walks nothing. Messages
    start with `path:line:col` of the value at fault.

    Raises:
        SourceError: a source root or pattern (`dlm.rows.walk.directive_root`).
        BaseModelError: the base model spec (`dlm.models.check_base_model`).
    """
    from dlm.doc import field_where
    from dlm.models import check_base_model

    base_dir = doc.path.parent if doc.path else Path.cwd()
    for i, directive in enumerate(doc.frontmatter.training.sources):
        directive_root(
            directive, base_dir, f"{field_where(doc, 'training', 'sources', i, 'path')}: training.sources[{i}]"
        )
    try:
        check_base_model(doc.frontmatter.base_model, relative_to=doc.path.parent if doc.path else None)
    except BaseModelError as exc:
        raise BaseModelError(f"{field_where(doc, 'base_model')}: {exc}") from None


def build_rows(
    doc: Document, tokenizer: Any, *, strict: bool = False, replay: Sequence[tuple[str, str, str]] = ()
) -> BuiltRows:
    """All rows of `doc` (a `dlm.doc.Document`), in training order.

    Args:
        replay: `(origin, question, answer)` general pairs answered by the base model
            (`dlm.rows.replay.replay_pairs`), rendered with the document's system
            prompt as rows of kind `replay`, after the document's own rows.

    Raises:
        SourceError: a `training.sources` directive cannot be walked (see `dlm.rows.walk`).
    """
    from dlm.doc import InstructionSection, ProbeSection, ProseSection

    fm = doc.frontmatter
    name = str(doc.path) if doc.path else "<doc>"
    text_rows: list[TextRow] = []
    probes: list[Probe] = []
    first_topic = next(
        (t for s in doc.sections if isinstance(s, ProseSection) for t in [topic_of(s.text)] if t), "this project"
    )
    for section in doc.sections:
        if isinstance(section, ProseSection):
            text_rows.append(TextRow(kind="prose", text=section.text, origin=f"{name}:{section.line}"))
            if fm.training.recast:
                text_rows += [
                    pair_row(tokenizer, fm.system_prompt, "instruction", q, a, f"{name}:{section.line} (recast)")
                    for q, a in recast_pairs(section.text, topic_of(section.text) or first_topic)
                ]
        elif isinstance(section, InstructionSection):
            text_rows += [
                pair_row(tokenizer, fm.system_prompt, "instruction", p.question, p.answer, f"{name}:{p.line}")
                for p in section.pairs
            ]
        elif isinstance(section, ProbeSection):
            probes.extend(Probe(p.question, p.answer, p.keys, f"{name}:{p.line}") for p in section.pairs)
    base_dir = doc.path.parent if doc.path else Path.cwd()
    walk = walk_sources(fm.training.sources, base_dir, strict=strict, doc_name=name)
    walk.notes.extend(pair_notes(doc))  # printed with the walk's own notes
    drawn = drawn_synth(fm.training.synth, walk.files, document_facts(doc, walk.notes))
    if drawn is not None:
        walk.notes.extend(drawn.notes)  # printed with the walk's own notes
        seen: set[str] = set()
        for fact, qa in drawn.train:
            origin = SYNTH_ORIGIN.format(path=fact.path, line=fact.line)
            row = pair_row(tokenizer, fm.system_prompt, "synth", qa.question, qa.answer, origin)
            if row.text not in seen:  # facts of one sentence share its subject's phrasing: trained once
                seen.add(row.text)
                text_rows.append(row)
        probes.extend(
            Probe(qa.question, qa.answer, keys, SYNTH_ORIGIN.format(path=fact.path, line=fact.line))
            for fact, qa, keys in drawn.probes
        )
    teacher = teacher_rows(doc, walk.files, tokenizer)
    text_rows += teacher.rows
    walk.notes.extend(teacher.notes)
    text_rows += [pair_row(tokenizer, fm.system_prompt, "replay", q, a, origin) for origin, q, a in replay]
    return BuiltRows(
        rows=RowSet(text_rows=text_rows, file_rows=walk.files),
        walk=walk,
        probes=tuple(probes),
        synth_pairs=len(drawn.train) if drawn is not None else 0,
        synth_by_source=synth_by_source(drawn),
        teacher_pairs=len(teacher.rows),
    )


@dataclass(frozen=True)
class TeacherRows:
    """The teacher's instruction rows of a document, and one note when units are unasked."""

    rows: list[TextRow]
    notes: list[str]


def teacher_rows(doc: Document, files: Sequence[FileRow], tokenizer: Any) -> TeacherRows:
    """The rows of the teacher's remembered pairs (module docstring); none without
    `training.synth.teacher`. Reads remembered replies only, never the network."""
    from dlm.rows.teacher import TEACHER_ORIGIN
    from dlm.rows.teacherstore import document_units, teacher_entries

    config = doc.frontmatter.training.synth.teacher
    if config is None:
        return TeacherRows([], [])
    entries = teacher_entries(config, document_units(doc, files))
    system_prompt = doc.frontmatter.system_prompt
    rows = [
        pair_row(tokenizer, system_prompt, "synth", p.question, p.answer, TEACHER_ORIGIN.format(where=e.unit.where))
        for e in entries
        for p in e.pairs
    ]
    return TeacherRows(rows, teacher_notes(doc, [e.unit.where for e in entries if e.reply is None]))


def teacher_notes(doc: Document, unasked: Sequence[str]) -> list[str]:
    """One line when `unasked` units (`file:line`) have no remembered reply yet."""
    if not unasked:
        return []
    name = doc.path.name if doc.path else "DOC"
    return [
        f"training.synth.teacher: {len(unasked)} section(s) not asked yet (first {unasked[0]}), "
        f"so they give no pairs; `dlm synth {name} --fetch` or `dlm train` asks them"
    ]


def document_facts(doc: Document, notes: list[str] | None = None) -> list[Fact]:
    """The `statement` facts of the document's own prose sections and instruction
    answers (`dlm.rows.facts.prose`), named by the document's file name and its lines.
    Probe sections give none: their answers are never trained on. None either when the
    prose and answers together do not read as English (`dlm.rows.facts.language`);
    then one line saying so goes to `notes`, unless `training.synth` is off (nothing
    would be asked of the prose either way)."""
    from dlm.doc import InstructionSection, ProseSection
    from dlm.rows.facts.language import reads_english
    from dlm.rows.facts.prose import prose_facts

    name = doc.path.name if doc.path else "document"
    said = [s.text for s in doc.sections if isinstance(s, ProseSection)]
    said += [p.answer for s in doc.sections if isinstance(s, InstructionSection) for p in s.pairs]
    if reads_english("\n\n".join(said)) is False:
        if notes is not None and doc.frontmatter.training.synth.enabled is not False:
            notes.append(
                f"{name}: its prose is not English, and training.synth's statement rules read English, so it asks "
                "nothing of the prose; ::instruction:: pairs, or training.synth.teacher, teach it"
            )
        return []
    facts: list[Fact] = []
    for section in doc.sections:
        if isinstance(section, ProseSection):
            facts += prose_facts(name, section.text, section.line)
        elif isinstance(section, InstructionSection):
            for pair in section.pairs:
                facts += prose_facts(name, pair.answer, pair.line)
    return facts


@dataclass(frozen=True)
class AutoSynth:
    """What `training.synth.enabled: auto` draws, and when.

    The Q/A pairs a document asks about are learned from the pairs themselves; a fact
    that sits only in prose, a README, a config file or the code is not, unless it is
    stated as pairs too, in several phrasings (Allen-Zhu & Li, "Physics of Language
    Models 3.1": a fact seen in one phrasing is rarely extractable by a question, in
    several it is). So `auto` draws the facts a user asks about and an offline rule
    states well: statements of the document's prose and the sources' Markdown and
    text (`statement`), config values (`setting`) and constants' values (`value`),
    `phrasings` each, none held out (the document's own probes judge). Where each
    public name is defined (`where`) doubles the pairs of a codebase and the
    document's pairs usually ask it already; a docstring's first sentence and a
    signature are long answers, asked less; all three are left to `enabled: true`
    (docs/benchmarks.md, "Learning benchmark"). Every fact
    costs steps, so the code of a tree of more than `max_files` code files is not read
    for facts (its prose and config files are: `auto_files`), and
    beyond `max_facts` facts the document's own are kept first, then a hash-chosen
    sample of the sources' up to that many.
    """

    max_files: int = 64
    max_facts: int = 48
    kinds: tuple[str, ...] = ("value", "statement", "setting")


AUTO_SYNTH = AutoSynth()


def drawn_synth(config: SynthConfig, files: Sequence[FileRow], document: Sequence[Fact] = ()) -> SynthSet | None:
    """The synth pairs and probes a run trains on and scores, or None when it draws none:
    `enabled: false`, or nothing to state. Under `auto`, of a tree past
    `AUTO_SYNTH.max_files` only the prose and config files are read (`auto_files`).

    Args:
        files: the walk's file rows (those a reader takes are read: `dlm.rows.facts.files`).
        document: the document's own facts (`document_facts`).
    """
    if config.enabled is True:
        return synth_set(config, files, document=document)
    if config.enabled is False:
        return None
    auto = config.model_copy(
        update={"kinds": list(AUTO_SYNTH.kinds), "probe_share": 0.0, "max_facts": AUTO_SYNTH.max_facts}
    )
    read, note = auto_files(files)
    drawn = synth_set(auto, read, document=document)
    if note:
        drawn = replace(drawn, notes=(*drawn.notes, note))
    return drawn if drawn.train else None


def auto_files(files: Sequence[FileRow]) -> tuple[list[FileRow], str | None]:
    """The files `enabled: auto` reads for facts, and a line saying what it leaves unread.

    A tree of at most `AUTO_SYNTH.max_files` code files that a reader takes (tests and
    vendored code are not counted: `dlm.rows.facts.files.wanted_file`) is read whole.
    Past it the code is not parsed; the Markdown, text and config files are read when
    they too are at most that many, else none is.
    """
    from dlm.rows.facts.files import CODE_KINDS, CONFIG_KINDS, PROSE_KINDS, source_kind, wanted_file

    bound = AUTO_SYNTH.max_files
    code = sum(source_kind(f.relpath) in CODE_KINDS and wanted_file(f.relpath) for f in files)
    if code <= bound:
        return list(files), None
    said = [f for f in files if source_kind(f.relpath) in PROSE_KINDS | CONFIG_KINDS and wanted_file(f.relpath)]
    head = (
        f"training.synth: the sources hold {code} code files, over auto's {bound}, so their code is not read for facts"
    )
    if len(said) > bound:
        return [], f"{head}, nor are their {len(said)} Markdown, text and config files; `enabled: true` reads them all"
    return said, f"{head}, only their Markdown, text and config files and the document; `enabled: true` reads it all"


def synth_by_source(drawn: SynthSet | None) -> dict[str, dict[str, int]]:
    """`drawn`'s training pairs and probes per source kind (`dlm.rows.facts.files.by_source`);
    `{}` when synth draws nothing."""
    if drawn is None:
        return {}
    return by_source([f for f, _ in drawn.train], [f for f, _, _ in drawn.probes])


def synth_set(
    config: SynthConfig, files: Sequence[FileRow], remember: bool = True, document: Sequence[Fact] = ()
) -> SynthSet:
    """The pairs and probes `config` draws from the files among `files` a reader takes
    and from the document's own facts (`dlm.rows.synth`, `dlm.rows.facts`); `remember`:
    use the facts memo (`dlm.rows.synthmemo`)."""
    from dlm.rows.synth import synthesize
    from dlm.rows.synthmemo import FactMemo, source_facts

    notes: list[str] = []
    facts = source_facts(files, FactMemo.default() if remember else None, notes)
    drawn = synthesize(
        [*document, *facts],
        kinds=config.kinds,
        phrasings=config.phrasings,
        probe_share=config.probe_share,
        max_facts=config.max_facts,
        preferred=document,
    )
    return replace(drawn, notes=tuple(notes))
